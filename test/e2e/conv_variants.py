"""A network of the convolutions the CPU backend runs by its own kernels rather than one GEMM:
depthwise ones (7x7 as ConvNeXt, 3x3 stride 2 as MobileNet, a channel multiplier of 2 with
dilation 2, 5x5 with uneven strides, a kernel wider than tall) and small grouped ones as
RegNet's, with and without bias, on random weights.

usage: conv_variants.py -o MODEL.pt --io DIR [--batch B]

--io DIR writes inputs.safetensors and PyTorch's outputs.safetensors (eval mode, no_grad).
"""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
from safetensors_io import save_file  # noqa: E402

import torch  # noqa: E402
from torch import nn  # noqa: E402


class ConvVariants(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1)
        self.dw7 = nn.Conv2d(16, 16, 7, padding=3, groups=16)
        self.dw3s2 = nn.Conv2d(16, 16, 3, stride=2, padding=1, groups=16, bias=False)
        self.mult = nn.Conv2d(16, 32, 3, padding=2, dilation=2, groups=16)
        self.dw5 = nn.Conv2d(32, 32, 5, stride=(2, 1), padding=2, groups=32)
        self.wide = nn.Conv2d(32, 32, (1, 3), padding=(0, 1), groups=32, bias=False)
        self.grouped = nn.Conv2d(32, 32, 3, padding=1, groups=4)
        self.grouped_s2 = nn.Conv2d(32, 48, 3, stride=2, padding=1, groups=8, bias=False)

    def forward(self, x):
        x = torch.relu(self.stem(x))
        x = x + self.dw7(x)
        x = self.dw3s2(x)
        x = torch.relu(self.mult(x))
        x = self.dw5(x)
        x = self.wide(x)
        x = torch.relu(self.grouped(x))
        return self.grouped_s2(x)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("-o", required=True)
    p.add_argument("--io", required=True)
    p.add_argument("--batch", type=int, default=2)
    a = p.parse_args()
    torch.manual_seed(0)
    model = ConvVariants().eval()
    x = torch.randn(a.batch, 3, 40, 36, generator=torch.Generator().manual_seed(1))
    traced = torch.jit.trace(model, (x,))
    with torch.no_grad():
        out = traced(x)
    meta = {"format": 1, "model": "conv_variants",
            "inputs": [{"name": "x", "shape": list(x.shape), "dtype": "f32"}]}
    traced.save(a.o, _extra_files={"cleave.json": json.dumps(meta)})
    os.makedirs(a.io, exist_ok=True)
    save_file({"x": x}, os.path.join(a.io, "inputs.safetensors"))
    save_file({"output_0": out}, os.path.join(a.io, "outputs.safetensors"))


if __name__ == "__main__":
    main()
