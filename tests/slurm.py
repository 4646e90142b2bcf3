"""A real Slurm for tests: munged, slurmctld and one slurmd per namespace test host.

Everything lives in a private directory this module creates (``mkdtemp``, mode 0755 so
that the munge user can reach its socket): the munge key, socket, log and seed; Slurm's
configuration, state, spool, logs, pid files and each node's TmpFS.  Nothing under /etc
is read or written: clients find the configuration through ``SLURM_CONF`` (``env``), and
Slurm finds munged through ``AuthInfo=socket=...``.

Known here (Debian's slurm-wlm 22.05 and munge 0.5): munged runs as the munge user and
wants its socket directory owned by it with mode 0755; ``CgroupPlugin=disabled`` is
refused, so processes are tracked without cgroups (``proctrack/linuxproc``,
``task/none``); slurmd in a namespace host is started with ``nsenter --net=`` (``ip netns
exec`` remounts /sys and hides the cgroup mount); each node has its own spool, pid file
and TmpFS (``%n``).  The controller runs in the first host's namespace and its name is
this machine's hostname (slurmctld checks it).  Every daemon is stopped by its PID,
also when starting fails.

Typical use::

    with veth_hosts(3) as hosts, SlurmCluster(hosts[0], hosts[1:]) as slurm:
        hosts[0].run(["salloc", "-N", "2", "srun", "hostname"], env=slurm.env)
"""

from __future__ import annotations

import os
import platform
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

START_TIMEOUT_S = 90.0
SLURMCTLD_PORT = 6817
SLURMD_PORT = 6818


class SlurmError(RuntimeError):
    """Slurm did not come up; the message has the tail of the daemons' logs."""


class SlurmCluster:
    """munged + slurmctld on ``controller`` + slurmd on each of ``nodes`` (netns Hosts)."""

    def __init__(self, controller, nodes, cpus: int = 2) -> None:
        self.controller, self.nodes, self.cpus = controller, list(nodes), cpus
        self.dir = Path(tempfile.mkdtemp(prefix="beoperf-slurm-"))
        os.chmod(self.dir, 0o755)
        self.procs: list[subprocess.Popen] = []
        self.node_names = [f"n{i + 1}" for i in range(len(self.nodes))]
        self.conf = self.dir / "slurm.conf"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        for name in ("SLURM_JOB_ID", "SLURM_JOBID", "SLURM_JOB_NODELIST", "SLURM_NODELIST"):
            self.env.pop(name, None)

    # ------------------------------------------------------------------ files

    def _munge_files(self) -> Path:
        munge = pwd.getpwnam("munge")
        d = self.dir / "munge"
        d.mkdir(mode=0o755)
        os.chown(d, munge.pw_uid, munge.pw_gid)
        key = d / "munge.key"
        key.write_bytes(os.urandom(1024))
        os.chmod(key, 0o400)
        os.chown(key, munge.pw_uid, munge.pw_gid)
        return d

    def _slurm_conf(self, socket: Path) -> str:
        d = self.dir
        nodes = "\n".join(f"NodeName={name} NodeAddr={host.addr4} CPUs={self.cpus} "
                          "State=UNKNOWN"
                          for name, host in zip(self.node_names, self.nodes, strict=True))
        return f"""ClusterName=beoperftest
SlurmctldHost={platform.node()}({self.controller.addr4})
SlurmUser=root
SlurmctldPort={SLURMCTLD_PORT}
SlurmdPort={SLURMD_PORT}
AuthType=auth/munge
AuthInfo=socket={socket}
CredType=cred/munge
StateSaveLocation={d}/state
SlurmdSpoolDir={d}/spool/%n
SlurmctldPidFile={d}/slurmctld.pid
SlurmdPidFile={d}/slurmd-%n.pid
SlurmctldLogFile={d}/log/slurmctld.log
SlurmdLogFile={d}/log/slurmd-%n.log
TmpFS={d}/tmpfs/%n
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/builtin
SelectType=select/linear
MailProg=/bin/true
{nodes}
PartitionName=test Nodes={",".join(self.node_names)} Default=YES MaxTime=INFINITE State=UP
"""

    # ------------------------------------------------------------------ daemons

    def _spawn(self, argv: list[str], log: str, **kw) -> subprocess.Popen:
        out = open(self.dir / "log" / log, "ab")  # noqa: SIM115  (closed in stop)
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, **kw)
        proc._log = out  # type: ignore[attr-defined]
        self.procs.append(proc)
        return proc

    def start(self) -> None:
        for sub in ("state", "spool", "log", "tmpfs"):
            (self.dir / sub).mkdir()
        for name in self.node_names:
            (self.dir / "spool" / name).mkdir()
            (self.dir / "tmpfs" / name).mkdir()
        munge = self._munge_files()
        socket = munge / "munge.socket"
        self._spawn(["munged", "-F", f"--socket={socket}", f"--key-file={munge}/munge.key",
                     f"--log-file={munge}/munged.log", f"--pid-file={munge}/munged.pid",
                     f"--seed-file={munge}/munged.seed"], "munged.out", user="munge",
                    group="munge", extra_groups=[])
        self._wait(lambda: socket.exists(), 15, "munged's socket")
        self.conf.write_text(self._slurm_conf(socket))
        self._spawn(["nsenter", f"--net=/run/netns/{self.controller.name}", "slurmctld", "-D",
                     "-f", str(self.conf)], "slurmctld.out", env=self.env)
        for name, host in zip(self.node_names, self.nodes, strict=True):
            self._spawn(["nsenter", f"--net=/run/netns/{host.name}", "slurmd", "-D", "-N", name,
                         "-f", str(self.conf)], f"slurmd-{name}.out", env=self.env)
        self._wait(self._idle, START_TIMEOUT_S, "every node idle in sinfo")

    def _idle(self) -> bool:
        for proc in self.procs:
            if proc.poll() is not None:
                raise SlurmError(f"{proc.args[0]} exited ({proc.returncode}):\n{self.logs()}")
        out = self.controller.run(["sinfo", "-h", "-o", "%t %D"], env=self.env, check=False,
                                  timeout=20)
        states = out.stdout.split()
        return states[:1] == ["idle"] and states[1:2] == [str(len(self.nodes))]

    def _wait(self, ready, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            if time.monotonic() > deadline:
                raise SlurmError(f"timed out after {timeout:g} s waiting for {what}:\n"
                                 f"{self.logs()}")
            time.sleep(0.5)

    def logs(self, lines: int = 15) -> str:
        """The last lines of every daemon's log."""
        out = []
        for path in sorted((self.dir / "log").glob("*")) + [self.dir / "munge" / "munged.log"]:
            if path.is_file():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                out.append(f"--- {path.name}\n" + "\n".join(tail))
        return "\n".join(out)

    def stop(self) -> None:
        """Stop every daemon by its PID (TERM, then KILL), then remove the directory."""
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            proc._log.close()  # type: ignore[attr-defined]
        self.procs.clear()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> SlurmCluster:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
