"""Writes a small multi-device plan by hand, as `cleave compile --cluster` is to
emit it (docs/plan-format.md, "Multi-device plans"), and damaged variants of it,
for the tests of `cleave verify` and `cleave inspect`.

The model is an MLP on x: [batch, 8]:
  fc_in      linear 8 -> 16, held whole
  blocks.i   column-parallel fc 16 -> 32 (split(0); blocks.1 fused, 16 -> 3x32,
             split(0, blocks=3)),
             relu, row-parallel proj (split(1), bias on tp index 0 only),
             all_reduce over the tp group
  head       column-parallel linear 16 -> 12, all_gather of the logits
Layers are cut into pp * virtual_stages chunks, chunk c on stage c mod pp;
each crossing is a send/recv pair with tag c.

usage: make_multi_plan.py OUT_DIR [--pp N] [--tp N] [--dp N] [--microbatches M]
         [--microbatch-size B] [--schedule gpipe|1f1b|interleaved] [--virtual-stages V]
         [--no-weights] [--no-strategy] [--damage KIND]
"""
import argparse
import json
import os
import shutil
import struct
import sys

IN_FEATURES, HIDDEN, HEAD = 8, 16, 12
LAYERS = ["fc_in", "blocks.0", "blocks.1", "blocks.2", "head"]
DAMAGES = [
    "remove-recv", "unknown-tag", "collective-kind", "collective-group", "collective-attrs",
    "collective-shape", "recv-shape", "wrong-chunk", "drop-part", "dup-part", "part-shape",
    "unread-param", "device-count", "rank-coords", "global-batch", "bad-group",
    "schedule-stages", "missing-slot", "dup-slot", "virtual-stages", "peer-chunk", "send-output",
    "phase-chunk", "no-batch-dim", "unbound-output",
]


def split_name(path, dim, t, n, blocks=1):
    """The weight name of part t of n of `path` (docs/plan-format.md, "Weight shards")."""
    if n == 1:
        return path
    b = f", blocks={blocks}" if blocks > 1 else ""
    return f"{path}[split({dim}{b}) {t}/{n}]"


class Program:
    """One program stage{S}_tp{T}: buffers, phases, weights."""

    def __init__(self, stage, tp, args):
        self.stage, self.tp, self.args = stage, tp, args
        self.name = f"stage{stage}_tp{tp}"
        self.buffers, self.phases, self.weights = [], [], {}
        self.weight_buffer = {}
        self.arena_bytes = 0

    def begin_phase(self, chunk):
        self.phase = {"name": "forward", "chunk": chunk, "inputs": [], "outputs": [],
                      "instructions": []}
        self.phases.append(self.phase)
        self.offset = 0  # each phase's memory plan starts at offset 0

    def alloc(self, name, shape):
        offset = self.offset
        self.offset += (4 * prod(shape) + 63) // 64 * 64
        self.arena_bytes = max(self.arena_bytes, self.offset)
        return self._buffer(name, shape, arena_offset=offset)

    def weight(self, name, shape):
        if name not in self.weight_buffer:
            self.weight_buffer[name] = self._buffer(name, shape, weight=name)
            self.weights[name] = shape
        return self.weight_buffer[name]

    def _buffer(self, name, shape, **storage):
        b = {"id": len(self.buffers), "name": name, "shape": list(shape), "dtype": "f32", **storage}
        self.buffers.append(b)
        return b["id"]

    def inst(self, kernel, inputs, outputs, line, scope, **attrs):
        i = {"kernel": kernel, "inputs": inputs, "outputs": outputs, "loc": f"model.py:{line} (in {scope})"}
        if attrs:
            i["attrs"] = attrs
        self.phase["instructions"].append(i)
        return i


def prod(shape):
    n = 1
    for d in shape:
        n *= d
    return n


