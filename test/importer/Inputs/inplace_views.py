"""Traced models that mutate views in place, as torchvision's shifted-window attention builds
its mask: the mutation must reach the tensor the view was taken from.

usage: inplace_views.py NAME -o OUT.pt --io DIR   (writes DIR/inputs.safetensors and PyTorch's
DIR/outputs.safetensors)
"""
import argparse
import json
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples"))
from safetensors_io import save_file  # noqa: E402


class WindowMask(nn.Module):
    """swin's mask: regions of a zero matrix numbered by slice assignment (slice, slice,
    fill_), a row set through select, then used."""

    def forward(self, x):
        mask = x.new_zeros((6, 6))
        count = 0
        for h in ((0, -3), (-3, -1), (-1, None)):
            for w in ((0, -3), (-3, -1), (-1, None)):
                mask[h[0]:h[1], w[0]:w[1]] = count
                count += 1
        mask[2] = 9.0
        return x + mask


class CopyIntoSlice(nn.Module):
    """`y[:, 1:3] = t` (slice and copy_, broadcasting t) and a strided slice."""

    def forward(self, x, t):
        y = x * 2
        y[:, 1:3] = t
        y[0, ::2] = -1.0
        return y + 1


CASES = {
    "window_mask": (WindowMask(), [torch.randn(2, 6, 6)]),
    "copy_into_slice": (CopyIntoSlice(), [torch.randn(3, 5), torch.randn(2)]),
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("name", choices=sorted(CASES))
    p.add_argument("-o", required=True)
    p.add_argument("--io", required=True)
    a = p.parse_args()
    module, inputs = CASES[a.name]
    traced = torch.jit.trace(module, tuple(inputs), check_trace=False)
    names = ["x", "t"][:len(inputs)]
    meta = {"format": 1, "model": a.name,
            "inputs": [{"name": n, "shape": list(t.shape), "dtype": "f32"}
                       for n, t in zip(names, inputs)]}
    torch.jit.save(traced, a.o, _extra_files={"cleave.json": json.dumps(meta)})
    os.makedirs(a.io, exist_ok=True)
    with torch.no_grad():
        out = module(*inputs)
    save_file(dict(zip(names, inputs)), os.path.join(a.io, "inputs.safetensors"))
    save_file({"output_0": out}, os.path.join(a.io, "outputs.safetensors"))


if __name__ == "__main__":
    main()
