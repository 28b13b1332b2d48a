"""FX flows calibrate with qcore's twin of torch.ao's ``HistogramObserver``
(``qcore.fx.histogram``, whose ranges are torch's bit for bit: test_histogram_search.py):
``with_faster_histograms`` swaps it into a QConfigMapping and changes nothing else, a model
prepared either way converts to the same model, and the two places qcore builds an FX
mapping itself use it: ``qcore.fx.prepare``'s default mapping and the conformance kit."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from torch import nn
from torch.ao.quantization import QConfig, QConfigMapping, get_default_qconfig_mapping
from torch.ao.quantization.backend_config import get_onednn_backend_config
from torch.ao.quantization.observer import HistogramObserver as TorchHistogramObserver
from torch.ao.quantization.observer import MinMaxObserver, default_per_channel_weight_observer
from torch.ao.quantization.quantize_fx import convert_to_reference_fx, prepare_fx

import qcore.fx
from qcore import host
from qcore._torch_private import ensure_backend_config_utils, observer_constructor_parts
from qcore.fx.histogram import HistogramObserver, with_faster_histograms
from qcore.int8.engine import quantized_engine
from qcore.testing.backend_checks import check_backend_config


class _Custom(TorchHistogramObserver):
    """A user's own histogram observer: its search is its own business."""


def _entries(mapping: QConfigMapping) -> list[tuple[str, Any]]:
    """Every (key, qconfig) of ``mapping``, in its order."""
    return [
        ("global", mapping.global_qconfig),
        *((f"type {k}", v) for k, v in mapping.object_type_qconfigs.items()),
        *((f"regex {k}", v) for k, v in mapping.module_name_regex_qconfigs.items()),
        *((f"name {k}", v) for k, v in mapping.module_name_qconfigs.items()),
        *((f"order {k}", v) for k, v in mapping.module_name_object_type_order_qconfigs.items()),
    ]


def _mixed_mapping() -> QConfigMapping:
    """torch's default x86 mapping plus an entry of each other kind: a shared qconfig, a
    user's histogram subclass, a keyword of torch's histogram, an op left in float."""
    shared = QConfig(
        activation=TorchHistogramObserver.with_args(reduce_range=True, bins=1024),
        weight=default_per_channel_weight_observer,
    )
    mapping = get_default_qconfig_mapping("x86")
    mapping.set_module_name_regex("block.*", shared).set_module_name("head", shared)
    mapping.set_module_name_object_type_order(
        "block", nn.Linear, 0, QConfig(_Custom, MinMaxObserver)
    )
    return mapping.set_object_type(nn.ConvTranspose2d, None)


@pytest.mark.parametrize("name", ["x86", "onednn", "qnnpack", "fbgemm"])
def test_only_torchs_own_histogram_observers_change_keywords_kept(name: str) -> None:
    mapping = get_default_qconfig_mapping(name) if name != "x86" else _mixed_mapping()
    before = _entries(mapping)
    faster = with_faster_histograms(mapping)
    assert _entries(mapping) == before  # the mapping given is left as it was
    after = _entries(faster)
    assert [key for key, _ in after] == [key for key, _ in before]
    swapped = 0
    for (key, theirs), (_, ours) in zip(before, after, strict=True):
        if theirs is None:
            assert ours is None, key
            continue
        for field in ("activation", "weight"):
            their_ctr, our_ctr = getattr(theirs, field), getattr(ours, field)
            their_cls, their_keywords = observer_constructor_parts(their_ctr)
            our_cls, our_keywords = observer_constructor_parts(our_ctr)
            if their_cls is TorchHistogramObserver:
                assert (our_cls, our_keywords) == (HistogramObserver, their_keywords), key
                swapped += 1
            else:
                assert our_ctr is their_ctr, key
    assert swapped >= 1


def test_a_qconfig_shared_by_several_entries_stays_one_object() -> None:
    """prepare_fx compares the qconfigs of fused modules; a shared one must stay shared."""
    faster = with_faster_histograms(_mixed_mapping())
    assert faster.module_name_regex_qconfigs["block.*"] is faster.module_name_qconfigs["head"]


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv, self.relu = nn.Conv2d(3, 8, 3), nn.ReLU()
        self.head = nn.Linear(8 * 6 * 6, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.relu(self.conv(x)).flatten(1))


