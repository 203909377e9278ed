"""Checks of `cleave inspect --json` on spilled plans and job plan directories, against the
plan files themselves (never against formatted text).

usage:
  inspect_checks.py spill INSPECT.json PLAN_DIR
      a spilled plan: the spilled parameters are the weights in the host pool of
      programs/*.json, their layers the strategy's spilled layers (when it has them) and
      their bytes the tensors'; host_bytes the manifest's; host_by_category the manifest's
      prediction; the prefetches and spills (in all and per phase) the instructions counted
  inspect_checks.py resident INSPECT.json
      a plan that does not spill says nothing of spilling
  inspect_checks.py job INSPECT.json JOBDIR
      a job plan: its devices, models (steps, step time, devices, slices, memory and whether
      spilled, from each model's manifest) and rounds are job.json's; each slice lasts its
      steps x its step time, each round its longest slice, starting when the one before ends;
      per device the models its slices run; the predicted makespan is job.json's
  inspect_checks.py trace TRACE.json INSPECT.json
      the job's Chrome trace: one complete event per slice, on its device, at its round's start,
      as long as the slice, named MODEL [FIRST..LAST]; a device's events never overlap
  inspect_checks.py fails EXPECTED -- COMMAND...
      COMMAND exits with status 1 and its standard error has EXPECTED
"""

import glob
import json
import math
import os
import subprocess
import sys

DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "i64": 8, "i32": 4, "bool": 1, "u8": 1, "i8": 1}


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def close(a, b):
    return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-15)


def layer_of(name):
    """The parameter's module path cut after its first numeric component."""
    parts = name.split("[")[0].split(".")[:-1]
    if not parts:
        return "(root)"
    layer = []
    for part in parts:
        layer.append(part)
        if part.isdigit():
            break
    return ".".join(layer)


def count_copies(program):
    """[(phase, prefetches, spills)] of a program file."""
    return [(p["name"], sum(i["kernel"] == "prefetch" for i in p["instructions"]),
             sum(i["kernel"] == "spill" for i in p["instructions"])) for p in program["phases"]]


def check_spill(inspect_path, plan_dir):
    j = json.load(open(inspect_path))
    manifest = json.load(open(os.path.join(plan_dir, "manifest.json")))
    if "spill" not in j:
        fail("no spill in the inspection of a spilled plan")
    spill = j["spill"]
    names, layers, prefetches, spills = [], [], 0, 0
    for entry in j["programs"]:
        name = entry["name"]
        program = json.load(open(os.path.join(plan_dir, manifest["programs"][name]["file"])))
        mine = entry["spill"]
        # The weights in the host pool, once each, in buffer order, with their bytes.
        host = {}
        for b in program["buffers"]:
            if "weight" in b and b.get("pool") == "host" and b["weight"] not in host:
                host[b["weight"]] = math.prod(b["shape"]) * DTYPE_BYTES[b["dtype"]]
        got = [(p["name"], p["bytes"], p["layer"]) for p in mine["spilled_parameters"]]
        want = [(n, bytes_, layer_of(n)) for n, bytes_ in host.items()]
        if got != want:
            fail(f"{name}: spilled parameters {got[:4]}..., the host pool's weights {want[:4]}...")
        by_layer = {}
        for n, bytes_ in host.items():
            by_layer.setdefault(layer_of(n), []).append((n, bytes_))
        got_layers = {l["layer"]: (l["parameters"], l["parameter_bytes"])
                      for l in mine["spilled_layers"]}
        want_layers = {l: ([n for n, _ in ps], sum(b for _, b in ps)) for l, ps in by_layer.items()}
        if got_layers != want_layers:
            fail(f"{name}: spilled layers {got_layers}, expected {want_layers}")
        host_states = {}
        for b in program["buffers"]:
            if "state" in b and b.get("pool") == "host":
                host_states[b["state"]] = math.prod(b["shape"]) * DTYPE_BYTES[b["dtype"]]
        attributed = sum(l["host_state_bytes"] for l in mine["spilled_layers"])
        if attributed + mine["other_host_state_bytes"] != sum(host_states.values()):
            fail(f"{name}: host states {attributed} + {mine['other_host_state_bytes']} bytes, "
                 f"the program's {sum(host_states.values())}")
        host_bytes = manifest["programs"][name].get("host_bytes", 0)
        if mine["host_bytes"] != host_bytes or \
                mine["host_weight_bytes"] + mine["host_state_bytes"] != host_bytes:
            fail(f"{name}: host_bytes {mine['host_bytes']}, the manifest's {host_bytes}")
        if mine["host_state_bytes"] != program.get("host_state_bytes", 0):
            fail(f"{name}: host_state_bytes {mine['host_state_bytes']}")
        m = manifest["programs"][name]
        device = m["arena_bytes"] + m["weight_bytes"] + m.get("state_bytes", 0)
        if mine["device_bytes"] != device:
            fail(f"{name}: device_bytes {mine['device_bytes']}, the manifest's regions {device}")
        copies = count_copies(program)
        got_copies = [(p["phase"], p["prefetches"], p["spills"]) for p in mine["phases"]]
        if got_copies != copies:
            fail(f"{name}: copies per phase {got_copies}, the program's {copies}")
        if mine["prefetches"] != sum(c[1] for c in copies) or \
                mine["spills"] != sum(c[2] for c in copies):
            fail(f"{name}: {mine['prefetches']} prefetches and {mine['spills']} spills")
        names += list(host)
        layers += list(by_layer)
        prefetches += sum(c[1] for c in copies)
        spills += sum(c[2] for c in copies)
    # The plan-level summary.
    if [p["name"] for p in spill["spilled_parameters"]] != names:
        fail("plan-level spilled_parameters differ from the programs'")
    if [l["layer"] for l in spill["spilled_layers"]] != layers:
        fail("plan-level spilled_layers differ from the programs'")
    manifest_host = sum(p.get("host_bytes", 0) for p in manifest["programs"].values())
    if spill["host_bytes"] != manifest_host or not manifest_host:
        fail(f"host_bytes {spill['host_bytes']}, the manifest's {manifest_host}")
    predicted = manifest["predicted"]["memory_bytes"]
    if spill["host_by_category"] != predicted.get("host_by_category", {}):
        fail(f"host_by_category {spill['host_by_category']}, the manifest's "
             f"{predicted.get('host_by_category')}")
    if spill["prefetches"] != prefetches or spill["spills"] != spills or not prefetches:
        fail(f"{spill['prefetches']} prefetches and {spill['spills']} spills, counted "
             f"{prefetches} and {spills}")
    if spill["memory_budget_bytes"] != manifest["predicted"].get("memory_budget_bytes"):
        fail("memory_budget_bytes is not the manifest's")
    strategy = os.path.join(plan_dir, "strategy.json")
    if os.path.exists(strategy):
        planned = [l for s in json.load(open(strategy))["stages"] for l in s.get("spilled", [])]
        if planned and sorted(planned) != sorted(set(layers)):
            fail(f"spilled layers {layers}, the planner's {planned}")
    print(f"{len(names)} spilled parameters in {len(set(layers))} layers, host {manifest_host} "
          f"bytes, {prefetches} prefetches and {spills} spills: ok")


