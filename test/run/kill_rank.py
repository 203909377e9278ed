"""Kills one rank of a running multi-device job and checks that the whole
job ends, non-zero, within seconds, naming the rank, with no rank left.

usage: kill_rank.py CLEAVE PLAN_DIR INPUTS RANKS VICTIM
"""
import os
import signal
import subprocess
import sys
import time


def rank_processes(plan, command="run"):
    """pid -> world rank of the ranks of this job running `cleave COMMAND PLAN`
    (mpirun sets OMPI_COMM_WORLD_RANK)."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
            env = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        args = [a.decode(errors="replace") for a in cmdline]
        if command not in args or plan not in args or "--local" in args:
            continue
        for entry in env:
            if entry.startswith(b"OMPI_COMM_WORLD_RANK="):
                found[int(pid)] = int(entry.split(b"=", 1)[1])
    return found


def kill_and_wait(job, plan, command, ranks, victim, ready=lambda: True):
    """Waits until `ranks` ranks of `cleave COMMAND PLAN` run and `ready()` holds, kills rank
    `victim`, and checks that the job ends within seconds; prints what happened and the job's
    output. Exits 1 if the ranks never start or the job hangs."""
    deadline = time.time() + 60
    while (len(rank_processes(plan, command)) < ranks or not ready()) \
            and time.time() < deadline and job.poll() is None:
        time.sleep(0.2)
    running = rank_processes(plan, command)
    if len(running) < ranks or not ready():
        job.kill()
        print(f"{len(running)} of {ranks} ranks started, ready: {ready()}")
        print(job.communicate()[0])
        sys.exit(1)
    time.sleep(1)  # let every rank get into its schedule
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
    left = rank_processes(plan, command)
    print(f"killed rank {victim}: job ended with exit {job.returncode} "
          f"{'within 10 s' if seconds < 10 else f'after {seconds:.1f} s'}; ranks left: {len(left)}")
    print(output)


def main(cleave, plan, inputs, ranks, victim):
    ranks, victim = int(ranks), int(victim)
    job = subprocess.Popen([cleave, "run", "--local", str(ranks), plan, "--inputs", inputs,
                            "--outputs", os.devnull + ".never", "--repeat", "100000000"],
                           stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    kill_and_wait(job, plan, "run", ranks, victim)


if __name__ == "__main__":
    if len(sys.argv) != 6:
        print(__doc__)
        sys.exit(2)
    main(*sys.argv[1:])
