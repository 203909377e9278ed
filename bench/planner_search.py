#!/usr/bin/python3
"""Benchmarks how long `cleave plan` takes to search, at Megatron-LM scale.

Two free searches on DGX A100-80GB nodes (examples/clusters/dgx-a100-80gb.json):
GPT-145.6B on 1536 GPUs (global batch 2304) and GPT-1T on 3072 GPUs (global
batch 3072), the sizes of Narayanan et al. 2021, Table 1. Each runs --repeat
times; it reports the median and min of the search's own timers
(search.search_seconds, search.layer_split_seconds), their sum ("planning"),
and the whole command's wall time (TorchScript import included), with the
candidates considered and evaluated and the chosen plan.

Goal: planning under 1 s per model on a 2-core machine. For scale, REFERENCE.md
lists Alpa at about 40 min (GPT-39B, 64 GPUs) and a two-level DP planner at
54 s (BERT, 2048 devices, 2 cores). A benchmark, not a test: it is not in the
test suite, and its times depend on the machine and its load.

usage: /usr/bin/python3 bench/planner_search.py [--cleave PATH] [--cluster SPEC.json]
           [--repeat N] [--goal SECONDS]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from benchlib import add_cleave_options, machine, plan_label, timed_run

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXPORT = ["/usr/bin/python3", os.path.join(ROOT, "examples", "export.py")]

# (export name, GPUs, global batch)
CASES = [("gpt-145.6b", 1536, 2304), ("gpt-1t", 3072, 3072)]


def time_plan(cmd):
    """Runs one plan; returns (its strategy JSON, the command's wall seconds)."""
    result, wall = timed_run(cmd)
    return json.loads(result.stdout), wall


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_cleave_options(p)
    p.add_argument("--repeat", type=int, default=5, help="runs per model (default 5)")
    p.add_argument("--goal", type=float, default=1.0, help="planning goal in seconds (default 1)")
    args = p.parse_args()
    cleave = os.path.abspath(args.cleave)
    if not os.access(cleave, os.X_OK):
        sys.exit(f"no cleave binary at {cleave}: build it (bash scripts/build.sh) or pass --cleave")
    if args.repeat < 1:
        sys.exit("--repeat must be at least 1")

    print(f"machine: {machine(load=True)}")
    print(f"cleave: {cleave}")
    print(f"cluster: {args.cluster}")
    print(f"runs per model: {args.repeat}; times are median / min in seconds")
    print()

    results = []
    with tempfile.TemporaryDirectory(prefix="planner-search-") as work:
        for name, devices, batch in CASES:
            model = os.path.join(work, name + ".pt")
            subprocess.run(EXPORT + [name, "-o", model], check=True, capture_output=True)
            cmd = [cleave, "plan", model, "--cluster", args.cluster, "--devices", str(devices),
                   "--global-batch", str(batch), "--json"]
            print(f"timing {name} ({args.repeat} runs) ...", file=sys.stderr, flush=True)
            runs = [time_plan(cmd) for _ in range(args.repeat)]
            search = [plan["search"] for plan, _ in runs]
            results.append({
                "name": name, "devices": devices, "batch": batch,
                "search": [s["search_seconds"] for s in search],
                "split": [s["layer_split_seconds"] for s in search],
                "planning": [s["search_seconds"] + s["layer_split_seconds"] for s in search],
                "wall": [wall for _, wall in runs],
                "considered": {s["candidates_considered"] for s in search},
                "evaluated": {s["candidates_evaluated"] for s in search},
                "plans": {plan_label(plan) + f", predicted {plan['predicted']['step_seconds']:.2f} s"
                          for plan, _ in runs},
            })

    def cell(values):
        return f"{statistics.median(values):.3f} / {min(values):.3f}"

    print("| model | GPUs | batch | search_seconds | layer_split_seconds | planning | wall (command) |"
          " considered | evaluated |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        # The counts should not change between runs; show every value seen if they do.
        considered = ",".join(str(c) for c in sorted(r["considered"]))
        evaluated = ",".join(str(c) for c in sorted(r["evaluated"]))
        print(f"| {r['name']} | {r['devices']} | {r['batch']} | {cell(r['search'])} |"
              f" {cell(r['split'])} | {cell(r['planning'])} | {cell(r['wall'])} | {considered} |"
              f" {evaluated} |")
    print()
    print("chosen plan:")
    for r in results:
        for label in sorted(r["plans"]):
            print(f"  {r['name']}: {label}")
        if len(r["plans"]) > 1:
            print(f"  {r['name']}: WARNING: the plan changed between runs")
    print()

    print(f"goal: planning (search + layer split, median) under {args.goal:g} s per model")
    failed = False
    for r in results:
        median = statistics.median(r["planning"])
        ok = median < args.goal
        failed |= not ok
        print(f"  {r['name']}: {median:.3f} s = {median / args.goal:.3f} of the goal -> "
              f"{'PASS' if ok else 'FAIL'}")
    print(f"overall: {'FAIL' if failed else 'PASS'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
