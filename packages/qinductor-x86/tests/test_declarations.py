"""Each fact is declared once in qinductor_x86 (CONTRIBUTING: "if you find yourself editing
the same fact in two places, the layout has a bug").

* A set of torch operators (a module-level frozenset, set or tuple of op overloads, or a
  value of a module-level dict) is declared under one name: a second equal set must be
  the same object (imported, or derived by identity), not a copy that can drift.
* The keys of torch's Inductor counters this lowering bumps are declared in
  ``lowering/counters.py`` only: no other module spells one or calls the counting API.
"""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
from collections import defaultdict
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

import qinductor_x86

_OP_TYPES = (type(torch.ops.aten.add.Tensor), type(torch.ops.aten.add))
_SOURCE = Path(qinductor_x86.__file__).parent


def _modules() -> list[ModuleType]:
    names = [info.name for info in pkgutil.walk_packages(qinductor_x86.__path__, "qinductor_x86.")]
    return [importlib.import_module(name) for name in ["qinductor_x86", *names]]


def _is_op_set(value: Any) -> bool:
    return (
        isinstance(value, frozenset | set | tuple)
        and bool(value)
        and all(isinstance(op, _OP_TYPES) for op in value)
    )


def op_sets(modules: list[ModuleType]) -> Iterator[tuple[str, Any]]:
    """(where it is declared, value) for every operator set at module level."""
    for module in modules:
        for name, value in vars(module).items():
            if isinstance(value, ModuleType):
                continue
            candidates = [(f"{module.__name__}.{name}", value)]
            if isinstance(value, Mapping):
                candidates += [(f"{module.__name__}.{name}[{k!r}]", v) for k, v in value.items()]
            yield from ((label, v) for label, v in candidates if _is_op_set(v))


def copies(declared: list[tuple[str, Any]]) -> dict[frozenset[Any], list[str]]:
    """Operator sets declared as two or more distinct objects -> where."""
    objects: dict[frozenset[Any], dict[int, str]] = defaultdict(dict)
    for label, value in declared:
        objects[frozenset(value)].setdefault(id(value), label)
    return {ops: sorted(where.values()) for ops, where in objects.items() if len(where) > 1}


def test_no_operator_set_is_declared_twice() -> None:
    found = copies(list(op_sets(_modules())))
    assert not found, "\n".join(" == ".join(labels) for labels in found.values())


def test_the_check_sees_a_copy_and_accepts_a_derived_name() -> None:
    """The check above can fail: a copied set is found; the same object under a second
    name (an import, an alias) is not a copy."""
    views = frozenset({torch.ops.aten.view.default, torch.ops.aten.permute.default})
    module = ModuleType("qinductor_x86.probe")
    module.VIEWS, module.ALIAS, module.TABLE = views, views, {"views": views}
    assert copies(list(op_sets([module]))) == {}
    module.COPY = frozenset(list(views))  # (frozenset(views) would be views itself)
    assert copies(list(op_sets([module]))) == {views: ["qinductor_x86.probe.COPY", "qinductor_x86.probe.VIEWS"]}


#: What spells one of torch's Inductor counter keys (or the count API) in source.
_COUNTER_KEY = re.compile(r"_(matcher|lower)(_count|_nodes)?$|_count$|_nodes$")


def _counter_spellings(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and _COUNTER_KEY.search(node.value):
            found.append(f"{path.name}:{node.lineno}: {node.value!r}")
        if (
            isinstance(node, ast.Attribute)
            and node.attr == "count"
            and isinstance(node.value, ast.Name)
            and node.value.id == "private"
        ):
            found.append(f"{path.name}:{node.lineno}: private.count")
    return found


@pytest.mark.parametrize(
    "path",
    [p for p in sorted(_SOURCE.rglob("*.py")) if p.name not in {"counters.py", "_torch_private.py"}],
    ids=lambda p: str(p.relative_to(_SOURCE)),
)
def test_counter_keys_are_declared_only_in_counters(path: Path) -> None:
    """Handlers name a ``counters.Family`` member (a typo is an AttributeError at import
    and a mypy error), never a key string."""
    assert _counter_spellings(path) == []


def test_the_counter_check_sees_a_key_string(tmp_path: Path) -> None:
    handler = tmp_path / "handler.py"
    handler.write_text('ctx.record("x", f"q{kind}_unary_matcher")\nprivate.count("quant_lift_up_count")\n')
    assert sorted(_counter_spellings(handler)) == [
        "handler.py:1: '_unary_matcher'",
        "handler.py:2: 'quant_lift_up_count'",
        "handler.py:2: private.count",
    ]


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"fn": torch.tanh, "attr": "tanh", "kernels": frozenset({"conv4d"})},
         "kernels names ['conv4d'], not among ['conv1d', 'conv2d', 'conv3d', 'linear']"),
        ({"fn": torch.tanh, "attr": "tanh", "after": frozenset({"lstm"}), "sources": (torch.nn.Tanh,)},
         "after names ['lstm']"),
        ({"fn": torch.tanh}, "fn given without the oneDNN attr the lowering fuses it as"),
        ({"fn": None, "attr": "tanh"}, "attr 'tanh' given without the fn the lowering traces"),
        ({"fn": torch.tanh, "attr": "tanh", "after": frozenset({"linear"})},
         "after given without the sources the quantizer recognises it by"),
        ({"fn": torch.clamp, "attr": "hardtanh", "scalars": ("min",), "clamps": ("min", "max")},
         "clamps name ['max'], which scalars ['min'] lack"),
        ({"fn": torch.tanh, "attr": "tanh", "after": frozenset({"linear"}), "sources": (torch.tanh,)},
         "sources hold no module class, which its example model is built from"),
    ],
    ids=["kernel", "after", "attr", "fn", "sources", "clamps", "module"],
)
def test_a_post_op_rows_mistake_is_named_with_the_row(fields: dict[str, Any], says: str) -> None:
    """Caught when the row is written (the table is built at import), naming the row."""
    from qinductor_x86.postop_table import PostOp

    with pytest.raises(ValueError, match=r"^post-op row 'mine': .*") as raised:
        PostOp("mine", **fields)
    assert says in str(raised.value)


def test_a_post_op_rows_values_are_keywords() -> None:
    """A row reads as what each value is: only its name goes by position."""
    from qinductor_x86.postop_table import PostOp

    with pytest.raises(TypeError):
        PostOp("mine", torch.tanh, "tanh")  # type: ignore[misc]


def test_table_rows_cannot_be_edited_after_they_are_read() -> None:
    """The tables both halves read (post-ops, data ops, the lowering's fusion rows) hold
    frozen rows: a row changed in place after the patterns were traced from it would make
    the two halves disagree."""
    import dataclasses

    from qinductor_x86.lowering import dataops, postops
    from qinductor_x86.postop_table import ADD, POST_OPS

    for row in (*POST_OPS, ADD, *dataops.DATA_OPS, *postops.ROWS):
        with pytest.raises(dataclasses.FrozenInstanceError):
            row.name = "edited"
