"""Convolutions followed by batch norms in eval mode, with running statistics and affine weights
that are not their defaults (a fresh BatchNorm2d has mean 0, var 1, weight 1, bias 0, which a
fold would barely change): a filter without bias, a depthwise one with bias, a 1x1 before a batch
norm without affine weights, a grouped one; and two that must not fold: a convolution whose
result is also read elsewhere, and a batch norm after a relu.

usage: fold_batch_norm.py -o MODEL.pt --io DIR [--batch B]

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


class ConvBatchNorms(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.stem_bn = nn.BatchNorm2d(16)
        self.dw = nn.Conv2d(16, 16, 3, stride=2, padding=1, groups=16)
        self.dw_bn = nn.BatchNorm2d(16, eps=1e-3)
        self.pw = nn.Conv2d(16, 32, 1)
        self.pw_bn = nn.BatchNorm2d(32, affine=False)
        self.grouped = nn.Conv2d(32, 32, 3, padding=1, groups=4, bias=False)
        self.grouped_bn = nn.BatchNorm2d(32)
        self.shared = nn.Conv2d(32, 32, 1)
        self.shared_bn = nn.BatchNorm2d(32)
        self.after_relu_bn = nn.BatchNorm2d(32)

    def forward(self, x):
        x = torch.relu(self.stem_bn(self.stem(x)))
        x = torch.relu(self.dw_bn(self.dw(x)))
        x = self.pw_bn(self.pw(x))
        x = torch.relu(self.grouped_bn(self.grouped(x)))
        y = self.shared(x)
        x = self.shared_bn(y) + 0.5 * y
        return self.after_relu_bn(torch.relu(x))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("-o", required=True)
    p.add_argument("--io", required=True)
    p.add_argument("--batch", type=int, default=2)
    a = p.parse_args()
    torch.manual_seed(0)
    model = ConvBatchNorms()
    g = torch.Generator().manual_seed(2)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            m.running_mean.copy_(torch.randn(c, generator=g))
            m.running_var.copy_(torch.rand(c, generator=g) * 2 + 0.05)
            if m.affine:
                m.weight.data.copy_(torch.rand(c, generator=g) + 0.5)
                m.bias.data.copy_(torch.randn(c, generator=g))
    model.eval()
    x = torch.randn(a.batch, 3, 24, 20, generator=torch.Generator().manual_seed(1))
    traced = torch.jit.trace(model, (x,))
    with torch.no_grad():
        out = traced(x)
    meta = {"format": 1, "model": "fold_batch_norm",
            "inputs": [{"name": "x", "shape": list(x.shape), "dtype": "f32"}]}
    traced.save(a.o, _extra_files={"cleave.json": json.dumps(meta)})
    os.makedirs(a.io, exist_ok=True)
    save_file({"x": x}, os.path.join(a.io, "inputs.safetensors"))
    save_file({"output_0": out}, os.path.join(a.io, "outputs.safetensors"))


if __name__ == "__main__":
    main()
