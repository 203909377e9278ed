#!/usr/bin/python3
"""Exports one example model to TorchScript for `cleave compile`.

    /usr/bin/python3 examples/export.py NAME -o OUT.pt [--config small|tiny] [--meta]
        [--batch B] [--seq S] [--max-seq N] [--seed 0] [--mask-in-forward]
        [--io DIR [--bf16-reference]]
        [--dropout P] [--train] [--loss-in-model cross_entropy|mse]
        [--data FILE [--samples S] [--labels cross_entropy|mse]]

The file carries `cleave.json` (extra file): the forward arguments' names, static shapes and dtypes.
gpt-1.7b, gpt-3.6b, gpt-7.5b, gpt-18.4b, gpt-39.1b, gpt-76.1b, gpt-145.6b, gpt-310.1b, gpt-529.6b and
gpt-1t (Megatron-LM Table 1 sizes) are always built on device='meta', so they export in seconds without
parameter data. --io DIR writes random inputs and PyTorch's
outputs as DIR/inputs.safetensors and DIR/outputs.safetensors for end-to-end tests. For training:
--train traces in training mode, --loss-in-model wraps the model in models.WithLoss (forward(x,
labels) returns its loss), --data FILE writes --samples samples of every input (and of `labels`,
with --labels for a loss appended by `cleave compile --loss`).
--bf16-reference also writes DIR/outputs-bf16.safetensors: the same model in bf16
(`model.to(torch.bfloat16)`, float inputs cast to bf16, float outputs cast back to f32, as a
plan compiled with `cleave compile --dtype bf16` takes and gives them).
"""
import copy
import argparse
import inspect
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402
import torchvision  # noqa: E402

import models  # noqa: E402
from safetensors_io import atomic_write, save_file  # noqa: E402

_DTYPE_NAMES = {torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16",
                torch.int64: "i64", torch.int32: "i32", torch.bool: "i1"}


class Spec:
    """How to build one model and its example inputs.

    configs: config name -> (constructor kwargs, default input sizes {"batch", optional "seq",
    optional "image"}). inputs(kwargs, sizes) -> [(shape, dtype, id upper bound or None for
    floats)], one per forward argument. seq_limit: the kwargs key bounding --seq, if any.
    --seq applies to the models whose sizes have a "seq".
    """

    def __init__(self, build, configs, inputs, seq_limit=None, script=False, always_meta=False):
        self.build, self.configs, self.inputs = build, configs, inputs
        self.seq_limit, self.script, self.always_meta = seq_limit, script, always_meta


def _ids(c, s):
    return [((s["batch"], s["seq"]), torch.int64, c["vocab_size"])]


def _features(c, s):
    return [((s["batch"], c["in_features"]), torch.float32, None)]


def _resnet18(device=None):
    # torchvision 0.14's ResNet takes no device argument: it is always built on the CPU.
    return torchvision.models.resnet18(weights=None)


def _resnet50(device=None):
    return torchvision.models.resnet50(weights=None)


def _regnet_x_3_2gf(device=None):
    return torchvision.models.regnet_x_3_2gf(weights=None)


def _megatron_gpt(n_head, d_model, n_layer):
    # Megatron-LM Table 1 (REFERENCE.md): vocabulary 51200, sequence 2048, tied embedding.
    cfg = dict(vocab_size=51200, block_size=2048, n_layer=n_layer, n_head=n_head, d_model=d_model)
    return Spec(models.GPT, {None: (cfg, dict(batch=1, seq=2048))}, _ids, "block_size",
                always_meta=True)


