#!/usr/bin/python3
"""Benchmark: one CPU training step of cleave against LibTorch and PyTorch (issue 18).

    /usr/bin/python3 bench/cpu_train.py [--models gpt-bench,resnet50] [--threads N]
        [--warmup 2] [--steps 10] [--batch 8] [--samples 16] [--dropout 0]
        [--lr 1e-3] [--betas 0.9,0.999] [--eps 1e-8] [--weight-decay 0.01]
        [--engines cleave,libtorch,eager,torchscript] [--omp default,passive]
        [--loss-in-model] [--rounds 1]
        [--work DIR] [--json FILE] [--cleave PATH]

For each model: exports it with examples/export.py (traced in training mode, batch 8, with a
data file of --samples samples and class labels), compiles one training step with `cleave compile
--mode train --loss cross_entropy --optimizer adamw` (with --loss-in-model: the model computes
F.cross_entropy itself and the plan's loss is `model`), then runs each engine in a fresh process,
one after the other, --warmup + --steps steps each, on the same TorchScript file, data file,
thread count and AdamW hyper-parameters:

  cleave       `cleave train PLAN --data DATA --steps N --threads T --report R`, as it is
  libtorch     build/bin/cleave-train-baseline (bench/train_baseline.cpp): torch::jit::load,
               train mode, forward, loss, backward, torch::optim::AdamW, in C++
  eager        the Python module of examples/models.py (torchvision's resnet50) with the
               TorchScript file's state_dict, torch.optim.AdamW, run by /usr/bin/python3
  torchscript  the TorchScript module itself in Python, torch.optim.AdamW

Every engine takes step i's batch as `cleave train` does (samples (i*B + j) mod S), and its step
time covers the batch, forward, loss, backward and update; gradients are reset to None between
steps. The baselines run at their best: under the OpenBLAS setting whose GEMM is fastest on this
machine (probed first by bench/benchlib.py's best_blas_env: OPENBLAS_CORETYPE and
OPENBLAS_L2_SIZE as inherited, both unset, SkylakeX, Haswell, each product checked equal; no fixed
rule is right everywhere, docs/measurements.md "Baselines at their best"), and each baseline twice,
as `cleave bench` and bench/zoo.py run theirs: with OMP_WAIT_POLICY unset, OpenMP's default
("libtorch", "eager", "torchscript"), and passive, idle OpenMP threads sleeping ("libtorch*",
"eager*", "torchscript*"; spinning threads can hold the cores OpenBLAS's threads want, see
docs/measurements.md, issue 3). --omp default or --omp passive keeps one of the two. The reference
is the fastest of them all, named. cleave runs with the environment as it is. Every engine gets
OMP_NUM_THREADS=T and T threads through its own switch.

Step time: the mean over the --steps steps after the --warmup ones (the median and minimum too).
With --rounds R every engine runs R times, the engines taking turns, and each keeps its round with
the lowest mean step (every round's mean is in the JSON): a slow minute of a shared machine then
decides no ratio alone.
This machine is shared: before each engine the script waits (--wait-idle, up to 600 s) until other
processes use under 10 % of the CPUs, and reports the share they used while the engine ran
("others' CPU", from /proc/stat minus the engine's own CPU time); above 10 % the times are
inflated and a note says so. Peak RSS:
the ru_maxrss of each engine's process (os.wait4), measured the same way for all. Ratios: speed =
baseline time / cleave time, memory = cleave peak / baseline peak, against LibTorch and against
the reference (the faster baseline). Goals: speed >= 1.0x, memory <= 0.7x. The first step's loss
of every engine must agree with cleave's within 1e-3 relative (f32).

Internal: `cpu_train.py --worker eager|torchscript MODEL.pt --data D --steps N ...` is one Python
engine's process.
"""
import argparse
import atexit
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PYTHON = "/usr/bin/python3"
CLEAVE = os.path.join(ROOT, "build", "bin", "cleave")
BASELINE = os.path.join(ROOT, "build", "bin", "cleave-train-baseline")
# The probed OpenBLAS setting of the baselines (main() fills it): NAME -> value, None unsets.
BASELINE_BLAS = {}
ENGINES = ("cleave", "libtorch", "eager", "torchscript")
BASELINES = ("libtorch", "eager", "torchscript")
# OpenMP's wait policies a baseline runs under: the run's key gets this suffix.
OMP_POLICIES = {"default": "", "passive": "*"}
LABELS = {"cleave": "cleave", "libtorch": "LibTorch (C++)", "eager": "PyTorch eager",
          "torchscript": "TorchScript (Python)"}
