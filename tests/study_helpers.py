"""What the study's lab tests share: `beoperf serve` in a lab host, `beoperf study ...`
across the lab's hosts through the exec template, each host's MTU and agents."""

from __future__ import annotations

import subprocess
import sys

from beoperf.model.study import Study
from helpers import child_env

PORT = 5202


def start_serve(host) -> subprocess.Popen:
    proc = host.popen([sys.executable, "-m", "beoperf", "serve", "--port", PORT],
                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                      env=child_env())
    line = proc.stdout.readline()
    assert f"port {PORT}" in line, line
    return proc


def study_argv(lab_hosts, *args: str) -> list[str]:
    """`beoperf study ...` across the lab's hosts (the first is the server of each pair),
    each reached through ``ip netns exec``."""
    names = ",".join(h.name for h in lab_hosts)
    addresses = [a for h in lab_hosts for a in ("--data-address", f"{h.name}={h.addr4}")]
    return [sys.executable, "-m", "beoperf", "study", *args, "-w", names,
            "--exec-template", "ip netns exec %h",
            "--remote-command", f"{sys.executable} -m beoperf", "--port", str(PORT),
            *addresses]


def study(lab_hosts, *args: str, timeout: float = 400,
          inside=None) -> subprocess.CompletedProcess:
    """`beoperf study ...` run to its end, here or ``inside`` a namespace host (the lab's
    -ctl, whose address the MPI daemons on the hosts can call back)."""
    argv = study_argv(lab_hosts, *args)
    return subprocess.run(inside.argv(argv) if inside else argv, capture_output=True,
                          text=True, timeout=timeout, env=child_env(), check=False)


def mtu_of(host) -> int:
    return int(host.link()["mtu"])


def agents_in(host) -> list[int]:
    """The dead-man agents running in ``host``'s namespace (by PID, their command line)."""
    pids = subprocess.run(["ip", "netns", "pids", host.name], capture_output=True,
                          text=True, check=False).stdout.split()
    found = []
    for pid in pids:
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"beoperf.factors.agent" in f.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


def no_agent_left(lab_hosts) -> bool:
    return not any(agents_in(h) for h in lab_hosts)


def effect(study_doc: Study, config: str, figure: str) -> dict:
    return next(e.effect for e in study_doc.effects
                if e.config == config and e.figure == figure and e.pair is None)
