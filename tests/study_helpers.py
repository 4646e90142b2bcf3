"""What the study's lab tests share: `beoperf serve` in a lab host, `beoperf study ...`
across the lab's hosts through the exec template, each host's MTU, agents, SACK sysctl
and nftables ruleset, the ruleset that cuts a host off, and a study ended by SIGTERM."""

from __future__ import annotations

import signal
import subprocess
import sys

from beoperf.model.study import Study
from helpers import child_env

PORT = 5202
SACK = "net.ipv4.tcp_sack"  # a per-namespace sysctl a level can change
CUT = """table inet beoperf_cut {
  chain input { type filter hook input priority 0; policy drop; iif "lo" accept; }
  chain output { type filter hook output priority 0; policy drop; oif "lo" accept; }
}
"""  # a firewall level that cuts a host off (loopback aside)
SITE_RULES = """table inet site {
  chain input { type filter hook input priority 0; policy accept;
    ip saddr 203.0.113.7 drop comment "the site's own rule"
  }
}
"""  # a host's own ruleset, which a restore must leave as it was


def sack(host) -> str:
    """The host's net.ipv4.tcp_sack."""
    return host.run(["cat", f"/proc/sys/{SACK.replace('.', '/')}"]).stdout.strip()


def nft_ruleset(host) -> list[str]:
    """The host's nftables ruleset, without blank lines."""
    text = host.run(["nft", "list", "ruleset"]).stdout
    return [line.strip() for line in text.splitlines() if line.strip()]


def sigterm_at(proc: subprocess.Popen, prefix: str) -> str:
    """A study's stderr, read until a line starts with ``prefix``; then SIGTERM, and the
    exit 143 asserted (every host restored, the document written): all it printed."""
    assert proc.stderr is not None
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if line.startswith(prefix):
            proc.send_signal(signal.SIGTERM)
            break
    _, rest = proc.communicate(timeout=120)
    lines.append(rest or "")
    assert proc.returncode == 128 + signal.SIGTERM, "".join(lines)[-3000:]
    return "".join(lines)


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