SPECS = {
    "mlp": Spec(models.MLP, {
        "tiny": (dict(in_features=16, hidden=32, out_features=4), dict(batch=2)),
        "small": (dict(in_features=64, hidden=128, out_features=10), dict(batch=8)),
    }, _features),
    "deep_mlp": Spec(models.DeepMLP, {
        "tiny": (dict(in_features=16, hidden=64, depth=8, out_features=4), dict(batch=4)),
        "small": (dict(in_features=64, hidden=256, depth=16, out_features=10), dict(batch=8)),
    }, _features),
    "gpt": Spec(models.GPT, {
        "tiny": (dict(vocab_size=128, block_size=16, n_layer=2, n_head=4, d_model=32),
                 dict(batch=2, seq=8)),
        "small": (dict(vocab_size=512, block_size=64, n_layer=4, n_head=4, d_model=128),
                  dict(batch=2, seq=32)),
    }, _ids, "block_size"),
    "bert": Spec(models.BertLike, {
        "tiny": (dict(vocab_size=128, max_position=16, n_layer=2, n_head=4, d_model=32, d_ff=128),
                 dict(batch=2, seq=8)),
        "small": (dict(vocab_size=512, max_position=64, n_layer=4, n_head=4, d_model=128, d_ff=512),
                  dict(batch=2, seq=32)),
    }, _ids, "max_position"),
    # BertLike with a classification head on its pooled output (one logits tensor, for training).
    "bert-cls": Spec(models.BertClassifier, {
        "tiny": (dict(vocab_size=128, max_position=16, n_layer=2, n_head=4, d_model=32, d_ff=128,
                      n_classes=4), dict(batch=2, seq=8)),
        "small": (dict(vocab_size=512, max_position=64, n_layer=4, n_head=4, d_model=128, d_ff=512,
                       n_classes=4), dict(batch=2, seq=32)),
    }, _ids, "max_position"),
    "vit": Spec(models.ViTLike, {
        "tiny": (dict(image_size=16, patch_size=4, n_classes=10, n_layer=2, n_head=4, d_model=32),
                 dict(batch=2)),
        "small": (dict(image_size=64, patch_size=8, n_classes=10, n_layer=4, n_head=4, d_model=128),
                  dict(batch=2)),
    }, lambda c, s: [((s["batch"], 3, c["image_size"], c["image_size"]), torch.float32, None)]),
    "llama": Spec(models.LlamaLike, {
        "tiny": (dict(vocab_size=128, max_seq=16, n_layer=2, n_head=4, d_model=32, hidden=96),
                 dict(batch=2, seq=8)),
        "small": (dict(vocab_size=512, max_seq=64, n_layer=4, n_head=4, d_model=128, hidden=352),
                  dict(batch=2, seq=32)),
    }, _ids, "max_seq"),
    "resnet18": Spec(_resnet18, {
        "tiny": ({}, dict(batch=1, image=32)),
        "small": ({}, dict(batch=2, image=64)),
    }, lambda c, s: [((s["batch"], 3, s["image"], s["image"]), torch.float32, None)]),
    "unsupported": Spec(models.UnsupportedOps, {
        "tiny": (dict(in_features=16, hidden=32, k=8, out_features=4), dict(batch=2)),
        "small": (dict(in_features=64, hidden=128, k=16, out_features=10), dict(batch=8)),
    }, _features),
    # Input (batch, seq, features): rank 3 takes the flattening branch of ScriptedMLP.forward.
    "scripted_mlp": Spec(models.ScriptedMLP, {
        "tiny": (dict(in_features=16, d_model=32), dict(batch=2, seq=4)),
        "small": (dict(in_features=64, d_model=128), dict(batch=4, seq=8)),
    }, lambda c, s: [((s["batch"], s["seq"], c["in_features"]), torch.float32, None)], script=True),
    "data_dependent_if": Spec(models.DataDependentIf, {
        "tiny": ({}, dict(batch=2)),
        "small": ({}, dict(batch=8)),
    }, lambda c, s: [((s["batch"], 8), torch.float32, None)], script=True),
    # The single-device CPU benchmark (bench/cpu_forward.sh): fixed sizes.
    "gpt-bench": Spec(models.GPT, {None: (dict(vocab_size=8192, block_size=256, n_layer=6, n_head=8,
                                               d_model=512), dict(batch=8, seq=256))},
                      _ids, "block_size"),
    # The GPU benchmark (bench/cuda_gpt2.py): GPT-2 124M's shape at batch 8, sequence 1024.
    "gpt2-124m": Spec(models.GPT, {None: (dict(vocab_size=50257, block_size=1024, n_layer=12,
                                               n_head=12, d_model=768), dict(batch=8, seq=1024))},
                      _ids, "block_size"),
    "resnet50": Spec(_resnet50, {None: ({}, dict(batch=8, image=224))},
                     lambda c, s: [((s["batch"], 3, s["image"], s["image"]), torch.float32, None)]),
    # Grouped 3x3 convolutions, 48 channels a group (the CPU training benchmark's grouped net).
    "regnet_x_3_2gf": Spec(_regnet_x_3_2gf, {None: ({}, dict(batch=8, image=224))},
                           lambda c, s: [((s["batch"], 3, s["image"], s["image"]), torch.float32,
                                          None)]),
    "gpt-1.7b": _megatron_gpt(n_head=24, d_model=2304, n_layer=24),
    "gpt-18.4b": _megatron_gpt(n_head=48, d_model=6144, n_layer=40),
    "gpt-145.6b": _megatron_gpt(n_head=96, d_model=12288, n_layer=80),
    # The other sizes of the paper's Table 1 (not in REFERENCE.md), so bench/planner_validation.py
    # can check the cost model on rows it was not tuned to.
    "gpt-3.6b": _megatron_gpt(n_head=32, d_model=3072, n_layer=30),
    "gpt-7.5b": _megatron_gpt(n_head=32, d_model=4096, n_layer=36),
    "gpt-39.1b": _megatron_gpt(n_head=64, d_model=8192, n_layer=48),
    "gpt-76.1b": _megatron_gpt(n_head=80, d_model=10240, n_layer=60),
    "gpt-310.1b": _megatron_gpt(n_head=128, d_model=16384, n_layer=96),
    "gpt-529.6b": _megatron_gpt(n_head=128, d_model=20480, n_layer=105),
    # The 1T model of the same paper (128 layers, hidden 25600, 160 heads): the search benchmark.
    "gpt-1t": _megatron_gpt(n_head=160, d_model=25600, n_layer=128),
}


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        # One line on stderr and a non-zero exit, for scripts and tests.
        sys.exit(f"export.py: error: {message}")


