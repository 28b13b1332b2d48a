"""``XNNPACKQuantizer``: upstream's scoping API on qcore's registry-driven quantizer."""

from __future__ import annotations

from typing import Any

from torch.fx import GraphModule

from qcore.pt2e.annotation.common_annotators import propagate_shared_qparams
from qcore.pt2e.annotation.registry_quantizer import RegistryQuantizer
from qcore.pt2e.annotation.transforms import conv3d_as_conv2d, scalars_to_attrs
from qquantizer_xnnpack import annotators  # noqa: F401  (defines the "xnnpack" namespace)
from qquantizer_xnnpack.config import get_symmetric_quantization_config

__all__ = ["XNNPACKQuantizer", "get_symmetric_quantization_config", "make_quantizer"]


class XNNPACKQuantizer(RegistryQuantizer):
    """PT2E quantizer for XNNPACK (ExecuTorch). Configure with ``set_global`` and the
    scoping setters, then hand to ``prepare_pt2e``/``prepare_qat_pt2e``."""

    namespace = "xnnpack"

    def transform_for_annotation(self, model: GraphModule) -> GraphModule:
        """Scalars of add/mul become tensor attributes, so they can be observed; 3-D
        convolutions become 2-D ones over depth-stacked slices (XNNPACK has no 3-D
        convolution, nor has ExecuTorch's portable runtime: see
        :func:`qcore.pt2e.annotation.transforms.conv3d_as_conv2d`)."""
        return conv3d_as_conv2d(scalars_to_attrs(model))

    def finalize(self, model: GraphModule) -> None:
        propagate_shared_qparams(model)


def make_quantizer(**options: Any) -> XNNPACKQuantizer:
    """An ``XNNPACKQuantizer`` whose global config is
    ``get_symmetric_quantization_config(**options)`` (the plugin factory)."""
    return XNNPACKQuantizer().set_global(get_symmetric_quantization_config(**options))
