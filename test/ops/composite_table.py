"""Checks that docs/ops.md's decomposition table names every composite op of
dialects/cleave/CleaveCompositeOps.td (first column, in backquotes); prints the missing ones."""
import re
import sys

td, doc = sys.argv[1], sys.argv[2]
ops = re.findall(r'^def Cleave_\w+ : Cleave_Composite\w*<"(\w+)"', open(td).read(), re.M)
ops += re.findall(r'^def Cleave_\w+ : Cleave_CompositeOp<"(\w+)"', open(td).read(), re.M)
rows = [line.split("|")[1] for line in open(doc) if line.startswith("| `")]
named = set(re.findall(r"`(\w+)`", " ".join(rows)))
missing = sorted(set(ops) - named)
print(f"{len(set(ops))} composite ops, {len(missing)} missing from the table")
for op in missing:
    print(f"missing: {op}")
sys.exit(1 if missing or not ops else 0)
