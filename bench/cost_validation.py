#!/usr/bin/env python3
"""Validates the cost model on this machine: predicted against measured.

For each example model and batch size it exports the model, compiles it for
one CPU device, runs it (`cleave run --repeat N --timing`, median forward
time) and asks `cleave cost` for its prediction on a spec measured by
`cleave profile` in the same script (or the one given with --spec). It prints
the forward time and the memory of both, and the relative errors.

A model named zoo/NAME is torchvision's classification model NAME, traced by
bench/zoo.py's exporter (random weights, eval mode, its own input size):
models nobody here wrote, which the cost model was not tuned to; `--models
zoo` is every model of bench/zoo.py's classification list (--max-params).

With --kernels, the measured run also reports each instruction's median time
(`cleave run --roofline`) and `cleave cost --kernels` its prediction; the two
join per kernel (op class and kernel name), and the script ends with a table
of where the predictions miss, summed over every model, and each model's
kernel that misses by the most time. --json FILE writes every row.

usage: /usr/bin/python3 bench/cost_validation.py [--spec SPEC.json] [--repeat N] [--rounds R]
           [--threads N] [--models gpt-bench:1,zoo/mobilenet_v2:2,...|zoo[:BATCH]]
           [--max-params M] [--kernels] [--json FILE] [--cleave PATH]
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

from benchlib import machine

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLEAVE = os.path.join(ROOT, "build", "bin", "cleave")
EXPORT = [sys.executable, os.path.join(ROOT, "examples", "export.py")]
DEFAULT_MODELS = ("gpt-bench:1,gpt-bench:4,gpt-bench:8,gpt-bench:16,gpt:8,gpt:32,"
                  "resnet50:1,resnet50:8")


def run(cmd, **kw):
    result = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if result.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{result.stderr}")
    return result


def zoo_models(batch, max_params):
    """Every classification model of bench/zoo.py's list up to max_params million parameters,
    smallest first, as zoo/NAME:BATCH."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import zoo
    names = zoo.model_names("classification")
    sizes = {n: zoo.model_size("classification", n) for n in names}
    names = sorted((n for n in names if sizes[n] <= max_params * 1e6), key=lambda n: sizes[n])
    return [f"zoo/{n}:{batch}" for n in names]


