#!/usr/bin/env bash
# scripts/sanitize-check.sh: the runtime under ASan + UBSan (docs/building.md,
# "Sanitizer build"). Needs the normal build (build/, for `cleave compile`
# and the reference runs) and the sanitizer build (scripts/build.sh
# --sanitize, build-sanitize/). Runs
#   1. the runtime's unit tests built with the sanitizers (the MPI ones on 2
#      ranks under mpirun);
#   2. the example models (tiny configs) compiled by the normal cleave, run
#      by the normal and the sanitized cleave-runtime: outputs equal to each
#      other (1e-6) and to PyTorch's (1e-4), also a pp2 and a tp2 plan on 2
#      local ranks;
#   3. training (one device, AdamW, checkpoints, resume; and dp2 + ZeRO on 2
#      ranks) with both: the same losses and weights (1e-5: -O3 and -O1
#      order a few sums differently), a resumed run's weights bit-identical
#      to the uninterrupted run's.
# Any sanitizer report fails the step it happens in (UBSan halts, ASan and
# LeakSanitizer exit non-zero). Prints one line per check; exits 1 if any
# failed. Work files: build-sanitize/check/. About 5 minutes on 2 cores.
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
normal="$root/build/bin"
san="$root/build-sanitize/bin"
unit="$root/build-sanitize/test/unit"
work="$root/build-sanitize/check"
for f in "$normal/cleave" "$normal/cleave-runtime" "$san/cleave-runtime"; do
  [ -x "$f" ] || { echo "sanitize-check: no $f (scripts/build.sh, scripts/build.sh --sanitize)" >&2; exit 2; }
done
python=/usr/bin/python3
compare="$python $root/test/e2e/compare_outputs.py"
cluster="$root/examples/clusters/cpu-2core.json"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
# fast_unwind_on_malloc=0: whole allocation stacks through libraries built
# without frame pointers (Open MPI), which the suppressions match on.
export ASAN_OPTIONS="detect_leaks=1:fast_unwind_on_malloc=0${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export LSAN_OPTIONS="suppressions=$root/scripts/sanitize-lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# Open MPI as root in a container (the same as the tests' mpirun entries).
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_plm=isolated \
  OMPI_MCA_btl_vader_single_copy_mechanism=none
rm -rf "$work" && mkdir -p "$work/logs"
cd "$work"

failed=0 passed=0
# check NAME COMMAND...: runs it, its output in logs/NAME.log; a sanitizer
# report in the log fails it even if the command exited 0.
check() {
  local name="$1"; shift
  local log="logs/$name.log" rc=0
  "$@" >"$log" 2>&1 || rc=$?
  if [ "$rc" = 0 ] && ! grep -qE 'ERROR: (Address|Leak|UndefinedBehavior)Sanitizer|runtime error:' "$log"; then
    printf '  ok    %s\n' "$name"; passed=$((passed + 1))
  else
    printf '  FAIL  %s (exit %s; %s)\n' "$name" "$rc" "$work/$log"
    grep -m3 -E 'ERROR: |runtime error:|SUMMARY|error:' "$log" | sed 's/^/        /'
    failed=$((failed + 1))
  fi
}

echo "sanitize-check: unit tests"
for t in CpuKernelsTest SafetensorsTest PlanVerifyTest CheckedTest TrainingRuntimeTest; do
  if [ -x "$unit/$t" ]; then check "$t" "$unit/$t" --gtest_brief=1; fi
done
for t in CommunicatorTest CommKernelsTest; do
  filter=""
  [ "$t" = CommunicatorTest ] && filter="--gtest_filter=*/mpi:*/staged"
  if [ -x "$unit/$t" ]; then
    check "$t.np2" mpirun -np 2 --oversubscribe "$unit/$t" $filter --gtest_brief=1
  fi
done

