"""The quantizers qcore derives from the first-party FX backends pass the PT2E conformance
kit as ``qcore check`` runs it, every annotator through ``prepare_pt2e`` and
``convert_pt2e``: ``onednn``'s for a CPU without VNNI (its weight ranges follow the
target), ``executorch``'s for one with (the two targets between them, at one run each:
the kit costs ~25 s per quantizer). Nothing else runs these two through the whole kit."""

from __future__ import annotations

import pytest

import qcore.host
import qcore.testing


@pytest.mark.parametrize(("backend", "target"), [("onednn", "avx2"), ("executorch", "avx512_vnni")])
def test_the_derived_quantizer_passes_the_kit(backend: str, target: str) -> None:
    with qcore.host.targeting(target):
        results = qcore.testing.assert_conformant("quantizer", backend)
    converted = [r for r in results if r.check == "prepare-convert"]
    assert len(converted) >= 50 and all(r.ok for r in converted)
