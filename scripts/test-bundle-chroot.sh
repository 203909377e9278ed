#!/usr/bin/env bash
# test-bundle-chroot.sh BUNDLE_DIR [WORK_DIR]
#
# Proves that a runtime bundle (scripts/bundle-runtime.sh) runs on a bare
# Debian 12: in a `debootstrap --variant=minbase` chroot (no Open MPI, oneDNN,
# Python or compiler; made once by scripts/make-bare-chroot.sh and cached in
# $CLEAVE_CHROOT_CACHE, default build/bare-chroot of this checkout) it
#   1. checks that the chroot lacks Open MPI and that every ELF file of the
#      bundle finds its libraries there (ldd; only libcleave_cuda.so's CUDA
#      libraries may be missing),
#   2. runs a tiny GPT plan on one rank without mpirun
#        cleave-runtime run PLAN1 --backend cpu --inputs IN --outputs OUT
#   3. runs its 4-device plan (pp 2 x tp 2) through the bundled launcher
#        cleave-runtime run --local 4 PLAN4 --inputs IN --outputs OUT
#   4. trains a 4-rank plan (pp 2 x dp 2) for 3 steps through it
#        cleave-runtime train --local 4 PLAN4T --data DATA --steps 3 --save-weights W
# and compares every output byte for byte (cmp) with the same bundle's run on
# this machine, and, where /usr/bin/python3 has PyTorch, the inference
# outputs with PyTorch's within fp32 tolerance. Open MPI, PMIx and hwloc must
# not complain of a plugin, help file or system directory they cannot find.
#
# Plans are compiled here with $CLEAVE (default build/bin/cleave of this
# checkout, else cleave on PATH). WORK_DIR (default: a temporary directory)
# keeps plans, outputs and logs. /proc and /dev/shm are mounted in the chroot
# for the runs and always unmounted (and /sys, where hwloc reads the CPU
# topology).
#
# Exit status: 0 passed; 1 failed; 2 skipped: the chroot cannot be made here
# (no root, no debootstrap, no network), with "SKIP: reason" on stdout.
set -euo pipefail

