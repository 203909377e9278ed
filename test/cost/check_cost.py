"""Checks on `cleave cost --json` output, for lit.

  check_cost.py memory COST.json PLAN_DIR
      The memory model's inference prediction for one device against what the
      runtime allocates for the compiled plan (arena + weights, the manifest's
      figures, which the loader checks against the files); fails beyond 5 %.
  check_cost.py scales SMALL.json LARGE.json FACTOR
      Forward and backward FLOPs and activation bytes of LARGE are FACTOR times
      those of SMALL (batch scaling), parameters equal.
"""
import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def memory(cost_path, plan_dir):
    cost = load(cost_path)
    manifest = load(f"{plan_dir}/manifest.json")
    (program,) = manifest["programs"].values()
    actual = program["arena_bytes"] + program["weight_bytes"]
    predicted = cost["memory"]["inference"]["total"]
    error = abs(predicted - actual) / actual
    print(f"memory: predicted {predicted:.0f} B, runtime allocates {actual} B, "
          f"error {100 * error:.2f} %: {'ok' if error <= 0.05 else 'FAIL'}")
    return error <= 0.05


def scales(small_path, large_path, factor):
    small, large = load(small_path)["total"], load(large_path)["total"]
    ok = small["parameters"] == large["parameters"]
    for key in ("forward_flops", "backward_flops", "activation_bytes"):
        ratio = large[key] / small[key]
        good = abs(ratio - factor) <= 0.02 * factor
        ok &= good
        print(f"{key}: x{ratio:.3f} {'ok' if good else 'FAIL'}")
    print(f"parameters: {'ok' if small['parameters'] == large['parameters'] else 'FAIL'}")
    return ok


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "memory":
        good = memory(sys.argv[2], sys.argv[3])
    elif mode == "scales":
        good = scales(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    else:
        sys.exit(f"unknown mode {mode}")
    sys.exit(0 if good else 1)
