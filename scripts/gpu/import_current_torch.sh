#!/bin/sh
# Unpacks the archives of scripts/gpu/export_current_torch.py (run on the GPU machine) in DIR and
# checks every model with cleave here: torch 1.13 loads it, cleave imports, compiles, runs it on
# the CPU and matches the exporter's outputs. Options: see import_current_torch.py --help.
# usage: scripts/gpu/import_current_torch.sh DIR [--cleave PATH] [--tol T] [--models a,b]
exec /usr/bin/python3 "$(dirname "$0")/import_current_torch.py" "$@"
