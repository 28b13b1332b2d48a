"""How a backend pattern and its ops are written for people: ``Conv2d → ReLU``, ``F.relu``,
``operator.add``. Shared by ``qcore show``, the conformance kit and the derived
quantizer's reports; imports nothing heavy."""

from __future__ import annotations

from typing import Any

# torch's conventional aliases, so that nn.Conv2d and its QAT twin read differently.
_MODULE_ALIASES = (
    ("torch.ao.nn.intrinsic.qat", "nniqat."),
    ("torch.ao.nn.intrinsic", "nni."),
    ("torch.ao.nn.qat", "nnqat."),
    ("torch.ao.nn.quantized.reference", "nnqr."),
    ("torch.ao.nn.quantized", "nnq."),
    ("torch.nn", ""),
)
def op_name(op: Any) -> str:
    """A short, unambiguous name for a pattern element (module class, function, method)."""
    if isinstance(op, str):
        return f"'{op}'"  # a Tensor method, as torch's patterns spell them
    module = getattr(op, "__module__", "") or ""
    name = getattr(op, "__name__", None) or repr(op)
    if module in ("_operator", "operator"):
        return f"operator.{name}"
    if name == "MatchAllNode":
        return "*"
    if module.startswith("torch.nn.functional"):
        return f"F.{name}"
    if isinstance(op, type):
        prefix = next((a for m, a in _MODULE_ALIASES if module.startswith(m)), f"{module}.")
        return prefix + name
    return f"torch.{name}" if module.startswith("torch") or not module else f"{module}.{name}"


def pattern_text(config: Any) -> str:
    """``Conv2d → ReLU`` for simple patterns; the expression tree for complex ones."""
    spec = config.to_dict()
    if "pattern" in spec:
        pattern = spec["pattern"]
        parts = pattern if isinstance(pattern, tuple) else (pattern,)
        return " → ".join(op_name(p) for p in parts)
    return _tree_text(spec["pattern_complex_format"])


def _tree_text(node: Any) -> str:
    if not isinstance(node, tuple):
        return op_name(node)
    head, *args = node
    return f"{op_name(head)}({', '.join(_tree_text(a) for a in args)})"
