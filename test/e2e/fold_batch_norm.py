"""Convolutions followed by batch norms in eval mode, with running statistics and affine weights
that are not their defaults (a fresh BatchNorm2d has mean 0, var 1, weight 1, bias 0, which a
fold would barely change): a filter without bias, a depthwise one with bias, a 1x1 before a batch
norm without affine weights, a grouped one; and two that must not fold: a convolution whose
result is also read elsewhere, and a batch norm after a relu.

usage: fold_batch_norm.py -o MODEL.pt --io DIR [--batch B]

--io DIR writes inputs.safetensors and PyTorch's outputs.safetensors (eval mode, no_grad).
"""
import torch
from torch import nn

from traced_export import export, parse_args


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
    a = parse_args(__doc__)
    torch.manual_seed(0)
    model = ConvBatchNorms()
    g = torch.Generator().manual_seed(2)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                c = m.num_features
                m.running_mean.copy_(torch.randn(c, generator=g))
                m.running_var.copy_(torch.rand(c, generator=g) * 2 + 0.05)
                if m.affine:
                    m.weight.copy_(torch.rand(c, generator=g) + 0.5)
                    m.bias.copy_(torch.randn(c, generator=g))
    x = torch.randn(a.batch, 3, 24, 20, generator=torch.Generator().manual_seed(1))
    export(model, x, "fold_batch_norm", a)


if __name__ == "__main__":
    main()
