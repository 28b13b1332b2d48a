"""Which public dataclasses of a module still accept assignment: a record that is read
after it is built (a plan, a table's row) must not, so a test lists the modifiable ones."""

from __future__ import annotations

import dataclasses
from types import ModuleType


def public_records(*modules: ModuleType) -> list[type]:
    """The dataclasses each of ``modules`` defines under a public name."""
    return [
        obj
        for module in modules
        for name, obj in vars(module).items()
        if isinstance(obj, type)
        and dataclasses.is_dataclass(obj)
        and obj.__module__ == module.__name__
        and not name.startswith("_")
    ]


def assignable(records: list[type]) -> list[str]:
    """The names of ``records`` whose first field can be set on an instance."""
    found = []
    for cls in records:
        bare: object = object.__new__(cls)
        try:
            setattr(bare, dataclasses.fields(cls)[0].name, None)
        except dataclasses.FrozenInstanceError:
            continue
        found.append(cls.__name__)
    return found
