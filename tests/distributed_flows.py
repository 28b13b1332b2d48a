"""What each rank of a 2-process gloo world runs for test_distributed_flows.py: every
backend's flow, calibrated on a rank's own shard, with and without qcore.distributed.

Rank ``r`` sees inputs scaled by ``1 + r`` and shifted by ``r``: different ranges on
purpose. The single-process reference over both shards runs inside the world too, on
one rank (``UNION_RANK``).
"""

from __future__ import annotations

import copy
import hashlib
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.ao.quantization import observer as ao_obs
from torch.fx import GraphModule
from torchao.quantization.pt2e import observer as pt2e_obs
from torchao.quantization.pt2e.quantize_pt2e import (
    convert_pt2e,
    prepare_pt2e,
    prepare_qat_pt2e,
)

import qcore
import qcore.distributed
import qcore.fx
from qcore.int8.cpu_profile import set_target
from qcore.zoo.architectures import EncoderBlock

BATCHES = 3


class SmallResNet(nn.Module):
    """Conv-BN-ReLU stem, one residual block (conv-BN-ReLU, conv-BN, add, ReLU), head."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU())
        self.conv1, self.bn1 = nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.conv2, self.bn2 = nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.head = nn.Linear(8, 10)

    def forward(self, x: Tensor) -> Tensor:
        x = self.stem(x)
        y = F.relu(self.bn1(self.conv1(x)))
        x = F.relu(self.bn2(self.conv2(y)) + x)
        return self.head(x.mean((2, 3)))


class SmallCNN(nn.Module):
    """Conv-BN-ReLU twice and a head: what onednn fuses under QAT (not conv-BN-add)."""

    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
            nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
        )  # fmt: skip
        self.head = nn.Linear(8, 10)

    def forward(self, x: Tensor) -> Tensor:
        return self.head(self.features(x).mean((2, 3)))


MODELS: dict[str, tuple[Callable[[], nn.Module], tuple[int, ...]]] = {
    "cnn": (SmallResNet, (4, 3, 12, 12)),
    "qat_cnn": (SmallCNN, (4, 3, 12, 12)),
    "encoder": (lambda: EncoderBlock(dim=32, heads=4, tokens=10, mlp=64), (4, 10, 32)),
}


def model(name: str) -> nn.Module:
    torch.manual_seed(0)
    made = MODELS[name][0]().eval()
    with torch.no_grad():  # BN statistics that are not the identity
        for module in made.modules():
            if isinstance(module, nn.BatchNorm2d):
                module.running_mean.uniform_(-0.2, 0.2)
                module.running_var.uniform_(0.5, 1.5)
    return made


def batches(name: str, rank: int) -> list[tuple[Tensor]]:
    shape = MODELS[name][1]
    generator = torch.Generator().manual_seed(1000 + rank)
    return [(torch.randn(shape, generator=generator) * (1 + rank) + rank,) for _ in range(BATCHES)]


def held_out(name: str) -> tuple[Tensor]:
    generator = torch.Generator().manual_seed(7)
    return (torch.randn(MODELS[name][1], generator=generator) * 1.5 + 0.5,)


def digest(converted: nn.Module) -> str:
    """The converted model's weights, qparams and (for graphs) code, which holds PT2E's
    activation qparams as literals."""
    hashed = hashlib.sha256()
    for key, value in sorted(converted.state_dict().items()):
        hashed.update(key.encode())
        hashed.update(_bytes(value))
    if isinstance(converted, GraphModule):
        hashed.update(converted.code.encode())
    return hashed.hexdigest()


def _bytes(value: Any) -> bytes:
    if isinstance(value, Tensor):
        if value.is_quantized:
            parts = [value.int_repr()]
            if value.qscheme() in (torch.per_tensor_affine, torch.per_tensor_symmetric):
                parts += [torch.tensor([value.q_scale(), float(value.q_zero_point())])]
            else:
                parts += [value.q_per_channel_scales(), value.q_per_channel_zero_points()]
            return b"".join(_bytes(p) for p in parts)
        return repr(value.detach().flatten().tolist()).encode()
    if isinstance(value, (tuple, list)):
        return b"".join(_bytes(v) for v in value)
    return repr(value).encode()


def min_max_activations(prepared: nn.Module) -> None:
    """Swap every histogram observer (subclasses too) for a min/max one with the same
    settings; a budgeted plan (``qcore.pt2e.range_plan``) then reads the replacements."""
    families = ((pt2e_obs.HistogramObserver, pt2e_obs), (ao_obs.HistogramObserver, ao_obs))
    swapped: dict[nn.Module, nn.Module] = {}
    for name, module in list(prepared.named_modules()):
        obs = next((family for base, family in families if isinstance(module, base)), None)
        if obs is None:
            continue
        replacement = obs.MinMaxObserver(
            dtype=module.dtype, qscheme=module.qscheme, reduce_range=module.reduce_range,
            quant_min=module.quant_min, quant_max=module.quant_max, eps=float(module.eps),
        )  # fmt: skip
        parent, _, leaf = name.rpartition(".")
        setattr(prepared.get_submodule(parent) if parent else prepared, leaf, replacement)
        swapped[module] = replacement
    plans = {id(p): p for m in prepared.modules() if (p := getattr(m, "plan", None)) is not None}
    for plan in plans.values():
        for layer in plan.layers:
            layer.input_observer = swapped.get(layer.input_observer, layer.input_observer)


class Flow:
    """One backend's PTQ flow: prepare, convert."""

    def __init__(self, name: str, model_name: str) -> None:
        self.name, self.model_name = name, model_name
        self.float_model = model(model_name)
        example = batches(model_name, 0)[0]
        if name.startswith("pt2e"):
            self.exported = torch.export.export(self.float_model, example).module()

    def prepare(self, observers: str) -> nn.Module:
        example = batches(self.model_name, 0)[0]
        if self.name.startswith("fx-"):
            prepared = qcore.fx.prepare(copy.deepcopy(self.float_model), self.name[3:], example)
        else:
            quantizer = qcore.get_quantizer(self.name[5:])
            prepared = prepare_pt2e(copy.deepcopy(self.exported), quantizer)
        if observers == "min_max":
            min_max_activations(prepared)
        return prepared

    def convert(self, prepared: nn.Module) -> nn.Module:
        if self.name.startswith("fx-"):
            return qcore.fx.convert(prepared)  # type: ignore[arg-type]
        return convert_pt2e(prepared)  # type: ignore[arg-type]


