#!/usr/bin/python3
"""Benchmark: forward time of a GPT-2 124M-shaped model (12 layers, d_model 768,
12 heads, sequence 1024, batch 8, bf16) on one NVIDIA GPU: cleave's CUDA
backend against PyTorch eager and torch.compile, on the same GPU, weights and
inputs, in this one script.

cleave runs the plan compiled with `--dtype bf16` (bf16 weights and
activations, fp32 accumulation) through `cleave run --backend cuda --repeat N
--timing` and reports the median forward; PyTorch runs the same module cast to
bf16, timed with CUDA events (median of N after warm-up). Also printed: the
achieved TFLOP/s and its fraction of the GPU's dense bf16 peak, and the
largest difference between cleave's and eager PyTorch's logits.

FLOPs per forward: every GEMM (qkv, projection, MLP, the tied LM head) plus
the attention products q·kᵀ and p·v over the full S x S (the usual MFU
convention; causal kernels skip about half of those).

Three modes:

  full (where `cleave` can compile: MLIR and LibTorch present):
    /usr/bin/python3 bench/cuda_gpt2.py [--iterations N] [--warmup N]
        [--peak-tflops T] [--cleave PATH]
  exports, compiles and runs in one go. Needs PyTorch with CUDA and a GPU.

  --prepare DIR (here, where `cleave` compiles):
    /usr/bin/python3 bench/cuda_gpt2.py --prepare DIR [--config 124m|tiny] [--cleave PATH]
  exports the model (examples/export.py), compiles the bf16 plan into DIR/plan,
  and replaces each program's weights file by DIR/plan/weights/PROGRAM.manifest.json
  (the file's safetensors header, verbatim: every tensor's name, dtype, shape and
  offsets) plus PROGRAM.kept.safetensors with the tensors that are not model
  parameters (constants the compiler made). Every plan tensor that is a parameter
  must equal the exported state_dict's tensor cast to the plan's dtype, bit for bit;
  prepare fails otherwise. DIR/prepare.json records the model's configuration.
  DIR ends up a few MB: it can travel to a machine that has only cleave's runtime.

  --plan DIR (on the GPU machine: only `cleave-runtime`, no compiler):
    python3 bench/cuda_gpt2.py --plan DIR --runtime PATH/cleave-runtime
        [--backend cuda|cpu] [--seed S] [--iterations N] [--warmup N] [--json OUT]
  rebuilds the weights files from a freshly initialised, seeded models.GPT of
  the recorded configuration (state_dict cast to each tensor's recorded dtype,
  written at the recorded offsets under the recorded header; any missing name or
  shape or dtype difference is an error), writes random token ids of the plan's
  input shape, runs `RUNTIME run PLAN --backend B --repeat N --timing`, and
  times PyTorch eager and torch.compile on the same module and weights in bf16
  (skipped, with a message, when PyTorch sees no CUDA GPU). The check: cleave's
  logits against PyTorch's (bf16 eager on the GPU; on the CPU the same weights
  rounded to bf16, computed in f32) within 2u(L+1)·max|reference|, u = 2^-8 and
  L layers (test/e2e/bf16.test derives it); exit status 1 when they differ more.
"""
import argparse
import json
import os
import re
import shutil
import statistics
import struct
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))

LAYERS, D_MODEL, HEADS, SEQ, BATCH, VOCAB = 12, 768, 12, 1024, 8, 50257

# Dense bf16 tensor-core peaks (TFLOP/s) from the vendor's data sheets.
PEAKS = [("H200", 989.4), ("H100 PCIe", 756.0), ("H100", 989.4), ("A100", 312.0)]

