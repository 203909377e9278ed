"""Op conformance from PyTorch's OpInfo database: every op of `op_db` and each of its sample
inputs, traced into a TorchScript module, compiled by cleave for one device, run, and compared
with PyTorch.

usage: opinfo.py --cleave CLEAVE --work DIR [--ops NAME[.VARIANT|.*],... | --subset FILE |
                  --recheck TABLE.json] [--dtypes f32,i64,bool]
                 [--samples N] [--json OUT.json] [--markdown OUT.md]

For each op and dtype it supports on the CPU (f32 always; i64 and bool where the op's OpInfo lists
them), up to N sample inputs (default 4) are traced, one module per (op, dtype) taking every
sample's tensors as inputs and returning every sample's outputs; cleave compiles and runs it once.
If that fails, each sample runs alone, so a failure is the sample's own. A sample passes when
every output has PyTorch's shape and dtype and its values match (floats: |a - b| <= 1e-4 +
1e-4 |b|, NaN where PyTorch has NaN; integers and bools exactly). The values of empty_like,
new_empty and new_empty_strided are undefined in PyTorch: for exactly these, only shapes and
dtypes are compared (the op's line says so).

Samples that do not make a static TorchScript module are not counted: tracing fails, an output
is not a tensor, an input is not a dense real tensor, or PyTorch itself raises on the sample. An
op counts as passing when every counted sample of every dtype passes.

Prints one line per op: `OP: P/T samples pass [dtypes]` and, when any fails, the first reason
(cleave's first error line, or the mismatch). Ends with `ops passing: K of M (pct)`.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "stub"))  # expecttest, which Debian does not package
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))

import torch  # noqa: E402
from safetensors_io import load_file, save_file  # noqa: E402

DTYPES = {"f32": torch.float32, "i64": torch.int64, "bool": torch.bool}
NAMES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.int64: "i64",
         torch.int32: "i32", torch.bool: "i1"}


# Ops whose results PyTorch leaves undefined (uninitialized memory): only their outputs' shapes
# and dtypes are compared, as PyTorch's own OpInfo tests skip their values too. cleave gives zeros.
UNDEFINED_VALUES = {"empty_like", "new_empty", "new_empty_strided"}


class Skip(Exception):
    """A sample that does not make a static TorchScript module: not counted."""


def tensors_of(value, found, grads=None):
    """Replaces every tensor in a (nested) sample argument by a placeholder, collecting it (and,
    given `grads`, whether it requires grad)."""
    if isinstance(value, torch.Tensor):
        if value.layout != torch.strided:
            raise Skip(f"input of layout {value.layout}")
        if value.is_complex() or value.dtype not in NAMES:
            raise Skip(f"input of dtype {value.dtype}")
        found.append(value.detach().clone())
        if grads is not None:
            grads.append(value.requires_grad)
        return ("__tensor__", len(found) - 1)
    if isinstance(value, (list, tuple)):
        return type(value)(tensors_of(v, found, grads) for v in value)
    if isinstance(value, dict):
        return {k: tensors_of(v, found, grads) for k, v in value.items()}
    return value


def rebuild(value, tensors):
    if isinstance(value, tuple) and len(value) == 2 and value[0] == "__tensor__":
        return tensors[value[1]]
    if isinstance(value, (list, tuple)):
        return type(value)(rebuild(v, tensors) for v in value)
    if isinstance(value, dict):
        return {k: rebuild(v, tensors) for k, v in value.items()}
    return value


def flatten(result):
    if isinstance(result, torch.Tensor):
        return [result]
    if isinstance(result, (list, tuple)) and result and all(isinstance(r, torch.Tensor) for r in result):
        return list(result)
    raise Skip(f"returns {type(result).__name__}, not tensors")


class Call(torch.nn.Module):
    """Calls the op on each sample: forward(*every sample's tensors) -> every sample's outputs."""

    def __init__(self, op, samples):
        super().__init__()
        self.op = op
        self.samples = samples  # (input, args, kwargs) templates, first tensor index, count

    def forward(self, *tensors):
        outputs = []
        for template, first, count in self.samples:
            mine = tensors[first:first + count]
            inp, args, kwargs = rebuild(template, mine)
            outputs.extend(flatten(self.op(inp, *args, **kwargs)))
        return tuple(outputs)


def prepare(op, sample):
    """A sample as (template, its tensors, PyTorch's outputs); Skip when it cannot be one."""
    found = []
    template = tensors_of((sample.input, tuple(sample.args), dict(sample.kwargs)), found)
    if not found:
        raise Skip("no tensor input")
    inp, args, kwargs = rebuild(template, found)
    try:
        with torch.no_grad():
            expected = flatten(op.op(inp, *args, **kwargs))
    except Skip:
        raise
    except Exception as e:  # PyTorch itself refuses the sample
        raise Skip(f"PyTorch raises {type(e).__name__}")
    if any(t.layout != torch.strided for t in expected):
        raise Skip("an output of another layout than strided")
    if any(t.is_complex() or t.dtype not in NAMES for t in expected):
        raise Skip("an output of an unsupported dtype")
    return template, found, [t.detach().clone() for t in expected]


def run_stage(cmd, stage, model, work, timeout):
    """Runs one cleave command; None when it succeeds, else `STAGE: reason`, the reason being
    cleave's first error line (with the first entry of a list it announces), the crash, or the
    timeout, with the work directory's paths shortened."""
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return f"{stage}: timed out after {timeout} s"
    if r.returncode == 0:
        return None
    err = r.stderr.splitlines()
    at = next((i for i, ln in enumerate(err) if "error" in ln), 0)
    reason = err[at] if err else ""
    if reason.endswith(":") and at + 1 < len(err):  # a list follows: its first entry
        reason += " " + err[at + 1].strip()
    reason = reason.replace(model, "model.pt").replace(work + "/", "")
    if r.returncode < 0 or r.returncode > 2 and "error" not in r.stderr:
        reason = f"{stage} crashed (exit {r.returncode}): {reason}"
    return f"{stage}: {reason.strip()}"


def run_cleave(cleave, work, name, op, prepared):
    """Traces the samples into one module, compiles and runs it; returns (ok, failure reason).
    Raises Skip when the samples do not make a static TorchScript module."""
    samples, inputs, expected = [], [], []
    for template, found, outs in prepared:
        samples.append((template, len(inputs), len(found)))
        inputs.extend(found)
        expected.extend(outs)
    module = Call(op.op, samples)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            traced = torch.jit.trace(module, tuple(inputs), check_trace=False)
        except Exception as e:
            raise Skip(f"does not trace: {type(e).__name__}")
    if any(n.kind() == "prim::PythonOp" for n in traced.inlined_graph.nodes()):
        raise Skip("traces to a Python op")
    os.makedirs(work, exist_ok=True)
    model, plan = os.path.join(work, "model.pt"), os.path.join(work, "plan")
    # The importer names the inputs as the saved module's forward does (saving renames them).
    torch.jit.save(traced, model)
    loaded = torch.jit.load(model)
    names = [a.name for a in loaded.forward.schema.arguments[1:]]
    if len(names) != len(inputs) or len(set(names)) != len(names):
        raise Skip("traced inputs do not map one to one onto the sample's tensors")
    meta = {"format": 1, "model": name,
            "inputs": [{"name": n, "shape": list(t.shape), "dtype": NAMES[t.dtype]}
                       for n, t in zip(names, inputs)]}
    ins, outs = os.path.join(work, "in.safetensors"), os.path.join(work, "out.safetensors")
    torch.jit.save(loaded, model, _extra_files={"cleave.json": json.dumps(meta)})
    save_file({n: t.contiguous() for n, t in zip(names, inputs)}, ins)
    for cmd, stage in (([cleave, "compile", model, "-o", plan], "compile"),
                       ([cleave, "run", plan, "--inputs", ins, "--outputs", outs], "run")):
        failure = run_stage(cmd, stage, model, work, 300)
        if failure:
            return False, failure
    got = load_file(outs)
    for i, e in enumerate(expected):
        g = got.get(f"output_{i}")
        if g is None:
            return False, f"output {i} missing"
        if tuple(g.shape) != tuple(e.shape):
            return False, f"output {i}: shape {tuple(g.shape)}, PyTorch {tuple(e.shape)}"
        if g.dtype != e.dtype:
            return False, f"output {i}: dtype {g.dtype}, PyTorch {e.dtype}"
        if name in UNDEFINED_VALUES:
            continue
        if e.is_floating_point():
            nan = torch.isnan(e)
            if not torch.equal(nan, torch.isnan(g)):
                return False, f"output {i}: NaN where PyTorch has none, or the reverse"
            a, b = g[~nan].double(), e[~nan].double()
            inf = torch.isinf(b)
            if not torch.equal(a[inf], b[inf]):
                return False, f"output {i}: infinities differ"
            err = (a[~inf] - b[~inf]).abs()
            bound = 1e-4 + 1e-4 * b[~inf].abs()
            if err.numel() and bool((err > bound).any()):
                return False, f"output {i}: max error {err.max().item():.3g}"
        elif not torch.equal(g, e):
            return False, f"output {i}: values differ"
    return True, ""


def check_op(cleave, work, op, dtypes, max_samples):
    """(passed, counted, dtypes tried, first failure reason, skip reasons) for one OpInfo."""
    passed = counted = 0
    first_failure, tried, skipped = "", [], {}
    supported = op.supported_dtypes("cpu")
    for key in dtypes:
        dtype = DTYPES[key]
        if dtype not in supported:
            continue
        prepared = []
        try:
            samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))
        except Exception as e:
            skipped[f"sample_inputs raises {type(e).__name__}"] = 1
            continue
        for sample in samples:
            if len(prepared) >= max_samples:
                break
            try:
                prepared.append(prepare(op, sample))
            except Skip as s:
                skipped[str(s)] = skipped.get(str(s), 0) + 1
        if not prepared:
            continue
        tried.append(key)
        where = os.path.join(work, f"{op.name}.{op.variant_test_name or 'default'}.{key}")
        try:
            ok, reason = run_cleave(cleave, where, op.name, op, prepared)
        except Skip as s:
            ok, reason = None, str(s)
        if ok:
            passed += len(prepared)
            counted += len(prepared)
            continue
        if ok is False and len(prepared) == 1:  # the group was the one sample
            counted += 1
            first_failure = first_failure or f"{key}: {reason}"
            continue
        # One at a time: which samples fail, and why.
        for k, one in enumerate(prepared):
            try:
                ok1, why = run_cleave(cleave, f"{where}.{k}", op.name, op, [one])
            except Skip as s:
                skipped[str(s)] = skipped.get(str(s), 0) + 1
                continue
            counted += 1
            if ok1:
                passed += 1
            elif not first_failure:
                first_failure = f"{key}: {why}"
    return passed, counted, tried, first_failure, skipped