echo "sanitize-check: inference, normal vs sanitized cleave-runtime"
run_both() { # NAME PLAN INPUTS EXPECTED [--local N]
  local name="$1" plan="$2" inputs="$3" expected="$4"; shift 4
  check "$name.normal" "$normal/cleave-runtime" run "$@" "$plan" --inputs "$inputs" --outputs "$name.normal.safetensors"
  check "$name.sanitized" "$san/cleave-runtime" run "$@" "$plan" --inputs "$inputs" --outputs "$name.san.safetensors"
  check "$name.same" $compare "$name.normal.safetensors" "$name.san.safetensors" --tol 1e-6
  check "$name.pytorch" $compare "$expected" "$name.san.safetensors"
}
for model in mlp gpt bert vit llama resnet18; do
  check "$model.export" $python "$root/examples/export.py" $model --config tiny -o $model.pt --io io-$model
  check "$model.compile" "$normal/cleave" compile $model.pt -o $model.plan
  run_both "$model" $model.plan io-$model/inputs.safetensors io-$model/outputs.safetensors
done
check gpt4.export $python "$root/examples/export.py" gpt --config tiny --batch 4 -o gpt4.pt --io io-gpt4
for split in pp tp; do
  check "gpt.$split"2.compile "$normal/cleave" compile gpt4.pt --cluster "$cluster" --devices 2 \
    --global-batch 4 --$split 2 -o gpt.${split}2.plan
  run_both "gpt.${split}2" gpt.${split}2.plan io-gpt4/inputs.safetensors io-gpt4/outputs.safetensors --local 2
done

echo "sanitize-check: training, normal vs sanitized cleave-runtime"
check train.export $python "$root/examples/export.py" mlp --config tiny --dropout 0.2 --train \
  --loss-in-model mse -o t.pt --data d.safetensors --samples 16
check train.compile "$normal/cleave" compile t.pt --mode train --optimizer adamw --lr 0.01 --seed 3 -o t.plan
for which in normal san; do
  bin="$normal"; [ $which = san ] && bin="$san"
  check "train.$which" "$bin/cleave-runtime" train t.plan --data d.safetensors --steps 6 --shuffle 7 \
    --log $which.jsonl --save-weights $which.safetensors --checkpoint ck-$which --checkpoint-every 3
done
# The two builds round alike but for the order of a few sums (-O3 vectorizes
# OpenMP simd reductions, -O1 does not): 1e-8 apart after 6 steps, hence 1e-5.
check train.same-losses $python -c '
import json, sys
a = [json.loads(l)["loss"] for l in open("normal.jsonl")]
b = [json.loads(l)["loss"] for l in open("san.jsonl")]
print(a, b, sep="\n")
sys.exit(len(a) != 6 or len(a) != len(b) or any(abs(x - y) > 1e-5 * max(1, abs(x)) for x, y in zip(a, b)))'
check train.same-weights $compare normal.safetensors san.safetensors --tol 1e-5
check train.resume "$san/cleave-runtime" train t.plan --data d.safetensors --steps 6 --shuffle 7 \
  --resume ck-san/ckpt-3 --save-weights resumed.safetensors
# Within one build a resumed run is bit-identical to the uninterrupted one.
check train.resumed-weights $compare san.safetensors resumed.safetensors --tol 0
check dp2.export $python "$root/examples/export.py" mlp --config tiny --dropout 0 --train -o td.pt \
  --data dd.safetensors --samples 16 --labels cross_entropy
check dp2.compile "$normal/cleave" compile td.pt --cluster "$cluster" --devices 2 --global-batch 4 \
  --dp 2 --zero optimizer --mode train --loss cross_entropy -o dp2.plan
for which in normal san; do
  bin="$normal"; [ $which = san ] && bin="$san"
  check "dp2.$which" "$bin/cleave-runtime" train --local 2 dp2.plan --data dd.safetensors --steps 4 \
    --save-weights dp2.$which.safetensors --checkpoint dp2ck-$which --checkpoint-every 2
done
check dp2.same-weights $compare dp2.normal.safetensors dp2.san.safetensors --tol 1e-5

echo "sanitize-check: $passed ok, $failed failed"
[ "$failed" = 0 ]
