"""Tiny models for the importer's training tests: losses, batch norm, embedding, frozen and
tied parameters. usage: training_models.py NAME -o OUT.pt (writes cleave.json's input shapes)."""
import argparse
import json

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Loss(nn.Module):
    """fn(self.w(x), *data): a linear layer's scores and a loss of them."""

    def __init__(self, fn, features=6, classes=5):
        super().__init__()
        self.w = nn.Linear(features, classes)
        self.fn = fn

    def forward(self, x, t):
        return self.fn(self.w(x), t)


class Spatial(nn.Module):
    """Scores [N, C, L] from a 1x1 projection of x [N, L, F]."""

    def __init__(self, fn):
        super().__init__()
        self.w = nn.Linear(6, 5)
        self.fn = fn

    def forward(self, x, t):
        return self.fn(self.w(x).transpose(1, 2), t)


class Norm(nn.Module):
    def __init__(self, momentum):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)
        self.bn = nn.BatchNorm2d(4, momentum=momentum)

    def forward(self, x):
        return self.bn(self.conv(x)).sum()


class Twice(nn.Module):
    """One batch norm called twice: num_batches_tracked grows by 2 per step."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x):
        return self.bn(self.bn(x)).sum()


class Embed(nn.Module):
    def __init__(self, **kwargs):
        super().__init__()
        self.emb = nn.Embedding(7, 4, **kwargs)

    def forward(self, ids):
        return self.emb(ids).sum()


class Tied(nn.Module):
    """Tied embedding and head, a frozen bias, a mask buffer nothing reads, a non-persistent
    buffer, a batch norm: every kind of state_dict entry."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(7, 4)
        self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
        self.blocks[1].bias.requires_grad_(False)
        self.norm = nn.BatchNorm1d(4)
        self.head = nn.Linear(4, 7, bias=False)
        self.head.weight = self.emb.weight
        self.register_buffer("unused", torch.arange(3.0))
        self.register_buffer("scratch", torch.ones(2), persistent=False)

    def forward(self, ids, t):
        h = self.emb(ids)
        for block in self.blocks:
            h = torch.relu(block(h))
        return F.cross_entropy(self.head(self.norm(h)), t)


def ids(*shape, high=5):
    return torch.randint(0, high, shape)


CASES = {
    "ce_mean": (lambda: Loss(lambda s, t: F.cross_entropy(s, t, ignore_index=1)),
                [torch.randn(4, 6), ids(4)], False),
    "ce_spatial_none": (lambda: Spatial(lambda s, t: F.cross_entropy(s, t, reduction="none")),
                        [torch.randn(2, 3, 6), ids(2, 3)], False),
    "ce_smoothing": (lambda: Loss(lambda s, t: F.cross_entropy(s, t, reduction="sum", label_smoothing=0.1)),
                     [torch.randn(4, 6), ids(4)], False),
    "ce_probs": (lambda: Loss(lambda s, t: F.cross_entropy(s, t.softmax(-1))),
                 [torch.randn(4, 6), torch.randn(4, 5)], False),
    "ce_weight": (lambda: Loss(lambda s, t: F.cross_entropy(s, t, weight=torch.ones(5))),
                  [torch.randn(4, 6), ids(4)], False),
    "nll": (lambda: Loss(lambda s, t: F.nll_loss(F.log_softmax(s, 1), t, reduction="sum")),
            [torch.randn(4, 6), ids(4)], False),
    "nll_weight": (lambda: Loss(lambda s, t: F.nll_loss(
                       F.log_softmax(s, 1), t, weight=torch.arange(1.0, 6.0), ignore_index=2)),
                   [torch.randn(4, 6), ids(4)], False),
    "nll2d": (lambda: Spatial(lambda s, t: torch.ops.aten.nll_loss2d(
                  F.log_softmax(s, 1).unsqueeze(-1), t.unsqueeze(-1), None, 1, -100)),
              [torch.randn(2, 3, 6), ids(2, 3)], False),
    "mse_broadcast": (lambda: Loss(lambda s, t: F.mse_loss(s, t, reduction="sum")),
                      [torch.randn(4, 6), torch.randn(5)], False),
    "mse_none": (lambda: Loss(lambda s, t: F.mse_loss(s, t, reduction="none")),
                 [torch.randn(4, 6), torch.randn(4, 5)], False),
    "bn_momentum": (lambda: Norm(0.3), [torch.randn(2, 3, 4, 4)], False),
    "bn_momentum_none": (lambda: Norm(None), [torch.randn(2, 3, 4, 4)], True),
    "bn_twice": (Twice, [torch.randn(3, 4)], False),
    "embedding_padding": (lambda: Embed(padding_idx=2), [ids(2, 3)], False),
    "embedding_sparse": (lambda: Embed(sparse=True), [ids(2, 3)], False),
    "embedding_scale": (lambda: Embed(scale_grad_by_freq=True), [ids(2, 3)], False),
    "tied": (Tied, [ids(6, high=7), ids(6, high=7)], False),
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("name", choices=sorted(CASES))
    p.add_argument("-o", required=True)
    a = p.parse_args()
    build, inputs, script = CASES[a.name]
    model = build().train()
    module = torch.jit.script(model) if script else torch.jit.trace(model, tuple(inputs), check_trace=False)
    names = [arg.name for arg in module.forward.schema.arguments[1:]]
    dtypes = {torch.float32: "f32", torch.int64: "i64"}
    meta = {"format": 1, "model": a.name,
            "inputs": [{"name": n, "shape": list(t.shape), "dtype": dtypes[t.dtype]}
                       for n, t in zip(names, inputs)]}
    torch.jit.save(module, a.o, _extra_files={"cleave.json": json.dumps(meta)})


if __name__ == "__main__":
    main()