DESCRIPTIONS = {
    "gpt-bench": "GPT, 6 layers, d_model 512, seq 256, vocab 8192, batch 8 (23.2M params)",
    "resnet50": "torchvision resnet50, batch 8, 224x224 (25.6M params)",
    "regnet_x_3_2gf": "torchvision regnet_x_3_2gf, batch 8, 224x224 (15.3M params; 3x3 convs "
                      "in groups of 48 channels)",
}
SPEED_GOAL, MEMORY_GOAL, LOSS_RTOL = 1.0, 0.7, 1e-3


def _engine(key):
    """A run's engine: "libtorch*" -> "libtorch"."""
    return key.rstrip("*")


def _policy(key):
    """A baseline run's OMP_WAIT_POLICY (None: unset), from its key."""
    return "passive" if key.endswith("*") else None


def _label(key):
    return LABELS[_engine(key)] + (", OpenMP passive" if key.endswith("*") else "")


def _baseline_env(key):
    """The command prefix of a baseline run: its OpenBLAS setting and OpenMP wait policy."""
    return benchlib.env_prefix(dict(BASELINE_BLAS, OMP_WAIT_POLICY=_policy(key)))


# --- The Python engines (one process each) --------------------------------------------------------

def _worker(argv):
    p = argparse.ArgumentParser(prog="cpu_train.py --worker")
    p.add_argument("--worker", choices=["eager", "torchscript"], required=True)
    p.add_argument("model")
    p.add_argument("--data", required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--loss", choices=["model", "cross_entropy", "mse"], default="model")
    p.add_argument("--loss-in-model", choices=["cross_entropy", "mse"],
                   help="eager: wrap the module in models.WithLoss, as the export did")
    p.add_argument("--dropout", type=float, help="eager: the module's dropout, as exported")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--betas", default="0.9,0.999")
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--weight-decay", type=float, default=1e-2)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--report", required=True)
    a = p.parse_args(argv)

    import resource
    import torch
    import torch.nn.functional as F
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from safetensors_io import load_file

    if a.threads > 0:
        torch.set_num_threads(a.threads)
    extra = {"cleave.json": ""}
    scripted = torch.jit.load(a.model, _extra_files=extra)
    meta = json.loads(extra["cleave.json"])
    names = [i["name"] for i in meta["inputs"]]
    batch = meta["inputs"][0]["shape"][0]
    if a.worker == "torchscript":
        module = scripted
    else:
        import export
        import models
        spec = export.SPECS[meta["model"]]
        if None not in spec.configs:
            sys.exit(f"cpu_train.py: {meta['model']} has no fixed size; the eager engine "
                     "rebuilds only fixed-size models")
        kwargs = dict(spec.configs[None][0])
        if a.dropout is not None:
            kwargs["dropout"] = a.dropout
        torch.manual_seed(0)
        module = spec.build(**kwargs)
        if a.loss_in_model:
            module = models.WithLoss(module, a.loss_in_model)
        # The same weights (and buffers) as the TorchScript file's.
        module.load_state_dict(scripted.state_dict(), strict=True)
        del scripted
    module.train()

    params, seen = [], set()
    for t in module.parameters():
        if id(t) not in seen:
            seen.add(id(t))
            t.requires_grad_(True)
            params.append(t)
    b1, b2 = (float(x) for x in a.betas.split(","))
    optimizer = torch.optim.AdamW(params, lr=a.lr, betas=(b1, b2), eps=a.eps,
                                  weight_decay=a.weight_decay)
    data = load_file(a.data)
    batch_names = names + ([] if a.loss == "model" else ["labels"])
    samples = data[batch_names[0]].shape[0]

    steps = []
    for step in range(a.steps):
        start = time.perf_counter()
        index = torch.arange(step * batch, (step + 1) * batch) % samples
        inputs = [data[n].index_select(0, index) for n in names]
        out = module(*inputs)
        if a.loss == "model":
            loss = out
        elif a.loss == "cross_entropy":
            labels = data["labels"].index_select(0, index)
            loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), labels.reshape(-1))
        else:
            loss = F.mse_loss(out, data["labels"].index_select(0, index))
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        value = loss.item()
        steps.append({"step": step + 1, "loss": value, "seconds": time.perf_counter() - start})
    seconds = [s["seconds"] for s in steps]
    report = {"engine": a.worker, "torch_version": torch.__version__, "model": a.model,
              "threads": torch.get_num_threads(), "batch_size": batch,
              "parameters": sum(t.numel() for t in params), "steps": steps,
              "losses": [s["loss"] for s in steps],
              "mean_step_seconds": (sum(seconds[1:]) / (len(seconds) - 1) if len(seconds) > 1
                                    else seconds[0]),
              "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}
    with open(a.report, "w") as f:
        json.dump(report, f, indent=1)


# --- The driver -----------------------------------------------------------------------------------

def _cpu_times():
    """(busy, total) CPU seconds of the whole machine so far, from /proc/stat."""
    with open("/proc/stat") as f:
        fields = [int(x) for x in f.readline().split()[1:]]
    idle = fields[3] + fields[4]  # idle, iowait
    hz = os.sysconf("SC_CLK_TCK")
    return (sum(fields[:8]) - idle) / hz, sum(fields[:8]) / hz


def _busy_share(seconds):
    """The machine's busy share over the next `seconds` (0 idle .. 1 every core busy)."""
    b0, t0 = _cpu_times()
    time.sleep(seconds)
    b1, t1 = _cpu_times()
    return (b1 - b0) / max(t1 - t0, 1e-9)


def _wait_idle(limit):
    """Waits (at most `limit` seconds) until other processes use under 10 % of the machine."""
    start = time.time()
    while True:
        share = _busy_share(2)
        if share < 0.1:
            return share
        if time.time() - start > limit:
            print(f"   (machine still {share:.0%} busy after waiting {limit:.0f} s: running anyway)",
                  flush=True)
            return share
        time.sleep(8)


def _run(cmd, log, env=None):
    """Runs cmd in a fresh process; returns (exit status, seconds, peak RSS bytes from wait4,
    the share of the machine other processes used meanwhile)."""
    busy0, _ = _cpu_times()
    start = time.perf_counter()
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.perf_counter() - start
    busy1, _ = _cpu_times()
    own = usage.ru_utime + usage.ru_stime
    others = max(0.0, busy1 - busy0 - own) / max(wall * os.cpu_count(), 1e-9)
    return proc.returncode, wall, usage.ru_maxrss * 1024, others


def _fail(message, log=None):
    if log and os.path.exists(log):
        with open(log) as f:
            tail = f.read()[-3000:]
        message += "\n" + tail
    sys.exit(f"cpu_train.py: error: {message}")


def _machine():
    with open("/proc/meminfo") as f:
        mem = int(f.readline().split()[1]) / 1048576
    return f"{benchlib.machine()}, {mem:.0f} GiB"


def _mib(n):
    return f"{n / 1048576:.0f}"


def _bench_model(name, a, work, env):
    pt = os.path.join(work, f"{name}.pt")
    data = os.path.join(work, f"{name}.data.safetensors")
    plan = os.path.join(work, f"{name}.plan")
    export = [PYTHON, os.path.join(ROOT, "examples", "export.py"), name, "-o", pt, "--train",
              "--batch", str(a.batch), "--data", data, "--samples", str(a.samples)]
    if name.startswith("gpt"):
        export += ["--dropout", str(a.dropout)]
    export += (["--loss-in-model", "cross_entropy"] if a.loss_in_model
               else ["--labels", "cross_entropy"])
    loss = "model" if a.loss_in_model else "cross_entropy"
    hyper = ["--lr", str(a.lr), "--betas", a.betas, "--eps", str(a.eps),
             "--weight-decay", str(a.weight_decay)]
    total = a.warmup + a.steps
    log = os.path.join(work, f"{name}.export.log")
    print(f"\n== {name}: {DESCRIPTIONS.get(name, name)}", flush=True)
    print("$ " + shlex.join(export), flush=True)
    rc, _, _, _ = _run(export, log, env)
    if rc:
        _fail(f"export of {name} failed", log)
    compile_cmd = [CLEAVE, "compile", pt, "--mode", "train", "--loss", loss,
                   "--optimizer", "adamw"] + hyper + ["-o", plan]
    results = {"model": name, "commands": {"export": shlex.join(export)}, "engines": {}}
    if "cleave" in a.engines:
        log = os.path.join(work, f"{name}.compile.log")
        print("$ " + shlex.join(compile_cmd), flush=True)
        rc, secs, _, _ = _run(compile_cmd, log, env)
        if rc:
            _fail(f"cleave compile of {name} failed", log)
        results["compile_seconds"] = secs
        results["commands"]["compile"] = shlex.join(compile_cmd)

    for round_no in range(1, a.rounds + 1):
        if a.rounds > 1:
            print(f"-- round {round_no} of {a.rounds}", flush=True)
        for key in a.runs:
            r = _run_engine(name, key, a, work, env, pt, data, plan, loss, hyper, total)
            _keep_fastest(results["engines"], key, r)
    for engine, r in results["engines"].items():
        if "round_mean_step_seconds" in r:
            r["rounds"] = len(r["round_mean_step_seconds"])
    return results


def _keep_fastest(engines, engine, r):
    """Keeps, of an engine's rounds, the one with the lowest mean step; every round's mean is
    recorded. A failed round counts only when no round of the engine ran."""
    old = engines.get(engine)
    if "failed" in r:
        if old is None:
            engines[engine] = r
        return
    means = [] if old is None or "failed" in old else old["round_mean_step_seconds"]
    means = means + [r["mean_step_seconds"]]
    if old is None or "failed" in old or r["mean_step_seconds"] < old["mean_step_seconds"]:
        engines[engine] = r
    engines[engine]["round_mean_step_seconds"] = means


def _run_engine(name, key, a, work, env, pt, data, plan, loss, hyper, total):
    """One engine's run of --warmup + --steps steps in a fresh process: its times, peak RSS and
    losses, or {"failed": why}. key: the engine, a star for OpenMP passive."""
    engine, stem = _engine(key), key.replace("*", "-passive")
    report = os.path.join(work, f"{name}.{stem}.json")
    if engine == "cleave":
        cmd = [CLEAVE, "train", plan, "--data", data, "--steps", str(total), "--threads",
               str(a.threads), "--report", report, "-q"]
    elif engine == "libtorch":
        cmd = _baseline_env(key) + [BASELINE, pt, "--data", data, "--steps", str(total),
                                    "--loss", loss, "--threads", str(a.threads),
                                    "--report", report] + hyper
    else:
        cmd = _baseline_env(key) + [PYTHON, os.path.abspath(__file__), "--worker", engine, pt,
                                    "--data", data, "--steps", str(total), "--loss", loss,
                                    "--threads", str(a.threads), "--report", report] + hyper
        if name.startswith("gpt"):
            cmd += ["--dropout", str(a.dropout)]
        if a.loss_in_model:
            cmd += ["--loss-in-model", "cross_entropy"]
    log = os.path.join(work, f"{name}.{stem}.log")
    idle = _wait_idle(a.wait_idle) if a.wait_idle > 0 else None
    print(f"$ {shlex.join(cmd)}", flush=True)
    rc, wall, rss, others = _run(cmd, log, env)
    if rc:
        with open(log) as f:
            tail = f.read()[-1500:].strip()
        print(f"   {_label(key)} FAILED (exit {rc}): {tail}", flush=True)
        return {"failed": tail, "command": shlex.join(cmd)}
    with open(report) as f:
        rep = json.load(f)
    seconds = [s["seconds"] for s in rep["steps"]]
    measured = seconds[a.warmup:]
    r = {"command": shlex.join(cmd), "omp_wait_policy": None if engine == "cleave"
         else _policy(key) or "unset", "busy_before": idle, "others_share": others,
         "wall_seconds": wall,
         "peak_rss_bytes": rss, "step_seconds": seconds,
         "mean_step_seconds": sum(measured) / len(measured),
         "median_step_seconds": statistics.median(measured),
         "min_step_seconds": min(measured),
         "losses": [s["loss"] for s in rep["steps"]]}
    if engine == "cleave":
        r["plan_allocated_bytes"] = rep["memory_bytes"]["allocated"]
        r["plan_predicted_bytes"] = rep["memory_bytes"].get("predicted")
    print(f"   {_label(key)}: mean {r['mean_step_seconds'] * 1e3:.1f} ms, median "
          f"{r['median_step_seconds'] * 1e3:.1f} ms, min {r['min_step_seconds'] * 1e3:.1f} ms "
          f"per step; peak RSS {_mib(rss)} MiB; first loss {r['losses'][0]:.6f}, last "
          f"{r['losses'][-1]:.6f}; other processes used {others:.0%} of the machine meanwhile",
          flush=True)
    return r


def _summarize(results, a):
    """The ratios and the loss check of one model, added to results; returns the table rows."""
    e = {k: v for k, v in results["engines"].items() if "failed" not in v}
    base = [k for k in a.runs if k != "cleave" and k in e]
    ref = min(base, key=lambda b: e[b]["mean_step_seconds"]) if base else None
    results["reference"] = ref
    # Each baseline's faster OpenMP policy: the table's per-engine columns show that run.
    results["fastest_run"] = {}
    for engine in BASELINES:
        runs = [k for k in base if _engine(k) == engine]
        if runs:
            results["fastest_run"][engine] = min(runs, key=lambda k: e[k]["mean_step_seconds"])
    c = e.get("cleave")
    checks = []
    if c:
        for b in base:
            speed = e[b]["mean_step_seconds"] / c["mean_step_seconds"]
            memory = c["peak_rss_bytes"] / e[b]["peak_rss_bytes"]
            e[b]["speed_vs_cleave"] = speed
            e[b]["memory_cleave_over_this"] = memory
            l0, lc = e[b]["losses"][0], c["losses"][0]
            rel = abs(l0 - lc) / max(abs(lc), 1e-30)
            e[b]["first_loss_rel_diff"] = rel
            checks.append((b, rel, rel <= LOSS_RTOL))
    elif len(base) > 1:
        for b in base[1:]:
            l0, lr = e[b]["losses"][0], e[base[0]]["losses"][0]
            rel = abs(l0 - lr) / max(abs(lr), 1e-30)
            e[b]["first_loss_rel_diff_vs_" + base[0]] = rel
            checks.append((f"{_label(b)} vs {_label(base[0])}", rel, rel <= LOSS_RTOL))
    results["loss_check"] = [{"engine": b, "rel_diff": r, "ok": ok} for b, r, ok in checks]
    return ref, checks


def _why(failure):
    """A short reason for a failed engine's table cell."""
    m = re.search(r"has no kernel '([^']+)'", failure)
    if m:
        return f"the cpu backend has no kernel '{m.group(1)}' yet"
    return failure.splitlines()[-1][:120]


def _table(all_results, a):
    lines = ["| model | engine | mean ms/step | median ms | min ms | peak RSS MiB | speed (this / cleave) "
             "| memory (cleave / this) | first loss | others' CPU |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    summary = ["| model | cleave ms | LibTorch ms | eager ms | TorchScript ms | reference | "
               "speed vs LibTorch | speed vs reference | memory vs LibTorch | memory vs reference "
               "| cleave plan allocation MiB |",
               "|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---:|"]
    notes = []
    for res in all_results:
        name, e, ref = res["model"], res["engines"], res.get("reference")
        first = True
        for engine in a.runs:
            if engine not in e:
                continue
            r = e[engine]
            label = _label(engine) + (" (reference)" if engine == ref else "")
            cell = DESCRIPTIONS.get(name, name) if first else ""
            first = False
            if "failed" in r:
                lines.append(f"| {cell} | {label} | not measured ({_why(r['failed'])}) | | | | | | | |")
                continue
            speed = f"{r['speed_vs_cleave']:.2f}x" if "speed_vs_cleave" in r else ""
            mem = f"{r['memory_cleave_over_this']:.2f}x" if "memory_cleave_over_this" in r else ""
            lines.append(f"| {cell} | {label} | {r['mean_step_seconds'] * 1e3:.1f} | "
                         f"{r['median_step_seconds'] * 1e3:.1f} | {r['min_step_seconds'] * 1e3:.1f} | "
                         f"{_mib(r['peak_rss_bytes'])} | {speed} | {mem} | {r['losses'][0]:.6f} | "
                         f"{r['others_share']:.0%} |")
            if r["others_share"] > 0.1:
                notes.append(f"{name}: other processes used {r['others_share']:.0%} of the machine "
                             f"while {_label(engine)} ran: its times are inflated")

        def run_of(engine):
            """The engine's run the summary shows: its faster OpenMP policy."""
            fastest = res.get("fastest_run", {}).get(engine)
            return fastest or next((k for k in a.runs if _engine(k) == engine and k in e), None)

        def ms(engine):
            k = run_of(engine)
            r = e.get(k)
            if not r:
                return "-"
            star = "*" if k.endswith("*") else ""
            return "n/a" if "failed" in r else f"{r['mean_step_seconds'] * 1e3:.1f}{star}"

        def ratio(k, key):
            r = e.get(k) or {}
            return f"{r[key]:.2f}x" if key in r else "n/a"

        c = e.get("cleave") or {}
        alloc = _mib(c["plan_allocated_bytes"]) if "plan_allocated_bytes" in c else "n/a"
        summary.append(f"| {name} | {ms('cleave')} | {ms('libtorch')} | {ms('eager')} | "
                       f"{ms('torchscript')} | {_label(ref) if ref else '-'} | "
                       f"{ratio(run_of('libtorch'), 'speed_vs_cleave')} | "
                       f"{ratio(ref, 'speed_vs_cleave')} | "
                       f"{ratio(run_of('libtorch'), 'memory_cleave_over_this')} | "
                       f"{ratio(ref, 'memory_cleave_over_this')} | {alloc} |")
        for chk in res.get("loss_check", []):
            verdict = "agrees" if chk["ok"] else "DISAGREES"
            against = "" if " vs " in chk["engine"] else " with cleave's"
            who = chk["engine"] if " vs " in chk["engine"] else _label(chk["engine"])
            notes.append(f"{name}: first-step loss of {who} "
                         f"{verdict}{against} (relative difference {chk['rel_diff']:.1e}, "
                         f"tolerance {LOSS_RTOL:g})")
        if "cleave" in e and "failed" in e["cleave"]:
            notes.append(f"{name}: cleave's side was not measured: "
                         f"{e['cleave']['failed'].splitlines()[-1][:400]}")
        for key, goal, label, better in (("speed_vs_cleave", SPEED_GOAL, "speed", "≥"),
                                         ("memory_cleave_over_this", MEMORY_GOAL, "memory", "≤")):
            r = e.get(ref) or {}
            if key in r:
                met = r[key] >= goal if better == "≥" else r[key] <= goal
                notes.append(f"{name}: {label} goal ({better} {goal}x against the reference "
                             f"{_label(ref)}): {'met' if met else 'MISSED'} ({r[key]:.2f}x)")
    return lines, summary, notes


def main(argv):
    global BASELINE_BLAS, CLEAVE
    if "--worker" in argv:
        return _worker(argv)
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", default="gpt-bench,resnet50")
    p.add_argument("--threads", type=int, default=os.cpu_count(),
                   help="threads of every engine (default: all cores)")
    p.add_argument("--warmup", type=int, default=2, help="steps left out of the timing")
    p.add_argument("--steps", type=int, default=10, help="measured steps")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--samples", type=int, default=16, help="samples in the data file")
    p.add_argument("--dropout", type=float, default=0.0,
                   help="GPT's dropout (default 0: masks differ between engines, so losses "
                        "agree only without dropout)")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--betas", default="0.9,0.999")
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--weight-decay", type=float, default=1e-2)
    p.add_argument("--engines", default=",".join(ENGINES))
    p.add_argument("--omp", default=",".join(OMP_POLICIES),
                   help="the OpenMP wait policies each baseline runs under: default "
                        "(OMP_WAIT_POLICY unset) and/or passive (default: both)")
    p.add_argument("--rounds", type=int, default=1,
                   help="time every engine R times, the engines taking turns, each keeping its "
                        "round with the lowest mean step (default 1)")
    p.add_argument("--loss-in-model", action="store_true",
                   help="the model computes its loss (--loss model) instead of cleave "
                        "appending cross_entropy")
    p.add_argument("--wait-idle", type=float, default=600, metavar="SECONDS",
                   help="before each engine, wait up to this long for the machine to be idle "
                        "(other processes under 10%% of it; 0: do not wait)")
    p.add_argument("--work", help="keep the models, plans, data and reports here")
    p.add_argument("--json", help="also write every number to this file")
    p.add_argument("--cleave", default=CLEAVE, help=f"the cleave binary (default {CLEAVE})")
    a = p.parse_args(argv)
    CLEAVE = shutil.which(a.cleave) or a.cleave
    a.engines = [x for x in a.engines.split(",") if x]
    for x in a.engines:
        if x not in ENGINES:
            p.error(f"unknown engine {x}; choose from {', '.join(ENGINES)}")
    a.omp = [x for x in a.omp.split(",") if x]
    for x in a.omp:
        if x not in OMP_POLICIES:
            p.error(f"unknown OpenMP policy {x}; choose from {', '.join(OMP_POLICIES)}")
    if not a.omp:
        p.error("--omp needs at least one policy")
    # Every run of a round: cleave once, each baseline once per OpenMP policy.
    a.runs = [e if e == "cleave" else e + OMP_POLICIES[o]
              for e in a.engines for o in (a.omp if e != "cleave" else [None])]
    if a.warmup < 1 or a.steps < 1:
        p.error("--warmup and --steps must be at least 1")
    if a.rounds < 1:
        p.error(f"--rounds must be at least 1, got {a.rounds}")
    if "cleave" in a.engines and not os.access(CLEAVE, os.X_OK):
        p.error(f"{CLEAVE} missing: /work/bin/cbuild TREE --target cleave (or bash scripts/build.sh)")
    if "libtorch" in a.engines and not os.access(BASELINE, os.X_OK):
        p.error(f"{BASELINE} missing: build the target cleave-train-baseline")

    env = dict(os.environ, OMP_NUM_THREADS=str(a.threads))
    blas, blas_setting, blas_probe = {}, "inherit", []
    if any(e in BASELINES for e in a.engines):
        blas, blas_setting, blas_probe = benchlib.best_blas_env(a.threads, PYTHON, base=env)
    BASELINE_BLAS = blas
    work = a.work or tempfile.mkdtemp(prefix="cpu_train.")
    if not a.work:
        atexit.register(shutil.rmtree, work, True)
    os.makedirs(work, exist_ok=True)
    print(f"machine: {_machine()}")
    print(f"date: {time.strftime('%Y-%m-%d %H:%M %Z')}")
    print(f"command: {shlex.join([PYTHON, 'bench/cpu_train.py'] + argv)}")
    print(f"threads {a.threads} for every engine (OMP_NUM_THREADS={a.threads}), {a.warmup} warm-up "
          f"+ {a.steps} measured steps, batch {a.batch}, AdamW lr {a.lr} betas {a.betas} eps {a.eps} "
          f"weight decay {a.weight_decay}"
          + (f"; every engine's fastest of {a.rounds} interleaved rounds" if a.rounds > 1 else ""))
    if blas_probe:
        print("\n".join(benchlib.blas_probe_table(blas_probe, blas_setting, a.threads)))
    print(f"baselines run under: {' '.join(benchlib.env_prefix(blas))} (OpenBLAS {blas_setting}, "
          "the fastest agreeing setting probed), each with OMP_WAIT_POLICY "
          + " and ".join("unset" if o == "default" else f"{o} (a star)" for o in a.omp)
          + "; cleave runs with the environment as it is")
    all_results = []
    for name in a.models.split(","):
        res = _bench_model(name, a, work, env)
        _summarize(res, a)
        all_results.append(res)
    lines, summary, notes = _table(all_results, a)
    print()
    print("\n".join(lines))
    print()
    print("\n".join(summary))
    print()
    for n in notes:
        print("- " + n)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"machine": _machine(), "date": time.strftime("%Y-%m-%d"),
                       "argv": argv, "threads": a.threads, "warmup": a.warmup, "steps": a.steps,
                       "rounds": a.rounds,
                       "baseline_env": {k: _baseline_env(k) for k in a.runs if k != "cleave"},
                       "omp_policies": a.omp, "blas_setting": blas_setting,
                       "blas_probe": blas_probe, "models": all_results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
