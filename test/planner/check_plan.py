"""Checks on `cleave plan --json` strategies, for lit.

  check_plan.py structure STRATEGY.json LAYERS.txt [PIN ...]
      The strategy is well formed and consistent with itself and the model:
      format and version; tp·pp·dp = devices; dp·microbatch size·microbatches
      = global batch; pp stages of virtual_stages chunks each, which, read in
      pipeline order (chunk j of stage s is model chunk j·pp + s), hold every
      layer of LAYERS.txt (`cleave-opt -cleave-test-layer-groups` of the model)
      exactly once and in program order; one tensor_parallel entry per layer
      kind with its layer count; every stage within memory_budget_bytes, its
      memory total the sum of its categories; a positive predicted time;
      inference without gradients or optimizer state; layouts that name a
      real layout, all replicated when tp = 1. PINs are KEY=VALUE or KEY>VALUE
      with KEY a dotted path into the JSON (mesh.pp=2,
      schedule.virtual_stages>1).
  check_plan.py megatron STRATEGY.json
      The GPT block's split at tp > 1 is Megatron-LM's (column-parallel fused
      qkv, attention split by heads, row-parallel projections, one all-reduce
      per sub-block forward and backward), with a vocabulary-parallel
      embedding whose weight the head shares.

Each check prints a line ending in `ok` or `FAIL: why`; the exit status is 1
when any failed.
"""
import json
import re
import sys

LAYOUT = re.compile(r"replicated|partial|split\(\d+(, blocks=\d+)?\)")
LAYER_LINE = re.compile(r"^(.*): \d+ ops, \d+ param elements, kind (.*)$")


class Checker:
    def __init__(self):
        self.failed = False

    def check(self, name, good, why=""):
        self.failed |= not good
        print(f"{name}: {'ok' if good else 'FAIL: ' + why}")


def load(path):
    with open(path) as f:
        return json.load(f)


def load_layers(path):
    """[(layer, kind)] in program order, from -cleave-test-layer-groups."""
    with open(path) as f:
        return [m.groups() for m in map(LAYER_LINE.match, f) if m]


def lookup(strategy, dotted):
    value = strategy
    for key in dotted.split("."):
        value = value[key]
    return value


def pipeline_order(strategy):
    """Layer names in model-chunk order: chunk j of stage s is chunk j·pp + s."""
    pp = strategy["mesh"]["pp"]
    chunks = {}
    for stage in strategy["stages"]:
        layers = stage["layers"]
        at = 0
        for j, (first, last) in enumerate(stage["chunks"]):
            if at >= len(layers) or layers[at] != first or last not in layers[at:]:
                return None
            end = layers.index(last, at) + 1
            chunks[j * pp + stage["stage"]] = layers[at:end]
            at = end
        if at != len(layers):
            return None
    return [name for c in sorted(chunks) for name in chunks[c]]


