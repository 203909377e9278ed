"""Gradient conformance: every gradient rule of cleave against PyTorch's autograd.

usage: gradients.py --cleave PATH/TO/cleave --work DIR [--only NAME[,NAME...]] [--list]

One case per op and attribute family. Each case is a small module whose float operands are
parameters; forward applies the op and returns sum(op(...) * C) for a fixed random cotangent C,
so the parameters' gradients are the op's vector-Jacobian product at a random point. The module
is traced, `cleave compile --mode train --optimizer none` compiles its backward (the plan returns
the loss and grad.<parameter>), `cleave run` runs it, and every gradient is compared with
autograd's on the same traced module: max|cleave - torch| <= 1e-4 * max(1, max|torch|) (f32,
different summation orders; docs/training.md). Prints one line per case; exits 1 if any fails.
"""
import argparse
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "examples"))
sys.path.insert(0, os.path.join(HERE, "..", "ops"))
from safetensors_io import load_file, save_file  # noqa: E402

import torch  # noqa: E402
import torch_fixes  # noqa: E402
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from opinfo import NAMES, run_stage  # noqa: E402

TOL = 1e-4


class Case(nn.Module):
    """sum(fn(*params, *inputs) * cotangent): `params` are trained, `inputs` are data. Every
    floating-point output gets a cotangent; other outputs (indices) are left out of the loss."""

    def __init__(self, fn, params, inputs, buffers, gen):
        super().__init__()
        self.fn = fn
        self.names = list(params)
        self.buffer_names = list(buffers)
        for name, value in params.items():
            setattr(self, name, nn.Parameter(value))
        for name, value in buffers.items():
            self.register_buffer(name, value)
        with torch.no_grad():
            out = fn(*params.values(), *[v.clone() for v in buffers.values()], *inputs)
        outs = out if isinstance(out, tuple) else (out,)
        self.floats = [i for i, o in enumerate(outs) if o.is_floating_point()]
        if not self.floats:
            raise ValueError("no floating-point output to take a gradient of")
        for i in self.floats:
            self.register_buffer(f"cotangent{i}", torch.randn(outs[i].shape, generator=gen))

    def forward(self, *inputs):
        out = self.fn(*[getattr(self, n) for n in self.names],
                      *[getattr(self, n) for n in self.buffer_names], *inputs)
        outs = out if isinstance(out, tuple) else (out,)
        total = None
        for i in self.floats:
            term = (outs[i] * getattr(self, f"cotangent{i}")).sum()
            total = term if total is None else total + term
        return total


def r(*shape, gen, low=None, high=None):
    t = torch.randn(shape, generator=gen)
    if low is not None:
        t = low + (high - low) * torch.rand(shape, generator=gen)
    return t


