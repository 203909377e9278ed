"""Hostile plans, weight shards, checkpoints and training data: each must be refused with one
clear error (exit 1, `cleave: error:`, no signal, no hang, nothing written) by every command
that reads it.

usage: hostile.py --cleave BIN --work DIR --plan PLAN --train-plan TPLAN --data DATA.safetensors
                  --inputs IN.safetensors --checkpoint CKPT_DIR [--only NAME] [--limit-s S]

PLAN is a multi-rank inference plan (pipeline stages, tensor splits, microbatches), TPLAN a
one-device training plan with its DATA and a checkpoint CKPT_DIR (ckpt-N/) it wrote. Every case
copies the file it breaks, so the originals stay good; the good files are run first as a control.
Prints one line per case and command, then a summary; exits 1 when any is not refused cleanly.
"""
import argparse
import json
import os
import shutil
import resource
import signal
import struct
import subprocess
import sys
import time

DEEP = 100_000
INT64_MAX = (1 << 63) - 1


# ---------------------------------------------------------------------------------------------
# Files, as bytes: a safetensors header is edited as JSON text so that values Python's json
# cannot round-trip (100,000 levels, 20-digit integers) can be spliced in verbatim.

def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    return json.loads(data[8:8 + n]), data[8 + n:]


def write_safetensors(path, header_text, payload):
    head = header_text.encode() if isinstance(header_text, str) else header_text
    head += b" " * (-len(head) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(head)) + head + payload)


def splice(obj, marker, raw):
    """json text of obj, with the string "marker" replaced by raw JSON text."""
    return json.dumps(obj).replace(json.dumps(marker), raw)


def deep_list(depth=DEEP):
    return "[" * depth + "1" + "]" * depth


def edit_json(path, fn, raw=None):
    with open(path) as f:
        data = json.load(f)
    fn(data)
    text = json.dumps(data)
    if raw is not None:
        text = text.replace(json.dumps("@RAW@"), raw)
    with open(path, "w") as f:
        f.write(text)


def fnv1a64(path):
    h = 0xcbf29ce484222325
    with open(path, "rb") as f:
        for byte in f.read():
            h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h


def reseal_checkpoint(ckpt):
    """Rewrites checkpoint.json's sizes and checksums after a file was edited, as an attacker who
    knows the format would."""
    info = os.path.join(ckpt, "checkpoint.json")
    with open(info) as f:
        data = json.load(f)
    for name, entry in data.get("files", {}).items():
        p = os.path.join(ckpt, name)
        if os.path.exists(p):
            entry["bytes"] = os.path.getsize(p)
            entry["fnv1a64"] = "%016x" % fnv1a64(p)
    with open(info, "w") as f:
        json.dump(data, f)


# ---------------------------------------------------------------------------------------------
# The cases. Each takes the copied directory it may break and returns nothing.

def first_program(plan):
    with open(os.path.join(plan, "manifest.json")) as f:
        m = json.load(f)
    name, entry = sorted(m["programs"].items())[0]
    return os.path.join(plan, entry["file"]), os.path.join(plan, entry["weights"])


def weight_buffer(program):
    return next(b for b in program["buffers"] if "weight" in b)


def arena_buffer(program):
    return next(b for b in program["buffers"] if "arena_offset" in b)


def rename_weight(plan, new_name):
    """Renames the first program's first weight, in the program and in its shard file alike."""
    prog, weights = first_program(plan)
    with open(prog) as f:
        p = json.load(f)
    buf = weight_buffer(p)
    old = buf["weight"]
    buf["weight"] = "@RAW@"
    with open(prog, "w") as f:
        f.write(json.dumps(p).replace(json.dumps("@RAW@"), json.dumps(new_name)))
    header, payload = read_safetensors(weights)
    header[new_name] = header.pop(old)
    write_safetensors(weights, json.dumps(header), payload)


def manifest(plan):
    return os.path.join(plan, "manifest.json")


