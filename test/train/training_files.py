"""Helpers for the training tests: damaged data and checkpoints, exact log comparisons, and the
memory report check.

usage:
  training_files.py bad-data KIND GOOD.safetensors OUT.safetensors
      KIND: missing (drop the first tensor), dtype (first tensor to f16 or i32), shape (the
      highest-rank tensor's last dim + 1), few (keep one sample), label (sample 13's label
      out of range), extra (add a tensor), garbage (not safetensors),
      truncated (the file cut short)
  training_files.py damage KIND FILE
      KIND: flip (one byte of the data changed), truncate (the last byte cut)
  training_files.py same-losses A.jsonl B.jsonl
      every step in B is in A with a bit-identical loss (and B is not empty)
  training_files.py same-tensors A.safetensors B.safetensors
      the same names, dtypes, shapes and bytes
  training_files.py inspect INSPECT.json
      cleave inspect --json of a training plan: its memory categories add up to the allocation
  training_files.py memory REPORT.json PLAN_DIR
      cleave train's allocation equals the plan's predicted total, and the predicted categories
      add up to it
  training_files.py zero PLAN_DIR [NONE_PLAN_DIR]
      a ZeRO plan: every optimizer state is the rank's part of its parameter's, the kernels
      that shard, reduce-scatter and gather, the phases the gradients are reduce-scattered in
      (and under ZeRO-3 every trained parameter a part, gathered per phase); against the same
      plan with --zero none, the optimizer state's (and the parameters') share of its bytes
  training_files.py pipeline PLAN_DIR [OTHER_PLAN_DIR]
      a pipelined training plan's schedule: every slot once, backwards after forwards, the
      optimizer last; the microbatches each stage holds (1F1B: at most pp - stage); with
      OTHER_PLAN_DIR, each stage's arena against it
  training_files.py spill REPORT.json PLAN_DIR BUDGET RATIO
      a spilled plan and its `cleave train --report`: the measured device memory within BUDGET
      bytes, a training state (parameters, gradients, optimizer state, on the device and the
      host) at least RATIO x BUDGET, prefetch and spill instructions that moved bytes, the host
      pool as predicted, an overlap that is a fraction
  training_files.py recompute PLAN_DIR KEPT_PLAN_DIR
      a plan that recomputes layers in backward against the same plan that keeps every
      activation: its backward runs forward ops again (ops marked cleave.recompute in a backward
      phase of its training-step IR), and each program's arena is smaller
  training_files.py parts CHECKPOINT_DIR RANKS
      a ZeRO checkpoint (version 2): the sharded states written as parts by RANKS ranks
  training_files.py whole-states CHECKPOINT_DIR PLAN_DIR
      the checkpoint's states have the shapes of PLAN_DIR's (a one-device plan): whole tensors
  training_files.py tp-split PLAN_DIR
      a tensor-parallel training plan: the weights and optimizer states the tp group splits,
      the same kernels on every tp index of a stage, and the tp collectives of backward (at
      least one all-reduce or reduce-scatter of a partial gradient)
  training_files.py tp-parts CHECKPOINT_DIR PLAN_DIR
      a checkpoint of a tensor-parallel plan: every tensor the plan splits is indexed as its
      tp parts, each naming its tensor, whole shape and slice, each part the whole shape cut
Exits 1 with a message on any failure.
"""
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
from safetensors_io import load_file, save_file  # noqa: E402

import torch  # noqa: E402


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def bad_data(kind, good, out):
    if kind == "garbage":
        with open(out, "wb") as f:
            f.write(b"this is not a safetensors file\n")
        return
    if kind == "truncated":
        with open(good, "rb") as f:
            data = f.read()
        with open(out, "wb") as f:
            f.write(data[:-5])
        return
    tensors = load_file(good)
    first = sorted(tensors)[0]
    if kind == "missing":
        del tensors[first]
    elif kind == "dtype":
        t = tensors[first]
        tensors[first] = t.half() if t.is_floating_point() else t.int()
    elif kind == "shape":
        # The tensor with the most dims gets one more element in its last dim.
        name = max(sorted(tensors), key=lambda k: tensors[k].dim())
        t = tensors[name]
        pad = torch.zeros(*t.shape[:-1], 1, dtype=t.dtype)
        tensors[name] = torch.cat([t, pad], dim=-1)
    elif kind == "few":
        tensors = {k: v[:1].clone() for k, v in tensors.items()}
    elif kind == "label":
        # Sample 13's class is out of range: the step that reads it fails.
        tensors["labels"][13] = 1000
    elif kind == "extra":
        tensors["unexpected"] = torch.zeros(3)
    else:
        fail(f"unknown kind {kind}")
    save_file(tensors, out)


