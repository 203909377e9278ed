#!/usr/bin/python3
"""Benchmark: one training step of a GPT-2 124M-shaped model (12 layers, d_model 768, 12 heads,
sequence 1024, batch 8) on one NVIDIA GPU, bf16 mixed precision with AdamW: cleave's CUDA
backend against PyTorch eager and torch.compile, on the same GPU, weights and data, in this one
script.

cleave trains the plan compiled with `--mode train --loss cross_entropy --dtype bf16` (bf16
compute, f32 master weights and AdamW state) through `cleave-runtime train --backend cuda`
and reports the median step of its log after warm-up. PyTorch trains the same models.GPT with
the same weights: forward and backward under torch.autocast(bf16), f32 parameters,
F.cross_entropy on the f32 logits, torch.optim.AdamW with the same hyper-parameters (fused, its
fastest implementation on a GPU), timed with CUDA events (median of N after warm-up); then the
same step with the module under torch.compile. Printed: step ms, tokens/s, the achieved TFLOP/s
and MFU (model FLOPs: three times the forward's, bench/cuda_gpt2.py's convention, attention over
the full S x S), and the first step's loss of each (the same weights and batch: they must agree
within bf16's rounding, 2u(L+1) relative, u = 2^-8).

Two modes, as bench/cuda_gpt2.py:

  --prepare DIR (here, where `cleave` compiles):
    /usr/bin/python3 bench/cuda_train_gpt2.py --prepare DIR [--config 124m|tiny] [--cleave PATH]
  exports the model with its training data (one batch), compiles the training plan into
  DIR/plan and leaves its weights out (bench/cuda_gpt2.py's manifest: the GPU machine rebuilds
  them from a seeded models.GPT).

  --plan DIR (on the GPU machine: only `cleave-runtime`, no compiler):
    python3 bench/cuda_train_gpt2.py --plan DIR --runtime PATH/cleave-runtime
        [--backend cuda|cpu] [--steps N] [--warmup N] [--json OUT] [--profile] [--cleave-only]
  rebuilds the weights, trains with the runtime, then times PyTorch (skipped, with a message,
  when PyTorch sees no CUDA GPU). Exit status 1 when cleave's run fails or its first loss
  differs from PyTorch's by more than the bound.
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))
sys.path.insert(0, os.path.join(ROOT, "bench"))

import cuda_gpt2  # noqa: E402
from cuda_gpt2 import CONFIGS, PEAKS, die, forward_flops, fresh_model, rebuild_weights  # noqa: E402

# torch.optim.AdamW's hyper-parameters, the same on both sides (GPT-2's usual ones).
LR, BETAS, WEIGHT_DECAY, EPS = 6e-4, (0.9, 0.95), 0.1, 1e-8


def prepare(args):
    import torch
    if args.config not in CONFIGS:
        die(f"unknown --config '{args.config}'; choose one of: {', '.join(CONFIGS)}")
    export_args, kwargs = CONFIGS[args.config]
    kwargs = dict(kwargs, dropout=0.0)  # exported with --dropout 0: both sides train without
    out = os.path.abspath(args.prepare)
    plan = os.path.join(out, "plan")
    if os.path.exists(plan):
        die(f"{plan} exists already; give --prepare a new or empty folder")
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out, prefix=".export-") as work:
        model_path = os.path.join(work, "model.pt")
        subprocess.run([sys.executable, os.path.join(ROOT, "examples", "export.py"), *export_args,
                        "--train", "--dropout", "0", "-o", model_path, "--seed", str(args.seed),
                        "--data", os.path.join(out, "data.safetensors"), "--samples",
                        str(args.samples), "--labels", "cross_entropy"], check=True)
        try:
            subprocess.run([args.cleave, "compile", model_path, "--mode", "train", "--loss",
                            "cross_entropy", "--dtype", "bf16", "--optimizer", "adamw", "--lr",
                            str(LR), "--betas", f"{BETAS[0]},{BETAS[1]}", "--weight-decay",
                            str(WEIGHT_DECAY), "--eps", str(EPS), "-o", plan],
                           check=True, stdout=subprocess.DEVNULL)
        except FileNotFoundError:
            die(f"no cleave compiler at '{args.cleave}' (pass --cleave PATH)")
        state = torch.jit.load(model_path).state_dict()
    for line in cuda_gpt2.strip_plan_weights(plan, state):
        print(line)
    shutil.rmtree(os.path.join(plan, "ir"), ignore_errors=True)
    with open(os.path.join(out, "prepare.json"), "w") as f:
        json.dump({"format": "cuda_train_gpt2-prepare", "version": 1, "config": args.config,
                   "model": kwargs, "dtype": "bf16", "optimizer": "adamw", "lr": LR,
                   "betas": BETAS, "weight_decay": WEIGHT_DECAY, "eps": EPS,
                   "export_seed": args.seed}, f, indent=1)
    size = sum(os.path.getsize(os.path.join(d, n)) for d, _, files in os.walk(out) for n in files)
    print(f"prepared {out}: {size / 1e6:.2f} MB in all")


def run_cleave_train(runtime, plan, data, backend, steps, timeout, log):
    """Trains `steps` steps; returns the log's records (a RuntimeError says why not)."""
    cmd = [runtime, "train", plan, "--data", data, "--backend", backend, "--steps", str(steps),
           "--log", log, "--quiet"]
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except OSError as e:
        raise RuntimeError(f"cannot run the runtime '{runtime}': {e}")
    except subprocess.TimeoutExpired:
        raise RuntimeError(f"'{' '.join(cmd)}' did not finish in {timeout} s")
    if run.returncode != 0:
        raise RuntimeError(f"'{' '.join(cmd)}' failed (exit {run.returncode}):\n"
                           f"{run.stdout[-3000:]}{run.stderr[-3000:]}")
    with open(log) as f:
        return [json.loads(line) for line in f if line.strip()]


