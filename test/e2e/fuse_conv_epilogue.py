"""Convolutions with the epilogues -cleave-fuse-conv-epilogue takes, on each of the CPU kernel's
paths: a residual block (3x3 convolutions: oneDNN's primitive, batch norms folded first), a
bottleneck whose residual is a downsampling convolution (1x1: a GEMM), a depthwise convolution
with relu6, a projection whose residual has no clamp, a grouped convolution with relu, and
hardtanh(0, 3); and two that must stay apart: a convolution whose result is read twice, and a
relu after an add that broadcasts. Batch 5 by default: oneDNN's path runs 4 images a call, then
the rest.

usage: fuse_conv_epilogue.py -o MODEL.pt --io DIR [--batch B]

--io DIR writes inputs.safetensors and PyTorch's outputs.safetensors (eval mode, no_grad).
"""
import torch
from torch import nn
import torch.nn.functional as F

from traced_export import export, parse_args


class Epilogues(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, padding=1, bias=False)
        self.stem_bn = nn.BatchNorm2d(16)
        self.block = nn.Conv2d(16, 16, 3, padding=1)
        self.block_bn = nn.BatchNorm2d(16)
        self.reduce = nn.Conv2d(16, 8, 1, bias=False)
        self.expand = nn.Conv2d(8, 32, 1)
        self.downsample = nn.Conv2d(16, 32, 1, bias=False)
        self.depthwise = nn.Conv2d(32, 32, 3, padding=1, groups=32)
        self.project = nn.Conv2d(32, 32, 1)
        self.grouped = nn.Conv2d(32, 32, 3, padding=1, groups=4)
        self.hard = nn.Conv2d(32, 16, 1)
        self.shared = nn.Conv2d(16, 16, 1)
        self.scale = nn.Parameter(torch.randn(1, 16, 1, 1))

    def forward(self, x):
        x = torch.relu(self.stem_bn(self.stem(x)))
        x = torch.relu(self.block_bn(self.block(x)) + x)
        x = torch.relu(self.expand(torch.relu(self.reduce(x))) + self.downsample(x))
        x = self.project(F.relu6(self.depthwise(x))) + x
        x = torch.relu(self.grouped(x))
        x = F.hardtanh(self.hard(x), 0.0, 3.0)
        y = self.shared(x)
        return torch.relu(y + self.scale) + y


def main():
    a = parse_args(__doc__, batch=5)
    torch.manual_seed(0)
    model = Epilogues()
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                c = m.num_features
                m.running_mean.copy_(torch.randn(c, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(c, generator=g) + 0.5)
                m.weight.copy_(torch.rand(c, generator=g) + 0.5)
                m.bias.copy_(torch.randn(c, generator=g) * 0.1)
    x = torch.randn(a.batch, 3, 18, 14, generator=torch.Generator().manual_seed(1)) * 2
    export(model, x, "fuse_conv_epilogue", a)


if __name__ == "__main__":
    main()
