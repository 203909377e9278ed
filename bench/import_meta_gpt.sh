#!/usr/bin/env bash
# Benchmark: importing meta-device GPTs of REFERENCE.md's sizes (target for
# 145.6B: under 5 s and under 1 GB). Beside each import, the same file is
# loaded by LibTorch alone (torch.jit.load in Python), the step the importer
# cannot avoid, as a baseline measured in the same run.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cleave="$root/build/bin/cleave"
[ -x "$cleave" ] || { echo "build cleave first: bash scripts/build.sh" >&2; exit 1; }
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
export OMP_NUM_THREADS=1
printf '%-12s %16s %12s %14s %20s %10s\n' model parameters "import (s)" "peak (MiB)" "torch.jit.load (s)" ratio
for size in 1.7b 18.4b 145.6b; do
  /usr/bin/python3 "$root/examples/export.py" "gpt-$size" -o "$work/gpt-$size.pt" > "$work/export.txt"
  params=$(grep -o '[0-9,]* parameters' "$work/export.txt" | cut -d' ' -f1)
  stats=$("$cleave" import "$work/gpt-$size.pt" --summary --timing 2>&1 >/dev/null | grep 'import took')
  seconds=$(echo "$stats" | sed -E 's/.*took ([0-9.]+) s.*/\1/')
  peak=$(echo "$stats" | sed -E 's/.*memory ([0-9.]+) MiB.*/\1/')
  load=$(/usr/bin/python3 -c "
import time, torch
t = time.perf_counter(); torch.jit.load('$work/gpt-$size.pt'); print(f'{time.perf_counter() - t:.2f}')")
  ratio=$(awk -v a="$seconds" -v b="$load" 'BEGIN { printf "%.2fx", a / b }')
  printf '%-12s %16s %12s %14s %20s %10s\n' "gpt-$size" "$params" "$seconds" "$peak" "$load" "$ratio"
done
echo "ratio = cleave import time / torch.jit.load time of the same file"
