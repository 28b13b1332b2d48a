"""The three Inductor custom passes one install adds, and what each reports back.

* before autograd tracing (``pre_grad_custom_pass``): quant lift-up;
* on the inference graph, before freezing (``joint_custom_pre_pass``): everything else;
* after Inductor's own post-grad patterns (``post_grad_custom_post_pass``): each oneDNN
  int8 kernel (and int8 weight-only matmul) torch's lowering patterns did not claim is
  handed to Inductor's lowering of it the way those patterns hand theirs, so that the
  generated code is the code torch's passes generate, kernel names and checks included;
  and the ``*_lower_*`` counters. When torch's copy is registered, its patterns lower and
  count them; otherwise this pass does, so the counters and the code mean the same either
  way.
"""

from __future__ import annotations

import warnings
from typing import Any

from torch.fx import Graph

from qcore.int8.cpu_profile import target
from qinductor_x86 import _torch_private as private
from qinductor_x86._version import __version__
from qinductor_x86.lowering import code_key, ops, pipeline
from qinductor_x86.lowering.counters import bump
from qinductor_x86.lowering.kernels import KERNELS
from qinductor_x86.lowering.liftup import lift_quantizes
from qinductor_x86.lowering.report import LoweringReport

#: What torch's copy lowers through a post-grad lowering pattern (the int8 kernels, and
#: the int8 weight-only matmul, whose pattern counts itself in ``woq_matcher``) -> the
#: positions of the arguments its handler realizes first (a binary post-op's extra input).
_LOWERED_BY_PATTERN: dict[Any, tuple[int, ...]] = {
    **{
        op: () if kernel.args.realized is None else (kernel.args.position(kernel.args.realized),)
        for op, kernel in KERNELS.items()
    },
    ops.WEIGHT_ONLY: (),
}


class NoInt8KernelsWarning(UserWarning):
    """A quantized graph compiled without a single oneDNN int8 kernel."""


class _Pass(private.CustomGraphPass):
    def __init__(self, report: LoweringReport) -> None:
        self.report = report

    def uuid(self) -> bytes:
        # the rewrites depend on every first-party module the passes import and on the CPU
        # they target
        return private.files_hash(
            [str(p) for p in code_key.source_files()],
            f"{__version__}:{target().isa}:{type(self).__name__}",
        )


class LiftUp(_Pass):
    def __call__(self, graph: Graph) -> None:
        lifted = lift_quantizes(graph)
        if lifted:
            self.report.lift_ups += lifted


class Lower(_Pass):
    def __call__(self, graph: Graph) -> None:
        if not pipeline.is_quantized(graph):
            return
        record = pipeline.lower(graph, target())
        self.report.graphs.append(record)
        if record.int8_kernels == 0 and record.left_in_float:  # (fp16-only: no q/dq)
            reasons = sorted({node.reason for node in record.left_in_float})
            warnings.warn(
                "qinductor-x86: a quantized graph compiled to zero oneDNN int8 kernels; "
                + "; ".join(reasons[:3]),
                NoInt8KernelsWarning,
                stacklevel=2,
            )


class CountLowerings(_Pass):
    def __call__(self, graph: Graph) -> None:
        for node in graph.nodes:
            kernel = KERNELS.get(node.target)
            if kernel is not None:
                bump(kernel.lower_counter, 1)
            realize = _LOWERED_BY_PATTERN.get(node.target)
            if realize is not None:
                private.lower_as_torch_patterns_do(node, realize)


def make_passes(report: LoweringReport) -> dict[str, Any]:
    """Hook name -> a fresh pass, each recording what it did into ``report``."""
    pipeline.pattern_passes()  # trace the tables now, outside any compile
    hooks = private.INDUCTOR_HOOKS
    return {hooks[0]: LiftUp(report), hooks[1]: Lower(report), hooks[2]: CountLowerings(report)}
