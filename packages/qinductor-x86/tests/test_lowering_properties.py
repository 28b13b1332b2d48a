"""Properties of the lowering over shapes, scales and zero points, in two kinds, by cost.

* The parts of the lowering's numerics that run without a compile, on many drawn examples
  (hypothesis, derandomized: the same examples on every run), each against a reference
  written here: the doubled reduction against the plain one in float64, which ops the
  saturating route doubles against brute force over every pair, and the re-basing of
  int8 activation codes to uint8 against the graph before it.
* Each pattern family compiled: conv (+ relu), linear, and the binary fusions. A family's
  table of configurations covers every pair of values of its discrete parameters (checked
  by :func:`test_each_table_covers_every_pair_of_values`, not hoped for), with the
  continuous ones (sizes, the input's shift and spread, which set the activation's scale
  and zero point, the weights' scale) spread over their ranges. All configurations of a
  family are branches of one model, compiled once, for the saturating route (avx2):
  full-range weights take the doubled reduction there where they can overflow, narrowed
  ones the plain kernel that the VNNI route also runs, so both kernel paths are taken, and
  every branch must be exact on any CPU. Each branch's output is compared on its own, in
  codes, against the eager converted model.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import lowering_zoo as zoo
import pytest
import torch
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from test_lowering_saturation import INT16_MAX, brute_force_worst_pair, int8_weights
from torch import nn
from torch.fx.experimental.proxy_tensor import make_fx

import qcore
from qinductor_x86.lowering import saturation, signed
from qinductor_x86.lowering.context import CompileContext

CHEAP = settings(max_examples=150, deadline=None, derandomize=True)

# without a compile ------------------------------------------------------------------------


def _weight(seed: int, shape: tuple[int, ...], extreme: bool) -> torch.Tensor:
    """Random int8 codes; ``extreme``: every other input channel at the ends of the range,
    so that most pairs can overflow."""
    generator = torch.Generator().manual_seed(seed)
    weight = torch.randint(-128, 128, shape, generator=generator, dtype=torch.int8)
    if extreme:
        weight[:, ::2] = torch.where(weight[:, ::2] >= 0, 127, -128).to(torch.int8)
    return weight


@CHEAP
@given(
    groups=st.integers(1, 3),
    per_group=st.integers(1, 7),
    out_per_group=st.integers(1, 4),
    kernel=st.sampled_from([(1, 1), (3, 3), (1, 3)]),
    extreme=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_doubled_reduction_computes_the_plain_one_and_cannot_overflow(
    *, groups: int, per_group: int, out_per_group: int, kernel: tuple[int, int], extreme: bool, seed: int
) -> None:
    weight = _weight(seed, (groups * out_per_group, per_group, *kernel), extreme)
    doubled = saturation.doubled_weight(weight)
    assert doubled.dtype == torch.int8
    assert doubled.shape == (weight.shape[0], 2 * per_group, *kernel)
    assert brute_force_worst_pair(doubled, 255) <= INT16_MAX
    generator = torch.Generator().manual_seed(seed + 1)
    codes = torch.randint(0, 256, (2, groups * per_group, 5, 5), generator=generator).double()
    expected = F.conv2d(codes, weight.double(), groups=groups)
    twice = codes.repeat_interleave(2, dim=1)
    assert torch.equal(F.conv2d(twice, doubled.double(), groups=groups), expected)


#: The int8 targets, and whether each adds u8 x s8 pairs in saturating int16 lanes.
SATURATES = {"avx2": True, "avx512_vnni": False, "avx_vnni": False, "amx": False}


@CHEAP
@given(
    shape=st.sampled_from([(4, 5), (4, 6), (3, 4, 3, 3), (2, 1, 3, 3), (5, 7, 1, 1)]),
    act_max=st.sampled_from([1, 64, 127, 128, 200, 255]),
    target=st.sampled_from(list(SATURATES)),
    extreme=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_the_saturating_route_doubles_exactly_what_brute_force_says_can_overflow(
    *, shape: tuple[int, ...], act_max: int, target: str, extreme: bool, seed: int
) -> None:
    weight = _weight(seed, shape, extreme)
    worst = brute_force_worst_pair(weight, act_max)
    verdict = saturation.judge(weight, act_max, qcore.host.parse_target(target))
    assert verdict.worst == worst
    assert verdict.double == (SATURATES[target] and worst > INT16_MAX)


QD = torch.ops.quantized_decomposed


@settings(max_examples=40, deadline=None, derandomize=True)
@given(
    scale=st.floats(1e-3, 1.0),
    zero_point=st.integers(-128, 127),
    bounds=st.sampled_from([(-128, 127), (-127, 127)]),
)
def test_rebasing_int8_codes_to_uint8_changes_no_value(
    scale: float, zero_point: int, bounds: tuple[int, int]
) -> None:
    qmin, qmax = bounds

    def graph(x: torch.Tensor) -> torch.Tensor:
        q = QD.quantize_per_tensor.default(x, scale, zero_point, qmin, qmax, torch.int8)
        return QD.dequantize_per_tensor.default(q, scale, zero_point, qmin, qmax, torch.int8)

    # past both ends of the range, every code on the way, and the half steps between them
    x = torch.arange(qmin - zero_point - 3, qmax - zero_point + 3, 0.5) * scale
    gm = make_fx(graph, tracing_mode="fake")(x)
    expected = graph(x)
    signed.to_unsigned(CompileContext(gm, qcore.host.parse_target("avx2"), {}))
    gm.recompile()
    dtypes = {n.args[5] for n in gm.graph.nodes if n.target in (QD.quantize_per_tensor.default, QD.dequantize_per_tensor.default)}
    assert dtypes == {torch.uint8}
    assert torch.equal(gm(x), expected)


# compiled: one model per family, a branch per configuration ---------------------------------


@dataclass(frozen=True)
class Conv:
    """``conv (+ relu) -> 1x1 conv``; discrete: groups, kernel, stride, relu, narrow."""

    groups: int
    kernel: int
    stride: int
    relu: bool
    narrow: bool
    channels: tuple[int, int]  # per group: in, mid
    size: int
    batch: int
    shift: float
    spread: float
    weight_scale: float

    def discrete(self) -> tuple[Any, ...]:
        return (self.groups, self.kernel, self.stride, self.relu, self.narrow)

    def model(self) -> nn.Module:
        c_in, c_mid = (self.groups * c for c in self.channels)
        model = nn.Sequential(
            nn.Conv2d(c_in, c_mid, self.kernel, self.stride, self.kernel // 2, groups=self.groups),
            nn.ReLU() if self.relu else nn.Identity(),
            nn.Conv2d(c_mid, 4, 1),
        )
        with torch.no_grad():
            for p in model.parameters():
                p.mul_(self.weight_scale)
        return model

    def input(self, seed: int) -> torch.Tensor:
        shape = (self.batch, self.groups * self.channels[0], self.size, self.size)
        return zoo.example(*shape, seed=seed, shift=self.shift, spread=self.spread)


CONVS = (
    Conv(1, 1, 1, False, False, (1, 1), 5, 1, -2.0, 0.05, 0.1),
    Conv(2, 3, 1, False, True, (6, 6), 11, 3, 2.0, 8.0, 10.0),
    Conv(2, 1, 2, False, True, (3, 2), 8, 2, 0.5, 1.0, 1.0),
    Conv(2, 1, 1, True, False, (1, 6), 7, 1, -1.0, 3.0, 3.0),
    Conv(1, 3, 2, True, True, (4, 1), 9, 2, 1.5, 0.3, 0.3),
    Conv(1, 3, 2, True, False, (5, 3), 6, 3, 0.0, 5.0, 6.0),
)


@dataclass(frozen=True)
class Linear:
    """``linear -> relu -> linear``; discrete: input shape, transposed (3-D only), bias,
    narrow."""

    batch: tuple[int, ...]
    transposed: bool
    bias: bool
    narrow: bool
    features: tuple[int, int]
    shift: float
    spread: float

    def discrete(self) -> tuple[Any, ...]:
        return (self.batch, self.transposed, self.bias, self.narrow)

    def model(self) -> nn.Module:
        transposed = self.transposed and len(self.batch) == 2

        class Model(nn.Module):
            def __init__(self, features: tuple[int, int], bias: bool) -> None:
                super().__init__()
                self.a = nn.Linear(features[0], features[1], bias=bias)
                self.b = nn.Linear(features[1], 3)

            def forward(self, x: torch.Tensor) -> Any:
                x = x.transpose(0, 1) if transposed else x
                return self.b(torch.relu(self.a(x)))

        return Model(self.features, self.bias)

    def input(self, seed: int) -> torch.Tensor:
        return zoo.example(*self.batch, self.features[0], seed=seed, shift=self.shift, spread=self.spread)


LINEARS = (
    Linear((5,), False, False, False, (1, 40), -2.0, 0.05),
    Linear((5,), True, True, True, (40, 1), 2.0, 8.0),
    Linear((2, 3), False, False, True, (16, 24), 0.5, 1.0),
    Linear((2, 3), True, True, False, (7, 9), -1.0, 3.0),
    Linear((3, 2), False, True, False, (33, 5), 1.5, 0.3),
    Linear((3, 2), True, False, True, (24, 17), 0.0, 5.0),
)


@dataclass(frozen=True)
class Binary:
    """``y = first(x) * residual_scale; head(act(second(y) + y))``, either operand order;
    weights narrowed, so the add (and relu) fuse into the kernel on any route."""

    kind: str
    relu: bool
    swapped: bool
    channels: int
    shift: float
    spread: float
    residual_scale: float

    def discrete(self) -> tuple[Any, ...]:
        return (self.kind, self.relu, self.swapped)

    def model(self) -> nn.Module:
        spec = self

        def layer() -> nn.Module:
            if spec.kind == "conv":
                return nn.Conv2d(spec.channels, spec.channels, 3, padding=1)
            return nn.Linear(spec.channels, spec.channels)

        class Model(nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.first, self.second, self.head = layer(), layer(), layer()

            def forward(self, x: torch.Tensor) -> Any:
                y = self.first(x) * spec.residual_scale
                z = y + self.second(y) if spec.swapped else self.second(y) + y
                return self.head(torch.relu(z) if spec.relu else z)

        return Model()

    def input(self, seed: int) -> torch.Tensor:
        shape = (2, self.channels, 6, 6) if self.kind == "conv" else (6, self.channels)
        return zoo.example(*shape, seed=seed, shift=self.shift, spread=self.spread)


BINARIES = (
    Binary("conv", False, False, 2, -2.0, 0.05, 0.1),
    Binary("conv", True, True, 12, 2.0, 8.0, 10.0),
    Binary("linear", False, True, 7, 0.5, 1.0, 1.0),
    Binary("linear", True, False, 3, -1.0, 3.0, 3.0),
)

TABLES: dict[str, Sequence[Any]] = {"conv": CONVS, "linear": LINEARS, "binary": BINARIES}
#: int8 layers (so kernels) per branch of each family
LAYERS = {"conv": 2, "linear": 2, "binary": 3}


def test_each_table_covers_every_pair_of_values() -> None:
    """Every value of every discrete parameter meets every value of every other one in
    some configuration (the values: those of the table's own columns)."""
    for name, table in TABLES.items():
        rows = [row.discrete() for row in table]
        for i, j in itertools.combinations(range(len(rows[0])), 2):
            values_i = {row[i] for row in rows}
            values_j = {row[j] for row in rows}
            met = {(row[i], row[j]) for row in rows}
            assert met == set(itertools.product(values_i, values_j)), (name, i, j)
            assert len(values_i) > 1 and len(values_j) > 1, (name, i, j)


class Branches(nn.Module):
    """The models of one family side by side, each on its own input."""

    def __init__(self, models: list[nn.Module]) -> None:
        super().__init__()
        self.branches = nn.ModuleList(models)

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(b(x) for b, x in zip(self.branches, inputs, strict=True))


@dataclass(frozen=True)
class Compiled:
    result: zoo.Lowered
    weights: list[torch.Tensor]  # the int8 weights the compile saw, in graph order


def _branch(weight_dequantize: torch.fx.Node) -> int:
    """The branch whose layer reads this weight (``branches.<i>...`` in export's module
    stack of the conv or linear)."""
    layer = next(iter(weight_dequantize.users))
    path: str = list(layer.meta["nn_module_stack"].values())[-1][0]
    return int(path.split(".")[1])


@pytest.fixture(scope="module")
def compiled() -> dict[str, Compiled]:
    """Each family's table as one model, quantized by the x86 quantizer as it quantizes for
    a VNNI target (full-range weights, on any host) on two calibration batches and run on
    a third, weights narrowed where a row says so, compiled once for the saturating route."""
    made = {}
    for name, table in TABLES.items():
        torch.manual_seed(0)
        model = Branches([row.model() for row in table]).eval()
        calibration = [tuple(row.input(seed) for row in table) for seed in (1, 2)]
        with qcore.host.targeting("avx512_vnni"):
            converted = zoo.quantize(model, calibration[0], "x86", calibration)
        narrow = {i for i, row in enumerate(table) if name == "binary" or row.narrow}
        zoo.narrow_weights(converted, only=lambda node: _branch(node) in narrow)  # noqa: B023
        inputs = tuple(row.input(3) for row in table)
        made[name] = Compiled(zoo.lower(converted, inputs, target="avx2"), int8_weights(converted))
    return made


@pytest.mark.parametrize("family", list(TABLES))
def test_every_branch_is_exact_on_any_cpu(compiled: dict[str, Compiled], family: str) -> None:
    """Each branch's output in the eager converted model's codes."""
    diffs = compiled[family].result.codes
    assert len(diffs) == len(TABLES[family])
    for row, diff in zip(TABLES[family], diffs, strict=True):
        assert diff.exact, (row, str(diff))


@pytest.mark.parametrize("family", list(TABLES))
def test_one_kernel_per_layer_doubled_where_brute_force_says(
    compiled: dict[str, Compiled], family: str
) -> None:
    """Kernels counted in Inductor's generated code; which layers take the doubled
    reduction, against brute force over the weights' pairs."""
    made = compiled[family]
    layers = LAYERS[family] * len(TABLES[family])
    assert len(made.result.kernels) == layers, made.result.code
    assert len(made.weights) == layers
    can_overflow = sum(brute_force_worst_pair(w, 255) > INT16_MAX for w in made.weights)
    assert made.result.count("reduction doubled") == can_overflow
    if family != "binary":  # full-range rows: at least one layer can overflow
        assert can_overflow > 0


#: A oneDNN int8 kernel call in Inductor's generated code: (op, overload).
KERNEL_CALL = re.compile(r"torch\.ops\.onednn\.(q(?:conv|linear)\w*)\.(\w+)\(")


def test_binary_fusions_fuse_the_add_into_the_kernel(compiled: dict[str, Compiled]) -> None:
    """One binary kernel per branch, for the conv branches and the linear ones, in the
    generated code (the add, and the relu where there is one, fused into it)."""
    calls = KERNEL_CALL.findall(compiled["binary"].result.code)
    for kind in ("conv", "linear"):
        rows = [row for row in BINARIES if row.kind == kind]
        binary = [op for op, overload in calls if kind in op and overload.startswith("binary")]
        assert len(binary) == len(rows), calls