def cases(gen):
    """name -> (fn, params, inputs, buffers). Inputs are data tensors (ids, labels, masks),
    buffers the model's (running statistics)."""
    c = {}

    def add(name, fn, params, inputs=(), buffers=None):
        c[name] = (fn, params, list(inputs), buffers or {})

    x = lambda *s: r(*s, gen=gen)  # noqa: E731
    pos = lambda *s: r(*s, gen=gen, low=0.5, high=2.0)  # noqa: E731
    # Elementwise maps.
    for name, fn in [("neg", torch.neg), ("abs", torch.abs), ("relu", torch.relu),
                     ("silu", F.silu), ("sigmoid", torch.sigmoid), ("tanh", torch.tanh),
                     ("exp", torch.exp), ("sin", torch.sin), ("cos", torch.cos),
                     ("erf", torch.erf), ("gelu", F.gelu),
                     ("gelu_tanh", lambda a: F.gelu(a, approximate="tanh"))]:
        add(name, fn, {"a": x(3, 17)})
    for name, fn in [("log", torch.log), ("sqrt", torch.sqrt), ("rsqrt", torch.rsqrt)]:
        add(name, fn, {"a": pos(3, 17)})
    for name, fn in [("expm1", torch.expm1), ("atan", torch.atan), ("sinh", torch.sinh),
                     ("cosh", torch.cosh), ("asinh", torch.asinh)]:
        add(name, fn, {"a": x(3, 17)})
    # Inside each domain, away from its poles.
    inside = lambda low, high: r(3, 17, gen=gen, low=low, high=high)  # noqa: E731
    add("log1p", torch.log1p, {"a": inside(-0.5, 2.0)})
    add("tan", torch.tan, {"a": inside(-1.2, 1.2)})
    add("asin", torch.asin, {"a": inside(-0.9, 0.9)})
    add("acos", torch.acos, {"a": inside(-0.9, 0.9)})
    add("atanh", torch.atanh, {"a": inside(-0.9, 0.9)})
    add("acosh", torch.acosh, {"a": inside(1.2, 3.0)})
    add("reciprocal", torch.reciprocal, {"a": pos(3, 17)})
    # Special functions (core ops with kernels, and composites of them).
    add("lgamma", torch.lgamma, {"a": pos(3, 17)})
    add("digamma", torch.digamma, {"a": pos(3, 17)})
    add("polygamma_2", lambda a: torch.polygamma(2, a), {"a": pos(3, 17)})
    add("erfinv", torch.erfinv, {"a": inside(-0.9, 0.9)})
    add("i0", torch.i0, {"a": x(3, 17)})
    add("i1e", torch.special.i1e, {"a": x(3, 17)})
    add("ndtr", torch.special.ndtr, {"a": x(3, 17)})
    add("log_ndtr", torch.special.log_ndtr, {"a": x(3, 17)})
    add("mvlgamma", lambda a: torch.mvlgamma(a, 3), {"a": inside(1.5, 4.0)})
    add("igamma_x", lambda a: torch.igamma(torch.full_like(a, 1.5), a), {"a": pos(3, 17)})
    # Piecewise constant: a zero gradient, and added to another path's.
    for name, fn in [("floor", torch.floor), ("ceil", torch.ceil), ("round", torch.round),
                     ("trunc", torch.trunc), ("sign", torch.sign)]:
        add(name, fn, {"a": x(3, 17)})
    add("round_plus_square", lambda a: torch.round(a * 4.0) + a * a, {"a": x(3, 17)})
    # Composite ops: decomposed into core ops before differentiation, so their gradients
    # are the core rules' (docs/ops.md's decomposition table).
    for name, fn in [("hardswish", F.hardswish), ("softplus", F.softplus), ("elu", F.elu),
                     ("selu", F.selu), ("leaky_relu", F.leaky_relu), ("mish", F.mish),
                     ("logsigmoid", F.logsigmoid), ("hardsigmoid", F.hardsigmoid),
                     ("square", torch.square), ("sinc", torch.sinc)]:
        add(name, fn, {"a": x(3, 17)})
    add("var", lambda a: torch.var(a, dim=1), {"a": x(3, 17)})
    add("std_keepdim", lambda a: torch.std(a, dim=0, keepdim=True), {"a": x(3, 17)})
    add("logsumexp", lambda a: torch.logsumexp(a, dim=-1), {"a": x(3, 17)})
    add("vector_norm", lambda a: torch.linalg.vector_norm(a, dim=1), {"a": x(3, 17)})
    # Triangular solves (cleave.triangular_solve's own rule): A well conditioned, its other
    # triangle and (unitriangular) its diagonal unread, so their gradients are 0.
    tri = lambda n: x(n, n) * 0.3 + 3.0 * torch.eye(n)  # noqa: E731
    add("solve_triangular", lambda a, b: torch.linalg.solve_triangular(a, b, upper=True),
        {"a": tri(4), "b": x(4, 3)})
    add("solve_triangular_right_unit",
        lambda a, b: torch.linalg.solve_triangular(a, b, upper=False, left=False,
                                                   unitriangular=True),
        {"a": tri(4), "b": x(2, 4)})
    # cholesky's rule (PyTorch's cholesky_backward), of a symmetric positive-definite A.
    spd = lambda n: (lambda m: m @ m.T + n * torch.eye(n))(x(n, n))  # noqa: E731
    add("cholesky", lambda a: torch.linalg.cholesky(a), {"a": spd(4)})
    add("cholesky_upper", lambda a: torch.linalg.cholesky(a, upper=True), {"a": spd(4)})
    # lu_factor's rule (square), and what is written on it: det, solve, inv.
    add("lu_factor", lambda a: torch.linalg.lu_factor(a)[0], {"a": x(2, 4, 4)})
    add("det", torch.linalg.det, {"a": tri(4)})
    add("solve", lambda a, b: torch.linalg.solve(a, b), {"a": tri(4), "b": x(4, 2)})
    add("inv", torch.linalg.inv, {"a": tri(3)})
    add("norm_p3", lambda a: torch.norm(a, p=3), {"a": pos(3, 17)})
    add("logaddexp", torch.logaddexp, {"a": x(3, 17), "b": x(17)})
    add("atan2", torch.atan2, {"a": x(3, 17), "b": pos(3, 17)})
    add("xlogy", torch.xlogy, {"a": x(3, 17), "b": pos(3, 17)})
    add("lerp", lambda a, b, w: torch.lerp(a, b, w), {"a": x(3, 17), "b": x(3, 17), "w": x(17)})
    add("glu", lambda a: F.glu(a, dim=-1), {"a": x(3, 16)})
    add("prelu", lambda a, w: F.prelu(a, w), {"a": x(2, 4, 5), "w": x(4)})
    add("pad_reflect", lambda a: F.pad(a, (2, 1), mode="reflect"), {"a": x(2, 3, 5)})
    add("group_norm", lambda a, w, b: F.group_norm(a, 2, w, b), {"a": x(2, 4, 5), "w": x(4), "b": x(4)})
    add("interpolate_bilinear", lambda a: F.interpolate(a, scale_factor=2, mode="bilinear"),
        {"a": x(1, 2, 3, 4)})
    target = torch.rand(3, 17, generator=gen)
    add("bce_with_logits", lambda a, t: F.binary_cross_entropy_with_logits(a, t), {"a": x(3, 17)},
        [target])
    add("smooth_l1_loss", lambda a, t: F.smooth_l1_loss(a, t, beta=0.5), {"a": x(3, 17)}, [target])
    add("kl_div", lambda a, t: F.kl_div(a, t, reduction="batchmean"), {"a": x(3, 17)}, [target])
    # Distances and margin losses spelled as core ops by the importer.
    add("cosine_similarity", lambda a, b: F.cosine_similarity(a, b, dim=1), {"a": x(3, 17), "b": x(3, 17)})
    add("pairwise_distance", lambda a, b: F.pairwise_distance(a, b, p=3.0), {"a": x(3, 17), "b": x(3, 17)})
    add("triplet_margin_loss", lambda a, b, n: F.triplet_margin_loss(a, b, n, margin=2.0, swap=True),
        {"a": x(3, 17), "b": x(3, 17), "n": x(3, 17)})
    signs = torch.where(torch.rand(3, generator=gen) > 0.5, 1.0, -1.0)
    add("cosine_embedding_loss", lambda a, b, t: F.cosine_embedding_loss(a, b, t, margin=0.1),
        {"a": x(3, 17), "b": x(3, 17)}, [signs])
    add("margin_ranking_loss", lambda a, b, t: F.margin_ranking_loss(a, b, t, margin=0.2),
        {"a": x(3), "b": x(3)}, [signs])
    add("multi_margin_loss", lambda a, t: F.multi_margin_loss(a, t, p=2, margin=0.5),
        {"a": x(3, 5)}, [torch.tensor([0, 4, 2])])
    add("einsum_bmm", lambda a, b: torch.einsum("bij,bjk->bik", a, b), {"a": x(2, 3, 4), "b": x(2, 4, 5)})
    add("cross", lambda a, b: torch.linalg.cross(a, b), {"a": x(4, 3), "b": x(4, 3)})
    add("pow_scalar", lambda a: a.pow(3.0), {"a": x(3, 17)})
    add("pow_tensor", lambda a, b: torch.pow(a, b), {"a": pos(4, 5), "b": x(5)})
    # Binary maps with broadcasting (the gradient of the broadcast operand sums back).
    add("add_broadcast", lambda a, b: a + b, {"a": x(2, 3, 4), "b": x(3, 1)})
    add("sub_broadcast", lambda a, b: a - b, {"a": x(4), "b": x(2, 3, 4)})
    add("mul_broadcast", lambda a, b: a * b, {"a": x(2, 3, 4), "b": x(1, 4)})
    add("div_broadcast", lambda a, b: a / b, {"a": x(2, 3, 4), "b": pos(3, 1)})
    add("div_scalar", lambda a: a / 3.0, {"a": x(2, 5)})
    ties = torch.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 2.0]])
    add("maximum_ties", torch.maximum, {"a": ties.clone(), "b": torch.tensor([1.0, -1.0, 4.0])})
    add("minimum_ties", torch.minimum, {"a": ties.clone(), "b": torch.tensor([1.0, -1.0, 4.0])})
    mask = torch.rand(3, 6, generator=gen) > 0.5
    add("where", lambda a, b, m: torch.where(m, a, b), {"a": x(3, 6), "b": x(6)}, [mask])
    add("masked_fill", lambda a, m: a.masked_fill(m, 0.0), {"a": x(3, 6)}, [mask])
    add("tril", lambda a: torch.tril(a, diagonal=1), {"a": x(2, 5, 5)})
    add("triu", lambda a: torch.triu(a), {"a": x(5, 4)})
    # Contractions.
    add("matmul_batched", torch.matmul, {"a": x(2, 1, 3, 4), "b": x(3, 4, 5)})
    add("matmul_2d_rhs", torch.matmul, {"a": x(2, 3, 4), "b": x(4, 5)})
    add("linear_bias", F.linear, {"a": x(2, 3, 4), "w": x(5, 4), "b": x(5)})
    add("linear_no_bias", F.linear, {"a": x(6, 4), "w": x(5, 4)})
    ids = torch.randint(0, 7, (3, 5), generator=gen)
    ids[0, 0] = 2
    ids[1, 1] = 2  # padding rows repeat
    add("embedding_padding_idx", lambda w, i: F.embedding(i, w, padding_idx=2), {"w": x(7, 4)}, [ids])
    add("embedding", lambda w, i: F.embedding(i, w), {"w": x(7, 4)}, [ids])
    # Indexing: gather's gradient scatter-adds (repeated indices add up),
    # scatter's gathers src's and masks or passes the input's.
    cols = torch.randint(0, 5, (3, 7), generator=gen)
    add("gather_repeats", lambda a, i: torch.gather(a, 1, i), {"a": x(3, 5)}, [cols])
    rows = torch.argsort(torch.rand(4, 5, generator=gen), dim=0)[:3]  # unique per column
    add("scatter_src", lambda a, b, i: a.scatter(0, i, b), {"a": x(4, 5), "b": x(3, 5)}, [rows])
    add("scatter_add_repeats", lambda a, b, i: a.scatter_add(1, i, b),
        {"a": x(3, 5), "b": x(3, 7)}, [cols])
    add("scatter_reduce_sum_exclude_self",
        lambda a, b, i: a.scatter_reduce(1, i, b, "sum", include_self=False),
        {"a": x(3, 5), "b": x(3, 7)}, [cols])
    picks = torch.tensor([4, 0, 4, 2])
    add("index_select", lambda a, i: torch.index_select(a, 1, i), {"a": x(3, 5)}, [picks])
    add("advanced_index", lambda a, i: a[i, :, i - 1], {"a": x(5, 2, 5)}, [picks])
    add("index_put_accumulate", lambda a, b, i: a.index_put((i,), b, accumulate=True),
        {"a": x(5, 3), "b": x(4, 3)}, [picks])
    add("take_negative", lambda a, i: torch.take(a, i - 8), {"a": x(3, 5)}, [picks])
    add("flip_roll", lambda a: torch.roll(torch.flip(a, [0, 2]), 2, 1) * a, {"a": x(2, 4, 3)})
    # Normalizations.
    add("layer_norm", lambda a, w, b: F.layer_norm(a, (6,), w, b, 1e-5),
        {"a": x(2, 3, 6), "w": x(6), "b": x(6)})
    add("layer_norm_no_affine", lambda a: F.layer_norm(a, (3, 6)), {"a": x(2, 3, 6)})
    add("batch_norm_train",
        lambda a, w, b, rm, rv: F.batch_norm(a, rm, rv, w, b, training=True, momentum=0.1, eps=1e-5),
        {"a": x(4, 3, 5, 5), "w": x(3), "b": x(3)},
        buffers={"running_mean": torch.zeros(3), "running_var": torch.ones(3)})
    add("softmax_last", lambda a: F.softmax(a, dim=-1), {"a": x(3, 7)})
    add("softmax_dim0", lambda a: F.softmax(a, dim=0), {"a": x(3, 7)})
    add("log_softmax", lambda a: F.log_softmax(a, dim=1), {"a": x(2, 5, 3)})
    # Reductions.
    add("sum_keepdim", lambda a: a.sum(dim=(0, 2), keepdim=True), {"a": x(2, 3, 4)})
    add("mean_dim", lambda a: a.mean(dim=1), {"a": x(2, 3, 4)})
    add("amax_ties", lambda a: torch.amax(a, dim=1),
        {"a": torch.tensor([[1.0, 3.0, 3.0], [2.0, -1.0, 0.0]])})
    # Extrema with indices: the gradient goes to the first index (ties too);
    # the whole tensor's extremum shares it among ties.
    ties2 = torch.tensor([[1.0, 3.0, 3.0, 0.5], [2.0, -1.0, 2.0, -1.0], [0.0, 0.0, 0.0, 0.0]])
    add("max_dim_ties", lambda a: torch.max(a, dim=1)[0], {"a": ties2.clone()})
    add("min_dim0_keepdim_ties", lambda a: torch.min(a, dim=0, keepdim=True)[0], {"a": ties2.clone()})
    add("max_dim_3d", lambda a: torch.max(a, dim=-1).values, {"a": x(2, 3, 5)})
    add("max_all_ties", lambda a: torch.max(a), {"a": ties2.clone()})
    add("min_all_ties", lambda a: torch.min(a), {"a": ties2.clone()})
    # Scans and products, with zeros where PyTorch takes its other formulas.
    add("cumsum", lambda a: torch.cumsum(a, dim=1), {"a": x(3, 5)})
    add("cumsum_dim0_3d", lambda a: torch.cumsum(a, 0), {"a": x(4, 2, 3)})
    add("cumprod", lambda a: torch.cumprod(a, dim=1), {"a": pos(3, 5)})
    add("cumprod_zeros", lambda a: torch.cumprod(a, dim=1),
        {"a": torch.tensor([[1.5, 0.0, 2.0, 0.5], [0.0, 0.0, 3.0, 1.0], [2.0, -1.0, 0.5, 0.0],
                            [0.5, 2.0, -1.5, 3.0]])})
    add("cumprod_zeros_dim0", lambda a: torch.cumprod(a, dim=0),
        {"a": torch.tensor([[1.5, 0.0], [0.0, 2.0], [2.0, -1.0]])})
    # Sorting: the values' gradient goes back through the permutation; a
    # running extremum adds the gradients of every position that took an
    # element (ties go to the later index); logcumsumexp runs reversed.
    add("sort_values", lambda a: torch.sort(a, dim=1)[0] * torch.arange(5.0), {"a": x(3, 5)})
    add("sort_descending_dim0", lambda a: torch.sort(a, dim=0, descending=True).values,
        {"a": x(4, 3)})
    add("topk_values", lambda a: torch.topk(a, 2, dim=-1).values, {"a": x(3, 6)})
    add("topk_smallest", lambda a: torch.topk(a, 3, dim=0, largest=False)[0], {"a": x(5, 2)})
    add("cummax_values", lambda a: torch.cummax(a, dim=1)[0],
        {"a": torch.tensor([[1.0, 3.0, 3.0, 0.5, 4.0], [2.0, -1.0, 2.0, -1.0, 0.0]])})
    add("cummin_values_dim0", lambda a: torch.cummin(a, dim=0).values, {"a": x(5, 3)})
    add("logcumsumexp", lambda a: torch.logcumsumexp(a, dim=1), {"a": x(3, 6)})
    add("median_dim", lambda a: torch.median(a, dim=1).values, {"a": x(3, 5)})
    add("quantile", lambda a: torch.quantile(a, torch.tensor([0.25, 0.6]), dim=1), {"a": x(3, 5)})
    add("prod_all", lambda a: torch.prod(a), {"a": pos(3, 4)})
    add("prod_dim_zeros", lambda a: torch.prod(a, dim=1),
        {"a": torch.tensor([[1.5, 2.0, -0.5], [1.5, 0.0, 3.0], [0.0, 2.0, 0.0]])})
    add("prod_dim0_keepdim", lambda a: torch.prod(a, 0, keepdim=True), {"a": pos(4, 3)})
    # Convolution and pooling.
    add("conv2d_stride_pad", lambda a, w, b: F.conv2d(a, w, b, stride=2, padding=1),
        {"a": x(2, 3, 7, 7), "w": x(4, 3, 3, 3), "b": x(4)})
    add("conv2d_groups_dilation", lambda a, w: F.conv2d(a, w, None, stride=1, padding=2, dilation=2, groups=2),
        {"a": x(1, 4, 6, 6), "w": x(6, 2, 3, 3)})
    add("conv2d_1x1", lambda a, w: F.conv2d(a, w), {"a": x(2, 3, 4, 4), "w": x(5, 3, 1, 1)})
    # Strides that leave the input's last rows and columns out of every window: their
    # gradient is zero.
    add("conv2d_stride_uncovered", lambda a, w: F.conv2d(a, w, stride=(2, 3)),
        {"a": x(2, 3, 8, 9), "w": x(4, 3, 3, 2)})
    # A gelu whose gradient arrives transposed (wav2vec2's feature extractor): PyTorch 1.13's
    # own kernel reads it wrongly; the reference uses torch_fixes.py's.
    add("gelu_then_transpose", lambda a: F.gelu(a).transpose(1, 2), {"a": x(2, 4, 5)})
    add("conv1d_stride_uncovered", lambda a, w: F.conv1d(a, w, stride=5),
        {"a": x(2, 1, 23), "w": x(4, 1, 10)})
    # 3-D convolutions: one conv2d per depth offset of the kernel, summed.
    add("conv3d_stride_pad", lambda a, w, b: F.conv3d(a, w, b, stride=(1, 2, 2), padding=1),
        {"a": x(2, 3, 5, 6, 6), "w": x(4, 3, 3, 3, 3), "b": x(4)})
    add("conv3d_depthwise_dilation", lambda a, w: F.conv3d(
        a, w, None, stride=(2, 1, 1), padding=(2, 0, 1), dilation=(2, 1, 1), groups=4),
        {"a": x(1, 4, 6, 5, 5), "w": x(4, 1, 3, 2, 2)})
    add("conv3d_groups", lambda a, w, b: F.conv3d(a, w, b, padding=(1, 0, 1), groups=2),
        {"a": x(2, 4, 5, 5, 4), "w": x(6, 2, 3, 3, 2), "b": x(6)})
    # padding='same' with even kernels: the odd padding goes after, as PyTorch.
    add("conv3d_same_even", lambda a, w: F.conv3d(a, w, padding="same"),
        {"a": x(1, 2, 4, 5, 5), "w": x(3, 2, 2, 3, 4)})
    add("conv2d_same_even", lambda a, w: F.conv2d(a, w, padding="same", dilation=(1, 3)),
        {"a": x(2, 2, 6, 7), "w": x(3, 2, 2, 4)})
    add("conv1d_same_even", lambda a, w, b: F.conv1d(a, w, b, padding="same"),
        {"a": x(2, 3, 9), "w": x(2, 3, 4), "b": x(2)})
    # Spectral transforms: a gather and a matmul with the DFT basis; the inverse's overlap-add.
    add("stft", lambda a: torch.view_as_real(torch.stft(
        a, 16, 4, window=torch.hann_window(16), normalized=True, return_complex=True)),
        {"a": x(2, 40)})
    add("istft", lambda a: torch.istft(torch.view_as_complex(a), 16, 4,
                                       window=torch.hann_window(16), length=30),
        {"a": x(2, 9, 8, 2)})
    # Transposed convolutions: a gather (zero insertion, padding) and a conv2d
    # with the weight flipped and its channels swapped.
    add("conv_transpose2d_stride_pad", lambda a, w, b: F.conv_transpose2d(
        a, w, b, stride=2, padding=1, output_padding=1), {"a": x(2, 3, 4, 4), "w": x(3, 4, 3, 3), "b": x(4)})
    add("conv_transpose2d_groups_dilation", lambda a, w: F.conv_transpose2d(
        a, w, None, stride=(2, 3), padding=(2, 1), dilation=2, groups=2),
        {"a": x(1, 4, 3, 4), "w": x(4, 3, 3, 2)})
    add("conv_transpose3d", lambda a, w, b: F.conv_transpose3d(
        a, w, b, stride=(1, 2, 2), padding=(0, 1, 1), output_padding=(0, 1, 0), groups=2),
        {"a": x(1, 4, 3, 3, 4), "w": x(4, 3, 2, 3, 3), "b": x(6)})
    add("conv_transpose1d", lambda a, w, b: F.conv_transpose1d(a, w, b, stride=3, padding=1),
        {"a": x(2, 2, 5), "w": x(2, 3, 4), "b": x(3)})
    add("avg_pool2d_divisor_override", lambda a: F.avg_pool2d(a, 3, stride=2, padding=1,
                                                              divisor_override=5),
        {"a": x(2, 3, 7, 7)})
    add("max_pool2d", lambda a: F.max_pool2d(a, 3, stride=2, padding=1), {"a": x(2, 3, 7, 7)})
    add("max_pool2d_ceil_dilation", lambda a: F.max_pool2d(a, 2, stride=2, dilation=2, ceil_mode=True),
        {"a": x(1, 2, 7, 7)})
    add("avg_pool2d", lambda a: F.avg_pool2d(a, 3, stride=2, padding=1, count_include_pad=False),
        {"a": x(2, 3, 7, 7)})
    add("avg_pool2d_ceil", lambda a: F.avg_pool2d(a, 2, stride=2, ceil_mode=True), {"a": x(1, 2, 5, 5)})
    add("adaptive_avg_pool2d", lambda a: F.adaptive_avg_pool2d(a, (3, 2)), {"a": x(2, 3, 7, 5)})
    # Recurrent layers, unrolled over time: every weight, the initial states and the input.
    def recurrent(kind, gates, layers, bidirectional, batch_first, bias=True, steps=5):
        dirs, hidden, features, batch = 1 + bidirectional, 4, 3, 2
        params = {"x": x(batch, steps, features) if batch_first else x(steps, batch, features)}
        params["h0"] = x(layers * dirs, batch, hidden)
        if kind == "lstm":
            params["c0"] = x(layers * dirs, batch, hidden)
        for layer in range(layers):
            for d in range(dirs):
                width = features if layer == 0 else dirs * hidden
                params[f"w_ih{layer}{d}"] = x(gates * hidden, width) * 0.5
                params[f"w_hh{layer}{d}"] = x(gates * hidden, hidden) * 0.5
                if bias:
                    params[f"b_ih{layer}{d}"] = x(gates * hidden)
                    params[f"b_hh{layer}{d}"] = x(gates * hidden)
        states = 2 if kind == "lstm" else 1

        def fn(inp, *rest):
            hx, weights = rest[:states], list(rest[states:])
            op = getattr(torch, kind)
            return op(inp, list(hx) if kind == "lstm" else hx[0], weights, bias, layers, 0.0,
                      False, bidirectional, batch_first)
        return fn, params
    add("lstm_bidirectional_2layers", *recurrent("lstm", 4, 2, True, False))
    add("gru_batch_first", *recurrent("gru", 3, 1, False, True))
    add("gru_bidirectional_no_bias", *recurrent("gru", 3, 1, True, False, bias=False))
    add("rnn_tanh_2layers", *recurrent("rnn_tanh", 1, 2, False, True))
    add("rnn_relu_bidirectional", *recurrent("rnn_relu", 1, 1, True, False))
    add("lstm_cell", lambda a, h, c, wi, wh, bi, bh: torch.lstm_cell(a, [h, c], wi, wh, bi, bh),
        {"a": x(2, 3), "h": x(2, 4), "c": x(2, 4), "wi": x(16, 3), "wh": x(16, 4), "bi": x(16),
         "bh": x(16)})
    add("gru_cell", lambda a, h, wi, wh, bi, bh: torch.gru_cell(a, h, wi, wh, bi, bh),
        {"a": x(2, 3), "h": x(2, 4), "wi": x(12, 3), "wh": x(12, 4), "bi": x(12), "bh": x(12)})
    add("rnn_tanh_cell", lambda a, h, wi, wh: torch.rnn_tanh_cell(a, h, wi, wh),
        {"a": x(2, 3), "h": x(2, 4), "wi": x(4, 3), "wh": x(4, 4)})
    # Data movement.
    add("reshape_permute", lambda a: a.reshape(3, 2, 4).permute(2, 0, 1), {"a": x(6, 4)})
    add("transpose", lambda a: a.transpose(0, 2), {"a": x(2, 3, 4)})
    add("expand", lambda a: a.expand(3, 4, 5), {"a": x(4, 1)})
    add("slice_step", lambda a: a[:, 1:7:2], {"a": x(3, 8)})
    add("select_split", lambda a: a.split(2, dim=1)[1] * a[:, 0:1], {"a": x(3, 6)})
    add("cat", lambda a, b: torch.cat([a, b, a], dim=1), {"a": x(2, 3), "b": x(2, 4)})
    add("stack", lambda a, b: torch.stack([a, b], dim=0), {"a": x(2, 3), "b": x(2, 3)})
    # Attention, written as models write it (fused by cleave).
    def attention(causal):
        def fn(q, k, v):
            s = q @ k.transpose(-2, -1) * (q.shape[-1] ** -0.5)
            if causal:
                t = q.shape[-2]
                s = s.masked_fill(torch.tril(torch.ones(t, t)) == 0, float("-inf"))
            return F.softmax(s, dim=-1) @ v
        return fn
    add("attention_causal", attention(True), {"q": x(2, 2, 5, 8), "k": x(2, 2, 5, 8), "v": x(2, 2, 5, 8)})
    add("attention", attention(False), {"q": x(1, 2, 4, 8), "k": x(1, 2, 6, 8), "v": x(1, 2, 6, 8)})
    # Losses.
    labels = torch.randint(0, 5, (6,), generator=gen)
    labels[2] = -100
    add("cross_entropy_ignore_index", lambda a, t: F.cross_entropy(a, t), {"a": x(6, 5)}, [labels])
    add("cross_entropy_sum", lambda a, t: F.cross_entropy(a, t.clamp(min=0), reduction="sum"),
        {"a": x(6, 5)}, [labels])
    add("nll_loss", lambda a, t: F.nll_loss(F.log_softmax(a, 1), t.clamp(min=0)), {"a": x(6, 5)}, [labels])
    add("mse_loss", lambda a, t: F.mse_loss(a, t), {"a": x(3, 4)}, [x(3, 4)])
    return c


