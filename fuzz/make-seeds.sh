#!/usr/bin/env bash
# fuzz/make-seeds.sh CLEAVE_BIN_DIR SEEDS_DIR
# Makes the real plans, data and checkpoints the fuzz harnesses start from
# (docs/fuzzing.md), with the normal build's `cleave` (CLEAVE_BIN_DIR holds
# it): a tiny MLP exported with PyTorch, compiled for one device and for
# pp2 x tp2 (inference), and for training on one device and on pp2 and
# dp2 + ZeRO, plus its data and a checkpoint of each training mesh.
# SEEDS_DIR is replaced. About 15 s.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bin="$(cd "$1" && pwd)"
out="$2"
cleave="$bin/cleave"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
python=/usr/bin/python3
cluster="$root/examples/clusters/cpu-2core.json"

rm -rf "$out.tmp"
mkdir -p "$out.tmp/data" "$out.tmp/ckpt" "$out.tmp/io" "$out.tmp/work"
cd "$out.tmp"
$python "$root/examples/export.py" mlp --config tiny -o work/m.pt --io io >/dev/null
$python "$root/examples/export.py" mlp --config tiny --dropout 0 --train -o work/t.pt \
  --data data/d8.safetensors --samples 8 --labels cross_entropy >/dev/null
$python "$root/examples/export.py" mlp --config tiny --dropout 0 --train -o work/t2.pt \
  --data data/d3.safetensors --samples 3 --labels cross_entropy >/dev/null
# The checkpoint harness loads every checkpoint into train.plan: one model
# (t.pt), one global batch (2, the default), so the data position agrees.
"$cleave" compile work/m.pt -o infer.plan >/dev/null
"$cleave" compile work/m.pt --cluster "$cluster" --devices 4 --global-batch 4 --pp 2 --tp 2 \
  -o pp2tp2.plan >/dev/null 2>&1
"$cleave" compile work/t.pt --mode train --loss cross_entropy --optimizer adamw -o train.plan >/dev/null
"$cleave" compile work/t.pt --cluster "$cluster" --devices 2 --global-batch 2 --pp 2 \
  --microbatch 2 --mode train --loss cross_entropy -o pp2-train.plan >/dev/null 2>&1
"$cleave" compile work/t.pt --cluster "$cluster" --devices 2 --global-batch 2 --dp 2 \
  --zero optimizer --mode train --loss cross_entropy -o work/zero2.plan >/dev/null 2>&1
"$cleave" train train.plan --data data/d8.safetensors --steps 2 --checkpoint ckpt/v1 >/dev/null
"$cleave" train --local 2 pp2-train.plan --data data/d8.safetensors --steps 1 \
  --checkpoint ckpt/pp2 >/dev/null
"$cleave" train --local 2 work/zero2.plan --data data/d8.safetensors --steps 1 \
  --checkpoint ckpt/zero2 >/dev/null
rm -rf work
cd - >/dev/null
rm -rf "$out"
mv "$out.tmp" "$out"
