"""Prints how many instructions of each kernel a plan's programs run, read
from the plan's JSON: one line `KERNEL COUNT` per kernel, sorted, and for
attention one line per distinct causal attribute, `attention causal=BOOL COUNT`.

usage: kernel_counts.py PLAN_DIR
"""
import collections
import json
import os
import sys


def main(plan):
    manifest = json.load(open(os.path.join(plan, "manifest.json")))
    counts = collections.Counter()
    for entry in manifest["programs"].values():
        program = json.load(open(os.path.join(plan, entry["file"])))
        for phase in program["phases"]:
            for instruction in phase["instructions"]:
                kernel = instruction["kernel"]
                counts[kernel] += 1
                if kernel == "attention":
                    causal = instruction.get("attrs", {}).get("causal")
                    counts[f"attention causal={json.dumps(causal)}"] += 1
    for name in sorted(counts):
        print(f"{name} {counts[name]}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
