"""qcore's histogram observers return their upstream's range bit for bit: the search of
``qcore.int8.histogram_search``, run on Python floats, against the upstream method on the
same observer state, for both observers that use it: ``qcore.fx.histogram``'s twin of
torch.ao's ``HistogramObserver`` (FX) and ``qcore.pt2e.histogram``'s twin of torchao's
(PT2E). Over histograms of the shapes calibration produces (a spike of zeros after a ReLU,
heavy tails, a constant tensor, a lone outlier; integer counts whose quantile bounds fall
on a cumulative sum), and the qparams convert writes from it. (That each first-party PT2E
quantizer builds its twin: tests/test_histogram_observer.py; that FX flows and the
conformance kit use the FX twin: test_fx_histogram.py.)"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch.ao.quantization.observer import HistogramObserver as TorchHistogramObserver
from torchao.quantization.pt2e import HistogramObserver as TorchaoHistogramObserver

from qcore.fx.histogram import HistogramObserver as FxHistogramObserver
from qcore.int8.histogram_search import _as_float32
from qcore.pt2e.histogram import HistogramObserver as Pt2eHistogramObserver

#: flow -> (qcore's observer, the upstream observer whose range it must return)
TWINS: dict[str, tuple[type[Any], type[Any]]] = {
    "fx": (FxHistogramObserver, TorchHistogramObserver),
    "pt2e": (Pt2eHistogramObserver, TorchaoHistogramObserver),
}


@pytest.fixture(params=list(TWINS))
def twin(request: pytest.FixtureRequest) -> tuple[type[Any], type[Any]]:
    return TWINS[request.param]


Batch = Callable[[torch.Generator], torch.Tensor]

#: name -> one calibration batch; each observer sees three
SHAPES: dict[str, Batch] = {
    "normal": lambda g: torch.randn(4, 64, 8, 8, generator=g),
    "after relu": lambda g: F.relu(torch.randn(4, 64, 8, 8, generator=g)),
    "mostly zeros": lambda g: (
        torch.randn(4, 4096, generator=g) * (torch.rand(4, 4096, generator=g) < 0.05)
    ),
    "hardswish": lambda g: F.hardswish(3 * torch.randn(4, 4096, generator=g)),
    "heavy tails": lambda g: (
        torch.randn(4096, generator=g) / torch.rand(4096, generator=g).clamp_min(1e-3)
    ),
    "one outlier": lambda g: torch.cat([torch.rand(4095, generator=g), torch.tensor([80.0])]),
    "shifted and scaled": lambda g: (
        7 * torch.rand(1, generator=g) * torch.randn(2048, generator=g) + 3
    ),
    "constant": lambda g: torch.full((256,), 0.75),
}


def _observed(ours: type[Any], shape: str, seed: int, **kwargs: object) -> Any:
    generator = torch.Generator().manual_seed(seed)
    observer = ours(**kwargs)
    for _ in range(3):
        observer(SHAPES[shape](generator))
    return observer


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_search_returns_upstreams_range_bit_for_bit(
    twin: tuple[type[Any], type[Any]], shape: str
) -> None:
    ours_cls, upstream = twin
    assert issubclass(ours_cls, upstream) and ours_cls.__name__ == upstream.__name__
    for seed in range(6):
        observer = _observed(ours_cls, shape, seed)
        ours = observer._non_linear_param_search()
        theirs = upstream._non_linear_param_search(observer)
        assert [t.item() for t in ours] == [t.item() for t in theirs], (shape, seed)


def _counted(ours: type[Any], tail: float, spike_bins: int, total: float, side: str) -> Any:
    """A histogram set by hand: integer counts summing to ``total`` (1e5 or a multiple),
    ``tail`` in every bin on the ``side`` of a spike of ``spike_bins`` random counts
    (``both``: a tail twice as long and a third as dense on the left, so that both bounds
    move, the left one first). The bounds ``k * 1e-5 * total`` then land
    on cumulative counts, or a rounding away from them, where comparing in float64 instead
    of float32 moves a bound one bin."""
    counts = torch.zeros(2048)
    spike = {"left": 2048 - spike_bins, "right": 0, "both": 1365 - spike_bins // 2}[side]
    if side in ("left", "both"):
        counts[:spike] = tail
    if side in ("right", "both"):
        counts[spike + spike_bins :] = tail if side == "right" else 3 * tail
    weights = torch.rand(spike_bins, generator=torch.Generator().manual_seed(spike_bins))
    rest = total - counts.sum().item()
    counts[spike : spike + spike_bins] = torch.floor(weights / weights.sum() * rest)
    counts[spike] += total - counts.sum()
    observer = ours()
    observer.histogram, observer.min_val, observer.max_val = (
        counts,
        torch.tensor(-3.0),
        torch.tensor(5.0),
    )
    return observer


@pytest.mark.parametrize("side", ["left", "right", "both"])
def test_bounds_on_cumulative_counts_give_upstreams_range_bit_for_bit(
    twin: tuple[type[Any], type[Any]], side: str
) -> None:
    ours_cls, upstream = twin
    for tail in (1.0, 2.0, 5.0):
        for spike_bins in (8, 64, 248):
            for total in (1e5, 2e5, 3e5, 1e6, 3.3e7):
                observer = _counted(ours_cls, tail, spike_bins, total, side)
                ours = observer._non_linear_param_search()
                theirs = upstream._non_linear_param_search(observer)
                assert [t.item() for t in ours] == [t.item() for t in theirs], (
                    tail,
                    spike_bins,
                    total,
                )


@pytest.mark.parametrize("bad", [-4e4, float("nan")], ids=["negative", "nan"])
def test_a_count_no_calibration_makes_gets_upstreams_scan(
    twin: tuple[type[Any], type[Any]], bad: float
) -> None:
    """A bisection assumes sums that never decrease; with a negative (or NaN) count the
    scan bin by bin and a bisection part ways, and the observer must give upstream's."""
    ours_cls, upstream = twin
    observer = _counted(ours_cls, 1.0, 64, 1e5, "both")
    observer.histogram[0] = 4e4  # the first sum above every early bound, the next ones not
    observer.histogram[1] = bad
    ours = observer._non_linear_param_search()
    theirs = upstream._non_linear_param_search(observer)
    assert [t.item() for t in ours] == [t.item() for t in theirs]