def structure(strategy_path, layers_path, pins):
    s = load(strategy_path)
    model = load_layers(layers_path)
    c = Checker()
    c.check("format", s.get("format") == "cleave-strategy" and s.get("version") == 1,
            f"{s.get('format')} version {s.get('version')}")
    mesh, sched = s["mesh"], s["schedule"]
    c.check("mesh", mesh["tp"] * mesh["pp"] * mesh["dp"] == s["devices"],
            f"{mesh} on {s['devices']} devices")
    c.check("batch",
            mesh["dp"] * sched["microbatch_size"] * sched["microbatches"] == s["global_batch"],
            f"dp {mesh['dp']} x {sched['microbatch_size']} x {sched['microbatches']} "
            f"!= {s['global_batch']}")

    stages = s["stages"]
    v = sched["virtual_stages"]
    c.check("stages", [st["stage"] for st in stages] == list(range(mesh["pp"]))
            and all(len(st["chunks"]) == v for st in stages),
            f"{len(stages)} stages for pp={mesh['pp']}, chunks per stage "
            f"{[len(st['chunks']) for st in stages]} for v={v}")
    order = pipeline_order(s)
    expected = [name for name, _ in model]
    c.check("layers", order == expected,
            f"stages hold {order}, the model's layers are {expected}")
    c.check("recompute", all(set(st["recompute"]) <= set(st["layers"]) for st in stages),
            "a stage recomputes a layer it does not hold")

    kinds = {}
    for _, kind in model:
        kinds[kind] = kinds.get(kind, 0) + 1
    tp_kinds = {k["kind"]: k["layers"] for k in s["tensor_parallel"]}
    c.check("kinds", tp_kinds == kinds, f"tensor_parallel has {tp_kinds}, the model {kinds}")

    budget = s["memory_budget_bytes"]
    categories = ("parameters", "gradients", "optimizer_state", "activations", "comm_buffers",
                  "workspace")
    over = [st["stage"] for st in stages if st["memory"]["total"] > budget]
    c.check("budget", not over, f"stages {over} over {budget} B")
    sums = all(abs(sum(m[k] for k in categories) - m["total"]) <= 1e-9 * m["total"]
               for m in [st["memory"] for st in stages] + [s["predicted"]["memory"]])
    c.check("memory totals", sums, "a memory total is not the sum of its categories")
    predicted = s["predicted"]
    c.check("worst stage", predicted["memory"] == stages[predicted["worst_stage"]]["memory"]
            and all(st["memory"]["total"] <= predicted["memory"]["total"] for st in stages),
            f"worst_stage {predicted['worst_stage']} is not the fullest")
    c.check("time", predicted["step_seconds"] > 0, f"step_seconds {predicted['step_seconds']}")

    if s["mode"] == "infer":
        memories = [st["memory"] for st in stages] + [predicted["memory"]]
        c.check("inference memory",
                all(m["gradients"] == 0 and m["optimizer_state"] == 0 for m in memories)
                and s["data_parallel"]["sharding"] == "none",
                "inference holds gradients or optimizer state, or shards with ZeRO")

    layouts = [lay for k in s["tensor_parallel"] for op in k["ops"]
               for lay in op["results"] + list(op.get("weights", {}).values())]
    bad = [lay for lay in layouts if not LAYOUT.fullmatch(lay)]
    c.check("layouts", not bad, f"unknown layouts {bad}")
    if mesh["tp"] == 1:
        split = [lay for lay in layouts if lay != "replicated"]
        colls = [k["kind"] for k in s["tensor_parallel"] if k["collectives"]]
        c.check("tp=1 replicated", not split and not colls,
                f"layouts {split} and collectives in {colls} at tp=1")

    for pin in pins:
        key, op, want = re.fullmatch(r"([\w.]+)([=>])(.+)", pin).groups()
        have = lookup(s, key)
        good = str(have) == want if op == "=" else float(have) > float(want)
        c.check(pin, good, f"{key} is {have}")
    return not c.failed


