#!/usr/bin/python3
"""Validates `cleave plan` and its cost model against a corpus of published GPT training runs.

Every row is a published GPT-style run with its configuration and its measured throughput. For each
row the script exports the model (meta device, no weights), plans it on the shipped cluster spec of
the run's GPU with the same GPU count and global batch, and asks cleave for

  (a) the published configuration, pinned as far as cleave can express it (--tp, --pp and, where
      the source gives them, --microbatch, the schedule, recomputation, sequence parallelism and
      ZeRO; each row's note says which pins stand for what): its predicted step time against the
      published one;
  (b) the planner's own choice (free search): its plan and predicted time, which should be no
      slower than (a)'s prediction, as (a) is one of the candidates the search may pick.

The corpus (sources, with the table each row comes from, are in ROWS below):

  N21-T1  Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU Clusters
          Using Megatron-LM", Table 1 (weak scaling, 1.7B-1T, A100-80GB, full recomputation);
  N21-T2  the same paper, Table 2 (PTD parallelism against ZeRO-3 without model parallelism,
          174.6B and 529.6B, 384-2240 A100s);
  K22     Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer
          Models", Table 3 (configurations) and Table 5 (iteration times, full recomputation
          against sequence parallelism + selective recomputation), A100-80GB;
  S22     Smith et al. 2022, "Using DeepSpeed and Megatron to Train Megatron-Turing NLG 530B",
          sections 2.2 and 2.4 (8-way tensor x 35-way pipeline, batch 1920, iteration times on
          280, 350 and 420 DGX A100 nodes);
  MLM     the Megatron-LM README, "Training Speed and Scalability": the H100 weak-scaling table
          (images/model_table.png, Megatron-Core r0.8.0, GPT 1.7B-462B, sequence 4096,
          vocabulary 131072).

Published times are the sources' iteration times where they give them (K22, S22); otherwise they
follow from the per-GPU throughput X with the source's own FLOP count F, time = F / (n X):
N21: F = 96 B s l h^2 (1 + s/(6h) + V/(16 l h)) (recomputation counted); MLM (Megatron-LM's
num_floating_point_operations of r0.8.0, 4h MLP, no GQA):
F = 72 B s l h^2 (1 + s/(6h) + V/(12 l h)).

Attention: the runs of 2021-2022 (N21, S22, K22 with full recomputation) materialized the
attention scores, and their models are exported as examples/export.py builds the Megatron sizes
(a registered causal-mask buffer, which cleave cannot read in a meta-device export, so attention
stays unfused). K22's selective-recomputation rows and the H100 runs are exported with the mask
built in forward, which cleave fuses into one attention kernel that stores no scores (Shape.fused).

The corpus is split into a calibration half and a held-out half by a fixed rule applied before any
error is looked at (assign_halves): the series are walked in the order of ROWS, each sorted by
parameter count and then GPU count; the REFERENCE.md rows (Table 1's 1.7B, 18.4B, 145.6B) go to
calibration, and every other row goes to the half opposite to the previous such row's, starting
with held-out. Nothing is fitted to any row; --calibrate fits per-GPU figures on the calibration
half only and reports the held-out half as it comes out.

Checks: (a) |error| <= 15 %, (b) planner <= published-config prediction. Only the three
REFERENCE.md rows gate the exit status (1 if any fails); the other rows are reported.

Calibration (--calibrate DIR): before the report, each GPU's spec has a declared set of its
efficiencies (CALIBRATED_TERMS: GEMM and attention compute, elementwise memory, NVLink and
InfiniBand; at most the first r // 2 of them for a GPU with r calibration rows, and only those
that at least four calibration rows depend on) fitted to that GPU's
calibration rows only, by a coordinate search that minimizes their mean |error| (one set of figures
per GPU, never one per row). The fitted specs are written to DIR,
with the held-out half's error on them as their prediction_error; the report then plans every row
on them, and prints each half's summary on the shipped specs next to the fitted ones.

usage: /usr/bin/python3 bench/planner_validation.py [--cleave PATH] [--a100 SPEC.json]
           [--h100 SPEC.json] [--rows 1.7B,18.4B,...] [--tolerance 15] [--json FILE]
           [--calibrate DIR]
"""
import argparse
import concurrent.futures
import contextlib
import copy
import datetime
import json
import os
import subprocess
import sys
import tempfile

from benchlib import ROOT, machine, plan_label

EXAMPLES = os.path.join(ROOT, "examples")
CLUSTERS = os.path.join(EXAMPLES, "clusters")

SOURCES = {
    "N21-T1": "Narayanan et al. 2021, Table 1",
    "N21-T2": "Narayanan et al. 2021, Table 2",
    "K22": "Korthikanti et al. 2022, Tables 3 and 5",
    "S22": "Smith et al. 2022 (MT-NLG), sections 2.2 and 2.4",
    "MLM": "Megatron-LM README, H100 weak scaling (r0.8.0)",
}

# The shipped cluster spec of each GPU the corpus's runs used.
GPUS = {"A100-80GB": "dgx-a100-80gb.json", "H100-80GB": "dgx-h100.json"}

CALIBRATION, HELD_OUT = "calibration", "held-out"


