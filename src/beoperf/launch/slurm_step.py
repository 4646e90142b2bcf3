"""Cancel the Slurm job steps an srun created: ``python -I -S slurm_step.py SRUN_PID``.

The guard (:mod:`beoperf.launch.guard`) runs this when it stops a job whose command is
srun (beoperf stopped the job, or died, SIGKILL included): ending srun's process tree
here is not always enough to end its step, whose tasks run under slurmd on the nodes (an
srun that is stopped, hung or killed outright does not tell Slurm).  Slurm records each
step's srun as ``SrunHost:Pid`` (``scontrol -o show step``); every step whose srun is this
host's SRUN_PID is cancelled with ``scancel JOBID.STEPID``, each command bounded in time.
This file is run as a script, standard library only (as the guard is), and prints
nothing: beoperf may be gone.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys

COMMAND_TIMEOUT_S = 4.0  # for scontrol, and for each scancel
OUTPUT_LIMIT = 4 * 1024 * 1024  # of scontrol's listing read
_STEP = re.compile(r"(?:^|\s)StepId=(\d+\.\d+)(?:\s|$)")
_SRUN = re.compile(r"(?:^|\s)SrunHost:Pid=(\S+):(\d+)(?:\s|$)")


def steps_of(listing: str, host: str, pid: int) -> list[str]:
    """The steps (``JOBID.STEPID``) of ``scontrol -o show step``'s one-line-per-step
    ``listing`` whose srun is ``pid`` on ``host`` (a short host name)."""
    found = []
    for line in listing.splitlines():
        step, srun = _STEP.search(line), _SRUN.search(line)
        if step is None or srun is None:
            continue
        if int(srun.group(2)) == pid and srun.group(1).split(".")[0] == host:
            found.append(step.group(1))
    return found


def _run(argv: list[str]) -> str:
    """``argv``'s standard output ('' when it cannot run or runs too long)."""
    try:
        done = subprocess.run(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, timeout=COMMAND_TIMEOUT_S,
                              env={**os.environ, "LC_ALL": "C"})
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout[:OUTPUT_LIMIT].decode(errors="replace")


def main(argv: list[str]) -> int:
    if len(argv) != 1 or not argv[0].isdigit():
        return 2
    host = socket.gethostname().split(".")[0]
    for step in steps_of(_run(["scontrol", "-o", "show", "step"]), host, int(argv[0])):
        _run(["scancel", "--quiet", step])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
