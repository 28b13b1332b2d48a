"""``qcore.get_lowering("x86")``: install, uninstall, use as a context manager, report."""

from __future__ import annotations

import re
from collections import Counter
from importlib import metadata
from types import TracebackType
from typing import Any

from qcore.errors import UnsupportedTorchError
from qcore.int8.cpu_profile import target
from qinductor_x86.lowering.report import GraphRecord, LoweringReport

DISTRIBUTION = "qinductor-x86"


def unsupported_torch_message(missing: list[str]) -> str:
    """One line: the torch found, what it lacks, and the range this distribution declares."""
    supported = next(
        (r for r in metadata.requires(DISTRIBUTION) or [] if re.match(r"torch\s*[<>=!~;]", r)),
        "the torch its metadata names",
    )
    more = f" and {len(missing) - 1} more" if len(missing) > 1 else ""
    return (
        f"{DISTRIBUTION} {metadata.version(DISTRIBUTION)} cannot lower on torch "
        f"{metadata.version('torch')}: "
        f"it lacks {missing[0]}{more}; this release of {DISTRIBUTION} supports {supported}"
    )


class X86Lowering:
    """oneDNN int8 lowering for TorchInductor, installed only while you ask for it.

    ``install()`` adds three custom passes to Inductor's config hooks, after any passes
    already there; ``uninstall()`` takes exactly those out again. Installing twice is
    harmless; ``with lowering:`` installs for the block (and leaves an earlier explicit
    install in place). Compile with ``torch._inductor.config.freezing = True`` under
    ``torch.no_grad()``. ``report()`` describes the graphs compiled since the last install.
    """

    def __init__(self) -> None:
        self._installed: list[Any] = []
        self._entered: list[bool] = []
        self._report = LoweringReport(target="(not installed yet)")

    @property
    def installed(self) -> bool:
        return bool(self._installed)

    def install(self) -> None:
        if self.installed:
            return
        # Inductor loads here, on first install, not when the plugin is looked up
        from qinductor_x86 import _torch_private as private
        from qinductor_x86.lowering import custom_passes, hooks

        missing = private.missing_features()
        if missing:
            raise UnsupportedTorchError(unsupported_torch_message(missing))
        self._report = LoweringReport(
            target=target().describe(), other_passes=private.builtin_x86_passes()
        )
        made = custom_passes.make_passes(self._report)
        self._installed = [hooks.add(hook, p) for hook, p in made.items()]

    def uninstall(self) -> None:
        from qinductor_x86.lowering import hooks

        for installed in reversed(self._installed):
            hooks.remove(installed)
        self._installed = []

    def report(self) -> LoweringReport:
        """A snapshot: each pattern lowered with counts, the int8 kernels, and every
        quantize/dequantize left in float with the reason."""
        now = self._report
        graphs = [
            GraphRecord(Counter(g.lowered), list(g.left_in_float), g.int8_kernels)
            for g in now.graphs
        ]
        return LoweringReport(now.target, dict(now.other_passes), graphs, now.lift_ups)

    # context manager ----------------------------------------------------------------

    def __enter__(self) -> X86Lowering:
        self._entered.append(not self.installed)
        self.install()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._entered.pop():
            self.uninstall()