def full_name(op):
    """An OpInfo's name as --ops and subset files spell it: name or name.variant."""
    return op.name + (f".{op.variant_test_name}" if op.variant_test_name else "")


def add_selection_args(p, samples):
    """The options opinfo.py and test/train/opinfo_gradients.py share."""
    p.add_argument("--cleave", required=True)
    p.add_argument("--work")
    p.add_argument("--ops", help="comma list of OpInfo names (name, name.variant, or name.* for "
                                 "every variant)")
    p.add_argument("--subset", help="a file of OpInfo names, one per line (# comments)")
    p.add_argument("--part", metavar="K/N",
                   help="only the K-th of N parts of the --subset (its names in order, every N-th "
                        "from the K-th), so that a long subset runs as N tests side by side")
    p.add_argument("--samples", type=int, default=samples)
    p.add_argument("--json")
    p.add_argument("--markdown")


def read_subset(path):
    with open(path) as f:
        return {ln.split("#")[0].strip() for ln in f if ln.split("#")[0].strip()}


def wanted_ops(ops, subset, part=None):
    """The names --ops or --subset (and --part of it) select, or None for every op."""
    if ops:
        return set(ops.split(","))
    if subset:
        names = read_subset(subset)
        if part:
            k, n = parse_part(part)
            names = set(sorted(names)[k - 1::n])
        return names
    return None


