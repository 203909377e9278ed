"""A network of the convolutions the CPU backend runs by its own kernels rather than one GEMM:
depthwise ones (7x7 as ConvNeXt, 3x3 stride 2 as MobileNet, a channel multiplier of 2 with
dilation 2, 5x5 with uneven strides, a kernel wider than tall) and small grouped ones as
RegNet's, with and without bias, on random weights.

usage: conv_variants.py -o MODEL.pt --io DIR [--batch B]

--io DIR writes inputs.safetensors and PyTorch's outputs.safetensors (eval mode, no_grad).
"""
import torch
from torch import nn

from traced_export import export, parse_args


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
    a = parse_args(__doc__)
    torch.manual_seed(0)
    x = torch.randn(a.batch, 3, 40, 36, generator=torch.Generator().manual_seed(1))
    export(ConvVariants(), x, "conv_variants", a)


if __name__ == "__main__":
    main()
