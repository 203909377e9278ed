"""Checks that a plan compiled with `cleave compile --dtype bf16` stores and
computes bf16, against the f32 plan of the same model.

usage: check_bf16_plan.py F32_PLAN BF16_PLAN F32_INSPECT.json BF16_INSPECT.json

- The manifests' inputs and outputs are the same (f32 stays f32 at the boundary).
- Every weight file holds the same tensors with the same shapes; each F32
  tensor of the f32 plan is BF16 in the bf16 plan, every other keeps its dtype.
- The weight bytes that `cleave inspect --json` reports (and the manifest
  records) for the bf16 plan are exactly the f32 plan's with the float
  tensors' bytes halved.
- Inside the bf16 programs, the only f32 buffers are the model's bound
  inputs and outputs and the casts at the boundary.
Prints one line per fact; exits 1 on the first that fails.
"""
import json
import os
import struct
import sys


def header(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        h = json.loads(f.read(n))
    h.pop("__metadata__", None)
    return h


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def main(f32_dir, bf16_dir, f32_inspect, bf16_inspect):
    m32 = json.load(open(os.path.join(f32_dir, "manifest.json")))
    m16 = json.load(open(os.path.join(bf16_dir, "manifest.json")))
    if m32["inputs"] != m16["inputs"] or m32["outputs"] != m16["outputs"]:
        fail(f"the boundary changed: {m32['inputs']} -> {m16['inputs']}, "
             f"{m32['outputs']} -> {m16['outputs']}")
    dtypes = sorted({t["dtype"] for t in m16["inputs"] + m16["outputs"]})
    print(f"boundary: inputs and outputs as in the f32 plan ({', '.join(dtypes)})")

    i32 = {p["name"]: p for p in json.load(open(f32_inspect))["programs"]}
    i16 = {p["name"]: p for p in json.load(open(bf16_inspect))["programs"]}
    total32 = total16 = converted = 0
    for name, program in m16["programs"].items():
        w32 = header(os.path.join(f32_dir, m32["programs"][name]["weights"]))
        w16 = header(os.path.join(bf16_dir, program["weights"]))
        if set(w32) != set(w16):
            fail(f"{name}: weights differ: {sorted(set(w32) ^ set(w16))}")
        float_bytes = 0
        for tensor, t32 in w32.items():
            t16 = w16[tensor]
            want = "BF16" if t32["dtype"] == "F32" else t32["dtype"]
            if t16["dtype"] != want or t16["shape"] != t32["shape"]:
                fail(f"{name}: {tensor} is {t16['dtype']} {t16['shape']}, expected {want} "
                     f"{t32['shape']}")
            if t32["dtype"] == "F32":
                float_bytes += t32["data_offsets"][1] - t32["data_offsets"][0]
                converted += 1
        b32, b16 = i32[name]["weight_bytes"], i16[name]["weight_bytes"]
        if b16 != program["weight_bytes"] or b32 != m32["programs"][name]["weight_bytes"]:
            fail(f"{name}: cleave inspect's weight bytes differ from the manifests'")
        if b16 != b32 - float_bytes // 2:
            fail(f"{name}: {b16} weight bytes, expected {b32} - {float_bytes} / 2")
        total32, total16 = total32 + b32, total16 + b16
    print(f"weights: {converted} f32 tensors stored as bf16; {total32} -> {total16} bytes "
          f"({total16 / total32:.3f}x), the float bytes exactly halved")

    for name, program in m16["programs"].items():
        p = json.load(open(os.path.join(bf16_dir, program["file"])))
        buffers = {b["id"]: b for b in p["buffers"]}
        boundary = {b["buffer"] for b in p["inputs"] + p["outputs"]}
        casts = set()
        for phase in p["phases"]:
            for inst in phase["instructions"]:
                if inst["kernel"] == "cast":
                    casts.update(i for i in inst["inputs"] + inst["outputs"] if i is not None)
        f32 = [b for b in buffers.values() if b["dtype"] == "f32"]
        inside = [b["name"] for b in f32 if b["id"] not in boundary and b["id"] not in casts]
        if inside:
            fail(f"{name}: f32 buffers inside the program: {inside[:5]}")
        bf16 = sum(b["dtype"] == "bf16" for b in buffers.values())
        print(f"{name}: {bf16} bf16 buffers; f32 only at the boundary ({len(f32)})")


if __name__ == "__main__":
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    main(*sys.argv[1:])
