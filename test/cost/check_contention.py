"""Checks for contention.test: the measured contention of a profiled spec,
specs with and without a contention, and the predicted forward of two plans."""
import json
import os
import sys


def measured(path):
    spec = json.load(open(path))
    c = spec["contention"]
    raw = spec["measurements"]["contention"]
    ratios = all(0 < raw[k]["ratio"] <= 1 and raw[k]["alone_per_s"] > 0 and
                 raw[k]["all_busy_per_s"] > 0 for k in ("memory", "gemm"))
    print(f"contention devices {c['devices']}, bandwidth within the device's "
          f"{0 < c['memory_bandwidth'] <= spec['device']['memory_bandwidth']}, "
          f"scale in (0, 1] {0 < c['compute_scale'] <= 1}, raw ratios {ratios}")


def no_workers():
    count = 0
    for pid in os.listdir("/proc"):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                count += b"profile-load-worker" in f.read()
        except OSError:
            pass
    print(f"load workers running: {count}")


def specs(base, with_path, without_path):
    spec = json.load(open(base))
    spec["devices_per_node"] = 2
    spec.pop("contention", None)
    json.dump(spec, open(without_path, "w"))
    spec["contention"] = {"devices": 2, "memory_bandwidth": spec["device"]["memory_bandwidth"] / 2,
                          "compute_scale": 0.5}
    json.dump(spec, open(with_path, "w"))


def ratio(with_path, without_path):
    def forward(path):
        return sum(s["per_microbatch_seconds"]["forward"] for s in json.load(open(path))["stages"])
    # Kernel overheads do not scale, so the ratio is a little under 2.
    print(f"forward with contention over without: {forward(with_path) / forward(without_path):.1f}")


if __name__ == "__main__":
    {"measured": measured, "no-workers": no_workers, "specs": specs, "ratio": ratio}[sys.argv[1]](
        *sys.argv[2:])
