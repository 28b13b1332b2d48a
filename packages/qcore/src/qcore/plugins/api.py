"""The public API: look a plugin up by name, build what it provides, check what it returned.

Every error names the plugin and its distribution. Torch is imported inside the functions
so that ``import qcore`` and ``qcore list`` stay cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from qcore.errors import PluginConflictError, PluginError
from qcore.plugin_api import FactoryRef, Lowering, resolve
from qcore.plugins.discovery import DISABLE_ENV, REGISTRY, PluginInfo
from qcore.plugins.extras import require_pt2e
from qcore.pt2e.annotation.registry import ANNOTATORS
from qcore.pt2e.derived.names import derived_names, is_disabled

if TYPE_CHECKING:
    from torch import nn
    from torch.ao.quantization import QConfigMapping
    from torch.ao.quantization.backend_config import BackendConfig
    from torchao.quantization.pt2e.quantizer import Quantizer

    from qcore.pt2e.annotation.report import FloatNode

T = TypeVar("T")


def _build(
    kind: str,
    name: str,
    what: str,
    factory: Callable[..., Any] | FactoryRef,
    expected: type[T],
    *,
    caller_errors: tuple[type[Exception], ...] = (),
    **kwargs: Any,
) -> T:
    """Resolve and call a plugin factory; wrap its failure or a wrong return type in a
    PluginError naming the distribution. ``caller_errors`` pass through unwrapped: they
    mean the caller's own arguments were wrong, and the plugin's message says which."""
    owner = REGISTRY.distribution(kind, name)
    try:
        result = resolve(factory)(**kwargs)
    except caller_errors:
        raise
    except PluginError:
        raise
    except Exception as exc:
        error = PluginError(
            f"{kind} plugin '{name}' ({owner}) failed to build its {what}: "
            f"{type(exc).__name__}: {exc}"
        )
        REGISTRY.record_failure(kind, name, error)
        raise error from exc
    if not isinstance(result, expected):
        error = PluginError(
            f"{kind} plugin '{name}' ({owner}) returned a {type(result).__name__} "
            f"for its {what}, expected {expected.__module__}.{expected.__name__}"
        )
        REGISTRY.record_failure(kind, name, error)
        raise error
    return result


def _extension_items(
    ext_dist: str, ext: Any, factory: Callable[..., Any] | FactoryRef
) -> list[Any]:
    """What an extension's factory returns, failures wrapped with the extension's name."""
    try:
        return list(resolve(factory)())
    except Exception as exc:
        raise PluginError(
            f"{ext.kind} '{ext.target}.{ext.name}' ({ext_dist}) failed: {type(exc).__name__}: {exc}"
        ) from exc


def _key(pattern_config: Any, culprit: str, index: int) -> str:
    """The pattern a config claims; a config torch cannot even describe names its source."""
    from qcore.fx.patterns import pattern_key

    try:
        return repr(pattern_key(pattern_config))
    except Exception as exc:
        raise PluginError(
            f"{culprit}: pattern config #{index} ({getattr(pattern_config, 'pattern', None)!r}) "
            f"is malformed: {type(exc).__name__}: {exc}"
        ) from exc


def get_backend_config(name: str) -> BackendConfig:
    """The FX-mode ``BackendConfig`` of backend ``name``, with its installed extensions."""
    from torch.ao.quantization.backend_config import BackendConfig, BackendPatternConfig

    from qcore._torch_private import ensure_backend_config_utils

    # torch's BackendConfig needs a submodule that only an earlier import loads; every
    # plugin, ours or a third party's, must work in a fresh interpreter regardless.
    ensure_backend_config_utils()
    plugin = REGISTRY.load("backend", name)
    config = _build("backend", name, "BackendConfig", plugin.backend_config, BackendConfig)
    owner = REGISTRY.distribution("backend", name)
    try:
        claimed = {
            _key(c, f"backend plugin '{name}' ({owner})", i): owner
            for i, c in enumerate(config.configs)
        }
    except PluginError as error:
        REGISTRY.record_failure("backend", name, error)
        raise
    for ext_dist, ext in REGISTRY.extensions("backend-extension", name):
        culprit = f"backend extension '{ext.name}' ({ext_dist}) for '{name}'"
        for index, pattern_config in enumerate(_extension_items(ext_dist, ext, ext.patterns)):
            if not isinstance(pattern_config, BackendPatternConfig):
                raise PluginError(
                    f"{culprit} gave a {type(pattern_config).__name__}, "
                    "expected a BackendPatternConfig"
                )
            key = _key(pattern_config, culprit, index)
            if key in claimed:
                raise PluginConflictError(
                    f"backend extension '{ext.name}' ({ext_dist}) adds pattern {key} to "
                    f"'{name}', which {claimed[key]} already defines"
                )
            claimed[key] = ext_dist
            config.set_backend_pattern_config(pattern_config)
    return config


def get_qconfig_mapping(
    name: str, is_qat: bool = False, model: nn.Module | None = None
) -> QConfigMapping:
    """The default ``QConfigMapping`` that agrees with backend ``name``'s own fusions.

    Pass ``model`` when you have it: some backends (oneDNN) must see which module types
    occur to keep qconfigs consistent across the patterns they fuse.
    """
    from torch.ao.quantization import QConfigMapping

    plugin = REGISTRY.load("backend", name)
    if plugin.qconfig_mapping is None:
        raise PluginError(
            f"backend plugin '{name}' ({REGISTRY.distribution('backend', name)}) "
            "provides no default QConfigMapping"
        )
    return _build(
        "backend",
        name,
        "QConfigMapping",
        plugin.qconfig_mapping,
        QConfigMapping,
        is_qat=is_qat,
        model=model,
    )


def uses_reference_convert(name: str) -> bool:
    """Whether backend ``name``'s FX models convert to the reference representation."""
    return bool(REGISTRY.load("backend", name).reference_convert)