@pytest.mark.parametrize("dtype", [torch.quint8, torch.qint8])
def test_the_qparams_are_upstreams(twin: tuple[type[Any], type[Any]], dtype: torch.dtype) -> None:
    """What convert reads: scale and zero point, for both int8 kinds, with the observer's
    state (histogram, range) left as upstream's leaves it."""
    ours_cls, upstream = twin
    for shape in SHAPES:
        observer = _observed(ours_cls, shape, 0, dtype=dtype)
        theirs = upstream(dtype=dtype)
        theirs.load_state_dict(observer.state_dict())
        scale, zero_point = observer.calculate_qparams()
        their_scale, their_zero_point = theirs.calculate_qparams()
        assert (
            scale.item() == their_scale.item() and zero_point.item() == their_zero_point.item()
        ), shape


def test_a_bound_is_compared_as_torch_compares_it() -> None:
    """torch compares a float32 tensor with a Python float after rounding the float to
    float32: the walk must see the same ties."""
    cumulative = torch.tensor([1.0, 3.0, 16_777_216.0])
    for value in cumulative:
        for bound in (value.item() * (1 + 1e-9), value.item() * (1 - 1e-9), value.item() + 0.7):
            assert bool(value < bound) == (value.item() < _as_float32(bound))
            assert bool(value > bound) == (value.item() > _as_float32(bound))
    assert _as_float32(1.0 + 1e-9) == 1.0 and 1.0 + 1e-9 != 1.0
