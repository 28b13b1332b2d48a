"""Sends the bytecode of third-party modules to one folder that every tox env of a run
shares (``.ci/shared_bytecode.py`` installs this module into each env's site-packages and
calls :func:`activate` from a ``.pth`` line at every interpreter start).

Imported at every interpreter start, so it imports nothing that is not loaded already.
"""

from __future__ import annotations

import _imp
import os
from importlib import _bootstrap_external as _bootstrap
from typing import Any

#: the site-packages this module was installed into, and the standard library (the same
#: path in every env, but under each env's own pycache prefix)
SITE = os.path.dirname(os.path.abspath(__file__)) + os.sep
STDLIB = os.path.dirname(os.path.abspath(os.__file__)) + os.sep
#: pyc flags (PEP 552): hash-based, and checked against the source on every import
CHECKED_HASH = (0b11).to_bytes(4, "little")


def activate(first_party: str) -> None:
    """While ``QCI_SHARED_BYTECODE`` names a folder, the bytecode of the standard library
    and of every module under :data:`SITE` whose top-level name is not in ``first_party``
    (comma-separated) goes there, as checked-hash pycs: valid for a source of the same content only, whatever
    its path or mtime (each env's copy of torch has its own path; uv copies rather than
    links when its cache is on another file system). First-party modules keep their
    bytecode per env, where the mutation check deletes it (``.ci/mutants.py``)."""
    shared = os.environ.get("QCI_SHARED_BYTECODE")
    if not shared:
        return
    own = frozenset(first_party.split(","))
    shared_root = os.path.join(shared, "")
    original_cache = _bootstrap.cache_from_source
    original_write = _bootstrap.SourceFileLoader._cache_bytecode

    def cache_from_source(path: str, debug_override: Any = None, *, optimization: Any = None) -> str:
        cached: str = original_cache(path, debug_override, optimization=optimization)
        if path.startswith(SITE):
            relative = path[len(SITE) :]
            if relative.split(os.sep, 1)[0].partition(".")[0] in own:
                return cached
            folder = os.path.join(shared_root, "site", os.path.dirname(relative))
        elif path.startswith(STDLIB):
            folder = os.path.join(shared_root, "stdlib", os.path.dirname(path[len(STDLIB) :]))
        else:
            return cached
        return os.path.join(folder, os.path.basename(cached))

    def cache_bytecode(self: Any, source_path: str, bytecode_path: str, data: bytes) -> Any:
        # the loader writes timestamp pycs; a shared one must not trust another env's mtime
        if bytecode_path.startswith(shared_root) and data[4:8] != CHECKED_HASH:
            digest = _imp.source_hash(_bootstrap._RAW_MAGIC_NUMBER, self.get_data(source_path))
            data = bytes(data[:4]) + CHECKED_HASH + digest + bytes(data[16:])
        return original_write(self, source_path, bytecode_path, data)

    _bootstrap.cache_from_source = cache_from_source
    _bootstrap.SourceFileLoader._cache_bytecode = cache_bytecode