def trace_case(module, inputs, case_dir, name):
    """Traces `module` on `inputs` and saves it for cleave: (traced, model path, input names)."""
    os.makedirs(case_dir, exist_ok=True)
    traced = torch.jit.trace(module, tuple(inputs), check_trace=False)
    # The names the trace gave forward's arguments (the importer matches them).
    names = [arg.name for arg in traced.forward.schema.arguments[1:]]
    if len(names) != len(inputs) or len(set(names)) != len(names):
        raise ValueError("traced inputs do not map one to one onto the case's tensors")
    meta = {"format": 1, "model": name,
            "inputs": [{"name": n, "shape": list(t.shape), "dtype": NAMES[t.dtype]}
                       for n, t in zip(names, inputs)]}
    model_path = os.path.join(case_dir, "model.pt")
    torch.jit.save(traced, model_path, _extra_files={"cleave.json": json.dumps(meta)})
    return traced, model_path, names


def reference(traced, inputs):
    """Autograd on the traced module: (loss, {grad.<param>: gradient})."""
    traced.zero_grad()
    loss = traced(*inputs)
    loss.backward()
    return loss.detach(), {f"grad.{n}": p.grad.detach().clone()
                           for n, p in traced.named_parameters() if p.grad is not None}


def run_train_plan(cleave, model_path, names, inputs, case_dir, timeout=None):
    """`cleave compile --mode train --optimizer none`, then `cleave run`: (outputs, None), or
    (None, `compile: reason` / `run: reason`)."""
    plan = os.path.join(case_dir, "plan")
    inputs_path = os.path.join(case_dir, "inputs.safetensors")
    outputs_path = os.path.join(case_dir, "outputs.safetensors")
    save_file({n: t.contiguous() for n, t in zip(names, inputs)}, inputs_path)
    for cmd, stage in (
            ([cleave, "compile", model_path, "--mode", "train", "--optimizer", "none", "-o", plan],
             "compile"),
            ([cleave, "run", plan, "--inputs", inputs_path, "--outputs", outputs_path], "run")):
        failure = run_stage(cmd, stage, model_path, case_dir, timeout)
        if failure:
            return None, failure
    return load_file(outputs_path), None


