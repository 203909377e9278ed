"""Modules traced under torch.no_grad() in eval mode, where PyTorch 1.13 takes its fused
inference paths: nn.MultiheadAttention becomes aten::_native_multi_head_attention and
nn.TransformerEncoderLayer aten::_transformer_encoder_layer_fwd. Writes MODEL.pt,
inputs.safetensors and PyTorch's outputs.safetensors into OUT_DIR.

usage: fused_attention.py NAME OUT_DIR    (NAME: mha, encoder, encoder_norm_first)
"""
import json
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples"))
from safetensors_io import save_file  # noqa: E402


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(16, 4, batch_first=True)

    def forward(self, x, padding):
        # The fast path: self-attention, no weights returned, a key padding mask.
        return self.attn(x, x, x, key_padding_mask=padding, need_weights=False)[0]


class Encoder(nn.Module):
    def __init__(self, norm_first):
        super().__init__()
        self.layers = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(16, 4, 32, batch_first=True, norm_first=norm_first,
                                       activation="gelu" if norm_first else "relu"),
            num_layers=2, enable_nested_tensor=False)

    def forward(self, x):
        return self.layers(x)


def main():
    name, out = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    if name == "mha":
        model = Attention().eval()
        padding = torch.zeros(2, 5, dtype=torch.bool)
        padding[1, 3:] = True  # the second sequence has 3 tokens
        inputs = {"x": torch.randn(2, 5, 16), "padding": padding}
    else:
        model = Encoder(name == "encoder_norm_first").eval()
        inputs = {"x": torch.randn(2, 6, 16)}
    with torch.no_grad():
        traced = torch.jit.trace(model, tuple(inputs.values()), check_trace=False)
        result = traced(*inputs.values())
    kinds = {n.kind() for n in traced.inlined_graph.nodes()}
    fused = {"aten::_native_multi_head_attention", "aten::_transformer_encoder_layer_fwd"}
    assert kinds & fused, f"no fused path traced: {sorted(kinds)}"
    meta = {"format": 1, "model": name, "inputs": [
        {"name": k, "shape": list(v.shape), "dtype": "i1" if v.dtype == torch.bool else "f32"}
        for k, v in inputs.items()]}
    traced.save(os.path.join(out, "model.pt"), _extra_files={"cleave.json": json.dumps(meta)})
    save_file(inputs, os.path.join(out, "inputs.safetensors"))
    result = result if isinstance(result, tuple) else (result,)
    save_file({f"output_{i}": t for i, t in enumerate(result)},
              os.path.join(out, "outputs.safetensors"))


if __name__ == "__main__":
    main()