def kernel_rows(predicted_kernels, roofline):
    """Predicted and measured forward seconds per (class, kernel)."""
    rows = {}
    for k in predicted_kernels:
        rows[(k["class"], k["kernel"])] = {"predicted": k["forward_seconds"], "measured": 0.0,
                                           "calls": k["calls"]}
    for c in roofline["classes"]:
        for k in c.get("kernels", []):
            row = rows.setdefault((c["class"], k["kernel"]),
                                  {"predicted": 0.0, "measured": 0.0, "calls": k["calls"]})
            row["measured"] += k["seconds"]
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--spec", help="cluster spec to predict with (default: run cleave profile now)")
    p.add_argument("--repeat", type=int, default=10, help="measured forward runs per model")
    p.add_argument("--threads", type=int, default=0, help="threads for cleave run (default: all)")
    p.add_argument("--models", default=DEFAULT_MODELS,
                   help="NAME:BATCH,... or zoo[:BATCH] for the whole classification zoo "
                        "(default: %(default)s)")
    p.add_argument("--max-params", type=float, default=100,
                   help="with --models zoo: models up to this many million parameters "
                        "(default: %(default)s)")
    p.add_argument("--kernels", action="store_true",
                   help="also predicted against measured time per kernel (cleave run --roofline)")
    p.add_argument("--rounds", type=int, default=1,
                   help="measure every model this many times, one pass over the list each, and "
                        "keep each model's fastest: this VM's speed drifts for minutes at a time "
                        "(default: %(default)s)")
    p.add_argument("--json", help="write every row (and with --kernels each kernel) to this file")
    p.add_argument("--cleave", default=CLEAVE, help="the cleave binary (default: %(default)s)")
    args = p.parse_args()
    cleave = os.path.abspath(args.cleave)
    if not os.access(cleave, os.X_OK):
        sys.exit("build cleave first: bash scripts/build.sh")
    items = args.models.split(",")
    if items[0].split(":")[0] == "zoo" and len(items) == 1:
        items = zoo_models(items[0].split(":")[1] if ":" in items[0] else "2", args.max_params)

    with tempfile.TemporaryDirectory() as work:
        spec = args.spec
        if not spec:
            spec = os.path.join(work, "spec.json")
            print("profiling this machine (cleave profile) ...", file=sys.stderr)
            cmd = [cleave, "profile", "-o", spec]
            if args.threads:
                cmd += ["--threads", str(args.threads)]
            subprocess.run(cmd, check=True)
        with open(spec) as f:
            spec_json = json.load(f)
        print(f"machine: {machine()}")
        print(f"spec: {spec_json['name']} ({spec_json['device']['name']})")
        print(f"{'model':<24} {'batch':>5} {'predicted':>10} {'measured':>10} {'error':>7}"
              f" {'pred. memory':>13} {'allocated':>11} {'error':>7}"
              + ("  most missed kernel" if args.kernels else ""))
        rows = {}
        for round_index in range(args.rounds):
            if args.rounds > 1:
                print(f"round {round_index + 1} of {args.rounds}", flush=True)
            for item in items:
                row = measure(item, work, spec, cleave, args, exported=round_index > 0)
                kept = rows.get(item)
                if kept is None or row["measured_seconds"] < kept["measured_seconds"]:
                    rows[item] = row
        rows = list(rows.values())
        if args.rounds > 1:
            print(f"each model's fastest of {args.rounds} rounds:")
            for row in rows:
                print_row(row)
        worst = max(abs(r["error"]) for r in rows)
        within = sum(abs(r["error"]) <= 0.15 for r in rows)
        within20 = sum(abs(r["error"]) <= 0.20 for r in rows)
        print(f"\nforward time: {within}/{len(rows)} within 15 %, {within20}/{len(rows)} within"
              f" 20 %, worst {100 * worst:.1f} %; memory: worst"
              f" {100 * max(abs(r['memory_error']) for r in rows):.2f} %")
        if args.kernels:
            print_kernel_summary(rows)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"machine": machine(), "spec": spec_json["name"],
                           "device": spec_json["device"]["name"], "rows": rows}, f, indent=1)


