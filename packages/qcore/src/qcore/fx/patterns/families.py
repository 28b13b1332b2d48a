"""Op families: the groups of pattern configs torch's FX backends share.

Each function returns the rows of one family for the dtype configs a backend gives it,
so a backend is a list of family calls plus its own fusion rows. Where a family keeps an
irregularity of torch's own tables it is kept on purpose (identical configs quantize
identically) and commented.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import torch
import torch.ao.nn.intrinsic as nni
import torch.ao.nn.intrinsic.qat as nniqat
import torch.ao.nn.qat as nnqat
import torch.ao.nn.quantized.reference as nnqr
import torch.nn.functional as F
from torch import nn
from torch.ao.quantization.backend_config import (
    BackendPatternConfig,
    DTypeConfig,
    DTypeWithConstraints,
    ObservationType,
)

from qcore.fx.patterns.ops import (
    BINARY_OP_OBSERVATION,
    DEFAULT_OPS,
    FIXED_QPARAMS_OPS,
    NORM_FUNCTIONALS,
    RELU_FORMS,
)
from qcore.fx.patterns.rows import WEIGHT_1_BIAS_2, ModuleType, Op, describe, pattern_config, rows
from qcore.fx.patterns.shapes import chain, fusion

Configs = list[BackendPatternConfig]
_SHARED = ObservationType.OUTPUT_SHARE_OBSERVER_WITH_INPUT


def qat_pair(
    module: ModuleType,
    qat: ModuleType,
    dtype_configs: Sequence[DTypeConfig],
    *,
    root: ModuleType,
    reference: ModuleType,
    float_has_root: bool = True,
) -> Configs:
    """A float module that ``prepare_qat_fx`` swaps for ``qat``, and that QAT module.

    Both convert to ``reference`` around ``root``. ``float_has_root=False`` leaves root
    and reference off the float row (torch does so for fused conv modules, whose QAT
    twin always replaces them before convert).
    """
    return [
        pattern_config(
            module,
            dtype_configs,
            qat=qat,
            root=root if float_has_root else None,
            reference=reference if float_has_root else None,
        ),
        pattern_config(qat, dtype_configs, root=root, reference=reference),
    ]


@dataclass(frozen=True)
class ConvKinds:
    """The module and function names of one conv dimensionality, from torch's naming."""

    dim: int

    def __getattr__(self, role: str) -> type[nn.Module]:
        d = self.dim
        names = {
            "conv": (nn, f"Conv{d}d"), "transpose": (nn, f"ConvTranspose{d}d"),
            "bn": (nn, f"BatchNorm{d}d"), "reference": (nnqr, f"Conv{d}d"),
            "transpose_reference": (nnqr, f"ConvTranspose{d}d"),
            "relu": (nni, f"ConvReLU{d}d"), "bn_fused": (nni, f"ConvBn{d}d"),
            "bn_relu": (nni, f"ConvBnReLU{d}d"), "qat": (nnqat, f"Conv{d}d"),
            "relu_qat": (nniqat, f"ConvReLU{d}d"), "bn_qat": (nniqat, f"ConvBn{d}d"),
            "bn_relu_qat": (nniqat, f"ConvBnReLU{d}d"),
        }  # fmt: skip
        if role not in names:
            raise AttributeError(role)
        module, name = names[role]
        cls: type[nn.Module] = getattr(module, name)
        return cls