def mismatch(key, a, e):
    """Why cleave's `a` is not PyTorch's `e`, or None: NaN and infinities where PyTorch has
    them, and max|a - e| <= TOL * max(1, max|e|) over the finite rest. Also returns the error
    relative to that scale."""
    if a.shape != e.shape:
        return f"{key}: shape {tuple(a.shape)}, torch {tuple(e.shape)}", 0.0
    a, e = a.double(), e.double()
    nan = torch.isnan(e)
    if not torch.equal(nan, torch.isnan(a)):
        return f"{key}: NaN where torch has none, or the reverse", 0.0
    inf = torch.isinf(e)
    if not torch.equal(a[inf], e[inf]):
        return f"{key}: infinities differ", 0.0
    finite = ~nan & ~inf
    if not finite.any():
        return None, 0.0
    a, e = a[finite], e[finite]
    scale = max(1.0, e.abs().max().item())
    err = (a - e).abs().max().item()
    if not err <= TOL * scale:
        return f"{key}: max abs error {err:.3g} > {TOL * scale:.3g}", err / scale
    return None, err / scale


def compare(actual, loss, expected):
    """(ok, message): the plan's loss and every gradient autograd gives against autograd's."""
    missing = sorted(set(expected) - set(actual))
    if missing:
        zeros = all(not expected[k].any() for k in missing)
        return False, (f"no gradient for {', '.join(missing)}"
                       + (" (torch's is all zeros)" if zeros else ""))
    bad, _ = mismatch("loss", actual["loss"].reshape(loss.shape), loss)
    if bad:
        return False, bad
    worst, report = 0.0, []
    for key, e in expected.items():
        bad, err = mismatch(key, actual[key], e)
        worst = max(worst, err)
        if bad:
            report.append(bad)
    if report:
        return False, "; ".join(report)
    return True, f"{len(expected)} gradients, worst error {worst:.2e} of scale"


