#!/bin/bash
# Prepares, on a build machine, everything scripts/gpu-check.sh runs on a GPU
# machine that has neither the compiler nor its libraries (no MLIR, LibTorch,
# Open MPI or oneDNN): the runtime bundle (with the CUDA kernel and
# communicator test binaries in it), the example models' plans with their
# inputs and PyTorch's outputs, multi-rank plans, training plans with their
# data and PyTorch's losses, and the GPT-2 124M benchmark plans (forward and
# training step) without their weights (the GPU machine rebuilds them).
#
# usage: scripts/gpu-prepare.sh [BUILD_DIR [OUT_DIR]]   (defaults: build, build-gpu)
# OUT_DIR is git-ignored (build-*); copy it along with the repository (it
# holds bundle.tar.xz, about 15 MiB, models.tar.xz and the other plans, a few
# MiB).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(realpath "${1:-$root/build}")
out=${2:-$root/build-gpu}
py=/usr/bin/python3
cleave=$build/bin/cleave
for f in "$cleave" "$build/bin/cleave-runtime" "$build/lib/libcleave_cuda.so" \
  "$build/test/unit/CpuKernelsTest" "$build/test/unit/CommunicatorTest"; do
  [ -e "$f" ] || { echo "gpu-prepare: error: $f is missing: build cleave first (scripts/build.sh, and the unit tests)" >&2; exit 1; }
done
rm -rf "$out"
mkdir -p "$out"
out=$(realpath "$out")
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The bundle, with the two test binaries beside cleave-runtime.
bash "$root/scripts/bundle-runtime.sh" "$build" "$work/cleave-bundle" >/dev/null
for t in CpuKernelsTest CommunicatorTest; do
  cp "$build/test/unit/$t" "$work/cleave-bundle/bin/"
  strip --strip-unneeded "$work/cleave-bundle/bin/$t"
  patchelf --set-rpath '$ORIGIN/../lib' "$work/cleave-bundle/bin/$t"
done
tar -C "$work" -cf - cleave-bundle | xz -T2 -6 > "$out/bundle.tar.xz"

# Single-device plans of every example model: f32 and bf16, with PyTorch's
# outputs in f32 and in bf16 (export.py --bf16-reference).
for m in gpt bert llama vit resnet18; do
  d=$out/models/$m
  mkdir -p "$d"
  # resnet18's 11.7M weights would not travel (64 MiB for everything): tiled
  # from a small pool, its plans compress to almost nothing.
  tiled=; [ $m = resnet18 ] && tiled=--tiled-weights
  "$py" "$root/examples/export.py" $m --config tiny --batch 4 -o "$work/$m.pt" --io "$d" --bf16-reference $tiled >/dev/null
  "$cleave" compile "$work/$m.pt" -o "$d/f32" >/dev/null
  "$cleave" compile "$work/$m.pt" --dtype bf16 -o "$d/bf16" >/dev/null
  rm -rf "$d/f32/ir" "$d/bf16/ir"
done

# Multi-device plans of GPT: each must give the single device's outputs.
d=$out/multi
mkdir -p "$d"
"$py" "$root/examples/export.py" gpt --config tiny --batch 4 -o "$work/gpt4.pt" --io "$d" >/dev/null
cluster=$root/examples/clusters/h200-node.json
"$cleave" compile "$work/gpt4.pt" --cluster "$cluster" --devices 2 --global-batch 4 --pp 2 -o "$d/pp2" 2>/dev/null >/dev/null
"$cleave" compile "$work/gpt4.pt" --cluster "$cluster" --devices 2 --global-batch 4 --tp 2 -o "$d/tp2" 2>/dev/null >/dev/null
"$cleave" compile "$work/gpt4.pt" --cluster "$cluster" --devices 2 --global-batch 4 --dp 2 -o "$d/dp2" 2>/dev/null >/dev/null
"$cleave" compile "$work/gpt4.pt" --cluster "$cluster" --devices 4 --global-batch 4 --pp 2 --tp 2 -o "$d/pp2tp2" 2>/dev/null >/dev/null
rm -rf "$d"/*/ir

# Training plans with their data and PyTorch's losses (and weights) on this
# machine's CPU; the GPU machine trains them (scripts/gpu/training_check.py).
"$py" "$root/scripts/gpu/training_check.py" prepare "$out/models/training" --cleave "$cleave" --python "$py"

tar -C "$out" -cf - models | xz -T2 -6 > "$out/models.tar.xz"
rm -rf "$out/models"

# The GPT-2 124M benchmark plan, weights left out (bench/cuda_gpt2.py --prepare;
# a minute: SKIP_BENCH_PLAN=1 leaves it out, for a rehearsal without a GPU).
if [ -z "${SKIP_BENCH_PLAN:-}" ]; then
  "$py" "$root/bench/cuda_gpt2.py" --prepare "$out/gpt2-plan" --cleave "$cleave" >/dev/null
  # Its training step (bench/cuda_train_gpt2.py; 2-3 minutes and 9 GiB to
  # export): 50 MB of causal masks in the state_dict's extra file, which xz
  # makes almost nothing.
  "$py" "$root/bench/cuda_train_gpt2.py" --prepare "$work/train-gpt2-plan" --cleave "$cleave" >/dev/null
  tar -C "$work" -cf - train-gpt2-plan | xz -T2 -6 > "$out/train-gpt2-plan.tar.xz"
fi

du -sh "$out" | sed 's/^/gpu-prepare: wrote /'
