"""Training on the GPU against PyTorch: the cases, prepared on a build machine, checked on a GPU one.

usage: training_check.py prepare OUT --cleave BIN [--python PY] [--only CASE,...]
       training_check.py check PREPARED --runtime BIN [--backend cuda|cpu] [--python PY]
                         [--json OUT.json] [--reference-device cuda|cpu|none] [--timeout S]

prepare (where the compiler is): exports each case's model in training mode with its data
(examples/export.py --train), compiles its training plan (`cleave compile --mode train`), and
trains it with PyTorch on this machine's CPU (test/train/reference.py): the losses, and the final
weights where the case compares them. Writes OUT/CASE/{model.pt, data.safetensors, plan/,
ref.jsonl, ref.safetensors} and OUT/cases.json.

check (the GPU machine, which has only the runtime bundle and PyTorch): trains each plan with
`cleave-runtime train --backend cuda`, trains the same model with the machine's PyTorch on the
same GPU (reference.py --device cuda: TF32 off, deterministic algorithms; the eager Python
module export.py builds, with the exported weights, since a traced file keeps the CPU devices it
was traced on), and compares cleave with both
references (test/train/compare_training.py: every step's loss within rtol of the reference's,
the weights within wtol of max(1, max|ref|)), and checks that the memory the runtime allocated
is the plan's prediction (its --report). The bounds are those of the CPU tests
(docs/training.md): f32 1e-4 on the losses and the weights; bf16 mixed precision 2e-2 on the
losses against the f32 reference. Prints one line per case and comparison; exits 1 if any
comparison failed. --json writes the results.
"""
import argparse
import json
import os
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
EXPORT = os.path.join(ROOT, "examples", "export.py")
REFERENCE = os.path.join(ROOT, "test", "train", "reference.py")
COMPARE = os.path.join(ROOT, "test", "train", "compare_training.py")

# name, export flags, compile (= reference) training flags, steps, compare weights, dtype.
CASES = [
    ("gpt-adamw", "gpt --config tiny --dropout 0 --train --loss-in-model cross_entropy --samples 16",
     "--lr 0.003 --clip-grad-norm 0.5 --lr-schedule cosine --warmup-steps 3 --decay-steps 12",
     12, False, "f32"),
    ("gpt-sgd", "gpt --config tiny --dropout 0 --train --samples 8 --labels cross_entropy",
     "--loss cross_entropy --optimizer sgd --lr 0.5", 10, True, "f32"),
    ("mlp-sgd-momentum", "mlp --config tiny --dropout 0 --train --loss-in-model mse --samples 12",
     "--optimizer sgd --lr 0.05 --momentum 0.9 --dampening 0.1 --weight-decay 0.01", 12, True,
     "f32"),
    ("llama-adamw", "llama --config tiny --train --loss-in-model cross_entropy --samples 12",
     "--lr 0.003 --weight-decay 0.1 --betas 0.9,0.95 --lr-schedule linear --warmup-steps 2 "
     "--decay-steps 20", 12, True, "f32"),
    # resnet18's 11.7M weights would not travel (64 MiB for everything): tiled from a small
    # pool they compress to almost nothing; the trained ones would not, so only the losses.
    ("resnet18-sgd", "resnet18 --config tiny --batch 8 --train --loss-in-model cross_entropy "
     "--samples 80 --tiled-weights", "--optimizer sgd --lr 0.0005 --momentum 0.9 "
     "--weight-decay 0.0001", 8, False, "f32"),
    ("gpt-bf16", "gpt --config tiny --dropout 0 --train --samples 80 --labels cross_entropy",
     "--loss cross_entropy --lr 0.001", 10, False, "bf16"),
]


def run(cmd, log, timeout):
    """Runs cmd (a list), appending its output to log; returns (ok, seconds)."""
    start = time.time()
    with open(log, "a") as out:
        out.write("$ " + " ".join(cmd) + "\n")
        out.flush()
        try:
            rc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            out.write(f"timed out after {timeout} s\n")
            rc = 124
    return rc == 0, time.time() - start


def eager_args(export):
    """The export's arguments that build the model (not its data): reference.py --eager."""
    words, kept = export.split(), []
    while words:
        w = words.pop(0)
        if w in ("--samples", "--labels", "--data"):
            words.pop(0)
        else:
            kept.append(w)
    return " ".join(kept)


def prepare(a):
    os.makedirs(a.out, exist_ok=True)
    cases = []
    only = set(a.only.split(",")) if a.only else None
    unknown = only - {c[0] for c in CASES} if only else set()
    if unknown:
        sys.exit(f"training_check: no case {', '.join(sorted(unknown))}; the cases: "
                 f"{', '.join(c[0] for c in CASES)}")
    for name, export, flags, steps, weights, dtype in CASES:
        if only and name not in only:
            continue
        d = os.path.join(a.out, name)
        os.makedirs(d, exist_ok=True)
        log = os.path.join(d, "prepare.log")
        model, data, plan = (os.path.join(d, f) for f in ("model.pt", "data.safetensors", "plan"))
        dtype_flags = ["--dtype", "bf16"] if dtype == "bf16" else []
        steps_flags = ["--steps", str(steps)]
        ok = (run([a.python, EXPORT] + export.split() + ["-o", model, "--data", data], log, 300)[0]
              and run([a.cleave, "compile", model, "--mode", "train"] + flags.split() + dtype_flags
                      + ["-o", plan], log, 300)[0]
              and run([a.python, REFERENCE, model, "--data", data] + steps_flags + flags.split()
                      + ["--losses", os.path.join(d, "ref.jsonl")]
                      + (["--weights", os.path.join(d, "ref.safetensors")] if weights else []),
                      log, 600)[0])
        if not ok:
            sys.exit(f"training_check: preparing {name} failed; see {log}")
        # The plan's IR dumps are not needed to run it.
        subprocess.run(["rm", "-rf", os.path.join(plan, "ir")])
        cases.append({"name": name, "flags": flags.split(), "steps": steps, "weights": weights,
                      "dtype": dtype, "eager": eager_args(export)})
    with open(os.path.join(a.out, "cases.json"), "w") as f:
        json.dump(cases, f, indent=1)