def measure(item, work, spec, cleave, args, exported):
    """Exports (once), compiles and runs one NAME:BATCH; its row."""
    name, batch = item.split(":")
    stem = name.replace("/", "-")
    model = os.path.join(work, f"{stem}-{batch}.pt")
    plan = os.path.join(work, f"{stem}-{batch}.plan")
    io = os.path.join(work, f"{stem}-{batch}")
    if name.startswith("zoo/"):
        # bench/zoo.py's exporter writes DIR/model.pt and DIR/inputs.safetensors.
        os.makedirs(io, exist_ok=True)
        if not exported:
            run([sys.executable, "-c", "import sys, zoo; zoo.export_one('classification', "
                 "sys.argv[1], sys.argv[2], int(sys.argv[3]), False)",
                 name.removeprefix("zoo/"), io, batch], cwd=os.path.dirname(__file__))
        model = os.path.join(io, "model.pt")
    else:
        export = EXPORT + [name, "-o", model, "--batch", batch, "--io", io]
        if name in ("gpt", "bert", "vit", "llama", "mlp", "resnet18"):
            export += ["--config", "small"]
        if not exported:
            run(export)
    if not exported:
        run([cleave, "compile", model, "-o", plan])
    roofline_json = os.path.join(work, "roofline.json")
    cmd = [cleave, "run", plan, "--inputs", os.path.join(io, "inputs.safetensors"),
           "--outputs", os.path.join(work, "out.safetensors"), "--repeat",
           str(args.repeat), "--timing"]
    if args.kernels:
        # Each instruction timed too (one clock read each): the forward's median
        # includes that.
        cmd += ["--roofline", spec, "--roofline-json", roofline_json]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    measured_out = run(cmd).stderr
    m = re.search(r"forward median ([0-9.]+) s", measured_out)
    if not m:
        sys.exit(f"no forward time in cleave run's output:\n{measured_out}")
    measured = float(m.group(1))
    cost_cmd = [cleave, "cost", model, "--cluster", spec, "--json"]
    if args.kernels:
        cost_cmd.append("--kernels")
    cost = json.loads(run(cost_cmd).stdout)
    predicted = cost["total"]["forward_seconds"]
    with open(os.path.join(plan, "manifest.json")) as f:
        (program,) = json.load(f)["programs"].values()
    allocated = program["arena_bytes"] + program["weight_bytes"]
    predicted_memory = cost["memory"]["inference"]["total"]
    time_error = (predicted - measured) / measured
    memory_error = (predicted_memory - allocated) / allocated
    row = {"model": name, "batch": int(batch), "predicted_seconds": predicted,
           "measured_seconds": measured, "error": time_error,
           "predicted_memory": predicted_memory, "allocated": allocated,
           "memory_error": memory_error}
    missed = ""
    if args.kernels:
        with open(roofline_json) as f:
            roofline = json.load(f)
        kernels = kernel_rows(cost["kernels"], roofline)
        row["kernels"] = [{"class": c, "kernel": k, **v}
                          for (c, k), v in sorted(kernels.items())]
        (c, k), v = max(kernels.items(),
                        key=lambda kv: abs(kv[1]["predicted"] - kv[1]["measured"]))
        missed = (f"  {k} ({c}) {v['predicted'] * 1e3:.2f} ms predicted,"
                  f" {v['measured'] * 1e3:.2f} measured")
    row["missed"] = missed
    print_row(row)
    return row


def print_row(row):
    print(f"{row['model']:<24} {row['batch']:>5} {row['predicted_seconds'] * 1e3:>8.2f}ms"
          f" {row['measured_seconds'] * 1e3:>8.2f}ms {100 * row['error']:>+6.1f}%"
          f" {row['predicted_memory'] / 2**20:>9.1f} MiB {row['allocated'] / 2**20:>7.1f} MiB"
          f" {100 * row['memory_error']:>+6.2f}%{row['missed']}", flush=True)


def print_kernel_summary(rows):
    """Predicted against measured per kernel, summed over every model: where the misses are."""
    total = {}
    for r in rows:
        for k in r["kernels"]:
            t = total.setdefault((k["class"], k["kernel"]),
                                 {"predicted": 0.0, "measured": 0.0, "calls": 0, "models": 0})
            t["predicted"] += k["predicted"]
            t["measured"] += k["measured"]
            t["calls"] += k["calls"]
            t["models"] += 1
    measured_all = sum(t["measured"] for t in total.values())
    print(f"\nper kernel over {len(rows)} models (sums of each model's forward):")
    print(f"{'class':<20} {'kernel':<22} {'models':>6} {'calls':>6} {'predicted':>10}"
          f" {'measured':>10} {'error':>7} {'share':>6}")
    for (c, k), t in sorted(total.items(), key=lambda kv: -kv[1]["measured"]):
        error = (t["predicted"] / t["measured"] - 1) if t["measured"] > 0 else float("nan")
        print(f"{c:<20} {k:<22} {t['models']:>6} {t['calls']:>6} {t['predicted'] * 1e3:>8.1f}ms"
              f" {t['measured'] * 1e3:>8.1f}ms {100 * error:>+6.1f}%"
              f" {100 * t['measured'] / measured_all:>5.1f}%")


if __name__ == "__main__":
    main()
