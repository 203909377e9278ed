"""Checks a Chrome trace written by `cleave inspect --trace` against the Trace
Event Format (the JSON Object Format with complete "X" and metadata "M"
events) and against what a schedule's timeline must satisfy.

usage: check_trace.py TRACE.json --ranks N --slots-per-rank K
Prints one summary line; exits 1 with the first problem found.
"""
import argparse
import json
import re
import sys


def fail(message):
    sys.exit(f"check_trace: {message}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--slots-per-rank", type=int, required=True)
    args = ap.parse_args()
    with open(args.trace) as f:
        doc = json.load(f)
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        fail("the top level must be an object with a traceEvents list")
    if doc.get("displayTimeUnit", "ms") not in ("ms", "ns"):
        fail("displayTimeUnit must be ms or ns")

    names, slots = {}, {}
    for i, e in enumerate(doc["traceEvents"]):
        where = f"traceEvents[{i}]"
        if not isinstance(e, dict) or e.get("ph") not in ("X", "M"):
            fail(f"{where}: ph must be X or M")
        for key, kind in (("name", str), ("pid", int), ("tid", int)):
            if not isinstance(e.get(key), kind):
                fail(f"{where}: {key} must be a {kind.__name__}")
        if e["ph"] == "M":
            if e["name"] not in ("process_name", "process_sort_index", "thread_name"):
                fail(f"{where}: unknown metadata event {e['name']}")
            if not isinstance(e.get("args"), dict):
                fail(f"{where}: metadata needs args")
            if e["name"] == "process_name":
                m = re.fullmatch(r"rank (\d+) \(stage \d+, tp \d+, dp \d+\)", str(e["args"].get("name")))
                if not m or int(m.group(1)) != e["pid"]:
                    fail(f"{where}: process_name {e['args'].get('name')!r} does not name rank {e['pid']}")
                names[e["pid"]] = e["args"]["name"]
            continue
        for key in ("ts", "dur"):
            if not isinstance(e.get(key), (int, float)) or e[key] < 0:
                fail(f"{where}: {key} must be a non-negative number of microseconds")
        if e["dur"] == 0:
            fail(f"{where}: a slot takes time")
        m = re.fullmatch(r"([FB]) mb(\d+) chunk(\d+)", e["name"])
        if not m:
            fail(f"{where}: name {e['name']!r} is not 'F mbM chunkC'")
        slots.setdefault(e["pid"], []).append((e["ts"], e["ts"] + e["dur"], m.group(1), int(m.group(2)), int(m.group(3))))

    if sorted(names) != list(range(args.ranks)):
        fail(f"process_name for ranks {sorted(names)}, expected 0..{args.ranks - 1}")
    if sorted(slots) != list(range(args.ranks)):
        fail(f"slots on ranks {sorted(slots)}, expected 0..{args.ranks - 1}")
    ends = {}
    for pid, events in slots.items():
        if len(events) != args.slots_per_rank:
            fail(f"rank {pid} has {len(events)} slots, expected {args.slots_per_rank}")
        events.sort()
        for a, b in zip(events, events[1:]):
            if b[0] < a[1] - 1e-6:
                fail(f"rank {pid}: slot at {b[0]} us starts before the previous one ends at {a[1]} us")
        for start, end, phase, mb, chunk in events:
            ends.setdefault((phase, mb, chunk), []).append((start, end))
    # A forward of chunk c starts after chunk c-1 of the same microbatch ended somewhere.
    for (phase, mb, chunk), runs in ends.items():
        if phase == "F" and chunk > 0:
            before = ends.get(("F", mb, chunk - 1))
            if not before:
                fail(f"F mb{mb} chunk{chunk} runs but chunk{chunk - 1} never does")
            if min(s for s, _ in runs) < min(e for _, e in before) - 1e-6:
                fail(f"F mb{mb} chunk{chunk} starts before chunk{chunk - 1} ends")
    span = max(e for events in slots.values() for _, e, *_ in events)
    print(f"trace ok: {len(names)} ranks, {sum(map(len, slots.values()))} slots, span {span:.1f} us")


if __name__ == "__main__":
    main()
