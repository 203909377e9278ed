"""Gradient conformance from PyTorch's OpInfo database: the backward cleave compiles for every op
of `op_db` with f32 samples, against PyTorch's autograd.

usage: opinfo_gradients.py --cleave CLEAVE --work DIR [--ops NAME[.VARIANT|.*],... | --subset FILE]
                           [--samples N] [--timeout S] [--json OUT.json] [--markdown OUT.md]

For each op whose OpInfo supports autograd, up to N f32 sample inputs (default 2) are taken as
test/ops/opinfo.py takes them for the forward suite. The sample's tensors that require grad (as the
OpInfo's sample_inputs(requires_grad=True) marks them) become parameters of a
test/train/gradients.py Case; its other tensors (indices, masks, targets, running statistics) are
the module's buffers.
forward returns the sum over the floating-point outputs of sum(out * C_out), C_out a fixed random
cotangent; integer outputs (indices) stay out of the loss. The module is traced (one per op holding
every sample; if that fails, one per sample, so a failure is the sample's own), `cleave compile
--mode train --optimizer none` compiles its backward, `cleave run` runs it, and every parameter's
gradient and the loss are compared with autograd on the same traced module as gradients.py
compares them: max|cleave - torch| <= 1e-4 * max(1, max|torch|), NaN and infinities where PyTorch
has them.

Samples are not counted when a differentiable input is not a dense f32 tensor, no output is a
floating-point tensor, PyTorch's forward or autograd raises on the sample, or the sample does not
trace into a static TorchScript module. An op passes when all its counted samples pass.

Prints one line per op, `OP: P/T samples pass [f32]: ok` or `...: FAIL: reason` with the first
failure's reason (cleave's first error line, e.g. its `no gradient rule for ...`, or the mismatch),
and ends with `ops passing: K of M (pct)`.
"""
import argparse
import os
import sys
import tempfile
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "ops"))

import torch  # noqa: E402
from gradients import Case, compare, reference, run_train_plan, trace_case  # noqa: E402
from opinfo import (NAMES, Skip, add_selection_args, find_cleave, flatten, full_name,  # noqa: E402
                    is_wanted, print_missing, print_row, print_summary, rebuild, tensors_of,
                    write_tables)


def prepare(op, sample):
    """A sample as (template, its tensors, which of them require grad); Skip when it is not one
    whose gradient can be checked."""
    found, grads = [], []
    template = tensors_of((sample.input, tuple(sample.args), dict(sample.kwargs)), found, grads)
    if not any(grads):
        raise Skip("no input requires grad")
    for t, g in zip(found, grads):
        if g and t.dtype != torch.float32:
            raise Skip(f"a differentiable input of dtype {t.dtype}")
    leaves = [t.clone().requires_grad_(g) for t, g in zip(found, grads)]
    inp, args, kwargs = rebuild(template, leaves)
    try:
        outs = flatten(op.op(inp, *args, **kwargs))
    except Skip:
        raise
    except Exception as e:  # PyTorch itself refuses the sample
        raise Skip(f"PyTorch raises {type(e).__name__}")
    if any(o.layout != torch.strided or o.is_complex() or o.dtype not in NAMES for o in outs):
        raise Skip("an output of an unsupported layout or dtype")
    floats = [o for o in outs if o.is_floating_point() and o.requires_grad]
    if not floats:
        raise Skip("no floating-point output depends on a differentiable input")
    try:
        total = sum((o * torch.ones_like(o)).sum() for o in floats)
        torch.autograd.grad(total, [t for t, g in zip(leaves, grads) if g], allow_unused=True)
    except Exception as e:
        raise Skip(f"autograd raises {type(e).__name__}")
    return template, found, grads


class Samples:
    """fn(*params, *buffers) -> every sample's outputs, for a gradients.Case: maps the Case's
    parameters (p0, p1, ...) and buffers (b0, b1, ...) back onto each sample's argument
    templates. The tensors that do not require grad are buffers, not inputs: a training plan's
    inputs hold the step's samples in dim 0, which an OpInfo's index or weight tensor need not."""

    def __init__(self, op, prepared):
        self.op = op
        self.params, self.buffers, self.slots = {}, {}, []
        self.inputs = []
        for template, found, grads in prepared:
            mine = []
            for t, g in zip(found, grads):
                if g:
                    mine.append((True, len(self.params)))
                    self.params[f"p{len(self.params)}"] = t
                else:
                    mine.append((False, len(self.buffers)))
                    self.buffers[f"b{len(self.buffers)}"] = t
            self.slots.append((template, mine))

    def __call__(self, *tensors):
        n = len(self.params)
        outputs = []
        for template, mine in self.slots:
            inp, args, kwargs = rebuild(template, [tensors[i] if p else tensors[n + i]
                                                   for p, i in mine])
            outputs.extend(flatten(self.op(inp, *args, **kwargs)))
        return tuple(outputs)


