"""Helpers shared by the bench/ scripts: what machine they ran on, a one-line summary of a
strategy JSON from `cleave plan --json`, and the OpenBLAS setting under which PyTorch's
baselines run at their best (best_blas_env)."""
import json
import os
import subprocess
import sys
import tempfile
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


# --- Baselines at their best: which OpenBLAS kernels PyTorch's GEMMs should use ---------------

BLAS_VARIABLES = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
PROBE_SIZE = 1024
# Rounds of the probe over the settings; each setting keeps its best.
PROBE_ROUNDS = 3
PROBE_TIMEOUT = 60
# A child of `python`: one f32 GEMM of fixed-seed matrices on THREADS threads, the best GFLOP/s
# of a few after a warm-up as JSON on stdout, the product written raw (f32) to OUT.
_PROBE = r"""
import ctypes, json, sys, time
import torch
threads, out, n = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
torch.set_num_threads(threads)
g = torch.Generator().manual_seed(0)
a, b = torch.randn(n, n, generator=g), torch.randn(n, n, generator=g)
c = torch.mm(a, b)
best, start = float("inf"), time.perf_counter()
for i in range(5):
    if i >= 2 and time.perf_counter() - start > 0.5:
        break
    t0 = time.perf_counter()
    c = torch.mm(a, b)
    best = min(best, time.perf_counter() - t0)
c.contiguous().numpy().tofile(out)
report = {"gflops": 2 * n ** 3 / best / 1e9, "seconds": best, "n": n}
# OpenBLAS's name for its kernels, where PyTorch's BLAS is OpenBLAS (loaded as libblas.so.3
# or libopenblas*.so).
with open("/proc/self/maps") as maps:
    libs = {l.split()[-1] for l in maps if "blas" in l.rsplit("/", 1)[-1]}
for lib in sorted(libs):
    try:
        name = ctypes.CDLL(lib).openblas_get_corename
        name.restype = ctypes.c_char_p
        report["core"] = name().decode()
        break
    except (AttributeError, OSError):
        pass
print(json.dumps(report))
"""
_best_blas_cache = {}


def _cpu_flags():
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("flags"):
                return set(line.split(":", 1)[1].split())
    return set()


def blas_candidates(base=None):
    """The OpenBLAS settings worth probing here, as (name, {variable: value or None (unset)}):
    the environment as inherited, both unset (OpenBLAS's own detection), and the widest kernels
    this CPU runs: SkylakeX (AVX-512F) and Haswell (AVX2), with OPENBLAS_L2_SIZE unset."""
    base = os.environ if base is None else base
    flags = _cpu_flags()
    settings = [("inherit", {v: base.get(v) for v in BLAS_VARIABLES}),
                ("unset", {v: None for v in BLAS_VARIABLES})]
    if "avx512f" in flags:
        settings.append(("SkylakeX", {"OPENBLAS_CORETYPE": "SkylakeX", "OPENBLAS_L2_SIZE": None}))
    if "avx2" in flags:
        settings.append(("Haswell", {"OPENBLAS_CORETYPE": "Haswell", "OPENBLAS_L2_SIZE": None}))
    return settings


def blas_environ(changes, base=None, **extra):
    """A copy of `base` (default: this process's environment) with the OpenBLAS `changes`
    (None: unset) and `extra` (NAME=value, None: unset) applied: an env= for subprocess."""
    env = dict(os.environ if base is None else base)
    for name, value in list(changes.items()) + list(extra.items()):
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def env_prefix(changes):
    """The same changes as a command prefix: ["env", "-u", NAME, ..., "NAME=value", ...] (env
    takes its options before the assignments)."""
    cmd = ["env"]
    for name, value in changes.items():
        if value is None:
            cmd += ["-u", name]
    return cmd + [f"{name}={value}" for name, value in changes.items() if value is not None]


def describe_blas(changes):
    return ", ".join(f"{n}={v}" if v is not None else f"{n} unset" for n, v in changes.items())


def _read_f32(path, count):
    try:
        import numpy
        data = numpy.fromfile(path, dtype=numpy.float32)
    except ImportError:
        import array
        data = array.array("f")
        with open(path, "rb") as f:
            data.frombytes(f.read())
    return data if len(data) == count else None


def _max_abs_difference(a, b=None):
    """max |a - b| (max |a| without b); NaN where either has one."""
    try:
        import numpy
        a = numpy.asarray(a, dtype=numpy.float64)
        return float(numpy.max(numpy.abs(a if b is None else a - b)))
    except ImportError:
        return max(abs(x - y) for x, y in zip(a, b if b is not None else [0.0] * len(a)))