class Shape:
    """A GPT's shape. export: the name examples/export.py knows it by, or None to register one.

    fused: build the causal mask in forward (export.py's --mask-in-forward), so that cleave's
    attention fusion can prove it causal and costs one fused attention kernel that stores no
    s x s scores (FlashAttention-style). Otherwise the mask is the registered tril buffer, which a
    meta-device export carries without data: cleave cannot evaluate it and keeps attention
    unfused (QK^T, mask, softmax, dropout, AV, the scores materialized), as Megatron-LM ran it
    before fused attention kernels (2021-2022)."""

    def __init__(self, heads, hidden, layers, seq=2048, vocab=51200, tied=True, export=None,
                 fused=False):
        self.heads, self.hidden, self.layers = heads, hidden, layers
        self.seq, self.vocab, self.tied, self.fused = seq, vocab, tied, fused
        self.export = export or (f"pv-gpt-h{hidden}-l{layers}-a{heads}-s{seq}-v{vocab}"
                                 + ("" if tied else "-untied") + ("-fused" if fused else ""))

    def with_fused_attention(self):
        return Shape(self.heads, self.hidden, self.layers, self.seq, self.vocab, self.tied,
                     fused=True)

    @property
    def params(self):
        """Parameter count of examples/models.py's GPT of this shape (biases and norms included)."""
        h, l, s, v = self.hidden, self.layers, self.seq, self.vocab
        return 12 * l * h * h + 13 * l * h + (v + s) * h + 2 * h + (0 if self.tied else v * h)


# Narayanan 2021's sizes: examples/export.py builds them by name (vocabulary 51200, sequence 2048).
N_1_7B = Shape(24, 2304, 24, export="gpt-1.7b")
N_3_6B = Shape(32, 3072, 30, export="gpt-3.6b")
N_7_5B = Shape(32, 4096, 36, export="gpt-7.5b")
N_18_4B = Shape(48, 6144, 40, export="gpt-18.4b")
N_39_1B = Shape(64, 8192, 48, export="gpt-39.1b")
N_76_1B = Shape(80, 10240, 60, export="gpt-76.1b")
N_145_6B = Shape(96, 12288, 80, export="gpt-145.6b")
N_310_1B = Shape(128, 16384, 96, export="gpt-310.1b")
N_529_6B = Shape(128, 20480, 105, export="gpt-529.6b")   # also K22's 530B and MT-NLG
N_1T = Shape(160, 25600, 128, export="gpt-1t")           # also K22's 1T
# GPT-3 175B's shape (N21 Table 2's 174.6B, K22's 175B) and K22's 22B: same vocabulary and
# sequence, registered with the exporter here.
GPT3_175B = Shape(96, 12288, 96)
K_22B = Shape(64, 6144, 48)


def _mlm(heads, hidden, layers):
    # Megatron-LM README's H100 runs: vocabulary 131072, sequence 4096. Their parameter counts
    # (1.7B for h 2048 and 24 layers, ..., 462B) include a separate output layer: the embedding is
    # untied (Megatron-Core's --untie-embeddings-and-output-weights), so the export unties it.
    # Megatron-Core r0.8.0 runs attention through Transformer Engine's fused kernels: fused.
    return Shape(heads, hidden, layers, seq=4096, vocab=131072, tied=False, fused=True)


class Row:
    """One published run: the model's shape, the configuration the source gives and its time.

    schedule: None (not published: cleave chooses), "1f1b" or "interleaved:V".
    recompute: "full", "selective" or None (not published).
    sp: whether the run used Megatron-LM's sequence parallelism.
    zero: "none", "optimizer" (ZeRO-1, Megatron-LM's distributed optimizer), "parameters" (ZeRO-3)
    or None (not published: cleave chooses).
    seconds: the published iteration time; tflops with flops ("N21" or "MLM") where the source
    gives the per-GPU throughput instead.
    """

    def __init__(self, rid, model, source, series, gpu, shape, t, p, n, batch, *, mb=None,
                 schedule=None, recompute=None, sp=False, zero=None, seconds=None, tflops=None,
                 flops=None, note="", gating=False):
        self.rid, self.model, self.source, self.series, self.gpu = rid, model, source, series, gpu
        self.shape, self.t, self.p, self.n, self.batch, self.mb = shape, t, p, n, batch, mb
        self.schedule, self.recompute, self.sp, self.zero = schedule, recompute, sp, zero
        self.seconds, self.tflops, self.flops, self.note = seconds, tflops, flops, note
        # gating: in REFERENCE.md, so its checks decide the exit status.
        self.gating = gating
        self.half = None
        assert n % (t * p) == 0 and (seconds is None) != (tflops is None)

    @property
    def d(self):
        return self.n // (self.t * self.p)

    def published_seconds(self):
        if self.seconds is not None:
            return self.seconds
        s, l, h, v, b = (self.shape.seq, self.shape.layers, self.shape.hidden, self.shape.vocab,
                         self.batch)
        if self.flops == "N21":
            flops = 96 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))
        else:
            assert self.flops == "MLM"
            flops = 72 * b * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h))
        return flops / (self.n * self.tflops * 1e12)

    def published_config(self):
        parts = [f"t{self.t} p{self.p} d{self.d} B{self.batch}"]
        if self.mb:
            parts[0] += f" mb{self.mb}"
        if self.schedule:
            parts[0] += " " + self.schedule.replace(":", " v")
        parts.append({"full": "full recompute", "selective": "selective recompute",
                      None: "recompute n/a"}[self.recompute])
        if self.sp:
            parts.append("SP")
        parts.append({"none": "no ZeRO", "optimizer": "dist. optimizer", "parameters": "ZeRO-3",
                      None: "ZeRO n/a"}[self.zero])
        if self.tflops is not None:
            parts.append(f"{self.tflops:g} TF/GPU")
        return ", ".join(parts)

    def pins(self):
        """The cleave plan options that stand for the published configuration."""
        pins = ["--tp", str(self.t), "--pp", str(self.p)]
        if self.mb:
            pins += ["--microbatch", str(self.mb)]
        if self.schedule == "1f1b":
            pins += ["--schedule", "1f1b"]
        elif self.schedule:
            kind, v = self.schedule.split(":")
            pins += ["--schedule", kind, "--virtual-stages", v]
        # Selective recomputation (the attention core only) has no cleave option of its own: its
        # rows are exported with fused attention (Shape.fused), which stores no s x s scores and
        # recomputes them in the backward, as selective recomputation does; auto then recomputes
        # whole layers only where the memory budget still needs it.
        pins += ["--recompute", "full" if self.recompute == "full" else "auto"]
        # cleave cannot force sequence parallelism on: auto lets a split use it where predicted
        # faster; off rules it out.
        pins += ["--sequence-parallel", "auto" if self.sp else "off"]
        if self.zero:
            pins += ["--zero", self.zero]
        return pins


