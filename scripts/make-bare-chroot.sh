#!/usr/bin/env bash
# make-bare-chroot.sh DIR
#
# Creates (once) a bare Debian 12 (bookworm) root file system in DIR with
# `debootstrap --variant=minbase`: the machine the runtime bundle must run on
# (no Open MPI, no oneDNN, no Python). A finished chroot is marked by
# DIR/.cleave-bare-chroot-ok and reused; a half-made one is removed and made
# again.
#
# The mirror is the first bookworm source of this machine's apt
# configuration, read at run time; without one, debootstrap's default.
# Needs root and debootstrap (apt-get install -y debootstrap).
#
# Exit status: 0 made or cached; 2 cannot be made here (no root, no
# debootstrap, no network): the reason is on stderr.
set -euo pipefail

dir=${1:?usage: make-bare-chroot.sh DIR}
stamp="$dir/.cleave-bare-chroot-ok"
if [[ -f "$stamp" ]]; then
  exit 0
fi
if [[ $(id -u) -ne 0 ]]; then
  echo "make-bare-chroot: needs root (debootstrap and chroot)" >&2
  exit 2
fi
if ! command -v debootstrap >/dev/null 2>&1 && [[ ! -x /usr/sbin/debootstrap ]]; then
  echo "make-bare-chroot: debootstrap is not installed (apt-get install -y debootstrap)" >&2
  exit 2
fi
PATH=$PATH:/usr/sbin:/sbin

# The first bookworm (not -security/-updates) mirror of this machine's apt
# sources, one-line or deb822 format.
mirror=""
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [[ -f "$f" ]] || continue
  mirror=$(awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z]+:\/\//) { if ($(i+1) == "bookworm") { print $i; exit } break } }' "$f")
  [[ -n "$mirror" ]] && break
done
if [[ -z "$mirror" ]]; then
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f "$f" ]] || continue
    mirror=$(awk 'BEGIN { RS = ""; FS = "\n" }
      { uri = ""; ok = 0
        for (i = 1; i <= NF; i++) {
          if ($i ~ /^URIs:/) { split($i, a, /[ \t]+/); uri = a[2] }
          if ($i ~ /^Suites:/ && $i ~ /[ \t]bookworm([ \t]|$)/) ok = 1
        }
        if (ok && uri != "") { print uri; exit } }' "$f")
    [[ -n "$mirror" ]] && break
  done
fi

rm -rf "$dir"
mkdir -p "$(dirname "$dir")"
log="$dir.debootstrap.log"
echo "make-bare-chroot: debootstrap --variant=minbase bookworm $dir ${mirror:-(default mirror)} (log: $log)" >&2
if ! debootstrap --variant=minbase bookworm "$dir" ${mirror:+"$mirror"} >"$log" 2>&1; then
  tail -5 "$log" >&2
  rm -rf "$dir"
  echo "make-bare-chroot: debootstrap failed (no network or no mirror?); see $log" >&2
  exit 2
fi
touch "$stamp"
echo "make-bare-chroot: made $dir ($(du -sh "$dir" | cut -f1))" >&2
