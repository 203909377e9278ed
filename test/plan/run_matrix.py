"""Runs a model's plans for every mesh of the plan matrix on local ranks and
compares the outputs with the single-device plan's and PyTorch's.

usage: run_matrix.py CLEAVE MODEL.pt SPEC.json IO_DIR WORKDIR

IO_DIR holds inputs.safetensors (at a global batch of 4) and PyTorch's
outputs.safetensors (examples/export.py --io). For each mesh of
compile_matrix.MESHES the model is compiled for inference and run with
`cleave run --local N` (N = pp x tp x dp ranks, oversubscribed on a small
machine); every output must match the single-device plan's within fp32
tolerance (tp sums in another order) and PyTorch's. Prints one line per
mesh with the largest differences; exits 1 after the first failure.
"""
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
from compile_matrix import MESHES  # noqa: E402
from safetensors_io import load_file  # noqa: E402

# |a - b| <= ATOL + RTOL * |b| elementwise: fp32 sums in another order.
RTOL, ATOL = 1e-4, 1e-5


def run(args):
    return subprocess.run(args, capture_output=True, text=True, timeout=300)


def compare(got, want):
    """The largest difference, and whether every element is within tolerance."""
    if set(got) != set(want):
        return float("inf"), False
    worst, ok = 0.0, True
    for name, ref in want.items():
        out = got[name]
        if out.shape != ref.shape or out.dtype != ref.dtype:
            return float("inf"), False
        if not ref.is_floating_point():
            ok &= bool((out == ref).all())
            continue
        diff = (out.double() - ref.double()).abs()
        worst = max(worst, diff.max().item())
        ok &= bool((diff <= ATOL + RTOL * ref.double().abs()).all())
    return worst, ok


def main(cleave, model, spec, io, work):
    inputs = f"{io}/inputs.safetensors"
    torch_out = load_file(f"{io}/outputs.safetensors")
    single = run([cleave, "compile", model, "-o", f"{work}/single"])
    ran = single.returncode == 0 and run([cleave, "run", f"{work}/single", "--inputs", inputs,
                                          "--outputs", f"{work}/single.safetensors"])
    if not ran or ran.returncode != 0:
        print(f"single device: failed\n{single.stderr}{ran.stderr if ran else ''}")
        sys.exit(1)
    reference = load_file(f"{work}/single.safetensors")
    for pp, tp, dp in MESHES:
        name, n = f"pp{pp} tp{tp} dp{dp}", pp * tp * dp
        plan, out = f"{work}/pp{pp}_tp{tp}_dp{dp}", f"{work}/pp{pp}_tp{tp}_dp{dp}.safetensors"
        compiled = run([cleave, "compile", model, "--cluster", spec, "--devices", str(n),
                        "--global-batch", "4", "--mode", "infer", "--pp", str(pp), "--tp", str(tp),
                        "--dp", str(dp), "-o", plan])
        if compiled.returncode != 0:
            print(f"{name}: compile failed\n{compiled.stderr}")
            sys.exit(1)
        ran = run([cleave, "run", "--local", str(n), plan, "--inputs", inputs, "--outputs", out])
        if ran.returncode != 0:
            print(f"{name}: run failed (exit {ran.returncode})\n{ran.stderr}")
            sys.exit(1)
        got = load_file(out)
        vs_single, ok_single = compare(got, reference)
        vs_torch, ok_torch = compare(got, torch_out)
        verdict = "ok" if ok_single and ok_torch else "MISMATCH"
        print(f"{name}: {n} ranks {verdict} (max |diff| vs single device {vs_single:.2e}, "
              f"vs PyTorch {vs_torch:.2e})")
        if verdict != "ok":
            sys.exit(1)


if __name__ == "__main__":
    if len(sys.argv) != 6:
        print(__doc__)
        sys.exit(2)
    main(*sys.argv[1:])