def _t1(name, shape, t, p, n, batch, tflops, gating=False):
    return Row(name, name, "N21-T1", "N21-T1", "A100-80GB", shape, t, p, n, batch,
               recompute="full", sp=False, zero="none", tflops=tflops, flops="N21", gating=gating)


def _t2_ptd(shape, label, t, p, n, batch, tflops):
    return Row(f"t2-ptd-{label.lower()}-{n}", label, "N21-T2", "N21-T2 PTD", "A100-80GB", shape, t,
               p, n, batch, mb=1, recompute="full", sp=False, zero="none", tflops=tflops,
               flops="N21", note=f"model-parallel size {t * p} in the table, split t{t} x p{p} "
               "(t the node size, as for the paper's other runs of these sizes)")


def _t2_zero3(shape, label, n, batch, mb, tflops, note=""):
    return Row(f"t2-zero3-{label.lower()}-{n}", label, "N21-T2", "N21-T2 ZeRO-3", "A100-80GB",
               shape, 1, 1, n, batch, mb=mb, recompute="full", sp=False, zero="parameters",
               tflops=tflops, flops="N21",
               note="ZeRO-3 without model parallelism (DeepSpeed); recomputation not stated, full "
               "pinned (the paper's FLOP count includes it, and a whole model's activations at "
               "this microbatch do not fit without it)" + note)


def _k22(shape, label, t, p, n, batch, mb, schedule, full_s, sel_s):
    common = dict(mb=mb, schedule=schedule, zero="none")
    return [
        Row(f"k22-{label.lower()}-full", label, "K22", "K22 full", "A100-80GB", shape, t, p, n,
            batch, recompute="full", sp=False, seconds=full_s, **common,
            note="Table 5 'full recompute'; attention unfused"),
        Row(f"k22-{label.lower()}-sel", label, "K22", "K22 selective", "A100-80GB",
            shape.with_fused_attention(), t, p, n, batch, recompute="selective", sp=True,
            seconds=sel_s, **common,
            note="Table 5 'present work': sequence parallelism + selective recomputation; the "
            "closest cleave has: fused attention (no s x s scores stored, recomputed in the "
            "backward), --recompute auto (whole layers only if memory needs them), "
            "--sequence-parallel auto (cleave cannot force it on)"),
    ]


def _s22(n, seconds, tflops):
    return Row(f"mtnlg-{n}", "530B MT-NLG", "S22", "S22", "A100-80GB", N_529_6B, 8, 35, n, 1920,
               schedule="1f1b", recompute="full", sp=False, seconds=seconds,
               note=f"{n // 8} DGX A100 nodes, {tflops} TF/GPU published; vocabulary 50257 padded "
               "to 51200 (Megatron's multiple of 128 x t); DeepSpeed's pipeline (1F1B, pinned); "
               "full recomputation (the paper's TF/GPU matches the FLOP count with it); "
               "attention unfused; microbatch and ZeRO stage not published (free)")


def _mlm_row(label, shape, t, p, n, batch, tflops):
    return Row(f"h100-{label.lower()}", label, "MLM", "MLM", "H100-80GB", shape, t, p, n, batch,
               sp=True, zero="optimizer", tflops=tflops, flops="MLM",
               note="--tp-comm-overlap (needs sequence parallelism) and --overlap-param-gather "
               "(needs the distributed optimizer): SP and ZeRO-1 pinned; fused attention "
               "(Transformer Engine); untied output layer; the overlap of tensor- and "
               "data-parallel communication with compute is not modelled; microbatch, schedule "
               "and recomputation not published (free)")