def damage(kind, path):
    with open(path, "rb") as f:
        data = bytearray(f.read())
    if kind == "flip":
        data[-1] ^= 0xFF
    elif kind == "truncate":
        data = data[:-1]
    else:
        fail(f"unknown kind {kind}")
    with open(path, "wb") as f:
        f.write(bytes(data))


def read_losses(path):
    with open(path) as f:
        return {r["step"]: r["loss"] for r in (json.loads(line) for line in f if line.strip())}


def same_losses(a, b):
    full, part = read_losses(a), read_losses(b)
    if not part:
        fail(f"{b} has no steps")
    for step, loss in sorted(part.items()):
        if step not in full:
            fail(f"step {step} of {b} is not in {a}")
        if loss != full[step]:
            fail(f"step {step}: {a} has {full[step]!r}, {b} has {loss!r}")
    print(f"steps {min(part)}..{max(part)}: bit-identical")


def same_tensors(a, b):
    x, y = load_file(a), load_file(b)
    if sorted(x) != sorted(y):
        fail(f"names differ: {sorted(x)} vs {sorted(y)}")
    for name in x:
        if x[name].dtype != y[name].dtype or x[name].shape != y[name].shape:
            fail(f"{name}: {x[name].dtype} {tuple(x[name].shape)} vs {y[name].dtype} {tuple(y[name].shape)}")
        if not torch.equal(x[name].view(-1).view(torch.uint8), y[name].view(-1).view(torch.uint8)):
            fail(f"{name}: bytes differ")
    print(f"{len(x)} tensors: bit-identical")


def memory(report_path, plan_dir):
    with open(report_path) as f:
        report = json.load(f)
    with open(os.path.join(plan_dir, "manifest.json")) as f:
        manifest = json.load(f)
    m = report["memory_bytes"]
    predicted = manifest["predicted"]["memory_bytes"]

    def program_total(rank):
        # Each rank allocates its own program's regions (a pipeline's stages differ).
        entry = manifest["programs"][manifest["devices"][rank]["program"]]
        return entry["arena_bytes"] + entry["weight_bytes"] + entry.get("state_bytes", 0)

    if m["allocated"] != program_total(0):
        fail(f"allocated {m['allocated']} bytes, the plan predicts {program_total(0)}")
    if m["allocated"] != m["predicted"]:
        fail(f"allocated {m['allocated']} bytes, the program's regions add to {m['predicted']}")
    if predicted["total"] != predicted["arena"] + predicted["weights"] + predicted["state"]:
        fail("the predicted regions do not add up to the total")
    if predicted["total"] != max(program_total(r) for r in range(len(manifest["devices"]))):
        fail(f"the predicted total {predicted['total']} is not the largest program's")
    for rank, allocated in enumerate(m.get("allocated_per_rank", [])):
        if allocated != program_total(rank):
            fail(f"rank {rank} allocated {allocated} bytes, its program predicts {program_total(rank)}")
    if "by_category" in predicted:
        categories = sum(predicted["by_category"].values())
        if categories != predicted["total"]:
            fail(f"the categories add up to {categories}, the total is {predicted['total']}")
    ranks = len(m.get("allocated_per_rank", [])) or 1
    print(f"allocated {m['allocated']} bytes = predicted on {ranks} rank(s): ok")


