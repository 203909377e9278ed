"""Compares cleave's outputs with PyTorch's, tensor by tensor.

usage: compare_outputs.py EXPECTED.safetensors ACTUAL.safetensors [--tol 1e-4] [--scale-floor 1]

Float outputs pass when max|actual - expected| <= tol * max(floor, max|expected|),
tol = 1e-4 and floor = 1 by default (docs/building.md, "End-to-end tests", says why); bf16
tests bound the error relative to max|expected| itself (--scale-floor 0). Integer and bool
outputs must match exactly. Prints one line per output and exits 1 on any mismatch,
missing or extra output, or a shape or dtype difference.
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
from safetensors_io import load_file  # noqa: E402

import torch  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("expected")
    p.add_argument("actual")
    p.add_argument("--tol", type=float, default=1e-4)
    p.add_argument("--scale-floor", type=float, default=1.0)
    args = p.parse_args()
    expected, actual = load_file(args.expected), load_file(args.actual)
    ok = True
    if set(expected) != set(actual):
        print(f"outputs differ: expected {sorted(expected)}, got {sorted(actual)}")
        ok = False
    for name in sorted(set(expected) & set(actual)):
        e, a = expected[name], actual[name]
        if e.shape != a.shape or e.dtype != a.dtype:
            print(f"{name}: expected {tuple(e.shape)} {e.dtype}, got {tuple(a.shape)} {a.dtype}: FAIL")
            ok = False
            continue
        if e.is_floating_point():
            scale = max(args.scale_floor, e.abs().max().item() if e.numel() else 0.0)
            err = (a.double() - e.double()).abs().max().item() if e.numel() else 0.0
            bad = not (err <= args.tol * scale) or bool(torch.isnan(a).any() != torch.isnan(e).any())
            print(f"{name}: {tuple(e.shape)} max abs error {err:.3g}, scale {scale:.3g}, "
                  f"bound {args.tol * scale:.3g}: {'FAIL' if bad else 'ok'}")
        else:
            bad = not torch.equal(a, e)
            print(f"{name}: {tuple(e.shape)} {e.dtype} exact: {'FAIL' if bad else 'ok'}")
        ok = ok and not bad
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
