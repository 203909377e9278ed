"""Compares cleave's training with PyTorch's, step by step.

usage: compare_training.py REF.jsonl CLEAVE.jsonl [--rtol 1e-4] [--from-step N]
           [--weights REF.safetensors CLEAVE.safetensors [--wtol 1e-4]]

Losses: one JSON object per line with "step" (from 1) and "loss"; every step of REF (from N) must be in
CLEAVE with |cleave - ref| <= rtol * |ref|. Weights: the same names, shapes and dtypes, and per
tensor max|cleave - ref| <= wtol * max(1, max|ref|); integer buffers (num_batches_tracked) exact.
Prints one line per step and tensor; exits 1 on any failure.
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
from safetensors_io import load_file  # noqa: E402


def losses(path):
    with open(path) as f:
        return {r["step"]: r["loss"] for r in (json.loads(line) for line in f if line.strip())}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("reference")
    p.add_argument("actual")
    p.add_argument("--rtol", type=float, default=1e-4)
    p.add_argument("--weights", nargs=2, metavar=("REF", "CLEAVE"))
    p.add_argument("--wtol", type=float, default=1e-4)
    p.add_argument("--names", default="torch,cleave", metavar="REF,ACTUAL",
                   help="what the two runs are called in the lines printed")
    p.add_argument("--from-step", type=int, default=1,
                   help="compare from this step on (a run resumed from a checkpoint)")
    a = p.parse_args()
    ok = True
    ref_name, got_name = (a.names.split(",") + ["cleave"])[:2]
    ref, got = losses(a.reference), losses(a.actual)
    if not ref:
        print("no reference losses")
        ok = False
    for step in sorted(ref):
        if step < a.from_step:
            continue
        if step not in got:
            print(f"step {step}: missing from {a.actual}: FAIL")
            ok = False
            continue
        err = abs(got[step] - ref[step])
        bad = not (err <= a.rtol * abs(ref[step])) or math.isnan(got[step])
        print(f"step {step}: {ref_name} {ref[step]:.7g} {got_name} {got[step]:.7g} rel {err / max(abs(ref[step]), 1e-30):.2e}"
              f": {'FAIL' if bad else 'ok'}")
        ok = ok and not bad
    if a.weights:
        ok = compare_tensors(load_file(a.weights[0]), load_file(a.weights[1]), a.wtol) and ok
    sys.exit(0 if ok else 1)


def compare_tensors(expected, actual, wtol, quiet=False, prefix=""):
    """The same names, shapes and dtypes, and per tensor max|actual - expected| <= wtol *
    max(1, max|expected|); integer tensors exact. Prints a line per tensor (quiet: only the
    failures); returns whether all hold."""
    ok = True

    def report(line, bad):
        if bad or not quiet:
            print(prefix + line)

    # A safetensors file is a mapping: the names must agree, not their order in the header.
    if sorted(expected) != sorted(actual):
        report(f"state_dict names differ: torch {sorted(expected)}, cleave {sorted(actual)}: FAIL",
               True)
        ok = False
    for name in expected:
        if name not in actual:
            continue
        e, c = expected[name], actual[name]
        if e.shape != c.shape or e.dtype != c.dtype:
            report(f"{name}: torch {tuple(e.shape)} {e.dtype}, cleave {tuple(c.shape)} {c.dtype}: "
                   "FAIL", True)
            ok = False
            continue
        if e.is_floating_point():
            scale = max(1.0, e.abs().max().item() if e.numel() else 0.0)
            err = (c.double() - e.double()).abs().max().item() if e.numel() else 0.0
            bad = not (err <= wtol * scale)
            report(f"{name}: max abs error {err:.3g}, bound {wtol * scale:.3g}: "
                   f"{'FAIL' if bad else 'ok'}", bad)
        else:
            bad = not bool((c == e).all())
            report(f"{name}: exact: {'FAIL' if bad else 'ok'}", bad)
        ok = ok and not bad
    return ok


def relative_errors(expected, actual):
    """Per tensor of both, ||actual - expected|| / ||expected|| (2-norms, in f64; 0 where both
    are zero, inf where only expected is, or where the shapes differ)."""
    out = {}
    for name in expected:
        if name not in actual:
            continue
        e, c = expected[name].double(), actual[name].double()
        if e.shape != c.shape:
            out[name] = math.inf
            continue
        diff, size = (c - e).norm().item(), e.norm().item()
        rel = diff / size if size > 0 else (0.0 if diff == 0 else math.inf)
        out[name] = math.inf if math.isnan(rel) else rel
    return out


if __name__ == "__main__":
    main()
