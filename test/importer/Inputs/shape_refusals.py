"""Traces small models whose output shapes would depend on tensor values (split points,
repeats or a class count read from a tensor at run time), and an as_strided of a transposed
view (PyTorch reads its storage, not its row-major order), and saves each as DIR/NAME.pt with
its cleave.json, for test/importer/shape-refusals.test.

Usage: shape_refusals.py DIR"""
import json
import os
import sys
import warnings

import torch

_DTYPES = {torch.float32: "f32", torch.int64: "i64"}


class TensorSplit(torch.nn.Module):
    def forward(self, x, points):
        return torch.tensor_split(x, points)


class RepeatInterleave(torch.nn.Module):
    def forward(self, x, repeats):
        return torch.repeat_interleave(x, repeats, dim=0)


class OneHot(torch.nn.Module):
    def forward(self, labels):
        return torch.nn.functional.one_hot(labels, -1)


class StridedOfTranspose(torch.nn.Module):
    def forward(self, x):
        return x.t().as_strided((2, 2), (1, 2))


CASES = {
    "tensor_split": (TensorSplit(), [torch.randn(6, 2), torch.tensor([1, 3])]),
    "repeat_interleave": (RepeatInterleave(), [torch.randn(3, 2), torch.tensor([1, 2, 0])]),
    "one_hot": (OneHot(), [torch.tensor([0, 2, 1])]),
    "as_strided": (StridedOfTranspose(), [torch.randn(3, 3)]),
}


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, (module, inputs) in CASES.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            traced = torch.jit.trace(module, tuple(inputs), check_trace=False)
        path = os.path.join(out, f"{name}.pt")
        torch.jit.save(traced, path)
        names = [a.name for a in torch.jit.load(path).forward.schema.arguments[1:]]
        meta = {"format": 1, "model": name,
                "inputs": [{"name": n, "shape": list(t.shape), "dtype": _DTYPES[t.dtype]}
                           for n, t in zip(names, inputs)]}
        torch.jit.save(traced, path, _extra_files={"cleave.json": json.dumps(meta)})


if __name__ == "__main__":
    main()
