#!/bin/bash
# The GPU machine's checks, in one command (issue 20): from the runtime bundle
# and the plans and references scripts/gpu-prepare.sh made on a build
# machine, on a machine with an NVIDIA GPU, its driver, CUDA 13 (cuBLASLt,
# cuDNN 9, NCCL 2) and Python with PyTorch; no compiler, MLIR, LibTorch or
# Open MPI needed.
#
#   1. conformance: every CUDA kernel test (CpuKernelsTest */cuda);
#   2. communicators: MPI staged through GPU memory on 2 and 4 ranks sharing
#      the GPU; NCCL on 2 ranks where 2 GPUs exist (NCCL refuses two ranks on
#      one GPU: on a one-GPU machine this entry says so and is not counted);
#   3. end to end: every example model on --backend cuda against PyTorch, f32
#      (TF32 off, 1e-4 of max(1, max|reference|)) and bf16 (2u(L+1) of
#      max|reference|, u = 2^-8, L blocks: docs/measurements.md);
#   4. multi-rank plans (pp2, tp2, dp2, pp2 x tp2) on the CUDA backend with
#      --gpu-comm mpi, against the one-device outputs;
#   5. training: scripts/gpu/training_check.py trains GPT, Llama, an MLP and
#      ResNet-18 (f32, AdamW and SGD) and GPT in bf16 mixed precision with
#      cleave-runtime train --backend cuda, against PyTorch 1.13 on the
#      build machine's CPU and the machine's PyTorch on the same GPU;
#   6. bench/cuda_gpt2.py: GPT-2 124M forward in bf16 against PyTorch eager
#      and torch.compile on the same GPU, and
#      bench/cuda_train_gpt2.py: its training step (bf16, AdamW) the same way;
#   7. scripts/gpu/export_current_torch.py: the machine's PyTorch exports
#      resnet50, vit_b_16 and GPT-2 for import back on the build machine.
#
# usage: scripts/gpu-check.sh OUTDIR [PREPARED_DIR]   (default: build-gpu)
# Writes OUTDIR/summary.md (a table; also printed), OUTDIR/summary.json,
# OUTDIR/logs.tar.xz (every step's log, the benchmark's cuda_gpt2.json) and
# the export files (export-report.{json,md}, exports-K.tar.xz). Exit status 0 when every counted check passed.
# CHECKS (default all) picks groups of them: conformance comm models multi
# training bench-forward bench-training exports.
# CHECK_BUDGET_S (default 540) bounds the whole run: later steps get what is
# left. PYTHON (default python3) must have PyTorch. BACKEND=cpu rehearses the
# run on a machine without a GPU: the models and multi-rank plans run on the
# CPU backend, the CUDA tests report skipped, the benchmark and the exports
# (which need a GPU and torchvision) are not run.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: scripts/gpu-check.sh OUTDIR [PREPARED_DIR]}
prep=${2:-$root/build-gpu}
py=${PYTHON:-python3}
backend=${BACKEND:-cuda}
budget=${CHECK_BUDGET_S:-540}
mkdir -p "$out" || exit 1
out=$(realpath "$out")
prep=$(realpath "$prep")
[ -f "$prep/bundle.tar.xz" ] || { echo "gpu-check: error: $prep/bundle.tar.xz is missing: run scripts/gpu-prepare.sh on the build machine" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
logs=$work/logs
mkdir -p "$logs"
tar -C "$work" -xJf "$prep/bundle.tar.xz" || { echo "gpu-check: error: cannot unpack $prep/bundle.tar.xz" >&2; exit 1; }
tar -C "$work" -xJf "$prep/models.tar.xz" || { echo "gpu-check: error: cannot unpack $prep/models.tar.xz" >&2; exit 1; }
bundle=$work/cleave-bundle
runtime=$bundle/bin/cleave-runtime
export PATH=$bundle/bin:$PATH GTEST_COLOR=no
# Open MPI as root in a container, ranks on this machine only.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
. "$root/scripts/gpu/library-path.sh"
compare="$py $root/test/e2e/compare_outputs.py"
rows=()
failed=0
start_all=$SECONDS

left() { echo $((budget - (SECONDS - start_all))); }
pack_logs() { tar -C "$work" -cf - logs | xz -T0 -3 > "$out/logs.tar.xz.tmp" && mv "$out/logs.tar.xz.tmp" "$out/logs.tar.xz"; }
# record NAME STATUS DETAIL SECONDS: STATUS pass, FAIL or n/a (not counted).
record() {
  local detail=${3//|/\/}
  rows+=("$1|$2|$detail|$4")
  [ "$2" = FAIL ] && failed=$((failed + 1))
  printf '%-28s %-5s %4ss  %s\n' "$1" "$2" "$4" "$detail"
  pack_logs
}
# step NAME LIMIT_S CMD...: runs CMD with its output in logs/NAME.log.
step() {
  local name=$1 limit=$2
  shift 2
  local l
  l=$(left)
  [ "$limit" -gt "$l" ] && limit=$l
  if [ "$limit" -le 5 ]; then
    echo "out of time: not run" > "$logs/$name.log"
    return 124
  fi
  local t0=$SECONDS
  timeout "$limit" "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  echo "== exit $rc after $((SECONDS - t0)) s" >> "$logs/$name.log"
  return $rc
}
status_of() { [ "$1" -eq 0 ] && echo pass || echo FAIL; }
# CHECKS (default: all) names the groups to run: conformance comm models
# multi training bench-forward bench-training exports.
checks=" ${CHECKS:-conformance comm models multi training bench-forward bench-training exports} "
wants() { [[ "$checks" == *" $1 "* ]]; }

{
  echo "date: $(date -u)"
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  "$py" -c 'import sys, torch; print("python", sys.version.split()[0], "torch", torch.__version__, "cuda", torch.version.cuda)'
  grep PRETTY_NAME /etc/os-release
  ldd "$bundle/lib/libcleave_cuda.so"
} > "$logs/machine.log" 2>&1
gpus=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | wc -l)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)

