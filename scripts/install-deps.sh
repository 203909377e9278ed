#!/usr/bin/env bash
# Installs the Debian packages cleave builds and tests with (see docs/building.md).
# Idempotent: packages already present are skipped; nothing is downloaded outside apt.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build pkg-config
  llvm-19-dev llvm-19-tools libmlir-19-dev mlir-19-tools
  libtorch-dev python3-torch python3-torchvision python3-torchaudio
  nlohmann-json3-dev libgtest-dev
  libopenblas-dev libdnnl-dev libopenmpi-dev openmpi-bin
  patchelf debootstrap
  clang libclang-rt-14-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
