#!/usr/bin/python3
"""Benchmark: data-parallel training on this machine, measured against the plan's prediction
(issue 19).

    /usr/bin/python3 bench/dp_train.py [--model gpt] [--config small] [--batch 8]
        [--ranks 1,2] [--zero none] [--pipelines 2:gpipe,2:1f1b] [--meshes tp2,tp2.dp2]
        [--microbatches 4] [--steps 20] [--cluster examples/clusters/cpu-2core.json] [--work DIR] [--json FILE]

Exports the model once (examples/export.py, training mode, dropout 0, its loss computed in the
model), then for each rank count N and ZeRO level Z (--zero: a comma list of none, optimizer,
gradients; ZeRO applies to N > 1) compiles `cleave compile --cluster SPEC --devices N --dp N
--zero Z --mode train` and runs `cleave train --local N PLAN --steps S --report R` (one
process for N = 1), ranks sharing the machine's cores (`cleave train` gives each rank
cores/N threads). Prints per run: the measured step (mean of the steps after the first, from the
report; the slowest rank's), its compute (kernels) and communication (collectives) time, each
next to the plan's prediction, and the memory each rank allocated next to the plan's prediction
(each rank's own program's; the table shows the largest). --pipelines adds runs with P stages
under SCHEDULE, one rank per stage, the batch in --microbatches microbatches, and the
predicted bubble. --meshes adds runs on meshes written as dot-joined parts: ppN, tpN, dpN
(ZeRO-1 when dp > 1), and a schedule (gpipe, 1f1b, interleaved: two chunks per stage) with pp;
the planner chooses the tensor splits by the cluster's costs. The cluster spec describes one device of all the machine's cores; with N
ranks each rank has 1/N of them, which the prediction (N devices of the spec's speed) does not
know: the table says so where it misses.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "build", "bin")


def run(cmd, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **kw)
    if r.returncode != 0:
        print(" ".join(cmd))
        print(r.stdout)
        sys.exit(f"failed with exit {r.returncode}")
    return r.stdout


def tp_collectives(plan):
    """Tensor-parallel collectives per step on tp index 0 of stage 0: what the split costs."""
    with open(os.path.join(plan, "manifest.json")) as f:
        manifest = json.load(f)
    with open(os.path.join(plan, manifest["programs"][manifest["devices"][0]["program"]]["file"])) as f:
        program = json.load(f)
    return sum(1 for ph in program["phases"] for i in ph["instructions"]
               if i.get("attrs", {}).get("group") == "tp")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="gpt")
    p.add_argument("--config", default="small")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--ranks", default="1,2")
    p.add_argument("--zero", default="none")
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--pipelines", default="",
                   help="also pipelined runs: a comma list of STAGES:SCHEDULE (e.g. 2:gpipe,2:1f1b)")
    p.add_argument("--meshes", default="",
                   help="comma list of meshes such as tp2, tp2.dp2, pp2.tp2.interleaved, dp1.recompute "
                        "(.recompute: every layer recomputed in backward)")
    p.add_argument("--microbatches", type=int, default=4,
                   help="microbatches per step of the pipelined runs")
    p.add_argument("--cluster", default=os.path.join(ROOT, "examples", "clusters", "cpu-2core.json"))
    p.add_argument("--work")
    p.add_argument("--json")
    a = p.parse_args()
    work = a.work or tempfile.mkdtemp(prefix="cleave-dp-train-")
    os.makedirs(work, exist_ok=True)
    env = dict(os.environ, PATH=BIN + os.pathsep + os.environ.get("PATH", ""))
    model = os.path.join(work, f"{a.model}.pt")
    data = os.path.join(work, f"{a.model}.safetensors")
    # Data-parallel training refuses dropout: models that have it export without.
    dropout = ["--dropout", "0"] if a.model in ("gpt", "bert-cls", "vit") else []
    run(["/usr/bin/python3", os.path.join(ROOT, "examples", "export.py"), a.model, "--config",
         a.config] + dropout + ["--train", "--batch", str(a.batch), "--loss-in-model",
         "cross_entropy", "-o", model, "--data", data, "--samples", str(2 * a.batch)], env=env)
    print(f"machine: {benchlib.machine()}")
    print(f"model: {a.model} --config {a.config}, global batch {a.batch}, AdamW, {a.steps} steps "
          f"(the first left out of the mean)")
    print(f"{'ranks':>5} {'mesh':>13} | {'step ms':>8} {'pred':>7} {'ratio':>5} | {'compute':>8} {'pred':>7} | "
          f"{'comm':>7} {'pred':>7} | {'bubble':>6} | {'MiB/rank':>8} {'pred':>7}")
    rows = []
    runs = [(n, z, None) for n in [int(x) for x in a.ranks.split(",")] for z in a.zero.split(",")
            if n > 1 or z == "none"]
    runs += [(int(spec.split(":")[0]), "none", spec.split(":")[1])
             for spec in a.pipelines.split(",") if spec]
    runs += [(None, "none", spec) for spec in a.meshes.split(",") if spec]
    for n, zero, schedule in runs:
        if n is None:
            # A mesh such as pp2.tp2.interleaved: the planner splits by the cluster's costs.
            label, degrees, schedule = schedule, {"pp": 1, "tp": 1, "dp": 1}, None
            recompute = False
            for part in label.split("."):
                if part[:2] in degrees and part[2:].isdigit():
                    degrees[part[:2]] = int(part[2:])
                elif part == "recompute":
                    recompute = True  # every layer recomputed in backward
                else:
                    schedule = part
            n = degrees["pp"] * degrees["tp"] * degrees["dp"]
            zero = "optimizer" if degrees["dp"] > 1 else "none"
            mesh = [f"--{k}={v}" for k, v in degrees.items()]
            if degrees["pp"] > 1:
                mesh += ["--schedule", schedule or "1f1b"]
                if schedule == "interleaved":
                    mesh += ["--virtual-stages", "2"]
            if recompute:
                mesh += ["--recompute", "full"]
            per_rank = a.batch // degrees["dp"]
            mesh += ["--microbatch", str(per_rank // a.microbatches if degrees["pp"] > 1
                                         else per_rank)]
            name = label
        else:
            label = f"pp{n} {schedule}" if schedule else f"dp{n} {zero}"
            name = f"pp{n}.{schedule}" if schedule else f"dp{n}.{zero}"
            mesh = (["--pp", str(n), "--schedule", schedule, "--microbatch",
                     str(a.batch // a.microbatches)] if schedule else ["--dp", str(n)])
        plan = os.path.join(work, f"plan.{name}")
        report = os.path.join(work, f"report.{name}.json")
        run(["cleave", "compile", model, "--cluster", a.cluster, "--devices", str(n),
             "--global-batch", str(a.batch)] + mesh + ["--zero", zero, "--mode", "train",
             "-o", plan], env=env)
        train = ["cleave", "train", plan, "--data", data, "--steps", str(a.steps), "--report",
                 report, "-q"]
        if n > 1:
            train[2:2] = ["--local", str(n)]
        run(train, env=env)
        with open(report) as f:
            r = json.load(f)
        with open(os.path.join(plan, "manifest.json")) as f:
            manifest = json.load(f)
        memory = manifest["predicted"]["memory_bytes"]["total"]

        def predicted_of(rank):
            # Each rank's own program (a pipeline's stages differ).
            e = manifest["programs"][manifest["devices"][rank]["program"]]
            return e["arena_bytes"] + e["weight_bytes"] + e.get("state_bytes", 0)
        ranks = r["ranks"] or [{"rank": 0, "step_seconds": r["mean_step_seconds"],
                                "compute_seconds": r["mean_compute_seconds"],
                                "communication_seconds": r["mean_communication_seconds"],
                                "allocated_bytes": r["memory_bytes"]["allocated"]}]
        slowest = max(ranks, key=lambda x: x["step_seconds"])
        p = r["predicted"]
        row = {"ranks": n, "zero": zero, "schedule": schedule, "measured": ranks, "predicted": p,
               "predicted_bytes": memory}
        rows.append(row)
        exact = all(x["allocated_bytes"] == predicted_of(x["rank"]) for x in ranks)
        row["mesh"] = label
        row["tp_collectives"] = tp_collectives(plan)
        print(f"{n:>5} {label:>13} | {slowest['step_seconds'] * 1e3:>8.2f} {p['step_seconds'] * 1e3:>7.2f} "
              f"{slowest['step_seconds'] / p['step_seconds']:>5.2f} | "
              f"{slowest['compute_seconds'] * 1e3:>8.2f} {p['compute_seconds'] * 1e3:>7.2f} | "
              f"{slowest['communication_seconds'] * 1e3:>7.2f} "
              f"{p['communication_seconds'] * 1e3:>7.2f} | {p.get('bubble_seconds', 0) * 1e3:>6.2f} | "
              f"{max(x['allocated_bytes'] for x in ranks) / 2**20:>8.2f} {memory / 2**20:>7.2f}"
              f"{'' if exact else '  MISMATCH'}"
              f"{'' if not row['tp_collectives'] else '  (%d tp collectives)' % row['tp_collectives']}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": benchlib.machine(), "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
