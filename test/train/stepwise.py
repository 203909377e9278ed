"""PyTorch's step k taken from cleave's own state after step k-1, against cleave's step k.

usage: stepwise.py MODEL.pt --data DATA.safetensors --checkpoints DIR --log CLEAVE.jsonl
       --steps N [--loss model|cross_entropy|mse] [--optimizer sgd|adamw] [--lr X]
       [--weight-decay X] [--momentum X] [--dampening X] [--nesterov] [--betas B1,B2]
       [--eps X] [--rtol 1e-5] [--wtol 1e-4] [--state-rtol 1e-3]
       [--perturbations 8] [--perturbation 2^-19] [--spread-factor 2]
       [--one-device PLAN --moved DIR2 [--cleave cleave]]

compare_training.py compares two runs of N steps, each from its own state: a difference of
rounding in step 1 then grows through every later step, and where an activation sits within
rounding of a ReLU's threshold, the two runs part (docs/training.md, "How close to PyTorch").
Here every step starts from the same state: DIR holds the checkpoints of `cleave train --steps N
--checkpoint DIR --checkpoint-every 1`; step 1 starts from MODEL's own weights with no optimizer
state, step k > 1 from DIR/ckpt-<k-1> (its weights, running statistics, optimizer state and step
counter; a mesh plan's checkpoints are first moved into a one-device plan, --one-device).
PyTorch takes that step (torch.optim's SGD or AdamW, constant learning rate, on the
samples of step k as `cleave train` takes them) and its loss, weights and optimizer state must
agree with cleave's step k (CLEAVE.jsonl and DIR/ckpt-<k>):
  - the loss within rtol of PyTorch's (from the same weights, a forward pass: no threshold
    makes it jump);
  - each weight and buffer within wtol of max(1, max|ref|), integer buffers exactly;
  - what the step added to each optimizer state tensor (slot_k - decay * slot_{k-1}: the
    gradient's term of the momentum or of AdamW's moments) within state-rtol of PyTorch's in
    relative 2-norm. Where a ReLU input (or a max-pool tie) sits within rounding of its
    threshold, the two sides of it give gradients that differ by a few percent for that step
    (docs/training.md, "How close to PyTorch"). So a tensor beyond state-rtol passes if its
    difference is within spread-factor times PyTorch's own: the largest change of PyTorch's
    gradient term over `perturbations` runs of the same step from weights each multiplied by
    1 + u * perturbation (u uniform in [-1, 1], 2^-19: the size of the rounding differences
    in the activations). Where no threshold is that close, PyTorch's gradient moves by about
    1e-5 and the bound stays state-rtol.
A kernel that rounds differently passes; one that computes something else fails.

Prints, per step, the loss line and how many tensors agreed with the largest relative norm
error of the optimizer state (each failing tensor on its own line); exits 1 on any failure.
"""
import argparse
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "examples"))
sys.path.insert(0, os.path.dirname(__file__))
from safetensors_io import load_file  # noqa: E402

import torch  # noqa: E402
import torch_fixes  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from compare_training import compare_tensors, losses, relative_errors  # noqa: E402
from reference import add_optimizer_arguments, make_optimizer  # noqa: E402

# cleave's optimizer state names (state.safetensors): "optimizer.<slot>.<parameter>" and "step".
SLOTS = {"sgd": ("momentum_buffer",), "adamw": ("exp_avg", "exp_avg_sq")}



def decays(a):
    """Each slot's factor on its previous value: slot_k = decay * slot_{k-1} + (the step's
    gradient term), so slot_k - decay * slot_{k-1} is what step k added."""
    if a.optimizer == "adamw":
        b1, b2 = (float(b) for b in a.betas.split(","))
        return {"exp_avg": b1, "exp_avg_sq": b2}
    return {"momentum_buffer": a.momentum}


def increments(state, previous, decay):
    """What this step added to each optimizer state tensor: its gradient term, apart from the
    state both runs started the step from."""
    out = {}
    for key, value in state.items():
        slot = key.split(".")[1]
        before = previous.get(key)
        out[key] = value.double() - (decay[slot] * before.double() if before is not None else 0)
    return out