# --config: examples/export.py's arguments and the models.GPT configuration they build.
CONFIGS = {
    "124m": (["gpt2-124m"], dict(vocab_size=VOCAB, block_size=SEQ, n_layer=LAYERS, n_head=HEADS,
                                 d_model=D_MODEL)),
    "tiny": (["gpt", "--config", "tiny"], dict(vocab_size=128, block_size=16, n_layer=2, n_head=4,
                                               d_model=32)),
}
# Tensors that are not parameters (the compiler's constants) travel with the plan up to this size.
KEPT_LIMIT = 8 << 20
_ST_DTYPES = {"F32": "float32", "BF16": "bfloat16", "F16": "float16", "F64": "float64",
              "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8",
              "BOOL": "bool"}


def die(message):
    sys.exit(f"cuda_gpt2.py: error: {message}")


def forward_flops(batch, seq, layers, d_model, vocab):
    tokens = batch * seq
    per_layer = 2 * tokens * d_model * (3 * d_model + d_model + 8 * d_model)
    attention = 2 * 2 * batch * seq * seq * d_model
    head = 2 * tokens * d_model * vocab
    return layers * (per_layer + attention) + head


def time_torch(fn, x, warmup, iterations):
    import torch
    for _ in range(warmup):
        fn(x)
    torch.cuda.synchronize()
    times = []
    for _ in range(iterations):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn(x)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 1000)
    return statistics.median(times)


class RunError(Exception):
    pass


def run_cleave(runtime, plan, backend, inputs, out, repeat, timeout):
    """Runs `runtime run` and returns the median forward seconds it reports (RunError if not)."""
    cmd = [runtime, "run", plan, "--backend", backend, "--inputs", inputs, "--outputs", out,
           "--repeat", str(repeat), "--timing"]
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except OSError as e:
        raise RunError(f"cannot run the runtime '{runtime}' ({e}; pass --runtime PATH, or "
                       "--cleave PATH in full mode)")
    except subprocess.TimeoutExpired:
        raise RunError(f"'{' '.join(cmd)}' did not finish in {timeout} s")
    if run.returncode != 0:
        raise RunError(f"'{' '.join(cmd)}' failed (exit {run.returncode}):\n"
                       f"{run.stdout[-3000:]}{run.stderr[-3000:]}")
    match = re.search(r"forward median ([0-9.e-]+) s", run.stderr)
    if not match:
        raise RunError(f"no forward time in the runtime's output:\n{run.stderr[-3000:]}")
    return float(match.group(1))


def first_line(e):
    lines = str(e).strip().splitlines()
    return f"{type(e).__name__}: {lines[0] if lines else ''}"


def print_table(flops, peak, rows):
    print(f"forward FLOPs: {flops / 1e12:.3f} TFLOP; peak {peak or 'unknown'} TFLOP/s (bf16 dense)")
    print()
    print("| engine | forward ms | vs eager | TFLOP/s | of peak |")
    print("|---|---:|---:|---:|---:|")
    eager_s = rows[0][1] if rows and rows[0][0] == "PyTorch eager" else None
    for label, seconds in rows:
        if seconds <= 0:  # below the runtime's printed resolution (0.1 ms)
            print(f"| {label} | < 0.1 | n/a | n/a | n/a |")
            continue
        tflops = flops / seconds / 1e12
        share = f"{100 * tflops / peak:.1f} %" if peak else "n/a"
        versus = f"{eager_s / seconds:.2f}x" if eager_s else "n/a"
        print(f"| {label} | {seconds * 1e3:.2f} | {versus} | {tflops:.1f} | {share} |")
    print()


# --------------------------------------------------------------------------------------------
# Full mode (the original benchmark: needs `cleave compile` and a GPU).
# --------------------------------------------------------------------------------------------

