"""The ``"xnnpack"`` annotator namespace: :data:`XNNPACK_ANNOTATORS`, one row per
annotator in the order the quantizer runs them, registered when this module is imported.

Most rows are qcore's common annotators as they are (the same objects, so a fix to one
reaches every quantizer that lists it); the conv rows add XNNPACK's limits.
:data:`EXECUTORCH_ANNOTATORS` are ExecuTorch 1.5.1's, which the parity tests hold equal to
its quantizer; an annotator ExecuTorch does not have goes in :func:`beyond_executorch`
(a common one by name, or your own ``Annotator(...)``), and nowhere else.
"""

from __future__ import annotations

from dataclasses import replace

from torch.fx import Node
from torchao.quantization.pt2e.quantizer import QuantizationConfig

from qcore.pt2e.annotation import common_annotators as common
from qcore.pt2e.annotation.common_annotators import conv_annotators, conv_transpose_groups
from qcore.pt2e.annotation.registry import ANNOTATORS, AnnotateFn, Annotator
from qquantizer_xnnpack._version import __version__


def conv_limit(conv: Node, config: QuantizationConfig | None, transpose: bool) -> str | None:
    """Convs XNNPACK cannot run quantized: grouped transposed convs; dynamically quantized
    convs other than 2D non-depthwise ones."""
    if transpose and conv_transpose_groups(conv) != 1:
        return f"transposed conv with {conv_transpose_groups(conv)} groups"
    act = config.input_activation if config is not None else None
    if act is None or not act.is_dynamic:
        return None
    weight = conv.args[1]
    shape = getattr(weight.meta.get("val"), "shape", None) if isinstance(weight, Node) else None
    if shape is not None and len(shape) != 4:
        return f"dynamic quantization covers conv2d only, weight has rank {len(shape)}"
    if not transpose and shape is not None and shape[1] == 1:
        return "dynamic quantization does not cover depthwise conv"
    return None


_conv, _conv_transpose, _conv_relu, _conv_transpose_relu = conv_annotators(conv_limit)


def _limited(annotator: Annotator, fn: AnnotateFn, *, transpose: bool) -> Annotator:
    """A common conv annotator running ``fn`` (it declines what :func:`conv_limit` names)
    and saying why to the not-quantized report."""
    return replace(annotator, fn=fn, why_not=lambda n, c: conv_limit(n, c, transpose))


#: ExecuTorch 1.5.1's annotators, in the order its quantizer runs them.
EXECUTORCH_ANNOTATORS: tuple[Annotator, ...] = (
    common.CONV_BN_RELU,
    common.CONV_BN,
    common.CONV_TRANSPOSE_BN_RELU,
    common.CONV_TRANSPOSE_BN,
    common.LINEAR_RELU,
    common.LINEAR,
    _limited(common.CONV, _conv, transpose=False),
    _limited(common.CONV_TRANSPOSE, _conv_transpose, transpose=True),
    _limited(common.CONV_RELU, _conv_relu, transpose=False),
    _limited(common.CONV_TRANSPOSE_RELU, _conv_transpose_relu, transpose=True),
    common.ADAPTIVE_AVG_POOL2D,
    common.ADD_RELU,
    common.ADD,
    common.MUL_RELU,
    common.MUL,
    common.CAT,
    # opt-in: ExecuTorch 1.5.1 leaves max_pool2d to qparam propagation
    replace(common.MAX_POOL2D, opt_in=True),
    common.GRU_IO_ONLY,  # opt-in already: ExecuTorch 1.5.1 does not run the GRU annotator
)


def beyond_executorch() -> tuple[Annotator, ...]:
    """The annotators this quantizer runs that ExecuTorch 1.5.1's does not, one row each,
    after ExecuTorch's: a deliberate extra annotation goes here, and nowhere else. The
    parity tests annotate without these rows and hold everything else equal to
    ExecuTorch's; the conformance kit runs each row's example like any other's."""
    return ()


#: The ``"xnnpack"`` namespace, in the order the quantizer runs it.
XNNPACK_ANNOTATORS: tuple[Annotator, ...] = (*EXECUTORCH_ANNOTATORS, *beyond_executorch())
ANNOTATORS.define("xnnpack", XNNPACK_ANNOTATORS, source=f"qquantizer-xnnpack {__version__}")