usage() { echo "usage: test-bundle-chroot.sh BUNDLE_DIR [WORK_DIR]" >&2; exit 2; }
[[ $# -ge 1 && $# -le 2 ]] || usage
repo=$(cd "$(dirname "$0")/.." && pwd)
bundle=$(cd "$1" && pwd)
[[ -x "$bundle/bin/cleave-runtime" && -x "$bundle/bin/mpirun" ]] ||
  { echo "test-bundle-chroot: $bundle is not a runtime bundle (no bin/cleave-runtime, bin/mpirun)" >&2; exit 1; }
work=${2:-$(mktemp -d /tmp/cleave-bundle-test.XXXXXX)}
mkdir -p "$work"
work=$(cd "$work" && pwd)
root=${CLEAVE_CHROOT_CACHE:-$repo/build/bare-chroot}
python=${PYTHON:-/usr/bin/python3}
cleave=${CLEAVE:-}
if [[ -z "$cleave" ]]; then
  if [[ -x "$repo/build/bin/cleave" ]]; then cleave=$repo/build/bin/cleave; else cleave=$(command -v cleave || true); fi
fi
[[ -x "$cleave" ]] || { echo "test-bundle-chroot: no cleave compiler (set CLEAVE)" >&2; exit 1; }

fail() { echo "FAIL: $*"; exit 1; }
step() { echo "== $*"; }

set +e
reason=$("$repo/scripts/make-bare-chroot.sh" "$root" 2>&1)
status=$?
set -e
if [[ $status -eq 2 ]]; then
  echo "SKIP: cannot make a bare Debian 12 chroot here: $(tail -1 <<<"$reason")"
  exit 2
elif [[ $status -ne 0 ]]; then
  echo "$reason" >&2
  fail "make-bare-chroot.sh failed"
fi

# 1. The chroot is bare, and the bundle's libraries resolve inside it.
step "the chroot has no Open MPI"
for f in usr/bin/mpirun usr/bin/orterun usr/lib/x86_64-linux-gnu/libmpi.so.40 usr/lib/x86_64-linux-gnu/libdnnl.so.2; do
  [[ ! -e "$root/$f" ]] || fail "the chroot is not bare: it has /$f"
done
rm -rf "$root/opt/cleave" "$root/work"
mkdir -p "$root/opt" "$root/work"
cp -a "$bundle" "$root/opt/cleave"

mounted=()
cleanup() {
  local i
  for ((i = ${#mounted[@]} - 1; i >= 0; i--)); do
    umount "${mounted[i]}" 2>/dev/null || umount -l "${mounted[i]}" 2>/dev/null || true
  done
}
trap cleanup EXIT
mount_in() { # TYPE DIR [OPTIONS]: a skip where mounting is not allowed
  mkdir -p "$root/$2"
  if ! mount -t "$1" ${3:+-o "$3"} "$1" "$root/$2"; then
    echo "SKIP: cannot mount $1 on the chroot's /$2 (no CAP_SYS_ADMIN?)"
    exit 2
  fi
  mounted+=("$root/$2")
}
mount_in proc proc
mount_in sysfs sys # hwloc reads the CPU topology there
mount_in tmpfs dev/shm size=512m

# Runs a command in the chroot with a clean environment (no host PATH).
chroot=$(PATH=$PATH:/usr/sbin:/sbin command -v chroot)
in_chroot() {
  env -i PATH=/usr/local/bin:/usr/bin:/bin HOME=/root LANG=C.UTF-8 OMP_NUM_THREADS=1 \
    OMPI_MCA_btl_vader_single_copy_mechanism=none "$chroot" "$root" "$@"
}

step "every ELF file of the bundle finds its libraries in the chroot"
in_chroot sh -c '! command -v mpirun' >/dev/null || fail "mpirun is on the chroot's PATH"
missing=$(in_chroot sh -c '
  cd /opt/cleave
  for f in bin/* lib/*.so* lib/*/*.so; do
    head -c 4 "$f" | grep -q ELF || continue
    ldd "$f" | grep "not found" | sed "s|^|$f: |"
  done' | grep -v -E '^lib/libcleave_cuda\.so:[[:space:]]+lib(cudart|cublasLt|cublas|cudnn|nccl)\.so' || true)
[[ -z "$missing" ]] || fail "libraries missing in the chroot:
$missing"

# Plans, compiled here.
step "compiling plans with $cleave"
cd "$work"
"$python" "$repo/examples/export.py" gpt --config tiny --batch 4 -o gpt.pt --io gpt-io >/dev/null
"$cleave" compile gpt.pt -o plan1 >/dev/null 2>&1 || fail "cleave compile gpt.pt -o plan1"
"$cleave" compile gpt.pt --cluster "$repo/examples/clusters/cpu-2core.json" --devices 4 \
  --global-batch 4 --mode infer --pp 2 --tp 2 -o plan4 >/dev/null 2>&1 || fail "cleave compile plan4 (pp 2 x tp 2)"
"$python" "$repo/examples/export.py" gpt --config tiny --dropout 0 --train --batch 4 \
  --loss-in-model cross_entropy -o gptt.pt --data data.safetensors --samples 8 >/dev/null
"$cleave" compile gptt.pt --cluster "$repo/examples/clusters/cpu-2core.json" --devices 4 \
  --global-batch 4 --pp 2 --dp 2 --zero none --mode train --lr 0.003 -o plan4t >/dev/null 2>&1 ||
  fail "cleave compile plan4t (pp 2 x dp 2, train)"
cp -a plan1 plan4 plan4t gpt-io data.safetensors "$root/work/"

# The same bundle on this machine: the reference bytes.
host() { env OMP_NUM_THREADS=1 OMPI_MCA_btl_vader_single_copy_mechanism=none "$bundle/bin/cleave-runtime" "$@"; }
step "reference runs of the bundle on this machine"
host run plan1 --backend cpu --inputs gpt-io/inputs.safetensors --outputs host1.safetensors >host1.log 2>&1 ||
  { cat host1.log; fail "the 1-rank run on this machine"; }
host run --local 4 plan4 --backend cpu --inputs gpt-io/inputs.safetensors --outputs host4.safetensors >host4.log 2>&1 ||
  { cat host4.log; fail "the 4-rank run on this machine"; }
host train --local 4 plan4t --backend cpu --data data.safetensors --steps 3 -q --save-weights host4t.safetensors >host4t.log 2>&1 ||
  { cat host4t.log; fail "the 4-rank training on this machine"; }

check_log() { # LOG: Open MPI, PMIx and hwloc must have found all they look for
  if grep -q -E '^-{20}|Sorry!|help file|unable to open|mca_base_component_repository_open|not find a component|No components were able|WARNING|\[hwloc' "$1"; then
    cat "$1"
    fail "Open MPI, PMIx or hwloc complained: a file of theirs is not found in the bundle (log: $1)"
  fi
}

# in_chroot_matches LOG OUTPUT HOST_COPY WHAT ARGS...: runs ARGS in the chroot
# (log in LOG), then OUTPUT (under /work there) must equal HOST_COPY byte for byte.
in_chroot_matches() {
  local log=$1 output=$2 host=$3 what=$4
  shift 4
  in_chroot "$@" >"$log" 2>&1 || { cat "$log"; fail "$what in the chroot"; }
  check_log "$log"
  cmp "$root$output" "$host" || fail "the chroot's $what differs from this machine's"
  echo "ok: $what identical to this machine's"
}

step "in the chroot: cleave-runtime run plan1 --backend cpu (1 rank, no mpirun)"
in_chroot_matches chroot1.log /work/out1.safetensors host1.safetensors "1-rank outputs" \
  /opt/cleave/bin/cleave-runtime run /work/plan1 --backend cpu \
  --inputs /work/gpt-io/inputs.safetensors --outputs /work/out1.safetensors

step "in the chroot: cleave-runtime run --local 4 plan4 (pp 2 x tp 2, the bundled mpirun)"
in_chroot_matches chroot4.log /work/out4.safetensors host4.safetensors "4-rank outputs" \
  /opt/cleave/bin/cleave-runtime run --local 4 /work/plan4 --backend cpu \
  --inputs /work/gpt-io/inputs.safetensors --outputs /work/out4.safetensors

step "in the chroot: cleave-runtime train --local 4 plan4t --steps 3 (pp 2 x dp 2)"
in_chroot_matches chroot4t.log /work/out4t.safetensors host4t.safetensors "4-rank trained weights" \
  /opt/cleave/bin/cleave-runtime train --local 4 /work/plan4t --backend cpu \
  --data /work/data.safetensors --steps 3 -q --save-weights /work/out4t.safetensors

cp "$root/work/out1.safetensors" "$root/work/out4.safetensors" "$root/work/out4t.safetensors" .
if "$python" -c "import torch" 2>/dev/null; then
  step "the chroot's outputs against PyTorch's"
  "$python" - "$repo" <<'EOF' || fail "the chroot's outputs differ from PyTorch's"
import sys
sys.path[:0] = [sys.argv[1] + "/test/plan", sys.argv[1] + "/examples"]
from run_matrix import compare
from safetensors_io import load_file
want = load_file("gpt-io/outputs.safetensors")
for name in ("out1.safetensors", "out4.safetensors"):
    worst, ok = compare(load_file(name), want)
    print(f"{name}: largest difference {worst:.3g}: {'ok' if ok else 'FAILED'}")
    if not ok:
        sys.exit(1)
EOF
fi
echo "PASS: the bundle ($(du -sh "$bundle" | cut -f1)) runs 1 and 4 ranks in a bare Debian 12 chroot"
