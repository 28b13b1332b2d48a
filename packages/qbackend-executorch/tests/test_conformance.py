"""qbackend-executorch passes qcore's conformance kit, with every pattern exercised.

The kit converts with ``convert_to_reference_fx`` (its default): the reference
representation is what ExecuTorch consumes, and it runs on any host.
"""

from __future__ import annotations

from torch.ao.quantization.backend_config import get_executorch_backend_config

import qcore
from qcore.testing import assert_backend_conformant


def test_executorch_is_conformant_and_every_pattern_runs() -> None:
    results = assert_backend_conformant("executorch")
    assert len(qcore.get_backend_config("executorch").configs) >= len(
        get_executorch_backend_config().configs  # torch's 84
    )
    assert {r.check for r in results} == {"load", "well-formed", "fuser-method", "prepare-convert"}
