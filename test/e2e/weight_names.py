"""Prints the name of every weight a plan's programs hold, one per line, sorted: the tensors
of each program's weights file (the safetensors header), read through the manifest.

usage: weight_names.py PLAN_DIR
"""
import json
import os
import struct
import sys


def main(plan):
    manifest = json.load(open(os.path.join(plan, "manifest.json")))
    names = set()
    for entry in manifest["programs"].values():
        with open(os.path.join(plan, entry["weights"]), "rb") as f:
            size = struct.unpack("<Q", f.read(8))[0]
            header = json.loads(f.read(size))
        names.update(k for k in header if k != "__metadata__")
    for name in sorted(names):
        print(name)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
