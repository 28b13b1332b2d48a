"""Sends the bytecode of third-party modules and of the standard library to one folder
that every tox env of a run shares (``.ci/shared_bytecode.py`` installs this module into
each env's site-packages and calls :func:`activate` from a ``.pth`` line at every
interpreter start).

A pyc there is named after its source file's identity (device and inode), not its path:
each env's copy of torch has a path of its own, but uv installs them as hard links of one
cache entry, so every env's ``torch/__init__.py`` is the same file. Its timestamp header
is then checked against that very file, as for any pyc. Files that are not shared (uv
copies rather than links when its cache is on another file system) share nothing, and
each env compiles its own, as without the hook.

Imported at every interpreter start, so it imports nothing that is not loaded already:
not ``typing``, not even the ``importlib`` package (``importlib._bootstrap_external`` is
the frozen ``_frozen_importlib_external``, whose loaders call the function replaced here).
"""

import _frozen_importlib_external as _bootstrap
import os

#: the site-packages this module was installed into, and the standard library (every env
#: reads the same files, but compiled them under its own pycache prefix)
SITE = os.path.dirname(os.path.abspath(__file__)) + os.sep
STDLIB = os.path.dirname(os.path.abspath(os.__file__)) + os.sep


def activate(first_party: str) -> None:
    """While ``QCI_SHARED_BYTECODE`` names a folder, the bytecode of the standard library
    and of every module under :data:`SITE` whose top-level name is not in ``first_party``
    (comma-separated) goes there. First-party modules keep their bytecode per env, where
    the mutation check deletes it after each edit (``.ci/mutants.py``)."""
    shared = os.environ.get("QCI_SHARED_BYTECODE")
    # (site runs the .pth line once per site-packages entry: a venv's lib64 links to lib)
    if not shared or getattr(_bootstrap.cache_from_source, "shares_bytecode", False):
        return
    own = frozenset(first_party.split(","))
    original = _bootstrap.cache_from_source

    def cache_from_source(path: str, debug_override: object = None, *, optimization: object = None) -> str:
        cached: str = original(path, debug_override, optimization=optimization)
        if path.startswith(SITE):
            if path[len(SITE) :].split(os.sep, 1)[0].partition(".")[0] in own:
                return cached
        elif not path.startswith(STDLIB):
            return cached
        try:
            source = os.stat(path)
        except OSError:
            return cached
        # (the cached name keeps the module name, interpreter tag and optimization level)
        return os.path.join(shared, f"{source.st_dev}-{source.st_ino}-{os.path.basename(cached)}")

    cache_from_source.shares_bytecode = True  # type: ignore[attr-defined]
    _bootstrap.cache_from_source = cache_from_source
