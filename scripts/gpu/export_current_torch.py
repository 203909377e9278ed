#!/usr/bin/env python3
"""Exports models with the PyTorch of this machine (torch.jit.trace, CPU, f32, eval mode) for
cleave, whose importer links LibTorch 1.13: can cleave load, compile and match what current
PyTorch writes?

    python3 scripts/gpu/export_current_torch.py OUTDIR [--models resnet50,vit_b_16,gpt2,gpt2-eager]
        [--standin] [--seed 0] [--seq 64] [--limit-mib 15] [--max-files 3] [--jobs 4]
        [--timeout 300] [--workdir DIR]

Models: resnet50 and vit_b_16 (torchvision, weights=None, input x [1,3,224,224]), gpt2 (a
transformers GPT2LMHeadModel of GPT2Config(), 124M, random, the default attention; traced through
a wrapper forward(input_ids) -> logits, input_ids [1,SEQ]), gpt2-eager (the same with
attn_implementation="eager"). --standin exports small plain torch.nn models instead
(standin-cnn, standin-lm), to test this script where torchvision or transformers are missing.

Every float parameter, batch-norm statistic and large float buffer is overwritten with values tiled from a few pools of 65536
seeded normals (each tensor from its own offset; weights scaled by a power of two near
1/sqrt(fan-in), norm scales and running variances near 1), so the files compress to almost
nothing with LZMA's 64 MiB dictionary. Each model is exported in a child process (a timeout per
model; a failure is recorded, the others go on) as NAME.pt (with the `cleave.json` extra file:
the forward inputs' names, shapes, dtypes), NAME-inputs.safetensors (keyed by the traced
forward's argument names, as `cleave run --inputs` wants) and NAME-outputs.safetensors
(output_0: the traced module's output).

OUTDIR receives only: exports-K.tar.xz (K = 1.., at most --max-files, each at most --limit-mib;
each a complete tar of whole models; unpack with `tar -xJf`), or, if whole models cannot be packed
so, exports.tar.xz.part-K (cut from one stream: `cat exports.tar.xz.part-* | tar -xJ`);
export-report.json and export-report.md (versions, per model: each stage's outcome, file sizes,
output checks, errors). The raw exports stay in --workdir (default: a temporary folder, removed).
Exit status: 0 when every model exported and the archives fit, 1 otherwise.
"""
import argparse
import concurrent.futures
import json
import lzma
import math
import os
import platform
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "examples"))

DEFAULT_MODELS = ["resnet50", "vit_b_16", "gpt2", "gpt2-eager"]
STANDINS = ["standin-cnn", "standin-lm"]
POOL = 65536
# LZMA2 with a 64 MiB dictionary (the whole pool period many times over) and the longest
# matches: repeated pools cost almost nothing. Hash chains are much faster than preset 9e's
# binary trees on this data, for the same size.
FILTERS = [{"id": lzma.FILTER_LZMA2, "dict_size": 64 << 20, "mode": lzma.MODE_NORMAL,
            "mf": lzma.MF_HC4, "nice_len": 273, "depth": 4, "lc": 3, "lp": 0, "pb": 2}]


# --------------------------------------------------------------------------------------------
# The models (children only: they import torch and friends).
# --------------------------------------------------------------------------------------------

def _image_input(pools):
    import torch
    return {"x": torch.from_numpy(pools.tile("input", 3 * 224 * 224, 17).reshape(1, 3, 224, 224))}


