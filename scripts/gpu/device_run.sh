#!/bin/bash
# The issue-20 checks on the GPU machine, in one run that fits one device command (< 600 s):
#   1. bench/cuda_gpt2.py --plan PLAN_DIR --runtime RUNTIME (the GPT-2 124M benchmark on a plan
#      prepared here with `bench/cuda_gpt2.py --prepare PLAN_DIR`),
#   2. scripts/gpu/export_current_torch.py OUT (exports by that machine's PyTorch).
# Everything lands in OUT: device-run.log, cuda_gpt2.json, export-report.{json,md} and at most
# three exports-K.tar.xz (7 files at most). Back here: scripts/gpu/import_current_torch.sh on a
# writable copy of OUT.
# usage: scripts/gpu/device_run.sh PLAN_DIR RUNTIME [OUT]   (OUT defaults to $OUT)
# For a dry run without a GPU: BACKEND=cpu EXPORT_ARGS=--standin PYTHON=/usr/bin/python3
set -u
plan=${1:?usage: device_run.sh PLAN_DIR RUNTIME [OUT]}
runtime=${2:?usage: device_run.sh PLAN_DIR RUNTIME [OUT]}
out=${3:-${OUT:?no OUT folder given}}
py=${PYTHON:-python3}
mkdir -p "$out"
plan=$(realpath "$plan"); out=$(realpath "$out")
case $runtime in */*) runtime=$(realpath "$runtime") ;; esac
cd "$(dirname "$0")/../.."
{
  echo "== $(date -u) on $(hostname)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 | head -4
  "$py" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda, "gpu", torch.cuda.is_available())' 2>&1
  echo "== bench/cuda_gpt2.py --plan $plan --runtime $runtime"
  start=$SECONDS
  timeout 200 "$py" bench/cuda_gpt2.py --plan "$plan" --runtime "$runtime" \
    --backend "${BACKEND:-cuda}" --json "$out/cuda_gpt2.json"
  echo "== exit $? after $((SECONDS - start)) s"
  echo "== scripts/gpu/export_current_torch.py ${EXPORT_ARGS:-}"
  start=$SECONDS
  # shellcheck disable=SC2086
  timeout 360 "$py" scripts/gpu/export_current_torch.py "$out" --jobs 4 --timeout 210 ${EXPORT_ARGS:-}
  echo "== exit $? after $((SECONDS - start)) s"
  ls -la "$out"
} > "$out/device-run.log" 2>&1
tail -n 40 "$out/device-run.log"
