#!/usr/bin/env bash
# Builds cleave and runs every test: lit + FileCheck (dialect, passes, importer
# end-to-end with PyTorch exports) and the GoogleTest unit tests, via ctest.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$root/scripts/build.sh"
cd "$root/build"
ctest --output-on-failure -j2