def checkpoint(directory, step):
    path = os.path.join(directory, f"ckpt-{step}")
    weights = os.path.join(path, "weights.safetensors")
    state = os.path.join(path, "state.safetensors")
    for f in (weights, state):
        if not os.path.exists(f):
            sys.exit(f"stepwise.py: error: {f} missing: train with --checkpoint {directory} "
                     "--checkpoint-every 1")
    with open(os.path.join(path, "checkpoint.json")) as f:
        if json.load(f)["step"] != step:
            sys.exit(f"stepwise.py: error: {path}/checkpoint.json is not step {step}")
    return load_file(weights), load_file(state)


def restore(module, optimizer, named, weights, state, slots):
    """Puts cleave's checkpoint into the module and the optimizer: PyTorch's own state after
    the same step, had it computed what cleave computed."""
    module.load_state_dict({k: v.to(module.state_dict()[k].dtype) for k, v in weights.items()},
                           strict=True)
    step = int(state["step"])
    for name, param in named:
        entry = {}
        for slot in slots:
            key = f"optimizer.{slot}.{name}"
            if key in state:
                entry[slot] = state[key].clone()
        if entry:
            if "exp_avg" in entry:
                entry["step"] = torch.tensor(float(step))
            optimizer.state[param] = entry


def optimizer_state(optimizer, named, slots):
    """The optimizer's state under cleave's names."""
    out = {}
    for name, param in named:
        for slot in slots:
            value = optimizer.state.get(param, {}).get(slot)
            if value is not None:
                out[f"optimizer.{slot}.{name}"] = value.detach().float().clone()
    return out