def best_blas_env(threads, python="/usr/bin/python3", base=None):
    """Times a 1024x1024 f32 torch.mm (fixed seed, best of a few after a warm-up, `threads`
    threads) in a fresh `python` process under each OpenBLAS setting of blas_candidates(),
    checks each product against the first setting's (within 1e-4 of its largest |element|;
    a setting that disagrees, fails or runs past 60 s is excluded with its reason), and returns
    (changes, name, rows) for the fastest agreeing setting: `changes` maps both OpenBLAS
    variables to their value or None (unset), for blas_environ / env_prefix; `rows` are the
    probe's rows as `cleave bench --json` writes them (setting, env, gflops, agrees,
    difference, core, same_as, error; gflops is each agreeing setting's best of PROBE_ROUNDS
    processes, taken in turn). Falls back to the inherited environment when no probe ran.
    `base` is the environment the baselines will run in (default: this process's). Cached per
    process."""
    base = dict(os.environ if base is None else base)
    key = (threads, python, tuple(sorted(base.items())))
    if key in _best_blas_cache:
        return _best_blas_cache[key]
    count = PROBE_SIZE * PROBE_SIZE
    rows, reference, scale = [], None, 0.0
    done = {}  # the variables' values already probed -> their row
    with tempfile.TemporaryDirectory(prefix="blas-probe.") as tmp:
        for name, changes in blas_candidates(base):
            row = {"setting": name, "env": dict(changes), "gflops": None, "agrees": False}
            rows.append(row)
            values = tuple(changes[v] for v in BLAS_VARIABLES)
            if values in done:
                same = done[values]
                row.update({k: same[k] for k in ("gflops", "agrees", "difference", "core",
                                                  "error") if k in same})
                row["same_as"] = same["setting"]
                continue
            done[values] = row
            out = os.path.join(tmp, f"{name}.f32")
            try:
                p = subprocess.run([python, "-c", _PROBE, str(threads), out, str(PROBE_SIZE)],
                                   capture_output=True, text=True, timeout=PROBE_TIMEOUT,
                                   env=blas_environ(changes, base))
            except subprocess.TimeoutExpired:
                row["error"] = f"killed after {PROBE_TIMEOUT} s"
                continue
            except OSError as e:
                row["error"] = f"did not start: {e}"
                continue
            lines = [l for l in p.stderr.splitlines() if l.strip()]
            if p.returncode != 0:
                row["error"] = (f"crashed (signal {-p.returncode})" if p.returncode < 0
                                else f"exit {p.returncode}") + (f" ({lines[-1].strip()})"
                                                                if lines else "")
                continue
            try:
                report = json.loads(p.stdout.strip().splitlines()[-1])
            except (ValueError, IndexError):
                row["error"] = "no measurement came back"
                continue
            product = _read_f32(out, count)
            if product is None or not report.get("gflops", 0) > 0:
                row["error"] = "its product is incomplete"
                continue
            row["gflops"] = report["gflops"]
            if "core" in report:
                row["core"] = report["core"]
            if reference is None:
                reference = (name, product)
                scale = _max_abs_difference(product)
            difference = (_max_abs_difference(product, reference[1]) / scale if scale > 0
                          else float("inf"))
            row["difference"] = difference
            row["agrees"] = difference <= 1e-4  # False for NaN as well
            if not row["agrees"]:
                row["error"] = (f"its product differs from {reference[0]}'s by {difference:.2e} "
                                "of max |C|")
        # One process's GEMM rate moves by up to 1.6x on a shared VM (thread placement, the
        # neighbours): the agreeing settings are timed PROBE_ROUNDS - 1 more times, in turn,
        # and each keeps its best, so a close pair is not decided by one unlucky process.
        agreeing = [r for r in rows if r["agrees"] and "same_as" not in r]
        for _ in range(PROBE_ROUNDS - 1):
            for row in agreeing:
                try:
                    p = subprocess.run([python, "-c", _PROBE, str(threads),
                                        os.path.join(tmp, "again.f32"), str(PROBE_SIZE)],
                                       capture_output=True, text=True, timeout=PROBE_TIMEOUT,
                                       env=blas_environ(row["env"], base))
                    again = json.loads(p.stdout.strip().splitlines()[-1])["gflops"]
                except (subprocess.TimeoutExpired, OSError, ValueError, IndexError, KeyError):
                    continue  # the first round's figure stands
                row["gflops"] = max(row["gflops"], again)
        by_name = {r["setting"]: r for r in rows}
        for row in rows:
            if "same_as" in row:
                row["gflops"] = by_name[row["same_as"]]["gflops"]
    chosen = max(agreeing, key=lambda r: r["gflops"]) if agreeing else rows[0]
    result = (dict(chosen["env"]), chosen["setting"] if agreeing else "inherit", rows)
    _best_blas_cache[key] = result
    return result


def blas_probe_table(rows, chosen, threads):
    """The probe's rows as printed lines, the chosen setting marked."""
    out = [f"OpenBLAS for the PyTorch baselines: a {PROBE_SIZE}x{PROBE_SIZE} f32 GEMM on "
           f"{threads} threads under each setting, each in a fresh process",
           f"{'setting':<10} {'OPENBLAS_CORETYPE':<18} {'OPENBLAS_L2_SIZE':<17} "
           f"{'kernels':<10} GFLOP/s"]
    for r in rows:
        env = r["env"]
        text = (f"{r['setting']:<10} {env['OPENBLAS_CORETYPE'] or '-':<18} "
                f"{env['OPENBLAS_L2_SIZE'] or '-':<17} ")
        if "same_as" in r:
            text += f"(as {r['same_as']})"
        else:
            if r["gflops"] is not None:
                text += f"{r.get('core', '?'):<9} {r['gflops']:8.1f}"
            if r["setting"] == chosen and r["agrees"]:
                text += "  chosen"
            if not r["agrees"]:
                text += f"  excluded: {r.get('error', '?')}"
        out.append(text.rstrip())
    if not any(r["agrees"] for r in rows):
        out.append("no setting's probe ran: the baselines run in the environment as inherited")
    return out
