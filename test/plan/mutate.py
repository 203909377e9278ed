"""Makes broken copies of a plan directory or an input file, for error tests.

usage: mutate.py plan KIND SRC_PLAN DST_PLAN
       mutate.py inputs KIND SRC.safetensors DST.safetensors
"""
import json
import math
import os
import shutil
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
from safetensors_io import load_file, save_file  # noqa: E402

PROGRAM = "programs/stage0_tp0.json"
WEIGHTS = "weights/stage0_tp0.safetensors"


def edit_json(path, fn):
    with open(path) as f:
        data = json.load(f)
    fn(data)
    with open(path, "w") as f:
        json.dump(data, f)


def first_weight_buffer(program):
    return next(b for b in program["buffers"] if "weight" in b)


def first_arena_buffer_written(program):
    ids = {i["outputs"][0] for i in program["phases"][0]["instructions"]}
    return next(b for b in program["buffers"] if b["id"] in ids)


def plan(kind, src, dst):
    shutil.rmtree(dst, ignore_errors=True)
    shutil.copytree(src, dst)
    manifest, program, weights = (os.path.join(dst, p) for p in ("manifest.json", PROGRAM, WEIGHTS))
    if kind == "version":
        edit_json(manifest, lambda m: m.update(version=3))
    elif kind == "version-2":
        # A training plan's version on an inference plan: the forward schedule gives it away.
        edit_json(manifest, lambda m: m.update(version=2))
    elif kind == "no-manifest":
        os.remove(manifest)
    elif kind == "missing-buffer":
        edit_json(program, lambda p: p["phases"][0]["instructions"][0]["inputs"].__setitem__(0, 9999))
    elif kind == "arena-overflow":
        edit_json(program, lambda p: first_arena_buffer_written(p).update(arena_offset=p["arena_bytes"]))
    elif kind == "weight-shape":
        def f(p):
            b = first_weight_buffer(p)
            b["shape"] = [b["shape"][0] + 1] + b["shape"][1:]
        edit_json(program, f)
    elif kind == "weight-dtype":
        edit_json(program, lambda p: first_weight_buffer(p).update(dtype="i32"))
    elif kind == "output-shape":
        arena = {}

        def f(p):
            b = first_arena_buffer_written(p)
            b["shape"] = b["shape"][:-1] + [b["shape"][-1] * 2]
            b["arena_offset"] = p["arena_bytes"]  # past every other buffer: no overlap
            # The arena grows to hold it, as the compiler would size it (64-byte aligned).
            end = p["arena_bytes"] + 4 * math.prod(b["shape"])  # f32
            p["arena_bytes"] = arena["bytes"] = (end + 63) // 64 * 64
        edit_json(program, f)
        edit_json(manifest, lambda m: m["programs"]["stage0_tp0"].update(arena_bytes=arena["bytes"]))
    elif kind == "truncate-weights":
        with open(weights, "r+b") as f:
            f.truncate(os.path.getsize(weights) - 4)
    elif kind == "oversize-weights":
        with open(weights, "ab") as f:
            f.write(b"\0" * 16)
    elif kind == "bad-header":
        with open(weights, "r+b") as f:
            f.write(struct.pack("<Q", 1 << 40))
    elif kind == "predicted-memory":
        edit_json(manifest, lambda m: m["programs"]["stage0_tp0"].update(arena_bytes=100))
    elif kind == "unknown-kernel":
        edit_json(program, lambda p: p["phases"][0]["instructions"][0].update(kernel="frobnicate"))
    elif kind == "bad-attr":
        def f(p):
            inst = next(i for i in p["phases"][0]["instructions"] if i.get("attrs"))
            inst["attrs"][sorted(inst["attrs"])[0]] = [1, 2]
        edit_json(program, f)
    elif kind == "not-json":
        with open(program, "w") as f:
            f.write("{ not json")
    else:
        sys.exit(f"unknown plan mutation {kind}")


def inputs(kind, src, dst):
    tensors = load_file(src)
    name = next(iter(tensors))
    if kind == "missing":
        tensors.pop(name)
    elif kind == "extra":
        tensors["unexpected"] = tensors[name].clone()
    elif kind == "shape":
        t = tensors[name]
        tensors[name] = t.reshape(-1)[: t.numel() // 2].clone()
    elif kind == "dtype":
        tensors[name] = tensors[name].double()
    else:
        sys.exit(f"unknown input mutation {kind}")
    save_file(tensors, dst)


if __name__ == "__main__":
    {"plan": plan, "inputs": inputs}[sys.argv[1]](*sys.argv[2:])
