"""Sets every field of a plan's JSON files, one at a time, to hostile values and checks that
cleave refuses or accepts each cleanly: exit 0 or 1, a `cleave: error:` line on 1, no signal,
no uncaught exception, no sanitizer report, no wait past --limit-s.

usage: sweep_fields.py --cleave BIN --plan PLAN [--inputs IN.safetensors] [--limit-s S]
                       [--files manifest.json programs/stage0_tp0.json ...]

A structured complement to the fuzzers (scripts/fuzz.sh): every leaf (the first three elements
of each list) of each file becomes, in turn, 2^63-1, -1, 2^62, 1e300, a string, [] and {}; then
`cleave verify`, `cleave inspect --json` and, with --inputs, `cleave run` (one-device plans) run on
it. It takes minutes (about 0.5 s per run), so it is not part of the test command; the counts it
printed last are in docs/measurements.md.
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

VALUES = [2**63 - 1, -1, 2**62, 1e300, "x", [], {}]
CRASH_MARKERS = ("terminate called", "AddressSanitizer", "runtime error:", "Segmentation fault")


def leaves(obj, path=()):
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from leaves(v, path + (k,))
    elif isinstance(obj, list) and obj:
        for i, v in enumerate(obj[:3]):
            yield from leaves(v, path + (i,))
    else:
        yield path


def assign(obj, path, value):
    for key in path[:-1]:
        obj = obj[key]
    obj[path[-1]] = value


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cleave", required=True)
    ap.add_argument("--plan", required=True)
    ap.add_argument("--inputs")
    ap.add_argument("--limit-s", type=float, default=10.0)
    ap.add_argument("--files", nargs="+")
    args = ap.parse_args()
    files = args.files
    if not files:
        with open(os.path.join(args.plan, "manifest.json")) as f:
            m = json.load(f)
        files = ["manifest.json"] + sorted(p["file"] for p in m["programs"].values())[:1]
        if os.path.exists(os.path.join(args.plan, "strategy.json")):
            files.append("strategy.json")
    work = tempfile.mkdtemp(prefix="cleave-sweep-")
    bad, runs, refused, accepted = [], 0, 0, 0
    try:
        for name in files:
            with open(os.path.join(args.plan, name)) as f:
                original = json.load(f)
            for path in list(leaves(original)):
                for value in VALUES:
                    plan = os.path.join(work, "plan")
                    shutil.rmtree(plan, ignore_errors=True)
                    shutil.copytree(args.plan, plan)
                    data = json.loads(json.dumps(original))
                    assign(data, path, value)
                    with open(os.path.join(plan, name), "w") as f:
                        json.dump(data, f)
                    out = os.path.join(work, "out.safetensors")
                    commands = [[args.cleave, "verify", plan], [args.cleave, "inspect", plan, "--json"]]
                    if args.inputs:
                        commands.append([args.cleave, "run", plan, "--inputs", args.inputs,
                                         "--outputs", out])
                    for cmd in commands:
                        runs += 1
                        start = time.monotonic()
                        try:
                            proc = subprocess.run(cmd, capture_output=True, timeout=args.limit_s * 3)
                            rc, err = proc.returncode, proc.stderr.decode(errors="replace")
                        except subprocess.TimeoutExpired:
                            rc, err = None, ""
                        elapsed = time.monotonic() - start
                        problem = None
                        if rc is None:
                            problem = "no answer"
                        elif rc < 0:
                            problem = f"killed by {signal.Signals(-rc).name}"
                        elif rc not in (0, 1) or (rc == 1 and "cleave: error:" not in err):
                            problem = f"exit {rc} without a 'cleave: error:' line"
                        elif any(m in err for m in CRASH_MARKERS):
                            problem = "crash report"
                        elif elapsed > args.limit_s:
                            problem = f"took {elapsed:.1f} s"
                        if problem is None:
                            refused += rc == 1
                            accepted += rc == 0
                        if problem:
                            bad.append(f"{name} {list(path)} = {json.dumps(value)[:30]}: "
                                       f"{cmd[1]}: {problem}: {err.strip()[-200:]}")
                            print("BAD", bad[-1], flush=True)
                        if os.path.exists(out):
                            os.remove(out)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(f"sweep: {runs} runs over {', '.join(files)}: {refused} refused, "
          f"{accepted} accepted, {len(bad)} not clean")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