def backend_quantized_engine(name: str) -> str | None:
    """The torch quantized engine backend ``name``'s native FX kernels run on, if declared."""
    engine: str | None = REGISTRY.load("backend", name).quantized_engine
    return engine


def get_quantizer(name: str, **options: Any) -> Quantizer:
    """A torchao PT2E ``Quantizer`` from plugin ``name``, ready for ``prepare_pt2e``, with
    the annotators that installed extensions add to it."""
    if name in derived_names():
        return _derived_quantizer(name, **options)
    plugin = REGISTRY.load("quantizer", name)  # an unknown name is a typo, not a missing extra
    require_pt2e(f"qcore.get_quantizer({name!r})")
    # imported once torchao is known to be there: the check names the extra that brings it
    from torchao.quantization.pt2e.quantizer import Quantizer

    from qcore.pt2e.annotation.registry_quantizer import RegistryQuantizer

    extended = install_quantizer_extensions(name)
    quantizer = _build(
        "quantizer",
        name,
        "Quantizer",
        plugin.factory,
        Quantizer,
        caller_errors=(TypeError, ValueError),
        **options,
    )
    if isinstance(quantizer, RegistryQuantizer):
        quantizer.use_extensions()
    elif extended:
        raise PluginError(
            f"quantizer plugin '{name}' ({REGISTRY.distribution('quantizer', name)}) is not "
            f"built on qcore's annotator registry, so the extensions {', '.join(extended)} "
            "cannot add to it"
        )
    return quantizer


def _derived_quantizer(name: str, **options: Any) -> Quantizer:
    """The PT2E quantizer derived from backend ``name`` (see :mod:`qcore.pt2e.derived`);
    options: ``is_qat``, ``is_dynamic``, ``model`` (passed to the backend's mapping)."""
    unknown = sorted(set(options) - {"is_qat", "is_dynamic", "model"})
    if unknown:
        raise TypeError(
            f"derived quantizer '{name}' takes is_qat, is_dynamic, model; got {unknown}"
        )
    if is_disabled(name):
        raise PluginError(
            f"the quantizer derived from backend '{name}' is disabled by {DISABLE_ENV}"
        )
    REGISTRY.load("backend", name)  # a broken or disabled backend raises, naming itself
    require_pt2e(f"qcore.get_quantizer({name!r})")
    from qcore.fx.patterns.text import pattern_text  # qcore.fx.patterns imports torch
    from qcore.pt2e.derived.derived_quantizer import derived_quantizer  # imports torchao

    return derived_quantizer(
        name,
        f"derived from backend {name} ({REGISTRY.distribution('backend', name)})",
        lambda: get_backend_config(name),
        lambda **kw: get_qconfig_mapping(name, **kw),
        pattern_text,
        reference=uses_reference_convert(name),
        **options,
    )


def install_quantizer_extensions(name: str) -> list[str]:
    """Register the annotators that extension distributions add to quantizer ``name``
    (idempotent); return the extensions' distributions. Only quantizers built by
    :func:`get_quantizer` run them."""
    plugin = REGISTRY.load("quantizer", name)
    namespace = plugin.annotator_namespace or name
    found = []
    for ext_dist, ext in REGISTRY.extensions("quantizer-extension", name):
        found.append(ext_dist)
        for annotator in _extension_items(ext_dist, ext, ext.annotators):
            ANNOTATORS.add(namespace, annotator, source=ext_dist)
    return found


def get_lowering(name: str) -> Lowering:
    """The compiler lowering ``name``: ``install()``/``uninstall()``, a context manager,
    and ``report()``. Importing its package changes nothing; installing does."""
    plugin = REGISTRY.load("lowering", name)
    return _build("lowering", name, "Lowering", plugin.factory, Lowering)  # type: ignore[type-abstract]


def explain_not_quantized(
    model: nn.Module, quantizer: Quantizer, example_inputs: Sequence[Any] | None = None
) -> list[FloatNode]:
    """Every compute node ``quantizer`` leaves in float, and why (no annotator for the op,
    excluded by a scope or filter, input not quantizable, conflicting annotation).

    Works for any quantizer built on qcore's annotator registry. ``model`` is an exported
    or annotated graph module, or an ``nn.Module`` together with ``example_inputs``.
    """
    require_pt2e("qcore.explain_not_quantized")
    from qcore.pt2e.annotation.registry_quantizer import RegistryQuantizer  # both import torchao
    from qcore.pt2e.annotation.report import explain_not_quantized as explain

    if not isinstance(quantizer, RegistryQuantizer):
        raise TypeError(
            f"explain_not_quantized needs a quantizer built on qcore's annotator registry, "
            f"got {type(quantizer).__module__}.{type(quantizer).__name__}"
        )
    return explain(model, quantizer, example_inputs)


def list_plugins() -> list[PluginInfo]:
    """Every installed plugin with kind, name, distribution, version and status.

    Reads entry-point metadata only: no plugin module is imported.
    """
    return REGISTRY.info()