def conv_configs(
    dtype_configs: Sequence[DTypeConfig], *, dims: Iterable[int] = (1, 2, 3), transpose: bool = True
) -> Configs:
    """Conv modules and functionals, their relu / bn / bn-relu fusions and QAT modules;
    with ``transpose``, ConvTranspose and its bn folding too."""
    dt = dtype_configs
    out: Configs = []
    for k in map(ConvKinds, dims):
        func = getattr(F, f"conv{k.dim}d")
        out += qat_pair(k.conv, k.qat, dt, root=k.conv, reference=k.reference)
        out.append(pattern_config(func, dt, input_type_to_index=WEIGHT_1_BIAS_2))
        out += [fusion(chain(k.conv, act), dt, into=k.relu) for act in (nn.ReLU, F.relu)]
        out += qat_pair(k.relu, k.relu_qat, dt, root=k.conv, reference=k.reference,
                        float_has_root=False)
        out += [pattern_config((func, act), dt) for act in (nn.ReLU, F.relu)]
        out.append(fusion(chain(k.conv, bn=k.bn), dt, qat_into=k.bn_fused))
        out.append(fusion(chain(k.conv, nn.ReLU, bn=k.bn), dt, into=k.relu, qat_into=k.bn_relu))
        # torch sets root_module on the functional-relu variant only; kept for parity
        out.append(fusion(chain(k.conv, F.relu, bn=k.bn), dt, into=k.relu, qat_into=k.bn_relu,
                          root=k.conv))
        out.append(pattern_config(k.bn_fused, dt, qat=k.bn_qat))
        out.append(pattern_config(k.bn_relu, dt, qat=k.bn_relu_qat))
        out += [pattern_config(m, dt, root=k.conv, reference=k.reference)
                for m in (k.bn_qat, k.bn_relu_qat)]
        if transpose:
            t, t_ref = k.transpose, k.transpose_reference
            out.append(pattern_config(t, dt, root=t, reference=t_ref))
            out.append(fusion(chain(t, bn=k.bn), dt, root=t, reference=t_ref))
            func_t = getattr(F, f"conv_transpose{k.dim}d")
            out.append(pattern_config(func_t, dt, input_type_to_index=WEIGHT_1_BIAS_2))
    return out


def linear_configs(dtype_configs: Sequence[DTypeConfig], *, fusions: bool = True) -> Configs:
    """Linear module, QAT module and functional; with ``fusions``, relu and bn1d too."""
    dt = dtype_configs
    ref = nnqr.Linear
    out = qat_pair(nn.Linear, nnqat.Linear, dt, root=nn.Linear, reference=ref)
    out.append(pattern_config(F.linear, dt, input_type_to_index=WEIGHT_1_BIAS_2))
    if not fusions:
        return out
    out += [fusion(chain(nn.Linear, act), dt, into=nni.LinearReLU) for act in (nn.ReLU, F.relu)]
    out += qat_pair(nni.LinearReLU, nniqat.LinearReLU, dt, root=nn.Linear, reference=ref)
    out += [pattern_config((F.linear, act), dt) for act in (nn.ReLU, F.relu)]
    out.append(fusion(chain(nn.Linear, bn=nn.BatchNorm1d), dt, qat_into=nni.LinearBn1d))
    out += qat_pair(nni.LinearBn1d, nniqat.LinearBn1d, dt, root=nn.Linear, reference=ref)
    return out


def eltwise_fusion_configs(
    root: ModuleType,
    root_fn: Op,
    post: Op,
    post_fn: Op,
    dtype_configs: Sequence[DTypeConfig],
    *,
    into: ModuleType,
    reference: ModuleType,
) -> Configs:
    """A weighted module fused with an elementwise op, in module and functional forms:
    ``root -> post`` fuse ``into`` one module that converts to ``reference``; the
    functional forms are quantized as one unit without fusing."""
    dt = dtype_configs
    out = [fusion(chain(root, act), dt, into=into) for act in (post, post_fn)]
    out.append(pattern_config(into, dt, root=root, reference=reference))
    out += [pattern_config((root_fn, act), dt) for act in (post, post_fn)]
    return out


def binary_op_configs(
    ops: Iterable[Op],
    dtype_configs: Sequence[DTypeConfig],
    *,
    activations: Iterable[Op] = RELU_FORMS,
) -> Configs:
    """Binary ops alone and followed by each activation; observation depends on how many
    tensor arguments the call has (:data:`~qcore.fx.patterns.BINARY_OP_OBSERVATION`)."""
    acts = tuple(activations)
    patterns = [p for op in ops for p in (*((op, a) for a in acts), op)]
    return rows(patterns, dtype_configs, num_tensor_args=BINARY_OP_OBSERVATION)


def share_qparams_configs(ops: Iterable[Op], dtype_configs: Sequence[DTypeConfig]) -> Configs:
    """Ops whose output shares the input's observer (pooling, reshapes, clamps)."""
    return rows(ops, dtype_configs, observation=_SHARED)


def cat_configs(
    dtype_configs: Sequence[DTypeConfig], ops: Iterable[Op] = (torch.cat,)
) -> Configs:
    """Concatenation: every input and the output share one observer, so the quantized
    kernel can copy values without requantizing."""
    return share_qparams_configs(ops, dtype_configs)