def megatron(strategy_path):
    s = load(strategy_path)
    c = Checker()
    kinds = {k["kind"]: k for k in s["tensor_parallel"]}
    block = kinds["blocks.0"]
    ops = [(op["op"], op["results"], op.get("weights", {})) for op in block["ops"]]

    def the(op_text):
        found = [o for o in ops if o[0] == op_text]
        return found[0] if len(found) == 1 else (op_text, None, {})

    _, results, weights = the("cleave.linear @ blocks.0.attn.qkv")
    c.check("qkv column-parallel", results == ["split(2, blocks=3)"]
            and weights == {"blocks.0.attn.qkv.weight": "split(0, blocks=3)",
                            "blocks.0.attn.qkv.bias": "split(0, blocks=3)"},
            f"{results} {weights}")
    heads = [o for o in ops if o[0].split(" @ ")[0] in
             ("cleave.matmul", "cleave.softmax", "cleave.mul", "cleave.where")]
    c.check("attention by heads", len(heads) == 5 and all(o[1] == ["split(1)"] for o in heads),
            f"{heads}")
    _, results, weights = the("cleave.linear @ blocks.0.attn.proj")
    c.check("attn.proj row-parallel", results == ["partial"]
            and weights == {"blocks.0.attn.proj.weight": "split(1)",
                            "blocks.0.attn.proj.bias": "replicated"},
            f"{results} {weights}")
    _, results, weights = the("cleave.linear @ blocks.0.mlp.fc")
    c.check("mlp.fc column-parallel", results == ["split(2)"]
            and weights == {"blocks.0.mlp.fc.weight": "split(0)",
                            "blocks.0.mlp.fc.bias": "split(0)"},
            f"{results} {weights}")
    _, results, _ = the("cleave.gelu @ blocks.0.mlp")
    c.check("gelu split", results == ["split(2)"], f"{results}")
    _, results, weights = the("cleave.linear @ blocks.0.mlp.proj")
    c.check("mlp.proj row-parallel", results == ["partial"]
            and weights == {"blocks.0.mlp.proj.weight": "split(1)",
                            "blocks.0.mlp.proj.bias": "replicated"},
            f"{results} {weights}")
    adds = [o for o in ops if o[0] == "cleave.add @ blocks.0"]
    norms = [o for o in ops if o[0].startswith("cleave.layer_norm @")]
    c.check("residuals and norms replicated", len(adds) == 2 and len(norms) == 2
            and all(o[1] == ["replicated"] and set(o[2].values()) <= {"replicated"}
                    for o in adds + norms), f"{adds} {norms}")
    colls = sorted((k["pass"], k["collective"], k["before"]) for k in block["collectives"])
    c.check("block collectives", colls == [
        ("backward", "all-reduce", "cleave.linear @ blocks.0.attn.qkv"),
        ("backward", "all-reduce", "cleave.linear @ blocks.0.mlp.fc"),
        # Each sub-block's row-parallel output is summed before its dropout
        # and residual add, as Megatron-LM's bias-dropout-add does.
        ("forward", "all-reduce", "cleave.dropout @ blocks.0.attn.resid_drop"),
        ("forward", "all-reduce", "cleave.dropout @ blocks.0.mlp.drop")], f"{colls}")
    c.check("block count", block["layers"] == 24, f"{block['layers']} blocks")

    (emb,) = kinds["tok_emb"]["ops"]
    c.check("vocab-parallel embedding", emb["results"] == ["partial"]
            and emb["weights"] == {"tok_emb.weight": "split(0)"}, f"{emb}")
    (head,) = kinds["head"]["ops"]
    c.check("head shares the split embedding", head["weights"] == {"tok_emb.weight": "split(0)"}
            and head["results"] == ["split(2)"], f"{head}")
    return not c.failed


def explain_bands(explain_path, band):
    """--explain's runner-up lines: "X% slower" within the band (percent) are
    called indistinguishable, and no line outside it is."""
    band = float(band)
    within_ok, outside_ok, within = True, True, 0
    lines = open(explain_path).read().split("why the others lost:")[1].splitlines()
    for line in lines:
        m = re.search(r"([0-9.]+)% slower: (.*)", line)
        if not m:
            continue
        called = m.group(2).find("indistinguishable") >= 0
        if float(m.group(1)) <= band:
            within += 1
            within_ok &= called
        else:
            outside_ok &= not called
    print(f"runners-up within the band called indistinguishable: {within_ok}, outside it never: "
          f"{outside_ok}, some within: {within > 0}")
    return within_ok and outside_ok


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "structure":
        good = structure(sys.argv[2], sys.argv[3], sys.argv[4:])
    elif mode == "megatron":
        good = megatron(sys.argv[2])
    elif mode == "explain-bands":
        good = explain_bands(sys.argv[2], sys.argv[3])
    else:
        sys.exit(f"unknown mode {mode}")
    sys.exit(0 if good else 1)
