#!/usr/bin/env bash
# scripts/fuzz.sh [--seconds N] [--harness NAME|all] [--jobs J] [--seed S]
#                 [--build-dir DIR] [--cleave-bin DIR] [--fresh] [--prepare] [--no-build]
# Builds the libFuzzer harnesses of fuzz/ with clang (if needed), makes their
# seeds from real plans (fuzz/make-seeds.sh, with the normal build's
# `cleave`), and runs a campaign of N seconds (default 60) per harness, J
# harnesses at a time (default 1). Prints per harness the inputs run, the
# coverage libFuzzer reached (cov: edges, ft: features) and any finding
# (kept as DIR/findings/<harness>-crash-..., -leak-..., -timeout-..., with
# the log beside it). Exits 1 if any harness found something.
#   DIR            default build/fuzz; corpora grow in DIR/corpus/<harness>
#   --fresh        start from the seed corpus only, in DIR/fresh-corpus
#                  (emptied first; DIR/corpus is left as it is)
#   --prepare      build and make the seeds, run nothing
#   --no-build     the harnesses and seeds are there (ctest's runs, side by side)
#   --seed S       libFuzzer's -seed (default: drawn, and printed)
# See docs/fuzzing.md.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
seconds=60 harness=all jobs=1 seed="" dir="$root/build/fuzz" bin="$root/build/bin"
fresh=0 prepare=0 build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --seconds) seconds="$2"; shift 2 ;;
    --harness) harness="$2"; shift 2 ;;
    --jobs) jobs="$2"; shift 2 ;;
    --seed) seed="$2"; shift 2 ;;
    --build-dir) dir="$2"; shift 2 ;;
    --cleave-bin) bin="$2"; shift 2 ;;
    --fresh) fresh=1; shift ;;
    --prepare) prepare=1; shift ;;
    --no-build) build=0; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
all_harnesses="safetensors plan checkpoint training_data"
if [ "$harness" = all ]; then
  harnesses="$all_harnesses"
else
  case " $all_harnesses " in
    *" $harness "*) harnesses="$harness" ;;
    *) echo "fuzz.sh: no harness '$harness' (one of: $all_harnesses, all)" >&2; exit 2 ;;
  esac
fi
command -v clang++ >/dev/null || { echo "fuzz.sh: clang++ is not installed (apt-get install clang libclang-rt-dev)" >&2; exit 2; }
[ -x "$bin/cleave" ] || { echo "fuzz.sh: no $bin/cleave: build cleave first (scripts/build.sh)" >&2; exit 2; }

# Build (incremental: ninja does nothing when nothing changed).
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
if [ "$build" = 1 ] && [ ! -f "$dir/build.ninja" ]; then
  cmake -S "$root/fuzz" -B "$dir" -G Ninja -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang \
    "${launcher[@]}" >/dev/null
fi
if [ "$build" = 1 ]; then
  cmake --build "$dir" -j2 | grep -v '^\[' || true
fi
for h in $all_harnesses; do
  [ -x "$dir/bin/fuzz_$h" ] || { echo "fuzz.sh: the build did not make fuzz_$h" >&2; exit 2; }
done

export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
# Every UBSan report is fatal (the build says so too) and has its stack.
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
export CLEAVE_FUZZ_SEEDS="$dir/seeds"

# Seeds: remade when cleave or the seed script is newer than they are.
if [ "$build" = 1 ] && { [ ! -f "$dir/seeds/.done" ] || [ "$bin/cleave" -nt "$dir/seeds/.done" ] \
   || [ "$root/fuzz/make-seeds.sh" -nt "$dir/seeds/.done" ]; }; then
  bash "$root/fuzz/make-seeds.sh" "$bin" "$dir/seeds"
  touch "$dir/seeds/.done"
  rm -rf "$dir/seed-corpus"
