"""The contract between qcore and plugin distributions.

A plugin distribution exposes one of these descriptors per entry point. Descriptors are
plain data holding factories, so loading an entry point stays cheap: the factories do the
heavy imports (torch.ao backend configs, torchao, Inductor) on first use. This module
must therefore never import torch at runtime.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, runtime_checkable

if TYPE_CHECKING:
    from types import TracebackType

    from torch.ao.quantization import QConfigMapping
    from torch.ao.quantization.backend_config import BackendConfig, BackendPatternConfig
    from torchao.quantization.pt2e.quantizer import Quantizer

    from qcore.pt2e.annotation.registry import Annotator

#: Bumped when a descriptor's fields or a factory's signature change incompatibly.
PLUGIN_API_VERSION = 1

#: The extra that brings torchao, which the PT2E API (quantizers, derived quantizers) needs.
PT2E_EXTRA = "pt2e"

#: Entry-point groups, one per descriptor kind.
GROUPS: dict[str, str] = {
    "backend": "qcore.backends",
    "quantizer": "qcore.quantizers",
    "lowering": "qcore.lowerings",
    "backend-extension": "qcore.backend_extensions",
    "quantizer-extension": "qcore.quantizer_extensions",
}

#: A factory is a callable or a ``"module:attribute"`` reference to one; a reference keeps
#: the descriptor module free of wrappers whose only job is to import late.
FactoryRef = str
#: Called as ``factory(is_qat=..., model=...)``.
QConfigMappingFactory = Callable[..., "QConfigMapping"] | FactoryRef


@runtime_checkable
class Lowering(Protocol):
    """A compiler-pass bundle that installs scoped and idempotently."""

    def install(self) -> None: ...

    def uninstall(self) -> None: ...

    def report(self) -> Any: ...

    def __enter__(self) -> Lowering: ...

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None: ...


@dataclass(frozen=True)
class BackendPlugin:
    """An FX-mode backend: a BackendConfig and a QConfigMapping that agrees with it.

    ``qconfig_mapping(is_qat=..., model=...)`` receives the model when the caller has one,
    for mappings that must see which module types occur (see the oneDNN backend).
    Mappings for oneDNN-style kernels should fit the target CPU
    (:func:`qcore.int8.weight_ranges.fit_qconfig_mapping`).
    """

    kind: ClassVar[str] = "backend"
    name: str
    backend_config: Callable[[], BackendConfig] | FactoryRef
    qconfig_mapping: QConfigMappingFactory | None = None
    description: str = ""
    api_version: int = PLUGIN_API_VERSION
    #: ``qcore.fx.convert`` produces the reference representation (quantize / dequantize
    #: around float ops) instead of the host's quantized kernels: for backends whose
    #: kernels run on another device, which lowers that representation (ExecuTorch).
    reference_convert: bool = False
    #: The torch quantized engine whose kernels ``qcore.fx.convert`` packs weights for
    #: (``"onednn"``); None leaves torch's current engine.
    quantized_engine: str | None = None
    #: Patterns (as ``qcore show`` and the conformance kit name them, e.g. ``"Embedding"``,
    #: ``"ConvTranspose2d → BatchNorm2d"``) that the default ``qconfig_mapping`` leaves in
    #: float on a model made of that pattern alone. The conformance kit fails a pattern
    #: outside this list that stays float, and one inside it that gets quantized.
    stays_float: tuple[str, ...] = ()


@dataclass(frozen=True)
class QuantizerPlugin:
    """A PT2E quantizer. ``factory(**options)`` returns a torchao ``Quantizer``.

    ``annotator_namespace`` names the qcore annotator-registry namespace the quantizer
    draws from; extensions targeting this quantizer register into it.
    """

    kind: ClassVar[str] = "quantizer"
    name: str
    factory: Callable[..., Quantizer] | FactoryRef
    annotator_namespace: str | None = None
    description: str = ""
    api_version: int = PLUGIN_API_VERSION


@dataclass(frozen=True)
class LoweringPlugin:
    """A compiler lowering (e.g. Inductor int8 passes); ``factory()`` returns a Lowering."""

    kind: ClassVar[str] = "lowering"
    name: str
    factory: Callable[[], Lowering] | FactoryRef
    description: str = ""
    api_version: int = PLUGIN_API_VERSION


@dataclass(frozen=True)
class BackendExtension:
    """Extra pattern configs (with their fuser methods) for the backend named ``target``."""

    kind: ClassVar[str] = "backend-extension"
    name: str
    target: str
    patterns: Callable[[], Sequence[BackendPatternConfig]] | FactoryRef
    description: str = ""
    api_version: int = PLUGIN_API_VERSION
    #: Which of these patterns the target's default mapping leaves in float
    #: (see :attr:`BackendPlugin.stays_float`).
    stays_float: tuple[str, ...] = ()


@dataclass(frozen=True)
class QuantizerExtension:
    """Extra annotators for the quantizer named ``target``, added to its registry namespace."""

    kind: ClassVar[str] = "quantizer-extension"
    name: str
    target: str
    annotators: Callable[[], Sequence[Annotator]] | FactoryRef
    description: str = ""
    api_version: int = PLUGIN_API_VERSION


def resolve(factory: Callable[..., Any] | FactoryRef) -> Callable[..., Any]:
    """The callable a factory field denotes, importing a ``"module:attribute"`` reference."""
    if callable(factory):
        return factory
    module_name, sep, attribute = factory.partition(":")
    if not sep or not module_name or not attribute:
        raise ValueError(f"factory reference {factory!r} is not of the form 'module:attribute'")
    target: Any = importlib.import_module(module_name)
    for part in attribute.split("."):
        target = getattr(target, part)
    if not callable(target):
        raise TypeError(f"factory reference {factory!r} is a {type(target).__name__}, not callable")
    return target  # type: ignore[no-any-return]


Descriptor = (
    BackendPlugin | QuantizerPlugin | LoweringPlugin | BackendExtension | QuantizerExtension
)

DESCRIPTOR_TYPES: dict[str, type[Any]] = {
    cls.kind: cls
    for cls in (
        BackendPlugin,
        QuantizerPlugin,
        LoweringPlugin,
        BackendExtension,
        QuantizerExtension,
    )
}
