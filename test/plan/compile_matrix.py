"""Compiles a model for every mesh of the plan matrix and verifies each plan.

usage: compile_matrix.py CLEAVE MODEL.pt SPEC.json WORKDIR

The meshes are those docs/plan-format.md's tests promise: pp in {1, 2, 4},
tp in {1, 2, 4}, dp in {1, 2} alone, and the mixes pp2 x tp2, pp2 x dp2,
tp2 x dp2, for inference with a global batch of 4. `cleave compile` verifies
before it writes; `cleave verify` runs again on the written plan. Prints one
line per mesh; exits 1 after the first failure.
"""
import subprocess
import sys

MESHES = [(1, 1, 1), (2, 1, 1), (4, 1, 1), (1, 2, 1), (1, 4, 1), (1, 1, 2),
          (2, 2, 1), (2, 1, 2), (1, 2, 2)]


def run(args):
    return subprocess.run(args, capture_output=True, text=True)


def main(cleave, model, spec, work):
    for pp, tp, dp in MESHES:
        plan = f"{work}/pp{pp}_tp{tp}_dp{dp}"
        compiled = run([cleave, "compile", model, "--cluster", spec, "--devices", str(pp * tp * dp),
                        "--global-batch", "4", "--mode", "infer", "--pp", str(pp), "--tp", str(tp),
                        "--dp", str(dp), "-o", plan])
        if compiled.returncode != 0:
            print(f"pp{pp} tp{tp} dp{dp}: compile failed\n{compiled.stderr}")
            sys.exit(1)
        verified = run([cleave, "verify", plan])
        if verified.returncode != 0:
            print(f"pp{pp} tp{tp} dp{dp}: verify failed\n{verified.stderr}")
            sys.exit(1)
        print(f"pp{pp} tp{tp} dp{dp}: {verified.stdout.strip()}")


if __name__ == "__main__":
    if len(sys.argv) != 5:
        print(__doc__)
        sys.exit(2)
    main(*sys.argv[1:])
