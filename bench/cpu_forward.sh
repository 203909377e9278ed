#!/usr/bin/env bash
# Benchmark: single-device CPU forward of a compiled plan against LibTorch
# eager on the same model, inputs and thread count (issue targets: at least
# 1.0x LibTorch's speed, no more peak memory). `cleave bench` runs each engine
# in a fresh process of the same binary, one after the other, and prints both
# and their ratios; it also checks that the two engines' outputs agree.
#
# usage: bench/cpu_forward.sh [--threads N] [--iterations N] [--warmup N]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cleave="$root/build/bin/cleave"
[ -x "$cleave" ] || { echo "build cleave first: bash scripts/build.sh" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
for model in gpt-bench resnet50; do
  echo
  echo "== $model"
  /usr/bin/python3 "$root/examples/export.py" "$model" -o "$work/$model.pt" --io "$work/$model"
  "$cleave" compile "$work/$model.pt" -o "$work/$model.plan"
  "$cleave" bench "$work/$model.pt" --plan "$work/$model.plan" \
    --inputs "$work/$model/inputs.safetensors" "$@"
done
