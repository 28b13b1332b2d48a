"""Module/operator scoping, including a module instance called at several sites."""

from __future__ import annotations

import torch
from torch import nn
from torch.fx import GraphModule
from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY

import qcore
from qquantizer_xnnpack.quantizer import XNNPACKQuantizer, get_symmetric_quantization_config

PER_CHANNEL = get_symmetric_quantization_config(is_per_channel=True)
PER_TENSOR = get_symmetric_quantization_config()


class Block(nn.Module):
    """A residual block that calls one ReLU module at two sites."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(4, 4, 3, padding=1)
        self.conv2 = nn.Conv2d(4, 4, 3, padding=1)
        self.relu = nn.ReLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu(self.conv1(x))
        return self.relu(self.conv2(y) + x)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Block()
        self.head = nn.Conv2d(4, 2, 1)
        self.fc = nn.Linear(2 * 8 * 8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.head(self.block(x)).flatten(1))


def _annotated(quantizer: XNNPACKQuantizer) -> GraphModule:
    gm = torch.export.export(Net().eval(), (torch.randn(1, 4, 8, 8),)).module()
    assert isinstance(gm, GraphModule)
    return quantizer.annotate(quantizer.transform_for_annotation(gm))


def _weight_scheme(gm: GraphModule, op_name: str) -> object:
    node = next(n for n in gm.graph.nodes if n.name == op_name)
    ann = node.meta.get(Q_ANNOTATION_KEY)
    if ann is None or not ann.input_qspec_map:
        return None
    return ann.input_qspec_map[node.args[1]].qscheme


def test_get_quantizer_returns_configured_xnnpack_quantizer() -> None:
    q = qcore.get_quantizer("xnnpack", is_per_channel=True, act_qmin=-127, weight_qmin=-126)
    assert isinstance(q, XNNPACKQuantizer)
    assert q.global_config == get_symmetric_quantization_config(
        is_per_channel=True, act_qmin=-127, weight_qmin=-126
    )
    assert q.global_config.input_activation.quant_min == -127


def test_module_name_scopes_convs_of_a_block_with_a_reused_relu() -> None:
    gm = _annotated(XNNPACKQuantizer().set_module_name("block", PER_CHANNEL))
    # both conv-relu sites inside the block, the second behind the residual add
    assert _weight_scheme(gm, "conv2d") == torch.per_channel_symmetric
    assert _weight_scheme(gm, "conv2d_1") == torch.per_channel_symmetric
    relus = [n for n in gm.graph.nodes if n.target == torch.ops.aten.relu.default]
    assert len(relus) == 2
    assert all(n.meta[Q_ANNOTATION_KEY].output_qspec is not None for n in relus)
    # neighbours outside the scope stay unannotated
    assert _weight_scheme(gm, "conv2d_2") is None
    assert _weight_scheme(gm, "linear") is None


def test_module_type_scope_and_global_do_not_overlap() -> None:
    q = XNNPACKQuantizer().set_global(PER_TENSOR).set_module_type(Block, PER_CHANNEL)
    gm = _annotated(q)
    assert _weight_scheme(gm, "conv2d") == torch.per_channel_symmetric
    assert _weight_scheme(gm, "conv2d_1") == torch.per_channel_symmetric
    assert _weight_scheme(gm, "conv2d_2") == torch.per_tensor_symmetric
    assert _weight_scheme(gm, "linear") == torch.per_tensor_symmetric


def test_module_name_none_leaves_the_scope_in_float() -> None:
    q = XNNPACKQuantizer().set_global(PER_TENSOR).set_module_name("head", None)
    gm = _annotated(q)
    assert _weight_scheme(gm, "conv2d_2") is None
    assert _weight_scheme(gm, "conv2d") == torch.per_tensor_symmetric
    report = q.explain(gm)
    assert [(r.node, r.reason) for r in report] == [("conv2d_2", "excluded by scope or filter")]
    assert "module name 'head'" in report[0].detail


def test_operator_type_scope_by_overload() -> None:
    q = XNNPACKQuantizer().set_operator_type(torch.ops.aten.linear.default, PER_CHANNEL)
    gm = _annotated(q)
    assert _weight_scheme(gm, "linear") == torch.per_channel_symmetric
    assert _weight_scheme(gm, "conv2d") is None


def test_unknown_operator_type_is_rejected_with_known_ops() -> None:
    try:
        XNNPACKQuantizer().set_operator_type(torch.ops.aten.tanh.default, PER_TENSOR)
    except ValueError as exc:
        assert "aten.tanh.default" in str(exc) and "aten.linear.default" in str(exc)
    else:
        raise AssertionError("expected ValueError")


def test_filter_function_applies_on_top_of_global() -> None:
    q = XNNPACKQuantizer().set_global(PER_TENSOR).set_filter_function(lambda n: n.name != "linear")
    gm = _annotated(q)
    assert _weight_scheme(gm, "linear") is None
    assert _weight_scheme(gm, "conv2d_2") == torch.per_tensor_symmetric


def test_reused_module_model_quantizes_end_to_end() -> None:
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    torch.manual_seed(0)
    model = Net().eval()
    x = torch.randn(4, 4, 8, 8)
    gm = torch.export.export(model, (x,)).module()
    prepared = prepare_pt2e(gm, qcore.get_quantizer("xnnpack", is_per_channel=True))
    for _ in range(4):
        prepared(torch.randn(4, 4, 8, 8))
    out = convert_pt2e(prepared)(x)
    ref = model(x)
    sqnr = 10 * torch.log10(ref.pow(2).mean() / (ref - out).pow(2).mean())
    assert sqnr > 25


class _Pooled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(2, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return nn.functional.max_pool2d(self.conv(x), 2)


def _pool_observed(quantizer: XNNPACKQuantizer) -> bool:
    """Whether the prepared model observes the pool's output (an observer reads it)."""
    from torchao.quantization.pt2e.quantize_pt2e import prepare_pt2e

    gm = torch.export.export(_Pooled().eval(), (torch.randn(1, 2, 4, 4),)).module()
    prepared = prepare_pt2e(gm, quantizer)
    (pool,) = [n for n in prepared.graph.nodes if n.target is torch.ops.aten.max_pool2d.default]
    return any(str(u.target).startswith("activation_post_process") for u in pool.users)


def test_an_operator_config_for_an_opt_in_annotator_runs_it() -> None:
    """max_pool2d is opt-in on XNNPACK (ExecuTorch's quantizer leaves it to qparam
    propagation): like any scoped config (qcore's ``Annotator.opt_in``), its operator
    config runs it, and the pool is observed."""
    op = torch.ops.aten.max_pool2d.default
    quantizer = XNNPACKQuantizer().set_global(PER_TENSOR).set_operator_type(op, PER_TENSOR)
    assert [a.name for a in quantizer.selected(PER_TENSOR, op, scoped=True)] == ["max_pool2d"]
    assert _pool_observed(quantizer)