# 1. The CUDA kernel conformance suite.
if wants conformance; then
t0=$SECONDS
step conformance 180 "$bundle/bin/CpuKernelsTest" --gtest_filter='*/cuda' --gtest_output=json:"$logs/conformance.json"
rc=$?
detail=$("$py" - "$logs/conformance.json" <<'PY' 2>/dev/null || echo "no result file"
import json, sys
r = json.load(open(sys.argv[1]))
tests = [t for s in r["testsuites"] for t in s["testsuite"]]
skipped = [t["name"] for t in tests if t.get("result") == "SKIPPED"]
failed = [t["name"] for t in tests if "failures" in t]
print(f"{len(tests)} tests: {len(tests) - len(skipped) - len(failed)} passed, {len(failed)} failed, "
      f"{len(skipped)} skipped" + (f"; failed: {', '.join(failed)}" if failed else ""))
PY
)
record "kernel conformance (cuda)" "$(status_of $rc)" "$detail" $((SECONDS - t0))
fi

# 2. Communicators.
if wants comm; then
for n in 2 4; do
  t0=$SECONDS
  step comm-staged-np$n 60 mpirun -np $n --oversubscribe "$bundle/bin/CommunicatorTest" --gtest_filter='*/staged'
  rc=$?
  detail=$(grep -E "staged through|PASSED|FAILED  \]" "$logs/comm-staged-np$n.log" | head -3 | tr '\n' ' ')
  record "MPI staged via device, $n ranks" "$(status_of $rc)" "$detail" $((SECONDS - t0))
done
if [ "$gpus" -ge 2 ]; then
  t0=$SECONDS
  step comm-nccl-np2 60 mpirun -np 2 "$bundle/bin/CommunicatorTest" --gtest_filter='*/nccl'
  rc=$?
  record "NCCL, 2 ranks" "$(status_of $rc)" "$(grep -E "PASSED|FAILED  \]" "$logs/comm-nccl-np2.log" | head -2 | tr '\n' ' ')" $((SECONDS - t0))
