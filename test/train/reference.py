"""PyTorch's training of an exported model: the reference `cleave train` is checked against.

usage: reference.py MODEL.pt --data DATA.safetensors --steps N --losses OUT.jsonl
       [--weights OUT.safetensors] [--loss model|cross_entropy|mse] [--optimizer adamw|sgd]
       [--lr X] [--weight-decay X] [--betas B1,B2] [--eps X] [--momentum X] [--dampening X]
       [--nesterov] [--clip-grad-norm X] [--lr-schedule constant|linear|cosine]
       [--warmup-steps N] [--decay-steps N] [--dtype f32|bf16] [--device cpu|cuda]
       [--eager EXPORT_ARGS]

Loads the TorchScript file itself (torch.jit.load), so it trains exactly the module cleave
compiled, in training mode, with torch.optim's AdamW or SGD (their defaults where a flag is
absent, as cleave's), torch.nn.utils.clip_grad_norm_ and a LambdaLR with the schedules of
docs/training.md. Step i (from 0) takes samples (i*B + j) mod S of DATA, B = the model's recorded
batch. --dtype bf16 runs the forward and backward under CPU autocast to bf16 with f32 parameters
and optimizer, as cleave's mixed precision does. --device cuda trains on the GPU (TF32 off, as
cleave's f32 GEMMs, and PyTorch's deterministic algorithms; autocast on cuda for bf16); --eager
EXPORT_ARGS trains the Python module examples/export.py builds from those arguments, with the
file's weights (a traced file keeps the devices it was traced on, so GPT's positions stay on the
CPU), the reference for `cleave train --backend cuda`
on the same machine (scripts/gpu/training_check.py). Writes one JSON line per step ({"step", "loss"},
from 1) and, with --weights, the final state_dict (floats in f32).
"""
import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
from safetensors_io import load_file, save_file  # noqa: E402

import torch  # noqa: E402
import torch_fixes  # noqa: E402
import torch.nn.functional as F  # noqa: E402


def schedule(kind, warmup, decay):
    """λ(s) of docs/training.md: the lr of optimizer step s+1 is lr * λ(s)."""
    def lam(s):
        if s < warmup:
            return s / max(1, warmup)
        if kind == "constant":
            return 1.0
        if kind == "linear":
            return max(0.0, (decay - s) / max(1, decay - warmup))
        progress = min(1.0, (s - warmup) / max(1, decay - warmup))
        return max(0.0, 0.5 * (1.0 + math.cos(math.pi * progress)))
    return lam


def add_optimizer_arguments(p):
    """The loss and the optimizer, as `cleave compile --mode train` takes them."""
    p.add_argument("--loss", default="model", choices=["model", "cross_entropy", "mse"])
    p.add_argument("--optimizer", default="adamw", choices=["adamw", "sgd"])
    p.add_argument("--lr", type=float)
    p.add_argument("--weight-decay", type=float)
    p.add_argument("--betas", default="0.9,0.999")
    p.add_argument("--eps", type=float, default=1e-8)
    p.add_argument("--momentum", type=float, default=0.0)
    p.add_argument("--dampening", type=float, default=0.0)
    p.add_argument("--nesterov", action="store_true")


def make_optimizer(a, params):
    """torch.optim's optimizer for add_optimizer_arguments' options, with cleave's defaults."""
    if a.optimizer == "adamw":
        b1, b2 = (float(b) for b in a.betas.split(","))
        return torch.optim.AdamW(params, lr=1e-3 if a.lr is None else a.lr, betas=(b1, b2),
                                 eps=a.eps,
                                 weight_decay=1e-2 if a.weight_decay is None else a.weight_decay)
    return torch.optim.SGD(params, lr=a.lr, momentum=a.momentum, dampening=a.dampening,
                           nesterov=a.nesterov,
                           weight_decay=0.0 if a.weight_decay is None else a.weight_decay)


def main():
    torch_fixes.apply()
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("--data", required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--losses", required=True)
    p.add_argument("--weights")
    add_optimizer_arguments(p)
    p.add_argument("--clip-grad-norm", type=float, default=0.0)
    p.add_argument("--lr-schedule", default="constant")
    p.add_argument("--warmup-steps", type=int, default=0)
    p.add_argument("--decay-steps", type=int, default=0)
    p.add_argument("--dtype", default="f32", choices=["f32", "bf16"])
    p.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    p.add_argument("--eager", metavar="EXPORT_ARGS",
                   help="train the eager Python module examples/export.py EXPORT_ARGS builds, with "
                        "MODEL's weights, instead of MODEL itself (a traced file keeps the devices "
                        "it was traced on)")
    a = p.parse_args()
    if a.device == "cuda":
        # f32 as f32 (no TF32), and the deterministic algorithms: the reference for cleave's
        # f32 kernels, which use neither TF32 nor atomics.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
        torch.use_deterministic_algorithms(True, warn_only=True)

    torch.manual_seed(0)
    extra = {"cleave.json": ""}
    module = torch.jit.load(a.model, _extra_files=extra)
    if a.eager:
        import shlex
        import export
        eager = export.build_module(shlex.split(a.eager))
        eager.load_state_dict(module.state_dict(), strict=True)
        module = eager
    module.train()
    module.to(a.device)
    meta = json.loads(extra["cleave.json"])
    names = [i["name"] for i in meta["inputs"]]
    batch = meta["inputs"][0]["shape"][0]
    data = load_file(a.data)
    samples = next(iter(data.values())).shape[0]

    params = [q for q in module.parameters() if q.requires_grad]
    opt = make_optimizer(a, params)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, schedule(a.lr_schedule, a.warmup_steps, a.decay_steps))

    with open(a.losses, "w") as out:
        for step in range(a.steps):
            index = torch.tensor([(step * batch + j) % samples for j in range(batch)])
            inputs = [data[n][index].to(a.device) for n in names]
            opt.zero_grad(set_to_none=True)
            with torch.autocast(a.device, dtype=torch.bfloat16, enabled=a.dtype == "bf16"):
                result = module(*inputs)
            if a.loss == "model":
                loss = result
            else:
                result = result.float()
                labels = data["labels"][index].to(a.device)
                if a.loss == "cross_entropy":
                    loss = F.cross_entropy(result.reshape(-1, result.shape[-1]), labels.reshape(-1))
                else:
                    loss = F.mse_loss(result, labels)
            loss = loss.float()
            loss.backward()
            if a.clip_grad_norm > 0:
                torch.nn.utils.clip_grad_norm_(params, a.clip_grad_norm)
            opt.step()
            sched.step()
            out.write(json.dumps({"step": step + 1, "loss": loss.item()}) + "\n")

    if a.weights:
        state = {k: (v.float() if v.is_floating_point() else v).detach().cpu().clone()
                 for k, v in module.state_dict().items()}
        save_file(state, a.weights)


if __name__ == "__main__":
    main()
