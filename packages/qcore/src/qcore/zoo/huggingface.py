"""Small Hugging Face ``transformers`` models with random weights, for PT2E flow tests.

Each model is built from its ``transformers`` config class (nothing is downloaded), at
a few layers and a hidden size of 64, with eager attention (the SDPA path exports too,
but the eager one is what most exported transformers run), and wrapped to return the
last hidden state: the tensor the flows' accuracy is measured on. Inputs are
deterministic by seed; token inputs come with an attention mask that pads the end of
the second sequence, so the mask construction Hugging Face exports (integer indices,
``aten.index``, an additive mask of ``finfo.min``) is really exercised.

``transformers`` is imported on first use: it is a test dependency, never one of qcore's.
Plugin test suites can run their quantizers on the same models::

    model, inputs = build("gpt2")
    exported = torch.export.export(model, inputs(0)).module()
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Callable
from typing import Any

import torch
from torch import Tensor, nn
from torch.fx import GraphModule

__all__ = ["HELD_OUT", "MODELS", "InputsBySeed", "build", "hidden_state_model", "quantize"]

InputsBySeed = Callable[[int], tuple[Tensor, ...]]

BATCH, TOKENS, VOCAB = 2, 16, 128
#: The common small size: every model has 2 layers, hidden 64, 4 heads.
SMALL: dict[str, int] = {"hidden": 64, "layers": 2, "heads": 4, "ffn": 128}


def _transformers() -> Any:
    return importlib.import_module("transformers")


class LastHiddenState(nn.Module):
    """A Hugging Face model called with keyword inputs, returning ``last_hidden_state``
    (export needs a plain tensor output and positional inputs)."""

    def __init__(self, model: nn.Module, input_names: tuple[str, ...]) -> None:
        super().__init__()
        self.model = model
        self.input_names = input_names

    def forward(self, *inputs: Tensor) -> Tensor:
        out = self.model(**dict(zip(self.input_names, inputs, strict=True)))
        hidden: Tensor = out.last_hidden_state
        return hidden


def hidden_state_model(model: nn.Module, *input_names: str) -> nn.Module:
    """``model`` in eval mode, wrapped to take ``input_names`` positionally and return its
    last hidden state."""
    return LastHiddenState(model.eval(), input_names).eval()


def _generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _tokens(seed: int) -> tuple[Tensor, Tensor]:
    """Token ids and an attention mask whose second row pads its last quarter."""
    ids = torch.randint(0, VOCAB, (BATCH, TOKENS), generator=_generator(seed))
    mask = torch.ones(BATCH, TOKENS, dtype=torch.long)
    mask[1, -TOKENS // 4 :] = 0
    return ids, mask


def _bert() -> nn.Module:
    t = _transformers()
    config = t.BertConfig(
        vocab_size=VOCAB,
        hidden_size=SMALL["hidden"],
        num_hidden_layers=SMALL["layers"],
        num_attention_heads=SMALL["heads"],
        intermediate_size=SMALL["ffn"],
        max_position_embeddings=TOKENS,
        attn_implementation="eager",
    )
    return hidden_state_model(t.BertModel(config), "input_ids", "attention_mask")


def _distilbert() -> nn.Module:
    t = _transformers()
    config = t.DistilBertConfig(
        vocab_size=VOCAB,
        dim=SMALL["hidden"],
        n_layers=SMALL["layers"],
        n_heads=SMALL["heads"],
        hidden_dim=SMALL["ffn"],
        max_position_embeddings=TOKENS,
        attn_implementation="eager",
    )
    return hidden_state_model(t.DistilBertModel(config), "input_ids", "attention_mask")


def _gpt2() -> nn.Module:
    t = _transformers()
    config = t.GPT2Config(
        vocab_size=VOCAB,
        n_embd=SMALL["hidden"],
        n_layer=SMALL["layers"],
        n_head=SMALL["heads"],
        n_positions=TOKENS,
        bos_token_id=0,
        eos_token_id=0,
        use_cache=False,
        attn_implementation="eager",
    )
    return hidden_state_model(t.GPT2Model(config), "input_ids", "attention_mask")


def _vit() -> nn.Module:
    t = _transformers()
    config = t.ViTConfig(
        image_size=32,
        patch_size=8,
        num_channels=3,
        hidden_size=SMALL["hidden"],
        num_hidden_layers=SMALL["layers"],
        num_attention_heads=SMALL["heads"],
        intermediate_size=SMALL["ffn"],
        attn_implementation="eager",
    )
    return hidden_state_model(t.ViTModel(config, add_pooling_layer=False), "pixel_values")


#: Whisper's encoder: log-mel frames through two conv1d + GELU, then transformer layers.
MEL_BINS, FRAMES = 16, 32


def _whisper_encoder() -> nn.Module:
    t = _transformers()
    config = t.WhisperConfig(
        num_mel_bins=MEL_BINS,
        d_model=SMALL["hidden"],
        encoder_layers=SMALL["layers"],
        encoder_attention_heads=SMALL["heads"],
        encoder_ffn_dim=SMALL["ffn"],
        decoder_layers=1,
        decoder_attention_heads=SMALL["heads"],
        decoder_ffn_dim=SMALL["ffn"],
        max_source_positions=FRAMES // 2,
        max_target_positions=TOKENS,
        vocab_size=VOCAB,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
        attn_implementation="eager",
    )
    encoder = t.WhisperModel(config).get_encoder()
    return hidden_state_model(encoder, "input_features")


def _image(seed: int) -> tuple[Tensor, ...]:
    """Pixels in [-1, 1], as ViT's image processor normalizes them."""
    return (torch.rand(BATCH, 3, 32, 32, generator=_generator(seed)) * 2 - 1,)


