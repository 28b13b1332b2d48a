"""Which quantizer names are derived from backends: read from entry-point metadata only,
so ``qcore list`` stays free of imports."""

from __future__ import annotations

from qcore.plugins.discovery import DISABLE_ENV, REGISTRY, PluginInfo, disabled_names

#: The entry-point column of a derived quantizer's ``qcore list`` row.
DERIVED_ENTRY_POINT = "(derived)"
#: The note every derived row of ``qcore list`` refers to.
DERIVED_NOTE = (
    "derived from the backend of the same name: no quantizer plugin has that name, so "
    "qcore derives a PT2E quantizer from the backend's BackendConfig and QConfigMapping"
)


def is_disabled(name: str) -> bool:
    """``QCORE_DISABLE_PLUGINS`` names the derived quantizer (``quantizer:name``) or its
    backend (``name``, ``backend:name``): a disabled backend derives nothing."""
    off = disabled_names()
    return bool({name, f"quantizer:{name}", f"backend:{name}"} & off)


def derived_names() -> list[str]:
    """Backends with no quantizer plugin of the same name: each has a derived quantizer."""
    quantizers = set(REGISTRY.names("quantizer"))
    return [b for b in REGISTRY.names("backend") if b not in quantizers]


def derived_rows(plugins: list[PluginInfo]) -> list[PluginInfo]:
    """A ``qcore list`` row per derived quantizer, marked with the backend it comes from
    (its status follows the backend's: a broken or disabled backend derives nothing)."""
    backends = {p.name: p for p in plugins if p.kind == "backend"}
    rows = []
    for name in derived_names():
        b = backends.get(name)
        if b is None:
            continue
        if is_disabled(name):
            status, reason = "disabled", f"listed in {DISABLE_ENV}"
        elif b.status in ("available", "loaded"):
            status, reason = "derived", DERIVED_NOTE
        else:
            status, reason = b.status, b.reason
        rows.append(PluginInfo("quantizer", name, b.distribution, b.version,
                               DERIVED_ENTRY_POINT, status, reason))  # fmt: skip
    return rows