def build(name, seed, seq, pools):
    """(module in eval mode, {input name: tensor}, notes dict)."""
    import numpy as np
    import torch
    import torch.nn as nn
    notes = {}
    if name in ("resnet50", "vit_b_16"):
        import torchvision
        notes["torchvision"] = torchvision.__version__
        model = getattr(torchvision.models, name)(weights=None)
        return model.eval(), _image_input(pools), notes
    if name in ("gpt2", "gpt2-eager"):
        import transformers
        notes["transformers"] = transformers.__version__
        extra = {"attn_implementation": "eager"} if name == "gpt2-eager" else {}
        try:
            config = transformers.GPT2Config(torchscript=True, **extra)
        except TypeError:
            config = transformers.GPT2Config(torchscript=True)
            if extra:
                config._attn_implementation = "eager"
        lm = transformers.GPT2LMHeadModel(config)
        notes["attn_implementation"] = str(getattr(lm.config, "_attn_implementation", None))

        class LogitsOnly(nn.Module):
            def __init__(self, lm):
                super().__init__()
                self.lm = lm

            def forward(self, input_ids):
                out = self.lm(input_ids=input_ids, use_cache=False)
                if isinstance(out, (tuple, list)):
                    return out[0]
                return out["logits"]

        ids = np.random.default_rng(seed + 1).integers(0, config.vocab_size, (1, seq))
        return LogitsOnly(lm).eval(), {"input_ids": torch.from_numpy(ids.astype(np.int64))}, notes
    if name == "standin-cnn":
        model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                              nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.BatchNorm2d(32),
                              nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(32, 10))
        x = torch.from_numpy(pools.tile("input", 2 * 3 * 32 * 32, 17).reshape(2, 3, 32, 32))
        return model.eval(), {"x": x}, notes
    if name == "standin-lm":
        class TinyLM(nn.Module):
            def __init__(self, vocab=1000, d=256):
                super().__init__()
                self.emb = nn.Embedding(vocab, d)
                self.ln = nn.LayerNorm(d)
                self.fc = nn.Linear(d, 4 * d)
                self.proj = nn.Linear(4 * d, d)
                self.head = nn.Linear(d, vocab, bias=False)
                self.head.weight = self.emb.weight  # tied, as GPT-2's

            def forward(self, input_ids):
                h = self.emb(input_ids)
                h = h + self.proj(torch.nn.functional.gelu(self.fc(self.ln(h))))
                return self.head(h)

        ids = np.random.default_rng(seed + 1).integers(0, 1000, (1, seq))
        return TinyLM().eval(), {"input_ids": torch.from_numpy(ids.astype(np.int64))}, notes
    raise ValueError(f"unknown model '{name}' (known: {', '.join(DEFAULT_MODELS + STANDINS)})")


class Pools:
    """Float32 pools of POOL values derived from one seeded normal draw, by kind."""

    def __init__(self, seed, size=POOL):
        import numpy as np
        self.np, self.size = np, size
        self.base = np.random.default_rng(seed).standard_normal(size)
        self.cache = {}

    def pool(self, kind):
        if kind not in self.cache:
            b = self.base
            if kind == "input":
                p = b
            elif kind == "one":
                p = 1 + 0.02 * b
            elif kind == "var":
                p = 1 + abs(0.02 * b)
            elif kind == "small":
                p = 0.02 * b
            else:  # "w-K": weights scaled by 2^-K
                p = b * 2.0 ** -int(kind[2:])
            self.cache[kind] = p.astype(self.np.float32)
        return self.cache[kind]

    def tile(self, kind, n, offset):
        pool = self.np.roll(self.pool(kind), -(offset % self.size))
        return self.np.tile(pool, n // self.size + 1)[:n]


def kind_of(name, t):
    if name.endswith("running_var"):
        return "var"
    if t.dim() <= 1:
        return "one" if name.endswith("weight") else "small"
    fan_in = t.numel() // max(1, t.shape[0])
    k = min(10, max(1, round(math.log2(math.sqrt(max(1, fan_in))))))
    return f"w-{k}"


def fill(model, pools):
    """Overwrites every float parameter and buffer (each storage once) from the pools."""
    import torch
    seen, kinds = set(), {}
    # Buffers: the batch norms' statistics and any large float buffer (for the compression);
    # small ones (mask fill values, frequencies) keep their meaning.
    buffers = [(n, b) for n, b in model.named_buffers()
               if n.endswith(("running_mean", "running_var")) or b.numel() > POOL]
    tensors = list(model.named_parameters()) + buffers
    with torch.no_grad():
        for i, (name, t) in enumerate(tensors):
            if not t.is_floating_point() or t.data_ptr() in seen:
                continue
            seen.add(t.data_ptr())
            kind = kind_of(name, t)
            kinds[kind] = kinds.get(kind, 0) + 1
            values = pools.tile(kind, t.numel(), i * 7919 + 13)
            t.copy_(torch.from_numpy(values).reshape(t.shape).to(t.dtype))
    return kinds


def flatten(out):
    import torch
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in flatten(o)]
    raise TypeError(f"the model returns {type(out).__name__}, not tensors")


def check_outputs(outputs):
    """Problems that make an output useless for a comparison (empty when fine)."""
    import torch
    problems = []
    for i, t in enumerate(outputs):
        if not t.is_floating_point():
            continue
        if not bool(torch.isfinite(t).all()):
            problems.append(f"output_{i} has non-finite values")
        elif t.numel() > 1 and float(t.double().std()) < 1e-6 * max(1.0, float(t.abs().max())):
            problems.append(f"output_{i} is (nearly) constant: std {float(t.double().std()):.3g}")
        elif float(t.abs().max()) < 1e-6:
            problems.append(f"output_{i} is (nearly) zero")
    return problems