# The corpus, series by series in the order the split walks them; within a series by parameter
# count, then GPU count (assign_halves sorts them so anyway).
ROWS = [
    # N21-T1: Narayanan et al. 2021, Table 1 (REFERENCE.md gives three of its rows). Full
    # recomputation, Megatron-LM's tensor parallelism of the time (partial sums all-reduced;
    # sequence parallelism came in 2022) and plain data parallelism (the distributed optimizer
    # came later too). Microbatch and schedule are not in the table. 529.6B: 2520 GPUs = 315
    # nodes of 8.
    _t1("1.7B", N_1_7B, 1, 1, 32, 512, 137, gating=True),
    _t1("3.6B", N_3_6B, 2, 1, 64, 512, 138),
    _t1("7.5B", N_7_5B, 4, 1, 128, 512, 142),
    _t1("18.4B", N_18_4B, 8, 1, 256, 1024, 135, gating=True),
    _t1("39.1B", N_39_1B, 8, 2, 512, 1536, 138),
    _t1("76.1B", N_76_1B, 8, 4, 1024, 1792, 140),
    _t1("145.6B", N_145_6B, 8, 8, 1536, 2304, 148, gating=True),
    _t1("310.1B", N_310_1B, 8, 16, 1920, 2160, 155),
    _t1("529.6B", N_529_6B, 8, 35, 2520, 2520, 163),
    _t1("1T", N_1T, 8, 64, 3072, 3072, 163),
    # N21-T2: the same paper, Table 2, PTD parallelism rows (microbatch 1). (A picture of the
    # table: cli99/llm-analysis, figures/megatron-lm-2nd-table-2.png.)
    _t2_ptd(GPT3_175B, "174.6B", 8, 12, 384, 1536, 153),
    _t2_ptd(GPT3_175B, "174.6B", 8, 12, 768, 1536, 149),
    _t2_ptd(GPT3_175B, "174.6B", 8, 12, 1536, 1536, 141),
    _t2_ptd(N_529_6B, "529.6B", 8, 35, 560, 2240, 171),
    _t2_ptd(N_529_6B, "529.6B", 8, 35, 1120, 2240, 167),
    _t2_ptd(N_529_6B, "529.6B", 8, 35, 2240, 2240, 159),
    # N21-T2: ZeRO-3 without model parallelism. 529.6B at 640 GPUs: the paper's starred row
    # (it did not fit on 560 GPUs at microbatch 4, so 640 GPUs and batch 2560).
    _t2_zero3(GPT3_175B, "174.6B", 384, 1536, 4, 144),
    _t2_zero3(GPT3_175B, "174.6B", 768, 1536, 2, 88),
    _t2_zero3(GPT3_175B, "174.6B", 1536, 1536, 1, 44),
    _t2_zero3(N_529_6B, "529.6B", 640, 2560, 4, 138, note="; the table's starred row"),
    _t2_zero3(N_529_6B, "529.6B", 1120, 2240, 2, 98),
    _t2_zero3(N_529_6B, "529.6B", 2240, 2240, 1, 48),
    # K22: Korthikanti et al. 2022, Table 3 (t, p, GPUs, global batch, microbatch; no data
    # parallelism; interleaving with 3 chunks for 175B and 530B) and Table 5 (iteration times).
    # The same figures are in Calculon's validation (calculon-ai/calculon,
    # calculon/megatron/validation.py and validation/*.json).
    *_k22(K_22B, "22B", 8, 1, 8, 4, 4, None, 1.42, 1.10),
    *_k22(GPT3_175B, "175B", 8, 8, 64, 64, 1, "interleaved:3", 18.13, 13.75),
    *_k22(N_529_6B, "530B", 8, 35, 280, 280, 1, "interleaved:3", 49.05, 37.83),
    *_k22(N_1T, "1T", 8, 64, 512, 512, 1, "1f1b", 94.42, 71.49),
    # S22: Smith et al. 2022, MT-NLG 530B (105 layers, h 20480, 128 heads, sequence 2048, batch
    # 1920, 8-way tensor x 35-way pipeline, A100-80GB on Selene): 60.1, 50.2 and 44.4 s per
    # iteration on 280, 350 and 420 nodes (126, 121 and 113 TF/GPU), section 2.4 (as quoted in
    # cli99/llm-analysis, examples/megatron-turing-nlg/README.md).
    _s22(2240, 60.1, 126),
    _s22(2800, 50.2, 121),
    _s22(3360, 44.4, 113),
    # MLM: Megatron-LM README, H100 weak scaling (heads, hidden, layers, t, p, GPUs, batch,
    # per-GPU TFLOP/s; data-parallel size 48 throughout).
    _mlm_row("1.7B", _mlm(16, 2048, 24), 1, 1, 48, 192, 408.8),
    _mlm_row("7.1B", _mlm(32, 4096, 30), 2, 1, 96, 192, 465.9),
    _mlm_row("16B", _mlm(48, 6144, 32), 4, 1, 192, 192, 489.1),
    _mlm_row("32B", _mlm(56, 7168, 48), 8, 1, 384, 192, 459.6),
    _mlm_row("70B", _mlm(64, 8192, 84), 8, 2, 768, 384, 419.7),
    _mlm_row("119B", _mlm(80, 10240, 92), 8, 4, 1536, 768, 420.5),
    _mlm_row("177B", _mlm(96, 12288, 96), 8, 6, 2304, 1152, 432.8),
    _mlm_row("314B", _mlm(128, 16384, 96), 8, 8, 3072, 1536, 474.4),
    _mlm_row("462B", _mlm(144, 18432, 112), 8, 16, 6144, 3072, 459.9),
]

# Published runs found but left out of the corpus, with the reason.
SKIPPED = [
    ("MLM", "GPT-3 177B strong scaling, 96-4608 H100s, batch 1152",
     "t and p of each point are not published, and the throughput is only plotted (the text "
     "gives MFU 47 % at 96 GPUs and 42 % at 4608)"),
    ("K22", "530B on 2240 A100s (8-way data parallelism), MFU 54.2 % against 42.1 %",
     "global batch and microbatch of these runs not found with the figure (the paper was read "
     "through the secondary sources named in ROWS)"),
    ("N21", "Figures 11-18 (pipeline weak scaling, interleaved vs 1F1B, t x p sweeps of a "
     "162.2B GPT, microbatch sweeps)", "throughputs only plotted, not stated"),
]


def assign_halves(rows):
    """The split, fixed before any error is seen: series in corpus order, each sorted by parameter
    count then GPU count; REFERENCE.md rows to calibration, the others alternating, the first to
    held-out."""
    series = []
    for row in rows:
        if row.series not in series:
            series.append(row.series)
    previous = CALIBRATION
    for name in series:
        members = [r for r in rows if r.series == name]
        for row in sorted(members, key=lambda r: (r.shape.params, r.n)):
            if row.gating:
                row.half = CALIBRATION
            else:
                row.half = previous = HELD_OUT if previous == CALIBRATION else CALIBRATION


assign_halves(ROWS)


def run(cmd):
    """Runs cmd; returns (stdout, None) or (None, its exit status with cleave's error line and
    the note after it, or the command and its last stderr line)."""
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        err = result.stderr.strip().splitlines()
        first = next((i for i, line in enumerate(err) if "error:" in line), None)
        if first is not None:
            return None, f"exit {result.returncode}: " + " ".join(err[first:first + 2])
        return None, (f"exit {result.returncode}: {' '.join(cmd)}: "
                      f"{err[-1] if err else '(no stderr)'}")
    return result.stdout, None


