"""The lowering's records (its pattern tables' rows, the verdicts and kernels' outputs it
passes between rewrites) are immutable: a table is built once per process and shared by
every compile after it, so a rewrite that assigned to a row would change the next
compile's patterns. Work state local to one pass (a leading underscore) may change."""

from __future__ import annotations

from qcore.zoo.suite.records import assignable, public_records
from qinductor_x86.lowering import dataops, postops, prepack, saturation, signed

MODULES = (dataops, postops, prepack, saturation, signed)



def test_every_record_of_the_lowering_refuses_assignment() -> None:
    records = public_records(*MODULES)
    assert {"Row", "Output", "Unary", "Form", "Verdict", "DataOp"} <= {c.__name__ for c in records}
    assert assignable(records) == []