def _calibrated(flow: Flow, observers: str, shards: list[int]) -> nn.Module:
    prepared = flow.prepare(observers)
    with torch.no_grad():
        for rank in shards:
            for batch in batches(flow.model_name, rank):
                prepared(*batch)
    return prepared


def _outputs(converted: nn.Module, model_name: str) -> list[float]:
    with torch.no_grad():
        output: Tensor = converted(*held_out(model_name))
    return output.flatten().tolist()


#: The rank that computes the one-process reference over every shard: it is the same
#: deterministic computation on any rank (same seeds, same shards), so one rank computes
#: it and the tests compare every rank's synced model with it. Rank 0, whose shard has
#: the narrowest range: a reference that left out another rank's shard differs most there.
UNION_RANK = 0


def ptq(rank: int, world: int, flow_name: str, model_name: str, target: str) -> dict[str, Any]:
    """Per observer kind: synced and unsynced results of ``flow_name``, and on
    ``UNION_RANK`` the one-process results over every shard."""
    set_target(target)
    flow = Flow(flow_name, model_name)
    out: dict[str, Any] = {"float": _outputs(flow.float_model, model_name)}
    for observers in ("histogram", "min_max"):
        synced = flow.prepare(observers)
        summary = qcore.distributed.calibrate(synced, batches(model_name, rank), progress=False)
        prepared = {"synced": synced, "unsynced": _calibrated(flow, observers, [rank])}
        if rank == UNION_RANK:
            prepared["union"] = _calibrated(flow, observers, list(range(world)))
        converted = {k: flow.convert(p) for k, p in prepared.items()}
        out[observers] = {
            **{f"{k}_digest": digest(c) for k, c in converted.items()},
            **{f"{k}_output": _outputs(c, model_name) for k, c in converted.items()},
            "recorders": summary.recorders,
        }
        # converting on rank 0 only: another rank's converted model takes rank 0's state.
        # Activation qparams may live in a graph's code (PT2E's, FX's functional ops), so
        # this too starts from synced statistics; wiping the floats shows the state moved.
        shared = converted["synced"]
        if rank != 0:
            with torch.no_grad():
                for value in shared.state_dict().values():
                    if isinstance(value, Tensor) and value.is_floating_point():
                        value.zero_()
        qcore.distributed.broadcast_state(shared, src=0)
        out[observers]["broadcast_digest"] = digest(shared)
    return out


#: The aten ops whose training and eval forms differ (what move_exported_model_to_eval
#: rewrites), as a node target's dotted name spells them.
_TRAIN_ONLY = {"dropout", "native_dropout", "batch_norm", "_native_batch_norm_legit",
               "native_batch_norm", "cudnn_batch_norm", "_batch_norm_with_update"}  # fmt: skip


