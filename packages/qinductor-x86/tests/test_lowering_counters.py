"""torch's counters (``counters["inductor"]``) mean the same under this lowering alone as
under torch 2.13's own x86 passes, key by key, on every graph family.

Each side compiles every graph of ``lowering_counters_probe.GRAPHS`` once, in the fresh
interpreter of its lowering mode (``probe_modes.py``; which x86 passes exist is
process-wide and permanent):

* the reference: torch's built-in passes, torchao 0.18's quantizer module imported as
  users import it (so its passes are registered too);
* ours: torch's copy switched off before the first compile, torchao's never registered.

Both quantize the same models with this package's x86 quantizer, weights narrowed so that
nothing saturates or splits on any CPU. Keys that cannot be equal are listed, with the
reason, in one table, ``qinductor_x86.lowering.counters.ONE_SIDED``; every other key either
side bumps must be equal.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from lowering_counters_probe import GRAPHS, TARGETS

from qinductor_x86.lowering.counters import FAMILIES, ONE_SIDED, QUANT_LIFT_UP

#: compiled against the eager converted model, within rounding (bf16 weight-only: ~3e-3)
WITHIN_ROUNDING = 1e-2
FP16 = [name for name in GRAPHS if name.startswith("fp16")]


PROBED = (("reference", "counters"), ("standalone", "counters"))


@pytest.fixture(scope="module")
def sides(probes: Any) -> dict[str, dict[str, Any]]:
    """Two interpreters, one compile of each graph each."""
    return {
        "torch": probes.result("reference", "counters"),
        "ours": probes.result("standalone", "counters"),
    }


def _result(sides: dict[str, dict[str, Any]], side: str, graph: str) -> dict[str, Any]:
    result: dict[str, Any] = sides[side][graph]
    assert "error" not in result, result["error"]
    return result


def test_each_side_ran_the_passes_it_should(sides: dict[str, dict[str, Any]]) -> None:
    assert not any(sides["ours"]["_other_passes"].values()), sides["ours"]["_other_passes"]
    theirs = sides["torch"]["_other_passes"]
    assert theirs["torch weight prepack and fusion"] and theirs["torchao weight prepack and fusion"]


@pytest.mark.parametrize("graph", list(GRAPHS))
def test_counters_equal_torchs_key_by_key(sides: dict[str, dict[str, Any]], graph: str) -> None:
    theirs = _result(sides, "torch", graph)["counters"]
    ours = _result(sides, "ours", graph)["counters"]
    keys = sorted((set(theirs) | set(ours)) - set(ONE_SIDED))
    assert {k: ours.get(k, 0) for k in keys} == {k: theirs.get(k, 0) for k in keys}


@pytest.mark.parametrize("graph", list(GRAPHS))
def test_lift_ups_and_aliases(sides: dict[str, dict[str, Any]], graph: str) -> None:
    """The keys of the table that still have a reference: quantizes lifted, as torch's own
    lift-up counts them on the converted graph; the seed's names, as torch 2.13's."""
    reference = _result(sides, "torch", graph)["torchs_lift_ups"]
    ours = _result(sides, "ours", graph)["counters"]
    if reference is not None:
        assert ours.get(QUANT_LIFT_UP, 0) == reference
    for prefixes in FAMILIES.values():
        for alias in prefixes[1:]:
            for suffix in ("count", "nodes"):
                assert ours.get(f"{alias}_{suffix}", 0) == ours.get(f"{prefixes[0]}_{suffix}", 0)


def test_every_key_of_the_table_is_needed(sides: dict[str, dict[str, Any]]) -> None:
    """A key in ONE_SIDED differs between the sides on some graph (else it belongs with the
    compared ones)."""
    differing = {
        key
        for graph in GRAPHS
        for key in ONE_SIDED
        if _result(sides, "torch", graph)["counters"].get(key, 0)
        != _result(sides, "ours", graph)["counters"].get(key, 0)
    }
    assert differing == set(ONE_SIDED)


def test_references_lowered_every_family(sides: dict[str, dict[str, Any]]) -> None:
    """The reference is one: torch's passes bumped each family the zoo is meant to cover."""
    bumped = {key for graph in GRAPHS for key in _result(sides, "torch", graph)["counters"]}
    wanted = {f"{family}_count" for family in FAMILIES} - set(ONE_SIDED)
    assert wanted <= bumped, wanted - bumped
    assert any(
        _result(sides, "torch", graph)["torchs_lift_ups"] for graph in GRAPHS
    )


@pytest.mark.parametrize("graph", list(GRAPHS))
def test_kernels_and_numbers(sides: dict[str, dict[str, Any]], graph: str) -> None:
    theirs, ours = _result(sides, "torch", graph), _result(sides, "ours", graph)
    assert Counter(ours["kernels"]) == Counter(theirs["kernels"]), (theirs, ours)
    assert ours["relative_l2"] <= WITHIN_ROUNDING, ours
    assert ours["target"] in TARGETS
    assert not any("non-saturating" in name for name in ours["lowered"]), ours["lowered"]


@pytest.mark.parametrize("graph", FP16)
def test_fp16_dynamic_linears_are_prepacked(sides: dict[str, dict[str, Any]], graph: str) -> None:
    """torch 2.13's copy prepacks them; with it off, this lowering must (numbers: compiled
    against the eager converted model, whose linears read the fp16 weights upcast)."""
    ours = _result(sides, "ours", graph)
    assert ours["kernels"] and all("dynamic_fp16" in k for k in ours["kernels"]), ours
    assert ours["relative_l2"] <= 1e-4, ours
    assert any("fp16" in name for name in ours["lowered"]), ours["lowered"]
