"""Checks on `cleave cost --json` output, for lit.

  check_cost.py memory COST.json PLAN_DIR
      The memory model's inference prediction for one device against what the
      runtime allocates for the compiled plan (arena + weights, the manifest's
      figures, which the loader checks against the files); fails beyond 5 %.
  check_cost.py scales SMALL.json LARGE.json FACTOR
      Forward and backward FLOPs and activation bytes of LARGE are FACTOR times
      those of SMALL (batch scaling), parameters equal.
  check_cost.py kernels COST.json
      `--kernels --ops` output: the kernels' predicted forward seconds add up
      to the total, and each kernel's calls, seconds, FLOPs and bytes are the
      sums over the ops of its class and name.
  check_cost.py join COST.json ROOFLINE.json
      Every costed kernel `cleave run --roofline-json` measured is a kernel
      the cost model predicted, under the same class and name, with as many
      calls: the two join per kernel.
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


def kernels(cost_path):
    cost = load(cost_path)
    ok = True
    total = sum(k["forward_seconds"] for k in cost["kernels"])
    good = abs(total - cost["total"]["forward_seconds"]) <= 1e-6 * cost["total"]["forward_seconds"]
    ok &= good
    print(f"kernels sum to the total: {'ok' if good else 'FAIL'} ({total} s against "
          f"{cost['total']['forward_seconds']} s)")
    sums = {}
    for op in cost["ops"]:
        s = sums.setdefault((op["class"], op["kernel"]), [0, 0.0, 0.0, 0.0])
        s[0] += 1
        s[1] += op["forward_seconds"]
        s[2] += op["flops"]
        s[3] += op["bytes"]
    for k in cost["kernels"]:
        s = sums.pop((k["class"], k["kernel"]), None)
        good = s is not None and s[0] == k["calls"] and all(
            abs(a - b) <= 1e-9 * max(abs(a), 1.0)
            for a, b in zip(s[1:], (k["forward_seconds"], k["flops"], k["bytes"])))
        ok &= good
        print(f"{k['class']} {k['kernel']}: {k['calls']} calls {'ok' if good else 'FAIL'}")
    if sums:
        ok = False
        print(f"ops of no kernel entry: {sorted(sums)} FAIL")
    return ok


def join(cost_path, roofline_path):
    predicted = {(k["class"], k["kernel"]): k["calls"] for k in load(cost_path)["kernels"]}
    ok = True
    for c in load(roofline_path)["classes"]:
        if not c["costed"]:
            continue
        for k in c["kernels"]:
            calls = predicted.get((c["class"], k["kernel"]))
            good = calls == k["calls"]
            ok &= good
            print(f"{c['class']} {k['kernel']}: measured {k['calls']} calls, predicted "
                  f"{calls}: {'ok' if good else 'FAIL'}")
    return ok


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "memory":
        good = memory(sys.argv[2], sys.argv[3])
    elif mode == "scales":
        good = scales(sys.argv[2], sys.argv[3], float(sys.argv[4]))
    elif mode == "kernels":
        good = kernels(sys.argv[2])
    elif mode == "join":
        good = join(sys.argv[2], sys.argv[3])
    else:
        sys.exit(f"unknown mode {mode}")
    sys.exit(0 if good else 1)
