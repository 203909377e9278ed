#!/usr/bin/python3
"""Checks the `baseline` part of a `cleave bench --json` report (test/e2e/bench-baseline.test):
with --baseline-blas auto, a probe row per setting this CPU offers, the inherited row carrying
this environment's OpenBLAS variables, every agreeing row a positive GFLOP/s, the chosen setting
the fastest agreeing one, and the outputs equal to LibTorch's; with --inherit, no probe.

usage: check_bench_baseline.py [--inherit] BENCH.json"""
import json
import os
import sys

VARIABLES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")


def fail(message):
    sys.exit(f"check_bench_baseline.py: error: {message}")


def main(argv):
    inherit = "--inherit" in argv
    path = [a for a in argv if a != "--inherit"][0]
    with open(path) as f:
        report = json.load(f)
    # The fields bench/zoo.py reads are still there.
    engines = {e["engine"]: e for e in report["engines"]}
    if set(engines) != {"libtorch", "libtorch*", "cleave"}:
        fail(f"engines {sorted(engines)}")
    for e in engines.values():
        if not e["median_s"] > 0 or "peak_mib" not in e:
            fail(f"engine {e}")
    if not report["speedup"] > 0 or "memory_ratio" not in report:
        fail("no speedup or memory_ratio")
    if report["max_difference"] is None or report["max_difference"] > 1e-4:
        fail(f"max_difference {report['max_difference']}")

    baseline = report["baseline"]
    faster = min(("libtorch", "libtorch*"), key=lambda n: engines[n]["median_s"])
    if baseline["best_engine"] != faster:
        fail(f"best_engine {baseline['best_engine']}, but {faster} has the lower median")
    if inherit:
        if baseline["blas_mode"] != "inherit" or baseline["blas_probe"] or \
                baseline["blas_setting"] != "inherit":
            fail(f"--baseline-blas inherit: {baseline}")
        print("inherit: ok")
        return

    rows = {r["setting"]: r for r in baseline["blas_probe"]}
    flags = set()
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                break
    expected = ["inherit", "unset"] + ["SkylakeX"] * ("avx512f" in flags) + \
        ["Haswell"] * ("avx2" in flags)
    if [r["setting"] for r in baseline["blas_probe"]] != expected:
        fail(f"settings {list(rows)}, expected {expected}")
    # The inherited row is this environment (lit sets OPENBLAS_CORETYPE=Haswell); the others
    # unset OPENBLAS_L2_SIZE and set OPENBLAS_CORETYPE to their name.
    if rows["inherit"]["env"] != {v: os.environ.get(v) for v in VARIABLES}:
        fail(f"inherit's env {rows['inherit']['env']}")
    for name, row in rows.items():
        want = {"unset": None}.get(name, name)
        if name != "inherit" and row["env"] != {"OPENBLAS_CORETYPE": want,
                                                "OPENBLAS_L2_SIZE": None}:
            fail(f"{name}'s env {row['env']}")
    agreeing = [r for r in rows.values() if r["agrees"]]
    if not agreeing:
        fail("no setting agrees: " + "; ".join(f"{r['setting']}: {r.get('error')}"
                                                for r in rows.values()))
    for r in agreeing:
        if not (r["gflops"] and r["gflops"] > 0) or r["difference"] > 1e-4:
            fail(f"agreeing row {r}")
    for r in rows.values():
        if not r["agrees"] and not r.get("error"):
            fail(f"{r['setting']} excluded without a reason")
    chosen = rows.get(baseline["blas_setting"])
    if chosen is None or not chosen["agrees"] or "same_as" in chosen:
        fail(f"blas_setting {baseline['blas_setting']}")
    best = max(r["gflops"] for r in agreeing)
    if chosen["gflops"] != best:
        fail(f"{chosen['setting']} chosen at {chosen['gflops']:.1f} GFLOP/s, the fastest "
             f"agreeing setting has {best:.1f}")
    print(f"auto: ok, {len(rows)} settings, {len(agreeing)} agree")


if __name__ == "__main__":
    main(sys.argv[1:])
