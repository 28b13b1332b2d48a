"""Every fresh-interpreter measurement of this suite that compiles under one lowering mode,
in one interpreter per mode: ``python probe_modes.py MODE PART [PART ...]``.

Which x86 int8 passes exist is process-wide and permanent (torch registers its copy at the
first compile, torchao at import), so a mode is set up first, in a fresh interpreter, and
every measurement of that mode then runs in it, in the fixed order below (a part that
installs this package's lowering next to an upstream copy comes last, after every
measurement of the upstream copy alone):

* ``standalone``: torch's copy switched off before the first compile, torchao's never
  registered; this package's lowering is the only one;
* ``reference``: torchao's x86 quantizer module imported as users import it (it registers
  its passes, next to torch's default copy); no lowering of ours, but in the last part,
  ``chained``, which installs ours after torchao's;
* ``builtins``: upstream's copy only: torch 2.13's own (torchao's quantizer loaded without
  its registration, ``torchao_reference.load``), or, on a torch that dropped its copy
  (2.14 on), torchao 0.18's; no lowering of ours, but in the last part, ``signed``, which
  installs ours next to upstream's copy.

On a torch that dropped its copy (2.14 on) ``reference`` and ``builtins`` set up the same
passes (torchao's, as users import them), so they share one interpreter: each mode's parts
that measure upstream's passes alone first, then ``chained`` (which checks that its
uninstall restores upstream's chain), then ``signed``; and torchao's quantizer on a model
of both (``lower_models.torchao_static``) is compiled once for the two.

Each part is one measurement module's function; its result (JSON values) comes back with
``qcore.testing.fresh.emit`` as ``{mode: {part: result}}``, each result with the other
passes registered right after it (``_other_passes``), and each mode's ``_host``: the int8
target of this machine. A part that raises reports ``{"error": traceback}``; the next
parts still run. The tests request parts through the ``probes`` fixture (conftest.py),
which runs only the parts the collected tests name in their ``PROBED``:
``python probe_modes.py MODE:PART [MODE:PART ...]`` (modes of one interpreter, see
``lowering_zoo.probe_interpreter``).
"""

from __future__ import annotations

import sys
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import codegen_probe
import lower_builtin
import lower_fanout
import lower_models
import lowering_counters_probe
import lowering_zoo as zoo
import test_lowering_signed as signed
import torch._inductor.config as inductor_config

import qcore
from qcore.testing.fresh import emit
from qinductor_x86 import lowering as x86_lowering


def chained_after_torchaos() -> dict[str, Any]:
    """This package's lowering installed after torchao's passes registered (torchao's
    quantizer, ConvStem): torchao's pre-grad pass kept first in the chain, restored on
    uninstall, and what was compiled."""
    import torchao_reference

    module = torchao_reference.load_with_side_effects()  # (imported by the mode's set-up)
    theirs = inductor_config.pre_grad_custom_pass
    lowering = qcore.get_lowering("x86")
    lowering.install()
    chained = inductor_config.pre_grad_custom_pass
    quantizer = module.X86InductorQuantizer()
    quantizer.set_global(module.get_default_x86_inductor_quantization_config())
    inputs = (zoo.example(2, 3, 16, 16),)
    result = zoo.lower(zoo.quantize(zoo.ConvStem(), inputs, quantizer), inputs)
    lowering.uninstall()
    return {
        "kernels": len(result.kernels),
        "reported_kernels": result.report.int8_kernels,
        "codes": result.codes_json(),
        "counters": {k: v for k, v in result.counters.items() if k.endswith("_count")},
        "lowered": dict(result.report.lowered),
        "theirs_kept_in_chain": isinstance(chained, list) and chained[0] is theirs,
        "theirs_restored": inductor_config.pre_grad_custom_pass is theirs,
    }


def _load_torchaos_passes() -> None:
    import torchao_reference

    torchao_reference.load_with_side_effects()


def _upstream_passes_alone() -> None:
    """Upstream's copy of the passes for this torch, and no other: torch's own where it
    carries one (2.13 registers it at the first compile), torchao 0.18's where torch dropped
    it (2.14 on)."""
    if not x86_lowering.torch_carries_x86_passes():
        _load_torchaos_passes()


#: mode -> (its set-up, before anything compiles; its parts, in the order they run)
MODES: dict[str, tuple[Callable[[], object], dict[str, Callable[[], Any]]]] = {
    "standalone": (
        x86_lowering.switch_off_torch_builtins,
        {
            "counters": lambda: lowering_counters_probe.measure_all(ours=True),
            "models": lower_models.ours,
            "fanout": lambda: lower_fanout.measure_all("ours"),
            "signed": lambda: signed.compile_cases(list(signed.CASES)),
            "runtime_weight": zoo.runtime_weight_lowered,
            "codegen": lambda: codegen_probe.measure("ours"),
        },
    ),
    "reference": (
        _load_torchaos_passes,
        {
            "counters": lambda: lowering_counters_probe.measure_all(ours=False),
            "models": lower_models.torchao,
            "codegen": lambda: codegen_probe.measure("torch"),
            "chained": chained_after_torchaos,  # last: installs ours
        },
    ),
    "builtins": (
        _upstream_passes_alone,
        {
            "fanout": lambda: lower_fanout.measure_all("torch"),
            "builtin": lower_builtin.measure_all,
            "signed": lambda: signed.compile_cases(list(signed.BUILTIN_CASES)),  # last: ours
        },
    ),
}


#: Parts that install this package's lowering next to upstream's copy: after every other
#: part of their interpreter, in the order of :data:`MODES`.
LAST = {("reference", "chained"), ("builtins", "signed")}


def main(wanted: list[str]) -> None:
    pairs = [tuple(arg.split(":", 1)) for arg in wanted]
    modes = [mode for mode in MODES if any(m == mode for m, _ in pairs)]
    unknown = {(m, p) for m, p in pairs if m not in MODES or p not in MODES[m][1]}
    assert not unknown, f"no such parts {sorted(unknown)}"
    assert len({zoo.probe_interpreter(mode) for mode in modes}) == 1, f"modes {modes} need interpreters of their own"
    # (one set-up for all: ``builtins`` shares an interpreter only where its set-up loads
    # torchao's passes, as ``reference``'s does)
    MODES[modes[0]][0]()
    host = qcore.host.target()
    ordered = [(m, name) for m in modes for name in MODES[m][1] if (m, name) in pairs]
    ordered = [p for p in ordered if p not in LAST] + [p for p in ordered if p in LAST]
    results: dict[str, dict[str, Any]] = {
        mode: {"_host": {"isa": host.isa, "saturates_u8s8": host.saturates_u8s8}} for mode in modes
    }
    for mode, name in ordered:
        try:
            measured = MODES[mode][1][name]()
        except Exception:  # noqa: BLE001 - reported to the tests, which name it
            measured = {"error": traceback.format_exc()[-3000:]}
        measured["_other_passes"] = x86_lowering.other_x86_passes()
        results[mode][name] = measured
    emit(results)


if __name__ == "__main__":
    main(sys.argv[1:])
