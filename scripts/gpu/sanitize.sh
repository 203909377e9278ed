#!/bin/bash
# Runs the CUDA kernel conformance cases under compute-sanitizer's racecheck
# and memcheck, on the GPU machine, from the bundle scripts/gpu-prepare.sh
# wrote: shared-memory races (a missing barrier around a tile) and
# out-of-bounds or misaligned accesses fail the run even where the results
# happen to come out right.
#
# usage: scripts/gpu/sanitize.sh OUTDIR [PREPARED_DIR] [GTEST_FILTER]
#   PREPARED_DIR defaults to build-gpu; GTEST_FILTER to every CUDA case
#   ('*/cuda'; the whole suite takes minutes under racecheck, so name the
#   kernels you changed, e.g. '*Attention*/cuda').
# Writes OUTDIR/sanitize-{racecheck,memcheck}.log and prints each tool's
# summary. Exit status 0 when both tools found nothing and the tests passed.
set -u
root=$(cd "$(dirname "$0")/../.." && pwd)
out=${1:?usage: scripts/gpu/sanitize.sh OUTDIR [PREPARED_DIR] [GTEST_FILTER]}
prep=${2:-$root/build-gpu}
filter=${3:-'*/cuda'}
[ -f "$prep/bundle.tar.xz" ] || { echo "sanitize: error: $prep/bundle.tar.xz is missing: run scripts/gpu-prepare.sh on the build machine" >&2; exit 1; }
cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null | head -1)
[ -n "$cs" ] || { echo "sanitize: error: compute-sanitizer is not installed here" >&2; exit 1; }
mkdir -p "$out" || exit 1
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
tar -C "$work" -xJf "$prep/bundle.tar.xz" || { echo "sanitize: error: cannot unpack $prep/bundle.tar.xz" >&2; exit 1; }
. "$root/scripts/gpu/library-path.sh"
export GTEST_COLOR=no
failed=0
for tool in racecheck memcheck; do
  log=$out/sanitize-$tool.log
  timeout "${SANITIZE_TIMEOUT_S:-150}" "$cs" --tool "$tool" --error-exitcode 3 \
    "$work/cleave-bundle/bin/CpuKernelsTest" --gtest_filter="$filter" > "$log" 2>&1
  rc=$?
  [ $rc -ne 0 ] && failed=1
  echo "$tool: exit $rc; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log" | tail -1); $(grep -E '^\[  (PASSED|FAILED) ' "$log" | tr '\n' ' ')"
done
exit $failed
