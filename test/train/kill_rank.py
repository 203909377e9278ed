"""Kills one rank of a data-parallel training job once it has written a
checkpoint, and checks that the job ends, non-zero, within seconds, naming
the rank, with no rank left; then that the last checkpoint is whole: it
resumes in PLAN_AFTER (another mesh) for one more step.

usage: kill_rank.py CLEAVE PLAN_DIR DATA RANKS VICTIM CHECKPOINT_DIR PLAN_AFTER
"""
import json
import os
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "run"))
from kill_rank import rank_processes  # noqa: E402


def main(cleave, plan, data, ranks, victim, checkpoints, plan_after):
    ranks, victim = int(ranks), int(victim)
    job = subprocess.Popen([cleave, "train", "--local", str(ranks), plan, "--data", data,
                            "--steps", "100000000", "--checkpoint", checkpoints,
                            "--checkpoint-every", "20", "-q"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 60
    latest = os.path.join(checkpoints, "latest")
    while (len(rank_processes(plan, "train")) < ranks or not os.path.exists(latest)) \
            and time.time() < deadline and job.poll() is None:
        time.sleep(0.2)
    running = rank_processes(plan, "train")
    if len(running) < ranks or not os.path.exists(latest):
        job.kill()
        print(f"{len(running)} of {ranks} ranks started, checkpoint: {os.path.exists(latest)}")
        print(job.communicate()[0])
        sys.exit(1)
    pid = next(p for p, r in running.items() if r == victim)
    os.kill(pid, signal.SIGKILL)
    killed = time.time()
    try:
        output, _ = job.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        job.kill()
        print("the job hung after a rank was killed")
        sys.exit(1)
    seconds = time.time() - killed
    left = rank_processes(plan, "train")
    print(f"killed rank {victim}: job ended with exit {job.returncode} "
          f"{'within 10 s' if seconds < 10 else f'after {seconds:.1f} s'}; ranks left: {len(left)}")
    print(output)

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