def parse_part(text):
    """K/N, 1 <= K <= N, or exits naming the problem."""
    try:
        k, n = (int(x) for x in text.split("/"))
    except ValueError:
        sys.exit(f"opinfo.py: error: --part {text!r}: expected K/N, e.g. 1/3")
    if not 1 <= k <= n:
        sys.exit(f"opinfo.py: error: --part {text}: K must be between 1 and N")
    return k, n


def is_wanted(op, wanted):
    return wanted is None or full_name(op) in wanted or f"{op.name}.*" in wanted


def find_cleave(name, prog):
    cleave = os.path.abspath(name) if os.sep in name else shutil.which(name)
    if not cleave:
        sys.exit(f"{prog}: error: no '{name}' on PATH")
    return cleave


def print_row(row, note=""):
    """One op's line: `OP: P/T samples pass [dtypes]: ok` or `...: FAIL: reason`, or why none of
    its samples counted."""
    if row["counted"] == 0:
        skipped = row["skipped"]
        why = max(skipped, key=skipped.get) if skipped else "no sample for these dtypes"
        print(f"{row['op']}: not counted ({why})", flush=True)
        return
    status = "ok" if row["passed"] == row["counted"] else f"FAIL: {row['failure']}"
    print(f"{row['op']}: {row['passed']}/{row['counted']} samples pass [{','.join(row['dtypes'])}]: "
          f"{status}{note}", flush=True)