_DTYPE_NAMES = {"torch.float32": "f32", "torch.int64": "i64", "torch.int32": "i32",
                "torch.bool": "i1", "torch.float16": "f16", "torch.bfloat16": "bf16"}


def export_one(name, workdir, seed, seq):
    """The child: exports one model into workdir/NAME/, recording progress in result.json."""
    out = os.path.join(workdir, name)
    os.makedirs(out, exist_ok=True)
    result = {"model": name, "ok": False, "stage": "start"}
    path = os.path.join(out, "result.json")

    def stage(s, **kw):
        result.update(kw, stage=s)
        with open(path, "w") as f:
            json.dump(result, f, indent=1)

    try:
        import torch
        from safetensors_io import save_file
        threads = int(os.environ.get("EXPORT_THREADS", "0"))
        if threads > 0:
            torch.set_num_threads(threads)
        torch.manual_seed(seed)
        t0 = time.time()
        stage("build")
        pools = Pools(seed)
        model, inputs, notes = build(name, seed, seq, pools)
        stage("fill", notes=notes, parameters=sum(p.numel() for p in model.parameters()))
        result["pool_kinds"] = fill(model, pools)
        args = tuple(inputs.values())
        stage("eager")
        with torch.no_grad():
            eager = flatten(model(*args))
        stage("trace")
        traced = torch.jit.trace(model, args, check_trace=False)
        try:
            names = [a.name for a in traced.forward.schema.arguments[1:]]
        except Exception as e:  # an API change: fall back to the names we gave
            names = list(inputs)
            result["schema_note"] = f"no schema names ({type(e).__name__}: {e}); used {names}"
        if len(names) != len(args):
            raise RuntimeError(f"the traced forward takes {names}, but {len(args)} inputs were given")
        stage("run-traced", input_names=names)
        with torch.no_grad():
            outputs = [t.detach().contiguous() for t in flatten(traced(*args))]
        result["eager_vs_traced_max_abs"] = max(
            (float((a.double() - b.double()).abs().max()) for a, b in zip(eager, outputs)
             if a.is_floating_point() and a.shape == b.shape), default=0.0)
        result["outputs"] = [{"shape": list(t.shape), "dtype": str(t.dtype),
                              "max_abs": float(t.abs().max()) if t.numel() else 0.0,
                              "std": float(t.double().std()) if t.numel() > 1 else 0.0}
                             for t in outputs]
        problems = check_outputs(outputs)
        if problems:
            raise RuntimeError("; ".join(problems))
        stage("save")
        meta = {"format": 1, "model": name, "exporter": f"torch {torch.__version__}",
                "inputs": [{"name": n, "shape": list(t.shape),
                            "dtype": _DTYPE_NAMES.get(str(t.dtype), str(t.dtype))}
                           for n, t in zip(names, args)]}
        pt = os.path.join(out, f"{name}.pt")
        torch.jit.save(traced, pt, _extra_files={"cleave.json": json.dumps(meta)})
        save_file(dict(zip(names, args)), os.path.join(out, f"{name}-inputs.safetensors"))
        save_file({f"output_{i}": t for i, t in enumerate(outputs)},
                  os.path.join(out, f"{name}-outputs.safetensors"))
        stage("reload")
        with torch.no_grad():
            again = flatten(torch.jit.load(pt)(*args))
        if not all(torch.equal(a, b) for a, b in zip(again, outputs)):
            raise RuntimeError("the saved file, loaded again, computes different outputs")
        result["files"] = {f: os.path.getsize(os.path.join(out, f))
                           for f in sorted(os.listdir(out)) if f != "result.json"}
        stage("done", ok=True, seconds=round(time.time() - t0, 1))
    except BaseException as e:  # noqa: BLE001: every failure goes into the report
        result["error"] = f"{type(e).__name__}: {e}"
        result["traceback"] = traceback.format_exc()[-4000:]
        stage(result["stage"])
        return 1
    return 0


# --------------------------------------------------------------------------------------------
# The parent: children, archives, report.
# --------------------------------------------------------------------------------------------

