"""Training with spilling against training with everything on the device, on this machine.

Exports a model whose layers are many and alike (examples/export.py deep_mlp, or any --model
of the exporter), compiles it twice for one CPU device: at --budget, where the planner spills
layers to host memory, and with the spec's whole memory, where everything stays on the device.
Trains each plan for --steps steps, --repeats times, alternating, and prints per plan the
median step time, the device and host memory `cleave train --report` measured, and for the
spilled plan the bytes its copies moved, their time and the overlap achieved
(docs/training.md, "Spilling"); then the step-time ratio of the two, measured in this one run.

usage: /usr/bin/python3 bench/spill_train.py [--model deep_mlp --config small]
           [--batch 8] [--budget 4MiB] [--steps 30] [--repeats 5]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ROOT, machine, timed_run  # noqa: E402


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--model", default="deep_mlp")
    p.add_argument("--config", default="small")
    p.add_argument("--budget", default="4MiB", help="the spilled plan's --mem-per-device")
    p.add_argument("--batch", type=int, default=8, help="samples per step")
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--cleave", default=os.path.join(ROOT, "build", "bin", "cleave"))
    p.add_argument("--cluster", default=os.path.join(ROOT, "examples", "clusters", "cpu-2core.json"))
    a = p.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        model, data = os.path.join(tmp, "m.pt"), os.path.join(tmp, "m.safetensors")
        timed_run([sys.executable, os.path.join(ROOT, "examples", "export.py"), a.model,
                   "--config", a.config, "--train", "--batch", str(a.batch), "-o", model,
                   "--data", data, "--samples", str(2 * a.batch), "--labels", "cross_entropy"])
        common = [a.cleave, "compile", model, "--cluster", a.cluster, "--devices", "1",
                  "--global-batch", str(a.batch), "--mode", "train", "--loss", "cross_entropy",
                  "--lr", "0.01", "--precision", "fp32"]
        plans = {"spilled": os.path.join(tmp, "spilled"), "resident": os.path.join(tmp, "resident")}
        timed_run(common + ["--mem-per-device", a.budget, "-o", plans["spilled"]])
        timed_run(common + ["--spill", "none", "-o", plans["resident"]])
        steps = {name: [] for name in plans}
        reports = {}
        for _ in range(a.repeats):
            for name, plan in plans.items():
                report = os.path.join(tmp, name + ".report.json")
                timed_run([a.cleave, "train", plan, "--data", data, "--steps", str(a.steps),
                           "--report", report, "-q"])
                with open(report) as f:
                    reports[name] = json.load(f)
                # The first steps warm caches and the allocator: the median of the rest.
                times = [s["seconds"] for s in reports[name]["steps"]][2:]
                steps[name].append(statistics.median(times))

    print(f"machine: {machine(load=True)}")
    print(f"model: {a.model} --config {a.config}, batch {a.batch}, budget {a.budget}, one CPU device ({os.path.basename(a.cluster)}), "
          f"{a.steps} steps x {a.repeats} runs per plan, alternating")
    for name in plans:
        r = reports[name]
        m = r["memory_bytes"]
        line = (f"{name:9s} step {statistics.median(steps[name]) * 1e3:8.3f} ms "
                f"(runs {min(steps[name]) * 1e3:.3f}..{max(steps[name]) * 1e3:.3f}), device "
                f"{m['device_total'] / 2**20:.2f} MiB, host {m.get('host', 0) / 2**20:.2f} MiB")
        if "spill" in r:
            s = r["spill"]
            line += (f"; copies {(s['prefetch_bytes'] + s['spill_bytes']) / 2**20 / len(r['steps']):.1f}"
                     f" MiB/step, copy {s['copy_seconds'] * 1e3 / len(r['steps']):.3f} ms/step, "
                     f"stall {s['stall_seconds'] * 1e3 / len(r['steps']):.3f} ms/step, "
                     f"overlap {s['overlap']:.2f}")
        print(line)
    ratio = statistics.median(steps["spilled"]) / statistics.median(steps["resident"])
    budget = reports["spilled"]["memory_bytes"].get("budget")
    print(f"spilled / resident step time: {ratio:.2f}x, the spilled plan's device memory within "
          f"{budget} bytes")


if __name__ == "__main__":
    main()
