"""The default QConfigMapping for the oneDNN backend: torch's, minus the ways it breaks.

``torch.ao.quantization.get_default_qconfig_mapping("onednn")`` (and its QAT twin) fail in
``prepare_fx`` on common models with this backend's own config. This mapping starts from
torch's and changes only what is needed for the flow to run:

1. **ConvTranspose stays in float.** torch's onednn qconfig observes weights per
   channel, and ``prepare_fx`` rejects that for ``ConvTranspose{1,2,3}d``
   (``AssertionError: Per channel weight observer is not supported yet for
   ConvTranspose{n}d``). The fix torch applies for x86/fbgemm, a per-tensor weight
   observer, runs but does not help here: torch 2.13's oneDNN int8 deconvolution
   miscomputes whenever ``in_channels != out_channels`` (about -2 dB SQNR against float,
   on the ``onednn`` and ``x86`` engines alike). So the transposed convs, modules and
   functionals, get ``None`` and run in float between their neighbours' quantized ops.

2. **Modules that the backend fuses share one qconfig per type.** The backend fuses
   ``Linear -> Tanh`` into ``LinearTanh``, but torch's mapping gives ``nn.Tanh`` a
   fixed-qparams qconfig, and ``prepare_fx`` requires every module *type* inside a fused
   module to carry the same object-type qconfig (``LookupError: During fusion, we need to
   specify the same qconfigs for all module types in LinearTanh``). For every fused
   pattern of the backend config whose member types disagree, the later members take the
   root type's qconfig. Because torch's check only compares object-type entries, the
   qconfig torch intended for each *standalone* instance is restored per instance with
   ``set_module_name`` when the model is known (``model=...``): a ``Tanh`` that is not
   fused keeps its fixed [-1, 1] quantization, exactly as under torch's mapping.
   Without the model there are no names to restore, so standalone instances of such a
   type fall back to the root's qconfig; for ``Tanh`` that qconfig cannot meet the
   fixed-qparams constraint, and torch leaves the op in float (correct, slightly slower).
   Pass the model when you have it.

3. **Weight ranges fit the target CPU.** On a CPU without VNNI (``qcore.host.target()``)
   oneDNN's int8 kernels add neighbouring products in saturating 16-bit lanes, and
   torch's full-range weights overflow them (torch only warns). There the weight
   observers come from :func:`qcore.int8.weight_ranges.fit_qconfig_mapping`: safe 7-bit
   weights by default, full range for each layer where ``qcore.fx.convert`` finds on the
   calibration data that full range is at least as accurate under the target's
   arithmetic; QAT trains with the safe range. On VNNI and AMX targets nothing changes.

4. **QAT only: embeddings stay in float.** torch's QAT mapping gives ``Embedding`` and
   ``EmbeddingBag`` the global fake-quant qconfig, and ``prepare_qat_fx`` swaps them to
   QAT embeddings that reject it (``AssertionError: Embedding weights requires a qscheme
   of torch.per_channel_affine_float_qparams``). The backend declares embeddings
   weight-only *qint8*, which torch 2.13's quantized embedding kernels cannot run
   (quint8 / quint4x2 only), so they get ``None``: the same float result post-training
   quantization gives them under torch's mapping, where the global qconfig does not
   match that dtype config.

Everything else (observers, the fixed-qparams ops, layer norm, PReLU, reshape) is torch's
default, so on a VNNI target outputs are bit-identical to torch's mapping wherever torch's
mapping runs.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn
from torch.ao.quantization import (
    QConfigMapping,
    get_default_qat_qconfig_mapping,
    get_default_qconfig_mapping,
)
from torch.ao.quantization.backend_config import BackendConfig
from torch.ao.quantization.qconfig import QConfigAny, qconfig_equals

from qcore import get_backend_config
from qcore.int8.weight_ranges import fit_qconfig_mapping

__all__ = [
    "CONV_TRANSPOSE_OPS",
    "EMBEDDING_MODULES",
    "build_qconfig_mapping",
    "fused_module_type_chains",
]

CONV_TRANSPOSE_OPS: tuple[Callable[..., Any], ...] = (
    nn.ConvTranspose1d,
    nn.ConvTranspose2d,
    nn.ConvTranspose3d,
    torch.nn.functional.conv_transpose1d,
    torch.nn.functional.conv_transpose2d,
    torch.nn.functional.conv_transpose3d,
)
"""Ops left in float (see difference 1 above)."""

_TORCH_VNNI_WARNING = "Default qconfig of oneDNN backend with reduce_range of false"

EMBEDDING_MODULES: tuple[type[nn.Module], ...] = (nn.Embedding, nn.EmbeddingBag)
"""Left in float by the QAT mapping (see difference 4 above)."""


def build_qconfig_mapping(*, is_qat: bool, model: nn.Module | None = None) -> QConfigMapping:
    """torch's default onednn mapping with the fixes listed in this module's docstring.

    ``model`` lets the mapping keep torch's qconfig on the standalone instances of a
    module type that the backend also fuses (e.g. a ``Tanh`` that no ``Linear`` precedes).
    """
    with warnings.catch_warnings():
        # torch's warning about non-VNNI CPUs: fit_qconfig_mapping below handles it
        warnings.filterwarnings("ignore", message=_TORCH_VNNI_WARNING)
        mapping = (
            get_default_qat_qconfig_mapping("onednn")
            if is_qat
            else get_default_qconfig_mapping("onednn")
        )
    for op in CONV_TRANSPOSE_OPS:
        mapping.set_object_type(op, None)
    if is_qat:
        for embedding in EMBEDDING_MODULES:
            mapping.set_object_type(embedding, None)
    _align_fused_module_types(mapping, get_backend_config("onednn"), model)
    return fit_qconfig_mapping(mapping)


def fused_module_type_chains(backend_config: BackendConfig) -> list[tuple[type[nn.Module], ...]]:
    """The module-type sequences that ``backend_config`` fuses into one module.

    Only all-module patterns count: torch's fusion qconfig check looks at module types.
    """
    chains: list[tuple[type[nn.Module], ...]] = []
    for config in backend_config.configs:
        pattern = config.pattern
        if config.fused_module is None or not isinstance(pattern, tuple):
            continue
        if all(isinstance(p, type) and issubclass(p, nn.Module) for p in pattern):
            chains.append(tuple(pattern))
    return chains


def _align_fused_module_types(
    mapping: QConfigMapping, backend_config: BackendConfig, model: nn.Module | None
) -> None:
    present = {type(m) for m in model.modules()} if model is not None else None
    by_type = mapping.object_type_qconfigs
    intended: dict[type[nn.Module], QConfigAny] = {}
    for root, *members in fused_module_type_chains(backend_config):
        # members may be absent as modules and still appear in the fused module: the
        # fuser builds an nn.Tanh for a torch.tanh call, so only the root decides
        if present is not None and root not in present:
            continue
        root_qconfig = by_type.get(root)
        for member in members:
            if qconfig_equals(by_type.get(member), root_qconfig):
                continue
            # what torch resolves for the type: its own entry, else the global qconfig
            intended.setdefault(member, by_type.get(member, mapping.global_qconfig))
            if root in by_type:
                by_type[member] = root_qconfig
            else:
                del by_type[member]
    if model is None:
        return
    for name, module in _instances_of(model, tuple(intended)):
        mapping.set_module_name(name, intended[type(module)])


def _instances_of(
    model: nn.Module, types: tuple[type[nn.Module], ...]
) -> Iterator[tuple[str, nn.Module]]:
    if not types:
        return
    for name, module in model.named_modules():
        if type(module) in types:
            yield name, module