def cuda_median_seconds(run, iterations):
    """Median seconds of `run()` on the GPU, CUDA events around each call."""
    import torch
    torch.cuda.synchronize()
    times = []
    for _ in range(iterations):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        run()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1000)
    return statistics.median(times)


def time_torch_steps(step, warmup, iterations):
    """Median seconds of `step()` (CUDA events) after `warmup` calls, and the first loss."""
    first = step().item()
    for _ in range(max(0, warmup - 1)):
        step()
    return cuda_median_seconds(step, iterations), first


def profile_cleave(args, plan, data_path, work):
    """cleave's time per kernel (and per phase) in one step, from the runtime's trace; printed
    as a table, returned as {kernel: [calls, seconds]}."""
    trace = os.path.join(work, "trace.json")
    cmd = [args.runtime, "train", plan, "--data", data_path, "--backend", args.backend,
           "--steps", "2", "--trace", trace, "--quiet"]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
    if run.returncode != 0:
        print(f"profile run failed: {run.stderr[-2000:]}")
        return {}
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    kernels, phases = {}, {}
    for e in events:
        if e.get("ph") != "X":
            continue
        table = kernels if e.get("tid") == 1 else phases
        calls, seconds = table.get(e["name"], (0, 0.0))
        table[e["name"]] = (calls + 1, seconds + e["dur"] / 1e6)
    gemm_rows = gemm_table(plan, events)
    total = sum(sec for _, sec in kernels.values())
    print("cleave, one step with each instruction waited for (--trace): "
          + ", ".join(f"{name} {sec * 1e3:.2f} ms" for name, (_, sec) in phases.items()))
    print("| kernel | calls | ms | share |")
    print("|---|---:|---:|---:|")
    for name, (calls, sec) in sorted(kernels.items(), key=lambda kv: -kv[1][1])[:25]:
        print(f"| {name} | {calls} | {sec * 1e3:.2f} | {100 * sec / total:.1f} % |")
    print()
    print_gemm_table(gemm_rows)
    return {"kernels": {name: [calls, sec] for name, (calls, sec) in kernels.items()},
            "gemms": gemm_rows}


GEMM_KERNELS = ("linear", "matmul", "linear_backward_weight")


def gemm_shape(kernel, shapes):
    """(m, n, k) of a GEMM instruction from its operands' shapes: linear(x [.., k], w [n, k]),
    matmul(a [.., m, k], b [k, n]) (a's leading dims folded into m: the plans' matmuls are 2-D
    or batched over a shared b), linear_backward_weight(grad [.., n], input [.., k]) -> [n, k]
    summed over the leading rows (m)."""
    def rows(shape):
        r = 1
        for d in shape[:-1]:
            r *= d
        return r
    if kernel == "linear":
        return rows(shapes[0]), shapes[1][0], shapes[0][-1]
    if kernel == "matmul":
        return rows(shapes[0]), shapes[1][-1], shapes[0][-1]
    return rows(shapes[0]), shapes[0][-1], shapes[1][-1]


