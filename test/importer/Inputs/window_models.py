"""Small traced models for windows.test: ops the importer writes with constant-index window
gathers (integer convolutions and pools, transposed convolutions, N-d pools)."""
import argparse
import json

import torch
import torch.nn as nn
import torch.nn.functional as F

torch.manual_seed(0)


class Fn(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


def ints(*shape):
    return torch.randint(-5, 5, shape)


CASES = {
    "conv_int": (lambda x, w: F.conv2d(x, w, stride=2, padding=1), [ints(1, 2, 5, 5), ints(3, 2, 3, 3)]),
    "avg_pool_int": (lambda x: F.avg_pool2d(x, 2, ceil_mode=True), [ints(1, 2, 5, 5)]),
    "conv_transpose": (lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1, output_padding=1),
                       [torch.randn(1, 2, 3, 3), torch.randn(2, 4, 3, 3)]),
    "conv_transpose3d": (lambda x, w: F.conv_transpose3d(x, w), [torch.randn(1, 2, 3, 3, 3),
                                                                torch.randn(2, 4, 2, 2, 2)]),
    "max_pool_indices": (lambda x: F.max_pool2d(x, 2, return_indices=True), [torch.randn(1, 2, 4, 4)]),
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("name", choices=sorted(CASES))
    p.add_argument("-o", required=True)
    a = p.parse_args()
    fn, inputs = CASES[a.name]
    module = torch.jit.trace(Fn(fn), tuple(inputs), check_trace=False)
    names = [arg.name for arg in module.forward.schema.arguments[1:]]
    dtypes = {torch.float32: "f32", torch.int64: "i64"}
    meta = {"format": 1, "model": a.name,
            "inputs": [{"name": n, "shape": list(t.shape), "dtype": dtypes[t.dtype]}
                       for n, t in zip(names, inputs)]}
    torch.jit.save(module, a.o, _extra_files={"cleave.json": json.dumps(meta)})


if __name__ == "__main__":
    main()