def full_mode(args):
    import torch
    if not torch.cuda.is_available():
        die("PyTorch sees no CUDA GPU here; run it on a GPU machine")
    import models
    from safetensors_io import load_file

    name = torch.cuda.get_device_name(0)
    peak = args.peak_tflops or next((v for k, v in PEAKS if k in name), None)
    print(f"GPU: {name}; PyTorch {torch.__version__}; CUDA {torch.version.cuda}")
    print(f"model: GPT-2 124M shape ({LAYERS} layers, d_model {D_MODEL}, {HEADS} heads), "
          f"batch {BATCH}, sequence {SEQ}, bf16; {args.iterations} timed runs after "
          f"{args.warmup} warm-up")

    with tempfile.TemporaryDirectory() as work:
        model_path, io = os.path.join(work, "model.pt"), os.path.join(work, "io")
        subprocess.run([sys.executable, os.path.join(ROOT, "examples", "export.py"), "gpt2-124m",
                        "-o", model_path, "--io", io], check=True)
        plan = os.path.join(work, "plan")
        subprocess.run([args.cleave, "compile", model_path, "--dtype", "bf16", "-o", plan],
                       check=True, stdout=subprocess.DEVNULL)
        out = os.path.join(work, "cleave.safetensors")
        try:
            cleave_s = run_cleave(args.cleave, plan, "cuda", os.path.join(io, "inputs.safetensors"),
                                  out, args.iterations + args.warmup, args.timeout)
        except RunError as e:
            die(str(e))
        cleave_logits = load_file(out)["output_0"].float()

        # The Python module with the exported weights (strict: every tensor), cast to bf16.
        eager_module = models.GPT(vocab_size=VOCAB, block_size=SEQ, n_layer=LAYERS,
                                  n_head=HEADS, d_model=D_MODEL)
        eager_module.load_state_dict(torch.jit.load(model_path).state_dict(), strict=True)
        eager_module = eager_module.to("cuda").to(torch.bfloat16).eval()
        idx = load_file(os.path.join(io, "inputs.safetensors"))["idx"].to("cuda")
        with torch.inference_mode():
            eager_s = time_torch(eager_module, idx, args.warmup, args.iterations)
            reference = eager_module(idx).float().cpu()
            compiled = torch.compile(eager_module)
            compiled_s = time_torch(compiled, idx, args.warmup, args.iterations)

    print_table(forward_flops(BATCH, SEQ, LAYERS, D_MODEL, VOCAB), peak,
                [("PyTorch eager", eager_s), ("torch.compile", compiled_s),
                 ("cleave (cuda)", cleave_s)])
    diff = (cleave_logits - reference).abs().max().item()
    print(f"max |cleave - eager| over the logits: {diff:.4g} "
          f"(max |eager| {reference.abs().max().item():.4g})")


# --------------------------------------------------------------------------------------------
# --prepare: a plan without its weights.
# --------------------------------------------------------------------------------------------

