"""PT2E quantizers derived from FX backends: every ``BackendConfig`` gets one.

``qcore.get_quantizer(name)`` for a backend with no quantizer plugin of that name builds
:class:`~qcore.pt2e.derived.derived_quantizer.DerivedQuantizer` from the backend's config and default
mapping. Nothing heavy is imported here: :mod:`qcore.pt2e.derived.names` is metadata only;
the other modules import torch and torchao.
"""
