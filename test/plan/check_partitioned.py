"""Checks a multi-device plan against a single-device plan of the same model.

usage: check_partitioned.py PLAN SINGLE_DEVICE_PLAN

Prints one line per check. Reassembles every parameter from its weight shards
(docs/plan-format.md: PATH[split(D, blocks=B) T/N] holds part T of each block)
and compares it bit for bit with the single-device plan's copy; checks that
ranks, groups and schedule slots follow the manifest's mesh. Exits 1 on the
first failure.
"""
import json
import os
import re
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
from safetensors_io import load_file  # noqa: E402

SPLIT = re.compile(r"^(.*)\[split\((\d+)(?:, blocks=(\d+))?\) (\d+)/(\d+)\]$")


def fail(message):
    print("FAIL:", message)
    sys.exit(1)


def main(plan, single):
    manifest = json.load(open(os.path.join(plan, "manifest.json")))
    pp, tp, dp = (manifest["mesh"][k] for k in ("pp", "tp", "dp"))
    devices = manifest["devices"]
    if len(devices) != pp * tp * dp:
        fail(f"{len(devices)} devices for a {pp}x{tp}x{dp} mesh")
    for d in devices:
        if d["rank"] != (d["stage"] * dp + d["dp"]) * tp + d["tp"]:
            fail(f"rank {d['rank']} is not at stage {d['stage']} dp {d['dp']} tp {d['tp']}")
        if d["program"] != f"stage{d['stage']}_tp{d['tp']}":
            fail(f"rank {d['rank']} runs {d['program']}")
    groups = manifest["groups"]
    for kind, size in (("tp", tp), ("dp", dp), ("pipeline", pp)):
        members = sorted(r for g in groups[kind] for r in g)
        if members != list(range(pp * tp * dp)) or any(len(g) != size for g in groups[kind]):
            fail(f"{kind} groups {groups[kind]} do not partition the ranks in groups of {size}")
    batch = manifest["batch"]
    if batch["global"] != dp * batch["microbatches"] * batch["microbatch_size"]:
        fail(f"batch {batch} does not multiply out over dp {dp}")
    v = manifest["schedule"]["virtual_stages"]
    for stage in manifest["schedule"]["stages"]:
        slots = {(s["chunk"], s["microbatch"]) for s in stage["slots"]}
        want = {(k * pp + stage["stage"], m) for k in range(v) for m in range(batch["microbatches"])}
        if slots != want or len(stage["slots"]) != len(want):
            fail(f"stage {stage['stage']} runs {sorted(slots)}, not every chunk x microbatch once")
    print(f"mesh: {pp}x{tp}x{dp} ranks, groups and schedule ok")

    reference = load_file(os.path.join(single, "weights", "stage0_tp0.safetensors"))
    # parts[path][stage] = {tp index: (dim, blocks, tensor)} or whole tensors
    parts = {}
    for name, entry in manifest["programs"].items():
        shard = load_file(os.path.join(plan, entry["weights"]))
        for key, tensor in shard.items():
            if key.startswith("constant."):
                continue
            m = SPLIT.match(key)
            path = m.group(1) if m else key
            held = parts.setdefault(path, {}).setdefault(entry["stage"], {})
            if m:
                dim, blocks, t, n = int(m.group(2)), int(m.group(3) or 1), int(m.group(4)), int(m.group(5))
                if n != tp or t != entry["tp"]:
                    fail(f"{name} holds part {t}/{n} of {path}")
                held[t] = (dim, blocks, tensor)
            else:
                held[entry["tp"]] = (None, 1, tensor)
    checked = 0
    for path in manifest["parameters"]:
        if path not in parts:
            fail(f"no program holds parameter {path}")
        for stage, held in parts[path].items():
            if sorted(held) != list(range(tp)):
                fail(f"stage {stage} holds tp parts {sorted(held)} of {path}")
            dims = {held[t][0] for t in held}
            if dims == {None}:
                whole = held[0][2]
                if any(not torch.equal(held[t][2], whole) for t in held):
                    fail(f"stage {stage}: the tp ranks hold different copies of {path}")
            elif None in dims or len(dims) != 1:
                fail(f"stage {stage} mixes whole and split copies of {path}")
            else:
                dim, blocks = held[0][0], held[0][1]
                pieces = [held[t][2].chunk(blocks, dim) for t in range(tp)]
                whole = torch.cat([pieces[t][k] for k in range(blocks) for t in range(tp)], dim)
            if path not in reference or not torch.equal(whole, reference[path]):
                fail(f"stage {stage}: {path} reassembles to something else than the model's")
            checked += 1
    print(f"weights: {len(manifest['parameters'])} parameters reassemble exactly ({checked} stage copies)")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(2)
    main(sys.argv[1], sys.argv[2])
