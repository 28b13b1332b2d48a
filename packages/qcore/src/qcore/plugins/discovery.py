"""Plugin discovery through entry points: metadata first, imports on first use.

Every failure is kept per plugin, so one broken distribution never stops the others,
and every message names the distribution that caused it.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from importlib import metadata
from typing import Any

from _qcore_torch.identity import foreign_qcore_reason

from qcore.errors import ForeignQcoreError, PluginConflictError, PluginError, PluginNotFoundError
from qcore.plugin_api import DESCRIPTOR_TYPES, GROUPS, PLUGIN_API_VERSION

DISABLE_ENV = "QCORE_DISABLE_PLUGINS"


@dataclass(frozen=True)
class PluginInfo:
    """One row of ``qcore.list_plugins()``: what is installed and in what state.

    ``status`` is ``available`` (found, not imported yet), ``loaded``, ``disabled``,
    ``conflict`` (another distribution claims the name) or ``error``; ``reason`` says why
    for the last three.
    """

    kind: str
    name: str
    distribution: str
    version: str
    entry_point: str
    status: str
    reason: str = ""


@dataclass(frozen=True)
class _Entry:
    kind: str
    name: str
    distribution: str
    version: str
    entry_point: metadata.EntryPoint

    @property
    def label(self) -> str:
        return f"{self.kind} plugin '{self.name}' (distribution {self.distribution} {self.version})"


def _dist_of(ep: metadata.EntryPoint) -> tuple[str, str]:
    dist = ep.dist
    if dist is None:  # pragma: no cover - only for hand-built EntryPoint objects
        return "<unknown distribution>", "?"
    return dist.metadata["Name"] or dist.name, dist.version


def disabled_names() -> frozenset[str]:
    """Names (``name`` or ``kind:name``) listed in ``QCORE_DISABLE_PLUGINS``."""
    raw = os.environ.get(DISABLE_ENV, "")
    return frozenset(part.strip() for part in raw.split(",") if part.strip())


class PluginRegistry:
    """Entry-point index with per-plugin load results; ``reset()`` rescans."""

    def __init__(self) -> None:
        self._entries: dict[str, dict[str, list[_Entry]]] | None = None
        self._loaded: dict[tuple[str, str], Any] = {}
        self._errors: dict[tuple[str, str], PluginError] = {}

    def reset(self) -> None:
        self._entries = None
        self._loaded.clear()
        self._errors.clear()

    def _index(self) -> dict[str, dict[str, list[_Entry]]]:
        if self._entries is None:
            index: dict[str, dict[str, list[_Entry]]] = {}
            for kind, group in GROUPS.items():
                by_name: dict[str, list[_Entry]] = defaultdict(list)
                for ep in metadata.entry_points(group=group):
                    dist, version = _dist_of(ep)
                    by_name[ep.name].append(_Entry(kind, ep.name, dist, version, ep))
                index[kind] = dict(by_name)
            self._entries = index
        return self._entries

    def names(self, kind: str) -> list[str]:
        return sorted(self._index().get(kind, {}))

    def entries(self) -> Iterable[_Entry]:
        for by_name in self._index().values():
            for claims in by_name.values():
                yield from claims

    # -- state -------------------------------------------------------------------------

    def _conflict(self, claims: list[_Entry]) -> PluginConflictError | None:
        dists = sorted({c.distribution for c in claims})
        if len(dists) < 2:
            return None
        first = claims[0]
        return PluginConflictError(
            f"{first.kind} plugin name '{first.name}' is claimed by several distributions: "
            + ", ".join(dists)
            + f"; uninstall one, or disable the name with {DISABLE_ENV}"
        )

    def _is_disabled(self, kind: str, name: str) -> bool:
        off = disabled_names()
        return name in off or f"{kind}:{name}" in off

    def info(self) -> list[PluginInfo]:
        rows: list[PluginInfo] = []
        for kind, by_name in self._index().items():
            for name, claims in sorted(by_name.items()):
                conflict = self._conflict(claims)
                for entry in claims:
                    status, reason = self._status(entry, conflict)
                    rows.append(
                        PluginInfo(
                            kind=kind,
                            name=name,
                            distribution=entry.distribution,
                            version=entry.version,
                            entry_point=entry.entry_point.value,
                            status=status,
                            reason=reason,
                        )
                    )
        return rows

    def _status(self, entry: _Entry, conflict: PluginConflictError | None) -> tuple[str, str]:
        key = (entry.kind, entry.name)
        if self._is_disabled(entry.kind, entry.name):
            return "disabled", f"listed in {DISABLE_ENV}"
        if conflict is not None:
            return "conflict", str(conflict)
        if key in self._errors:
            return "error", str(self._errors[key])
        if key in self._loaded:
            return "loaded", ""
        return "available", ""

    def record_failure(self, kind: str, name: str, error: PluginError) -> None:
        """Keep a failure found after loading (a factory that raised or returned junk)."""
        self._errors[(kind, name)] = error

    # -- loading -----------------------------------------------------------------------

    def _claims(self, kind: str, name: str) -> list[_Entry]:
        claims = self._index().get(kind, {}).get(name)
        if not claims:
            known = ", ".join(self.names(kind)) or "none installed"
            raise PluginNotFoundError(f"no {kind} plugin named '{name}' (known: {known})")
        return claims

    def load(self, kind: str, name: str) -> Any:
        """The descriptor for ``kind``/``name``, importing its module on first use."""
        claims = self._claims(kind, name)
        key = (kind, name)
        if self._is_disabled(kind, name):
            raise PluginError(
                f"{claims[0].label} is disabled by {DISABLE_ENV}={os.environ.get(DISABLE_ENV)}"
            )
        conflict = self._conflict(claims)
        if conflict is not None:
            raise conflict
        if key in self._errors:
            raise self._errors[key]
        if key not in self._loaded:
            try:
                self._loaded[key] = self._import(claims[0])
            except PluginError as exc:
                self._errors[key] = exc
                raise
        return self._loaded[key]

    def _import(self, entry: _Entry) -> Any:
        foreign = foreign_qcore_reason()
        if foreign is not None:
            raise ForeignQcoreError(f"{entry.label} cannot load: {foreign}")
        try:
            descriptor = entry.entry_point.load()
        except Exception as exc:  # any import failure is the plugin's, not ours
            raise PluginError(
                f"{entry.label} failed to import {entry.entry_point.value}: "
                f"{type(exc).__name__}: {exc}"
            ) from exc
        expected = DESCRIPTOR_TYPES[entry.kind]
        if not isinstance(descriptor, expected):
            raise PluginError(
                f"{entry.label}: {entry.entry_point.value} is a {type(descriptor).__name__}, "
                f"expected a qcore.plugin_api.{expected.__name__}"
            )
        if descriptor.api_version != PLUGIN_API_VERSION:
            raise PluginError(
                f"{entry.label} targets plugin API version {descriptor.api_version}, "
                f"this qcore provides version {PLUGIN_API_VERSION}"
            )
        target = getattr(descriptor, "target", None)
        if target is not None and entry.name.split(".", 1)[0] != target:
            raise PluginError(
                f"{entry.label}: the entry point says target '{entry.name.split('.', 1)[0]}' "
                f"but its descriptor targets '{target}' "
                "(extension entry points are named <target>.<name>)"
            )
        if entry.name not in (descriptor.name, f"{target}.{descriptor.name}"):
            raise PluginError(
                f"{entry.label}: its descriptor is named '{descriptor.name}', "
                f"but the entry point is named '{entry.name}'"
            )
        return descriptor

    def distribution(self, kind: str, name: str) -> str:
        claims = self._claims(kind, name)
        return f"{claims[0].distribution} {claims[0].version}"

    def extensions(self, kind: str, target: str) -> list[tuple[str, Any]]:
        """Extension descriptors of ``kind`` aimed at ``target``, with their distribution.

        Extension entry points are named ``<target>.<name>``, so only the extensions of
        the plugin in use are imported. A broken one raises rather than being skipped:
        silently dropping extra patterns would change the numerics of what it extends.
        """
        found: list[tuple[str, Any]] = []
        for name in self.names(kind):
            if name.split(".", 1)[0] != target or self._is_disabled(kind, name):
                continue
            descriptor = self.load(kind, name)
            found.append((self.distribution(kind, name), descriptor))
        return found


REGISTRY = PluginRegistry()
