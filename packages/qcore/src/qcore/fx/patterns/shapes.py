"""Fusion shapes: declare how ops are wired, get the getters and the fuser for free.

torch's FX fusion needs, per fused pattern, a fuser method (which modules to build from
the matched ones), a root-node getter (which matched node becomes the fused module) and an
extra-inputs getter (which other node feeds it). Backends used to hand-write the three
for each variant; all of them follow from where the root, its batch norm, the binary op,
the free input and the activation sit in the pattern. A shape records those positions;
:func:`fusion` turns it into a ``BackendPatternConfig``.

Fusers built here always produce ``into(root, *other_ops)`` with batch norm folded into
the root in eval mode, or ``qat_into(root, bn, *other_ops)`` when fusing for QAT. A
post-op torch passes as a function (``torch.tanh``) becomes its exact module form, or the
fuser refuses with :class:`~qcore.fx.patterns.UnfusablePattern` (see ``postops``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from torch import nn
from torch.ao.quantization.backend_config import BackendPatternConfig, DTypeConfig
from torch.ao.quantization.utils import MatchAllNode
from torch.nn.utils.fusion import fuse_conv_bn_eval, fuse_linear_bn_eval

from qcore.fx.patterns.postops import post_op_module
from qcore.fx.patterns.rows import ModuleType, Op, describe, pattern_config

Path = tuple[int, ...]
_TRANSPOSED = (nn.ConvTranspose1d, nn.ConvTranspose2d, nn.ConvTranspose3d)
_CONVS = (nn.Conv1d, nn.Conv2d, nn.Conv3d, *_TRANSPOSED)


def _at(tree: Any, path: Path) -> Any:
    for index in path:
        tree = tree[index]
    return tree


@dataclass(frozen=True)
class Chain:
    """``root -> [bn] -> [post...]``: each op feeds the next (conv-bn-relu, linear-tanh).

    Two- and three-op chains are emitted in torch's simple forward format, longer ones in
    its reversed nested format; either way the root is the innermost node, which is
    torch's default root, so a chain needs no getters.
    """

    root: Op
    bn: Op | None = None
    post: tuple[Op, ...] = ()

    # torch's default root getter (the innermost node) is right for chains; no free input
    root_path: ClassVar[Path | None] = None
    extra_path: ClassVar[Path | None] = None

    @property
    def ops(self) -> tuple[Op, ...]:
        return (self.root, *([self.bn] if self.bn is not None else []), *self.post)

    @property
    def complex(self) -> bool:
        return len(self.ops) > 3

    @property
    def pattern(self) -> Any:
        if not self.complex:
            return self.ops
        nested: Any = self.ops[0]
        for op in self.ops[1:]:
            nested = (op, nested)
        return nested

    def roles(self, matched: Sequence[Any]) -> tuple[Any, Any, list[Any], list[Any]]:
        """(root, bn or None, [], post ops in forward order) from a fuser's arguments."""
        flat = list(matched)
        if self.complex:  # matched is (last, (..., (second, first)))
            flat = []
            node: Any = tuple(matched)
            while isinstance(node, tuple):
                flat.insert(0, node[0])
                node = node[1]
            flat.insert(0, node)
        has_bn = self.bn is not None
        return flat[0], flat[1] if has_bn else None, [], flat[1 + has_bn :]


@dataclass(frozen=True)
class BinaryRoot:
    """``op(root_side, other)`` with the root (optionally ``bn(root)``) on one ``side``,
    anything on the other, optionally followed by ``post`` (conv + add, conv + add + relu).

    The free input becomes an extra argument of the fused module, so the shape supplies
    an extra-inputs getter; the root sits mid-pattern, so it supplies a root getter too.
    """

    op: Op
    root: Op
    side: Literal["left", "right"] = "left"
    bn: Op | None = None
    post: Op | None = None

    complex: ClassVar[bool] = True  # MatchAllNode has no place in torch's simple format

    def __post_init__(self) -> None:
        if self.side not in ("left", "right"):
            raise ValueError(f"BinaryRoot.side must be 'left' or 'right', got {self.side!r}")

    @property
    def _binary(self) -> Any:
        rooted = (self.bn, self.root) if self.bn is not None else self.root
        return (self.op, rooted, MatchAllNode) if self.side == "left" else (
            self.op, MatchAllNode, rooted)

    @property
    def pattern(self) -> Any:
        return (self.post, self._binary) if self.post is not None else self._binary

    @property
    def _binary_path(self) -> Path:
        return (1,) if self.post is not None else ()

    @property
    def root_path(self) -> Path:
        side = (1,) if self.side == "left" else (2,)
        return self._binary_path + side + ((1,) if self.bn is not None else ())

    @property
    def extra_path(self) -> Path:
        return self._binary_path + ((2,) if self.side == "left" else (1,))

    def roles(self, matched: Sequence[Any]) -> tuple[Any, Any, list[Any], list[Any]]:
        """(root, bn or None, [binary op], [post] or []) from a fuser's nested arguments.

        The binary op stays the function torch passes: fused modules such as
        ``ConvAdd2d`` take it as one."""
        tree = tuple(matched)
        bn = _at(tree, (*self.root_path[:-1], 0)) if self.bn is not None else None
        binary = [_at(tree, (*self._binary_path, 0))]
        post = [tree[0]] if self.post is not None else []
        return _at(tree, self.root_path), bn, binary, post


