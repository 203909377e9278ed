"""Zero-size dims end to end: models whose inputs have a dim of size 0 (an empty batch, an
empty contraction) are traced, compiled and run by cleave and compared with PyTorch: shapes,
dtypes and values (sums of nothing are 0, means of nothing NaN, a matmul over k = 0 zeros).

Usage: zero_size.py --cleave CLEAVE --work DIR; prints one line per case, 'ok' or the reason."""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))

import torch  # noqa: E402
from safetensors_io import load_file, save_file  # noqa: E402


class Mlp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 4)

    def forward(self, x, y):
        h = torch.relu(self.fc(x)) * 2
        return h.sum(0), torch.cat([x, y], 0), (x + 1).mean(1), torch.softmax(h, -1), x.mean(0)


class Contraction(torch.nn.Module):
    def forward(self, a, b):
        return a @ b, (a * 2).sum(-1), torch.var(a, dim=0)


CASES = {
    "empty-batch": (Mlp(), [torch.randn(0, 3), torch.randn(2, 3)]),
    "empty-contraction": (Contraction(), [torch.randn(2, 0), torch.randn(0, 5)]),
}


def run(cleave, work, name, module, inputs):
    torch.manual_seed(0)
    traced = torch.jit.trace(module.eval(), tuple(inputs), check_trace=False)
    expected = traced(*inputs)
    names = [f"x{i}" for i in range(len(inputs))]
    model, plan = os.path.join(work, f"{name}.pt"), os.path.join(work, f"{name}.plan")
    torch.jit.save(traced, model)
    loaded = torch.jit.load(model)
    names = [a.name for a in loaded.forward.schema.arguments[1:]]
    meta = {"format": 1, "model": name,
            "inputs": [{"name": n, "shape": list(t.shape), "dtype": "f32"}
                       for n, t in zip(names, inputs)]}
    torch.jit.save(loaded, model, _extra_files={"cleave.json": json.dumps(meta)})
    ins, outs = os.path.join(work, f"{name}.in"), os.path.join(work, f"{name}.out")
    save_file(dict(zip(names, inputs)), ins)
    for cmd in ([cleave, "compile", model, "-o", plan],
                [cleave, "run", plan, "--inputs", ins, "--outputs", outs]):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if r.returncode != 0:
            return f"{cmd[1]} failed: {r.stderr.strip().splitlines()[-1:]}"
    got = load_file(outs)
    for i, e in enumerate(expected):
        g = got.get(f"output_{i}")
        if g is None or tuple(g.shape) != tuple(e.shape) or g.dtype != e.dtype:
            return f"output {i}: {None if g is None else (tuple(g.shape), g.dtype)}, " \
                   f"PyTorch {(tuple(e.shape), e.dtype)}"
        if not torch.allclose(g, e, rtol=1e-5, atol=1e-6, equal_nan=True):
            return f"output {i}: values differ"
    return "ok"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--cleave", required=True)
    p.add_argument("--work", required=True)
    args = p.parse_args()
    os.makedirs(args.work, exist_ok=True)
    failed = 0
    for name, (module, inputs) in CASES.items():
        result = run(args.cleave, args.work, name, module, inputs)
        failed += result != "ok"
        print(f"{name}: {result}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