def check(a):
    with open(os.path.join(a.prepared, "cases.json")) as f:
        cases = json.load(f)
    work = a.work or os.path.join(a.prepared, "check")
    os.makedirs(work, exist_ok=True)
    results, failed = [], 0
    for c in cases:
        name, d = c["name"], os.path.join(a.prepared, c["name"])
        w = os.path.join(work, name)
        os.makedirs(w, exist_ok=True)
        log = os.path.join(w, "check.log")
        steps = ["--steps", str(c["steps"])]
        rtol = "2e-2" if c["dtype"] == "bf16" else "1e-4"
        got, got_weights = os.path.join(w, "cleave.jsonl"), os.path.join(w, "cleave.safetensors")
        report = os.path.join(w, "report.json")
        ok, secs = run([a.runtime, "train", os.path.join(d, "plan"), "--data",
                        os.path.join(d, "data.safetensors"), "--backend", a.backend, "--log", got,
                        "--report", report]
                       + steps + (["--save-weights", got_weights] if c["weights"] else []),
                       log, a.timeout)
        row = {"case": name, "dtype": c["dtype"], "train": ok, "train_seconds": round(secs, 2)}
        if ok:
            # The static memory plan, placed in the backend's memory: what the executor
            # allocated must be the plan's prediction (kernels' own workspaces apart).
            with open(report) as f:
                memory = json.load(f)["memory_bytes"]
            row["memory"] = {k: memory[k] for k in ("predicted", "allocated", "backend_workspace")}
            if memory["allocated"] != memory["predicted"]:
                row["error"] = [f"allocated {memory['allocated']} bytes, the plan predicted "
                                f"{memory['predicted']}"]
        # The reference prepared with the build machine's PyTorch on its CPU.
        refs = [("torch-build", os.path.join(d, "ref.jsonl"), os.path.join(d, "ref.safetensors"))]
        if a.reference_device != "none":
            dev_ref = os.path.join(w, f"ref-{a.reference_device}.jsonl")
            dev_weights = os.path.join(w, f"ref-{a.reference_device}.safetensors")
            rok, _ = run([a.python, REFERENCE, os.path.join(d, "model.pt"), "--data",
                          os.path.join(d, "data.safetensors"), "--device", a.reference_device,
                          "--losses", dev_ref, "--eager", c["eager"]] + steps + c["flags"]
                         + (["--weights", dev_weights] if c["weights"] else []), log, a.timeout)
            row[f"reference_{a.reference_device}"] = rok
            if rok:
                refs.append((f"torch-{a.reference_device}", dev_ref, dev_weights))
        for ref_name, ref, ref_weights in refs:
            key = f"vs_{ref_name}"
            if not ok:
                row[key] = "not run"
                continue
            cmd = [a.python, COMPARE, ref, got, "--rtol", rtol, "--names", f"{ref_name},cleave"]
            if c["weights"]:
                cmd += ["--weights", ref_weights, got_weights]
            out = subprocess.run(cmd, capture_output=True, text=True)
            with open(log, "a") as f:
                f.write(out.stdout + out.stderr)
            lines = out.stdout.splitlines()
            row[key] = "pass" if out.returncode == 0 else "FAIL"
            row[key + "_last"] = next((l for l in reversed(lines) if l.startswith("step")), "")
            fails = [l for l in lines if "FAIL" in l]
            if fails:
                row[key + "_first_failure"] = fails[0]
        verdicts = [row.get(f"vs_{r[0]}") for r in refs]
        if not ok or "error" in row or any(v != "pass" for v in verdicts):
            failed += 1
            if not ok and "error" not in row:
                with open(log) as f:
                    row["error"] = [l.strip() for l in f if "error" in l.lower()][:2]
        results.append(row)
        print(json.dumps(row), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"backend": a.backend, "cases": results, "failed": failed}, f, indent=1)
    print(f"training_check: {len(results) - failed} of {len(results)} cases pass")
    return 1 if failed else 0


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="mode", required=True)
    pp = sub.add_parser("prepare")
    pp.add_argument("out")
    pp.add_argument("--cleave", required=True)
    pp.add_argument("--python", default=sys.executable)
    pp.add_argument("--only", metavar="CASE,...", help="prepare only these cases")
    pc = sub.add_parser("check")
    pc.add_argument("prepared")
    pc.add_argument("--runtime", required=True)
    pc.add_argument("--backend", default="cuda", choices=["cuda", "cpu"])
    pc.add_argument("--python", default=sys.executable)
    pc.add_argument("--reference-device", default="cuda", choices=["cuda", "cpu", "none"])
    pc.add_argument("--work", help="where the runs write (default PREPARED/check)")
    pc.add_argument("--json")
    pc.add_argument("--timeout", type=int, default=120, help="seconds per run")
    a = p.parse_args()
    if a.mode == "prepare":
        prepare(a)
        return 0
    return check(a)


if __name__ == "__main__":
    sys.exit(main())