Shape = Chain | BinaryRoot


def chain(*ops: Op, bn: Op | None = None) -> Chain:
    """``chain(conv, relu)`` / ``chain(conv, bn=bn2d)`` / ``chain(conv, relu, bn=bn2d)``:
    the first op is the root; ``bn`` sits right after it; the rest follow in order."""
    if not ops:
        raise ValueError("chain() needs at least the root op")
    return Chain(ops[0], bn, tuple(ops[1:]))


def _fold(root: nn.Module, bn: nn.Module) -> nn.Module:
    if isinstance(root, nn.Linear):
        return fuse_linear_bn_eval(root, bn)  # type: ignore[arg-type]
    if isinstance(root, _CONVS):
        return fuse_conv_bn_eval(root, bn, transpose=isinstance(root, _TRANSPOSED))  # type: ignore[arg-type]
    raise NotImplementedError(f"cannot fold batch norm into {type(root).__name__}")


def _check_qat_bn(root: nn.Module, bn: nn.Module) -> None:
    out = getattr(root, "out_channels", getattr(root, "out_features", None))
    if getattr(bn, "num_features", out) != out:
        raise ValueError(f"{type(bn).__name__} has {bn.num_features} features, "
                         f"{type(root).__name__} produces {out}")
    if not (getattr(bn, "affine", True) and getattr(bn, "track_running_stats", True)):
        raise ValueError(f"QAT fusion needs {type(bn).__name__} with affine=True "
                         "and track_running_stats=True")


def make_fuser(
    shape: Shape, into: ModuleType | None, qat_into: ModuleType | None
) -> Callable[..., nn.Module]:
    """The fuser method for ``shape``: see the module docstring for what it builds."""
    name = describe(shape.pattern)

    def fuser(is_qat: bool, *matched: Any) -> nn.Module:
        root, bn, binary, post = shape.roles(matched)
        modules = [m for m in (root, bn, *post) if isinstance(m, nn.Module)]
        if len({m.training for m in modules}) > 1:
            raise ValueError(f"fusing {name}: modules mix train and eval mode: {modules}")
        # torch hands over functional post-ops as functions; fused modules take modules
        post = [post_op_module(op, training=root.training, pattern=name) for op in post]
        others = [*binary, *post]
        if bn is not None:
            if is_qat:
                if qat_into is None:
                    raise NotImplementedError(
                        f"fusing {name}: no QAT fusion is declared (the backend fuses it "
                        "for inference only); quantize this model post-training instead"
                    )
                _check_qat_bn(root, bn)
                return qat_into(root, bn, *others)
            root = _fold(root, bn)
        return into(root, *others) if into is not None else root

    fuser.__qualname__ = fuser.__name__ = f"fuse {name}"
    return fuser


def fusion(
    shape: Shape,
    dtype_configs: Sequence[DTypeConfig],
    *,
    into: ModuleType | None = None,
    qat_into: ModuleType | None = None,
    fused: ModuleType | Literal["derive"] | None = "derive",
    **fields: Any,
) -> BackendPatternConfig:
    """A fusion pattern config: the fuser, getters and fused module follow from ``shape``.

    ``into`` is what the fused ops become (``ConvReLU2d``; ``None`` for a bare folded
    root), ``qat_into`` what they become when fusing for QAT with a batch norm
    (``ConvBnReLU2d``; ``None`` means QAT fusion is unsupported and raises). The config's
    ``fused`` module defaults to the QAT form when there is a batch norm, else ``into``.
    Remaining keywords go to :func:`~qcore.fx.patterns.pattern_config`.
    """
    if fused == "derive":
        fused = qat_into if shape.bn is not None and qat_into is not None else into
    getters: dict[str, Any] = {}
    root_path, extra_path = shape.root_path, shape.extra_path
    if root_path is not None:

        def root_node(nodes: Any) -> Any:
            return _at(nodes, root_path)

        getters["root_node_getter"] = root_node
    if extra_path is not None:

        def extra_inputs(nodes: Any) -> list[Any]:
            return [_at(nodes, extra_path)]

        getters["extra_inputs_getter"] = extra_inputs
    return pattern_config(
        shape.pattern,
        dtype_configs,
        complex_pattern=shape.complex,
        fused=fused,
        fuser=make_fuser(shape, into, qat_into),
        **getters,
        **fields,
    )