def main():
    torch_fixes.apply()
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("--data", required=True)
    p.add_argument("--checkpoints", required=True)
    p.add_argument("--log", required=True, help="cleave train's --log (its losses)")
    p.add_argument("--steps", type=int, required=True)
    add_optimizer_arguments(p)
    p.add_argument("--rtol", type=float, default=1e-5)
    p.add_argument("--wtol", type=float, default=1e-4)
    p.add_argument("--state-rtol", type=float, default=1e-3)
    p.add_argument("--one-device", metavar="PLAN",
                   help="DIR holds a mesh plan's checkpoints: move each into PLAN, a one-device "
                        "plan of the same model (cleave train --resume at its step), first")
    p.add_argument("--moved", metavar="DIR2", help="where --one-device writes them")
    p.add_argument("--cleave", default="cleave", help="the cleave binary (--one-device)")
    p.add_argument("--perturbations", type=int, default=8,
                   help="PyTorch's runs from perturbed weights at a step beyond --state-rtol")
    p.add_argument("--perturbation", type=float, default=2.0 ** -19)
    p.add_argument("--spread-factor", type=float, default=2.0)
    p.add_argument("--quiet-spread", action="store_true",
                   help="print only the gradient terms PyTorch's spread does not explain")
    a = p.parse_args()
    if a.steps < 1:
        p.error(f"--steps must be at least 1, got {a.steps}")

    torch.manual_seed(0)
    extra = {"cleave.json": ""}
    module = torch.jit.load(a.model, _extra_files=extra)
    module.train()
    initial = {k: v.clone() for k, v in module.state_dict().items()}
    meta = json.loads(extra["cleave.json"])
    names = [i["name"] for i in meta["inputs"]]
    batch = meta["inputs"][0]["shape"][0]
    data = load_file(a.data)
    samples = next(iter(data.values())).shape[0]
    named = [(n, q) for n, q in module.named_parameters() if q.requires_grad]
    slots = SLOTS[a.optimizer]
    cleave_losses = losses(a.log)

    decay = decays(a)
    if a.one_device:
        if not a.moved:
            p.error("--one-device needs --moved DIR2")
        for step in range(1, a.steps + 1):
            command = [a.cleave, "train", a.one_device, "--data", a.data, "--resume",
                       os.path.join(a.checkpoints, f"ckpt-{step}"), "--steps", str(step),
                       "--checkpoint", a.moved, "-q"]
            run = subprocess.run(command, capture_output=True, text=True)
            if run.returncode:
                sys.exit(f"stepwise.py: error: {' '.join(command)} failed: {run.stderr.strip()}")
        a.checkpoints = a.moved

    def take_step(step, perturb=None):
        """PyTorch's step `step` from cleave's state after step - 1; with `perturb` (a seed),
        each parameter first multiplied by 1 + u * a.perturbation, u uniform in [-1, 1]: a
        change of the size of f32 rounding. Returns the loss, the state_dict after the step, the
        optimizer state and what the step added to it."""
        optimizer = make_optimizer(a, [q for _, q in named])
        previous = {}
        if step == 1:
            module.load_state_dict(initial, strict=True)
        else:
            weights, state = checkpoint(a.checkpoints, step - 1)
            restore(module, optimizer, named, weights, state, slots)
            previous = {k: v for k, v in state.items() if k != "step"}
        if perturb is not None:
            g = torch.Generator().manual_seed(1000 * step + perturb)
            with torch.no_grad():
                for _, q in named:
                    q.mul_(1 + a.perturbation * (2 * torch.rand(q.shape, generator=g) - 1))
        index = torch.tensor([((step - 1) * batch + j) % samples for j in range(batch)])
        inputs = [data[n][index] for n in names]
        optimizer.zero_grad(set_to_none=True)
        result = module(*inputs)
        if a.loss == "model":
            loss = result
        elif a.loss == "cross_entropy":
            labels = data["labels"][index]
            loss = F.cross_entropy(result.reshape(-1, result.shape[-1]), labels.reshape(-1))
        else:
            loss = F.mse_loss(result, data["labels"][index])
        loss.backward()
        optimizer.step()
        expected = {k: (v.float() if v.is_floating_point() else v).detach().clone()
                    for k, v in module.state_dict().items()}
        opt_state = optimizer_state(optimizer, named, slots)
        return loss.item(), expected, opt_state, increments(opt_state, previous, decay), previous

    ok = True
    explained_steps = []
    for step in range(1, a.steps + 1):
        ref, expected, expected_state, added, previous = take_step(step)
        if step not in cleave_losses:
            print(f"step {step}: missing from {a.log}: FAIL")
            ok = False
            continue
        got = cleave_losses[step]
        rel = abs(got - ref) / max(abs(ref), 1e-30)
        bad = not (rel <= a.rtol)
        print(f"step {step}: loss torch {ref:.7g} cleave {got:.7g} rel {rel:.2e}: "
              f"{'FAIL' if bad else 'ok'}")
        ok = ok and not bad
        weights, state = checkpoint(a.checkpoints, step)
        good = compare_tensors(expected, weights, a.wtol, quiet=True, prefix=f"step {step}: ")
        actual_state = {k: v for k, v in state.items() if k != "step"}
        if sorted(expected_state) != sorted(actual_state):
            print(f"step {step}: optimizer state names differ: torch {sorted(expected_state)}, "
                  f"cleave {sorted(actual_state)}: FAIL")
            good = False
        errors = relative_errors(added, increments(actual_state, previous, decay))
        worst = max(errors.values(), default=0.0)
        beyond = {n: e for n, e in errors.items() if not e <= a.state_rtol}
        if beyond:
            # PyTorch's own gradient at this step, from weights changed at the size of
            # rounding: where a threshold sits within rounding, it moves too.
            spread = dict.fromkeys(beyond, 0.0)
            for k in range(a.perturbations):
                moved = relative_errors({n: added[n] for n in beyond},
                                        take_step(step, perturb=k)[3])
                for n in beyond:
                    spread[n] = max(spread[n], moved[n])
            unexplained = [n for n in beyond if not beyond[n] <= a.spread_factor * spread[n]]
            for n in sorted(beyond, key=beyond.get, reverse=True):
                bad = n in unexplained
                if bad or not a.quiet_spread:
                    print(f"step {step}: {n}: relative norm error {beyond[n]:.3g}; PyTorch's "
                          f"own under rounding-size changes of the weights {spread[n]:.3g}: "
                          f"{'FAIL' if bad else 'ok'}")
            print(f"step {step}: {len(beyond)} gradient terms beyond {a.state_rtol:g}, "
                  f"{len(beyond) - len(unexplained)} within {a.spread_factor:g}x PyTorch's own "
                  f"spread: {'FAIL' if unexplained else 'ok'}")
            if unexplained:
                good = False
            else:
                explained_steps.append(step)
        if int(state["step"]) != step:
            print(f"step {step}: cleave's checkpoint counts step {int(state['step'])}: FAIL")
            good = False
        print(f"step {step}: {len(expected)} tensors of the state_dict and "
              f"{len(expected_state)} of the optimizer state (largest relative norm error "
              f"{worst:.2g}): {'ok' if good else 'FAIL'}")
        ok = ok and good
    print(f"steps: {a.steps} compared, {len(explained_steps)} {explained_steps} with gradient "
          f"terms beyond {a.state_rtol:g} that PyTorch's own spread explains: "
          f"{'ok' if ok else 'FAIL'}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
