"""The names that identify this distribution, and whether the unrelated ``qcore`` is there.

Standard library only, and outside the ``qcore`` package, so the command's entry point
can read them when another library's files have replaced ``qcore/__init__.py``.
"""

from __future__ import annotations

from importlib import metadata

#: The name qcore publishes under. ``qcore`` on the public index is an unrelated library
#: with the same import name, so plugins require this name, never ``qcore``.
CORE_DISTRIBUTION = "qcore-torch"
#: The entry-point group that marks a distribution as this qcore (see pyproject.toml).
CORE_MARKER_GROUP = "qcore.core"
#: The unrelated library that holds the name ``qcore`` on the public index.
FOREIGN_DISTRIBUTION = "qcore"


def foreign_qcore_reason() -> str | None:
    """Why an installed ``qcore`` distribution endangers this one, or None when none is there.

    A ``qcore`` distribution carrying our marker entry point is an install of ours from
    before the rename; anything else is theirs. Both write ``site-packages/qcore/``, so
    whichever was installed last owns the files, and a plugin resolved against theirs
    would fail with an opaque ImportError.
    """
    try:
        dist = metadata.distribution(FOREIGN_DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return None
    if any(ep.group == CORE_MARKER_GROUP for ep in dist.entry_points):
        return None
    location = getattr(dist, "_path", "?")
    return (
        f"the installed '{FOREIGN_DISTRIBUTION}' distribution (version {dist.version}, "
        f"{location}) is the unrelated PyPI library of the same import name, not "
        f"{CORE_DISTRIBUTION}; both install into site-packages/qcore: "
        f"pip uninstall {FOREIGN_DISTRIBUTION} && pip install --force-reinstall {CORE_DISTRIBUTION}"
    )


