"""The lowering's records (its pattern tables' rows, the verdicts and kernels' outputs it
passes between rewrites) are immutable: a table is built once per process and shared by
every compile after it, so a rewrite that assigned to a row would change the next
compile's patterns. Work state local to one pass (a leading underscore) may change."""

from __future__ import annotations

import dataclasses
from types import ModuleType

import pytest

from qinductor_x86.lowering import dataops, postops, prepack, saturation, signed

MODULES = (dataops, postops, prepack, saturation, signed)


def _records(module: ModuleType) -> list[type]:
    return [
        obj
        for name, obj in vars(module).items()
        if isinstance(obj, type)
        and dataclasses.is_dataclass(obj)
        and obj.__module__ == module.__name__
        and not name.startswith("_")
    ]


def test_every_record_of_the_lowering_refuses_assignment() -> None:
    records = [cls for module in MODULES for cls in _records(module)]
    assert {"Row", "Output", "Unary", "Form", "Verdict", "DataOp"} <= {c.__name__ for c in records}
    for cls in records:
        bare = object.__new__(cls)
        with pytest.raises(dataclasses.FrozenInstanceError):
            setattr(bare, dataclasses.fields(cls)[0].name, None)
