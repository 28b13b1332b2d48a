"""The ``"xnnpack"`` annotator namespace: the common annotators in XNNPACK's order, with
XNNPACK's conv limits, registered when this module is imported."""

from __future__ import annotations

from torch.fx import Node
from torchao.quantization.pt2e.quantizer import QuantizationConfig

from qcore.annotation.common import COMMON, conv_annotators, conv_transpose_groups
from qcore.annotation.registry import ANNOTATORS, Annotator
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
_XNNPACK_CONV = {
    "conv": _conv,
    "conv_transpose": _conv_transpose,
    "conv_relu": _conv_relu,
    "conv_transpose_relu": _conv_transpose_relu,
}
# max_pool2d and gru_io_only are opt-in: ExecuTorch 1.5.1 leaves max_pool2d to qparam
# propagation and does not run the GRU annotator.
_OPT_IN = {"max_pool2d", "gru_io_only"}


def _xnnpack(a: Annotator) -> Annotator:
    from dataclasses import replace

    if a.name in _XNNPACK_CONV:
        transpose = "transpose" in a.name
        return replace(
            a, fn=_XNNPACK_CONV[a.name], why_not=lambda n, c: conv_limit(n, c, transpose)
        )
    if a.name in _OPT_IN:
        return replace(a, opt_in=True)
    return a


XNNPACK_ANNOTATORS = tuple(_xnnpack(a) for a in COMMON)
ANNOTATORS.define("xnnpack", XNNPACK_ANNOTATORS, source=f"qquantizer-xnnpack {__version__}")
