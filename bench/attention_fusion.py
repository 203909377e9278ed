#!/usr/bin/env python3
"""Benchmark: CPU forward of the tiny GPT at a long sequence with attention fused
(cleave.attention, the default) and unfused (--no-fuse-attention), in one run.

Exports the model once, compiles it both ways, then runs the two plans in
alternation (`cleave run --repeat R --timing`, each run a fresh process) so that
both see the same machine load, and prints each plan's median forward time, its
arena, and the fused/unfused ratios. Both plans' outputs are checked against
PyTorch's with test/e2e/compare_outputs.py.

usage: bench/attention_fusion.py [--seq 512] [--batch 2] [--rounds 5] [--repeat 5]
                                 [--threads N] [--cleave BIN]
"""
import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile

from benchlib import ROOT, machine


def run(cmd, **kwargs):
    result = subprocess.run(cmd, capture_output=True, text=True, **kwargs)
    if result.returncode != 0:
        sys.exit(f"attention_fusion.py: {' '.join(cmd)} failed:\n{result.stdout}{result.stderr}")
    return result


def forward_seconds(cleave, plan, inputs, outputs, repeat, threads):
    """Median forward time of `repeat` runs in one process, from `cleave run --timing`."""
    cmd = [cleave, "run", plan, "--inputs", inputs, "--outputs", outputs,
           "--repeat", str(repeat), "--timing"]
    if threads:
        cmd += ["--threads", str(threads)]
    text = run(cmd).stderr
    match = re.search(r"forward median ([0-9.eE+-]+) s", text)
    if not match:
        sys.exit(f"attention_fusion.py: no forward time in `cleave run --timing` output:\n{text}")
    return float(match.group(1))


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seq", type=int, default=512)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5, help="alternations of the two plans")
    p.add_argument("--repeat", type=int, default=5, help="forwards per `cleave run`")
    p.add_argument("--threads", type=int, default=0, help="kernel threads (default: cleave's)")
    p.add_argument("--cleave", default=os.path.join(ROOT, "build", "bin", "cleave"))
    args = p.parse_args()
    if not os.access(args.cleave, os.X_OK):
        sys.exit(f"attention_fusion.py: no cleave binary at {args.cleave}: build it first")

    print(f"machine: {machine(load=True)}")
    print(f"model: tiny GPT (2 layers, 4 heads, d 32), batch {args.batch}, sequence {args.seq}")
    with tempfile.TemporaryDirectory() as work:
        model = os.path.join(work, "gpt.pt")
        run(["/usr/bin/python3", os.path.join(ROOT, "examples", "export.py"), "gpt", "--config",
             "tiny", "--batch", str(args.batch), "--seq", str(args.seq), "--max-seq",
             str(args.seq), "-o", model, "--io", work])
        inputs = os.path.join(work, "inputs.safetensors")
        plans, arenas = {}, {}
        for name, flags in (("fused", []), ("unfused", ["--no-fuse-attention"])):
            plans[name] = os.path.join(work, name)
            text = run([args.cleave, "compile", model, "-o", plans[name]] + flags).stdout
            arenas[name] = float(re.search(r"arena ([0-9.]+) MiB", text).group(1))
        times = {name: [] for name in plans}
        for _ in range(args.rounds):
            for name, plan in plans.items():
                out = os.path.join(work, f"{name}.safetensors")
                times[name].append(
                    forward_seconds(args.cleave, plan, inputs, out, args.repeat, args.threads))
        for name in plans:
            out = os.path.join(work, f"{name}.safetensors")
            check = run(["/usr/bin/python3", os.path.join(ROOT, "test", "e2e", "compare_outputs.py"),
                         os.path.join(work, "outputs.safetensors"), out]).stdout.strip()
            median = statistics.median(times[name])
            print(f"{name:8s} forward {median * 1e3:8.2f} ms (median of {args.rounds} x "
                  f"{args.repeat} runs each, min {min(times[name]) * 1e3:.2f} ms)  arena "
                  f"{arenas[name]:7.2f} MiB  vs PyTorch: {check.splitlines()[-1]}")
        ratio = statistics.median(times["unfused"]) / statistics.median(times["fused"])
        print(f"fused is {ratio:.2f}x the speed of unfused; arena {arenas['fused']:.2f} MiB "
              f"vs {arenas['unfused']:.2f} MiB ({arenas['unfused'] / arenas['fused']:.1f}x smaller)")


if __name__ == "__main__":
    main()