def safetensors_shape(path, shape_raw, offsets=None):
    """The first tensor of a safetensors file gets the raw shape text (and offsets)."""
    header, payload = read_safetensors(path)
    name = next(k for k in header if k != "__metadata__")
    header[name]["shape"] = "@SHAPE@"
    if offsets is not None:
        header[name]["data_offsets"] = "@OFFSETS@"
    text = json.dumps(header).replace(json.dumps("@SHAPE@"), shape_raw)
    if offsets is not None:
        text = text.replace(json.dumps("@OFFSETS@"), offsets)
    write_safetensors(path, text, payload)


def set_mesh(plan, **mesh):
    edit_json(manifest(plan), lambda m: m["mesh"].update(mesh))


def set_schedule(plan, **values):
    def f(m):
        m["schedule"].update(values)
        if "microbatches" in values and "batch" in m:
            m["batch"]["microbatches"] = values["microbatches"]
    edit_json(manifest(plan), f)


def program_edit(plan, fn, raw=None):
    prog, _ = first_program(plan)
    edit_json(prog, fn, raw)


def scratch_overflow(p):
    inst = p["phases"][0]["instructions"][0]
    inst["scratch"] = {"arena_offset": 1 << 62, "bytes": INT64_MAX}


def huge_arena_buffer(p):
    # 2^62 f32 elements are 2^64 bytes: 0 in 64-bit arithmetic, so a plain bound check passes.
    b = arena_buffer(p)
    b["shape"] = [1 << 62]
    b["arena_offset"] = 0


def arena_bytes_everywhere(plan, value):
    prog, _ = first_program(plan)
    edit_json(prog, lambda p: p.update(arena_bytes=value))
    name = os.path.splitext(os.path.basename(prog))[0]
    edit_json(manifest(plan), lambda m: m["programs"][name].update(arena_bytes=value))


INFER_CASES = {
    # Deep nesting, in each kind of file.
    "deep-manifest-shape": lambda d: edit_json(
        manifest(d), lambda m: m["inputs"][0].update(shape="@RAW@"), deep_list()),
    "deep-manifest-unknown-key": lambda d: edit_json(
        manifest(d), lambda m: m.update(comment="@RAW@"), deep_list()),
    "deep-program-shape": lambda d: program_edit(
        d, lambda p: weight_buffer(p).update(shape="@RAW@"), deep_list()),
    "deep-program-objects": lambda d: program_edit(
        d, lambda p: p.update(extra="@RAW@"), '{"a":' * DEEP + "1" + "}" * DEEP),
    "deep-safetensors-shape": lambda d: safetensors_shape(first_program(d)[1], deep_list()),
    "deep-safetensors-metadata": lambda d: (lambda w: write_safetensors(
        w, '{"__metadata__":' + deep_list() + "}", b""))(first_program(d)[1]),
    # Numbers too large to parse.
    "weight-name-index-over-64-bits": lambda d: rename_weight(
        d, "fc1.weight[split(0) 99999999999999999999/1]"),
    "weight-name-parts-over-64-bits": lambda d: rename_weight(
        d, "fc1.weight[split(0) 0/99999999999999999999]"),
    "weight-name-100k-digits": lambda d: rename_weight(
        d, "fc1.weight[split(0) " + "9" * DEEP + "/1]"),
    "manifest-integer-over-64-bits": lambda d: edit_json(
        manifest(d), lambda m: m["mesh"].update(pp="@RAW@"), "99999999999999999999999"),
    "program-float-as-size": lambda d: program_edit(
        d, lambda p: weight_buffer(p).update(shape=[1e300])),
    # Huge counts.
    "pp-1e12": lambda d: set_mesh(d, pp=10**12),
    "tp-1e12": lambda d: set_mesh(d, tp=10**12),
    "microbatches-1e11": lambda d: set_schedule(d, microbatches=10**11),
    "virtual-stages-1e11": lambda d: set_schedule(d, virtual_stages=10**11),
    "devices-rank-1e18": lambda d: edit_json(
        manifest(d), lambda m: m["devices"][0].update(rank=10**18)),
    # Arithmetic that wraps.
    "mesh-product-wraps-to-1": lambda d: set_mesh(d, pp=1, tp=INT64_MAX, dp=INT64_MAX),
    "mesh-product-wraps-to-4": lambda d: set_mesh(d, pp=4, tp=1 << 62, dp=4),
    "arena-buffer-2^62-f32": lambda d: program_edit(d, huge_arena_buffer),
    "arena-buffer-shape-product-wraps": lambda d: program_edit(
        d, lambda p: arena_buffer(p).update(shape=[1 << 32, 1 << 32, 4])),
    "scratch-offset-plus-bytes-wraps": lambda d: program_edit(d, scratch_overflow),
    "arena-offset-near-int64-max": lambda d: program_edit(
        d, lambda p: arena_buffer(p).update(arena_offset=INT64_MAX - 3)),
    "arena-bytes-2^62": lambda d: arena_bytes_everywhere(d, 1 << 62),
    "safetensors-2^62-f32-empty-data": lambda d: safetensors_shape(
        first_program(d)[1], "[4611686018427387904]", "[0, 0]"),
    "safetensors-offsets-past-2^64": lambda d: safetensors_shape(
        first_program(d)[1], "[4]", "[18446744073709551610, 18446744073709551626]"),
    "instruction-100k-operands": lambda d: program_edit(d, many_operands),
    "safetensors-header-length-2^64-1": lambda d: (lambda w: open(w, "r+b").write(
        b"\xff" * 8))(first_program(d)[1]),
}


