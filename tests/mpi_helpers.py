"""Running real MPI in tests: bounded, and nothing left behind.

Every MPI job a test starts runs in its own process group (``start_new_session``) with a
timeout; on the timeout the whole group is killed by its id (the launcher and the ranks it
started here) and the test fails with what the job printed: a hung rank (MPICH was seen to
hang in MPI_Finalize over a veth) fails its test instead of holding CI.  Each job's command
carries a unique token (``BEOPERF_TEST_TOKEN``) so that a test can check that no process of
its job outlived it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

PYTHON = sys.executable
IMPLEMENTATIONS = {"openmpi": "mpirun.openmpi", "mpich": "mpirun.mpich"}


def require_mpi(implementation: str) -> None:
    """Skip (with what to install) when an MPI or mpi4py is missing."""
    if shutil.which(IMPLEMENTATIONS[implementation]) is None:
        pytest.skip(f"needs {IMPLEMENTATIONS[implementation]} (apt-get install "
                    f"{'openmpi-bin' if implementation == 'openmpi' else 'mpich'})")
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        pytest.skip("needs mpi4py (pip install mpi4py)")


@dataclass
class Finished:
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def document(self) -> dict:
        """The JSON document beoperf printed (--json), checked against its schema."""
        from helpers import checked

        assert self.returncode == 0, self.stderr[-3000:]
        return checked(json.loads(self.stdout))


def run_bounded(argv: list[str], timeout: float, env: dict[str, str] | None = None,
                **popen) -> Finished:
    """Run ``argv`` in a new process group; kill the group and fail on the timeout."""
    token = uuid.uuid4().hex
    started = time.monotonic()
    proc = subprocess.Popen(argv, env={**os.environ, **(env or {}), "BEOPERF_TEST_TOKEN": token},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True, stdin=subprocess.DEVNULL, **popen)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        out, err = proc.communicate()
        pytest.fail(f"{' '.join(argv[:6])} ... did not end within {timeout} s (killed); "
                    f"stderr: {err[-2000:]}")
    finally:
        if proc.poll() is None:
            kill_group(proc)
    assert not survivors(token), f"processes of the job outlived it: {survivors(token)}"
    return Finished(proc.returncode, out, err, time.monotonic() - started)


def kill_group(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)


def survivors(token: str) -> list[int]:
    """PIDs of live processes whose environment carries ``token``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if f"BEOPERF_TEST_TOKEN={token}".encode() in environ and state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


def comm(pid: int) -> str:
    """A process's command name ('' once it is gone)."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def cmdline(pid: int) -> str:
    """A process's command line, its words joined by spaces ('' once it is gone)."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def named(token: str, name: str) -> list[int]:
    """The live processes carrying ``token`` whose command name starts with ``name``."""
    return [pid for pid in survivors(token) if comm(pid).startswith(name)]


def beoperf(*args: str) -> list[str]:
    return [PYTHON, "-m", "beoperf", *args]


def write_agent(path: Path, hosts) -> str:
    """An rsh/ssh-like agent for mpirun: ``AGENT [-opts] HOST COMMAND...`` runs COMMAND
    (joined, through sh as ssh would) inside the namespace of the host with that
    address, with a temporary directory of its own (TMPDIR): separate machines have
    separate /tmp, and Open MPI daemons of one job on one machine, all named after its
    host name, raced for the same session directory (orte_session_dir failed, "ORTE does
    not know how to route a message", or mpirun's SIGSEGV in hwloc's shared topology) in
    about one start in ten with four hosts."""
    for h in hosts:
        (path.parent / f"tmp-{h.name}").mkdir(mode=0o700, exist_ok=True)
    cases = "\n".join(f"  {h.addr4}) ns={h.name}; tmp={path.parent / f'tmp-{h.name}'};;"
                      for h in hosts)
    path.write_text(f"""#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in -*) shift;; *) break;; esac; done
host=$1; shift
case "$host" in
{cases}
  *) echo "agent: unknown host $host" >&2; exit 255;;
esac
TMPDIR=$tmp exec ip netns exec "$ns" env TMPDIR="$tmp" sh -c "$*"
""")
    path.chmod(0o755)
    return str(path)


def write_netns_agent(path: Path) -> str:
    """Open MPI's rsh agent for hosts named by their network namespace (HPCC's hosts are
    the lab hosts' names): ``AGENT HOST COMMAND...`` runs COMMAND inside namespace HOST,
    each host with a session directory of its own beside ``path`` (the namespaces share
    /tmp and one host name)."""
    path.write_text(f"""#!/bin/sh
host="$1"; shift
mkdir -p "{path.parent}/orte-$host"
exec ip netns exec "$host" env OMPI_MCA_orte_tmpdir_base="{path.parent}/orte-$host" \\
    /bin/sh -c "$*"
""")
    path.chmod(0o755)
    return str(path)