else
  record "NCCL, 2 ranks" "n/a" "$gpus GPU here: NCCL refuses two ranks on one GPU, so NCCL across ranks is not exercised on this machine" 0
fi
fi

# 3. Every example model, one device, f32 and bf16.
wants models &&
for m in gpt bert llama vit resnet18; do
  d=$work/models/$m
  t0=$SECONDS
  step "$m-f32" 90 bash -c "'$runtime' run '$d/f32' --backend $backend --inputs '$d/inputs.safetensors' --outputs '$work/$m-f32.safetensors' --timing && $compare '$d/outputs.safetensors' '$work/$m-f32.safetensors'"
  rc=$?
  record "$m f32 vs PyTorch" "$(status_of $rc)" "$(grep -E '^output_|error' "$logs/$m-f32.log" | head -2 | tr '\n' ' ')" $((SECONDS - t0))
  # bf16's bound: 2u(L + 1) of max|reference| with L residual blocks
  # (2 in the tiny transformers; resnet18 has 8 basic blocks).
  blocks=2; [ $m = resnet18 ] && blocks=8
  tol=$(awk -v l=$blocks 'BEGIN { printf "%.6f", 2 * (l + 1) / 256 }')
  t0=$SECONDS
  step "$m-bf16" 90 bash -c "'$runtime' run '$d/bf16' --backend $backend --inputs '$d/inputs.safetensors' --outputs '$work/$m-bf16.safetensors' --timing && $compare '$d/outputs-bf16.safetensors' '$work/$m-bf16.safetensors' --tol $tol --scale-floor 0 && $compare '$d/outputs.safetensors' '$work/$m-bf16.safetensors' --tol $tol --scale-floor 0"
  rc=$?
  record "$m bf16 vs PyTorch (tol $tol)" "$(status_of $rc)" "$(grep -E '^output_|error' "$logs/$m-bf16.log" | head -2 | tr '\n' ' ')" $((SECONDS - t0))
done