def qat(rank: int, world: int, flow_name: str, steps: int) -> dict[str, Any]:
    """QAT under DDP (default broadcast_buffers) on rank-specific data, with and without a
    sync after every step: the fake quants' qparams after each step, and the converted
    model."""
    set_target("avx512_vnni")
    return {sync: _qat(rank, flow_name, steps, sync) for sync in ("synced", "unsynced")}


def _qat(rank: int, flow_name: str, steps: int, sync: str) -> dict[str, Any]:
    from torch.nn.parallel import DistributedDataParallel

    # PT2E folds conv-BN QAT patterns slowly (~20 s a model): its QAT runs on the encoder
    model_name = "qat_cnn" if flow_name == "fx-onednn" else "encoder"
    float_model = model(model_name).train()
    example = batches(model_name, 0)[0]
    if flow_name == "fx-onednn":
        prepared = qcore.fx.prepare(float_model, "onednn", example, is_qat=True)
    else:
        exported = torch.export.export(float_model, example).module()
        quantizer = qcore.get_quantizer("xnnpack", is_qat=True, is_per_channel=True)
        prepared = prepare_qat_pt2e(exported, quantizer)
    ddp = DistributedDataParallel(prepared)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=0.01)
    generator = torch.Generator().manual_seed(rank)
    qparams = []
    for _ in range(steps):
        x = torch.randn(example[0].shape, generator=generator) * (1 + rank) + rank
        loss = ddp(x).square().mean()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if sync == "synced":
            qcore.distributed.sync_observers(ddp)
        qparams.append(
            [(n, m.scale.tolist(), m.zero_point.tolist()) for n, m in prepared.named_modules()
             if hasattr(m, "scale") and hasattr(m, "activation_post_process")]
        )  # fmt: skip
    # BN statistics are not observers: DDP takes rank 0's at every forward, and so does this
    for name, buffer in prepared.named_buffers():
        if "running_" in name or "num_batches" in name:
            torch.distributed.broadcast(buffer, 0)
    if flow_name == "fx-onednn":
        converted = qcore.fx.convert(prepared.eval())
    else:
        # move_exported_model_to_eval only switches dropout and batch norm to eval (it
        # exports six patterns to find them, seconds per call): the encoder has neither
        targets = {part for n in prepared.graph.nodes for part in str(n.target).split(".")}
        assert not _TRAIN_ONLY & targets, sorted(_TRAIN_ONLY & targets)
        converted = convert_pt2e(prepared)
    return {"qparams": qparams, "digest": digest(converted)}


#: (flow, model, target): every flow on both models; the flows whose weight ranges depend
#: on the target CPU also on a saturating one, where qcore records calibration inputs
PTQ_CASES = [
    *[(flow, m, "avx512_vnni") for flow in ("fx-onednn", "fx-executorch", "pt2e-xnnpack",
                                            "pt2e-x86") for m in ("cnn", "encoder")],
    *[(flow, m, "avx2") for flow in ("fx-onednn", "pt2e-x86") for m in ("cnn", "encoder")],
]  # fmt: skip


def mismatched(rank: int, world: int) -> str:
    """Rank 1's model has one more layer: what sync_observers raises there, and here."""
    set_target("avx2")  # where qcore also records calibration inputs
    flow = Flow("fx-onednn", "encoder")
    if rank == 1:
        flow.float_model.mlp.append(nn.Linear(32, 32))  # EncoderBlock.mlp: a Sequential
    prepared = flow.prepare("histogram")
    try:
        qcore.distributed.calibrate(prepared, batches("encoder", rank), progress=False)
    except qcore.distributed.DistributedSyncError as error:
        return str(error)
    return "no error"


def ptq_all(rank: int, world: int) -> dict[str, Any]:
    found: dict[str, Any] = {"|".join(c): ptq(rank, world, *c) for c in PTQ_CASES}
    found["mismatched"] = mismatched(rank, world)
    return found


def qat_all(rank: int, world: int, steps: int) -> dict[str, Any]:
    return {flow: qat(rank, world, flow, steps) for flow in ("fx-onednn", "pt2e-xnnpack")}


def qat_then_ptq(rank: int, world: int, steps: int) -> dict[str, Any]:
    """Both in one world: QAT first (each flow sets its own target), then PTQ, whose last
    case (``mismatched``) ends in an error raised on both ranks."""
    return {"qat": qat_all(rank, world, steps), "ptq": ptq_all(rank, world)}