def print_missing(wanted, seen):
    for name in sorted(w for w in wanted - seen if not w.endswith(".*")):
        print(f"{name}: no such OpInfo")


def print_summary(rows):
    counted_ops = [r for r in rows if r["counted"]]
    good = [r for r in counted_ops if r["passed"] == r["counted"]]
    pct = 100.0 * len(good) / max(1, len(counted_ops))
    print(f"ops passing: {len(good)} of {len(counted_ops)} ({pct:.1f} %); "
          f"samples passing: {sum(r['passed'] for r in counted_ops)} of "
          f"{sum(r['counted'] for r in counted_ops)}", flush=True)


def write_tables(rows, json_path, markdown_path):
    if json_path:
        with open(json_path, "w") as f:
            json.dump({"torch": torch.__version__, "rows": rows}, f, indent=1)
    if markdown_path:
        with open(markdown_path, "w") as f:
            f.write("| op | samples passing | dtypes | first failure |\n|---|---:|---|---|\n")
            for r in rows:
                if r["counted"]:
                    f.write(f"| {r['op']} | {r['passed']}/{r['counted']} | {','.join(r['dtypes'])} | "
                            f"{r['failure'].replace('|', '/')} |\n")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_selection_args(p, samples=4)
    p.add_argument("--dtypes", default="f32,i64,bool")
    p.add_argument("--recheck", help="a --json table of an earlier run: run again only its ops "
                                     "that failed a counted sample, keep its other rows")
    a = p.parse_args()
    torch.manual_seed(0)
    from torch.testing._internal.common_methods_invocations import op_db

    wanted = None
    kept = {}
    if a.recheck:
        with open(a.recheck) as f:
            earlier = json.load(f)["rows"]
        kept = {r["op"]: r for r in earlier if not r["counted"] or r["passed"] == r["counted"]}
        wanted = {r["op"] for r in earlier} - set(kept)
        print(f"rechecking {len(wanted)} ops that failed in {a.recheck}", flush=True)
    else:
        wanted = wanted_ops(a.ops, a.subset, a.part)
    work = os.path.abspath(a.work or tempfile.mkdtemp(prefix="cleave-opinfo-"))
    cleave = find_cleave(a.cleave, "opinfo.py")
    rows = []
    seen = set()
    for op in op_db:
        full = full_name(op)
        if full in kept:
            rows.append(kept[full])
            continue
        if not is_wanted(op, wanted):
            continue
        seen.add(full)
        passed, counted, tried, failure, skipped = check_op(
            cleave, work, op, a.dtypes.split(","), a.samples)
        row = {"op": full, "passed": passed, "counted": counted, "dtypes": tried,
               "failure": failure, "skipped": skipped}
        rows.append(row)
        note = ""
        if op.name in UNDEFINED_VALUES and counted:
            note = " (shapes and dtypes only: PyTorch leaves the values undefined)"
        print_row(row, note)
    if wanted is not None and not a.recheck:
        print_missing(wanted, seen)
    print_summary(rows)
    write_tables(rows, a.json, a.markdown)


if __name__ == "__main__":
    main()
