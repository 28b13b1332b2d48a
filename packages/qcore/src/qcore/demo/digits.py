"""The demo's task: scikit-learn's bundled 8x8 digits and a compact CNN trained on them.

The data ships inside scikit-learn (no download). Training is seeded and takes seconds
on two cores; the weights are cached on disk, keyed by everything that shapes them.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor, nn

from qcore.demo.progress import progress

__all__ = ["DATASET", "EVAL_BATCH", "Digits", "load_digits", "logits", "top1", "trained_model"]

DATASET = "scikit-learn digits (8x8, 10 classes)"
SEED = 0
HELD_OUT = 400
EPOCHS = 12
BATCH = 64
#: Bump when the model, data split or training changes: invalidates cached weights.
RECIPE = f"digits-cnn-v1-seed{SEED}-held{HELD_OUT}-epochs{EPOCHS}-batch{BATCH}"


@dataclass(frozen=True)
class Digits:
    """Normalized images ``(N, 1, 8, 8)`` and labels, split into train and held-out."""

    train_x: Tensor
    train_y: Tensor
    test_x: Tensor
    test_y: Tensor

    def calibration_batches(self, count: int = 8, size: int = 50) -> list[Tensor]:
        """Training images (never held-out ones) to calibrate observers on."""
        return [self.train_x[i * size : (i + 1) * size] for i in range(count)]


def load_digits() -> Digits:
    """The digits from scikit-learn's package data, normalized and split (seeded)."""
    from sklearn.datasets import load_digits as sklearn_digits

    bunch = sklearn_digits()
    images = torch.tensor(bunch.images, dtype=torch.float32).unsqueeze(1) / 16.0
    labels = torch.tensor(bunch.target, dtype=torch.long)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(SEED))
    images, labels = images[order], labels[order]
    train_x, test_x = images[HELD_OUT:], images[:HELD_OUT]
    mean, std = train_x.mean(), train_x.std()
    return Digits(
        (train_x - mean) / std, labels[HELD_OUT:], (test_x - mean) / std, labels[:HELD_OUT]
    )


def _block(c_in: int, c_out: int) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(c_in, c_out, 3, padding=1), nn.BatchNorm2d(c_out), nn.ReLU())


def build_model() -> nn.Sequential:
    """Conv-BN-ReLU x2, max-pool, conv-BN-ReLU, global pool, linear: a Sequential, so each
    stage's output can be compared on its own (the demo's per-layer chart)."""
    return nn.Sequential(
        _block(1, 32),
        _block(32, 64),
        nn.MaxPool2d(2),
        _block(64, 64),
        nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten()),
        nn.Linear(64, 10),
    )


STAGE_NAMES = ("conv1", "conv2", "maxpool", "conv3", "avgpool", "fc")


def cache_dir() -> Path:
    """``$QCORE_CACHE_DIR``, else ``$XDG_CACHE_HOME/qcore``, else ``~/.cache/qcore``."""
    explicit = os.environ.get("QCORE_CACHE_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "qcore"


def _train(model: nn.Module, data: Digits) -> None:
    generator = torch.Generator().manual_seed(SEED)
    optimizer = torch.optim.Adam(model.parameters(), lr=3e-3)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, EPOCHS)
    model.train()
    for _ in progress(range(EPOCHS), desc="training", unit="epoch"):
        order = torch.randperm(len(data.train_y), generator=generator)
        for start in range(0, len(order), BATCH):
            index = order[start : start + BATCH]
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(data.train_x[index]), data.train_y[index])
            torch.autograd.backward(loss)
            optimizer.step()
        schedule.step()
    model.eval()


def trained_model(data: Digits, *, retrain: bool = False) -> tuple[nn.Sequential, bool]:
    """The trained float model and whether it came from the cache."""
    key = hashlib.sha256(f"{RECIPE}-{torch.__version__}".encode()).hexdigest()[:16]
    path = cache_dir() / f"demo-{key}.pt"
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        model = build_model()
    if path.exists() and not retrain:
        model.load_state_dict(torch.load(path, weights_only=True))
        return model.eval(), True
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(SEED)
        _train(model, data)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    torch.save(model.state_dict(), tmp)
    tmp.replace(path)  # atomic: a concurrent or interrupted run never reads half a file
    return model, False


#: Every model sees held-out images in batches of this size, so a compiled model is
#: compiled once (HELD_OUT is a multiple of it).
EVAL_BATCH = 50


def logits(model: Callable[[Tensor], Tensor], images: Tensor) -> Tensor:
    """The model's outputs on ``images``, run in batches of :data:`EVAL_BATCH`."""
    with torch.no_grad():
        return torch.cat([model(images[i : i + EVAL_BATCH]) for i in range(0, len(images), EVAL_BATCH)])


def top1(outputs: Tensor, labels: Tensor) -> float:
    """Top-1 accuracy in percent."""
    return float((outputs.argmax(1) == labels).float().mean() * 100)