def many_operands(p):
    # One instruction reading one buffer 100,000 times and writing another as often: a check
    # that pairs every output with every input would take 10^10 steps.
    inst = p["phases"][0]["instructions"][0]
    inst["inputs"] = [inst["inputs"][0]] * 100_000
    inst["outputs"] = [inst["outputs"][0]] * 100_000


def many_states(plan):
    """50,000 distinct one-element states, the last overlapping the one before: a check that
    compares each state with all before it takes 1.25 x 10^9 steps (seconds), a lookup
    milliseconds."""
    prog, _ = first_program(plan)
    with open(prog) as f:
        p = json.load(f)
    n = 50_000
    base = p["state_bytes"]
    for i in range(n):
        p["buffers"].append({"id": len(p["buffers"]), "name": f"s{i}", "shape": [1], "dtype": "f32",
                             "state": f"s{i}", "state_offset": base + 4 * min(i, n - 2)})
    p["state_bytes"] = base + 4 * n
    with open(prog, "w") as f:
        json.dump(p, f)
    name = os.path.splitext(os.path.basename(prog))[0]
    edit_json(manifest(plan), lambda m: m["programs"][name].update(state_bytes=base + 4 * n))


def train_manifest(plan, fn):
    edit_json(manifest(plan), fn)


def checkpoint_edit(ckpt, fn, raw=None):
    edit_json(os.path.join(ckpt, "checkpoint.json"), fn, raw)


def checkpoint_weights(ckpt, raw_shape, offsets=None):
    safetensors_shape(os.path.join(ckpt, "weights.safetensors"), raw_shape, offsets)
    reseal_checkpoint(ckpt)


