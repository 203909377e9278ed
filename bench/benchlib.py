"""Helpers shared by the bench/ scripts: what machine they ran on, and a
one-line summary of a strategy JSON from `cleave plan --json`."""
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def machine(load=False):
    """CPU model and core count (and the 1-minute load average, if asked)."""
    model = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    text = f"{model}, {os.cpu_count()} cores"
    if load:
        text += f" (load average {os.getloadavg()[0]:.2f} at start)"
    return text


def plan_label(plan):
    """The chosen plan in one line: mesh, microbatch, schedule, ZeRO, recomputed layers."""
    mesh, sched = plan["mesh"], plan["schedule"]
    kind = sched["kind"]
    if kind == "interleaved":
        kind += f" v{sched['virtual_stages']}"
    recomputed = sum(len(stage.get("recompute", [])) for stage in plan["stages"])
    return (f"t{mesh['tp']} p{mesh['pp']} d{mesh['dp']}, mb {sched['microbatch_size']}"
            f"x{sched['microbatches']}, {kind}, zero {plan['data_parallel']['sharding']},"
            f" recompute {recomputed}")


def add_cleave_options(parser):
    """--cleave (the binary) and --cluster (the spec), defaulting to this checkout's."""
    parser.add_argument("--cleave", default=os.path.join(ROOT, "build", "bin", "cleave"),
                        help="the cleave binary (default: %(default)s)")
    parser.add_argument("--cluster",
                        default=os.path.join(ROOT, "examples", "clusters", "dgx-a100-80gb.json"),
                        help="cluster spec (default: %(default)s)")


def timed_run(cmd):
    """Runs `cmd`, exiting with its stderr if it fails; returns (the completed process,
    its wall seconds)."""
    start = time.perf_counter()
    result = subprocess.run(cmd, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"failed (exit {result.returncode}): {' '.join(cmd)}\n{result.stderr}")
    return result, wall
