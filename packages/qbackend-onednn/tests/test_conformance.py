"""qbackend-onednn passes qcore's conformance kit, with every pattern exercised."""

from __future__ import annotations

from torch.ao.quantization.backend_config import get_onednn_backend_config

import qcore
from qcore.testing import assert_backend_conformant


def test_onednn_is_conformant_and_every_pattern_runs() -> None:
    results = assert_backend_conformant("onednn")
    assert len(qcore.get_backend_config("onednn").configs) >= len(
        get_onednn_backend_config().configs  # torch's 221
    )
    assert {r.check for r in results} == {"load", "well-formed", "fuser-method", "prepare-convert"}