def _mel(seed: int) -> tuple[Tensor, ...]:
    return (torch.randn(BATCH, MEL_BINS, FRAMES, generator=_generator(seed)),)


#: name -> (model factory, inputs by seed: seed 0 exports, 1.. calibrate)
MODELS: dict[str, tuple[Callable[[], nn.Module], InputsBySeed]] = {
    "bert": (_bert, _tokens),
    "distilbert": (_distilbert, _tokens),
    "gpt2": (_gpt2, _tokens),
    "vit": (_vit, _image),
    "whisper_encoder": (_whisper_encoder, _mel),
}


def build(name: str) -> tuple[nn.Module, InputsBySeed]:
    """Model ``name`` with seeded random weights (the same in every process), and its
    inputs by seed."""
    factory, inputs = MODELS[name]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = factory()
    return model, inputs


#: The seed of the batch accuracy is measured on (never one calibration saw).
HELD_OUT = 100


def quantize(
    name: str, quantizer: Any, calibration: int = 4
) -> tuple[GraphModule, nn.Module, tuple[Tensor, ...]]:
    """Model ``name`` through the PT2E flow: ``torch.export`` at the example's shapes,
    ``prepare_pt2e`` with ``quantizer``, calibration on seeds 1..``calibration``,
    ``convert_pt2e``. Returns the converted model, the float one and the held-out batch."""
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    model, inputs = build(name)
    exported = torch.export.export(copy.deepcopy(model), inputs(0)).module()
    prepared = prepare_pt2e(exported, quantizer)
    with torch.no_grad():
        for seed in range(1, calibration + 1):
            prepared(*inputs(seed))
    return convert_pt2e(prepared), model, inputs(HELD_OUT)


def first_layer(model: nn.Module) -> nn.Module:
    """A zoo model cut, in place, to the first of its layers (its one ``nn.ModuleList`` of
    ``SMALL["layers"]`` blocks): the next layers repeat the first's ops and kernels."""
    cut = []
    for module in list(model.modules()):
        for name, child in list(module.named_children()):
            if isinstance(child, nn.ModuleList) and len(child) == SMALL["layers"]:
                setattr(module, name, child[:1])
                cut.append(f"{type(module).__name__}.{name}")
    if len(cut) != 1:
        raise ValueError(f"first_layer: expected one list of layers, found {cut or 'none'}")
    return model
