"""Checks `cleave run --roofline-json` against the plan it measured, or a plan's costs.

usage: check_roofline.py costs PLAN
       check_roofline.py report PLAN REPORT.json [--uncosted]

costs: every instruction of the plan's forward carries a cost (op class, FLOPs, bytes) as
docs/plan-format.md says, conv2d's a positive convolution count. report: the report's shares
sum to 1, its FLOPs and bytes are the plan's (total = sum of classes = sum of the
instructions' costs), a convolution class is compute-bound and an elementwise class
memory-bound, each against the spec's ridge, and every class's and kernel's efficiency is
positive and finite and equals its achieved rate over its roof's peak;
with --uncosted (a plan whose costs were stripped) all time is one uncosted row.
Prints one line per check, "ok" or what failed, and exits 1 on a failure.
"""
import json
import math
import os
import sys

CLASSES = {"gemm", "convolution", "grouped_convolution", "elementwise", "reduction", "attention",
           "pooling", "normalization", "layout"}
failures = []


def check(what, ok):
    print(f"{what}: {'ok' if ok else 'FAILED'}")
    if not ok:
        failures.append(what)


def forward(plan):
    with open(os.path.join(plan, "programs", "stage0_tp0.json")) as f:
        program = json.load(f)
    return next(p for p in program["phases"] if p["name"] == "forward")["instructions"]


def costs(plan):
    instructions = forward(plan)
    check("instructions", len(instructions) > 0)
    check("every instruction has a cost", all("cost" in i for i in instructions))
    check("cost fields", all(set(i["cost"]) == {"class", "flops", "bytes"} for i in instructions))
    check("op classes", all(i["cost"]["class"] in CLASSES for i in instructions))
    check("counts", all(isinstance(i["cost"][k], int) and i["cost"][k] >= 0
                        for i in instructions for k in ("flops", "bytes")))
    convs = [i for i in instructions if i["kernel"] in ("conv2d", "fused_conv2d")]
    check("conv2d is a convolution", convs != [] and all(
        i["cost"]["class"] == "convolution" and i["cost"]["flops"] > 0 for i in convs))


def close(a, b):
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)


def report(plan, path, uncosted):
    with open(path) as f:
        r = json.load(f)
    rows = r["classes"]
    check("phases", r["phases"] == "forward")
    check("shares sum to 1", abs(sum(c["share"] for c in rows) - 1) < 1e-6)
    check("seconds add up", close(sum(c["seconds"] for c in rows), r["total"]["seconds"]))
    check("calls are the instructions", sum(c["calls"] for c in rows) == len(forward(plan))
          and r["total"]["calls"] == len(forward(plan)))
    by = {c["class"]: c for c in rows}
    if uncosted:
        check("one uncosted row", list(by) == ["uncosted"] and not by["uncosted"]["costed"])
        check("no flops", r["total"]["flops"] == 0)
        return
    costed = [c for c in rows if c["costed"]]
    plan_flops = sum(i["cost"]["flops"] for i in forward(plan))
    plan_bytes = sum(i["cost"]["bytes"] for i in forward(plan))
    check("total flops = sum of classes", close(r["total"]["flops"], sum(c["flops"] for c in costed)))
    check("total bytes = sum of classes", close(r["total"]["bytes"], sum(c["bytes"] for c in costed)))
    check("flops are the plan's", close(r["total"]["flops"], plan_flops))
    check("bytes are the plan's", close(r["total"]["bytes"], plan_bytes))
    ridge = r["peaks"]["flops_per_s"] / r["peaks"]["bytes_per_s"]
    check("ridge", close(r["peaks"]["ridge_flops_per_byte"], ridge))
    conv, maps = by.get("convolution"), by.get("elementwise")
    check("convolution is compute-bound", conv is not None and conv["bound"] == "compute"
          and conv["intensity"] >= ridge)
    check("elementwise is memory-bound", maps is not None and maps["bound"] == "memory"
          and maps["intensity"] < ridge)
    # No upper bound: the spec is another machine's (cpu-2core.json), and maps whose
    # operands stay in cache pass its from-memory bandwidth (docs/cli.md); how fast this
    # machine is belongs to benchmarks, not to this test.
    kernels = [k for c in costed for k in c.get("kernels", [])]
    rows_and_kernels = costed + kernels
    check("efficiencies positive and finite",
          all(0 < c["efficiency"] < math.inf for c in rows_and_kernels))
    check("efficiency against the bound's roof", all(close(
        c["efficiency"],
        c["flops_per_s"] / r["peaks"]["flops_per_s"] if c["bound"] == "compute"
        else c["bytes_per_s"] / r["peaks"]["bytes_per_s"]) for c in rows_and_kernels))
    check("rows by time", [c["seconds"] for c in rows] == sorted((c["seconds"] for c in rows),
                                                                 reverse=True))
    check("fractions", close(r["total"]["compute_fraction"],
                             r["total"]["flops"] / r["total"]["seconds"] / r["peaks"]["flops_per_s"]))


def main():
    if len(sys.argv) >= 3 and sys.argv[1] == "costs":
        costs(sys.argv[2])
    elif len(sys.argv) >= 4 and sys.argv[1] == "report":
        report(sys.argv[2], sys.argv[3], "--uncosted" in sys.argv[4:])
    else:
        sys.exit(__doc__)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
