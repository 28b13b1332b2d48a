"""The deployed side, run as a script in a fresh interpreter: load shipped files the way a
server or a phone does, and save what they compute for the test to compare.

    python deployed.py MARK MODE FILE [FILE ...]

``MODE`` ``torch-only``: before anything else, qcore, its plugins and torchao are made
unimportable (an import of any of them raises), then each ``NAME.pt2`` (an AOTInductor
package, ``torch._inductor.aoti_load_package``) or ``NAME.pte`` (an ExecuTorch program,
ExecuTorch's runtime) runs on the inputs in ``NAME.golden.pt``; its outputs are saved next
to it (:func:`outputs_path`). ``MODE`` ``with-qcore``: ``NAME.pt`` is loaded with ``torch.load``,
``NAME.pt2`` with ``qcore.load_exported``, after a plain ``torch.export.load`` of the
first program was tried (it fails in a fresh process, which is why the loader exists), and
``NAME.state.pt`` is a state dict, loaded as the guide says into a model this process
converts itself (``qcore.fx.quantize(model, "onednn", [example_inputs[0]])``), where
``model`` and ``example_inputs`` come from the ``.py`` file among the files (the model's
code, run first).

The last stdout line is ``MARK`` and a JSON report (what ``qcore.testing.fresh`` reads).
"""

from __future__ import annotations

import importlib.abc
import json
import logging
import runpy
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: What the deployed side of the x86 and phone flows must not need.
NOT_DEPLOYED = frozenset(
    {
        "qcore",
        "_qcore_torch",
        "qbackend_onednn",
        "qbackend_executorch",
        "qquantizer_xnnpack",
        "qinductor_x86",
        "torchao",
    }
)


class _NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Sequence[str] | None, target: Any = None) -> None:
        if name.partition(".")[0] in NOT_DEPLOYED:
            raise ModuleNotFoundError(f"{name} is not installed where this file is deployed")


class _Logged(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        error = record.exc_info[1] if record.exc_info else None
        self.lines.append(
            record.getMessage() + (f" {type(error).__name__}: {error}" if error else "")
        )


def outputs_path(file: Path) -> Path:
    """Where the outputs ``file`` computed are saved: ``FILE.deployed.pt``, after the whole
    file name, since files of one stem run too (the guide's ``cnn_xnnpack.pt2``, loaded
    with qcore, and ``cnn_xnnpack.pte``, its lowering: one golden pair, two outputs)."""
    return file.with_name(f"{file.name}.deployed.pt")


def _as_tuple(value: Any) -> tuple[Any, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def torch_only(files: list[Path]) -> dict[str, Any]:
    sys.meta_path.insert(0, _NotInstalled())
    import torch

    ran = []
    for file in files:
        golden = torch.load(file.with_suffix(".golden.pt"))
        inputs = _as_tuple(golden["input"])
        if file.suffix == ".pte":
            from executorch.runtime import Runtime

            method = Runtime.get().load_program(str(file)).load_method("forward")
            outputs = list(method.execute(list(inputs)))
        else:
            package = torch._inductor.aoti_load_package(str(file))
            with torch.no_grad():
                outputs = list(_as_tuple(package(*inputs)))
        torch.save(outputs, outputs_path(file))
        ran.append(file.name)
    loaded = sorted({m.partition(".")[0] for m in sys.modules} & NOT_DEPLOYED)
    return {"ran": ran, "imported": loaded}


def with_qcore(files: list[Path]) -> dict[str, Any]:
    import torch

    programs = [f for f in files if f.suffix == ".pt2"]
    plain_load_error = None
    logged = _Logged()  # torch logs the op it could not resolve, then raises
    logging.getLogger("torch.export").addHandler(logged)
    try:
        torch.export.load(programs[0])
    except Exception as error:  # noqa: BLE001  (what torch raises is the finding)
        plain_load_error = f"{type(error).__name__}: {error} (logged: {' | '.join(logged.lines)})"
    logging.getLogger("torch.export").removeHandler(logged)
    import qcore

    code = [f for f in files if f.suffix == ".py"]
    namespace = runpy.run_path(str(code[0])) if code else {}
    ran, changed = [], {}
    for file in files:
        if file.suffix == ".py":
            continue
        golden = torch.load(file.with_suffix(".golden.pt"))
        inputs = _as_tuple(golden["input"])
        if file.suffix == ".pt2":
            model = qcore.load_exported(file).module()
        elif file.suffixes[-2:] == [".state", ".pt"]:
            model = qcore.fx.quantize(
                namespace["model"], "onednn", [namespace["example_inputs"][0]]
            )
            with torch.no_grad():
                before = list(_as_tuple(model(*inputs)))
            model.load_state_dict(torch.load(file))
        else:
            model = torch.load(file, weights_only=False)
        with torch.no_grad():
            outputs = list(_as_tuple(model(*inputs)))
        if file.suffixes[-2:] == [".state", ".pt"]:
            changed[file.name] = any(
                not torch.equal(a, b) for a, b in zip(before, outputs, strict=True)
            )
        torch.save(outputs, outputs_path(file))
        ran.append(file.name)
    return {
        "ran": ran,
        "plain torch.export.load": plain_load_error,
        "state dict changed the output": changed,
    }


if __name__ == "__main__":
    mark, mode, *names = sys.argv[1:]
    run = {"torch-only": torch_only, "with-qcore": with_qcore}[mode]
    print(mark + json.dumps(run([Path(name) for name in names])), flush=True)