def gemm_table(plan, events):
    """The traced step's GEMMs grouped by kernel and source line (layers folded together), with
    their shapes from the plan's program: [{kernel, where, m, n, k, calls, seconds}]."""
    import re
    programs = sorted(os.listdir(os.path.join(plan, "programs")))
    with open(os.path.join(plan, "programs", programs[0])) as f:
        program = json.load(f)
    buffers = {b["id"]: b for b in program["buffers"]}
    shapes_at = {}  # (phase, kernel, loc) -> the operands' shapes, in program order
    for phase in program["phases"]:
        for ins in phase["instructions"]:
            if ins["kernel"] in GEMM_KERNELS:
                key = (phase["name"], ins["kernel"], ins.get("loc", ""))
                shapes_at.setdefault(key, []).append(
                    [buffers[i]["shape"] for i in ins["inputs"]])
    seen, groups = {}, {}
    for e in events:
        if e.get("ph") != "X" or e.get("tid") != 1 or e["name"] not in GEMM_KERNELS:
            continue
        a = e.get("args", {})
        key = (a.get("phase", ""), e["name"], a.get("loc", ""))
        n = seen.get(key, 0)
        seen[key] = n + 1
        if key not in shapes_at:
            continue
        shapes = shapes_at[key][n % len(shapes_at[key])]
        m, nn, k = gemm_shape(e["name"], shapes)
        bias = e["name"] == "linear" and len(shapes) == 3
        where = re.sub(r"blocks\.\d+\.", "blocks.*.", a.get("loc", "").split("(in ")[-1])
        where = where.split(":")[0].rstrip(")").strip()
        g = groups.setdefault((e["name"], where, m, nn, k, bias), [0, 0.0])
        g[0] += 1
        g[1] += e["dur"] / 1e6
    return [{"kernel": kern, "where": where, "m": m, "n": n, "k": k, "bias": bias, "calls": c,
             "seconds": sec}
            for (kern, where, m, n, k, bias), (c, sec) in sorted(groups.items(),
                                                                 key=lambda kv: -kv[1][1])]


def torch_gemm_seconds(kernel, m, n, k, bias, iterations=10):
    """PyTorch's (cuBLAS's) median time for the same bf16 GEMM on this GPU, CUDA events."""
    import torch
    dev, bf = "cuda", torch.bfloat16
    if kernel == "linear":
        a, b = torch.randn(m, k, device=dev, dtype=bf), torch.randn(n, k, device=dev, dtype=bf)
        c = torch.randn(n, device=dev, dtype=bf) if bias else None
        run = lambda: torch.nn.functional.linear(a, b, c)  # noqa: E731
    elif kernel == "matmul":
        a, b = torch.randn(m, k, device=dev, dtype=bf), torch.randn(k, n, device=dev, dtype=bf)
        run = lambda: a @ b  # noqa: E731
    else:
        g, x = torch.randn(m, n, device=dev, dtype=bf), torch.randn(m, k, device=dev, dtype=bf)
        run = lambda: g.t() @ x  # noqa: E731
    for _ in range(3):
        run()
    return cuda_median_seconds(run, iterations)


def print_gemm_table(rows):
    """cleave's GEMMs of the traced step against PyTorch's on the same shapes (when PyTorch
    sees a GPU): where the GEMM time goes, and whether cleave's cuBLASLt calls are at fault or
    the shapes are."""
    if not rows:
        return
    import torch
    cuda = torch.cuda.is_available()
    print("cleave's GEMMs in the traced step, by source line, against PyTorch's GEMM of the same "
          "shape (bf16, median of 10)" if cuda else "cleave's GEMMs in the traced step")
    print("| kernel | where | m x n x k | calls | ms | TFLOP/s | PyTorch ms per call | "
          "cleave / PyTorch |")
    print("|---|---|---|---:|---:|---:|---:|---:|")
    for r in rows:
        per = r["seconds"] / r["calls"]
        tflops = 2 * r["m"] * r["n"] * r["k"] / per / 1e12
        ref = ratio = "n/a"
        if cuda:
            try:
                t = torch_gemm_seconds(r["kernel"], r["m"], r["n"], r["k"], r["bias"])
                r["torch_seconds"] = t
                ref, ratio = f"{t * 1e3:.3f}", f"{per / t:.2f}"
            except RuntimeError as e:  # out of memory on a small GPU
                ref = f"failed: {cuda_gpt2.first_line(e)}"
        print(f"| {r['kernel']} | {r['where']} | {r['m']} x {r['n']} x {r['k']} | {r['calls']} | "
              f"{r['seconds'] * 1e3:.2f} | {tflops:.1f} | {ref} | {ratio} |")
    print()


