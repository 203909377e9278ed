#!/usr/bin/python3
"""The torchvision classification zoo as a conformance suite: every classification model of
Debian's torchvision (0.14), traced in eval mode with random weights at batch B and its default
resolution (the crop size of its default weights' transforms; no weights are downloaded),
compiled by cleave for one device, and run by `cleave bench` against LibTorch eager on the same
inputs and threads.

usage: /usr/bin/python3 bench/zoo.py --cleave PATH/cleave --work DIR [--models a,b,...]
           [--batch 2] [--threads N] [--iterations 3] [--timeout 900] [--max-params M]
           [--json OUT.json] [--markdown OUT.md]

A model passes when it imports, compiles, runs, and max|cleave - LibTorch| <= 1e-3 of
max|LibTorch| over its output. Prints one line per model (status, max error relative to the
output scale, cleave ms, LibTorch ms, the reason of a failure: the tool's first error line) and
a table at the end; --json and --markdown write them. Models run smallest first (by parameter
count); each step has --timeout seconds; a model's files are deleted once it is measured.
Exit status 0 when every model run passes.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOL = 1e-3


def export_one(name, work, batch):
    """Child process: traces `name` into work/model.pt with its inputs and outputs."""
    import torch
    import torchvision
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from safetensors_io import save_file

    torch.manual_seed(0)
    model = torchvision.models.get_model(name, weights=None).eval()
    # The model's own input size where it fixes one (vit_h_14's default weights are for 518,
    # the model built without them takes 224), else its default weights' crop.
    crop = torchvision.models.get_model_weights(name).DEFAULT.transforms().crop_size
    size = getattr(model, "image_size", None) or (crop[0] if isinstance(crop, (list, tuple))
                                                  else int(crop))
    x = torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(1))

    def logits(m):
        with torch.no_grad():
            y = m(x)
        return y[0] if isinstance(y, (list, tuple)) else y

    # Random weights can make the activations vanish layer by layer until the logits are the
    # classifier's bias alone, the same for every input (googlenet): nothing would be compared.
    # Then the batch norms are calibrated on the input (running statistics from one
    # training-mode pass), as if the model had been trained on it.
    calibrated = False
    if batch > 1 and _input_independent(logits(model)):
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.reset_running_stats()
                m.momentum = None
        model.train()
        logits(model)
        model.eval()
        calibrated = True
    # Heads initialised to zero (vit) give zero logits: those are drawn from N(0, 0.02).
    if batch > 1 and _input_independent(logits(model)):
        gen = torch.Generator().manual_seed(2)
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() >= 2 and not p.any():
                    p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
                    calibrated = True
    # Traced with autograd on, as export.py does: under no_grad, nn.MultiheadAttention (vit)
    # takes PyTorch's fused inference path, aten::_native_multi_head_attention, which cleave
    # does not import yet.
    traced = torch.jit.trace(model, (x,), check_trace=False)
    with torch.no_grad():
        out = traced(x)
    if isinstance(out, (list, tuple)):  # googlenet / inception in eval return the logits
        out = out[0]
    if batch > 1 and _input_independent(out):
        raise SystemExit(f"zoo.py: error: {name}'s output does not depend on its input with "
                         "random weights (even with calibrated batch norms and no zero weight "
                         "matrix): nothing to compare")
    meta = {"format": 1, "model": name,
            "inputs": [{"name": "x", "shape": list(x.shape), "dtype": "f32"}]}
    traced.save(os.path.join(work, "model.pt"), _extra_files={"cleave.json": json.dumps(meta)})
    save_file({"x": x}, os.path.join(work, "inputs.safetensors"))
    info = {"params": sum(p.numel() for p in model.parameters()), "resolution": size,
            "scale": out.abs().max().item(), "recalibrated": calibrated}
    with open(os.path.join(work, "export.json"), "w") as f:
        json.dump(info, f)


def _input_independent(out):
    """True when every row of the batch has the same output (to float precision)."""
    scale = max(out.abs().max().item(), 1e-30)
    return all((out[i] - out[0]).abs().max().item() <= 1e-6 * scale for i in range(1, len(out)))


def first_error(text):
    for line in text.splitlines():
        if "error" in line.lower():
            return line.strip()[:300]
    lines = [l for l in text.splitlines() if l.strip()]
    return (lines[-1].strip() if lines else "no output")[:300]


def run(cmd, timeout):
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s: {' '.join(cmd[:3])} ..."


def measure(name, args, params):
    row = {"model": name, "params": params, "status": "FAIL", "stage": "export"}
    work = os.path.join(args.work, name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    start = time.time()
    try:
        rc, out = run([sys.executable, os.path.abspath(__file__), "--export-one", name,
                       "--work", work, "--batch", str(args.batch)], args.timeout)
        if rc != 0:
            row["reason"] = first_error(out)
            return row
        with open(os.path.join(work, "export.json")) as f:
            row.update(json.load(f))
        row["stage"] = "compile"
        rc, out = run([args.cleave, "compile", os.path.join(work, "model.pt"), "-o",
                       os.path.join(work, "plan")], args.timeout)
        if rc != 0:
            row["reason"] = first_error(out)
            return row
        row["stage"] = "run"
        report = os.path.join(work, "bench.json")
        rc, out = run([args.cleave, "bench", os.path.join(work, "model.pt"), "--plan",
                       os.path.join(work, "plan"), "--inputs",
                       os.path.join(work, "inputs.safetensors"), "--threads", str(args.threads),
                       "--iterations", str(args.iterations), "--warmup", "1", "--json", report],
                      args.timeout)
        if rc != 0 or not os.path.exists(report):
            row["reason"] = first_error(out)
            return row
        with open(report) as f:
            bench = json.load(f)
        engines = {e["engine"]: e for e in bench["engines"]}
        row["cleave_ms"] = engines["cleave"]["median_s"] * 1e3
        row["libtorch_ms"] = min(engines["libtorch"]["median_s"],
                                 engines["libtorch*"]["median_s"]) * 1e3
        row["max_error"] = bench["max_difference"]
        row["relative_error"] = bench["max_difference"] / max(row["scale"], 1e-30)
        row["stage"] = "compare"
        if row["relative_error"] <= TOL:
            row["status"] = "pass"
            row["stage"] = "done"
        else:
            row["reason"] = (f"max |cleave - libtorch| {bench['max_difference']:.3g} is "
                             f"{row['relative_error']:.3g} of the output scale {row['scale']:.3g}")
        return row
    finally:
        row["seconds"] = round(time.time() - start, 1)
        shutil.rmtree(work, ignore_errors=True)


def line(row):
    if row["status"] == "pass":
        return (f"{row['model']}: pass, error {row['relative_error']:.2e} of scale, cleave "
                f"{row['cleave_ms']:.1f} ms, libtorch {row['libtorch_ms']:.1f} ms "
                f"({row['libtorch_ms'] / row['cleave_ms']:.2f}x)")
    return f"{row['model']}: FAIL at {row['stage']}: {row.get('reason', '?')}"


def markdown(rows, args):
    out = [f"| model | params (M) | resolution | status | max error / scale | cleave ms | "
           f"LibTorch ms | speedup | reason |", "|---|---:|---:|---|---:|---:|---:|---:|---|"]
    for r in rows:
        ok = r["status"] == "pass"
        err = f"{r['relative_error']:.1e}" if "relative_error" in r else ""
        cms = f"{r['cleave_ms']:.1f}" if "cleave_ms" in r else ""
        lms = f"{r['libtorch_ms']:.1f}" if "libtorch_ms" in r else ""
        speed = f"{r['libtorch_ms'] / r['cleave_ms']:.2f}x" if "cleave_ms" in r else ""
        reason = "" if ok else f"{r['stage']}: {r.get('reason', '')}".replace("|", "/")
        star = " *" if r.get("recalibrated") else ""
        out.append(f"| {r['model']}{star} | {r['params'] / 1e6:.1f} | {r.get('resolution', '')} | "
                   f"{r['status']} | {err} | {cms} | {lms} | {speed} | {reason} |")
    passed = sum(r["status"] == "pass" for r in rows)
    out.append("")
    out.append(f"{passed} of {len(rows)} models pass (batch {args.batch}, {args.threads} "
               f"threads, median of {args.iterations} after 1 warm-up)")
    if any(r.get("recalibrated") for r in rows):
        out.append("")
        out.append("\\* random weights made the output independent of the input: the batch "
                   "norms' running statistics were calibrated on the input first, or weight "
                   "matrices initialised to zero drawn from N(0, 0.02)")
    return "\n".join(out) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cleave", default=os.path.join(ROOT, "build", "bin", "cleave"))
    p.add_argument("--work", required=True)
    p.add_argument("--models", help="comma-separated names (default: every classification model)")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--timeout", type=float, default=900, help="seconds per step")
    p.add_argument("--max-params", type=float, help="skip models above M million parameters")
    p.add_argument("--json")
    p.add_argument("--markdown")
    p.add_argument("--export-one", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.export_one:
        export_one(args.export_one, args.work, args.batch)
        return
    import torch
    import torchvision
    names = torchvision.models.list_models(module=torchvision.models)
    if args.models:
        wanted = args.models.split(",")
        unknown = [n for n in wanted if n not in names]
        if unknown:
            sys.exit(f"zoo.py: error: not torchvision classification models: {', '.join(unknown)}")
        names = wanted
    # Smallest first, by the parameter count the weights' metadata records (nothing built).
    sizes = {n: torchvision.models.get_model_weights(n).DEFAULT.meta["num_params"] for n in names}
    names.sort(key=lambda n: sizes[n])
    if args.max_params:
        names = [n for n in names if sizes[n] <= args.max_params * 1e6]
    os.makedirs(args.work, exist_ok=True)
    rows = []
    print(f"torchvision {torchvision.__version__}, torch {torch.__version__}; {len(names)} models, "
          f"batch {args.batch}, {args.threads} threads", flush=True)
    for n in names:
        row = measure(n, args, sizes[n])
        rows.append(row)
        print(line(row), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"batch": args.batch, "threads": args.threads, "models": rows}, f,
                          indent=1)
        if args.markdown:
            with open(args.markdown, "w") as f:
                f.write(markdown(rows, args))
    passed = sum(r["status"] == "pass" for r in rows)
    print(f"models passing: {passed} of {len(rows)}")
    sys.exit(0 if passed == len(rows) else 1)


if __name__ == "__main__":
    main()