def _parse_args(argv):
    p = _Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", metavar="NAME", help="model: " + ", ".join(SPECS))
    p.add_argument("-o", "--output", required=True, metavar="OUT.pt")
    p.add_argument("--config", choices=["tiny", "small"],
                   help="model size (default small; not for gpt-* names, which have fixed sizes)")
    p.add_argument("--meta", action="store_true", help="build on device='meta' (no parameter data)")
    p.add_argument("--batch", type=int, help="batch size (default: per model and config)")
    p.add_argument("--seq", type=int, help="sequence length, for sequence models")
    p.add_argument("--max-seq", type=int, metavar="N",
                   help="the model's maximum sequence length (GPT block_size, BERT max_position, "
                        "LLaMA max_seq; default per config), so --seq can go beyond the config's")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--mask-in-forward", action="store_true",
                   help="GPT models: build the causal mask in forward (ones(T, T).tril() and "
                        "torch.where with a fill value, the common style) instead of a buffer")
    p.add_argument("--tiled-weights", action="store_true",
                   help="fill float weights from one small repeating random pool, so that the "
                        "model and its plans compress to almost nothing (scripts/gpu-prepare.sh "
                        "carries resnet18 this way)")
    p.add_argument("--io", metavar="DIR", help="write DIR/inputs.safetensors and DIR/outputs.safetensors")
    p.add_argument("--bf16-reference", action="store_true",
                   help="with --io, also write DIR/outputs-bf16.safetensors from the model in bf16")
    p.add_argument("--dropout", type=float, metavar="P",
                   help="the dropout probability of models that have one (default: the model's)")
    p.add_argument("--train", action="store_true",
                   help="trace in training mode (model.train()): batch norms use batch statistics "
                        "and update their running ones, as a training step does")
    p.add_argument("--loss-in-model", choices=["cross_entropy", "mse"],
                   help="export forward(x, labels) returning the loss of the model's output "
                        "(models.WithLoss): a model that computes its own loss")
    p.add_argument("--data", metavar="FILE",
                   help="write training data: --samples samples of every input, dim 0 the sample")
    p.add_argument("--samples", type=int, default=16, help="samples in --data (default 16)")
    p.add_argument("--labels", choices=["cross_entropy", "mse"],
                   help="with --data: add `labels` for a loss appended at compile time "
                        "(class indices of the output's shape without its last dim, or targets "
                        "of the output's shape)")
    args = p.parse_args(argv)

    if args.name not in SPECS:
        p.error(f"unknown model '{args.name}'; choose one of: {', '.join(SPECS)}")
    spec = SPECS[args.name]
    fixed_size = None in spec.configs
    if fixed_size and args.config:
        p.error(f"{args.name} has a fixed size; --config applies to the other models only")
    if args.name.startswith("resnet") and args.meta:
        p.error(f"{args.name} cannot be built on device='meta': torchvision "
                f"{torchvision.__version__} {args.name}() takes no device argument")
    if args.bf16_reference and not args.io:
        p.error("--bf16-reference needs --io DIR")
    if args.io and (args.meta or spec.always_meta):
        p.error(f"--io needs real parameter data, but {args.name} would be built on device='meta'")
    kwargs, sizes = spec.configs[None if fixed_size else (args.config or "small")]
    if args.seq is not None and "seq" not in sizes:
        p.error(f"--seq does not apply to {args.name} (it has no sequence dimension)")
    for flag in ("batch", "seq"):
        value = getattr(args, flag)
        if value is not None:
            if value < 1:
                p.error(f"--{flag} must be at least 1")
            sizes = dict(sizes, **{flag: value})
    if args.max_seq is not None:
        if not spec.seq_limit or fixed_size:
            p.error(f"--max-seq does not apply to {args.name}")
        if args.max_seq < 1:
            p.error("--max-seq must be at least 1")
        kwargs = dict(kwargs, **{spec.seq_limit: args.max_seq})
    if spec.seq_limit and sizes["seq"] > kwargs[spec.seq_limit]:
        p.error(f"--seq {sizes['seq']} exceeds {args.name}'s maximum sequence length "
                f"{kwargs[spec.seq_limit]}")
    if args.mask_in_forward:
        if spec.build is not models.GPT:
            p.error(f"--mask-in-forward applies to the GPT models only, not {args.name}")
        kwargs = dict(kwargs, mask_in_forward=True)
    if args.dropout is not None:
        if not 0 <= args.dropout < 1:
            p.error("--dropout must be in [0, 1)")
        if "dropout" not in inspect.signature(spec.build).parameters and \
                spec.build is not models.BertClassifier:
            p.error(f"{args.name} has no dropout")
        kwargs = dict(kwargs, dropout=args.dropout)
    if args.labels and not args.data:
        p.error("--labels needs --data FILE")
    if args.labels and args.loss_in_model:
        p.error("--labels is for a loss appended at compile time; with --loss-in-model the model's "
                "own labels input is in --data already")
    if args.samples < 1:
        p.error("--samples must be at least 1")
    if args.data and (args.meta or spec.always_meta):
        p.error(f"--data needs real parameter data, but {args.name} would be built on device='meta'")
    args.kwargs, args.sizes = kwargs, sizes
    args.device = "meta" if (args.meta or spec.always_meta) else "cpu"
    return spec, args