fi
for h in $harnesses; do
  if [ "$build" = 1 ] && { [ ! -d "$dir/seed-corpus/$h" ] ||
                            [ "$dir/bin/fuzz_$h" -nt "$dir/seed-corpus/$h" ]; }; then
    rm -rf "$dir/seed-corpus/$h"
    CLEAVE_FUZZ_WRITE_CORPUS="$dir/seed-corpus/$h" "$dir/bin/fuzz_$h"
  fi
  [ -n "$(ls -A "$dir/seed-corpus/$h" 2>/dev/null)" ] ||
    { echo "fuzz.sh: no seed corpus for $h in $dir/seed-corpus" >&2; exit 2; }
done
[ "$prepare" = 1 ] && { echo "fuzz.sh: harnesses built and seeds made in $dir"; exit 0; }

dict_of() {
  case "$1" in
    plan) echo plan ;;
    checkpoint) echo checkpoint ;;
    *) echo safetensors ;;
  esac
}
[ -n "$seed" ] || seed=$(( (RANDOM << 15 | RANDOM) + 1 ))
echo "fuzz.sh: ${seconds}s per harness, $jobs at a time, -seed=$seed, in $dir"
mkdir -p "$dir/findings" "$dir/logs"

# One campaign; its summary line goes to $dir/logs/<harness>.summary.
campaign() {
  local h="$1" log="$dir/logs/$1.log" tmp="$dir/tmp/$1" corpus="$dir/corpus/$1"
  if [ "$fresh" = 1 ]; then
    corpus="$dir/fresh-corpus/$h"
    rm -rf "$corpus"
  fi
  mkdir -p "$corpus"
  rm -rf "$tmp" && mkdir -p "$tmp"
  local before after rc=0
  before=$(ls "$dir/findings" | grep -c "^$h-" || true)
  # -timeout: one input taking 25 s is a hang (they take milliseconds);
  # -rss_limit_mb / -malloc_limit_mb: a loader allocating what a header
  # claims, unchecked, is a finding. Corpus: new inputs go to the first
  # directory, the seeds stay as made.
  TMPDIR="$tmp" "$dir/bin/fuzz_$h" "$corpus" "$dir/seed-corpus/$h" \
    -dict="$root/fuzz/$(dict_of "$h").dict" -max_total_time="$seconds" -seed="$seed" \
    -timeout=25 -rss_limit_mb=2560 -malloc_limit_mb=1024 -print_final_stats=1 \
    -artifact_prefix="$dir/findings/$h-" >"$log" 2>&1 || rc=$?
  rm -rf "$tmp"
  after=$(ls "$dir/findings" | grep -c "^$h-" || true)
  local execs cov ft result
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
  if [ "$rc" = 0 ] && [ "$after" = "$before" ] && [ "${execs:-0}" -gt 0 ]; then
    result=ok
  elif [ "$rc" = 0 ] && [ "$after" = "$before" ]; then
    result="RAN NOTHING: see $log"
  else
    result="FINDING (exit $rc): $(grep -m1 -E '^==[0-9]+==ERROR|runtime error|^SUMMARY|deadly signal|uncaught|Timeout|out-of-memory' "$log" || echo 'see the log')"
    cp "$log" "$dir/findings/$h-$(date +%Y%m%d-%H%M%S).log"
    result="$result; inputs: $(ls -t "$dir/findings" | grep "^$h-" | grep -v '\.log$' | head -3 | sed "s|^|$dir/findings/|" | tr '\n' ' ')"
  fi
  printf '%-14s %10s execs  cov %6s  ft %7s  %4ss  %s\n' "$h" "${execs:-?}" "${cov:-?}" \
    "${ft:-?}" "$seconds" "$result" >"$dir/logs/$h.summary"
  cat "$dir/logs/$h.summary"
  [ "$result" = ok ]
}

failed=0
pids=()
for h in $harnesses; do
  campaign "$h" &
  pids+=($!)
  if [ "${#pids[@]}" -ge "$jobs" ]; then
    wait "${pids[0]}" || failed=1
    pids=("${pids[@]:1}")
  fi
done
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
echo "fuzz.sh: summary (-seed=$seed):"
for h in $harnesses; do cat "$dir/logs/$h.summary"; done
if [ "$failed" != 0 ]; then
  echo "fuzz.sh: FINDINGS: see $dir/findings (rerun an input: $dir/bin/fuzz_<harness> FILE)" >&2
  exit 1
fi
