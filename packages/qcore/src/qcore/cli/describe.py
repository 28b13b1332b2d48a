"""Human-readable tables of what a plugin provides, for ``qcore show``."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from typing import Any

from qcore.cli.tables import render_notes, render_table, terminal_width
from qcore.fx.patterns.text import op_name, pattern_text
from qcore.plugins.api import get_backend_config, get_quantizer, install_quantizer_extensions
from qcore.plugins.discovery import REGISTRY, PluginInfo
from qcore.pt2e.annotation.registry import ANNOTATORS
from qcore.pt2e.derived.names import derived_names

#: The OUTPUT column: the output's own observer, the input's (shared), or none at all.
_OBSERVATION = {
    "OUTPUT_USE_DIFFERENT_OBSERVER_AS_INPUT": "own",
    "OUTPUT_SHARE_OBSERVER_WITH_INPUT": "shared",
    "INPUT_OUTPUT_NOT_OBSERVED": "none",
}


def _dtype_text(dtype_config: dict[str, Any]) -> str:
    def short(key: str) -> str:
        value = dtype_config.get(key)
        dtype = getattr(value, "dtype", value)
        return str(dtype).removeprefix("torch.") if dtype is not None else "-"

    text = f"{short('input_dtype')}→{short('output_dtype')}"
    if dtype_config.get("weight_dtype") is not None:
        text += f" w:{short('weight_dtype')}"
    return text + (" dyn" if dtype_config.get("is_dynamic") else "")


def describe_plugins(plugins: Sequence[PluginInfo], width: int | None = None) -> str:
    """The ``qcore list`` table. Reasons (import errors, conflicts) are notes under the
    table, referenced from the STATUS cell: inline, one long reason would push every
    other row past the terminal's width."""
    notes: list[str] = []
    rows = []
    for p in plugins:
        status = p.status
        if p.reason:
            if p.reason not in notes:  # both sides of a conflict share one note
                notes.append(p.reason)
            status += f" [{notes.index(p.reason) + 1}]"
        rows.append([p.kind, p.name, p.distribution, p.version, status])
    table = render_table(
        ["KIND", "NAME", "DISTRIBUTION", "VERSION", "STATUS"],
        rows,
        width=width,
        min_widths={"KIND": 19, "STATUS": 13},
    )
    return f"{table}\n\n{render_notes(notes, width)}" if notes else table


def describe_backend(name: str) -> str:
    config = get_backend_config(name)
    rows = []
    for pattern_config in config.configs:
        spec = pattern_config.to_dict()
        fused = spec.get("fused_module") or spec.get("root_module")
        rows.append(
            [
                pattern_text(pattern_config),
                _OBSERVATION.get(spec["observation_type"].name, spec["observation_type"].name),
                "; ".join(sorted({_dtype_text(d) for d in spec.get("dtype_configs", [])})),
                op_name(fused) if fused is not None else "",
            ]
        )
    header = f"backend {name} ({REGISTRY.distribution('backend', name)}): {len(rows)} patterns"
    table = render_table(
        ["PATTERN", "OUTPUT", "DTYPES", "MODULE"],
        rows,
        width=terminal_width(),
        # most dtype configs ("quint8→quint8 w:qint8") stay on one line
        min_widths={"DTYPES": 21},
    )
    return f"{header}\n{table}\n"


def describe_quantizer(name: str) -> str:
    if name in derived_names():
        return describe_derived_quantizer(name)
    plugin = REGISTRY.load("quantizer", name)
    namespace = plugin.annotator_namespace or name
    install_quantizer_extensions(name)
    get_quantizer(name)  # a quantizer registers its annotators when its module loads
    owner = REGISTRY.distribution("quantizer", name)
    rows = [
        [
            a.name,
            a.marks,
            _with_source(a.description, ANNOTATORS.source(namespace, a.name), owner),
        ]
        for a in ANNOTATORS.annotators(namespace)
    ]
    header = f"quantizer {name} ({owner}): {len(rows)} annotators"
    table = render_table(
        ["ANNOTATOR", "MODES", "DESCRIPTION"],
        rows,
        width=terminal_width(),
        min_widths={"DESCRIPTION": 30},
    )
    return f"{header}\n{table}\n"


def describe_derived_quantizer(name: str) -> str:
    """A derived quantizer's annotators (one per pattern of its backend), then the
    patterns it cannot express and why."""
    quantizer: Any = get_quantizer(name)
    rows = [[a.name, a.marks, a.description] for a in quantizer.annotators()]
    owner = REGISTRY.distribution("backend", name)
    header = f"quantizer {name} (derived from backend {name}, {owner}): {len(rows)} annotators"
    table = render_table(
        ["ANNOTATOR", "MODES", "PATTERN"], rows, width=terminal_width(),
        min_widths={"PATTERN": 30},
    )  # fmt: skip
    skipped = [str(u) for u in quantizer.report()]
    notes = (
        f"\nnot derived (stays in float):\n{render_notes(skipped, terminal_width())}\n"
        if skipped
        else ""
    )
    return f"{header}\n{table}\n{notes}"


def _with_source(description: str, source: str, owner: str) -> str:
    """The description, naming the distribution when an extension added the annotator
    (the header names the quantizer's own)."""
    if source == owner:
        return description
    return f"{description}; added by {source}" if description else f"added by {source}"


def describe_lowering(name: str) -> str:
    plugin = REGISTRY.load("lowering", name)
    text = f"lowering {name} ({REGISTRY.distribution('lowering', name)}): {plugin.description}"
    return textwrap.fill(text, terminal_width(), subsequent_indent="  ") + "\n"


DESCRIBERS: dict[str, Callable[[str], str]] = {
    "backend": describe_backend,
    "quantizer": describe_quantizer,
    "lowering": describe_lowering,
}
