#!/usr/bin/env bash
# Installs missing Debian packages, then configures and builds cleave in build/.
# Shared by the demo and test commands of the README.
#
# scripts/build.sh --sanitize [TARGET...]: the runtime under AddressSanitizer
# and UndefinedBehaviorSanitizer (GCC) in build-sanitize/: cleave-runtime and
# the runtime's unit tests (docs/building.md, "Sanitizer build"), or the
# TARGETs given. The compiler (MLIR, LibTorch) is not built there.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/install-deps.sh"
if [ "${1:-}" = --sanitize ]; then
  shift
  targets=("$@")
  if [ ${#targets[@]} = 0 ]; then
    targets=(cleave-runtime CpuKernelsTest SafetensorsTest PlanVerifyTest CheckedTest
             TrainingRuntimeTest CommKernelsTest CommunicatorTest)
  fi
  launcher=()
  if command -v ccache >/dev/null; then
    launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
  fi
  # -O1 -g: readable stacks at a bearable speed. Every UBSan report is fatal
  # (-fno-sanitize-recover): a test or run that hits one fails.
  san="-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer"
  cmake -S "$root" -B "$root/build-sanitize" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g" \
    -DCMAKE_CXX_FLAGS="$san" -DCMAKE_C_FLAGS="$san" \
    -DCMAKE_EXE_LINKER_FLAGS="$san" -DCMAKE_SHARED_LINKER_FLAGS="$san" \
    "${launcher[@]}" >/dev/null
  cmake --build "$root/build-sanitize" -j2 --target "${targets[@]}"
  exit 0
fi
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
# Two jobs: the machines have 2 cores and an MLIR translation unit takes ~1 GB.
cmake --build "$root/build" -j2 "$@"