# 4. Multi-rank plans on the one GPU: MPI staged through host memory.
d=$prep/multi
wants multi &&
for p in pp2:2 tp2:2 dp2:2 pp2tp2:4; do
  plan=${p%%:*} ranks=${p##*:}
  t0=$SECONDS
  step "multi-$plan" 90 bash -c "'$runtime' run --local $ranks '$d/$plan' --backend $backend --gpu-comm mpi --inputs '$d/inputs.safetensors' --outputs '$work/$plan.safetensors' --report && $compare '$d/outputs.safetensors' '$work/$plan.safetensors'"
  rc=$?
  record "$plan ($ranks ranks, $backend, mpi)" "$(status_of $rc)" "$(grep -E '^output_|error' "$logs/multi-$plan.log" | head -2 | tr '\n' ' ')" $((SECONDS - t0))
done

# 5. Training: cleave-runtime train on the backend against PyTorch training
# the same modules, prepared on the CPU there and on this GPU here
# (scripts/gpu/training_check.py; one row per case).
if wants training; then
refdev=cuda; [ "$backend" != cuda ] && refdev=cpu
t0=$SECONDS
step training 240 "$py" "$root/scripts/gpu/training_check.py" check "$work/models/training" --runtime "$runtime" --backend $backend --python "$py" --reference-device $refdev --work "$logs/training" --json "$logs/training.json"
rc=$?
if [ -f "$logs/training.json" ]; then
  while IFS='|' read -r name st detail; do
    record "train $name" "$st" "$detail" $((SECONDS - t0))
    t0=$SECONDS
  done < <("$py" - "$logs/training.json" <<'PY'
import json, sys
for c in json.load(open(sys.argv[1]))["cases"]:
    refs = [k for k in c if k.startswith("vs_") and k.count("_") == 1]
    ok = c["train"] and "error" not in c and all(c[k] == "pass" for k in refs)
    detail = "; ".join(f"{k[3:]}: {c[k]}, {c.get(k + '_first_failure') or c.get(k + '_last', '')}"
                       for k in refs) if c["train"] else ""
    if "memory" in c:
        m = c["memory"]
        detail += f"; memory allocated {m['allocated']} of predicted {m['predicted']} B"
    if "error" in c:
        detail += "; error: " + " ".join(c["error"])
    detail = f"trained in {c['train_seconds']} s; " + detail
    print(f"{c['case']} ({c['dtype']})|{'pass' if ok else 'FAIL'}|{detail}")
PY
)
else
  record "training" "$(status_of $rc)" "$(tail -2 "$logs/training.log" | tr '\n' ' ')" $((SECONDS - t0))
fi
fi

if [ "$backend" != cuda ]; then
  record "bench GPT-2 124M bf16" "n/a" "BACKEND=$backend: needs a GPU" 0
  record "exports" "n/a" "BACKEND=$backend: needs the GPU machine's PyTorch and torchvision" 0
else
# 6. GPT-2 124M forward, bf16, against PyTorch on the same GPU, and its
# training step.
if wants bench-forward; then
t0=$SECONDS
step bench-gpt2 240 "$py" "$root/bench/cuda_gpt2.py" --plan "$prep/gpt2-plan" --runtime "$runtime" --backend cuda --json "$logs/cuda_gpt2.json"
rc=$?
record "bench GPT-2 124M bf16" "$(status_of $rc)" "$(grep -E '^\| (cleave|PyTorch|torch)' "$logs/bench-gpt2.log" | tr '\n' ' ')" $((SECONDS - t0))
fi
if wants bench-training; then
t0=$SECONDS
if tar -C "$work" -xJf "$prep/train-gpt2-plan.tar.xz" 2>"$logs/bench-train-gpt2.log"; then
  step bench-train-gpt2 300 "$py" "$root/bench/cuda_train_gpt2.py" --plan "$work/train-gpt2-plan" --runtime "$runtime" --backend cuda --profile --json "$logs/cuda_train_gpt2.json"
  rc=$?
else
  rc=1
fi
record "bench GPT-2 124M training step bf16" "$(status_of $rc)" "$(grep -E '^\| (cleave|PyTorch eager|torch.compile) |first step|error' "$logs/bench-train-gpt2.log" | head -5 | tr '\n' ' ')" $((SECONDS - t0))
fi

# 7. Exports by this machine's PyTorch (imported back on the build machine).
if wants exports; then
t0=$SECONDS
step exports 300 "$py" "$root/scripts/gpu/export_current_torch.py" "$out" --jobs 4 --timeout 200
rc=$?
record "exports (torch $("$py" -c 'import torch; print(torch.__version__)' 2>/dev/null))" "$(status_of $rc)" "$(ls "$out" | grep -c 'exports-') archive(s); see export-report.md" $((SECONDS - t0))
fi
fi

{
  echo "# gpu-check on ${gpu:-no GPU} (backend $backend)"
  echo
  echo "$(date -u); bundle from $(basename "$prep"); $(grep -o 'torch [^ ]*' "$logs/machine.log" | head -1)"
  echo
  echo "| check | result | seconds | detail |"
  echo "|---|---|---:|---|"
  for r in "${rows[@]}"; do
    IFS='|' read -r name st detail secs <<< "$r"
    echo "| $name | $st | $secs | $detail |"
  done
  echo
  echo "$failed failed; $((SECONDS - start_all)) s in all"
} > "$out/summary.md"
"$py" - "$out/summary.json" "$failed" "${rows[@]}" <<'PY'
import json, sys
rows = [dict(zip(["check", "result", "detail", "seconds"], r.split("|", 3))) for r in sys.argv[3:]]
json.dump({"failed": int(sys.argv[2]), "checks": rows}, open(sys.argv[1], "w"), indent=1)
PY
pack_logs
cat "$out/summary.md"
[ "$failed" -eq 0 ]
