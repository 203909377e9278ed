#!/usr/bin/python3
"""Measured against predicted on this machine's ranks, per component (issue 28).

For each model and mesh it compiles a plan on a spec of this machine with one
device per core (`cleave profile --ranks 2`, run first unless --spec is
given), runs it on local ranks with one thread each (`cleave run --report-json`
for forward plans, `cleave train --report` for training steps), and prints the
measured step of the slowest rank next to the plan's prediction, then compute,
communication and waiting/bubble, each measured against predicted. A forward
pipeline repeated back to back overlaps one batch's drain with the next one's
fill, so its step is compared with the predicted step less the bubble.

Meshes are dot-joined parts: dp2, tp2, pp2 (1f1b for training, 4 microbatches), pp2.tp2, ... and "1" for one device. Plans with more ranks than
cores run oversubscribed and are marked so: their time measures time-slicing,
not the plan (docs/cost-model.md).

    /usr/bin/python3 bench/rank_validation.py [--spec SPEC.json] [--models gpt,zoo/resnet18]
        [--meshes 1,dp2,pp2,tp2,pp2.tp2] [--modes forward,train] [--repeat 21] [--trials 3]
        [--json FILE]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

ROOT = benchlib.ROOT
EXPORT = ["/usr/bin/python3", os.path.join(ROOT, "examples", "export.py")]


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"failed (exit {r.returncode}): {' '.join(cmd)}\n{r.stdout}")
    return r.stdout


def export(name, batch, train, work):
    """The model at `batch`: (model.pt, inputs or training data)."""
    stem = os.path.join(work, f"{name.replace('/', '-')}-{batch}{'-train' if train else ''}")
    os.makedirs(stem, exist_ok=True)
    if name.startswith("zoo/"):
        if train:
            return None
        run(["/usr/bin/python3", "-c", "import sys, zoo; zoo.export_one('classification', "
             "sys.argv[1], sys.argv[2], int(sys.argv[3]), False)", name[4:], stem, str(batch)],
            cwd=os.path.dirname(os.path.abspath(__file__)))
        return os.path.join(stem, "model.pt"), os.path.join(stem, "inputs.safetensors")
    model = os.path.join(stem, "model.pt")
    cmd = EXPORT + [name, "--config", "small", "--batch", str(batch), "-o", model]
    if train:
        data = os.path.join(stem, "data.safetensors")
        # Multi-rank training refuses dropout.
        run(cmd + ["--dropout", "0", "--train", "--loss-in-model", "cross_entropy", "--data",
                   data, "--samples", str(2 * batch)])
        return model, data
    run(cmd + ["--io", stem])
    return model, os.path.join(stem, "inputs.safetensors")


def mesh_flags(mesh, batch, train, microbatches):
    degrees = {"pp": 1, "tp": 1, "dp": 1}
    if mesh != "1":
        for part in mesh.split("."):
            degrees[part[:2]] = int(part[2:])
    n = degrees["pp"] * degrees["tp"] * degrees["dp"]
    flags = [f"--{k}={v}" for k, v in degrees.items()]
    per_replica = batch // degrees["dp"]
    if degrees["pp"] > 1:
        flags += ["--microbatch", str(max(1, per_replica // microbatches))]
        if train:
            flags += ["--schedule", "1f1b"]
    else:
        flags += ["--microbatch", str(per_replica)]
    if train:
        flags += ["--zero", "none"]
    return n, flags


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cleave", default=os.path.join(ROOT, "build", "bin", "cleave"))
    p.add_argument("--spec", help="cluster spec (default: cleave profile --ranks 2, now)")
    p.add_argument("--models", default="gpt:8,zoo/resnet18:4",
                   help="NAME:BATCH,... (examples/export.py names, or zoo/NAME)")
    p.add_argument("--meshes", default="1,dp2,pp2,tp2,pp2.tp2")
    p.add_argument("--modes", default="forward,train")
    p.add_argument("--repeat", type=int, default=21,
                   help="forward runs / training steps (the first is left out)")
    p.add_argument("--microbatches", type=int, default=4)
    p.add_argument("--trials", type=int, default=3,
                   help="runs of each plan; the one of median step is reported, with the "
                        "spread (slowest / fastest - 1) of all")
    p.add_argument("--work")
    p.add_argument("--json")
    a = p.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="cleave-rank-validation-")
    os.makedirs(work, exist_ok=True)
    cores = os.cpu_count()
    spec = a.spec
    if not spec:
        spec = os.path.join(work, "spec.json")
        print("profiling this machine (cleave profile --ranks 2) ...", file=sys.stderr)
        run([a.cleave, "profile", "--ranks", "2", "-o", spec])
    with open(spec) as f:
        spec_json = json.load(f)
    contention = spec_json.get("contention")
    print(f"machine: {benchlib.machine()}")
    print(f"spec: {spec_json['name']}, {spec_json['devices_per_node']} devices of "
          f"{spec_json['device']['name']}; contention: "
          + (f"memory {contention['memory_bandwidth'] / 1e9:.1f} GB/s each with "
             f"{contention['devices']} busy, compute x{contention['compute_scale']:.2f}"
             if contention else "none measured"))
    print(f"one thread per rank; measured = the slowest rank, mean of the runs after the "
          f"first, the median of {a.trials} trials (spread: slowest / fastest - 1); "
          f"error = (predicted - measured) / measured")
    header = (f"{'model':<16} {'mode':<7} {'mesh':<8} {'ranks':>5} | {'step ms':>8} {'pred':>8} "
              f"{'error':>7} | {'compute':>8} {'pred':>8} | {'comm':>7} {'pred':>7} | "
              f"{'wait':>6} {'bubble':>6} | {'spread':>6}")
    print(header)
    rows = []
    for item in a.models.split(","):
        name, batch = item.split(":")
        batch = int(batch)
        for mode in a.modes.split(","):
            train = mode == "train"
            exported = export(name, batch, train, work)
            if not exported:
                continue
            model, data = exported
            for mesh in a.meshes.split(","):
                n, flags = mesh_flags(mesh, batch, train, a.microbatches)
                tag = f"{name.replace('/', '-')}.{mode}.{mesh}"
                plan = os.path.join(work, f"plan.{tag}")
                report = os.path.join(work, f"report.{tag}.json")
                run([a.cleave, "compile", model, "--cluster", spec, "--devices", str(n),
                     "--global-batch", str(batch), "--mode", "train" if train else "infer",
                     "-o", plan] + flags)
                local = ["--local", str(n)] if n > 1 else []
                # The slowest rank of each trial; the trial of median step is kept.
                trials = []
                for _ in range(a.trials):
                    if train:
                        run([a.cleave, "train"] + local + [plan, "--data", data, "--steps",
                            str(a.repeat), "--threads", "1", "--report", report, "-q"])
                    else:
                        run([a.cleave, "run"] + local + [plan, "--inputs", data, "--outputs",
                            os.path.join(work, "out.safetensors"), "--repeat", str(a.repeat),
                            "--threads", "1", "--report-json", report])
                    with open(report) as f:
                        r = json.load(f)
                    if train:
                        ranks = r["ranks"] or [{"rank": 0, "step_seconds": r["mean_step_seconds"],
                                                "compute_seconds": r["mean_compute_seconds"],
                                                "communication_seconds":
                                                    r["mean_communication_seconds"]}]
                    else:
                        ranks = r["ranks"]
                    trials.append((max(ranks, key=lambda x: x["step_seconds"]), r["predicted"]))
                trials.sort(key=lambda t: t[0]["step_seconds"])
                slowest, pred = trials[len(trials) // 2]
                spread = (trials[-1][0]["step_seconds"] / trials[0][0]["step_seconds"] - 1
                          if len(trials) > 1 else 0.0)
                step = slowest["step_seconds"]
                wait = slowest.get("waiting_seconds",
                                   step - slowest["compute_seconds"]
                                   - slowest["communication_seconds"])
                # Forward runs repeated back to back overlap one batch's drain
                # with the next one's fill (no optimizer step holds the stages
                # together): their step is the steady state, the predicted step
                # less its fill-and-drain bubble. A training step pays it.
                compared = pred["step_seconds"]
                if not train and "pp" in mesh:
                    compared -= pred.get("bubble_seconds") or 0
                error = (compared - step) / step
                over = n > cores
                row = {"model": name, "batch": batch, "mode": mode, "mesh": mesh, "ranks": n,
                       "oversubscribed": over, "measured": slowest, "predicted": pred,
                       "predicted_step_compared": compared, "error": error,
                       "trial_steps": [t[0]["step_seconds"] for t in trials], "spread": spread}
                rows.append(row)
                print(f"{name:<16} {mode:<7} {mesh:<8} {n:>5} | {step * 1e3:>8.2f} "
                      f"{compared * 1e3:>8.2f} {100 * error:>+6.1f}% | "
                      f"{slowest['compute_seconds'] * 1e3:>8.2f} "
                      f"{pred['compute_seconds'] * 1e3:>8.2f} | "
                      f"{slowest['communication_seconds'] * 1e3:>7.2f} "
                      f"{pred['communication_seconds'] * 1e3:>7.2f} | {wait * 1e3:>6.2f} "
                      f"{(pred.get('bubble_seconds') or 0) * 1e3:>6.2f} | {100 * spread:>5.1f}%"
                      f"{'  (oversubscribed)' if over else ''}", flush=True)
    fair = [r for r in rows if not r["oversubscribed"]]
    if fair:
        worst = max(fair, key=lambda r: abs(r["error"]))
        within = sum(abs(r["error"]) <= 0.10 for r in fair)
        mean_signed = sum(r["error"] for r in fair) / len(fair)
        print(f"\none rank per core: {within} of {len(fair)} within 10 %, worst "
              f"{100 * worst['error']:+.1f} % ({worst['model']} {worst['mode']} {worst['mesh']}), "
              f"mean signed {100 * mean_signed:+.1f} %")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": benchlib.machine(), "spec": spec_json["name"], "rows": rows},
                      f, indent=1)


if __name__ == "__main__":
    main()
