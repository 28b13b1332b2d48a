"""The private torch/torchao facts qcore spells itself in ``qcore._torch_private`` still
hold in the torch and torchao installed (a torch upgrade that moves one fails here)."""

from __future__ import annotations

from torchao.quantization.pt2e.quantizer.quantizer import Q_ANNOTATION_KEY as TORCHAO_KEY

from qcore._torch_private import Q_ANNOTATION_KEY


def test_the_annotation_key_is_torchaos() -> None:
    assert Q_ANNOTATION_KEY == TORCHAO_KEY
