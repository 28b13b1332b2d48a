"""The one check an entry point makes before it needs a module that an extra installs.

torchao is optional: ``pip install qbackend-onednn`` brings qcore-torch without it, and
the PT2E API (quantizers, derived ones included) needs it. Every PT2E entry point calls
:func:`require_pt2e` first, so that an FX-only install meets one error that names the
extra, not a ModuleNotFoundError from deep inside torchao's users. ``qcore demo`` checks
its own extra's modules with :func:`require_extra` before it trains for minutes.
"""

from __future__ import annotations

import importlib
import importlib.util
from collections.abc import Sequence
from importlib import metadata

from _qcore_torch.identity import CORE_DISTRIBUTION

from qcore.errors import MissingExtraError
from qcore.plugin_api import PT2E_EXTRA

#: The torchao module the PT2E API is built on (Quantizer, prepare_pt2e, observers).
PT2E_MODULE = "torchao.quantization.pt2e"
#: Plugin kinds whose use needs the PT2E extra: a quantizer is a torchao ``Quantizer``.
PT2E_KINDS = frozenset({"quantizer"})
#: The extra that brings ``qcore demo``'s data and progress bars (and, for ``--plot``,
#: matplotlib: :data:`PLOT_MODULE`).
DEMO_EXTRA = "demo"
DEMO_MODULES = ("sklearn", "tqdm")
PLOT_MODULE = "matplotlib"


def install_command(extra: str) -> str:
    """The shell command that installs ``extra``, quoted for any shell."""
    return f"pip install '{CORE_DISTRIBUTION}[{extra}]'"


def missing_extra(entry: str, module: str, extra: str, *, found: str = "") -> MissingExtraError:
    """The error for ``entry`` (what was asked for) needing ``module``, which ``extra``
    installs; ``found`` names an installed distribution that should have had it."""
    which = f"which {found} lacks and " if found else "which "
    need = (
        f"needs {module}, {which}{CORE_DISTRIBUTION}'s '{extra}' extra installs: "
        f"{install_command(extra)}"
    )
    return MissingExtraError(entry, need, module, extra)


def require_extra(entry: str, extra: str, modules: Sequence[str]) -> None:
    """Raise :class:`~qcore.errors.MissingExtraError` naming ``entry`` and the first of
    ``modules`` that is not installed. Finds them without importing them (scikit-learn
    alone takes a second to import)."""
    for module in modules:
        if importlib.util.find_spec(module) is None:
            raise missing_extra(entry, module, extra)


def require_pt2e(entry: str) -> None:
    """Raise :class:`~qcore.errors.MissingExtraError` naming ``entry`` unless torchao's
    PT2E API imports. Costs nothing more than the import the caller is about to make."""
    try:
        importlib.import_module(PT2E_MODULE)
    except ModuleNotFoundError as exc:
        if (exc.name or "").split(".")[0] != "torchao":
            raise  # torchao is there and one of its own dependencies is not: its message says which
        if importlib.util.find_spec("torchao") is None:
            raise missing_extra(entry, "torchao", PT2E_EXTRA) from exc
        # a torchao from before the PT2E API moved into it: the extra's range has it
        found = f"torchao {_version('torchao')}"
        raise missing_extra(entry, PT2E_MODULE, PT2E_EXTRA, found=found) from exc


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "(version unknown)"