def torch_step(model, idx, labels):
    import torch
    import torch.nn.functional as F
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=LR, betas=BETAS, eps=EPS, weight_decay=WEIGHT_DECAY,
                            fused=True)

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            logits = model(idx)
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), labels.reshape(-1))
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()
    return step


def plan_mode(args):
    import torch
    from safetensors_io import load_file
    src, prepared = cuda_gpt2.read_prepared(args.plan)
    kwargs = prepared["model"]
    cuda = torch.cuda.is_available()
    data_path = os.path.join(src, "data.safetensors")
    data = load_file(data_path)
    batch = None
    result = {"backend": args.backend, "runtime": args.runtime, "model": kwargs,
              "steps": args.steps, "warmup": args.warmup, "torch": torch.__version__}

    def save():  # after every part, so a later failure keeps what was measured
        if args.json:
            with open(args.json, "w") as f:
                json.dump(result, f, indent=1)

    with tempfile.TemporaryDirectory(prefix="cuda_train_gpt2-") as work:
        plan = os.path.join(work, "plan")
        shutil.copytree(os.path.join(src, "plan"), plan)
        model = fresh_model(kwargs, args.seed)
        plan_manifest = rebuild_weights(plan, model)
        batch, seq = plan_manifest["inputs"][0]["shape"]
        device = torch.cuda.get_device_name(0) if cuda else "no CUDA GPU (PyTorch)"
        result.update(device=device, batch=batch, seq=seq)
        print(f"device: {device}; PyTorch {torch.__version__}; CUDA {torch.version.cuda}")
        print(f"model: GPT ({kwargs['n_layer']} layers, d_model {kwargs['d_model']}, "
              f"{kwargs['n_head']} heads, vocabulary {kwargs['vocab_size']}), batch {batch}, "
              f"sequence {seq}; bf16 mixed precision, AdamW (lr {LR}, betas {BETAS}, weight "
              f"decay {WEIGHT_DECAY}); weights rebuilt from seed {args.seed}; "
              f"{args.steps} timed steps after {args.warmup} warm-up")
        cleave_s = cleave_first = None
        try:
            records = run_cleave_train(args.runtime, plan, data_path, args.backend,
                                       args.warmup + args.steps, args.timeout,
                                       os.path.join(work, "train.jsonl"))
            timed = [r["seconds"] for r in records if r["step"] > args.warmup]
            cleave_s = statistics.median(timed)
            cleave_first = records[0]["loss"]
        except (RuntimeError, KeyError, IndexError, statistics.StatisticsError) as e:
            print(f"cuda_train_gpt2.py: error: {e}")
            result["cleave_error"] = str(e)
        result.update(cleave_s=cleave_s, cleave_first_loss=cleave_first)
        save()
        if args.profile and cleave_s is not None:
            # Two more steps with --trace: the last one waits for each instruction, so each
            # kernel's time is its own (their sum exceeds the step).
            result["cleave_profile"] = profile_cleave(args, plan, data_path, work)
            save()

    rows = []
    names = [i["name"] for i in plan_manifest["inputs"]]
    idx = data[names[0]][:batch]
    labels = data["labels"][:batch]
    torch_first = None
    if cuda and args.cleave_only:
        print("--cleave-only: PyTorch is not timed, and the loss is not compared")
    elif cuda:
        torch.backends.cuda.matmul.allow_tf32 = True  # PyTorch at its best: f32 GEMMs may use TF32
        model = model.to("cuda").train()
        x, y = idx.to("cuda"), labels.to("cuda")
        eager_s, torch_first = time_torch_steps(torch_step(model, x, y), args.warmup, args.steps)
        rows.append(("PyTorch eager", eager_s))
        result.update(eager_s=eager_s, torch_first_loss=torch_first)
        save()
        try:
            fresh = fresh_model(kwargs, args.seed).to("cuda").train()
            compiled_s, _ = time_torch_steps(torch_step(torch.compile(fresh), x, y), args.warmup,
                                             args.steps)
            rows.append(("torch.compile", compiled_s))
            result["compiled_s"] = compiled_s
        except Exception as e:  # torch.compile needs a working compiler tool chain
            print(f"torch.compile failed: {cuda_gpt2.first_line(e)}")
            result["compile_error"] = cuda_gpt2.first_line(e)
        save()
    else:
        print("PyTorch sees no CUDA GPU: PyTorch is not timed, and the loss is not compared")
    if cleave_s is not None:
        rows.append((f"cleave ({args.backend})", cleave_s))

    flops = 3 * forward_flops(batch, seq, kwargs["n_layer"], kwargs["d_model"],
                              kwargs["vocab_size"])
    name = torch.cuda.get_device_name(0) if cuda else ""
    peak = args.peak_tflops or next((v for k, v in PEAKS if k in name), None)
    tokens = batch * seq
    print(f"FLOPs per step: {flops / 1e12:.3f} TFLOP (3x the forward); peak {peak or 'unknown'} "
          "TFLOP/s (bf16 dense)")
    print()
    print("| engine | step ms | vs eager | tokens/s | TFLOP/s | MFU |")
    print("|---|---:|---:|---:|---:|---:|")
    eager = rows[0][1] if rows and rows[0][0] == "PyTorch eager" else None
    for label, seconds in rows:
        tflops = flops / seconds / 1e12
        mfu = f"{100 * tflops / peak:.1f} %" if peak else "n/a"
        versus = f"{eager / seconds:.2f}x" if eager else "n/a"
        print(f"| {label} | {seconds * 1e3:.2f} | {versus} | {tokens / seconds:,.0f} | "
              f"{tflops:.1f} | {mfu} |")
    print()
    result.update(flops_per_step=flops, peak_tflops=peak)
    if cleave_first is None:
        save()
        sys.exit(1)
    if torch_first is not None:
        bound = 2 * 2 ** -8 * (kwargs["n_layer"] + 1) * abs(torch_first)
        ok = abs(cleave_first - torch_first) <= bound
        print(f"first step's loss: cleave {cleave_first:.6g}, PyTorch {torch_first:.6g} (bound "
              f"{bound:.3g}): {'ok' if ok else 'MISMATCH'}")
        result.update(first_loss_bound=bound, ok=ok)
        save()
        if not ok:
            sys.exit(1)
    save()


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--steps", type=int, default=10, help="timed steps (default 10)")
    p.add_argument("--warmup", type=int, default=3, help="warm-up steps (default 3)")
    p.add_argument("--peak-tflops", type=float, help="the GPU's dense bf16 peak (default: by name)")
    p.add_argument("--cleave", default=os.path.join(ROOT, "build", "bin", "cleave"),
                   help="--prepare: the cleave compiler")
    p.add_argument("--timeout", type=float, default=400, help="seconds the runtime may take")
    mode = p.add_mutually_exclusive_group(required=True)
    mode.add_argument("--prepare", metavar="DIR", help="export and compile into DIR, without weights")
    mode.add_argument("--plan", metavar="DIR", help="train the plan prepared in DIR")
    p.add_argument("--config", default="124m", help="--prepare: 124m (default) or tiny")
    p.add_argument("--samples", type=int, default=8,
                   help="--prepare: samples in the training data (default 8, one batch)")
    p.add_argument("--seed", type=int, default=0,
                   help="--prepare: the export's seed; --plan: the rebuilt weights' seed")
    p.add_argument("--runtime", help="--plan: the cleave runtime binary (cleave-runtime, or cleave)")
    p.add_argument("--backend", default="cuda", choices=["cuda", "cpu"],
                   help="--plan: the runtime's backend (default cuda)")
    p.add_argument("--json", metavar="OUT", help="--plan: also write the results as JSON")
    p.add_argument("--cleave-only", action="store_true",
                   help="--plan: train with cleave only, timing no PyTorch (under a profiler "
                        "such as ncu, whose kernels are then all cleave's)")
    p.add_argument("--profile", action="store_true",
                   help="--plan: also print cleave's time per kernel in one step")
    args = p.parse_args()
    if args.prepare:
        prepare(args)
    else:
        if not args.runtime:
            p.error("--plan needs --runtime PATH")
        plan_mode(args)


if __name__ == "__main__":
    main()
