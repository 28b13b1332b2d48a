"""Regenerate ``data/expected_annotations.json`` from torchao 0.18's X86InductorQuantizer.

The table holds the REFERENCE quantizer's annotations, never ours, so the test that
compares against it can fail. The weight observer depends on the int8 target CPU, and
parity holds on a VNNI target, so the table is made for one::

    python packages/qinductor-x86/tests/make_expected_table.py
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import parity_models  # noqa: E402
import torchao_reference  # noqa: E402

import qcore  # noqa: E402

TARGET = "avx512_vnni"


def main() -> None:
    ref = torchao_reference.load()
    table: dict[str, object] = {
        "_source": {"torchao": torchao_reference.REFERENCE_VERSION, "target": TARGET},
    }
    with qcore.host.targeting(TARGET):
        for model in parity_models.MODELS:
            for config in parity_models.CONFIGS:
                table[f"{model}/{config}"] = parity_models.annotate_with(ref, model, config)
    out = HERE / "data" / "expected_annotations.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    print(f"wrote {out} ({len(table) - 1} model/config pairs)")


if __name__ == "__main__":
    main()