def _example_inputs(spec, args, sizes=None, seed=None):
    # A generator of its own, so inputs do not depend on how much randomness init consumed.
    gen = torch.Generator().manual_seed(args.seed if seed is None else seed)
    inputs = []
    for shape, dtype, high in spec.inputs(args.kwargs, sizes or args.sizes):
        if args.device == "meta":
            inputs.append(torch.empty(shape, dtype=dtype, device="meta"))
        elif high is None:
            inputs.append(torch.randn(shape, dtype=dtype, generator=gen))
        else:
            inputs.append(torch.randint(0, high, shape, dtype=dtype, generator=gen))
    return inputs


def _check_meta_trace(name, graph):
    """torch 1.13 implements some meta kernels in Python (conv, for one); tracing on 'meta' then
    records that kernel's shape arithmetic instead of the aten op, which silently drops the op."""
    for node in graph.nodes():
        src = node.sourceRange()
        if "torch/_meta_registrations.py" in src or "torch/_prims" in src or "torch/_refs" in src:
            sys.exit(f"export.py: error: {name} cannot be traced on device='meta' with torch "
                     f"{torch.__version__}: the trace recorded a Python meta kernel "
                     f"({src.splitlines()[0].strip()}) instead of the aten op; export without --meta")


def _flatten(out):
    if isinstance(out, torch.Tensor):
        return [out]
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flatten(o)]
    raise TypeError(f"unexpected model output type {type(out).__name__}")


def _bf16_outputs(model, inputs):
    """The eager model in bf16 (PyTorch's own bf16 kernels: f32 accumulation, one rounding per
    op), with f32 at its boundary as a bf16 plan has."""
    narrow = copy.deepcopy(model).to(torch.bfloat16)
    with torch.no_grad():
        outputs = _flatten(narrow(*[t.to(torch.bfloat16) if t.is_floating_point() else t
                                    for t in inputs]))
    return {f"output_{i}": t.float() if t.is_floating_point() else t for i, t in enumerate(outputs)}


def _labels(kind, output_shape, gen):
    """Labels for `kind` of a model whose output has `output_shape` (dim 0 the samples)."""
    if kind == "mse":
        return torch.randn(output_shape, generator=gen)
    return torch.randint(0, output_shape[-1], output_shape[:-1], dtype=torch.int64, generator=gen)


def _output_shape(model, inputs):
    with torch.no_grad():
        out = _flatten(model(*inputs))
    if len(out) != 1:
        sys.exit(f"export.py: error: labels need a model with one output, this one returns {len(out)}")
    return tuple(out[0].shape)