def export_models(shapes, cleave, work):
    """Exports each shape once (meta device, in this process: torch is imported once) with
    examples/export.py and imports it into cleave IR, which `cleave plan` reads faster than the
    TorchScript file; returns {export name: path or None} and {export name: error}."""
    sys.path.insert(0, EXAMPLES)
    import torch  # noqa: E402
    import export  # noqa: E402
    import models  # noqa: E402

    def untied_gpt(**kwargs):
        model = models.GPT(**kwargs)
        model.head.weight = torch.nn.Parameter(torch.empty_like(model.tok_emb.weight))
        return model

    paths, errors = {}, {}
    for shape in shapes:
        if shape.export not in export.SPECS:
            cfg = dict(vocab_size=shape.vocab, block_size=shape.seq, n_layer=shape.layers,
                       n_head=shape.heads, d_model=shape.hidden, mask_in_forward=shape.fused)
            export.SPECS[shape.export] = export.Spec(
                models.GPT if shape.tied else untied_gpt,
                {None: (cfg, dict(batch=1, seq=shape.seq))}, export._ids, "block_size",
                always_meta=True)
        pt = os.path.join(work, shape.export + ".pt")
        print(f"exporting {shape.export} ...", file=sys.stderr, flush=True)
        try:
            with contextlib.redirect_stdout(sys.stderr):
                export.main([shape.export, "-o", pt])
        except SystemExit as e:
            errors[shape.export] = f"export failed: {e}"
            continue
        mlir = os.path.join(work, shape.export + ".mlir")
        _, err = run([cleave, "import", pt, "-o", mlir])
        if err:
            errors[shape.export] = "import: " + err
            continue
        paths[shape.export] = mlir
    return paths, errors


def plan_command(row, cleave, spec, model):
    """`cleave plan` of row's model on spec with its GPU count and batch, free (add row.pins())."""
    return [cleave, "plan", model, "--cluster", spec, "--devices", str(row.n),
            "--global-batch", str(row.batch), "--json"]


def evaluate(row, cleave, clusters, model):
    """Plans row's model twice; returns a dict of results or errors."""
    out = {"row": row, "error": None}
    base = plan_command(row, cleave, clusters[row.gpu], model)
    text, err = run(base + row.pins())
    if err:
        out["error"] = "published config: " + err
    else:
        pinned = json.loads(text)
        out["pinned"] = pinned["predicted"]["step_seconds"]
        out["pinned_label"] = plan_label(pinned)
    text, err = run(base)
    if err:
        out["error"] = (out["error"] + "; " if out["error"] else "") + "free search: " + err
    else:
        free = json.loads(text)
        out["free"] = free["predicted"]["step_seconds"]
        out["free_label"] = plan_label(free)
    return out


# What --calibrate may change in a GPU's spec: efficiencies, the figures a datasheet does not give
# (docs/cluster-spec.md), each a fraction of a datasheet peak. Peaks, memory sizes and latencies stay.
# A GPU with r calibration rows has at most the first r // 2 of them fitted (at least two rows per
# figure), hence the order: what most of a GPT's step time depends on first. A figure fewer than
# MIN_ROWS_PER_TERM calibration rows depend on is not fitted: it would fit those rows one by one.
CALIBRATED_TERMS = [
    ("device.efficiency.gemm.compute", "GEMM, fraction of peak FLOP/s"),
    ("device.efficiency.attention.compute", "attention, fraction of peak FLOP/s"),
    ("device.efficiency.elementwise.memory", "elementwise, fraction of memory bandwidth"),
    ("intra_node.efficiency", "NVLink, fraction of its bandwidth"),
    ("inter_node.efficiency", "InfiniBand, fraction of each NIC's bandwidth"),
]
# The coordinate search's moves (factors on the current value), sweeps over the terms, and the bounds
# of an efficiency.
CALIBRATION_STEPS = (0.6, 0.7, 0.8, 0.9, 0.95, 1.05, 1.1)
CALIBRATION_SWEEPS = 2
MIN_ROWS_PER_TERM = 4
EFFICIENCY_BOUNDS = (0.05, 1.0)


def spec_term(doc, key):
    for part in key.split("."):
        doc = doc[part]
    return doc


def set_spec_term(doc, key, value):
    *path, last = key.split(".")
    for part in path:
        doc = doc[part]
    doc[last] = value


def predict_pinned(row, cleave, spec, model):
    """The published configuration's predicted step seconds on spec, or None if it has no plan."""
    text, err = run(plan_command(row, cleave, spec, model) + row.pins())
    return None if err else json.loads(text)["predicted"]["step_seconds"]


def mean_abs_error(rows, seconds):
    """summarize's mean |error| (%) of rows predicted at seconds; inf if none planned."""
    s = summarize([{"row": r, "pinned": t} for r, t in zip(rows, seconds) if t is not None])
    return s.get("mean_abs_error_pct", float("inf"))