def read_header(path):
    """(header bytes, parsed header, data section offset) of a safetensors file."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            die(f"{path}: not a safetensors file (shorter than 8 bytes)")
        (n,) = struct.unpack("<Q", head)
        raw = f.read(n)
    if len(raw) != n:
        die(f"{path}: truncated safetensors header")
    try:
        return raw, json.loads(raw), 8 + n
    except ValueError as e:
        die(f"{path}: malformed safetensors header: {e}")


def tensor_bytes(t):
    return t.detach().cpu().contiguous().reshape(-1).view(__import__("torch").uint8).numpy().tobytes()


def torch_dtype(name, where):
    import torch
    if name not in _ST_DTYPES:
        die(f"{where}: unsupported dtype {name}")
    return getattr(torch, _ST_DTYPES[name])


def strip_plan_weights(plan, state):
    """Replaces each program's weights file of `plan` by its manifest (the safetensors header,
    verbatim) and PROGRAM.kept.safetensors (the tensors that are not in `state`, the model's
    state_dict); every tensor that is in it must equal it cast to the plan's dtype, bit for bit.
    Returns a line per program."""
    import torch
    from safetensors_io import save_file
    with open(os.path.join(plan, "manifest.json")) as f:
        plan_manifest = json.load(f)
    summary = []
    for program, info in plan_manifest["programs"].items():
        weights = os.path.join(plan, info["weights"])
        raw, header, data_start = read_header(weights)
        with open(weights, "rb") as f:
            blob = f.read()[data_start:]
        kept, params = {}, 0
        for name, entry in header.items():
            if name == "__metadata__":
                continue
            begin, end = entry["data_offsets"]
            dtype = torch_dtype(entry["dtype"], f"{weights}: tensor '{name}'")
            if name in state:
                source = state[name]
                if list(source.shape) != list(entry["shape"]):
                    die(f"{weights}: tensor '{name}' has shape {entry['shape']}, the model's "
                        f"state_dict {list(source.shape)}: the plan does not store it as a "
                        "parameter; it cannot be rebuilt from a fresh model")
                if tensor_bytes(source.to(dtype)) != blob[begin:end]:
                    die(f"{weights}: tensor '{name}' differs from the state_dict's tensor cast to "
                        f"{entry['dtype']}: it cannot be rebuilt from a fresh model")
                params += 1
            else:
                kept[name] = torch.frombuffer(bytearray(blob[begin:end]), dtype=torch.uint8) \
                    .view(dtype).reshape(entry["shape"]) if end > begin else \
                    torch.empty(entry["shape"], dtype=dtype)
        kept_bytes = sum(t.numel() * t.element_size() for t in kept.values())
        if kept_bytes > KEPT_LIMIT:
            big = sorted(kept, key=lambda k: -kept[k].numel() * kept[k].element_size())[:5]
            die(f"{weights}: {kept_bytes} bytes of non-parameter tensors (largest: "
                f"{', '.join(big)}); more than {KEPT_LIMIT} bytes would travel with the plan")
        stem = os.path.splitext(weights)[0]
        save_file(kept, stem + ".kept.safetensors")
        manifest = {"format": "cuda_gpt2-weights-manifest", "version": 1, "program": program,
                    "file": info["weights"], "header": raw.decode("utf-8"),
                    "data_bytes": len(blob),
                    "tensors": [{"name": k, "dtype": v["dtype"], "shape": v["shape"],
                                 "data_offsets": v["data_offsets"],
                                 "source": "kept" if k in kept else "state_dict"}
                                for k, v in header.items() if k != "__metadata__"]}
        with open(stem + ".manifest.json", "w") as f:
            json.dump(manifest, f, indent=1)
        os.remove(weights)
        summary.append(f"{program}: {params} parameter tensors removed ({len(blob) / 1e6:.1f} MB), "
                       f"{len(kept)} kept ({kept_bytes} bytes)")
    return summary


def prepare(args):
    import torch
    if args.config not in CONFIGS:
        die(f"unknown --config '{args.config}'; choose one of: {', '.join(CONFIGS)}")
    export_args, kwargs = CONFIGS[args.config]
    out = os.path.abspath(args.prepare)
    plan = os.path.join(out, "plan")
    if os.path.exists(plan):
        die(f"{plan} exists already; give --prepare a new or empty folder")
    os.makedirs(out, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out, prefix=".export-") as work:
        model_path = os.path.join(work, "model.pt")
        subprocess.run([sys.executable, os.path.join(ROOT, "examples", "export.py"), *export_args,
                        "-o", model_path, "--seed", str(args.seed)], check=True)
        try:
            subprocess.run([args.cleave, "compile", model_path, "--dtype", "bf16", "-o", plan],
                           check=True, stdout=subprocess.DEVNULL)
        except FileNotFoundError:
            die(f"no cleave compiler at '{args.cleave}' (pass --cleave PATH)")
        state = torch.jit.load(model_path).state_dict()

    summary = strip_plan_weights(plan, state)
    # The IR dumps are for people, not for the runtime.
    shutil.rmtree(os.path.join(plan, "ir"), ignore_errors=True)
    with open(os.path.join(out, "prepare.json"), "w") as f:
        json.dump({"format": "cuda_gpt2-prepare", "version": 1, "config": args.config,
                   "model": kwargs, "dtype": "bf16", "export_seed": args.seed}, f, indent=1)
    size = sum(os.path.getsize(os.path.join(d, n)) for d, _, files in os.walk(out) for n in files)
    for line in summary:
        print(line)
    print(f"prepared {out}: {size / 1e6:.2f} MB in all")


# --------------------------------------------------------------------------------------------
# --plan: rebuild the weights and run (runtime only).
# --------------------------------------------------------------------------------------------

def fresh_model(kwargs, seed):
    """models.GPT of `kwargs` from `seed`, in eval mode, with every bias and LayerNorm parameter
    moved off its 0/1 init (seeded noise), so a tensor written under the wrong name shows up
    in the comparison."""
    import torch
    import models
    torch.manual_seed(seed)
    model = models.GPT(**kwargs).eval()
    gen = torch.Generator().manual_seed(seed + 1000)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() == 1:
                p.add_(0.02 * torch.randn(p.shape, generator=gen))
    return model


def rebuild_weights(plan, model):
    """Writes every program's weights file of `plan` from its manifest and `model`'s state_dict.
    Every parameter of `model` must be in the plan (a model with more layers is an error too)."""
    from safetensors_io import load_file
    state = model.state_dict()
    with open(os.path.join(plan, "manifest.json")) as f:
        plan_manifest = json.load(f)
    written = set()
    for program, info in plan_manifest["programs"].items():
        weights = os.path.join(plan, info["weights"])
        stem = os.path.splitext(weights)[0]
        mpath = stem + ".manifest.json"
        if not os.path.exists(mpath):
            die(f"{mpath} is missing: prepare the plan with --prepare")
        with open(mpath) as f:
            manifest = json.load(f)
        kept = load_file(stem + ".kept.safetensors")
        raw = manifest["header"].encode("utf-8")
        header = json.loads(raw)
        data = bytearray(manifest["data_bytes"])
        for entry in manifest["tensors"]:
            name, shape = entry["name"], list(entry["shape"])
            if header.get(name, {}).get("data_offsets") != entry["data_offsets"]:
                die(f"{mpath}: tensor '{name}' disagrees with the recorded header")
            dtype = torch_dtype(entry["dtype"], f"{mpath}: tensor '{name}'")
            if entry["source"] == "kept":
                if name not in kept:
                    die(f"{stem}.kept.safetensors has no tensor '{name}'")
                t = kept[name]
                if t.dtype != dtype:
                    die(f"{stem}.kept.safetensors: tensor '{name}' is {t.dtype}, the manifest "
                        f"says {entry['dtype']}")
            else:
                if name not in state:
                    die(f"the plan's weight '{name}' is not in the model's state_dict (model "
                        f"tensors: {', '.join(list(state)[:8])}, ...)")
                t = state[name].detach().to(dtype)
            if list(t.shape) != shape:
                die(f"tensor '{name}': the plan records shape {shape}, the model has "
                    f"{list(t.shape)}")
            b = tensor_bytes(t)
            begin, end = entry["data_offsets"]
            if len(b) != end - begin:
                die(f"tensor '{name}': {len(b)} bytes, the plan reserves {end - begin}")
            data[begin:end] = b
            written.add(name)
        missing = set(header) - {"__metadata__"} - {e["name"] for e in manifest["tensors"]}
        if missing:
            die(f"{mpath}: the header has tensors the manifest does not list: {sorted(missing)}")
        with open(weights, "wb") as f:
            f.write(struct.pack("<Q", len(raw)))
            f.write(raw)
            f.write(data)
    unused = [n for n, _ in model.named_parameters() if n not in written]
    if unused:
        die(f"the model has parameters the plan does not: {', '.join(unused[:8])}"
            f"{', ...' if len(unused) > 8 else ''}; prepare.json and the plan disagree")
    return plan_manifest


def read_prepared(directory):
    """(absolute DIR, its prepare.json) of a directory --prepare wrote."""
    src = os.path.abspath(directory)
    try:
        with open(os.path.join(src, "prepare.json")) as f:
            return src, json.load(f)
    except FileNotFoundError:
        die(f"{src}/prepare.json is missing: make DIR with --prepare DIR first")


def plan_mode(args):
    import torch
    from safetensors_io import load_file, save_file
    src, prepared = read_prepared(args.plan)
    kwargs = prepared["model"]
    cuda = torch.cuda.is_available()
    with tempfile.TemporaryDirectory(prefix="cuda_gpt2-") as work:
        plan = os.path.join(work, "plan")
        shutil.copytree(os.path.join(src, "plan"), plan)
        model = fresh_model(kwargs, args.seed)
        plan_manifest = rebuild_weights(plan, model)
        if len(plan_manifest["inputs"]) != 1 or plan_manifest["inputs"][0]["dtype"] != "i64":
            die(f"the plan's inputs are {plan_manifest['inputs']}; expected one i64 token input")
        spec = plan_manifest["inputs"][0]
        batch, seq = spec["shape"]
        gen = torch.Generator().manual_seed(args.seed + 2000)
        idx = torch.randint(0, kwargs["vocab_size"], (batch, seq), dtype=torch.int64, generator=gen)
        inputs = os.path.join(work, "inputs.safetensors")
        save_file({spec["name"]: idx}, inputs)
        out = os.path.join(work, "cleave.safetensors")

        device = torch.cuda.get_device_name(0) if cuda else "no CUDA GPU (PyTorch)"
        print(f"device: {device}; PyTorch {torch.__version__}; CUDA {torch.version.cuda}")
        print(f"model: GPT ({kwargs['n_layer']} layers, d_model {kwargs['d_model']}, "
              f"{kwargs['n_head']} heads, vocabulary {kwargs['vocab_size']}), batch {batch}, "
              f"sequence {seq}, bf16, weights rebuilt from seed {args.seed}; runtime "
              f"{args.runtime} --backend {args.backend}; {args.iterations} timed runs after "
              f"{args.warmup} warm-up")
        result = {"device": device, "torch": torch.__version__, "backend": args.backend,
                  "runtime": args.runtime, "batch": batch, "seq": seq, "model": kwargs,
                  "iterations": args.iterations, "warmup": args.warmup}

        def save():  # after every step, so a later failure or a kill keeps what was measured
            if args.json:
                with open(args.json, "w") as f:
                    json.dump(result, f, indent=1)

        # A failed run is recorded and PyTorch is still timed: one trip to the GPU tells both.
        cleave_s = cleave_logits = None
        try:
            cleave_s = run_cleave(args.runtime, plan, args.backend, inputs, out,
                                  args.iterations + args.warmup, args.timeout)
            cleave_logits = load_file(out)["output_0"].float()
        except RunError as e:
            print(f"cuda_gpt2.py: error: {e}")
            result["cleave_error"] = str(e)
        result["cleave_s"] = cleave_s
        save()
        if args.profile and cleave_s is not None:
            # One more run with --profile: the time per kernel (each instruction
            # waited for, so the sum exceeds the forward's median).
            run = subprocess.run([args.runtime, "run", plan, "--backend", args.backend, "--inputs",
                                  inputs, "--outputs", out, "--repeat", "3", "--profile"],
                                 capture_output=True, text=True, timeout=args.timeout)
            print("cleave --profile:\n" + run.stderr[-4000:])

    ref_model = fresh_model(kwargs, args.reference_seed) if args.reference_seed is not None \
        else model
    rows = []
    if cuda:
        bf16 = ref_model.to("cuda").to(torch.bfloat16).eval()
        x = idx.to("cuda")
        with torch.inference_mode():
            eager_s = time_torch(bf16, x, args.warmup, args.iterations)
            reference = bf16(x).float().cpu()
            if args.profile:
                from torch.profiler import profile, ProfilerActivity
                with profile(activities=[ProfilerActivity.CUDA]) as prof:
                    bf16(x)
                    torch.cuda.synchronize()
                print("PyTorch eager, CUDA kernels:")
                print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=20))
            result["eager_s"] = eager_s
            save()
            try:
                compiled_s = time_torch(torch.compile(bf16), x, args.warmup, args.iterations)
            except Exception as e:  # torch.compile needs a working compiler tool chain
                print(f"torch.compile failed: {first_line(e)}")
                result["compile_error"] = first_line(e)
                compiled_s = None
        rows.append(("PyTorch eager", eager_s))
        if compiled_s:
            rows.append(("torch.compile", compiled_s))
        result["compiled_s"] = compiled_s
        save()
        ref_label = "PyTorch eager (bf16, GPU)"
    else:
        print("PyTorch sees no CUDA GPU: PyTorch eager and torch.compile are not timed; the check "
              "compares with PyTorch on the CPU (the same weights rounded to bf16, in f32)")
        rounded = ref_model.to(torch.bfloat16).to(torch.float32).eval()
        with torch.no_grad():
            reference = rounded(idx).float()
        ref_label = "PyTorch (bf16-rounded weights, f32, CPU)"
    if cleave_s is not None:
        rows.append((f"cleave ({args.backend})", cleave_s))

    name = torch.cuda.get_device_name(0) if cuda else ""
    peak = args.peak_tflops or next((v for k, v in PEAKS if k in name), None)
    print_table(forward_flops(batch, seq, kwargs["n_layer"], kwargs["d_model"],
                              kwargs["vocab_size"]), peak, rows)
    if cleave_logits is None:
        sys.exit(1)
    if cleave_logits.shape != reference.shape:
        result["ok"] = False
        save()
        die(f"cleave's logits are {tuple(cleave_logits.shape)}, PyTorch's "
            f"{tuple(reference.shape)}")
    diff = (cleave_logits - reference).abs().max().item()
    scale = reference.abs().max().item()
    bound = args.tol * scale if args.tol is not None else 2 * 2 ** -8 * (kwargs["n_layer"] + 1) * scale
    ok = diff <= bound and bool(torch.isfinite(cleave_logits).all())
    print(f"max |cleave - {ref_label}| over the logits: {diff:.4g} (max |reference| {scale:.4g}; "
          f"bound {bound:.4g}): {'ok' if ok else 'MISMATCH'}")
    result.update(max_abs_diff=diff, max_abs_reference=scale, bound=bound, ok=ok)
    save()
    if not ok:
        sys.exit(1)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--peak-tflops", type=float, help="the GPU's dense bf16 peak (default: by name)")
    p.add_argument("--cleave", default=os.path.join(ROOT, "build", "bin", "cleave"),
                   help="the cleave compiler (full mode and --prepare)")
    p.add_argument("--timeout", type=float, default=600,
                   help="seconds the runtime may take (default 600)")
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--prepare", metavar="DIR", help="export and compile into DIR, without weights")
    mode.add_argument("--plan", metavar="DIR", help="run the plan prepared in DIR")
    p.add_argument("--config", default="124m", help="--prepare: 124m (default) or tiny")
    p.add_argument("--seed", type=int, default=0,
                   help="--prepare: the export's seed; --plan: the rebuilt weights' seed")
    p.add_argument("--runtime", help="--plan: the cleave runtime binary (cleave-runtime, or cleave)")
    p.add_argument("--backend", default="cuda", choices=["cuda", "cpu", "auto"],
                   help="--plan: the runtime's backend (default cuda)")
    p.add_argument("--tol", type=float,
                   help="--plan: the bound on max|cleave - reference| relative to max|reference| "
                        "(default 2u(L+1), u = 2^-8)")
    p.add_argument("--reference-seed", type=int,
                   help="--plan, for testing the check: PyTorch uses a model from this seed "
                        "instead, so the comparison must fail")
    p.add_argument("--json", metavar="OUT", help="--plan: also write the results as JSON")
    p.add_argument("--profile", action="store_true",
                   help="--plan: also print cleave's time per kernel and PyTorch eager's CUDA "
                        "kernels")
    args = p.parse_args()
    if args.prepare:
        prepare(args)
    elif args.plan:
        if not args.runtime:
            p.error("--plan needs --runtime PATH")
        plan_mode(args)
    else:
        full_mode(args)


if __name__ == "__main__":
    main()