def run_samples(cleave, case_dir, name, op, prepared, timeout):
    """(ok, reason) for the samples in one module; Skip when they do not make one."""
    fn = Samples(op.op, prepared)
    gen = torch.Generator().manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            module = Case(fn, fn.params, fn.inputs, fn.buffers, gen)
            traced, model_path, names = trace_case(module, fn.inputs, case_dir, name)
        except Exception as e:
            raise Skip(f"does not trace: {type(e).__name__}")
        if any(n.kind() == "prim::PythonOp" for n in traced.inlined_graph.nodes()):
            raise Skip("traces to a Python op")
        try:
            loss, expected = reference(traced, fn.inputs)
        except Exception as e:
            raise Skip(f"autograd raises on the traced module: {type(e).__name__}")
    if not expected:
        raise Skip("autograd gives no gradient")
    actual, failure = run_train_plan(cleave, model_path, names, fn.inputs, case_dir, timeout)
    if failure:
        return False, failure
    return compare(actual, loss, expected)


def check_op(cleave, work, op, max_samples, timeout):
    """(passed, counted, first failure reason, skip reasons) for one OpInfo."""
    skipped, prepared = {}, []
    with warnings.catch_warnings():  # deprecations and beta notices of the ops
        warnings.simplefilter("ignore")
        try:
            samples = op.sample_inputs("cpu", torch.float32, requires_grad=True)
            for sample in samples:
                if len(prepared) >= max_samples:
                    break
                try:
                    prepared.append(prepare(op, sample))
                except Skip as s:
                    skipped[str(s)] = skipped.get(str(s), 0) + 1
        except Exception as e:
            skipped[f"sample_inputs raises {type(e).__name__}"] = 1
    if not prepared:
        return 0, 0, "", skipped
    where = os.path.join(work, full_name(op))
    try:
        ok, reason = run_samples(cleave, where, op.name, op, prepared, timeout)
    except Skip as s:
        ok, reason = None, str(s)
    if ok:
        return len(prepared), len(prepared), "", skipped
    if ok is False and len(prepared) == 1:
        return 0, 1, reason, skipped
    # One at a time: which samples fail, and why.
    passed = counted = 0
    first_failure = ""
    for k, one in enumerate(prepared):
        try:
            ok1, why = run_samples(cleave, f"{where}.{k}", op.name, op, [one], timeout)
        except Skip as s:
            skipped[str(s)] = skipped.get(str(s), 0) + 1
            continue
        counted += 1
        if ok1:
            passed += 1
        elif not first_failure:
            first_failure = why
    return passed, counted, first_failure, skipped


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_selection_args(p, samples=2)
    p.add_argument("--timeout", type=int, default=300,
                   help="seconds each cleave compile or run may take (a timeout fails the sample)")
    a = p.parse_args()
    torch.manual_seed(0)
    from torch.testing._internal.common_methods_invocations import op_db
    from opinfo import wanted_ops

    wanted = wanted_ops(a.ops, a.subset, a.part)
    work = os.path.abspath(a.work or tempfile.mkdtemp(prefix="cleave-opinfo-gradients-"))
    cleave = find_cleave(a.cleave, "opinfo_gradients.py")
    rows, seen = [], set()
    for op in op_db:
        if not is_wanted(op, wanted):
            continue
        seen.add(full_name(op))
        if not op.supports_autograd:
            passed, counted, failure, skipped = 0, 0, "", {"its OpInfo has no autograd": 1}
        elif torch.float32 not in op.supported_dtypes("cpu"):
            passed, counted, failure, skipped = 0, 0, "", {"no f32 on the CPU": 1}
        else:
            passed, counted, failure, skipped = check_op(cleave, work, op, a.samples, a.timeout)
        row = {"op": full_name(op), "passed": passed, "counted": counted,
               "dtypes": ["f32"] if counted else [], "failure": failure, "skipped": skipped}
        rows.append(row)
        print_row(row)
    if wanted is not None:
        print_missing(wanted, seen)
    print_summary(rows)
    write_tables(rows, a.json, a.markdown)


if __name__ == "__main__":
    main()