def default_op_configs(
    dtype_configs: Sequence[DTypeConfig],
    ops: Iterable[Op] = DEFAULT_OPS,
    functionals: Mapping[Op, Mapping[str, int]] = NORM_FUNCTIONALS,
) -> Configs:
    """Ops with their own output observer; ``functionals`` also say where weight and
    bias sit so those stay unobserved."""
    out = rows(ops, dtype_configs)
    out += [pattern_config(f, dtype_configs, input_type_to_index=index)
            for f, index in functionals.items()]
    return out


def with_fixed_qparams(
    dtype_configs: Sequence[DTypeConfig], fixed: DTypeWithConstraints
) -> list[DTypeConfig]:
    """Copies of ``dtype_configs`` whose activations of ``fixed.dtype`` take its exact
    qparams. A scale range on such an activation contradicts fixed qparams: ValueError."""
    out = []
    for index, original in enumerate(dtype_configs):
        config = copy.deepcopy(original)
        for field in ("input", "output"):
            spec = getattr(config, f"{field}_dtype_with_constraints")
            if spec.dtype != fixed.dtype:
                continue
            if spec.scale_min_lower_bound is not None or spec.scale_max_upper_bound is not None:
                raise ValueError(
                    f"dtype_configs[{index}].{field}_dtype has a scale range, which fixed-qparams "
                    "ops cannot honour"
                )
            for attr in ("quant_min_lower_bound", "quant_max_upper_bound",
                         "scale_exact_match", "zero_point_exact_match"):
                setattr(spec, attr, getattr(fixed, attr))
        out.append(config)
    return out


def fixed_qparams_configs(
    dtype_configs: Sequence[DTypeConfig],
    ops: Mapping[Op, DTypeWithConstraints] = FIXED_QPARAMS_OPS,
) -> Configs:
    """Ops with a fixed output range (sigmoid, tanh): each gets its exact qparams."""
    out = []
    for op, fixed in ops.items():
        try:
            dtypes = with_fixed_qparams(dtype_configs, fixed)
        except ValueError as exc:
            raise ValueError(f"pattern {describe(op)}: {exc}") from exc
        out.append(pattern_config(op, dtypes))
    return out


def bn_configs(dtype_configs: Sequence[DTypeConfig], dims: Iterable[int] = (2, 3)) -> Configs:
    """Standalone batch norm and its fusion with relu (``BNReLU{2,3}d``)."""
    dt = dtype_configs
    out: Configs = []
    fused = []
    for d in dims:
        bn, bn_relu = getattr(nn, f"BatchNorm{d}d"), getattr(nni, f"BNReLU{d}d")
        out += [fusion(chain(bn, act), dt, into=bn_relu) for act in (nn.ReLU, F.relu)]
        out.append(pattern_config(bn, dt))
        fused.append(pattern_config(bn_relu, dt))
    return out + fused


def layer_norm_configs(dtype_configs: Sequence[DTypeConfig]) -> Configs:
    """LayerNorm module and functional (weight and bias at arguments 2 and 3)."""
    return [
        pattern_config(nn.LayerNorm, dtype_configs),
        pattern_config(F.layer_norm, dtype_configs, input_type_to_index={"weight": 2, "bias": 3}),
    ]


def rnn_configs(dtype_configs: Sequence[DTypeConfig]) -> Configs:
    """Recurrent modules and cells, each converting to its reference module."""
    names = ("GRUCell", "LSTMCell", "RNNCell", "LSTM", "GRU")
    return [
        pattern_config(getattr(nn, n), dtype_configs, root=getattr(nn, n),
                       reference=getattr(nnqr, n))
        for n in names
    ]


def embedding_configs(dtype_configs: Sequence[DTypeConfig], *, functional: bool = False) -> Configs:
    """Embedding and EmbeddingBag with their QAT modules; ``functional`` adds
    ``F.embedding`` (weight at argument 1)."""
    out: Configs = []
    for name in ("Embedding", "EmbeddingBag"):
        module = getattr(nn, name)
        out += qat_pair(module, getattr(nnqat, name), dtype_configs, root=module,
                        reference=getattr(nnqr, name))
        if functional and name == "Embedding":
            out.append(pattern_config(F.embedding, dtype_configs,
                                      input_type_to_index={"weight": 1}))
    return out
