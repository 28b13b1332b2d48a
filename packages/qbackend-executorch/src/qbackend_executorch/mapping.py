"""The default QConfigMapping for the ExecuTorch backend, built to its dtype constraints.

The backend offers two static int8 flavours for every quantized op: quint8 activations
without constraints (what torch's host kernels take), and the *symmetric qint8* configs
it shares with QNNPACK, whose ``DTypeWithConstraints`` require

* activations: ``qint8`` with ``scale >= 2**-12``;
* weights: ``qint8`` in ``[-127, 127]`` (no -128, so the range is symmetric) with
  ``scale >= 2**-12``.

ExecuTorch's int8 kernels (XNNPACK) are built around the qint8 flavour, so this mapping
picks it wherever the config offers it:

* activations: a histogram observer, ``qint8``, full range, ``eps = 2**-12`` (the observer
  never computes a scale below the floor);
* weights: per-channel symmetric ``qint8`` in ``[-127, 127]``, ``eps = 2**-12`` (per
  channel keeps small output channels accurate; the constraint does not restrict the
  granularity);
* embeddings: the backend's only embedding config is weight-only ``quint8``, so
  ``Embedding``/``EmbeddingBag`` get float-qparams weight-only quantization.

* transposed convs: the backend has no pattern for them, and torch's ``prepare_fx``
  rejects a per-channel weight observer on ``ConvTranspose{1,2,3}d`` (``AssertionError``)
  even where it would not quantize them, so they get ``None`` and stay in float.

For QAT the same dtypes and bounds are used, with fake-quant modules
(moving-average observers).

The mapping is meant for the reference representation (``convert_to_reference_fx``),
which is what ExecuTorch consumes. Its qint8 activations cannot run through torch's host
quantized kernels (``convert_fx``), which take quint8 only; see the package README for
evaluating on a host.
"""

from __future__ import annotations

from torch import nn
from torch.ao.quantization import (
    QConfig,
    QConfigMapping,
    default_embedding_qat_qconfig,
    default_per_channel_symmetric_qnnpack_qat_qconfig,
    default_per_channel_symmetric_qnnpack_qconfig,
    float_qparams_weight_only_qconfig,
)

__all__ = ["CONV_TRANSPOSE_MODULES", "EMBEDDING_MODULES", "build_qconfig_mapping", "static_qconfig"]

EMBEDDING_MODULES: tuple[type[nn.Module], ...] = (nn.Embedding, nn.EmbeddingBag)
CONV_TRANSPOSE_MODULES: tuple[type[nn.Module], ...] = (
    nn.ConvTranspose1d,
    nn.ConvTranspose2d,
    nn.ConvTranspose3d,
)


def static_qconfig(*, is_qat: bool) -> QConfig:
    """The qint8 qconfig for every static op: symmetric per-channel weights in
    [-127, 127], qint8 activations, both with the 2**-12 scale floor."""
    return (
        default_per_channel_symmetric_qnnpack_qat_qconfig
        if is_qat
        else default_per_channel_symmetric_qnnpack_qconfig
    )


def build_qconfig_mapping(*, is_qat: bool, model: nn.Module | None = None) -> QConfigMapping:
    """The default mapping (see the module docstring). ``model`` is not needed: every
    choice here follows from the backend config alone."""
    del model
    mapping = QConfigMapping().set_global(static_qconfig(is_qat=is_qat))
    embedding = default_embedding_qat_qconfig if is_qat else float_qparams_weight_only_qconfig
    for module in EMBEDDING_MODULES:
        mapping.set_object_type(module, embedding)
    for module in CONV_TRANSPOSE_MODULES:
        mapping.set_object_type(module, None)
    return mapping