def run_case(name, fn, params, inputs, buffers, cleave, work, gen):
    module = Case(fn, params, inputs, buffers, gen)
    case_dir = os.path.join(work, name)
    traced, model_path, names = trace_case(module, inputs, case_dir, name)
    loss, expected = reference(traced, inputs)
    actual, failure = run_train_plan(cleave, model_path, names, inputs, case_dir)
    if failure:
        return False, failure
    return compare(actual, loss, expected)


def main():
    torch_fixes.apply()
    p = argparse.ArgumentParser()
    p.add_argument("--cleave", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--only")
    p.add_argument("--list", action="store_true")
    a = p.parse_args()
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)
    table = cases(gen)
    if a.list:
        print("\n".join(table))
        return
    selected = a.only.split(",") if a.only else list(table)
    unknown = [n for n in selected if n not in table]
    if unknown:
        sys.exit(f"gradients.py: unknown case(s): {', '.join(unknown)}")
    failed = 0
    for name in selected:
        fn, params, inputs, buffers = table[name]
        ok, message = run_case(name, fn, params, inputs, buffers, a.cleave, a.work, gen)
        print(f"{name}: {'ok' if ok else 'FAIL'}: {message}", flush=True)
        failed += not ok
    print(f"{len(selected) - failed} of {len(selected)} cases pass")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