def build_layer(p, layer, x, mb, tp, t):
    """Appends `layer`'s instructions to program p's current phase; returns its output buffer."""
    if layer == "fc_in":
        w = p.weight("fc_in.weight", [HIDDEN, IN_FEATURES])
        b = p.weight("fc_in.bias", [HIDDEN])
        y = p.alloc("fc_in: linear", [mb, HIDDEN])
        p.inst("linear", [x, w, b], [y], 10, "fc_in")
        return y
    if layer.startswith("blocks."):
        i = int(layer.split(".")[1])
        blocks = 3 if i == 1 else 1
        width = 16 * blocks * 2  # 32, or 96 split into 3 blocks
        part = width // tp
        line = 20 + 10 * i
        w = p.weight(split_name(f"{layer}.fc.weight", 0, t, tp, blocks), [part, HIDDEN])
        b = p.weight(split_name(f"{layer}.fc.bias", 0, t, tp, blocks), [part])
        h = p.alloc(f"{layer}.fc: linear", [mb, part])
        p.inst("linear", [x, w, b], [h], line, f"{layer}.fc")
        r = p.alloc(f"{layer}: relu", [mb, part])
        p.inst("relu", [h], [r], line + 1, layer)
        w2 = p.weight(split_name(f"{layer}.proj.weight", 1, t, tp, blocks), [HIDDEN, part])
        # A row-parallel linear adds its bias on tp index 0 only, so the sum counts it once.
        inputs = [r, w2] + ([p.weight(f"{layer}.proj.bias", [HIDDEN])] if t == 0 else [])
        y = p.alloc(f"{layer}.proj: linear", [mb, HIDDEN])
        p.inst("linear", inputs, [y], line + 2, f"{layer}.proj")
        if tp == 1:
            return y
        s = p.alloc(f"{layer}.proj: all_reduce", [mb, HIDDEN])
        p.inst("all_reduce", [y], [s], line + 2, f"{layer}.proj", group="tp")
        return s
    assert layer == "head"
    w = p.weight(split_name("head.weight", 0, t, tp), [HEAD // tp, HIDDEN])
    y = p.alloc("head: linear", [mb, HEAD // tp])
    p.inst("linear", [x, w], [y], 80, "head")
    if tp == 1:
        return y
    g = p.alloc("head: all_gather", [mb, HEAD])
    p.inst("all_gather", [y], [g], 80, "head", group="tp", dim=1, blocks=1)
    return g


def parameters():
    params = {"fc_in.weight": [HIDDEN, IN_FEATURES], "fc_in.bias": [HIDDEN],
              "head.weight": [HEAD, HIDDEN]}
    for i in range(3):
        width = 96 if i == 1 else 32
        params.update({f"blocks.{i}.fc.weight": [width, HIDDEN], f"blocks.{i}.fc.bias": [width],
                       f"blocks.{i}.proj.weight": [HIDDEN, width], f"blocks.{i}.proj.bias": [HIDDEN]})
    return {k: {"shape": v, "dtype": "f32"} for k, v in params.items()}


def chunk_layers(chunks):
    """Layers cut into `chunks` contiguous runs, earlier runs one longer."""
    out, start = [], 0
    for c in range(chunks):
        n = len(LAYERS) // chunks + (1 if c < len(LAYERS) % chunks else 0)
        out.append(LAYERS[start:start + n])
        start += n
    return out


def schedule_slots(kind, pp, v, microbatches, stage):
    chunks = [stage + k * pp for k in range(v)]
    if kind != "interleaved":
        return [{"phase": "forward", "chunk": stage, "microbatch": m} for m in range(microbatches)]
    # Megatron's interleaving: microbatches in groups of pp, every chunk per group.
    slots = []
    for g in range(0, microbatches, pp):
        for c in chunks:
            for m in range(g, min(g + pp, microbatches)):
                slots.append({"phase": "forward", "chunk": c, "microbatch": m})
    return slots


def build(args):
    pp, tp, dp, v = args.pp, args.tp, args.dp, args.virtual_stages
    mb, m = args.microbatch_size, args.microbatches
    chunks = chunk_layers(pp * v)
    last = pp * v - 1
    programs = {}
    for s in range(pp):
        for t in range(tp):
            p = Program(s, t, args)
            for c in range(s, pp * v, pp):
                p.begin_phase(c)
                if c == 0:
                    x = p.alloc("x", [mb, IN_FEATURES])
                    p.phase["inputs"].append({"name": "x", "buffer": x})
                else:
                    x = p.alloc(f"{chunks[c][0]}: recv", [mb, HIDDEN])
                    p.inst("recv", [], [x], 5, chunks[c][0], peer_stage=(c - 1) % pp,
                           peer_chunk=c - 1, tag=c - 1)
                for layer in chunks[c]:
                    x = build_layer(p, layer, x, mb, tp, t)
                if c == last:
                    p.phase["outputs"].append({"name": "output_0", "buffer": x})
                else:
                    p.inst("send", [x], [], 6, chunks[c][-1], peer_stage=(c + 1) % pp,
                           peer_chunk=c + 1, tag=c)
            programs[p.name] = p
    return programs, chunks


def write_safetensors(path, tensors):
    header, offset = {}, 0
    for name, shape in tensors.items():
        n = 4 * prod(shape)
        header[name] = {"dtype": "F32", "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    header["__metadata__"] = {"format": "pt"}
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for i, (name, shape) in enumerate(tensors.items()):
            count = prod(shape)
            f.write(struct.pack(f"<{count}f", *[((k * 7 + i) % 13 - 6) / 16 for k in range(count)]))
    return offset


def strategy_and_predictions(args, chunks, programs):
    """Per-stage planner figures (made up but consistent) and the manifest's split."""
    pp, tp, dp, v, m = args.pp, args.tp, args.dp, args.virtual_stages, args.microbatches
    stages, times = [], []
    for s in range(pp):
        layers = [l for c in range(s, pp * v, pp) for l in chunks[c]]
        blocks = sum(l.startswith("blocks.") for l in layers)
        fwd, tp_comm, p2p = 1e-4 * len(layers), (2e-5 * blocks if tp > 1 else 0.0), 1e-5
        times.append((fwd, tp_comm, p2p))
        prog = programs[f"stage{s}_tp0"]
        params = 4 * sum(prod(shape) for shape in prog.weights.values())
        memory = {"parameters": params, "gradients": 0, "optimizer_state": 0,
                  "activations": prog.arena_bytes, "comm_buffers": 1024 if tp > 1 else 0,
                  "workspace": 0}
        memory["total"] = sum(memory.values())
        stages.append({"stage": s,
                       "chunks": [[chunks[c][0], chunks[c][-1]] for c in range(s, pp * v, pp)],
                       "layers": layers, "recompute": [], "parameters": params // 4,
                       "per_microbatch_seconds": {"forward": fwd, "backward": 0.0, "recompute": 0.0,
                                                  "tp_comm": tp_comm, "p2p": p2p},
                       "memory": memory})
    per_stage = [f + c for f, c, _ in times]
    slowest = max(per_stage)
    if args.schedule == "interleaved":
        pipeline = (m + (pp - 1) / v) * slowest
    else:
        pipeline = (m - 1) * slowest + sum(per_stage)
    bubble = max(0.0, pipeline - m * slowest)
    communication = m * max(c for _, c, _ in times) + (pp - 1) * times[0][2]
    compute = pipeline - bubble - communication
    budget = 64 << 10
    worst = max(range(pp), key=lambda s: stages[s]["memory"]["total"])
    strategy = {
        "format": "cleave-strategy", "version": 1, "model": "mlp.pt", "cluster": "test-cluster",
        "devices": pp * tp * dp, "global_batch": dp * m * args.microbatch_size, "mode": "infer",
        "precision": "fp32", "memory_budget_bytes": budget, "traced_batch": 2, "batch_dim": 0,
        "mesh": {"tp": tp, "pp": pp, "dp": dp},
        "schedule": {"kind": args.schedule, "virtual_stages": v,
                     "microbatch_size": args.microbatch_size, "microbatches": m},
        "data_parallel": {"sharding": "none"}, "stages": stages, "tensor_parallel": [],
        "predicted": {"step_seconds": pipeline, "pipeline_seconds": pipeline,
                      "bubble_fraction": bubble / pipeline, "tp_comm_seconds": m * max(c for _, c, _ in times),
                      "dp_comm_seconds": 0.0, "optimizer_seconds": 0.0, "worst_stage": worst,
                      "memory": stages[worst]["memory"]},
        "search": {"candidates_considered": 1, "candidates_evaluated": 1,
                   "layer_split_seconds": 0.0, "search_seconds": 0.0},
    }
    predicted = {"step_seconds": pipeline, "compute_seconds": compute,
                 "communication_seconds": communication, "bubble_seconds": bubble,
                 "memory_budget_bytes": budget}
    return strategy, predicted


def find_inst(program, kernel, nth=0):
    found = [i for ph in program.phases for i in ph["instructions"] if i["kernel"] == kernel]
    return found[nth]


def damage_programs(kind, programs, args):
    t1 = min(1, args.tp - 1)
    s0t1, s1t0, s1t1 = programs[f"stage0_tp{t1}"], programs.get("stage1_tp0"), programs.get(f"stage1_tp{t1}")
    if kind == "remove-recv":
        for ph in s1t1.phases:
            ph["instructions"] = [i for i in ph["instructions"] if i["kernel"] != "recv"]
    elif kind == "unknown-tag":
        find_inst(s1t1, "recv")["attrs"]["tag"] = 99
    elif kind == "collective-kind":
        # tp index 1 gathers where its group sums: its own shapes stay consistent.
        inst = find_inst(s0t1, "all_reduce")
        x = s0t1.buffers[inst["inputs"][0]]
        s0t1.phase = s0t1.phases[0]
        s0t1.offset = s0t1.arena_bytes
        out = s0t1.alloc("blocks.0.proj: all_gather", [x["shape"][0], x["shape"][1] * args.tp])
        inst.update(kernel="all_gather", outputs=[out], attrs={"group": "tp", "dim": 1, "blocks": 1})
    elif kind == "collective-group":
        find_inst(s0t1, "all_reduce")["attrs"]["group"] = "dp"
    elif kind == "collective-attrs":
        find_inst(s1t1, "all_gather")["attrs"]["blocks"] = 2
    elif kind == "collective-shape":
        p = programs["stage0_tp0"]
        p.buffers[find_inst(p, "all_reduce")["outputs"][0]]["shape"][1] //= 2
    elif kind == "recv-shape":
        inst = find_inst(s1t0, "recv")
        s1t0.buffers[inst["outputs"][0]]["shape"][0] = 1
    elif kind == "wrong-chunk":
        # Chunk 2 (stage 0) receives from chunk 1; say chunk 3, also on stage 1.
        p = programs["stage0_tp0"]
        next(i for i in p.phases[1]["instructions"] if i["kernel"] == "recv")["attrs"]["peer_chunk"] = 3
    elif kind == "peer-chunk":
        find_inst(s1t0, "recv")["attrs"]["peer_chunk"] = 3
    elif kind == "send-output":
        find_inst(programs["stage0_tp0"], "send")["outputs"] = [0]
    elif kind == "phase-chunk":
        programs["stage0_tp0"].phases[0]["chunk"] = 1
    elif kind == "unbound-output":
        for p in programs.values():
            for ph in p.phases:
                ph["outputs"] = []
    elif kind in ("drop-part", "dup-part"):
        old = split_name("blocks.0.fc.weight", 0, t1, args.tp)
        new = "constant.0" if kind == "drop-part" else split_name("blocks.0.fc.weight", 0, 0, args.tp)
        b = s0t1.weight_buffer.pop(old)
        s0t1.buffers[b]["weight"] = s0t1.buffers[b]["name"] = new
        s0t1.weight_buffer[new] = b
        s0t1.weights = {(new if k == old else k): v for k, v in s0t1.weights.items()}


def damage_manifest(kind, manifest):
    if kind == "part-shape":
        manifest["parameters"]["blocks.0.fc.weight"]["shape"][0] = 30
    elif kind == "unread-param":
        manifest["parameters"]["unused.weight"] = {"shape": [4, 4], "dtype": "f32"}
    elif kind == "device-count":
        manifest["devices"].pop()
    elif kind == "rank-coords":
        manifest["devices"][1].update(tp=0, dp=1)
    elif kind == "global-batch":
        manifest["batch"]["global"] += 2
    elif kind == "bad-group":
        manifest["groups"]["tp"][1] = [2, 4]
    elif kind == "schedule-stages":
        manifest["schedule"]["stages"].pop()
    elif kind == "missing-slot":
        manifest["schedule"]["stages"][-1]["slots"].pop()
    elif kind == "dup-slot":
        slots = manifest["schedule"]["stages"][0]["slots"]
        slots[1] = dict(slots[0])
    elif kind == "virtual-stages":
        manifest["schedule"]["virtual_stages"] = 2
    elif kind == "no-batch-dim":
        manifest["inputs"][0]["batch_dim"] = None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out")
    ap.add_argument("--pp", type=int, default=2)
    ap.add_argument("--tp", type=int, default=2)
    ap.add_argument("--dp", type=int, default=2)
    ap.add_argument("--microbatches", type=int, default=2)
    ap.add_argument("--microbatch-size", type=int, default=2)
    ap.add_argument("--schedule", default="1f1b", choices=["gpipe", "1f1b", "interleaved"])
    ap.add_argument("--virtual-stages", type=int, default=None)
    ap.add_argument("--no-weights", action="store_true")
    ap.add_argument("--no-strategy", action="store_true")
    ap.add_argument("--damage", choices=DAMAGES)
    args = ap.parse_args()
    if args.virtual_stages is None:
        args.virtual_stages = 2 if args.schedule == "interleaved" else 1
    if args.pp * args.virtual_stages > len(LAYERS):
        sys.exit(f"at most {len(LAYERS)} chunks: the model has {len(LAYERS)} layers")
    pp, tp, dp = args.pp, args.tp, args.dp

    programs, chunks = build(args)
    if args.damage:
        damage_programs(args.damage, programs, args)

    shutil.rmtree(args.out, ignore_errors=True)
    os.makedirs(os.path.join(args.out, "programs"))
    if not args.no_weights:
        os.makedirs(os.path.join(args.out, "weights"))
    entries = {}
    for name, p in programs.items():
        inputs = [dict(b, phase=k) for k, ph in enumerate(p.phases) for b in ph["inputs"]]
        outputs = [dict(b, phase=k) for k, ph in enumerate(p.phases) for b in ph["outputs"]]
        doc = {"format": "cleave-program", "version": 1, "name": name, "stage": p.stage, "tp": p.tp,
               "arena_bytes": p.arena_bytes, "inputs": inputs, "outputs": outputs,
               "buffers": p.buffers, "phases": p.phases}
        with open(os.path.join(args.out, f"programs/{name}.json"), "w") as f:
            json.dump(doc, f, indent=1)
        weight_bytes = 4 * sum(prod(s) for s in p.weights.values())
        entry = {"file": f"programs/{name}.json", "stage": p.stage, "tp": p.tp,
                 "arena_bytes": p.arena_bytes, "weight_bytes": weight_bytes}
        if not args.no_weights:
            entry["weights"] = f"weights/{name}.safetensors"
            write_safetensors(os.path.join(args.out, entry["weights"]), p.weights)
        entries[name] = entry

    def rank(s, d, t):
        return s * dp * tp + d * tp + t

    strategy, predicted = strategy_and_predictions(args, chunks, programs)
    largest = max(programs.values(), key=lambda p: p.arena_bytes + entries[p.name]["weight_bytes"])
    predicted["memory_bytes"] = {"arena": largest.arena_bytes,
                                 "weights": entries[largest.name]["weight_bytes"],
                                 "total": largest.arena_bytes + entries[largest.name]["weight_bytes"]}
    g = dp * args.microbatches * args.microbatch_size
    manifest = {
        "format": "cleave-plan", "version": 1,
        "model": {"source": "mlp.pt", "weights": not args.no_weights},
        "inputs": [{"name": "x", "shape": [g, IN_FEATURES], "dtype": "f32", "batch_dim": 0}],
        "outputs": [{"name": "output_0", "shape": [g, HEAD], "dtype": "f32", "batch_dim": 0}],
        "mesh": {"pp": pp, "tp": tp, "dp": dp},
        "batch": {"global": g, "microbatch_size": args.microbatch_size, "microbatches": args.microbatches},
        "schedule": {"kind": args.schedule, "microbatches": args.microbatches,
                     "virtual_stages": args.virtual_stages,
                     "stages": [{"stage": s, "slots": schedule_slots(args.schedule, pp, args.virtual_stages,
                                                                     args.microbatches, s)}
                                for s in range(pp)]},
        "groups": {"tp": [[rank(s, d, t) for t in range(tp)] for s in range(pp) for d in range(dp)],
                   "dp": [[rank(s, d, t) for d in range(dp)] for s in range(pp) for t in range(tp)],
                   "pipeline": [[rank(s, d, t) for s in range(pp)] for d in range(dp) for t in range(tp)]},
        "devices": [{"rank": rank(s, d, t), "backend": "cpu", "stage": s, "tp": t, "dp": d,
                     "program": f"stage{s}_tp{t}"}
                    for s in range(pp) for d in range(dp) for t in range(tp)],
        "parameters": parameters(),
        "programs": entries,
        "predicted": predicted,
    }
    if args.damage:
        damage_manifest(args.damage, manifest)
    with open(os.path.join(args.out, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
    if not args.no_strategy:
        with open(os.path.join(args.out, "strategy.json"), "w") as f:
            json.dump(strategy, f, indent=1)


if __name__ == "__main__":
    main()
