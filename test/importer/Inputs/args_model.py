"""A model traced through a `*args` wrapper, as many export scripts do: the traced forward's
inputs are input, input0 (once saved and loaded) and the model file records no shapes. Writes MODEL.pt,
inputs.safetensors (in forward's order, named as a user would: not after the arguments),
named.safetensors (two tensors named input0 and input, in the opposite order) and
outputs.safetensors (PyTorch's output_0).

usage: args_model.py OUT_DIR
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples"))
from safetensors_io import save_file  # noqa: E402


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(6, 4)
        self.embed = torch.nn.Embedding(10, 4)

    def forward(self, features, tokens):
        return self.proj(features) + self.embed(tokens)


class Wrapper(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, *args):
        return self.model(*args)


def main():
    out = sys.argv[1]
    torch.manual_seed(0)
    model = Wrapper(Model()).eval()
    features = torch.randn(3, 6)
    tokens = torch.randint(0, 10, (3,))
    traced = torch.jit.trace(model, (features, tokens))
    traced.save(os.path.join(out, "model.pt"))
    save_file({"features": features, "tokens": tokens}, os.path.join(out, "inputs.safetensors"))
    save_file({"input0": tokens, "input": features},
              os.path.join(out, "named.safetensors"))
    with torch.no_grad():
        save_file({"output_0": traced(features, tokens)}, os.path.join(out, "outputs.safetensors"))


if __name__ == "__main__":
    main()
