"""The int8 planners' records (a layer's geometry, its range choice, its price, the plan)
are immutable: the plans are computed once and read by convert, the report and the CLI,
so none of them may change what another reads. Work state local to one function (a
leading underscore) may change."""

from __future__ import annotations

from qcore.fx import ranges as fx_ranges
from qcore.int8 import depth_plan, saturation, weight_ranges
from qcore.pt2e import range_plan as pt2e_plan
from qcore.pt2e import ranges as pt2e_ranges
from qcore.zoo.suite.records import assignable, public_records

MODULES = (depth_plan, fx_ranges, pt2e_plan, pt2e_ranges, saturation, weight_ranges)



def test_every_record_of_the_int8_planners_refuses_assignment() -> None:
    records = public_records(*MODULES)
    assert {"Geometry", "RangeChoice", "WeightedLayer", "LayerPrice", "DepthPlan"} <= {c.__name__ for c in records}
    assert assignable(records) == []