def check_resident(inspect_path):
    j = json.load(open(inspect_path))
    if "spill" in j or any("spill" in p for p in j["programs"]):
        fail("a plan that does not spill has spill fields")
    print("resident: ok")


def check_job(inspect_path, job_dir):
    j = json.load(open(inspect_path))
    job = json.load(open(os.path.join(job_dir, "job.json")))
    if j["device_count"] != job["devices"] or j["slice_steps"] != job["slice_steps"]:
        fail(f"devices {j['device_count']}, slice_steps {j['slice_steps']}")
    if [m["name"] for m in j["models"]] != [m["name"] for m in job["models"]]:
        fail("the models are not job.json's")
    # Each model from job.json and its plan.
    step, spilled = {}, 0
    for got, want in zip(j["models"], job["models"]):
        name = want["name"]
        manifest = json.load(open(os.path.join(job_dir, want["plan"], "manifest.json")))
        (program,) = manifest["programs"].values()
        s = want.get("predicted_step_seconds")
        if s is None:
            s = manifest["predicted"]["step_seconds"]
        step[name] = s
        devices = sorted({e["device"] for r in job["rounds"] for e in r if e["model"] == name})
        slices = sum(e["model"] == name for r in job["rounds"] for e in r)
        host = program.get("host_bytes", 0)
        device = program["arena_bytes"] + program["weight_bytes"] + program.get("state_bytes", 0)
        checks = {"steps": want["steps"], "devices": devices, "slices": slices,
                  "host_bytes": host, "device_bytes": device, "spilled": host > 0,
                  "memory_budget_bytes": manifest["predicted"].get("memory_budget_bytes")}
        for key, value in checks.items():
            if got[key] != value:
                fail(f"model {name}: {key} {got[key]}, expected {value}")
        if not close(got["predicted_step_seconds"], s):
            fail(f"model {name}: predicted_step_seconds {got['predicted_step_seconds']}, {s}")
        if (got["spill"] is not None) != (host > 0):
            fail(f"model {name}: spill {got['spill'] is not None}, host_bytes {host}")
        if host > 0:
            spilled += 1
            if got["spill"]["host_by_category"] != \
                    manifest["predicted"]["memory_bytes"].get("host_by_category", {}):
                fail(f"model {name}: host_by_category is not its manifest's")
    # The rounds: job.json's slices, each lasting its steps x its step time.
    if len(j["rounds"]) != len(job["rounds"]):
        fail(f"{len(j['rounds'])} rounds, job.json has {len(job['rounds'])}")
    clock = 0.0
    for r, (got, want) in enumerate(zip(j["rounds"], job["rounds"])):
        key = ("device", "model", "first_step", "last_step")
        if [tuple(e[k] for k in key) for e in got["slices"]] != \
                [tuple(e[k] for k in key) for e in want]:
            fail(f"round {r}: slices {got['slices']}, job.json's {want}")
        longest = 0.0
        for e in got["slices"]:
            seconds = (e["last_step"] - e["first_step"] + 1) * step[e["model"]]
            if not close(e["seconds"], seconds):
                fail(f"round {r}: {e['model']} takes {e['seconds']}, expected {seconds}")
            longest = max(longest, seconds)
        if not close(got["seconds"], longest) and not (got["seconds"] == longest == 0):
            fail(f"round {r}: {got['seconds']} s, its longest slice {longest}")
        if not close(got["start_seconds"], clock) and not (got["start_seconds"] == clock == 0):
            fail(f"round {r}: starts at {got['start_seconds']}, the rounds before end at {clock}")
        clock += longest
    # The devices: the models their slices run.
    for d in range(job["devices"]):
        dev = j["devices"][d]
        models = []
        for r in job["rounds"]:
            for e in r:
                if e["device"] == d and e["model"] not in models:
                    models.append(e["model"])
        if dev["device"] != d or [m["model"] for m in dev["models"]] != models:
            fail(f"device {d}: models {[m['model'] for m in dev['models']]}, expected {models}")
        busy = sum((e["last_step"] - e["first_step"] + 1) * step[e["model"]]
                   for r in job["rounds"] for e in r if e["device"] == d)
        if not close(dev["busy_seconds"], busy) and not (dev["busy_seconds"] == busy == 0):
            fail(f"device {d}: busy {dev['busy_seconds']}, expected {busy}")
    p = j["predicted"]
    if not close(p["rounds_seconds"], clock):
        fail(f"rounds_seconds {p['rounds_seconds']}, the rounds sum to {clock}")
    want = job.get("predicted") or {}
    for key in ("makespan_seconds", "sequential_seconds"):
        if p[key] != want.get(key):
            fail(f"predicted {key} {p[key]}, job.json's {want.get(key)}")
    print(f"{len(j['models'])} models ({spilled} spilled) in {len(j['rounds'])} rounds on "
          f"{j['device_count']} devices: ok")


