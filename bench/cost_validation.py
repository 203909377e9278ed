#!/usr/bin/env python3
"""Validates the cost model on this machine: predicted against measured.

For each example model and batch size it exports the model, compiles it for
one CPU device, runs it (`cleave run --repeat N --timing`, median forward
time) and asks `cleave cost` for its prediction on a spec measured by
`cleave profile` in the same script (or the one given with --spec). It prints
the forward time and the memory of both, and the relative errors.

A model named zoo/NAME is torchvision's classification model NAME, traced by
bench/zoo.py's exporter (random weights, eval mode, its own input size):
models nobody here wrote, which the cost model was not tuned to.

usage: /usr/bin/python3 bench/cost_validation.py [--spec SPEC.json] [--repeat N]
           [--threads N] [--models gpt-bench:1,zoo/mobilenet_v2:2,...] [--cleave PATH]
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


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--spec", help="cluster spec to predict with (default: run cleave profile now)")
    p.add_argument("--repeat", type=int, default=10, help="measured forward runs per model")
    p.add_argument("--threads", type=int, default=0, help="threads for cleave run (default: all)")
    p.add_argument("--models", default=DEFAULT_MODELS, help="NAME:BATCH,... (default: %(default)s)")
    p.add_argument("--cleave", default=CLEAVE, help="the cleave binary (default: %(default)s)")
    args = p.parse_args()
    cleave = os.path.abspath(args.cleave)
    if not os.access(cleave, os.X_OK):
        sys.exit("build cleave first: bash scripts/build.sh")

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
              f" {'pred. memory':>13} {'allocated':>11} {'error':>7}")
        rows = []
        for item in args.models.split(","):
            name, batch = item.split(":")
            stem = name.replace("/", "-")
            model = os.path.join(work, f"{stem}-{batch}.pt")
            plan = os.path.join(work, f"{stem}-{batch}.plan")
            io = os.path.join(work, f"{stem}-{batch}")
            if name.startswith("zoo/"):
                # bench/zoo.py's exporter writes DIR/model.pt and DIR/inputs.safetensors.
                os.makedirs(io)
                run([sys.executable, "-c", "import sys, zoo; zoo.export_one('classification', "
                     "sys.argv[1], sys.argv[2], int(sys.argv[3]), False)",
                     name.removeprefix("zoo/"), io, batch], cwd=os.path.dirname(__file__))
                model = os.path.join(io, "model.pt")
            else:
                export = EXPORT + [name, "-o", model, "--batch", batch, "--io", io]
                if name in ("gpt", "bert", "vit", "llama", "mlp", "resnet18"):
                    export += ["--config", "small"]
                run(export)
            run([cleave, "compile", model, "-o", plan])
            cmd = [cleave, "run", plan, "--inputs", os.path.join(io, "inputs.safetensors"),
                   "--outputs", os.path.join(work, "out.safetensors"), "--repeat",
                   str(args.repeat), "--timing"]
            if args.threads:
                cmd += ["--threads", str(args.threads)]
            measured_out = run(cmd).stderr
            m = re.search(r"forward median ([0-9.]+) s", measured_out)
            if not m:
                sys.exit(f"no forward time in cleave run's output:\n{measured_out}")
            measured = float(m.group(1))
            cost = json.loads(run([cleave, "cost", model, "--cluster", spec, "--json"]).stdout)
            predicted = cost["total"]["forward_seconds"]
            with open(os.path.join(plan, "manifest.json")) as f:
                (program,) = json.load(f)["programs"].values()
            allocated = program["arena_bytes"] + program["weight_bytes"]
            predicted_memory = cost["memory"]["inference"]["total"]
            time_error = (predicted - measured) / measured
            memory_error = (predicted_memory - allocated) / allocated
            rows.append((name, batch, time_error, memory_error))
            print(f"{name:<24} {batch:>5} {predicted * 1e3:>8.2f}ms {measured * 1e3:>8.2f}ms"
                  f" {100 * time_error:>+6.1f}% {predicted_memory / 2**20:>9.1f} MiB"
                  f" {allocated / 2**20:>7.1f} MiB {100 * memory_error:>+6.2f}%", flush=True)
        worst = max(abs(r[2]) for r in rows)
        within = sum(abs(r[2]) <= 0.15 for r in rows)
        print(f"\nforward time: {within}/{len(rows)} within 15 %, worst {100 * worst:.1f} %;"
              f" memory: worst {100 * max(abs(r[3]) for r in rows):.2f} %")


if __name__ == "__main__":
    main()
