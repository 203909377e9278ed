"""A multi-model job's makespan against training its models one after another, measured here.

Exports four models (two learning rates of a deep MLP, an MLP with SGD, a small GPT) and trains
them on --devices local CPU ranks three ways, each timed by its wall clock in this one script:

  job         `cleave compile --job` + `cleave train --job --local N`: the joint LRTF schedule
              (with a rank for every model: one model per rank, whole);
  sequential  each model compiled for all N ranks with its best plan (`cleave compile --cluster
              --devices N --mode train`) and trained with `--local N`, one after another;
  sliced      the job on N/2 ranks, where models share ranks in slices (shows the rounds' cost).

Prints each run's wall time, and inside the runtime the job's measured makespan (its report)
against the sequential runs' steps summed (their reports: process starts and plan loading left
out), the predicted makespan, and the ratios job / sequential (the issue's goal: at most 0.6).

usage: /usr/bin/python3 bench/job_makespan.py [--devices 4] [--steps 30] [--repeats 3]
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from benchlib import ROOT, machine, timed_run  # noqa: E402

MODELS = [  # name, export args, global batch, job fields
    ("deep_lr0.01", ["deep_mlp", "--config", "small", "--labels", "cross_entropy"], 8,
     {"loss": "cross_entropy", "lr": 0.01}),
    ("deep_lr0.003", ["deep_mlp", "--config", "small", "--labels", "cross_entropy"], 8,
     {"loss": "cross_entropy", "lr": 0.003}),
    ("mlp_sgd", ["mlp", "--config", "small", "--dropout", "0", "--labels", "cross_entropy"], 8,
     {"loss": "cross_entropy", "optimizer": "sgd", "lr": 0.05, "momentum": 0.9}),
    ("gpt", ["gpt", "--config", "small", "--dropout", "0", "--loss-in-model", "cross_entropy"], 8,
     {"lr": 0.003}),
]


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--devices", type=int, default=4)
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--cleave", default=os.path.join(ROOT, "build", "bin", "cleave"))
    p.add_argument("--cluster", default=os.path.join(ROOT, "examples", "clusters", "cpu-2core.json"))
    a = p.parse_args()
    cleave, n = a.cleave, a.devices

    with tempfile.TemporaryDirectory() as tmp:
        job = {"format": "cleave-job", "version": 1, "models": []}
        exported = {}
        for name, args, batch, fields in MODELS:
            key = " ".join(args)
            if key not in exported:
                stem = os.path.join(tmp, f"m{len(exported)}")
                labels = args[args.index("--labels"):args.index("--labels") + 2] if "--labels" in args else []
                rest = [x for x in args if x not in labels]
                timed_run([sys.executable, os.path.join(ROOT, "examples", "export.py"), *rest,
                           "--train", "--batch", str(batch), "-o", stem + ".pt",
                           "--data", stem + ".safetensors", "--samples", str(2 * batch), *labels])
                exported[key] = stem
            stem = exported[key]
            job["models"].append({"name": name, "model": stem + ".pt", "data": stem + ".safetensors",
                                  "global_batch": batch, "steps": a.steps, **fields})
        job_file = os.path.join(tmp, "job.json")
        with open(job_file, "w") as f:
            json.dump(job, f)

        def compile_job(devices, out):
            timed_run([cleave, "compile", "--job", job_file, "--cluster", a.cluster,
                       "--devices", str(devices), "-o", out])

        compile_job(n, os.path.join(tmp, "job"))
        compile_job(max(1, n // 2), os.path.join(tmp, "job_sliced"))
        sequential_plans = []
        for m in job["models"]:
            out = os.path.join(tmp, "all_" + m["name"])
            cmd = [cleave, "compile", m["model"], "--cluster", a.cluster, "--devices", str(n),
                   "--global-batch", str(m["global_batch"]), "--mode", "train", "--precision", "fp32",
                   "-o", out]
            for key, flag in (("loss", "--loss"), ("optimizer", "--optimizer"), ("lr", "--lr"),
                              ("momentum", "--momentum")):
                if key in m:
                    cmd += [flag, str(m[key])]
            timed_run(cmd)
            sequential_plans.append((m, out))

        walls = {"job": [], "sequential": [], "sliced": []}
        # Inside the runtime: the job's measured makespan; the sequential runs' steps summed.
        inside = {"job": [], "sequential": [], "sliced": []}
        report = None
        for r in range(a.repeats):
            for which in walls:
                start = time.perf_counter()
                if which == "sequential":
                    stepping = 0.0
                    for m, plan in sequential_plans:
                        rep = os.path.join(tmp, f"report_seq_{m['name']}.json")
                        timed_run([cleave, "train", "--local", str(n), plan, "--data", m["data"],
                                   "--steps", str(a.steps), "--report", rep, "-q"])
                        with open(rep) as f:
                            stepping += sum(s["seconds"] for s in json.load(f)["steps"])
                    inside["sequential"].append(stepping)
                else:
                    out = os.path.join(tmp, f"run_{which}_{r}")
                    devices = n if which == "job" else max(1, n // 2)
                    rep = os.path.join(tmp, f"report_{which}_{r}.json")
                    timed_run([cleave, "train", "--job", os.path.join(tmp, "job" if which == "job" else "job_sliced"),
                               "--out", out, "--local", str(devices), "--report", rep, "-q"])
                    with open(rep) as f:
                        inside[which].append(json.load(f)["makespan_seconds"])
                    if which == "job":
                        with open(rep) as f:
                            report = json.load(f)
                walls[which].append(time.perf_counter() - start)

    print(f"machine: {machine(load=True)}")
    print(f"job: {len(MODELS)} models x {a.steps} steps, {n} local CPU ranks, {a.repeats} runs each, "
          f"interleaved; wall clock of the whole command, process start included")
    for which, values in walls.items():
        print(f"  {which:10s} {statistics.median(values):7.2f} s (runs {min(values):.2f}..{max(values):.2f})")
    print(f"  job report: makespan {report['makespan_seconds']:.2f} s inside the runtime, "
          f"predicted {report['predicted']['makespan_seconds']:.3f} s")
    print(f"  inside the runtime: job makespan {statistics.median(inside['job']):.2f} s, sequential "
          f"steps {statistics.median(inside['sequential']):.2f} s, sliced makespan "
          f"{statistics.median(inside['sliced']):.2f} s: job / sequential "
          f"{statistics.median(inside['job']) / statistics.median(inside['sequential']):.2f}x")
    print(f"job / sequential: {statistics.median(walls['job']) / statistics.median(walls['sequential']):.2f}x "
          f"(goal: at most 0.6); sliced on {max(1, n // 2)} ranks / job on {n}: "
          f"{statistics.median(walls['sliced']) / statistics.median(walls['job']):.2f}x")


if __name__ == "__main__":
    main()
