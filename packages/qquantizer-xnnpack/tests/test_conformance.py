"""The XNNPACK quantizer passes qcore's conformance kit, loaded through its entry point."""

import qcore.testing


def test_xnnpack_is_conformant() -> None:
    results = qcore.testing.assert_conformant("quantizer", "xnnpack")
    checked = {r.subject for r in results if r.check == "prepare-convert"}
    assert {"linear", "conv_bn_relu", "cat", "gru_io_only"} <= checked