def check_trace(trace_path, inspect_path):
    trace = json.load(open(trace_path))
    j = json.load(open(inspect_path))
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    slices = [(r, e) for r in j["rounds"] for e in r["slices"]]
    if len(events) != len(slices):
        fail(f"{len(events)} complete events for {len(slices)} slices")
    for event, (r, s) in zip(events, slices):
        name = f"{s['model']} [{s['first_step']}..{s['last_step']}]"
        if event["name"] != name or event["pid"] != s["device"]:
            fail(f"event {event['name']} on {event['pid']}, slice {name} on {s['device']}")
        if abs(event["ts"] - r["start_seconds"] * 1e6) > 1e-2 or \
                abs(event["dur"] - s["seconds"] * 1e6) > 1e-2:
            fail(f"event {name} at {event['ts']} for {event['dur']} us, the slice at "
                 f"{r['start_seconds']} for {s['seconds']} s")
    for d in range(j["device_count"]):
        mine = sorted((e["ts"], e["dur"]) for e in events if e["pid"] == d)
        for (a, da), (b, _) in zip(mine, mine[1:]):
            if a + da > b + 1e-2:
                fail(f"device {d}: events at {a} and {b} overlap")
    names = {e["pid"]: e["args"]["name"] for e in trace["traceEvents"]
             if e["ph"] == "M" and e["name"] == "process_name"}
    if names != {d: f"device {d}" for d in range(j["device_count"])}:
        fail(f"process names {names}")
    print(f"trace: {len(events)} slices: ok")


def check_fails(expected, command):
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 1:
        fail(f"{' '.join(command)}: exit status {done.returncode}, expected 1")
    if expected not in done.stderr:
        fail(f"{' '.join(command)}: stderr {done.stderr!r} lacks {expected!r}")
    if done.stdout:
        fail(f"{' '.join(command)}: printed {done.stdout[:200]!r} before failing")
    print("fails: " + done.stderr.strip().splitlines()[0])


def main(argv):
    if len(argv) >= 3 and argv[0] == "spill":
        check_spill(argv[1], argv[2])
    elif len(argv) == 2 and argv[0] == "resident":
        check_resident(argv[1])
    elif len(argv) == 3 and argv[0] == "job":
        check_job(argv[1], argv[2])
    elif len(argv) == 3 and argv[0] == "trace":
        check_trace(argv[1], argv[2])
    elif len(argv) >= 4 and argv[0] == "fails" and argv[2] == "--":
        check_fails(argv[1], argv[3:])
    else:
        print(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main(sys.argv[1:])
