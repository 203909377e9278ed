#!/usr/bin/env bash
# Installs missing Debian packages, then configures and builds cleave in build/.
# Shared by the demo and test commands of the README.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/install-deps.sh"
cmake -S "$root" -B "$root/build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
# Two jobs: the machines have 2 cores and an MLIR translation unit takes ~1 GB.
cmake --build "$root/build" -j2 "$@"
