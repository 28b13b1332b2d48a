"""Regenerate ``data/expected_annotations.json`` from ExecuTorch 1.5.1's quantizer.

The table is the REFERENCE quantizer's annotations, never ours, so the CI test that
compares against it can fail. Run in an environment with the reference installed::

    python -m venv --system-site-packages /tmp/etvenv
    /tmp/etvenv/bin/pip install --no-deps executorch==1.5.1
    /tmp/etvenv/bin/python packages/qquantizer-xnnpack/tests/make_expected_table.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import et_reference  # noqa: E402
import xnnpack_parity_models as parity_models  # noqa: E402


def main() -> None:
    ref = et_reference.load()
    table: dict[str, dict[str, object]] = {
        "_source": {"executorch": et_reference.REFERENCE_VERSION},  # type: ignore[dict-item]
    }
    for model in parity_models.MODELS:
        for config, options in parity_models.CONFIGS.items():
            quantizer = ref.XNNPACKQuantizer().set_global(
                ref.get_symmetric_quantization_config(**options)
            )
            table[f"{model}/{config}"] = parity_models.annotate_with(quantizer, model)
    out = HERE / "data" / "expected_annotations.json"
    out.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"wrote {out} ({len(table) - 1} model/config pairs)")


if __name__ == "__main__":
    main()
