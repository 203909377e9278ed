#!/usr/bin/env bash
# bundle-runtime.sh BUILD_DIR OUT_DIR
#
# Writes OUT_DIR, a self-contained directory that runs compiled plans on a
# bare Debian 12 (or similar glibc >= 2.36) machine: no MLIR, no LibTorch, no
# Open MPI, no oneDNN installed there.
#
#   bin/cleave-runtime     BUILD_DIR/bin/cleave-runtime (run, train), stripped
#   bin/mpirun             wrapper: relocates the bundled Open MPI, execs orterun
#   bin/orterun, bin/orted Open MPI 4.1 launcher and daemon (this machine's)
#   lib/                   every shared library they need that a bare Debian
#                          lacks (oneDNN, Open MPI, PMIx, hwloc, libevent, ...)
#   lib/libcleave_cuda.so  the CUDA plugin (CUDA libraries NOT bundled)
#   lib/openmpi3, lib/pmix the Open MPI and PMIx plugins that can load there
#   share/openmpi, share/pmix  their help texts; etc/ their settings
#
# Not bundled: glibc (libc, libm, libdl, libpthread, librt, ld-linux),
# libstdc++ and libgcc_s (the target's own, newer ones must win for the CUDA
# libraries), and the CUDA libraries libcleave_cuda.so needs (libcudart,
# libcublasLt, libcudnn, libnccl: hundreds of MB, present on GPU machines).
# Every ELF file gets the RUNPATH $ORIGIN/../lib (executables), $ORIGIN (lib/;
# libcleave_cuda.so keeps its CUDA directories after it) or $ORIGIN/..
# (plugins). Needs patchelf (apt-get install -y patchelf),
# strip and ldd. Prints the bundle's size.
set -euo pipefail

usage() { echo "usage: bundle-runtime.sh BUILD_DIR OUT_DIR" >&2; exit 2; }
[[ $# -eq 2 ]] || usage
build=$(cd "$1" && pwd)
out=$2
die() { echo "bundle-runtime: error: $*" >&2; exit 1; }

exe="$build/bin/cleave-runtime"
[[ -x "$exe" ]] || die "$exe is missing: build the cleave-runtime target first (cmake --build $1 --target cleave-runtime)"
plugin="$build/lib/libcleave_cuda.so"
for tool in patchelf strip ldd readelf; do
  command -v "$tool" >/dev/null || die "$tool is not installed (apt-get install -y ${tool/readelf/binutils})"
done

# Open MPI 4.1 and PMIx as Debian 12 installs them (openmpi-bin, libpmix2).
ompi_pkglib=/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
ompi_share=/usr/share/openmpi
ompi_etc=/etc/openmpi
pmix_root=/usr/lib/x86_64-linux-gnu/pmix2
orterun=$(command -v orterun || true)
orted=$(command -v orted || true)
[[ -n "$orterun" && -n "$orted" && -d "$ompi_pkglib" ]] ||
  die "Open MPI is not installed here (apt-get install -y openmpi-bin libopenmpi-dev)"
[[ -d "$pmix_root/lib/pmix" ]] || die "$pmix_root/lib/pmix is missing (apt-get install -y libpmix2)"

# Libraries the target machine provides: glibc, the C++ runtime, and CUDA's.
is_system() {
  case "$1" in
    linux-vdso.so.* | ld-linux*.so.* | libc.so.* | libm.so.* | libdl.so.* | libpthread.so.* | \
      librt.so.* | libutil.so.* | libresolv.so.* | libstdc++.so.* | libgcc_s.so.*) return 0 ;;
  esac
  return 1
}
is_cuda() {
  case "$1" in
    libcuda.so.* | libcudart.so.* | libcublas*.so.* | libcudnn*.so.* | libnccl.so.* | libnvrtc*.so.*) return 0 ;;
  esac
  return 1
}
# Libraries an Open MPI or PMIx plugin may pull in beyond those of the
# executables: Open MPI's own helpers, PMIx (the ext3x component) and munge.
# A plugin needing anything else (UCX, libfabric, verbs, PSM, libnuma, libnl,
# OpenSHMEM) cannot load on a bare machine and is left out.
plugin_extra='^(libmca_common_(sm|ompio|monitoring)|libpmix|libmunge)\.so'

rm -rf "$out"
mkdir -p "$out"/{bin,lib/openmpi3,lib/pmix,share/openmpi,share/pmix,etc}
out=$(cd "$out" && pwd)

# The non-system, non-CUDA libraries FILE needs, as "soname path" lines;
# fails on one the loader cannot find.
needed() {
  local lines
  lines=$(LD_LIBRARY_PATH= ldd "$1") || die "ldd $1 failed"
  awk '$2 == "=>" { print $1, $3 }' <<<"$lines" | while read -r name path; do
    is_system "$name" && continue
    is_cuda "$name" && continue
    [[ "$path" == "not" ]] && { echo "bundle-runtime: error: $1 needs $name, which is not found" >&2; echo "MISSING $name"; continue; }
    echo "$name $path"
  done
}

# Copies FILE to DEST (a file name), strips it and sets its RUNPATH.
install_elf() {
  local src=$1 dest=$2 rpath=$3
  cp -L "$src" "$dest"
  chmod u+w "$dest"
  strip --strip-unneeded "$dest" 2>/dev/null || true
  patchelf --set-rpath "$rpath" "$dest"
}