def calibrate(gpu, base_path, rows, cleave, models, out_dir, pool):
    """Fits CALIBRATED_TERMS of gpu's spec to its calibration rows (rows: those only) by coordinate
    search on their mean |error|; writes the fitted spec into out_dir. Returns its path and a
    record of the fit."""
    with open(base_path) as f:
        base = json.load(f)
    values = {key: spec_term(base, key) for key, _ in CALIBRATED_TERMS}
    path = os.path.join(out_dir, os.path.basename(base_path))
    cache = {}

    def predictions(candidate):
        key = tuple(round(candidate[k], 6) for k, _ in CALIBRATED_TERMS)
        if key not in cache:
            doc = copy.deepcopy(base)
            for k, v in candidate.items():
                set_spec_term(doc, k, v)
            trial = os.path.join(out_dir, f".trial-{len(cache)}-{os.path.basename(base_path)}")
            with open(trial, "w") as f:
                json.dump(doc, f)
            cache[key] = list(pool.map(
                lambda r: predict_pinned(r, cleave, trial, models[r.shape.export]), rows))
            os.remove(trial)
        return cache[key]

    def objective(candidate):
        return mean_abs_error(rows, predictions(candidate))

    # Which calibration rows each figure moves: those whose prediction changes when it halves.
    shipped = predictions(values)
    terms, not_fitted = [], {}
    for key, what in CALIBRATED_TERMS[:len(rows) // 2]:
        probe = predictions(dict(values, **{key: values[key] * 0.5}))
        moved = [r.rid for r, a, b in zip(rows, shipped, probe) if a and b and abs(b / a - 1) > 1e-3]
        if len(moved) >= MIN_ROWS_PER_TERM:
            terms.append((key, what))
        else:
            not_fitted[key] = {"what": what, "rows": moved,
                               "why": f"{len(moved)} calibration row(s) depend on it, fewer than "
                                      f"{MIN_ROWS_PER_TERM}"}
            print(f"{gpu}: {key} not fitted: only {', '.join(moved) or 'no row'} depend on it",
                  file=sys.stderr, flush=True)

    start = best = objective(values)
    print(f"calibrating {gpu}'s {len(terms)} terms on {len(rows)} rows: mean |error| {start:.2f} %",
          file=sys.stderr, flush=True)
    for _ in range(CALIBRATION_SWEEPS):
        for key, _ in terms:
            for factor in CALIBRATION_STEPS:
                lo, hi = EFFICIENCY_BOUNDS
                candidate = dict(values, **{key: min(hi, max(lo, values[key] * factor))})
                # A move must gain a hundredth of a point: ties keep the shipped figure.
                score = objective(candidate)
                if score < best - 0.01:
                    best, values = score, candidate
                    print(f"  {key} = {values[key]:.4g}: {best:.2f} %", file=sys.stderr, flush=True)
    fitted = copy.deepcopy(base)
    for k, v in values.items():
        set_spec_term(fitted, k, round(v, 4))
    changes = ", ".join(f"{k} {spec_term(base, k):g} -> {round(v, 4):g}" for k, v in values.items()
                        if round(v, 4) != spec_term(base, k))
    fitted["source"] = (base["source"] + f" Calibrated {datetime.date.today().isoformat()} by "
                        f"bench/planner_validation.py --calibrate on the calibration half's "
                        f"{len(rows)} {gpu} rows (mean |error| {start:.1f} % -> {best:.1f} %): "
                        + (changes or "no change"))
    fitted.pop("prediction_error", None)  # set from the held-out half once it is reported
    with open(path, "w") as f:
        json.dump(fitted, f, indent=2)
        f.write("\n")
    return path, {
        "gpu": gpu, "spec": path, "shipped_spec": base_path,
        "rows": [r.rid for r in rows], "evaluations": len(cache),
        "mean_abs_error_pct_before": start, "mean_abs_error_pct_after": best,
        "terms": {k: {"what": what, "shipped": spec_term(base, k),
                      "fitted": round(values[k], 4)} for k, what in terms},
        "not_fitted": not_fitted,
    }


def record_prediction_error(fit, held_out):
    """Writes the held-out half's error on the fitted spec into it (what `cleave plan --explain`
    quotes); held_out: [(row, predicted seconds)]."""
    errs = [(t - r.published_seconds()) / r.published_seconds() for r, t in held_out
            if t is not None]
    if not errs:
        return
    with open(fit["spec"]) as f:
        doc = json.load(f)
    doc["prediction_error"] = {
        "mean_abs_error": round(sum(abs(e) for e in errs) / len(errs), 4),
        "mean_signed_error": round(sum(errs) / len(errs), 4), "runs": len(errs),
        "source": f"bench/planner_validation.py --calibrate, the held-out half's {fit['gpu']} "
                  f"rows on this fitted spec, {datetime.date.today().isoformat()}"}
    with open(fit["spec"], "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")


def error_pct(r):
    pub = r["row"].published_seconds()
    return 100 * (r["pinned"] - pub) / pub if "pinned" in r else None


def summarize(results):
    """Rows, planned rows, mean and max |error| and mean signed error (%) of results."""
    errs = [error_pct(r) for r in results if "pinned" in r]
    out = {"rows": len(results), "planned": len(errs)}
    if errs:
        out.update(mean_abs_error_pct=sum(abs(e) for e in errs) / len(errs),
                   max_abs_error_pct=max(abs(e) for e in errs),
                   mean_signed_error_pct=sum(errs) / len(errs),
                   over_predicted=sum(e > 0 for e in errs))
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cleave", default=os.path.join(ROOT, "build", "bin", "cleave"),
                   help="the cleave binary (default: %(default)s)")
    p.add_argument("--a100", default=os.path.join(CLUSTERS, GPUS["A100-80GB"]),
                   help="cluster spec for the A100 rows (default: %(default)s)")
    p.add_argument("--h100", default=os.path.join(CLUSTERS, GPUS["H100-80GB"]),
                   help="cluster spec for the H100 rows (default: %(default)s)")
    p.add_argument("--rows", help="comma-separated subset of: " + ",".join(r.rid for r in ROWS))
    p.add_argument("--tolerance", type=float, default=15.0, help="allowed |error| in %% (default 15)")
    p.add_argument("--json", metavar="FILE", help="also write the rows and the halves' summaries")
    p.add_argument("--calibrate", metavar="DIR",
                   help="fit each GPU's spec efficiencies to the calibration half, write the "
                        "fitted specs into DIR and report every row on them")
    args = p.parse_args()
    cleave = os.path.abspath(args.cleave)
    if not os.access(cleave, os.X_OK):
        sys.exit(f"no cleave binary at {cleave}: build it (bash scripts/build.sh) or pass --cleave")
    clusters = {"A100-80GB": args.a100, "H100-80GB": args.h100}
    shipped = dict(clusters)
    if args.calibrate:
        if os.path.exists(args.calibrate) and not os.path.isdir(args.calibrate):
            sys.exit(f"--calibrate {args.calibrate}: not a directory")
        for gpu, path in shipped.items():
            if not os.path.isfile(path):
                sys.exit(f"--calibrate: no {gpu} spec at {path}")
            target = os.path.join(args.calibrate, os.path.basename(path))
            if os.path.exists(target) and os.path.samefile(target, path):
                sys.exit(f"--calibrate {args.calibrate}: the fitted {gpu} spec would overwrite "
                         f"the one it starts from ({path}); name another directory")
    rows = ROWS
    if args.rows:
        wanted = args.rows.split(",")
        rows = [r for r in ROWS if r.rid in wanted]
        unknown = set(wanted) - {r.rid for r in rows}
        if unknown:
            sys.exit(f"unknown rows: {', '.join(sorted(unknown))}")

    print(f"machine: {machine()}")
    print(f"cleave: {cleave}")
    print(f"clusters: A100-80GB {args.a100}; H100-80GB {args.h100}")
    print("sources: " + "; ".join(f"{k} = {v}" for k, v in SOURCES.items()))
    print("split: series in corpus order, each by parameter count then GPUs; REFERENCE.md rows"
          " (*) to calibration, the others alternating from held-out")
    print()

    results = []
    fits, shipped_seconds = {}, {}
    with tempfile.TemporaryDirectory(prefix="planner-validation-") as work:
        shapes = list({r.shape.export: r.shape for r in rows}.values())
        models, export_errors = export_models(shapes, cleave, work)
        if args.calibrate:
            os.makedirs(args.calibrate, exist_ok=True)
            planned = [r for r in rows if r.shape.export not in export_errors]
            with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
                for gpu in GPUS:
                    members = [r for r in planned if r.gpu == gpu and r.half == CALIBRATION]
                    if len(members) < 2:
                        print(f"{gpu}: {len(members)} calibration row(s), fewer than two per "
                              "fitted figure: its shipped spec is used", file=sys.stderr)
                    else:
                        clusters[gpu], fits[gpu] = calibrate(gpu, shipped[gpu], members, cleave,
                                                             models, args.calibrate, pool)
                # The shipped specs' predictions, for the before/after summary.
                shipped_seconds = dict(zip(
                    [r.rid for r in planned],
                    pool.map(lambda r: predict_pinned(r, cleave, shipped[r.gpu],
                                                      models[r.shape.export]), planned)))
        for i, row in enumerate(rows):
            print(f"planning {row.rid} ({i + 1}/{len(rows)}) ...", file=sys.stderr, flush=True)
            if row.shape.export in export_errors:
                results.append({"row": row, "error": export_errors[row.shape.export]})
            else:
                results.append(evaluate(row, cleave, clusters, models[row.shape.export]))

    print("| # | model | source | GPU | published config | half | published | cleave | error |")
    print("|---|---|---|---|---|---|---|---|---|")
    for i, r in enumerate(results):
        row = r["row"]
        err = error_pct(r)
        pinned = f"{r['pinned']:.2f} s" if "pinned" in r else "error"
        error = f"{err:+.1f} %" if err is not None else "-"
        name = row.model + (" *" if row.gating else "")
        print(f"| {i + 1} | {name} | {SOURCES[row.source]} | {row.gpu} | {row.published_config()}"
              f" | {row.half} | {row.published_seconds():.2f} s | {pinned} | {error} |")
    print()

    summaries = {half: summarize([r for r in results if r["row"].half == half])
                 for half in (CALIBRATION, HELD_OUT)}
    summaries["all"] = summarize(results)
    if fits:
        print("calibration (--calibrate): each GPU's terms fitted to its calibration rows only")
        print("| GPU | term | shipped | fitted |")
        print("|---|---|---|---|")
        for gpu, fit in fits.items():
            for key, term in fit["terms"].items():
                print(f"| {gpu} | {key} ({term['what']}) | {term['shipped']:g} |"
                      f" {term['fitted']:g} |")
            for key, term in fit["not_fitted"].items():
                print(f"| {gpu} | {key} ({term['what']}) | not fitted: {term['why']}"
                      f" ({', '.join(term['rows']) or 'none'}) | - |")
        for gpu, fit in fits.items():
            print(f"{gpu}: {len(fit['rows'])} calibration rows, mean |error| "
                  f"{fit['mean_abs_error_pct_before']:.1f} % -> {fit['mean_abs_error_pct_after']:.1f}"
                  f" % in {fit['evaluations']} evaluations; fitted spec: {fit['spec']}")
        print()
        print("| half | specs | planned | mean abs error | max abs error | mean signed error |")
        print("|---|---|---|---|---|---|")
        for half in (CALIBRATION, HELD_OUT):
            members = [r for r in results if r["row"].half == half]
            before = summarize([dict(r, pinned=shipped_seconds[r["row"].rid])
                                for r in members if shipped_seconds.get(r["row"].rid)])
            for label, sm in (("shipped", before), ("fitted", summarize(members))):
                if sm["planned"]:
                    print(f"| {half} | {label} | {sm['planned']} | {sm['mean_abs_error_pct']:.1f} % |"
                          f" {sm['max_abs_error_pct']:.1f} % | {sm['mean_signed_error_pct']:+.1f} % |")
        print()
        for gpu, fit in fits.items():
            record_prediction_error(fit, [(r["row"], r.get("pinned")) for r in results
                                          if r["row"].gpu == gpu and r["row"].half == HELD_OUT])

    print("| half | rows | planned | mean abs error | max abs error | mean signed error |"
          " over-predicted |")
    print("|---|---|---|---|---|---|---|")
    for half, s in summaries.items():
        if s["planned"]:
            print(f"| {half} | {s['rows']} | {s['planned']} | {s['mean_abs_error_pct']:.1f} % |"
                  f" {s['max_abs_error_pct']:.1f} % | {s['mean_signed_error_pct']:+.1f} % |"
                  f" {s['over_predicted']} of {s['planned']} |")
        else:
            print(f"| {half} | {s['rows']} | 0 | - | - | - | - |")
    print()
    # The same by series (both halves together), to show where the error comes from.
    by_series = {}
    for r in results:
        by_series.setdefault(r["row"].series, []).append(r)
    print("| series (both halves) | rows | planned | mean abs error | mean signed error |"
          " over-predicted |")
    print("|---|---|---|---|---|---|")
    for name, members in by_series.items():
        s = summarize(members)
        if s["planned"]:
            print(f"| {name} | {s['rows']} | {s['planned']} | {s['mean_abs_error_pct']:.1f} % |"
                  f" {s['mean_signed_error_pct']:+.1f} % |"
                  f" {s['over_predicted']} of {s['planned']} |")
    print()

    print("| # | cleave's pins | cleave's plan for them | planner's choice | its prediction |"
          " speedup |")
    print("|---|---|---|---|---|---|")
    for i, r in enumerate(results):
        row = r["row"]
        pins = " ".join(row.pins())
        free = f"{r['free']:.2f} s" if "free" in r else "error"
        speedup = f"{r['pinned'] / r['free']:.2f}x" if "pinned" in r and "free" in r else "-"
        print(f"| {i + 1} | `{pins}` | {r.get('pinned_label', 'error')} |"
              f" {r.get('free_label', 'error')} | {free} | {speedup} |")
    print()
    print("notes:")
    for i, r in enumerate(results):
        if r["row"].note:
            print(f"  {i + 1} ({r['row'].rid}): {r['row'].note}")
    print("skipped (published, but not complete enough to plan):")
    for source, what, why in SKIPPED:
        print(f"  {source}: {what}: {why}")
    print()

    print(f"checks: (a) |error| <= {args.tolerance:g} %, (b) planner's choice <= published-config"
          " prediction; only REFERENCE.md rows (*) gate")
    gating_failed = False
    any_failed = False
    for r in results:
        row = r["row"]
        if r["error"]:
            ok_a = ok_b = False
        else:
            ok_a = abs(error_pct(r)) <= args.tolerance
            # A relative slack of 1e-9 for the planner returning the same plan as (a).
            ok_b = r["free"] <= r["pinned"] * (1 + 1e-9)
        r["checks"] = {"a": ok_a, "b": ok_b}
        ok = ok_a and ok_b
        any_failed |= not ok
        gating_failed |= row.gating and not ok
        tag = " (REFERENCE.md)" if row.gating else ""
        print(f"  {row.rid:>22}: (a) {'PASS' if ok_a else 'FAIL'}  (b) {'PASS' if ok_b else 'FAIL'}"
              f"  -> {'PASS' if ok else 'FAIL'}{tag}")
        if r["error"]:
            print(f"  {'':>22}  {r['error']}")
    print(f"overall (REFERENCE.md rows): {'FAIL' if gating_failed else 'PASS'}"
          f"; all rows: {'FAIL' if any_failed else 'PASS'}")

    if args.json:
        doc = {
            "format": "cleave-planner-validation", "version": 1,
            "clusters": clusters, "sources": SOURCES, "tolerance_pct": args.tolerance,
            "split_rule": "series in corpus order, each sorted by parameter count then GPU count;"
                          " REFERENCE.md rows to calibration; the others alternate, the first to"
                          " held-out",
            "rows": [{
                "id": r["row"].rid, "model": r["row"].model, "source": r["row"].source,
                "source_text": SOURCES[r["row"].source], "series": r["row"].series,
                "gpu": r["row"].gpu, "half": r["row"].half, "gating": r["row"].gating,
                "heads": r["row"].shape.heads, "hidden": r["row"].shape.hidden,
                "layers": r["row"].shape.layers, "seq": r["row"].shape.seq,
                "vocab": r["row"].shape.vocab, "tied_embeddings": r["row"].shape.tied,
                "fused_attention": r["row"].shape.fused,
                "params": r["row"].shape.params,
                "tp": r["row"].t, "pp": r["row"].p, "dp": r["row"].d, "gpus": r["row"].n,
                "global_batch": r["row"].batch, "microbatch": r["row"].mb,
                "schedule": r["row"].schedule, "recompute": r["row"].recompute,
                "sequence_parallel": r["row"].sp, "zero": r["row"].zero,
                "published_tflops_per_gpu": r["row"].tflops, "flop_formula": r["row"].flops,
                "published_config": r["row"].published_config(),
                "published_seconds": r["row"].published_seconds(),
                "pins": r["row"].pins(), "note": r["row"].note,
                "predicted_seconds": r.get("pinned"), "error_pct": error_pct(r),
                "shipped_spec_seconds": shipped_seconds.get(r["row"].rid),
                "pinned_plan": r.get("pinned_label"),
                "free_seconds": r.get("free"), "free_plan": r.get("free_label"),
                "checks": r["checks"], "error": r["error"],
            } for r in results],
            "halves": summaries,
            "calibration": fits or None,
            "series": {name: summarize(members) for name, members in by_series.items()},
            "skipped": [{"source": s, "what": w, "why": y} for s, w, y in SKIPPED],
            "exit_status": 1 if gating_failed else 0,
        }
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=1)
            f.write("\n")
    return 1 if gating_failed else 0


if __name__ == "__main__":
    sys.exit(main())