def _converted(mapping: QConfigMapping, batches: list[torch.Tensor]) -> torch.fx.GraphModule:
    """``_Net`` prepared with ``mapping``, calibrated on ``batches``, converted to the
    reference representation (float ops between quantize and dequantize: no int8 kernel,
    the same values on any CPU)."""
    torch.manual_seed(0)
    model = _Net().eval()
    prepared = prepare_fx(model, mapping, (batches[0],), backend_config=get_onednn_backend_config())
    with torch.no_grad():
        for batch in batches:
            prepared(batch)
    return convert_to_reference_fx(prepared, backend_config=get_onednn_backend_config())


def test_a_model_prepared_either_way_converts_to_the_same_model_exactly() -> None:
    generator = torch.Generator().manual_seed(3)
    batches = [torch.relu(torch.randn(2, 3, 8, 8, generator=generator)) * (1 + i) for i in range(3)]
    mapping = get_default_qconfig_mapping("onednn")
    theirs, ours = (
        _converted(mapping, batches),
        _converted(with_faster_histograms(mapping), batches),
    )
    qparams = _activation_qparams(theirs)
    # three ranges the search chose: the input's, the conv's (relu) output's (quantized
    # again after the flatten, with the same qparams) and the linear's output's
    assert len(set(qparams)) == 3, qparams
    assert _activation_qparams(ours) == qparams
    held_out = torch.randn(4, 3, 8, 8, generator=generator)
    with torch.no_grad():
        assert torch.equal(theirs(held_out), ours(held_out))


def _activation_qparams(converted: torch.fx.GraphModule) -> list[tuple[float, int]]:
    """(scale, zero point) of every per-tensor quantize of ``converted``, in graph order."""
    found = []
    for node in converted.graph.nodes:
        if node.target is torch.quantize_per_tensor:
            scale, zero_point = (getattr(converted, str(arg.target)) for arg in node.args[1:3])
            found.append((float(scale), int(zero_point)))
    return found


@pytest.mark.parametrize("target", ["avx2", "avx512_vnni"])
def test_qcore_fx_prepare_calibrates_with_the_twin_by_default(
    torch_onednn_plugins: None, target: str
) -> None:
    """On either kind of CPU (a saturating one changes the weight observers only)."""
    with quantized_engine("onednn"), host.targeting(target):
        prepared = qcore.fx.prepare(_Net().eval(), "fxnative", (torch.randn(2, 3, 8, 8),))
    histograms = [type(m) for m in prepared.modules() if isinstance(m, TorchHistogramObserver)]
    assert histograms and set(histograms) == {HistogramObserver}


def test_the_conformance_kit_calibrates_with_the_twin(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kit runs a backend's mapping (here torch's onednn one, histograms for
    activations) with the twin: the twin's search runs, torch's never does."""
    searched: dict[str, int] = {"ours": 0, "torch": 0}

    def counting(who: str, search: Any) -> Any:
        def counted(self: Any) -> Any:
            searched[who] += 1
            return search(self)

        return counted

    monkeypatch.setattr(
        HistogramObserver,
        "_non_linear_param_search",
        counting("ours", HistogramObserver._non_linear_param_search),
    )
    monkeypatch.setattr(
        TorchHistogramObserver,
        "_non_linear_param_search",
        counting("torch", TorchHistogramObserver._non_linear_param_search),
    )
    ensure_backend_config_utils()
    config = get_onednn_backend_config()
    conv = [c for c in config.configs if c.pattern is nn.Conv2d]
    assert len(conv) == 1
    one_pattern = type(config)("one").set_backend_pattern_configs(conv)
    results = check_backend_config(
        one_pattern, lambda model, is_qat: get_default_qconfig_mapping("onednn"), engine="onednn"
    )
    assert results and all(r.ok for r in results), results
    assert searched["ours"] > 0 and searched["torch"] == 0, searched
