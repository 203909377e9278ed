"""Corrections for bugs of the PyTorch the references run on, applied only where a probe finds
the bug, so that cleave is compared with what PyTorch means to compute.

- aten::gelu_backward (Debian's PyTorch 1.13, CPU) reads a non-contiguous gradient as if it were
  contiguous: gelu followed by a transpose (torchaudio's wav2vec2 feature extractor) gets a
  garbage input gradient. Where the probe sees that, the CPU kernel is replaced by PyTorch's own
  formula on a contiguous copy of the gradient (erf for "none", tanh for "tanh").

`apply()` installs what is needed and returns the names of the fixes applied.
"""
import math
import sys

import torch

_library = None


def _gelu_backward_is_broken():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(2, 4, 5, generator=gen)
    grad = torch.randn(2, 5, 4, generator=gen).transpose(1, 2)
    strided = torch.ops.aten.gelu_backward(grad, x)
    dense = torch.ops.aten.gelu_backward(grad.contiguous(), x)
    return not torch.allclose(strided, dense)


def _gelu_backward(grad, x, approximate="none"):
    grad = grad.contiguous()
    if approximate == "tanh":
        k = math.sqrt(2.0 / math.pi)
        inner = k * (x + 0.044715 * x * x * x)
        t = torch.tanh(inner)
        d_inner = k * (1.0 + 3.0 * 0.044715 * x * x)
        return grad * (0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * d_inner)
    cdf = 0.5 * (1.0 + torch.erf(x * (1.0 / math.sqrt(2.0))))
    pdf = torch.exp(-0.5 * x * x) * (1.0 / math.sqrt(2.0 * math.pi))
    return grad * (cdf + x * pdf)


def apply():
    global _library
    applied = []
    if _library is None and _gelu_backward_is_broken():
        import warnings
        with warnings.catch_warnings():  # "Overriding a previously registered kernel"
            warnings.simplefilter("ignore")
            _library = torch.library.Library("aten", "IMPL", "CPU")
            _library.impl("gelu_backward", _gelu_backward)
        applied.append("gelu_backward on a non-contiguous gradient")
    for fix in applied:
        print(f"note: PyTorch {torch.__version__} gets {fix} wrong here; the reference uses "
              "the corrected kernel of test/train/torch_fixes.py", file=sys.stderr)
    return applied
