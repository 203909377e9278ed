"""Scripts one small model per linear algebra refusal of the importer (LinalgConverters.cpp) and
saves it with its cleave.json input shapes: linalg_refusals.py CASE OUT.pt. Scripted, not traced:
PyTorch itself raises on these inputs."""
import json
import sys
from typing import List

import torch


class IntegerDet(torch.nn.Module):
    """PyTorch's linear algebra takes floating point matrices; cleave's kernels are f32."""

    def forward(self, a):
        return torch.linalg.det(a)


class LuNoPivot(torch.nn.Module):
    """The CPU's LU always pivots (PyTorch refuses pivot=False there too)."""

    def forward(self, a):
        return torch.linalg.lu_factor(a, pivot=False)[0]


class SolveShapes(torch.nn.Module):
    """B's rows must match A's."""

    def forward(self, a, b):
        return torch.linalg.solve_triangular(a, b, upper=True)


CASES = {
    "integer_det": (IntegerDet, [("a", [3, 3], "i64")]),
    "lu_no_pivot": (LuNoPivot, [("a", [3, 3], "f32")]),
    "solve_shapes": (SolveShapes, [("a", [3, 3], "f32"), ("b", [4, 2], "f32")]),
}


def main():
    case, out = sys.argv[1], sys.argv[2]
    module, inputs = CASES[case]
    meta = {"format": 1, "model": case,
            "inputs": [{"name": n, "shape": s, "dtype": d} for n, s, d in inputs]}
    torch.jit.save(torch.jit.script(module()), out, _extra_files={"cleave.json": json.dumps(meta)})


if __name__ == "__main__":
    main()
