"""What the e2e model scripts share: their command line (-o MODEL.pt --io DIR [--batch B]) and
the export of a module traced on one input, with its inputs and PyTorch's outputs (eval mode,
no_grad) written beside it for compare_outputs.py."""
import argparse
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
from safetensors_io import save_file  # noqa: E402

import torch  # noqa: E402


def parse_args(doc, batch=2):
    p = argparse.ArgumentParser(description=doc)
    p.add_argument("-o", required=True)
    p.add_argument("--io", required=True)
    p.add_argument("--batch", type=int, default=batch)
    return p.parse_args()


def export(model, x, name, args):
    """Traces `model` (in eval mode) on `x`, saves it to args.o with cleave's metadata, and
    writes inputs.safetensors and PyTorch's outputs.safetensors to args.io."""
    traced = torch.jit.trace(model.eval(), (x,))
    with torch.no_grad():
        out = traced(x)
    meta = {"format": 1, "model": name,
            "inputs": [{"name": "x", "shape": list(x.shape), "dtype": "f32"}]}
    traced.save(args.o, _extra_files={"cleave.json": json.dumps(meta)})
    os.makedirs(args.io, exist_ok=True)
    save_file({"x": x}, os.path.join(args.io, "inputs.safetensors"))
    save_file({"output_0": out}, os.path.join(args.io, "outputs.safetensors"))