# Training cases break the data file (key "data"), the checkpoint (key "checkpoint") or the
# one-device training plan (key "tplan").
TRAIN_CASES = {
    "train-plan-microbatches-1e11": ("tplan", lambda d: train_manifest(
        d, lambda m: m["schedule"].update(microbatches=10**11))),
    "train-plan-microbatches-without-batch": ("tplan", lambda d: train_manifest(
        d, lambda m: (m.pop("batch", None), m["schedule"].update(microbatches=60_000)))),
    "train-plan-global-batch-product-wraps": ("tplan", lambda d: train_manifest(
        d, lambda m: (m["schedule"].update(microbatches=2), m.update(batch={
            "global": 2, "microbatch_size": INT64_MAX, "microbatches": 2})))),
    "train-plan-50k-states": ("tplan", many_states),
    "data-deep-shape": ("data", lambda f: safetensors_shape(f, deep_list())),
    "data-2^62-samples": ("data", lambda f: safetensors_shape(
        f, "[4611686018427387904, 16]", "[0, 0]")),
    "data-shape-product-wraps": ("data", lambda f: safetensors_shape(
        f, "[4294967296, 4294967296]", "[0, 0]")),
    "data-header-deep-metadata": ("data", lambda f: write_safetensors(
        f, '{"__metadata__":' + deep_list() + "}", b"")),
    "checkpoint-deep-json": ("checkpoint", lambda c: checkpoint_edit(
        c, lambda j: j.update(extra="@RAW@"), deep_list())),
    "checkpoint-step-1e18": ("checkpoint", lambda c: checkpoint_edit(
        c, lambda j: j.update(step=10**18))),
    "checkpoint-next-sample-2^63": ("checkpoint", lambda c: checkpoint_edit(
        c, lambda j: j["data"].update(next_sample="@RAW@"), "9223372036854775808")),
    "checkpoint-file-bytes-2^64": ("checkpoint", lambda c: checkpoint_edit(
        c, lambda j: j["files"]["weights.safetensors"].update(bytes="@RAW@"),
        "18446744073709551616")),
    "checkpoint-weights-2^62-f32": ("checkpoint", lambda c: checkpoint_weights(
        c, "[4611686018427387904]", "[0, 0]")),
    "checkpoint-weights-deep-shape": ("checkpoint", lambda c: checkpoint_weights(c, deep_list())),
}


# ---------------------------------------------------------------------------------------------

CRASH_MARKERS = ("terminate called", "Process received signal", "exited on signal",
                 "AddressSanitizer", "runtime error:", "Segmentation fault", "Aborted")


def run(cmd, limit, outputs):
    """Runs one refusal. `limit` bounds the CPU time the command and its ranks spend (user +
    system): that is the work a refusal does, and it does not grow when a loaded CI machine
    shares its cores with other tests, as wall-clock time does. A wait that burns no CPU is
    caught by the wall-clock bound of ten times the limit."""
    start = time.monotonic()
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=limit * 10)
        rc, err = proc.returncode, proc.stderr.decode(errors="replace")
    except subprocess.TimeoutExpired:
        rc, err = "hang", ""
    elapsed = time.monotonic() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    problems = []
    if rc == "hang":
        problems.append(f"no answer after {limit * 10:.0f} s")
    elif rc < 0:
        problems.append(f"killed by {signal.Signals(-rc).name}")
    elif rc != 1:
        problems.append(f"exit {rc}")
    if rc != "hang" and "cleave: error:" not in err:
        problems.append("no 'cleave: error:' line")
    # Under --local the launcher's exit hides a rank's: a rank's crash shows in what it printed.
    for marker in CRASH_MARKERS:
        if marker in err:
            problems.append(f"a rank printed '{marker}'")
            break
    if cpu > limit:
        problems.append(f"took {cpu:.2f} s of CPU (limit {limit} s)")
    for path in outputs:
        if os.path.exists(path):
            problems.append(f"wrote {path}")
    first = next((line for line in err.splitlines() if "error:" in line), err.strip()[:200])
    return problems, elapsed, cpu, first[:300]


