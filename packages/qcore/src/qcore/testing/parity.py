"""Field-by-field comparison of two FX ``BackendConfig``s, callables compared by behaviour.

Use it to prove a rebuilt backend config equals an upstream one, or to see what an
extension changed: ``compare_backend_configs(ours, reference)`` returns one readable line
per difference, keyed by pattern, and an empty list when the two configs quantize alike.

Plain fields (observation type, dtype configs, modules, index maps) are compared by
value. Fuser methods, root-node getters and extra-input getters are functions that two
configs never share, so they are run instead: fusers on freshly built modules (eval and
QAT; the fused module's type, submodule tree and state are compared), getters on a fake
matched-node tree shaped like the pattern (which node each returns is compared).

``upstream_fuser_bugs`` names patterns whose reference fuser is known to crash where
ours is meant to work (torch passes ``torch.tanh`` to a fuser that wants modules): for
those, a mode in which the reference fuser raises is not a difference. The exemption is
narrow and self-checking: a listed pattern whose reference fuser runs in every mode, or
that the reference does not have, is reported, so a stale list cannot hide anything.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from torch.ao.quantization.backend_config import BackendConfig, BackendPatternConfig

from qcore.fx.patterns.rows import describe, pattern_key

__all__ = ["compare_backend_configs"]

_PLAIN_FIELDS = (
    "observation_type",
    "dtype_configs",
    "root_module",
    "qat_module",
    "reference_quantized_module_for_root",
    "fused_module",
    "input_type_to_index",
    "num_tensor_args_to_observation_type",
)
_CONSTRUCTOR_ARGS: tuple[tuple[int, ...], ...] = ((), (4,), (4, 4), (4, 4, 3))


@dataclass(frozen=True)
class _Leaf:
    """Stands in for a matched fx Node; ``path`` says where in the pattern it sits."""

    path: str
    op: str


def _instantiate(op: Any, seed: int, training: bool) -> Any:
    """What torch's fuser receives for a pattern element: a module for a module type
    (``nn.ReLU()`` for ``F.relu``, as torch does), the op itself otherwise."""
    if op is torch.nn.functional.relu:
        op = nn.ReLU
    if not (isinstance(op, type) and issubclass(op, nn.Module)):
        return op
    for args in _CONSTRUCTOR_ARGS:
        try:
            module = op(*args)
            break
        except TypeError:
            continue
    else:  # pragma: no cover - every module type torch fuses takes one of the above
        raise TypeError(f"cannot build a sample {op.__name__} to run a fuser method")
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, tensor in module.state_dict().items():
            if tensor.is_floating_point():
                values = torch.randn(tensor.shape, generator=generator)
                tensor.copy_(values.abs() + 0.5 if name.endswith("running_var") else values)
    return module.train(training)


def _fuser_args(config: dict[str, Any], training: bool) -> tuple[Any, ...]:
    counter = iter(range(1_000))

    def build(tree: Any) -> Any:
        if isinstance(tree, tuple):
            return tuple(build(t) for t in tree)
        return _instantiate(tree, next(counter), training)

    if "pattern_complex_format" in config:
        return tuple(build(config["pattern_complex_format"]))
    pattern = config["pattern"]
    return tuple(build(pattern)) if isinstance(pattern, tuple) else (build(pattern),)


def _module_summary(module: Any) -> Any:
    if not isinstance(module, nn.Module):
        return ("value", type(module).__qualname__)
    tree = tuple((name, type(m).__qualname__) for name, m in module.named_modules())
    state = {k: v.detach().clone() for k, v in module.state_dict().items()}
    return ("module", tree, module.training, state)


def _same_summary(a: Any, b: Any) -> bool:
    if a[0] != b[0] or a[:-1] != b[:-1] if a[0] == "module" else a != b:
        return False
    if a[0] != "module":
        return True
    sa, sb = a[-1], b[-1]
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def _run_fuser(fuser: Callable[..., Any], config: dict[str, Any], is_qat: bool) -> Any:
    try:
        return _module_summary(fuser(is_qat, *_fuser_args(config, training=is_qat)))
    except Exception as exc:  # noqa: BLE001 - a raising fuser is a behaviour to compare
        return ("raises", type(exc).__name__)


def _fuser_difference(
    ours: dict[str, Any], ref: dict[str, Any], upstream_bug: bool = False
) -> str | None:
    f_ours, f_ref = ours.get("fuser_method"), ref.get("fuser_method")
    if (f_ours is None) != (f_ref is None):
        return f"fuser_method: ours {_presence(f_ours)}, reference {_presence(f_ref)}"
    if f_ours is None or f_ref is None:
        return None
    reference_raised = False
    for is_qat in (False, True):
        a, b = _run_fuser(f_ours, ours, is_qat), _run_fuser(f_ref, ref, is_qat)
        reference_raised |= b[0] == "raises"
        if a[0] == "raises" and b[0] == "raises":
            continue  # both refuse this fusion; the exception class is not behaviour
        if upstream_bug and b[0] == "raises":
            continue  # the listed upstream crash: ours may fuse where torch cannot
        if not _same_summary(a, b):
            return f"fuser_method(is_qat={is_qat}): ours gives {_show(a)}, reference {_show(b)}"
    if upstream_bug and not reference_raised:
        return "listed as an upstream fuser bug, but the reference fuser runs"
    return None


def _node_tree(pattern: Any, path: str = "") -> Any:
    if isinstance(pattern, tuple):
        return tuple(_node_tree(p, f"{path}{i}") for i, p in enumerate(pattern))
    return _Leaf(path or "0", describe(pattern))


def _plain(result: Any) -> Any:
    if isinstance(result, _Leaf):
        return f"node {result.op} at {result.path}"
    if isinstance(result, (list, tuple)):
        return [_plain(r) for r in result]
    return repr(result)


def _getter_difference(name: str, key: Any, ours: Any, ref: Any) -> str | None:
    if (ours is None) != (ref is None):
        return f"{name}: ours {_presence(ours)}, reference {_presence(ref)}"
    if ours is None:
        return None
    results = []
    for getter in (ours, ref):
        try:
            results.append(_plain(getter(_node_tree(key))))
        except Exception as exc:  # noqa: BLE001 - compared as behaviour
            results.append(f"raises {type(exc).__name__}")
    if results[0] != results[1]:
        return f"{name}: ours returns {results[0]}, reference {results[1]}"
    return None


def _presence(value: Any) -> str:
    return "unset" if value is None else "set"


def _show(summary: Any) -> str:
    if summary[0] == "module":
        return f"{summary[1][0][1]} {[t for _, t in summary[1][1:]]}"
    return " ".join(map(str, summary))


def _compare_pattern(
    key: Any, ours: BackendPatternConfig, ref: BackendPatternConfig, upstream_bug: bool
) -> list[str]:
    a, b = ours.to_dict(), ref.to_dict()
    diffs = []
    if ("pattern" in a) != ("pattern" in b):
        form = {True: "forward tuple", False: "reversed nested (complex) format"}
        diffs.append(f"pattern format: ours {form['pattern' in a]}, "
                     f"reference {form['pattern' in b]}")
    for field in _PLAIN_FIELDS:
        if a.get(field) != b.get(field):
            diffs.append(f"{field}: ours {_describe_value(a.get(field))}, "
                         f"reference {_describe_value(b.get(field))}")
    if not diffs:  # fusers and getters unpack the pattern: only run them on equal formats
        diffs += filter(None, [_fuser_difference(a, b, upstream_bug)])
        for field in ("root_node_getter", "extra_inputs_getter"):
            diffs += filter(None, [_getter_difference(field, key, a.get(field), b.get(field))])
    return [f"{describe(key)}: {d}" for d in diffs]


def _describe_value(value: Any) -> str:
    if isinstance(value, type):
        return describe(value)
    return "unset" if value is None else repr(value)


def compare_backend_configs(
    ours: BackendConfig,
    reference: BackendConfig,
    *,
    upstream_fuser_bugs: Collection[Any] = (),
) -> list[str]:
    """Every difference between ``ours`` and ``reference``, one line each, keyed by pattern.

    Reports the backend name, patterns missing from ``ours`` or extra in it, each field
    that differs, and the first place where the shared patterns come in another order
    (ties between equally long patterns are broken by order when torch matches).
    ``upstream_fuser_bugs`` (patterns in torch's reversed nested format, as
    :func:`~qcore.fx.patterns.pattern_key` gives them) exempts the reference fuser's crashes
    on those patterns only; see the module docstring.
    """
    diffs = []
    if ours.name != reference.name:
        diffs.append(f"backend name: ours {ours.name!r}, reference {reference.name!r}")
    mine = {pattern_key(c): c for c in ours.configs}
    theirs = {pattern_key(c): c for c in reference.configs}
    diffs += [f"{describe(k)}: missing (in reference only)" for k in theirs if k not in mine]
    diffs += [f"{describe(k)}: extra (not in reference)" for k in mine if k not in theirs]
    bugs = list(upstream_fuser_bugs)
    diffs += [f"{describe(k)}: listed as an upstream fuser bug, but not in reference"
              for k in bugs if k not in theirs]
    for key, ref_config in theirs.items():
        if key in mine:
            diffs += _compare_pattern(key, mine[key], ref_config, key in bugs)
    order_mine = [k for k in mine if k in theirs]
    order_ref = [k for k in theirs if k in mine]
    for index, (m, r) in enumerate(zip(order_mine, order_ref, strict=True)):
        if m != r:
            diffs.append(f"order: shared pattern #{index} is {describe(m)} in ours, "
                         f"{describe(r)} in reference")
            break
    return diffs
