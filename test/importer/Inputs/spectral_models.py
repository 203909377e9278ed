"""Spectrogram models for spectral.test: torch.stft and torch.istft with the complex values
between them, traced. Writes MODEL.pt, inputs.safetensors and PyTorch's outputs.safetensors
into OUT_DIR.

usage: spectral_models.py NAME OUT_DIR
  spectrogram  stft (centered, reflect padding, Hann window, normalized), real and imaginary
               parts as channels
  roundtrip    stft, a slice and zero padding of the complex spectrogram, a learned mask on
               its real form, view_as_complex, istft to the input's length (as HDemucs)
  rectangular  stft without a window or centering, win_length < n_fft, unbatched
  complex_op   a complex tensor into an op that does not take one (refused)
"""
import json
import os
import sys

import torch
import torch.nn as nn

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples"))
from safetensors_io import save_file  # noqa: E402


class Spectrogram(nn.Module):
    def forward(self, x):
        z = torch.stft(x, 64, 16, window=torch.hann_window(64), center=True, pad_mode="reflect",
                       normalized=True, return_complex=True)
        return torch.view_as_real(z).permute(0, 3, 1, 2)


class Roundtrip(nn.Module):
    def __init__(self):
        super().__init__()
        self.mask = nn.Conv2d(2, 2, 3, padding=1)

    def forward(self, x):
        z = torch.stft(x, 32, 8, window=torch.hann_window(32), center=True, normalized=True,
                       return_complex=True)
        z = z[:, :-1, :]                      # drop the Nyquist bin, as HDemucs
        m = torch.view_as_real(z).permute(0, 3, 1, 2)
        m = self.mask(m).permute(0, 2, 3, 1).contiguous()
        z = torch.view_as_complex(m)
        z = nn.functional.pad(z, (0, 0, 0, 1))  # and put it back
        return torch.istft(z, 32, 8, window=torch.hann_window(32), normalized=True,
                           length=x.shape[-1])


class Rectangular(nn.Module):
    def forward(self, x):
        z = torch.stft(x, 16, 4, win_length=12, center=False, return_complex=True)
        return torch.view_as_real(z)


class ComplexOp(nn.Module):
    def forward(self, x):
        z = torch.stft(x, 16, 4, return_complex=True)
        return torch.view_as_real(z * 2)


def main():
    name, out = sys.argv[1], sys.argv[2]
    torch.manual_seed(0)
    model, x = {"spectrogram": (Spectrogram(), torch.randn(2, 200)),
                "roundtrip": (Roundtrip(), torch.randn(3, 150)),
                "rectangular": (Rectangular(), torch.randn(50)),
                "complex_op": (ComplexOp(), torch.randn(2, 50))}[name]
    model.eval()
    traced = torch.jit.trace(model, (x,), check_trace=False)
    meta = {"format": 1, "model": name, "inputs": [{"name": "x", "shape": list(x.shape),
                                                    "dtype": "f32"}]}
    traced.save(os.path.join(out, "model.pt"), _extra_files={"cleave.json": json.dumps(meta)})
    save_file({"x": x}, os.path.join(out, "inputs.safetensors"))
    with torch.no_grad():
        save_file({"output_0": traced(x)}, os.path.join(out, "outputs.safetensors"))


if __name__ == "__main__":
    main()