def main():
    ap = argparse.ArgumentParser()
    for name in ("cleave", "work", "plan", "train_plan", "data", "inputs", "checkpoint"):
        ap.add_argument("--" + name.replace("_", "-"), required=True)
    ap.add_argument("--only")
    ap.add_argument("--limit-s", type=float, default=1.0,
                    help="CPU-time bound for one refusal (the issue asks for a second); ten times it "
                         "bounds the wall clock")
    args = ap.parse_args()
    shutil.rmtree(args.work, ignore_errors=True)
    os.makedirs(args.work)
    ckpt = sorted((d for d in os.listdir(args.checkpoint) if d.startswith("ckpt-")),
                  key=lambda d: int(d.split("-")[1]))[-1]
    out = os.path.join(args.work, "out")

    with open(os.path.join(args.plan, "manifest.json")) as f:
        ranks = str(len(json.load(f)["devices"]))

    def infer_commands(plan):
        return {
            "verify": ([args.cleave, "verify", plan], []),
            "run": ([args.cleave, "run", plan, "--local", ranks, "--inputs", args.inputs,
                     "--outputs", out + ".safetensors"], [out + ".safetensors"]),
            "inspect": ([args.cleave, "inspect", plan, "--json"], []),
            "train": ([args.cleave, "train", plan, "--data", args.data, "--steps", "1",
                       "--log", out + ".jsonl"], [out + ".jsonl"]),
        }

    def train_commands(plan, data, resume):
        cmd = [args.cleave, "train", plan, "--data", data, "--steps", "3", "--log", out + ".jsonl",
               "--save-weights", out + "-w.safetensors"]
        if resume:
            cmd += ["--resume", resume]
        return {"train": (cmd, [out + ".jsonl", out + "-w.safetensors"])}

    cases = []
    # Controls: the good files work, so a refusal below is about the damage.
    cases.append(("control", None, None))
    for name, fn in INFER_CASES.items():
        cases.append((name, "plan", fn))
    for name, (kind, fn) in TRAIN_CASES.items():
        cases.append((name, kind, fn))

    failures, count, slowest, busiest = [], 0, 0.0, 0.0
    for name, kind, fn in cases:
        if args.only and name not in (args.only, "control"):
            continue
        d = os.path.join(args.work, name)
        if kind is None:
            commands = dict(infer_commands(args.plan))
            commands.pop("train")
            commands["train"] = train_commands(args.train_plan, args.data, None)["train"]
            control_failures = []
            for cmd_name, (cmd, outs) in commands.items():
                proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
                if proc.returncode != 0:
                    control_failures.append(f"control {cmd_name}: exit {proc.returncode}: "
                                            f"{proc.stderr.decode(errors='replace')[-300:]}")
                for path in outs:
                    if os.path.exists(path):
                        os.remove(path)
            print(f"control: the good files run ({', '.join(commands)})")
            # Printed after that line so that the test's CHECK-NOT sees them.
            for f in control_failures:
                print("FAIL", f)
            failures += control_failures
            continue
        if kind == "plan":
            shutil.copytree(args.plan, d)
            fn(d)
            commands = infer_commands(d)
        elif kind == "tplan":
            shutil.copytree(args.train_plan, d)
            fn(d)
            commands = train_commands(d, args.data, None)
            commands["verify"] = ([args.cleave, "verify", d], [])
        elif kind == "data":
            os.makedirs(d)
            data = os.path.join(d, "data.safetensors")
            shutil.copy(args.data, data)
            fn(data)
            commands = train_commands(args.train_plan, data, None)
        else:
            shutil.copytree(os.path.join(args.checkpoint, ckpt), d)
            fn(d)
            commands = train_commands(args.train_plan, args.data, d)
        for cmd_name, (cmd, outs) in commands.items():
            count += 1
            problems, elapsed, cpu, message = run(cmd, args.limit_s, outs)
            slowest = max(slowest, elapsed)
            busiest = max(busiest, cpu)
            status = "FAIL" if problems else "refused"
            print(f"{status} {name} [{cmd_name}] {elapsed:.2f}s ({cpu:.2f}s CPU): "
                  + ("; ".join(problems) + " | " if problems else "") + message)
            if problems:
                failures.append(f"{name} [{cmd_name}]: {'; '.join(problems)}")
            for path in outs:
                if os.path.exists(path):
                    os.remove(path)
        shutil.rmtree(d, ignore_errors=True)
    print(f"hostile: {count - len(failures)} of {count} refused cleanly, slowest {slowest:.2f} s, "
          f"most CPU {busiest:.2f} s")
    for f in failures:
        print("  not refused cleanly:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
