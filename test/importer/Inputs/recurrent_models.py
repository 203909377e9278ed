"""Recurrent models for recurrent.test, traced in eval mode with random weights: each writes
MODEL.pt, inputs.safetensors and PyTorch's outputs.safetensors into OUT_DIR.

usage: recurrent_models.py NAME OUT_DIR
"""
import json
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples"))
from safetensors_io import save_file  # noqa: E402


class Tagger(nn.Module):
    """Embedding, a 2-layer bidirectional LSTM (batch_first) and a GRU over its output."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(20, 8)
        self.lstm = nn.LSTM(8, 6, num_layers=2, bidirectional=True, batch_first=True)
        self.gru = nn.GRU(12, 5)
        self.head = nn.Linear(5, 3)

    def forward(self, tokens):
        y, (h, c) = self.lstm(self.embed(tokens))
        z, _ = self.gru(y.transpose(0, 1))
        return self.head(z), h, c


class Packed(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(4, 3)

    def forward(self, x):
        packed = nn.utils.rnn.pack_padded_sequence(x, torch.tensor([5, 3]))
        out, _ = self.rnn(packed)
        return nn.utils.rnn.pad_packed_sequence(out)[0]


def main():
    name, out = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    if name == "tagger":
        model, inputs = Tagger().eval(), {"tokens": torch.randint(0, 20, (2, 7))}
    else:
        model, inputs = Packed().eval(), {"x": torch.randn(5, 2, 4)}
    traced = torch.jit.trace(model, tuple(inputs.values()), check_trace=False)
    dtypes = {torch.float32: "f32", torch.int64: "i64"}
    meta = {"format": 1, "model": name, "inputs": [
        {"name": k, "shape": list(v.shape), "dtype": dtypes[v.dtype]} for k, v in inputs.items()]}
    traced.save(os.path.join(out, "model.pt"), _extra_files={"cleave.json": json.dumps(meta)})
    save_file(inputs, os.path.join(out, "inputs.safetensors"))
    with torch.no_grad():
        result = traced(*inputs.values())
    result = result if isinstance(result, tuple) else (result,)
    save_file({f"output_{i}": t for i, t in enumerate(result)},
              os.path.join(out, "outputs.safetensors"))


if __name__ == "__main__":
    main()