def pipeline(plan_dir, other_dir=None):
    """A pipelined training plan: each stage's slots run every microbatch's forward and
    backward of each of its chunks once, a backward after its forward, and the optimizer
    last; prints the most microbatches each stage holds activations of (a forward's until
    its backward), which 1F1B bounds by pp - stage. With OTHER_DIR (the same model under
    another schedule), prints each stage's arena against it."""
    with open(os.path.join(plan_dir, "manifest.json")) as f:
        manifest = json.load(f)
    sched, pp = manifest["schedule"], manifest["mesh"]["pp"]
    M, v = sched["microbatches"], sched.get("virtual_stages", 1)
    held = []
    for entry in sched["stages"]:
        s, slots = entry["stage"], entry["slots"]
        # A stage that trains no weight (the loss alone) has no optimizer slot.
        updates = [i for i, slot in enumerate(slots) if slot["phase"] == "optimizer"]
        if updates and updates != [len(slots) - 1]:
            fail(f"stage {s}: the optimizer is not the one last slot")
        chunks = [s + k * pp for k in range(v)]
        done, live, most = set(), {}, 0
        for slot in slots[:len(slots) - len(updates)]:
            key = (slot["phase"], slot["chunk"], slot["microbatch"])
            if key in done:
                fail(f"stage {s}: {key} runs twice")
            done.add(key)
            m, c = slot["microbatch"], slot["chunk"]
            if slot["phase"] == "forward":
                live.setdefault(m, set()).add(c)
            else:
                if ("forward", c, m) not in done:
                    fail(f"stage {s}: backward of chunk {c} microbatch {m} before its forward")
                live[m].discard(c)
                if not live[m]:
                    del live[m]
            most = max(most, len(live))
        for c in chunks:
            for m in range(M):
                for phase in ("forward", "backward"):
                    if (phase, c, m) not in done:
                        fail(f"stage {s}: {phase} of chunk {c} microbatch {m} never runs")
        held.append(most)
    print(f"{sched['pipeline']}: microbatches held per stage {held}")
    if sched["pipeline"] == "1f1b":
        for s, most in enumerate(held):
            if most > pp - s:
                fail(f"stage {s} holds {most} microbatches under 1F1B, more than pp - stage = {pp - s}")
        print("1f1b bound pp - stage: ok")
    if other_dir:
        with open(os.path.join(other_dir, "manifest.json")) as f:
            other = json.load(f)

        def arenas(m):
            return [m["programs"][f"stage{s}_tp0"]["arena_bytes"] for s in range(pp)]

        print(f"arena per stage: {arenas(manifest)} ({sched['pipeline']}) against "
              f"{arenas(other)} ({other['schedule']['pipeline']})")


def program_of(plan_dir):
    with open(os.path.join(plan_dir, "manifest.json")) as f:
        manifest = json.load(f)
    name = manifest["devices"][0]["program"]
    with open(os.path.join(plan_dir, "programs", name + ".json")) as f:
        return manifest, json.load(f)


