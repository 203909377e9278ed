"""Tiny models calling math ops the importer spells as core ops (einsum, norms, matrix powers),
and the orders it refuses. usage: math_models.py NAME -o OUT.pt (writes cleave.json's input
shapes)."""
import argparse
import json

import torch


class Call(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *xs):
        return self.fn(*xs)


CASES = {
    "einsum_bmm": (lambda a, b: torch.einsum("bij,bjk->bik", a, b), [(2, 3, 4), (2, 4, 5)]),
    "einsum_trace": (lambda a: torch.einsum("ii", a), [(4, 4)]),
    "matrix_norm_inf": (lambda a: torch.linalg.matrix_norm(a, ord=float("inf")), [(3, 4)]),
    "matrix_norm_2": (lambda a: torch.linalg.matrix_norm(a, ord=2), [(3, 4)]),
    "norm_nuc": (lambda a: torch.linalg.norm(a, ord="nuc"), [(3, 4)]),
    "matrix_power_3": (lambda a: torch.linalg.matrix_power(a, 3), [(2, 4, 4)]),
    "matrix_power_negative": (lambda a: torch.linalg.matrix_power(a, -1), [(4, 4)]),
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("name", choices=sorted(CASES))
    p.add_argument("-o", required=True)
    a = p.parse_args()
    fn, shapes = CASES[a.name]
    inputs = [torch.randn(s) for s in shapes]
    module = torch.jit.trace(Call(fn), tuple(inputs), check_trace=False)
    names = [arg.name for arg in module.forward.schema.arguments[1:]]
    meta = {"format": 1, "model": a.name,
            "inputs": [{"name": n, "shape": list(t.shape), "dtype": "f32"}
                       for n, t in zip(names, inputs)]}
    torch.jit.save(module, a.o, _extra_files={"cleave.json": json.dumps(meta)})


if __name__ == "__main__":
    main()
