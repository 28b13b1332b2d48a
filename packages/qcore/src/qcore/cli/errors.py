"""How the ``qcore`` command reports a failure: one line saying what went wrong, one hint
saying what to do. The traceback is for ``--debug``: a user who mistyped a plugin name or
has a broken plugin installed needs its name and the next step, not qcore's call stack."""

from __future__ import annotations

from qcore.errors import (
    ForeignQcoreError,
    MissingExtraError,
    PluginConflictError,
    PluginError,
    PluginNotFoundError,
)

#: Exit status for an error qcore reports on purpose (unknown or broken plugin, a command
#: line it cannot act on), as argparse uses for usage errors; anything unexpected exits 1.
PLUGIN_ERROR_STATUS = 2
UNEXPECTED_ERROR_STATUS = 1

_DEBUG_HINT = "rerun with --debug for the traceback"


class CommandError(Exception):
    """The command line asks for what the command cannot do (a kind it does not take, a
    file it cannot write), found before any work starts; ``hint`` is the next step."""

    def __init__(self, message: str, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


def _summary(exc: BaseException) -> str:
    """``Type: first non-blank line of the message``."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__


def error_line(exc: BaseException) -> str:
    """What went wrong, on one line.

    qcore's own errors are written to be read as they are. Anything else gets its type,
    the first line of its message and that of its cause: multi-line messages (NumPy's
    import advice) put the useful part in the chained exception.
    """
    if isinstance(exc, PluginError | CommandError):
        return " ".join(str(exc).split())
    text = _summary(exc)
    cause = exc.__cause__ or (None if exc.__suppress_context__ else exc.__context__)
    return f"{text} (caused by {_summary(cause)})" if cause is not None else text


def hint(exc: BaseException) -> str:
    """The next step for the user, given what failed."""
    if isinstance(exc, CommandError):
        return exc.hint
    if isinstance(exc, MissingExtraError):
        return "install the extra with the command above, then rerun"
    if isinstance(exc, PluginNotFoundError):
        return "'qcore list' shows the installed plugins and their names"
    if isinstance(exc, PluginConflictError):
        return "'qcore list' shows the distributions that claim the name"
    if isinstance(exc, ForeignQcoreError):
        return "'pip show qcore' says which qcore is installed; " + _DEBUG_HINT
    if isinstance(exc, PluginError):
        return "'qcore list' shows every plugin's status; " + _DEBUG_HINT
    return _DEBUG_HINT + "; if the error persists, report it with that output"


def status(exc: BaseException) -> int:
    expected = isinstance(exc, PluginError | CommandError)
    return PLUGIN_ERROR_STATUS if expected else UNEXPECTED_ERROR_STATUS
