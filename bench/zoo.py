#!/usr/bin/python3
"""Models nobody here wrote, as a conformance suite: every model builder of Debian's torchvision
(0.14: classification, segmentation, video) and torchaudio (0.13), traced in eval mode with
random weights (no weights are downloaded) on example inputs at batch B, compiled by cleave for
one device, and run by `cleave bench` against LibTorch (the traced module) on the same inputs
and threads; the eager Python module is timed too, and the speedup is over the fastest of them.
With --rounds R every engine is timed R times, the engines taking turns, and each keeps its
fastest round, so that a slow minute of a shared machine does not decide a ratio.
Baselines at their best: first the OpenBLAS setting under which PyTorch's GEMMs are fastest here
is probed (bench/benchlib.py, best_blas_env: OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE as inherited,
unset, SkylakeX, Haswell; products checked equal) and every run takes it; LibTorch runs twice
(`cleave bench`: OMP_WAIT_POLICY as inherited, "libtorch", and passive, "libtorch*") and so does
the eager module, each time in its own process under torch.no_grad (OMP_WAIT_POLICY unset,
"eager", and passive, "eager*"), and so does the exported module as PyTorch deploys it for
inference, torch.jit.freeze then torch.jit.optimize_for_inference (batch norms folded into the
convolutions, as cleave's inference plans fold them; "frozen", "frozen*"; its output checked
against the eager module's first); the fastest of the six is the model's best_baseline.

  classification  its default resolution (the crop of its default weights' transforms)
  segmentation    the resize size of its default weights (520x520); output "out"
  video           16 frames at its default crop (112 or 224)
  audio           1 s at 16 kHz (44.1 kHz stereo for HDemucs); torchaudio's builders, and the
                  classes without one (Conformer, Emformer, DeepSpeech, Wav2Letter, WaveRNN,
                  Tacotron2) in the configurations of torchaudio's own tests; the first output
                  where a model returns several (wav2vec2's lengths, ...)

usage: /usr/bin/python3 bench/zoo.py --cleave PATH/cleave --work DIR
           [--family classification|segmentation|video|audio[,...]|all] [--models a,b,...]
           [--small] [--batch 2] [--threads N] [--iterations 3] [--rounds 1]
           [--timeout 900] [--max-params M] [--json OUT.json] [--markdown OUT.md]

A model passes when it imports, compiles, runs, and max|cleave - LibTorch| <= 1e-3 of
max|LibTorch| over its output. Prints the OpenBLAS probe, then one line per model (status, max
error relative to the output scale, cleave ms, LibTorch ms, eager ms, frozen ms, the fastest
baseline, the
reason of a failure: the tool's first error line, or the unsupported ops with their first source
lines) and a table at the end; --json and
--markdown write them. Models run smallest first (by parameter count); each step has --timeout
seconds; a model's files are deleted once it is measured. Exit status 0 when every model run
passes.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import benchlib  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TOL = 1e-3


FAMILIES = ("classification", "segmentation", "video", "audio")

# torchaudio's models: the builders of torchaudio.models (0.13) and, for the classes that have
# no builder, the configuration torchaudio's own tests build them with. Each entry gives the
# example inputs at batch B (waveforms of 1 s at 16 kHz unless the model says otherwise) and
# which of the forward's outputs are compared.
AUDIO_SOURCES = ["drums", "bass", "other", "vocals"]


def audio_models(torch, torchaudio, small=False):
    M = torchaudio.models
    second = 4000 if small else 16000  # samples of 1 s at 16 kHz (a quarter with --small)
    wave = lambda b, n=second, c=None: torch.randn(*((b, c, n) if c else (b, n)))

    def lengths(b, n):
        return torch.full((b,), n, dtype=torch.int64)
    first = lambda out: out[0]

    def frames(model, waveforms):
        return model.wav2vec2.feature_extractor(waveforms, None)[0].shape[1]
    specs = {}
    for name in ("wav2vec2_base", "wav2vec2_large", "wav2vec2_large_lv60k", "hubert_base",
                 "hubert_large", "hubert_xlarge"):
        specs[name] = (getattr(M, name), lambda b: {"waveforms": wave(b)}, first)
    for name in ("hubert_pretrain_base", "hubert_pretrain_large", "hubert_pretrain_xlarge"):
        # 1 s of audio gives 49 frames of labels (the feature extractor's stride is 320).
        # One label per frame of the feature extractor (stride 320 samples).
        specs[name] = (getattr(M, name), lambda b, model: {
            "waveforms": wave(b), "labels": torch.randint(0, 100, (b, frames(model, wave(b))))},
            first)
    specs["conv_tasnet_base"] = (M.conv_tasnet_base, lambda b: {"input": wave(b, second, 1)},
                                 None)
    for name in ("hdemucs_low", "hdemucs_medium", "hdemucs_high"):
        specs[name] = (lambda name=name: getattr(M, name)(AUDIO_SOURCES),
                       lambda b: {"input": wave(b, second * 44100 // 16000, 2)}, None)
    specs["emformer_rnnt_base"] = (
        lambda: M.emformer_rnnt_base(num_symbols=4097),
        lambda b: {"sources": torch.randn(b, 64, 80), "source_lengths": lengths(b, 64),
                   "targets": torch.randint(0, 4097, (b, 8), dtype=torch.int32),
                   "target_lengths": torch.full((b,), 8, dtype=torch.int32)}, first)
    specs["conformer"] = (
        lambda: M.Conformer(input_dim=80, num_heads=4, ffn_dim=128, num_layers=4,
                            depthwise_conv_kernel_size=31),
        lambda b: {"input": torch.randn(b, 100, 80), "lengths": lengths(b, 100)}, first)
    specs["emformer"] = (
        lambda: M.Emformer(input_dim=80, num_heads=4, ffn_dim=128, num_layers=4,
                           segment_length=4, right_context_length=1),
        lambda b: {"input": torch.randn(b, 101, 80), "lengths": lengths(b, 101)}, first)
    specs["deepspeech"] = (lambda: M.DeepSpeech(n_feature=80),
                           lambda b: {"x": torch.randn(b, 1, 100, 80)}, None)
    specs["wav2letter"] = (M.Wav2Letter, lambda b: {"x": wave(b, second, 1)}, None)
    specs["wavernn"] = (
        lambda: M.WaveRNN(upsample_scales=[5, 5, 11], n_classes=256, hop_length=275),
        lambda b: {"waveform": torch.randn(b, 1, 2200), "specgram": torch.randn(b, 1, 128, 12)},
        None)
    specs["tacotron2"] = (
        M.Tacotron2,
        lambda b: {"tokens": torch.randint(0, 148, (b, 20)), "token_lengths": lengths(b, 20),
                   "mel_specgram": torch.randn(b, 80, 50), "mel_specgram_lengths": lengths(b, 50)},
        first)
    return specs


def model_names(family):
    if family == "audio":
        import torch
        import torchaudio
        return sorted(audio_models(torch, torchaudio))
    import torchvision
    module = torchvision.models if family == "classification" else getattr(torchvision.models,
                                                                            family)
    return torchvision.models.list_models(module=module)


def model_size(family, name):
    """Parameter count: from the weights' metadata for torchvision (nothing built); torchaudio's
    models are built (random weights, the parameters of the largest take 4 GB for a moment)."""
    if family != "audio":
        import torchvision
        return torchvision.models.get_model_weights(name).DEFAULT.meta["num_params"]
    import torch
    import torchaudio
    model = audio_models(torch, torchaudio)[name][0]()
    return sum(p.numel() for p in model.parameters())


def build_model(family, name, batch, small):
    """The model in eval mode and its example inputs (name -> tensor, in forward's order), with
    the outputs compared: a module whose forward takes the inputs by name and returns tensors."""
    import torch
    torch.manual_seed(0)
    if family == "audio":
        import torchaudio
        build, make_inputs, select = audio_models(torch, torchaudio, small)[name]
        model = build().eval()
        inputs = (make_inputs(batch, model) if make_inputs.__code__.co_argcount == 2
                  else make_inputs(batch))
    else:
        import torchvision
        # No weights at all: segmentation builders would fetch their backbone's otherwise.
        extra = {"weights_backbone": None} if family == "segmentation" else {}
        model = torchvision.models.get_model(name, weights=None, **extra).eval()
        weights = torchvision.models.get_model_weights(name).DEFAULT
        gen = torch.Generator().manual_seed(1)
        if family == "classification":
            # The model's own input size where it fixes one (vit_h_14's default weights are for
            # 518, the model built without them takes 224), else its default weights' crop.
            crop = weights.transforms().crop_size
            size = getattr(model, "image_size", None) or (
                crop[0] if isinstance(crop, (list, tuple)) else int(crop))
            inputs = {"x": torch.randn(batch, 3, size, size, generator=gen)}
        elif family == "segmentation":
            size = 128 if small else weights.transforms().resize_size[0]
            inputs = {"x": torch.randn(batch, 3, size, size, generator=gen)}
        else:  # video: (batch, channels, frames, height, width)
            size = weights.transforms().crop_size[0]
            frames = 16
            # mvit's position embeddings fix 16 x 224 x 224; s3d's last pool needs 224.
            if small and "mvit" not in name and name != "s3d":
                size, frames = 64, 8
            inputs = {"x": torch.randn(batch, 3, frames, size, size, generator=gen)}
        select = (lambda out: out["out"]) if family == "segmentation" else None
    # Methods marked @torch.jit.export (WaveRNN's and Tacotron2's infer) are compiled by
    # torch.jit.trace along with forward, and scripting their nn.GRU / nn.LSTM fails in
    # PyTorch 1.13 ("Couldn't find method: 'forward__0'"): only forward is traced here.
    from torch._jit_internal import FunctionModifiers
    for m in model.modules():
        for attr in vars(type(m)).values():
            if getattr(attr, "_torchscript_modifier", None) == FunctionModifiers.EXPORT:
                attr._torchscript_modifier = FunctionModifiers.DEFAULT
    # Weight norm recomputes the weight from two parameters in a forward pre-hook, which
    # torch.jit.trace refuses; in eval mode it is folded into the weight, as torchaudio's own
    # __prepare_scriptable__ does.
    for m in model.modules():
        for hook in list(getattr(m, "_forward_pre_hooks", {}).values()):
            if type(hook).__name__ == "WeightNorm":
                torch.nn.utils.remove_weight_norm(m, hook.name)
    return model, inputs, select


def _wrap(model, names, select):
    """A module with forward(self, <names>) calling model and keeping the selected outputs:
    the traced graph's inputs are named as the example-inputs file names them."""
    import torch
    ns = {}
    args = ", ".join(names)
    exec(f"def forward(self, {args}):\n    return self.select(self.model({args}))", ns)
    cls = type("Wrapped", (torch.nn.Module,), {"forward": ns["forward"]})
    wrapped = cls()
    wrapped.model = model
    wrapped.select = select or (lambda out: out)
    return wrapped


DTYPE_NAMES = {"float32": "f32", "int64": "i64", "int32": "i32", "bool": "i1"}


def prepare_model(family, name, batch, small):
    """The model as exported and timed: (the wrapped module, its positional inputs, the model,
    the inputs by name, whether it was recalibrated). Deterministic (fixed seeds), so the eager
    timing processes build the same module as the export."""
    import torch
    model, inputs, select = build_model(family, name, batch, small)
    names = list(inputs)
    args = tuple(inputs.values())
    wrapped = _wrap(model, names, select)

    def output(m):
        with torch.no_grad():
            y = m(*args)
        return y[0] if isinstance(y, (list, tuple)) else y

    # Random weights can make the activations vanish layer by layer until the logits are the
    # classifier's bias alone, the same for every input (googlenet): nothing would be compared.
    # Then the batch norms are calibrated on the input (running statistics from one
    # training-mode pass), as if the model had been trained on it.
    calibrated = False
    if batch > 1 and _input_independent(output(wrapped)):
        for m in model.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.reset_running_stats()
                m.momentum = None
        model.train()
        output(wrapped)
        model.eval()
        calibrated = True
    # Heads initialised to zero (vit) give zero logits: those are drawn from N(0, 0.02).
    if batch > 1 and _input_independent(output(wrapped)):
        gen = torch.Generator().manual_seed(2)
        with torch.no_grad():
            for p in model.parameters():
                if p.dim() >= 2 and not p.any():
                    p.copy_(torch.randn(p.shape, generator=gen) * 0.02)
                    calibrated = True
    return wrapped, args, model, inputs, calibrated


def export_one(family, name, work, batch, small):
    """Child process: traces `name` into work/model.pt with its inputs and outputs."""
    import torch
    sys.path.insert(0, os.path.join(ROOT, "examples"))
    from safetensors_io import save_file

    wrapped, args, model, inputs, calibrated = prepare_model(family, name, batch, small)
    # Traced with autograd on, as export.py does (under no_grad nn.MultiheadAttention takes
    # PyTorch's fused inference path, which cleave imports too: test/importer/fused-attention.test).
    traced = torch.jit.trace(wrapped, args, check_trace=False)
    with torch.no_grad():
        out = traced(*args)
    if isinstance(out, (list, tuple)):  # googlenet / inception in eval return the logits first
        out = out[0]
    if batch > 1 and _input_independent(out):
        raise SystemExit(f"zoo.py: error: {name}'s output does not depend on its input with "
                         "random weights (even with calibrated batch norms and no zero weight "
                         "matrix): nothing to compare")
    meta = {"format": 1, "model": name,
            "inputs": [{"name": k, "shape": list(v.shape),
                        "dtype": DTYPE_NAMES[str(v.dtype).replace("torch.", "")]}
                       for k, v in inputs.items()]}
    traced.save(os.path.join(work, "model.pt"), _extra_files={"cleave.json": json.dumps(meta)})
    save_file(dict(inputs), os.path.join(work, "inputs.safetensors"))
    first = next(iter(inputs.values()))
    info = {"params": sum(p.numel() for p in model.parameters()),
            "input": "x".join(str(d) for d in first.shape),
            "scale": out.abs().max().item(), "recalibrated": calibrated}
    with open(os.path.join(work, "export.json"), "w") as f:
        json.dump(info, f)


def eager_one(family, name, batch, small, threads, iterations, report, frozen_from=None):
    """Child process: times the eager Python module under torch.no_grad, as users run it
    (median of `iterations` forwards after one, on `threads`), into `report` (JSON).
    With `frozen_from` (the exported TorchScript file) it times that module as PyTorch's
    inference deployment runs it instead: torch.jit.freeze (weights inlined, batch norms folded
    into the convolutions before them) then torch.jit.optimize_for_inference (oneDNN layouts
    where they pay), when its output agrees with the eager module's; else (PyTorch 1.13's
    oneDNN hardswish gets mobilenet_v3 wrong) freeze alone, checked the same way."""
    import torch
    wrapped, args, _, _, _ = prepare_model(family, name, batch, small)
    torch.set_num_threads(threads or os.cpu_count())
    module, variant = wrapped, "eager"
    if frozen_from:
        def first(y):
            return y[0] if isinstance(y, (list, tuple)) else y

        with torch.no_grad():
            want = first(wrapped(*args))
        scale = max(want.abs().max().item(), 1e-30)
        errors = []
        for variant in ("freeze+optimize_for_inference", "freeze"):
            frozen = torch.jit.freeze(torch.jit.load(frozen_from).eval())
            if variant != "freeze":
                frozen = torch.jit.optimize_for_inference(frozen)
            with torch.no_grad():
                error = (first(frozen(*args)) - want).abs().max().item() / scale
            if error <= TOL:
                module = frozen
                break
            errors.append(f"{variant} differs from the eager module by {error:.3g} of the "
                          f"output scale")
        if module is wrapped:
            sys.exit("error: " + "; ".join(errors))
    times = []
    with torch.no_grad():
        for i in range(iterations + 1):
            start = time.perf_counter()
            module(*args)
            if i:
                times.append(time.perf_counter() - start)
    with open(report, "w") as f:
        json.dump({"median_ms": sorted(times)[len(times) // 2] * 1e3, "variant": variant}, f)


def _input_independent(out):
    """True when every row of the batch has the same output (to float precision)."""
    scale = max(out.abs().max().item(), 1e-30)
    return all((out[i] - out[0]).abs().max().item() <= 1e-6 * scale for i in range(1, len(out)))


def first_error(text):
    lines = text.splitlines()
    for i, line in enumerate(lines):
        if "error" in line.lower():
            # A list of unsupported ops: the ops, each with its first source line.
            if "unsupported op kind" in line:
                ops = [" ".join(l.split()[:1] + l.split()[5:6]) for l in lines[i + 1:]
                       if l.startswith("  aten::") or l.startswith("  prim::")]
                return (line[line.index("the model uses"):] + " " + "; ".join(ops))[:400]
            return line.strip()[:300]
    lines = [l for l in text.splitlines() if l.strip()]
    return (lines[-1].strip() if lines else "no output")[:300]


# Baselines at their best: every step runs under the OpenBLAS setting main() probed
# (benchlib.best_blas_env), `cleave bench` and the eager timing included.
BLAS_CHANGES = {}


def run(cmd, timeout, **extra_env):
    """Runs cmd under the probed OpenBLAS setting (and `extra_env`: NAME=value, None unsets);
    returns (exit status or None on timeout, its stdout and stderr)."""
    env = benchlib.blas_environ(BLAS_CHANGES, **extra_env)
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        return p.returncode, p.stdout + p.stderr
    except subprocess.TimeoutExpired:
        return None, f"timed out after {timeout} s: {' '.join(cmd[:3])} ..."


# The Python runs: the eager module and the frozen one (torch.jit.freeze and
# optimize_for_inference: batch norms folded, as cleave's inference plans fold them), each with
# OpenMP's idle threads spinning (OMP_WAIT_POLICY unset, its default) and sleeping (passive), as
# `cleave bench` runs LibTorch ("libtorch", "libtorch*").
EAGER_RUNS = (("eager", None, False), ("eager*", "passive", False),
              ("frozen", None, True), ("frozen*", "passive", True))


def measure(family, name, args, params):
    row = {"model": name, "family": family, "params": params, "status": "FAIL",
           "stage": "export"}
    work = os.path.join(args.work, name)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    start = time.time()
    try:
        model_args = ["--family", family, "--batch", str(args.batch)] + (
            ["--small"] if args.small else [])
        rc, out = run([sys.executable, os.path.abspath(__file__), "--export-one", name,
                       "--work", work] + model_args, args.timeout)
        if rc != 0:
            row["reason"] = first_error(out)
            return row
        with open(os.path.join(work, "export.json")) as f:
            row.update(json.load(f))
        row["stage"] = "compile"
        rc, out = run([args.cleave, "compile", os.path.join(work, "model.pt"), "-o",
                       os.path.join(work, "plan")], args.timeout)
        if rc != 0:
            row["reason"] = first_error(out)
            return row
        # Each round times every engine once, one after the other, and each engine keeps its
        # fastest round: a slow minute of a shared machine then hits all of them, not one.
        baselines, eager_errors, cleave_ms, max_difference = {}, {}, None, 0.0
        for _ in range(args.rounds):
            # PyTorch's other baseline: the Python module, eager, each run in its own process.
            # One that fails leaves it out of the comparison (eager_error) but fails no model.
            for label, policy, frozen in EAGER_RUNS if args.iterations > 0 else ():
                report = os.path.join(work, f"{label.rstrip('*')}"
                                            f"{'-passive' if policy else ''}.json")
                frozen_args = ["--frozen-from", os.path.join(work, "model.pt")] if frozen else []
                rc, out = run([sys.executable, os.path.abspath(__file__), "--eager-one", name,
                               "--work", work, "--eager-report", report, "--threads",
                               str(args.threads), "--iterations", str(args.iterations)]
                              + frozen_args + model_args, args.timeout, OMP_WAIT_POLICY=policy)
                if rc == 0 and os.path.exists(report):
                    with open(report) as f:
                        timed = json.load(f)
                    ms = timed["median_ms"]
                    baselines[label] = min(baselines.get(label, ms), ms)
                    if frozen:
                        row["frozen_variant"] = timed["variant"]
                else:
                    eager_errors[label] = first_error(out)
            row["stage"] = "run"
            report = os.path.join(work, "bench.json")
            rc, out = run([args.cleave, "bench", os.path.join(work, "model.pt"), "--plan",
                           os.path.join(work, "plan"), "--inputs",
                           os.path.join(work, "inputs.safetensors"), "--threads",
                           str(args.threads), "--iterations", str(args.iterations), "--warmup",
                           "1", "--json", report,
                           "--baseline-blas", "inherit"],  # probed once for all, in main()
                          args.timeout)
            if rc != 0 or not os.path.exists(report):
                row["reason"] = first_error(out)
                return row
            with open(report) as f:
                bench = json.load(f)
            engines = {e["engine"]: e for e in bench["engines"]}
            ms = engines["cleave"]["median_s"] * 1e3
            cleave_ms = ms if cleave_ms is None else min(cleave_ms, ms)
            for label in ("libtorch", "libtorch*"):
                ms = engines[label]["median_s"] * 1e3
                baselines[label] = min(baselines.get(label, ms), ms)
            max_difference = max(max_difference, bench["max_difference"])
        # A run that failed in one round only counts by its other rounds.
        eager_errors = {label: e for label, e in eager_errors.items() if label not in baselines}
        if eager_errors:
            row["eager_error"] = eager_errors
        for kind in ("eager", "frozen"):
            times = [baselines[label] for label, _, frozen in EAGER_RUNS
                     if label in baselines and frozen == (kind == "frozen")]
            if times:
                row[f"{kind}_ms"] = min(times)
        row["rounds"] = args.rounds
        row["cleave_ms"] = cleave_ms
        row["libtorch_ms"] = min(baselines["libtorch"], baselines["libtorch*"])
        # PyTorch at its best: the fastest of LibTorch (the traced module), eager Python and
        # the frozen module, each with OpenMP's idle threads spinning and sleeping.
        row["baselines_ms"] = baselines
        row["best_baseline"] = min(baselines, key=baselines.get)
        row["pytorch_ms"] = baselines[row["best_baseline"]]
        row["max_error"] = max_difference
        row["relative_error"] = max_difference / max(row["scale"], 1e-30)
        row["stage"] = "compare"
        if row["relative_error"] <= TOL:
            row["status"] = "pass"
            row["stage"] = "done"
        else:
            row["reason"] = (f"max |cleave - libtorch| {max_difference:.3g} is "
                             f"{row['relative_error']:.3g} of the output scale {row['scale']:.3g}")
        return row
    finally:
        row["seconds"] = round(time.time() - start, 1)
        shutil.rmtree(work, ignore_errors=True)


def line(row):
    if row["status"] == "pass":
        eager = f", eager {row['eager_ms']:.1f} ms" if "eager_ms" in row else ""
        eager += f", frozen {row['frozen_ms']:.1f} ms" if "frozen_ms" in row else ""
        return (f"{row['model']}: pass, error {row['relative_error']:.2e} of scale, cleave "
                f"{row['cleave_ms']:.1f} ms, libtorch {row['libtorch_ms']:.1f} ms{eager} "
                f"({row['pytorch_ms'] / row['cleave_ms']:.2f}x the fastest, "
                f"{row['best_baseline']})")
    return f"{row['model']}: FAIL at {row['stage']}: {row.get('reason', '?')}"


def markdown(rows, args):
    out = [f"| model | family | params (M) | input | status | max error / scale | cleave ms | "
           f"LibTorch ms | eager ms | frozen ms | speedup | fastest baseline | blocker |",
           "|---|---|---:|---|---|---:|---:|---:|---:|---:|---:|---|---|"]
    for r in rows:
        ok = r["status"] == "pass"
        err = f"{r['relative_error']:.1e}" if "relative_error" in r else ""
        cms = f"{r['cleave_ms']:.1f}" if "cleave_ms" in r else ""
        lms = f"{r['libtorch_ms']:.1f}" if "libtorch_ms" in r else ""
        ems = f"{r['eager_ms']:.1f}" if "eager_ms" in r else ""
        fms = f"{r['frozen_ms']:.1f}" if "frozen_ms" in r else ""
        speed = (f"{r.get('pytorch_ms', r.get('libtorch_ms', 0)) / r['cleave_ms']:.2f}x"
                 if "cleave_ms" in r else "")
        reason = "" if ok else f"{r['stage']}: {r.get('reason', '')}".replace("|", "/")
        star = " *" if r.get("recalibrated") else ""
        out.append(f"| {r['model']}{star} | {r['family']} | {r['params'] / 1e6:.1f} | "
                   f"{r.get('input', '')} | "
                   f"{r['status']} | {err} | {cms} | {lms} | {ems} | {fms} | {speed} | "
                   f"{r.get('best_baseline', '')} | {reason} |")
    passed = sum(r["status"] == "pass" for r in rows)
    out.append("")
    out.append(f"{passed} of {len(rows)} models pass (batch {args.batch}, {args.threads} "
               f"threads, median of {args.iterations} after 1 warm-up"
               + (f", each engine's fastest of {args.rounds} interleaved rounds"
                  if args.rounds > 1 else "")
               + "; speedup: the fastest of "
               f"LibTorch, eager PyTorch and the frozen module over cleave, each run with "
               f"OMP_WAIT_POLICY unset "
               f"and passive (a star: passive); OpenBLAS {args.blas_setting}: "
               f"{benchlib.describe_blas(BLAS_CHANGES)}, the fastest of the settings probed)")
    if any(r.get("recalibrated") for r in rows):
        out.append("")
        out.append("\\* random weights made the output independent of the input: the batch "
                   "norms' running statistics were calibrated on the input first, or weight "
                   "matrices initialised to zero drawn from N(0, 0.02)")
    return "\n".join(out) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cleave", default=os.path.join(ROOT, "build", "bin", "cleave"))
    p.add_argument("--work", required=True)
    p.add_argument("--family", default="classification",
                   help="comma-separated among " + ", ".join(FAMILIES) + ", or all "
                   "(default: classification)")
    p.add_argument("--models", help="comma-separated names (default: every model of the "
                   "families)")
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--small", action="store_true",
                   help="smaller inputs for quick runs: segmentation at 128x128, video clips of "
                   "8 frames at 64x64 (mvit and s3d keep 16 at 224x224), audio of 0.25 s")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--rounds", type=int, default=1,
                   help="time every engine this many times, interleaved, each keeping its "
                        "fastest round")
    p.add_argument("--timeout", type=float, default=900, help="seconds per step")
    p.add_argument("--max-params", type=float, help="skip models above M million parameters")
    p.add_argument("--json")
    p.add_argument("--markdown")
    p.add_argument("--export-one", help=argparse.SUPPRESS)
    p.add_argument("--eager-one", help=argparse.SUPPRESS)
    p.add_argument("--eager-report", help=argparse.SUPPRESS)
    p.add_argument("--frozen-from", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.rounds < 1:
        sys.exit(f"zoo.py: error: --rounds must be at least 1, got {args.rounds}")
    families = FAMILIES if args.family == "all" else args.family.split(",")
    unknown = [f for f in families if f not in FAMILIES]
    if unknown:
        sys.exit(f"zoo.py: error: unknown families: {', '.join(unknown)} (known: "
                 f"{', '.join(FAMILIES)}, all)")
    if args.export_one:
        export_one(families[0], args.export_one, args.work, args.batch, args.small)
        return
    if args.eager_one:
        eager_one(families[0], args.eager_one, args.batch, args.small, args.threads,
                  args.iterations, args.eager_report, args.frozen_from)
        return
    import torch
    import torchvision
    import torchaudio
    family_of = {n: f for f in families for n in model_names(f)}
    names = list(family_of)
    if args.models:
        wanted = args.models.split(",")
        unknown = [n for n in wanted if n not in family_of]
        if unknown:
            sys.exit(f"zoo.py: error: not {' or '.join(families)} models: {', '.join(unknown)}")
        names = wanted
    # Smallest first, by parameter count.
    sizes = {n: model_size(family_of[n], n) for n in names}
    names.sort(key=lambda n: sizes[n])
    if args.max_params:
        names = [n for n in names if sizes[n] <= args.max_params * 1e6]
    os.makedirs(args.work, exist_ok=True)
    rows = []
    print(f"torchvision {torchvision.__version__}, torchaudio {torchaudio.__version__}, torch "
          f"{torch.__version__}; {len(names)} models, batch {args.batch}, {args.threads} threads",
          flush=True)
    changes, args.blas_setting, probe = benchlib.best_blas_env(args.threads, sys.executable)
    BLAS_CHANGES.update(changes)
    print("\n".join(benchlib.blas_probe_table(probe, args.blas_setting, args.threads)),
          flush=True)
    for n in names:
        row = measure(family_of[n], n, args, sizes[n])
        rows.append(row)
        print(line(row), flush=True)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"batch": args.batch, "threads": args.threads, "small": args.small,
                           "blas_setting": args.blas_setting, "blas_env": BLAS_CHANGES,
                           "blas_probe": probe, "models": rows}, f, indent=1)
        if args.markdown:
            with open(args.markdown, "w") as f:
                f.write(markdown(rows, args))
    passed = sum(r["status"] == "pass" for r in rows)
    print(f"models passing: {passed} of {len(rows)}")
    sys.exit(0 if passed == len(rows) else 1)


if __name__ == "__main__":
    main()