def zero(plan_dir, none_dir=None):
    manifest, program = program_of(plan_dir)
    ranks, level = manifest["mesh"]["dp"], manifest["training"]["zero"]
    states = [b for b in program["buffers"] if b.get("state", "").startswith("optimizer.")]
    if not states:
        fail("no optimizer states")
    largest = (0, 0)
    for b in states:
        shard = b.get("shard")
        if not shard or shard["group"] != "dp" or shard["ranks"] != ranks:
            fail(f"{b['state']}: not sharded over the {ranks} dp ranks: {shard}")
        numel = 1
        for d in shard["shape"]:
            numel *= d
        part = -(-numel // ranks)
        if b["shape"] != [part]:
            fail(f"{b['state']}: {b['shape']}, a part of {numel} over {ranks} is [{part}]")
        largest = max(largest, (numel, part))
    print(f"zero {level} over {ranks} ranks: {len(states)} optimizer states, the largest a part "
          f"of {largest[1]} of its {largest[0]} elements")
    counts, scattered = {}, set()
    for phase in program["phases"]:
        for inst in phase["instructions"]:
            if inst["kernel"] in ("all_gather", "reduce_scatter", "shard"):
                counts[inst["kernel"]] = counts.get(inst["kernel"], 0) + 1
                if inst["attrs"].get("group") != "dp":
                    fail(f"{inst['kernel']} over {inst['attrs'].get('group')}, not dp")
            if inst["kernel"] == "reduce_scatter":
                scattered.add(phase["name"])
    print("kernels: " + ", ".join(f"{k} {counts.get(k, 0)}" for k in ("all_gather", "reduce_scatter", "shard")))
    print("reduce_scatter in phases: " + ", ".join(sorted(scattered)))
    if level == "parameters":
        # ZeRO-3: every trained parameter is a part, gathered in each phase that reads it.
        parts = {b["weight"] for b in program["buffers"] if "weight" in b and "shard" in b}
        trained = set(manifest["training"]["parameters"])
        if parts != trained:
            fail(f"parts {sorted(parts)}, trained {sorted(trained)}")
        gathered = {}
        for phase in program["phases"]:
            n = sum(1 for i in phase["instructions"] if i["kernel"] == "all_gather")
            gathered[phase["name"]] = gathered.get(phase["name"], 0) + n
        print(f"parameters: {len(parts)} trained, each held as a part; all_gather per phase: "
              + ", ".join(f"{k} {v}" for k, v in gathered.items()))
    if none_dir:
        mine = manifest["predicted"]["memory_bytes"]["by_category"]["optimizer_state"]
        none_manifest, _ = program_of(none_dir)
        if none_manifest["training"]["zero"] != "none":
            fail(f"{none_dir} is not a --zero none plan")
        theirs = none_manifest["predicted"]["memory_bytes"]["by_category"]["optimizer_state"]
        # AdamW's two moments and the part of the parameter the update writes, each 1/ranks of
        # the parameters (plus the step counter and the padding of the last parts).
        # Under ZeRO-3 the parameter is its own part: the moments alone.
        bound = (1.0 if level == "parameters" else 1.5) / ranks + 0.01
        ratio = mine / theirs
        if ratio > bound:
            fail(f"optimizer state {mine} bytes is {ratio:.3f} of none's {theirs}, above {bound:.3f}")
        print(f"optimizer state {mine} bytes, {ratio:.3f} of none's {theirs}: ok")
        if level == "parameters":
            mine = manifest["predicted"]["memory_bytes"]["by_category"]["parameters"]
            theirs = none_manifest["predicted"]["memory_bytes"]["by_category"]["parameters"]
            ratio = mine / theirs
            if ratio > 1.0 / ranks + 0.01:
                fail(f"parameters {mine} bytes is {ratio:.3f} of none's {theirs}")
            print(f"parameters {mine} bytes, {ratio:.3f} of none's {theirs}: ok")


def latest_checkpoint(checkpoint_dir):
    """The directory `latest` names under CHECKPOINT_DIR, and its checkpoint.json."""
    with open(os.path.join(checkpoint_dir, "latest")) as f:
        latest = f.read().strip()
    ckpt = os.path.join(checkpoint_dir, latest)
    with open(os.path.join(ckpt, "checkpoint.json")) as f:
        return ckpt, json.load(f)


def whole_states(checkpoint_dir, plan_dir):
    ckpt, info = latest_checkpoint(checkpoint_dir)
    if info["version"] == 1:
        shapes = {name: list(t.shape)
                  for name, t in load_file(os.path.join(ckpt, "state.safetensors")).items()}
    else:
        # Version 2: the index gives each state's whole shape; a state written as ZeRO
        # parts must have parts that tile it, each file holding what the index says.
        shapes = {}
        for name, entry in info["index"]["states"].items():
            shapes[name] = entry["shape"]
            numel = math.prod(entry["shape"])
            parts = entry.get("parts", [{"file": entry.get("file"), "begin": 0}])
            at = 0
            for part in parts:
                tensor = load_file(os.path.join(ckpt, part["file"]))[name]
                if part["begin"] != at:
                    fail(f"{name}: a part begins at {part['begin']}, expected {at}")
                at += tensor.numel()
            if at != numel:
                fail(f"{name}: the parts hold {at} elements of {numel}")
    _, program = program_of(plan_dir)
    want = {b["state"]: b["shape"] for b in program["buffers"] if "state" in b
            and not b["state"].startswith("gradient_accumulator.")
            and b["state"] != "sample_offset"}
    if sorted(shapes) != sorted(want):
        fail(f"states {sorted(shapes)}, the plan has {sorted(want)}")
    for name, shape in shapes.items():
        if shape != want[name]:
            fail(f"{name}: {shape}, the plan's is {want[name]}")
    print(f"{len(shapes)} states, each the shape of the one-device plan's: ok")


def parts(checkpoint_dir, ranks):
    """A checkpoint of a ZeRO plan on RANKS ranks is version 2 and every rank wrote its own
    parts: the states the plan shards are listed as RANKS parts (fewer where a small tensor
    leaves the last ranks nothing), each in its rank's file."""
    _, info = latest_checkpoint(checkpoint_dir)
    if info["version"] != 2:
        fail(f"checkpoint version {info['version']}, expected 2")
    ranks = int(ranks)
    sharded = {n: e["parts"] for n, e in info["index"]["states"].items() if "parts" in e}
    if not sharded:
        fail("no state is written as parts")
    files = set()
    for name, list_ in sharded.items():
        for part in list_:
            files.add(part["file"])
    writers = sorted({f.split(".")[1] for f in files})
    if len(writers) != ranks:
        fail(f"parts written by {writers}, expected {ranks} ranks")
    most = max(len(p) for p in sharded.values())
    print(f"{len(sharded)} states in parts, written by {len(writers)} ranks ({most} parts at most): ok")


TP_COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


def tp_split(plan_dir):
    with open(os.path.join(plan_dir, "manifest.json")) as f:
        manifest = json.load(f)
    tp = manifest["mesh"]["tp"]
    programs = {}
    for name, entry in manifest["programs"].items():
        with open(os.path.join(plan_dir, entry["file"])) as f:
            programs[name] = json.load(f)
    split_weights, split_states = set(), set()
    backward = {}
    for name, program in programs.items():
        for b in program["buffers"]:
            if "[split(" in b.get("weight", ""):
                split_weights.add(b["weight"].split("[")[0])
            if "[split(" in b.get("state", ""):
                split_states.add(b["state"].split("[")[0])
        kernels = [i["kernel"] for ph in program["phases"] for i in ph["instructions"]]
        twin = programs[name.rsplit("_tp", 1)[0] + "_tp0"]
        if kernels != [i["kernel"] for ph in twin["phases"] for i in ph["instructions"]]:
            fail(f"{name} runs other kernels than its stage's tp index 0")
        for ph in program["phases"]:
            if ph["name"] != "backward":
                continue
            for i in ph["instructions"]:
                if i["kernel"] in TP_COLLECTIVES and i.get("attrs", {}).get("group") == "tp":
                    backward[i["kernel"]] = backward.get(i["kernel"], 0) + 1
    if not split_weights:
        fail("the plan splits no weight over its tp group")
    unsplit = {w for w in split_weights if not any(s.endswith("." + w) for s in split_states)}
    if unsplit and manifest["training"]["optimizer"]["kind"] == "adamw":
        fail(f"split weights whose optimizer states are whole: {sorted(unsplit)[:3]}")
    if not backward.get("all_reduce") and not backward.get("reduce_scatter"):
        fail("backward sums no partial gradient over the tp group")
    kinds = ", ".join(f"{k} {backward[k]}" for k in TP_COLLECTIVES if k in backward)
    print(f"tp {tp}: {len(split_weights)} weights split, their optimizer states too; "
          f"every tp index runs its stage's kernels; backward tp collectives: {kinds}: ok")


def tp_parts(checkpoint_dir, plan_dir):
    ckpt, info = latest_checkpoint(checkpoint_dir)
    with open(os.path.join(plan_dir, "manifest.json")) as f:
        manifest = json.load(f)
    tp = manifest["mesh"]["tp"]
    if info["version"] != 2 or info["plan"].get("tp") != tp:
        fail(f"checkpoint version {info['version']} of tp {info['plan'].get('tp')}, "
             f"expected version 2 of tp {tp}")
    tensors = {}
    for kind in ("weights", "states"):
        for name, entry in info["index"][kind].items():
            of = entry.get("part_of")
            if ("[split(" in name) != (of is not None):
                fail(f"{name}: a part must name its tensor, and only a part")
            if of is None:
                continue
            shape = list(of["shape"])
            shape[of["dim"]] //= of["parts"]
            if entry["shape"] != shape and "parts" not in entry:
                fail(f"{name}: {entry['shape']}, the cut of {of['shape']} is {shape}")
            tensors.setdefault((kind, of["tensor"], tuple(of["shape"])), set()).add(of["part"])
    if not tensors:
        fail("the checkpoint holds no tp part")
    for (kind, tensor, _), found in tensors.items():
        if found != set(range(tp)):
            fail(f"{tensor}: parts {sorted(found)} of {tp}")
    print(f"{len(tensors)} tensors in {tp} tp parts each, every part naming its tensor, "
          f"whole shape and slice: ok")


def trace(path, ranks, microbatches):
    """cleave train --trace: every rank's last step, its phase runs in order and their kernels."""
    with open(path) as f:
        j = json.load(f)
    ranks, microbatches = int(ranks), int(microbatches)
    names = {e["pid"]: e["args"]["name"] for e in j["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    if sorted(names) != list(range(ranks)):
        fail(f"trace processes {sorted(names)}, expected ranks 0..{ranks - 1}")
    expected = []
    for m in range(microbatches):
        expected += [f"F mb{m} chunk0", f"B mb{m} chunk0"]
    expected.append("optimizer")
    for rank in range(ranks):
        events = [e for e in j["traceEvents"] if e["ph"] == "X" and e["pid"] == rank]
        phases = sorted((e for e in events if e["tid"] == 0), key=lambda e: e["ts"])
        if [e["name"] for e in phases] != expected:
            fail(f"rank {rank}: phases {[e['name'] for e in phases]}, expected {expected}")
        for a, b in zip(phases, phases[1:]):
            if b["ts"] < a["ts"] + a["dur"] - 1e-3:
                fail(f"rank {rank}: {b['name']} starts before {a['name']} ends")
        kernels = [e for e in events if e["tid"] == 1]
        for k in kernels:
            inside = [p for p in phases if p["args"]["phase"] == k["args"]["phase"]
                      and p["args"]["microbatch"] == k["args"]["microbatch"]]
            if not inside or k["ts"] < inside[0]["ts"] - 1e-3 or \
                    k["ts"] + k["dur"] > inside[0]["ts"] + inside[0]["dur"] + 1e-3:
                fail(f"rank {rank}: kernel {k['name']} lies outside its phase")
        comm = sum(1 for k in kernels if k["cat"] == "communication")
        print(f"rank {rank} ({names[rank]}): {len(phases)} phases, {len(kernels)} kernels, "
              f"{comm} collectives")
    print("trace: ok")


def same_slots(predicted, measured):
    """cleave inspect --trace and cleave train --trace name the same slots, rank by rank, in
    the same order."""
    def slots(path):
        with open(path) as f:
            j = json.load(f)
        by_rank = {}
        for e in sorted((e for e in j["traceEvents"] if e["ph"] == "X" and e["tid"] == 0),
                        key=lambda e: e["ts"]):
            by_rank.setdefault(e["pid"], []).append(e["name"])
        return by_rank
    p, m = slots(predicted), slots(measured)
    if p != m:
        fail(f"predicted slots {p}, measured {m}")
    for rank, names in sorted(p.items()):
        print(f"rank {rank}: {', '.join(names)}")
    print("same slots: ok")


def recompute(plan_dir, kept_dir):
    """A recomputing plan against the same plan without recomputation."""
    import glob
    steps = glob.glob(os.path.join(plan_dir, "ir", "*-training-step.mlir"))
    if len(steps) != 1:
        fail(f"{plan_dir}: expected one training-step IR snapshot, found {len(steps)}")
    # The phase mark sits on a slot's first op: count the marked ops after a backward mark.
    with open(steps[0]) as f:
        text = f.read()
    again = 0
    in_backward = False
    for line in text.splitlines():
        if "cleave.phase = " in line:
            in_backward = 'cleave.phase = "backward"' in line
        if in_backward and "cleave.recompute" in line:
            again += 1
    if again == 0:
        fail(f"{plan_dir}: no op marked cleave.recompute runs in a backward slot")
    with open(os.path.join(plan_dir, "manifest.json")) as f:
        manifest = json.load(f)
    with open(os.path.join(kept_dir, "manifest.json")) as f:
        kept = json.load(f)
    for name, entry in sorted(manifest["programs"].items()):
        other = kept["programs"].get(name) or next(iter(kept["programs"].values()))
        if not entry["arena_bytes"] < other["arena_bytes"]:
            fail(f"{name}: arena {entry['arena_bytes']} bytes recomputing, "
                 f"{other['arena_bytes']} keeping every activation")
    print(f"forward ops run again in backward; arenas smaller than when kept: ok")


def spill(report_path, plan_dir, budget, ratio):
    """A spilled plan and its training report: the device within the budget, a training state
    at least `ratio` times the budget, the copies run, the host pool as predicted."""
    budget, ratio = int(budget), float(ratio)
    with open(report_path) as f:
        report = json.load(f)
    with open(os.path.join(plan_dir, "manifest.json")) as f:
        manifest = json.load(f)
    memory = manifest["predicted"]["memory_bytes"]
    host = memory.get("host_by_category")
    if not host:
        fail(f"{plan_dir}: nothing spilled (no host_by_category)")
    device = memory["by_category"]
    state = (host["parameters"] + host["gradients"] + host["optimizer_state"] +
             device["parameters"] + device["optimizer_state"] + device["gradients"])
    if state < ratio * budget:
        fail(f"the training state is {state} bytes, less than {ratio} x the budget {budget}")
    m = report["memory_bytes"]
    if m["device_total"] > budget:
        fail(f"the device held {m['device_total']} bytes, over the budget {budget}")
    if m["host"] != memory["host"]:
        fail(f"the host pool is {m['host']} bytes, the plan predicts {memory['host']}")
    _, program = program_of(plan_dir)
    kernels = [i["kernel"] for phase in program["phases"] for i in phase["instructions"]]
    spilled = report["spill"]
    for kernel, moved in (("prefetch", "prefetch_bytes"), ("spill", "spill_bytes")):
        if kernels.count(kernel) == 0:
            fail(f"{plan_dir}: no {kernel} instruction")
        if not spilled[moved] > 0:
            fail(f"the report moved no bytes by {kernel}")
    if not 0 <= spilled["overlap"] <= 1:
        fail(f"overlap {spilled['overlap']} is not a fraction")
    print(f"training state {state / budget:.1f}x the budget, device {m['device_total']} <= "
          f"{budget} bytes, {kernels.count('prefetch')} prefetches and {kernels.count('spill')} "
          f"spills run: ok")


def inspect(path):
    """cleave inspect --json of a training plan: the categories next to the allocation."""
    with open(path) as f:
        j = json.load(f)
    categories = j["training"]["predicted_memory_by_category"]
    # The categories are the largest program's (a pipeline's stages differ).
    program = max(j["programs"], key=lambda p: p["allocated_bytes"])
    allocated = program["arena_bytes"] + program["weight_bytes"] + program["state_bytes"]
    if program["allocated_bytes"] != allocated:
        fail(f"inspect: allocated {program['allocated_bytes']}, the regions add to {allocated}")
    if sum(categories.values()) != program["allocated_bytes"]:
        fail(f"inspect: the categories add to {sum(categories.values())}, "
             f"the plan allocates {program['allocated_bytes']}")
    if j["training"]["predicted_total_bytes"] != program["allocated_bytes"]:
        fail("inspect: predicted total differs from the allocation")
    print(f"inspect: {len(categories)} categories add up to the {allocated} bytes allocated: ok")


def main():
    if len(sys.argv) < 2:
        fail(__doc__)
    command, args = sys.argv[1], sys.argv[2:]
    {"bad-data": bad_data, "damage": damage, "same-losses": same_losses, "trace": trace, "same-slots": same_slots,
     "same-tensors": same_tensors, "memory": memory, "inspect": inspect, "zero": zero,
     "whole-states": whole_states, "pipeline": pipeline, "parts": parts, "tp-split": tp_split,
     "tp-parts": tp_parts, "recompute": recompute, "spill": spill}[command](*args)


if __name__ == "__main__":
    main()
