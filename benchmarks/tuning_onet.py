"""``qcore.tune`` on trained weights shipped inside a wheel: MTCNN's ONet (facenet-pytorch).

facenet-pytorch's wheel carries the three MTCNN networks' weights
(``facenet_pytorch/data/{pnet,rnet,onet}.pt``); ONet, the largest (a 4-conv, 2-linear
CNN with PReLUs and three heads), is rebuilt here from its state dict, so the package
itself (which pins an old torch) is never installed. No face crops ship with it, so the
measure is the output SQNR against float on smooth random 48x48 crops, normalised as MTCNN
normalises its input; held-out batches differ from the calibration ones.

    pip download --no-deps facenet-pytorch==2.6.0 -d /tmp/fw
    python -c "import zipfile; zipfile.ZipFile('/tmp/fw/facenet_pytorch-2.6.0-py3-none-any.whl').extract('facenet_pytorch/data/onet.pt', '/tmp/fw')"
    OMP_NUM_THREADS=1 python benchmarks/tuning_onet.py /tmp/fw/facenet_pytorch/data/onet.pt
"""

from __future__ import annotations

import argparse
import warnings

import torch
import torch.nn.functional as F
from torch import Tensor, nn

import qcore
from qcore.tuning.sensitivity import output_sqnr


class ONet(nn.Module):
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("weights")
    parser.add_argument("--flows", nargs="+", default=["xnnpack", "x86", "onednn", "executorch"])
    parser.add_argument("--target", type=float, default=30.0)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    model = ONet().eval()
    model.load_state_dict(torch.load(args.weights))
    generator = torch.Generator().manual_seed(0)

    def crops() -> tuple[Tensor]:
        x = F.interpolate(torch.rand(16, 3, 12, 12, generator=generator) * 255, size=48,
                          mode="bilinear")  # fmt: skip
        return ((x - 127.5) * 0.0078125,)

    calibration = [crops() for _ in range(4)]
    example = crops()
    heldout = [crops() for _ in range(4)]

    def heldout_sqnr(candidate: nn.Module) -> float:
        with torch.no_grad():
            return min(output_sqnr(model(*b), candidate(*b)) for b in heldout)

    print("| flow | ops | int8 (dB) | tuned (dB) | held-out tuned, worst batch (dB) | in float | met |")
    print("|---|---:|---:|---:|---:|---|---|")
    for flow in args.flows:
        result = qcore.tune(model, example, calibration, flow, target_sqnr_db=args.target)
        floating = ", ".join(op.module_path for op in result.float_ops) or "none"
        print(f"| {flow} | {len(result.quantizable_ops)} | {result.int8_score:.1f} | "
              f"{result.score:.1f} | {heldout_sqnr(result.model):.1f} | {floating} | "
              f"{'yes' if result.met else 'no: ' + result.message} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