def run_children(models, workdir, args):
    threads = max(1, (os.cpu_count() or 1) // max(1, min(args.jobs, len(models))))
    # transformers builds GPT-2 from its config alone: nothing to fetch, so never try.
    env = dict(os.environ, EXPORT_THREADS=str(threads), HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1")

    def one(name):
        cmd = [sys.executable, os.path.abspath(__file__), "--one", name, "--workdir", workdir,
               "--seed", str(args.seed), "--seq", str(args.seq), "unused"]
        t0 = time.time()
        try:
            run = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, env=env)
            rc, log = run.returncode, (run.stdout + run.stderr)[-3000:]
        except subprocess.TimeoutExpired as e:
            rc = None
            log = f"timed out after {args.timeout} s\n" + ((e.stderr or b"")[-3000:].decode(
                "utf-8", "replace") if isinstance(e.stderr, bytes) else (e.stderr or "")[-3000:])
        try:
            with open(os.path.join(workdir, name, "result.json")) as f:
                result = json.load(f)
        except (OSError, ValueError):
            result = {"model": name, "ok": False, "stage": "start"}
        if rc is None:
            result.update(ok=False, error=f"timed out after {args.timeout} s in stage "
                                          f"'{result.get('stage')}'")
        elif rc != 0 and "error" not in result:
            result.update(ok=False, error=f"the child exited with status {rc}")
        result["wall_s"] = round(time.time() - t0, 1)
        if not result.get("ok"):
            result["log_tail"] = log
        return result

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        return list(pool.map(one, models))


def tar_members(paths):
    """The tar bytes of `paths` (basenames as member names), without the end-of-archive blocks,
    so members of several such streams concatenate into one archive."""
    for path in paths:
        info = tarfile.TarInfo(os.path.basename(path))
        info.size, info.mode, info.mtime = os.path.getsize(path), 0o644, int(time.time())
        yield info.tobuf(format=tarfile.GNU_FORMAT)
        with open(path, "rb") as f:
            while True:
                chunk = f.read(16 << 20)
                if not chunk:
                    break
                yield chunk
        yield b"\0" * (-info.size % tarfile.BLOCKSIZE)


def compress_model(name, workdir):
    """workdir/NAME.xzpart: one xz stream of NAME's files as tar members."""
    folder = os.path.join(workdir, name)
    files = [os.path.join(folder, f) for f in sorted(os.listdir(folder)) if f != "result.json"]
    part = os.path.join(workdir, f"{name}.xzpart")
    comp = lzma.LZMACompressor(format=lzma.FORMAT_XZ, filters=FILTERS)
    with open(part, "wb") as f:
        for chunk in tar_members(files):
            f.write(comp.compress(chunk))
        f.write(comp.flush())
    return part


def pack(parts, outdir, limit, max_files):
    """Writes the archives; returns [{"file", "bytes", "models"}] and a problem or None."""
    eof = lzma.compress(b"\0" * (2 * tarfile.BLOCKSIZE), format=lzma.FORMAT_XZ)
    sizes = {name: os.path.getsize(p) for name, p in parts.items()}
    bins = []  # first fit, largest first
    for name in sorted(parts, key=lambda n: -sizes[n]):
        for b in bins:
            if b["bytes"] + sizes[name] + len(eof) <= limit:
                b["models"].append(name)
                b["bytes"] += sizes[name]
                break
        else:
            bins.append({"models": [name], "bytes": sizes[name]})

    def concat(dest, names, tail):
        with open(dest, "wb") as out:
            for name in names:
                with open(parts[name], "rb") as f:
                    shutil.copyfileobj(f, out, 16 << 20)
            out.write(tail)

    fits = all(b["bytes"] + len(eof) <= limit for b in bins) and len(bins) <= max_files
    archives = []
    if fits:
        for k, b in enumerate(bins, 1):
            dest = os.path.join(outdir, f"exports-{k}.tar.xz")
            concat(dest, b["models"], eof)
            archives.append({"file": os.path.basename(dest), "bytes": os.path.getsize(dest),
                             "models": b["models"]})
        return archives, None
    # Whole models do not fit: one stream, cut into pieces, if at most max_files of them do.
    stream = os.path.join(os.path.dirname(parts[next(iter(parts))]), "all.tar.xz")
    concat(stream, list(parts), eof)
    total = os.path.getsize(stream)
    count = max(1, math.ceil(total / limit))
    if count <= max_files:
        with open(stream, "rb") as f:
            for k in range(1, count + 1):
                dest = os.path.join(outdir, f"exports.tar.xz.part-{k}")
                with open(dest, "wb") as out:
                    out.write(f.read(limit))
                archives.append({"file": os.path.basename(dest), "bytes": os.path.getsize(dest),
                                 "models": list(parts)})
        return archives, None
    # Not even so: the whole models that fit, one bin per file, the rest left out.
    kept = [b for b in bins if b["bytes"] + len(eof) <= limit][:max_files]
    for k, b in enumerate(kept, 1):
        dest = os.path.join(outdir, f"exports-{k}.tar.xz")
        concat(dest, b["models"], eof)
        archives.append({"file": os.path.basename(dest), "bytes": os.path.getsize(dest),
                         "models": b["models"]})
    left = sorted(set(parts) - {m for b in kept for m in b["models"]})
    return archives, (f"{total} compressed bytes need {count} files of {limit} bytes, more than "
                      f"--max-files {max_files}; left out: {', '.join(left)}")


def versions():
    out = {"python": platform.python_version()}
    for mod in ("torch", "torchvision", "transformers", "numpy", "safetensors"):
        try:
            out[mod] = __import__(mod).__version__
        except Exception as e:  # noqa: BLE001
            out[mod] = f"unavailable ({type(e).__name__})"
    return out


def write_report(outdir, report):
    with open(os.path.join(outdir, "export-report.json"), "w") as f:
        json.dump(report, f, indent=1)
    lines = ["# Exports with current PyTorch", "",
             "versions: " + ", ".join(f"{k} {v}" for k, v in report["versions"].items()), "",
             "| model | ok | stage | seconds | files (bytes) | error |", "|---|---|---|---:|---|---|"]
    for r in report["models"]:
        files = ", ".join(f"{k} {v}" for k, v in r.get("files", {}).items())
        err = (r.get("error") or "").replace("|", "/").replace("\n", " ")[:300]
        lines.append(f"| {r['model']} | {'yes' if r.get('ok') else 'NO'} | {r.get('stage')} | "
                     f"{r.get('wall_s', '')} | {files} | {err} |")
    lines += ["", "archives: " + ", ".join(f"{a['file']} ({a['bytes']} bytes: "
                                           f"{', '.join(a['models'])})" for a in report["archives"])]
    if report.get("problem"):
        lines += ["", f"problem: {report['problem']}"]
    with open(os.path.join(outdir, "export-report.md"), "w") as f:
        f.write("\n".join(lines) + "\n")


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("outdir")
    p.add_argument("--models", help="comma-separated (default: " + ",".join(DEFAULT_MODELS) + ")")
    p.add_argument("--standin", action="store_true", help="export " + ",".join(STANDINS))
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--seq", type=int, default=64, help="token ids per sequence (default 64)")
    p.add_argument("--limit-mib", type=float, default=15)
    p.add_argument("--max-files", type=int, default=3)
    p.add_argument("--jobs", type=int, default=4, help="models exported at once (default 4)")
    p.add_argument("--timeout", type=float, default=300, help="seconds per model (default 300)")
    p.add_argument("--workdir", help="where the raw exports go (default: a temporary folder)")
    p.add_argument("--one", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        sys.exit(export_one(args.one, args.workdir, args.seed, args.seq))

    t0 = time.time()
    models = STANDINS if args.standin else DEFAULT_MODELS
    if args.models:
        models = [m for m in args.models.split(",") if m]
    unknown = [m for m in models if m not in DEFAULT_MODELS + STANDINS]
    if unknown:
        p.error(f"unknown models {unknown}; known: {', '.join(DEFAULT_MODELS + STANDINS)}")
    os.makedirs(args.outdir, exist_ok=True)
    workdir = args.workdir or tempfile.mkdtemp(prefix="export-current-torch-")
    os.makedirs(workdir, exist_ok=True)
    report = {"versions": versions(), "seed": args.seed, "seq": args.seq, "models": [],
              "archives": [], "problem": None}
    try:
        results = run_children(models, workdir, args)
        report["models"] = results
        done = [r["model"] for r in results if r.get("ok")]
        t1 = time.time()
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, len(done))) as pool:
            parts = dict(zip(done, pool.map(lambda n: compress_model(n, workdir), done)))
        report["compress_s"] = round(time.time() - t1, 1)
        if parts:
            report["archives"], report["problem"] = pack(parts, args.outdir,
                                                         int(args.limit_mib * 2 ** 20),
                                                         args.max_files)
    except BaseException as e:  # noqa: BLE001: the report must still be written
        report["problem"] = f"{type(e).__name__}: {e}\n{traceback.format_exc()[-3000:]}"
    finally:
        report["wall_s"] = round(time.time() - t0, 1)
        write_report(args.outdir, report)
        if not args.workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    for r in report["models"]:
        print(f"{r['model']}: {'ok' if r.get('ok') else 'FAILED in ' + str(r.get('stage'))}"
              f"{'' if r.get('ok') else ': ' + str(r.get('error'))}")
    for a in report["archives"]:
        print(f"{a['file']}: {a['bytes']} bytes ({', '.join(a['models'])})")
    if report["problem"]:
        print(f"problem: {report['problem']}")
    ok = bool(report["models"]) and all(r.get("ok") for r in report["models"]) \
        and not report["problem"]
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
