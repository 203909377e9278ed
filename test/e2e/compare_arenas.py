"""Prints whether the fused plan's arena (first manifest) is smaller than the unfused one's."""
import json
import sys


def arena(path):
    with open(path) as f:
        return sum(p["arena_bytes"] for p in json.load(f)["programs"].values())


fused, unfused = arena(sys.argv[1]), arena(sys.argv[2])
print(f"arena fused {fused} < unfused {unfused}: {'ok' if fused < unfused else 'NOT SMALLER'}")
