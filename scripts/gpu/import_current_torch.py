#!/usr/bin/python3
"""Unpacks what scripts/gpu/export_current_torch.py wrote on another machine and, per model,
checks that torch 1.13 loads the file, that cleave imports and compiles it, and that
`cleave run --backend cpu` matches the exporter's outputs (test/e2e/compare_outputs.py).

    /usr/bin/python3 scripts/gpu/import_current_torch.py DIR [--cleave PATH] [--tol 1e-4]
        [--scale-floor 1] [--timeout 1800] [--models a,b]

DIR holds exports-K.tar.xz (or exports.tar.xz.part-K) and export-report.json. Unpacks into
DIR/unpacked; plans and outputs go to DIR/unpacked/NAME.plan and NAME-cleave.safetensors.
Prints one line per model and writes DIR/import-report.json. Exit status 0 when every model
matches, 1 otherwise.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tarfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
PY = "/usr/bin/python3"

LOAD_CHECK = r"""
import sys, torch
sys.path.insert(0, sys.argv[4])
from safetensors_io import load_file
m = torch.jit.load(sys.argv[1])
inputs = load_file(sys.argv[2])
expected = load_file(sys.argv[3])
with torch.no_grad():
    out = m(*inputs.values())
outs = list(out) if isinstance(out, (tuple, list)) else [out]
worst = 0.0
for i, t in enumerate(outs):
    e = expected[f"output_{i}"]
    worst = max(worst, float((t.double() - e.double()).abs().max()) / max(1.0, float(e.abs().max())))
print(f"torch {torch.__version__} runs it: max relative error {worst:.3g}")
sys.exit(0 if worst <= 1e-4 else 3)
"""


def step(cmd, timeout):
    t0 = time.time()
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        text = (r.stdout + r.stderr).strip()
        return r.returncode, text, round(time.time() - t0, 1)
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s", round(time.time() - t0, 1)
    except OSError as e:
        return None, f"cannot run {cmd[0]}: {e}", 0.0


def unpack(folder, dest):
    os.makedirs(dest, exist_ok=True)
    archives = sorted(glob.glob(os.path.join(folder, "exports-*.tar.xz")))
    parts = sorted(glob.glob(os.path.join(folder, "exports.tar.xz.part-*")),
                   key=lambda p: int(p.rsplit("-", 1)[1]))
    if parts:
        joined = os.path.join(dest, "all.tar.xz")
        with open(joined, "wb") as out:
            for p in parts:
                with open(p, "rb") as f:
                    out.write(f.read())
        archives.append(joined)
    if not archives:
        sys.exit(f"import_current_torch: error: no exports-*.tar.xz or exports.tar.xz.part-* "
                 f"in {folder}")
    for a in archives:
        with tarfile.open(a, "r:xz") as tar:
            for member in tar.getmembers():
                if not member.isfile() or os.path.basename(member.name) != member.name:
                    sys.exit(f"import_current_torch: error: {a}: unexpected member {member.name}")
            tar.extractall(dest)
    return [os.path.basename(a) for a in archives]


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dir")
    p.add_argument("--cleave", default=os.path.join(ROOT, "build", "bin", "cleave"))
    p.add_argument("--tol", default="1e-4")
    p.add_argument("--scale-floor", default="1")
    p.add_argument("--timeout", type=float, default=1800, help="seconds per step (default 1800)")
    p.add_argument("--models", help="comma-separated subset (default: every NAME.pt)")
    args = p.parse_args()

    dest = os.path.join(args.dir, "unpacked")
    archives = unpack(args.dir, dest)
    names = sorted(os.path.basename(f)[:-3] for f in glob.glob(os.path.join(dest, "*.pt")))
    if args.models:
        wanted = args.models.split(",")
        missing = [m for m in wanted if m not in names]
        if missing:
            sys.exit(f"import_current_torch: error: not in the archives: {missing} (have {names})")
        names = wanted
    results = []
    for name in names:
        pt = os.path.join(dest, f"{name}.pt")
        inputs = os.path.join(dest, f"{name}-inputs.safetensors")
        expected = os.path.join(dest, f"{name}-outputs.safetensors")
        plan = os.path.join(dest, f"{name}.plan")
        actual = os.path.join(dest, f"{name}-cleave.safetensors")
        r = {"model": name}
        steps = [
            ("torch_loads", [PY, "-c", LOAD_CHECK, pt, inputs, expected,
                             os.path.join(ROOT, "examples")]),
            ("imports", [args.cleave, "import", pt, "--summary"]),
            ("compiles", [args.cleave, "compile", pt, "-o", plan]),
            ("runs", [args.cleave, "run", plan, "--backend", "cpu", "--inputs", inputs,
                      "--outputs", actual]),
            ("matches", [PY, os.path.join(ROOT, "test", "e2e", "compare_outputs.py"), expected,
                         actual, "--tol", args.tol, "--scale-floor", args.scale_floor]),
        ]
        for key, cmd in steps:
            if key != "torch_loads" and r.get("blocked"):
                r[key] = None
                continue
            rc, text, secs = step(cmd, args.timeout)
            r[key] = rc == 0
            r[f"{key}_s"] = secs
            if key in ("torch_loads", "matches") or rc != 0:
                r[f"{key}_text"] = text[-3000:] if rc != 0 else text[-500:]
            if rc != 0 and key != "torch_loads":
                r["blocked"] = key
        results.append(r)
        verdict = "MATCHES" if r.get("matches") else f"fails at {r.get('blocked')}"
        print(f"{name}: torch 1.13 loads {'yes' if r['torch_loads'] else 'NO'}; "
              f"imports {r['imports']}; compiles {r['compiles']}; runs {r['runs']}; "
              f"matches {r['matches']}: {verdict}")
        if r.get("blocked"):
            print("  " + r[f"{r['blocked']}_text"].replace("\n", "\n  ")[:2000])
    with open(os.path.join(args.dir, "import-report.json"), "w") as f:
        json.dump({"archives": archives, "cleave": args.cleave, "models": results}, f, indent=1)
    sys.exit(0 if results and all(r.get("matches") for r in results) else 1)


if __name__ == "__main__":
    main()
