"""A pytest plugin (``-p upstream_fusion_plugin``) that sets up one side of
``upstream_fusion.py``'s comparison before torchao's x86 fusion suite is collected.

``QCORE_UPSTREAM_SIDE`` names the x86 int8 Inductor passes the suite's compiles run:

* ``torch``: torch 2.13's own copy (registered by torch at the first compile, as for any
  user). torchao's x86 quantizer module is loaded without its last lines, which register
  torchao's copy of the same passes (and its fp8 lowerings) into torch for good; the
  quantizer itself is torchao's, byte for byte.
* ``ours``: this repository's lowering alone: the same quantizer module, torch's copy
  switched off before the first compile, ``qcore.get_lowering("x86")`` installed.
* ``torchao``: nothing changed: torchao's copy, registered by importing its quantizer module
  (and torch's, which registers itself beside it).

``QCORE_UPSTREAM_ROUTE=avx2`` makes the process a CPU without VNNI as far as torch and
torchao can tell: the runner caps oneDNN (``ONEDNN_MAX_CPU_ISA=AVX2``, which
``qcore.int8.cpu_profile`` follows too) and Inductor's vector ISA (``ATEN_CPU_CAPABILITY=avx2``);
this plugin makes ``torch.cpu._is_vnni_supported()`` say no, which is what torchao reads
(``torchao.utils._cpu_is_vnni_supported``: u8s8 ``_int_mm``, ``should_reduce_range``).
"""

from __future__ import annotations

import os
import sys
import types
from pathlib import Path

import pytest

SIDES = ("torch", "ours", "torchao")
ROUTES = ("vnni", "avx2")
_MODULE = "torchao.quantization.pt2e.quantizer.x86_inductor_quantizer"
_REGISTRATION = "# Register Inductor fusion passes"


def quantizer_module_without_registration() -> types.ModuleType:
    """torchao's x86 quantizer module under its own name, run up to the line where it
    registers torchao's Inductor passes (the rest of the file is that registration)."""
    import torchao.quantization.pt2e.quantizer as package

    path = Path(package.__file__).parent / "x86_inductor_quantizer.py"
    source = path.read_text()
    if source.count(_REGISTRATION) != 1:
        raise RuntimeError(f"{path}: cannot find where pass registration starts")
    tail = source[source.index(_REGISTRATION) :]
    if "_register_quantization_weight_pack_pass(" not in tail:
        raise RuntimeError(f"{path}: the part cut off does not register torchao's passes")
    module = types.ModuleType(_MODULE)
    module.__file__ = str(path)
    sys.modules[_MODULE] = module
    exec(compile(source[: source.index(_REGISTRATION)], str(path), "exec"), module.__dict__)
    package.x86_inductor_quantizer = module  # type: ignore[attr-defined]
    return module


def pytest_configure(config: pytest.Config) -> None:
    side = os.environ["QCORE_UPSTREAM_SIDE"]
    route = os.environ["QCORE_UPSTREAM_ROUTE"]
    assert side in SIDES and route in ROUTES, (side, route)
    import torch

    if route == "avx2":
        assert os.environ.get("ONEDNN_MAX_CPU_ISA") == "AVX2"
        torch.cpu._is_vnni_supported = lambda: False
    if side == "torchao":
        return
    if _MODULE in sys.modules:
        raise RuntimeError(f"{_MODULE} was imported before this plugin could load it")
    quantizer_module_without_registration()
    if side == "ours":
        import qcore
        from qinductor_x86.lowering import other_x86_passes, switch_off_torch_builtins

        switch_off_torch_builtins()
        qcore.get_lowering("x86").install()
        assert not any(other_x86_passes().values()), other_x86_passes()


def pytest_report_header(config: pytest.Config) -> list[str]:
    from qcore.int8 import cpu_profile as host

    return [
        f"x86 int8 passes: {os.environ['QCORE_UPSTREAM_SIDE']}, "
        f"route {os.environ['QCORE_UPSTREAM_ROUTE']} (qcore target: {host.target().describe()})"
    ]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Each test's outcome as it comes (``QCORE_UPSTREAM_PROGRESS``, one line per phase that
    decides it), so that a long run read half-way says what it has measured so far."""
    path = os.environ.get("QCORE_UPSTREAM_PROGRESS")
    if path and (report.when == "call" or report.outcome != "passed"):
        with open(path, "a") as progress:
            progress.write(f"{report.outcome} {report.nodeid}\n")