def _tile_weights(model, seed):
    """Refills every float parameter and buffer with a slice of one seeded pool of 65536
    normal values, repeated: each tensor starts at its own offset and is scaled like
    PyTorch's default initialisation (1/sqrt(fan_in)); running variances stay positive."""
    gen = torch.Generator().manual_seed(seed + 4)
    pool = torch.randn(65536, generator=gen)
    with torch.no_grad():
        for i, (name, t) in enumerate(list(model.named_parameters()) + list(model.named_buffers())):
            if not t.is_floating_point() or t.numel() == 0:
                continue
            start = (i * 7919) % pool.numel()
            reps = (start + t.numel()) // pool.numel() + 1
            values = pool.repeat(reps)[start:start + t.numel()].view_as(t)
            fan_in = t[0].numel() if t.dim() > 1 else 1
            if name.endswith("running_var"):
                t.copy_(1 + 0.1 * values.abs())
            else:
                t.copy_(values / fan_in ** 0.5 if t.dim() > 1 else 0.1 * values)


def build_module(argv):
    """The eager module `export.py ARGV` traces (models.WithLoss around it with
    --loss-in-model, in training mode with --train), with this seed's weights: the Python
    model a reference can run anywhere, where the traced file has devices baked in."""
    spec, args = _parse_args(list(argv) + ["-o", os.devnull])
    torch.manual_seed(args.seed)
    model = spec.build(**args.kwargs, device=args.device).eval()
    if args.tiled_weights:
        _tile_weights(model, args.seed)
    if args.loss_in_model:
        model = models.WithLoss(model, args.loss_in_model)
    if args.train:
        model.train()
    return model


def main(argv=None):
    spec, args = _parse_args(argv)
    torch.manual_seed(args.seed)
    model = spec.build(**args.kwargs, device=args.device).eval()
    if args.tiled_weights:
        _tile_weights(model, args.seed)
    n_params = sum(p.numel() for p in model.parameters())  # parameters() lists tied ones once
    inputs = _example_inputs(spec, args)
    # Labels come from their own generator, after the inputs'.
    label_gen = torch.Generator().manual_seed(args.seed + 1)
    label_kind = args.loss_in_model or args.labels
    out_shape = _output_shape(model, inputs) if label_kind else None
    if args.loss_in_model:
        model = models.WithLoss(model, args.loss_in_model)
        inputs.append(_labels(args.loss_in_model, out_shape, label_gen))
    if args.train:
        model.train()
    arg_names = list(inspect.signature(model.forward).parameters)
    assert len(arg_names) == len(inputs), f"{args.name}: forward takes {arg_names}"

    if spec.script:
        module = torch.jit.script(model)
    else:
        # check_trace=False: re-running the trace to compare would double the time and can
        # report spurious mismatches; the models have no data-dependent control flow.
        module = torch.jit.trace(model, tuple(inputs), check_trace=False)
        if args.device == "meta":
            _check_meta_trace(args.name, module.inlined_graph)

    meta = {"format": 1, "model": args.name,
            "inputs": [{"name": n, "shape": list(t.shape), "dtype": _DTYPE_NAMES[t.dtype]}
                       for n, t in zip(arg_names, inputs)]}
    extra = {"cleave.json": json.dumps(meta)}
    atomic_write(args.output, lambda tmp: torch.jit.save(module, tmp, _extra_files=extra))

    if args.io:
        with torch.no_grad():
            outputs = _flatten(module(*inputs))
        save_file(dict(zip(arg_names, inputs)), os.path.join(args.io, "inputs.safetensors"))
        save_file({f"output_{i}": t for i, t in enumerate(outputs)},
                  os.path.join(args.io, "outputs.safetensors"))
        if args.bf16_reference:
            save_file(_bf16_outputs(model, inputs), os.path.join(args.io, "outputs-bf16.safetensors"))

    if args.data:
        # Training data: every input at --samples samples, from a generator of its own.
        sizes = dict(args.sizes, batch=args.samples)
        data = _example_inputs(spec, args, sizes, seed=args.seed + 2)
        names = arg_names[:len(data)]
        tensors = dict(zip(names, data))
        if label_kind:
            tensors["labels"] = _labels(label_kind, (args.samples,) + out_shape[1:],
                                        torch.Generator().manual_seed(args.seed + 3))
        save_file(tensors, args.data)

    print(f"{args.name}: {n_params:,} parameters -> {args.output}")


if __name__ == "__main__":
    main()
