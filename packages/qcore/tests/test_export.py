"""``qcore.export``: ``torch.export`` with an error that names the module, the line and
the fix when a model cannot be exported at the given shapes (issue 20)."""

from __future__ import annotations

import textwrap

import pytest
import torch
from torch import Tensor, nn
from torch.fx import GraphModule

import qcore
from qcore.testing.fresh import run_fresh


class Gate(nn.Module):
    """Data-dependent control flow: a branch on a tensor's value."""

    def forward(self, x: Tensor) -> Tensor:
        if x.sum() > 0:
            return x * 2
        return x - 1


class Repeat(nn.Module):
    """A shape computed from data (``.item()``)."""

    def forward(self, x: Tensor) -> Tensor:
        return x.repeat(1, int(x.abs().max().item() * 3) + 1)


class Net(nn.Module):
    def __init__(self, inner: nn.Module) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.block = nn.Sequential(nn.ReLU(), inner)

    def forward(self, x: Tensor) -> Tensor:
        return self.block(self.fc(x))  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("inner", "line"),
    [
        (Gate(), "if x.sum() > 0:"),
        (Repeat(), "return x.repeat(1, int(x.abs().max().item() * 3) + 1)"),
    ],
)
def test_a_data_dependent_model_names_module_line_and_fix(inner: nn.Module, line: str) -> None:
    with pytest.raises(qcore.ExportError) as caught:
        qcore.export(Net(inner), (torch.randn(2, 4),))
    error = caught.value
    message = str(error)
    assert message.startswith("cannot export Net at the given shapes")
    assert "data-dependent" in message
    assert f"in 'block.1' ({type(inner).__name__})" in message
    assert f"`{line}`" in message
    assert 'attn_implementation="eager"' in message and "fixed shapes" in message
    assert error.module_name == "block.1"
    assert isinstance(error.torch_error, RuntimeError)  # what torch raised, kept
    assert error.__cause__ is None and error.__suppress_context__  # not printed


def test_an_exportable_model_gives_the_graph_module_prepare_pt2e_takes() -> None:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).eval()
    x = torch.randn(3, 4)
    gm = qcore.export(model, (x,))
    assert isinstance(gm, GraphModule)
    assert torch.equal(gm(x), model(x))


def test_the_user_sees_one_error_and_no_torch_internals() -> None:
    """Uncaught, in a fresh interpreter: the traceback ends in qcore's error, has no frame
    inside torch, and torch's dump of the partial graph is held back."""
    source = textwrap.dedent(
        """
        import torch, qcore
        from torch import nn

        class Gate(nn.Module):
            def forward(self, x):
                if x.sum() > 0:
                    return x * 2
                return x - 1

        qcore.export(nn.Sequential(nn.Linear(4, 4), Gate()), (torch.randn(2, 4),))
        """
    )
    outcome = run_fresh(source)
    assert outcome.raised("ExportError"), outcome.describe()
    traceback = outcome.stderr[outcome.stderr.index("Traceback") :]
    assert "site-packages/torch" not in traceback and "/torch/" not in traceback
    assert "def forward(" not in outcome.stderr
    assert "in '1' (Gate)" in traceback
