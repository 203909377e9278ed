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

usage: /usr/bin/python3 bench/cuda_gpt2.py [--iterations N] [--warmup N]
           [--peak-tflops T] [--cleave PATH]
Needs PyTorch with CUDA and a GPU; it exits with a clear error otherwise.
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "examples"))

LAYERS, D_MODEL, HEADS, SEQ, BATCH, VOCAB = 12, 768, 12, 1024, 8, 50257

# Dense bf16 tensor-core peaks (TFLOP/s) from the vendor's data sheets.
PEAKS = [("H200", 989.4), ("H100 PCIe", 756.0), ("H100", 989.4), ("A100", 312.0)]


def forward_flops():
    tokens = BATCH * SEQ
    per_layer = 2 * tokens * D_MODEL * (3 * D_MODEL + D_MODEL + 8 * D_MODEL)
    attention = 2 * 2 * BATCH * SEQ * SEQ * D_MODEL
    head = 2 * tokens * D_MODEL * VOCAB
    return LAYERS * (per_layer + attention) + head


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


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--iterations", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--peak-tflops", type=float, help="the GPU's dense bf16 peak (default: by name)")
    p.add_argument("--cleave", default=os.path.join(ROOT, "build", "bin", "cleave"))
    args = p.parse_args()

    import torch
    if not torch.cuda.is_available():
        sys.exit("cuda_gpt2.py: error: PyTorch sees no CUDA GPU here; run it on a GPU machine")
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
        run = subprocess.run([args.cleave, "run", plan, "--backend", "cuda", "--inputs",
                              os.path.join(io, "inputs.safetensors"), "--outputs", out,
                              "--repeat", str(args.iterations + args.warmup), "--timing"],
                             check=True, capture_output=True, text=True)
        match = re.search(r"forward median ([0-9.e-]+) s", run.stderr)
        if not match:
            sys.exit(f"cuda_gpt2.py: error: no forward time in cleave's output:\n{run.stderr}")
        cleave_s = float(match.group(1))
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

    flops = forward_flops()
    diff = (cleave_logits - reference).abs().max().item()
    print(f"forward FLOPs: {flops / 1e12:.3f} TFLOP; peak {peak or 'unknown'} TFLOP/s (bf16 dense)")
    print()
    print("| engine | forward ms | vs eager | TFLOP/s | of peak |")
    print("|---|---:|---:|---:|---:|")
    for label, seconds in [("PyTorch eager", eager_s), ("torch.compile", compiled_s),
                           ("cleave (cuda)", cleave_s)]:
        tflops = flops / seconds / 1e12
        share = f"{100 * tflops / peak:.1f} %" if peak else "n/a"
        print(f"| {label} | {seconds * 1e3:.2f} | {eager_s / seconds:.2f}x | {tflops:.1f} | {share} |")
    print()
    print(f"max |cleave - eager| over the logits: {diff:.4g} "
          f"(max |eager| {reference.abs().max().item():.4g})")


if __name__ == "__main__":
    main()
