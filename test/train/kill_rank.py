"""Kills one rank of a data-parallel training job once it has written a
checkpoint, and checks that the job ends, non-zero, within seconds, naming
the rank, with no rank left; then that the last checkpoint is whole: it
resumes in PLAN_AFTER (another mesh) for one more step.

usage: kill_rank.py CLEAVE PLAN_DIR DATA RANKS VICTIM CHECKPOINT_DIR PLAN_AFTER
"""
import json
import os
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "run"))
from kill_rank import kill_and_wait  # noqa: E402


def main(cleave, plan, data, ranks, victim, checkpoints, plan_after):
    ranks, victim = int(ranks), int(victim)
    job = subprocess.Popen([cleave, "train", "--local", str(ranks), plan, "--data", data,
                            "--steps", "100000000", "--checkpoint", checkpoints,
                            "--checkpoint-every", "20", "-q"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    latest = os.path.join(checkpoints, "latest")
    kill_and_wait(job, plan, "train", ranks, victim, ready=lambda: os.path.exists(latest))

    with open(latest) as f:
        name = f.read().strip()
    with open(os.path.join(checkpoints, name, "checkpoint.json")) as f:
        step = json.load(f)["step"]
    resumed = subprocess.run([cleave, "train", plan_after, "--data", data, "--steps",
                              str(step + 1), "--resume", checkpoints, "-q"],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    print(f"resumed {name} (step {step}) in {os.path.basename(plan_after)}: "
          f"exit {resumed.returncode}")
    print(resumed.stdout)


if __name__ == "__main__":
    if len(sys.argv) != 8:
        print(__doc__)
        sys.exit(2)
    main(*sys.argv[1:])