# Bundles the libraries FILE needs (recursively, through ldd's full list).
bundle_deps() {
  local name path
  while read -r name path; do
    [[ "$name" == MISSING ]] && die "$1 needs $path, which this machine lacks"
    [[ -e "$out/lib/$name" ]] && continue
    install_elf "$path" "$out/lib/$name" '$ORIGIN'
  done < <(needed "$1")
}

install_elf "$exe" "$out/bin/cleave-runtime" '$ORIGIN/../lib'
bundle_deps "$exe"
if [[ -f "$plugin" ]]; then
  # Keeps the plugin's own search path (the CUDA toolkit's directories) after
  # the bundle's.
  cuda_rpath=$(patchelf --print-rpath "$plugin")
  install_elf "$plugin" "$out/lib/libcleave_cuda.so" "\$ORIGIN${cuda_rpath:+:$cuda_rpath}"
  bundle_deps "$plugin"
else
  echo "bundle-runtime: warning: $plugin is missing: the bundle has no CUDA backend" >&2
fi
install_elf "$orterun" "$out/bin/orterun" '$ORIGIN/../lib'
install_elf "$orted" "$out/bin/orted" '$ORIGIN/../lib'
bundle_deps "$orterun"
bundle_deps "$orted"

# Plugins: kept when everything they need is bundled or may be.
left_out=()
keep_plugin() { # FILE DESTDIR
  local name path
  while read -r name path; do
    [[ "$name" == MISSING ]] && return 1
    [[ -e "$out/lib/$name" ]] && continue
    [[ "$name" =~ $plugin_extra ]] || return 1
  done < <(needed "$1" 2>/dev/null)
  install_elf "$1" "$2/$(basename "$1")" '$ORIGIN/..'
  bundle_deps "$1"
}
for p in "$ompi_pkglib"/*.so; do
  keep_plugin "$p" "$out/lib/openmpi3" || left_out+=("$(basename "$p")")
done
for p in "$pmix_root"/lib/pmix/*.so; do
  keep_plugin "$p" "$out/lib/pmix" || left_out+=("pmix/$(basename "$p")")
done
# PMIx itself is needed by the ext3x component (Open MPI's PMIx server).
[[ -e "$out/lib/openmpi3/mca_pmix_ext3x.so" ]] || die "the PMIx component mca_pmix_ext3x.so could not be bundled"
for lib in "$out"/lib/*.so*; do # libraries bundled for plugins need theirs
  bundle_deps "$lib"
done

cp -r "$ompi_share"/. "$out/share/openmpi/"
cp -r "$pmix_root"/share/pmix/. "$out/share/pmix/"
cp "$ompi_etc"/openmpi-mca-params.conf "$ompi_etc"/openmpi-default-hostfile "$out/etc/"
# PMIx's own file names its plugin directory by absolute path; the wrapper
# sets it instead.
echo "# PMIx settings of the cleave runtime bundle: bin/mpirun sets the plugin path." >"$out/etc/pmix-mca-params.conf"

cat >"$out/bin/mpirun" <<'EOF'
#!/bin/sh
# Open MPI's mpirun (orterun) relocated into this bundle: every installation
# directory Open MPI and PMIx would take from their build-time prefix is set
# relative to this script, and inherited by orted and the ranks.
bin=$(dirname "$(readlink -f "$0")")
root=$(dirname "$bin")
export OPAL_PREFIX="$root" OPAL_EXEC_PREFIX="$root" OPAL_BINDIR="$bin" OPAL_SBINDIR="$bin" \
  OPAL_LIBEXECDIR="$bin" OPAL_LIBDIR="$root/lib" OPAL_PKGLIBDIR="$root/lib/openmpi3" \
  OPAL_DATAROOTDIR="$root/share" OPAL_DATADIR="$root/share" OPAL_PKGDATADIR="$root/share/openmpi" \
  OPAL_SYSCONFDIR="$root/etc" OPAL_INCLUDEDIR="$root/include" OPAL_PKGINCLUDEDIR="$root/include"
export PMIX_PREFIX="$root" PMIX_EXEC_PREFIX="$root" PMIX_BINDIR="$bin" PMIX_LIBDIR="$root/lib" \
  PMIX_PKGLIBDIR="$root/lib/pmix" PMIX_DATAROOTDIR="$root/share" PMIX_DATADIR="$root/share" \
  PMIX_PKGDATADIR="$root/share/pmix" PMIX_SYSCONFDIR="$root/etc" \
  PMIX_MCA_mca_base_component_path="$root/lib/pmix"
export PATH="$bin:$PATH"
exec "$bin/orterun" "$@"
EOF
chmod +x "$out/bin/mpirun"

if [[ ${#left_out[@]} -gt 0 ]]; then
  echo "bundle-runtime: left out ${#left_out[@]} plugins needing libraries a bare machine lacks: ${left_out[*]}" >&2
fi
bytes=$(du -sb "$out" | cut -f1)
echo "bundle-runtime: wrote $out: $(du -sh "$out" | cut -f1) ($bytes bytes)"
