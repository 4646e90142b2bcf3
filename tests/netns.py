"""Throwaway test hosts built from Linux network namespaces joined by veth pairs.

Everything here happens inside namespaces this module creates: links are created
with ``ip -n NS`` so they never appear in the root namespace, and only test
addresses are used (IPv4 198.18.0.0/15 and IPv6 2001:2::/48, both reserved for
benchmarking).  The host's own interfaces, sysctls and services are never touched.

Typical use::

    ok, reason = can_use_netns()
    with VethPair(2) as topo:
        server, client = topo.hosts
        server.popen(["some-server"])
        client.run(["some-client", server.addr4])

Namespaces are deleted on exit (also when the block raises), after the processes
started in them have been stopped by PID; an atexit hook covers anything left.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import itertools
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

NET4_PREFIX = "198.18.0."
NET4_PREFIXLEN = 24
NET6_PREFIX = "2001:2::"
NET6_PREFIXLEN = 64
HOST_IFNAME = "eth0"
BRIDGE = "br0"
IP_TIMEOUT = 30

_counter = itertools.count()
_live: list[VethPair] = []


class NetnsError(RuntimeError):
    """An ``ip``/``tc`` command needed to build or remove test namespaces failed."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    cmd = ["ip", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=IP_TIMEOUT)
    if check and proc.returncode != 0:
        raise NetnsError(f"{' '.join(cmd)} failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc


def list_namespaces() -> list[str]:
    """Names of all named network namespaces (``ip netns list``)."""
    out = _ip("netns", "list").stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


@functools.lru_cache(maxsize=1)
def can_use_netns() -> tuple[bool, str]:
    """(True, "") if this process can create network namespaces, else (False, why)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return False, "creating network namespaces needs root (euid 0)"
    if shutil.which("ip") is None:
        return False, "the 'ip' command (iproute2) is not installed"
    probe = f"bptprobe{os.getpid()}-{next(_counter)}"
    try:
        _ip("netns", "add", probe)
    except (OSError, subprocess.SubprocessError, NetnsError) as exc:
        return False, f"'ip netns add' does not work here: {exc}"
    try:
        _ip("netns", "del", probe)
    except (OSError, subprocess.SubprocessError, NetnsError) as exc:
        return False, f"'ip netns del' does not work here: {exc}"
    return True, ""


# --------------------------------------------------------------------------- rates

_RATE_UNITS = {  # tc units (case-insensitive) -> bytes per second
    "": 1 / 8,
    "bit": 1 / 8,
    "kbit": 1e3 / 8,
    "mbit": 1e6 / 8,
    "gbit": 1e9 / 8,
    "tbit": 1e12 / 8,
    "kibit": 2**10 / 8,
    "mibit": 2**20 / 8,
    "gibit": 2**30 / 8,
    "tibit": 2**40 / 8,
    "bps": 1,
    "kbps": 1e3,
    "mbps": 1e6,
    "gbps": 1e9,
    "tbps": 1e12,
    "kibps": 2**10,
    "mibps": 2**20,
    "gibps": 2**30,
    "tibps": 2**40,
}


def rate_bytes_per_sec(rate: str | int) -> float:
    """Parse a tc rate ("100mbit", "1gbit", "10MBps", bare number = bit/s) to bytes/s."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([a-zA-Z]*)\s*", str(rate))
    unit = m.group(2).lower() if m else None
    if m is None or unit not in _RATE_UNITS:
        raise ValueError(f"not a tc rate: {rate!r}")
    value = float(m.group(1)) * _RATE_UNITS[unit]
    if value <= 0:
        raise ValueError(f"rate must be positive: {rate!r}")
    return value


def tbf_burst(rate: str | int) -> int:
    """Bucket size in bytes for tbf at a tc rate: the lab's rule (beoperf.launch.lab)."""
    from beoperf.launch import lab

    return lab.tbf_burst(rate_bytes_per_sec(rate) * 8)


# --------------------------------------------------------------------------- ping fallback

# ICMP echo over a raw socket, for machines without iputils' ping (we are root).
# argv: address, payload size, wait seconds.  Exit 0 on reply; sets DF like `ping -M do`.
_PY_PING = r"""
import os, socket, struct, sys, time
addr, size, wait = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
v6 = ":" in addr
if v6:
    s = socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6)
    s.setsockopt(socket.IPPROTO_IPV6, 23, 2)
    req, rep = 128, 129
else:
    s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
    s.setsockopt(socket.IPPROTO_IP, 10, 2)
    req, rep = 8, 0
ident, body = os.getpid() & 0xFFFF, bytes(size)
def csum(b):
    b += b"\0" * (len(b) % 2)
    t = sum(struct.unpack("!%dH" % (len(b) // 2), b))
    t = (t >> 16) + (t & 0xFFFF)
    return ~(t + (t >> 16)) & 0xFFFF
ck = 0 if v6 else csum(struct.pack("!BBHHH", req, 0, 0, ident, 1) + body)
s.sendto(struct.pack("!BBHHH", req, 0, ck, ident, 1) + body, (addr, 0))
end = time.monotonic() + wait
while time.monotonic() < end:
    s.settimeout(max(end - time.monotonic(), 0.001))
    try:
        data = s.recv(65535)
    except TimeoutError:
        break
    if not v6:
        data = data[(data[0] & 15) * 4:]
    if len(data) >= 8 and data[0] == rep and struct.unpack("!H", data[4:6])[0] == ident:
        sys.exit(0)
sys.exit(1)
"""


# --------------------------------------------------------------------------- hosts


def _pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


@dataclass
class Host:
    """One test host: a network namespace with one interface to the test network."""

    name: str
    addr4: str
    addr6: str
    ifname: str = HOST_IFNAME
    procs: list[subprocess.Popen] = field(default_factory=list, repr=False, compare=False)

    def argv(self, argv: Sequence[object]) -> list[str]:
        """``argv`` prefixed so that it runs inside this namespace."""
        return ["ip", "netns", "exec", self.name, *map(str, argv)]

    def run(self, argv: Sequence[object], **kw) -> subprocess.CompletedProcess:
        """subprocess.run inside the namespace (check, text, capture, 30 s timeout)."""
        kw.setdefault("check", True)
        kw.setdefault("text", True)
        kw.setdefault("timeout", 30)
        if not {"stdout", "stderr", "capture_output"} & kw.keys():
            kw["capture_output"] = True
        return subprocess.run(self.argv(argv), **kw)

    def popen(self, argv: Sequence[object], **kw) -> subprocess.Popen:
        """subprocess.Popen inside the namespace; stopped by PID on cleanup."""
        proc = subprocess.Popen(self.argv(argv), **kw)
        self.procs.append(proc)
        return proc

    def ping(self, addr: str, *, size: int = 56, wait: float = 2, tool: str = "auto") -> bool:
        """One ICMP echo to ``addr`` with DF set; True if answered.

        tool: "ping" (iputils ``ping -c 1 -W 2``), "python" (raw-socket fallback),
        or "auto" (ping when installed, else python).
        """
        if tool == "auto":
            tool = "ping" if shutil.which("ping") else "python"
        if tool == "ping":
            argv = ["ping", "-c", "1", "-W", wait, "-M", "do", "-s", size, addr]
        elif tool == "python":
            argv = [sys.executable, "-c", _PY_PING, addr, size, wait]
        else:
            raise ValueError(f"unknown ping tool {tool!r}")
        return self.run(argv, check=False, timeout=wait + 10).returncode == 0

    def link(self) -> dict:
        """This host's interface as reported by ``ip -j link show``."""
        return json.loads(_ip("-n", self.name, "-j", "link", "show", "dev", self.ifname).stdout)[0]

    def set_mtu(self, mtu: int) -> None:
        """Set the MTU of this host's end of the link (the peer end is left alone)."""
        _ip("-n", self.name, "link", "set", "dev", self.ifname, "mtu", str(mtu))

    def set_rate(self, rate: str) -> None:
        """Shape egress to ``rate`` (tc syntax, e.g. "100mbit") with a tbf root qdisc."""
        tbf = ["tbf", "rate", rate, "burst", tbf_burst(rate), "latency", "50ms"]
        self.run(["tc", "qdisc", "replace", "dev", self.ifname, "root", *tbf])

    def clear_rate(self) -> None:
        """Remove shaping installed by set_rate (no error if there is none)."""
        self.run(["tc", "qdisc", "del", "dev", self.ifname, "root"], check=False)

    def link_down(self) -> None:
        _ip("-n", self.name, "link", "set", "dev", self.ifname, "down")

    def link_up(self) -> None:
        _ip("-n", self.name, "link", "set", "dev", self.ifname, "up")
        self._add_addresses()  # IPv6 addresses are flushed on link down
        self.wait_ready()

    def is_ready(self) -> bool:
        """Carrier seen (operstate UP) and IPv6 configured on the interface.

        The kernel applies carrier changes asynchronously (linkwatch, up to ~1 s or
        more on a busy machine); until then IPv6 drops incoming neighbour solicitations.
        """
        if self.link().get("operstate") != "UP":
            return False
        out = _ip(
            "-n", self.name, "-j", "-6", "route", "show", "table", "local", "dev", self.ifname
        ).stdout
        return any(r.get("dst") == "ff00::/8" for r in json.loads(out or "[]"))

    def wait_ready(self, timeout: float = 15) -> None:
        _wait_for(self.is_ready, timeout, f"{self.name}/{self.ifname} ready")

    def _add_addresses(self) -> None:
        dev = ("dev", self.ifname)
        _ip("-n", self.name, "addr", "replace", f"{self.addr4}/{NET4_PREFIXLEN}", *dev)
        _ip("-n", self.name, "addr", "replace", f"{self.addr6}/{NET6_PREFIXLEN}", *dev, "nodad")

    def stop_processes(self) -> None:
        """Terminate tracked processes (3 s grace, then kill), then kill any stragglers."""
        while self.procs:
            proc = self.procs.pop()
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(3)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            for stream in (proc.stdin, proc.stdout, proc.stderr):
                if stream is not None:
                    stream.close()
        kill_namespace_pids(self.name)


def _wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise NetnsError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def _bridge_ports_forwarding(ns: str) -> bool:
    out = subprocess.run(
        ["bridge", "-n", ns, "-j", "link", "show"],
        capture_output=True,
        text=True,
        timeout=IP_TIMEOUT,
        check=True,
    ).stdout
    return all(p.get("state") == "forwarding" for p in json.loads(out or "[]"))


def kill_namespace_pids(ns: str) -> None:
    """SIGKILL every process still inside namespace ``ns`` (by PID), wait briefly."""
    out = _ip("netns", "pids", ns, check=False).stdout
    pids = [int(p) for p in out.split() if p.isdigit() and int(p) != os.getpid()]
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 3
    while any(_pid_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)


def _delete_namespace(ns: str) -> None:
    kill_namespace_pids(ns)
    _ip("netns", "del", ns, check=False)


def reap_stale(prefix: str = "bpt") -> list[str]:
    """Delete namespaces left by dead test processes (``{prefix}{pid}-...``, pid gone)."""
    pattern = re.compile(rf"{re.escape(prefix)}(\d+)-\d+-(?:\d+|sw)")
    reaped = []
    for ns in list_namespaces():
        m = pattern.fullmatch(ns)
        if m and int(m.group(1)) != os.getpid() and not _pid_alive(int(m.group(1))):
            _delete_namespace(ns)
            reaped.append(ns)
    return reaped


_reaped_once = False


class VethPair:
    """``n`` test hosts, each in its own namespace, all able to reach each other.

    n == 2: one veth pair between the two namespaces.
    n > 2: an extra "switch" namespace with a bridge; each host has a veth to it.
    Host i gets 198.18.0.(i+1)/24 and 2001:2::(i+1)/64 on interface eth0.
    Use as a context manager; ``cleanup()`` is idempotent.
    """

    def __init__(self, n: int = 2, prefix: str = "bpt") -> None:
        if n < 2:
            raise ValueError("need at least two hosts")
        if n > 250:
            raise ValueError("at most 250 hosts")
        if not re.fullmatch(r"[a-z][a-z0-9]{0,7}", prefix):
            raise ValueError("prefix: 1-8 lowercase letters/digits, starting with a letter")
        base = f"{prefix}{os.getpid()}-{next(_counter)}"
        self.prefix = prefix
        self.hosts = [
            Host(f"{base}-{i}", f"{NET4_PREFIX}{i + 1}", f"{NET6_PREFIX}{i + 1:x}")
            for i in range(n)
        ]
        self.switch: str | None = f"{base}-sw" if n > 2 else None
        self._created: list[str] = []
        self._owner = os.getpid()

    @property
    def namespaces(self) -> list[str]:
        """All namespace names of this topology (hosts, then the switch if any)."""
        return [h.name for h in self.hosts] + ([self.switch] if self.switch else [])

    def __iter__(self) -> Iterator[Host]:
        return iter(self.hosts)

    def __len__(self) -> int:
        return len(self.hosts)

    def __getitem__(self, i: int) -> Host:
        return self.hosts[i]

    def __enter__(self) -> VethPair:
        self.setup()
        return self

    def __exit__(self, *exc: object) -> None:
        self.cleanup()

    def setup(self) -> None:
        """Create namespaces and links; on any failure, remove what was made."""
        global _reaped_once
        if not _reaped_once:
            _reaped_once = True
            reap_stale(self.prefix)
        _live.append(self)
        try:
            self._build()
        except BaseException:
            self.cleanup()
            raise

    def _add_ns(self, ns: str) -> None:
        _ip("netns", "add", ns)
        self._created.append(ns)
        _ip("-n", ns, "link", "set", "dev", "lo", "up")

    def _build(self) -> None:
        for ns in self.namespaces:
            self._add_ns(ns)
        a = self.hosts[0]
        if self.switch is None:
            b = self.hosts[1]
            _ip(
                "-n",
                a.name,
                "link",
                "add",
                a.ifname,
                "type",
                "veth",
                "peer",
                "name",
                b.ifname,
                "netns",
                b.name,
            )
        else:
            sw = self.switch
            _ip("-n", sw, "link", "add", BRIDGE, "type", "bridge", "mcast_snooping", "0")
            _ip("-n", sw, "link", "set", "dev", BRIDGE, "up")
            for i, h in enumerate(self.hosts):
                port = f"p{i}"
                _ip(
                    "-n",
                    sw,
                    "link",
                    "add",
                    port,
                    "mtu",
                    "65535",
                    "type",
                    "veth",
                    "peer",
                    "name",
                    h.ifname,
                    "netns",
                    h.name,
                )
                _ip("-n", sw, "link", "set", "dev", port, "master", BRIDGE, "up")
        for h in self.hosts:
            h._add_addresses()
            _ip("-n", h.name, "link", "set", "dev", h.ifname, "up")
        for h in self.hosts:
            h.wait_ready()
        if self.switch is not None:
            sw = self.switch
            _wait_for(lambda: _bridge_ports_forwarding(sw), 15, f"bridge ports in {sw}")

    def cleanup(self) -> None:
        """Stop processes, delete every namespace created; raise if any remain."""
        for h in self.hosts:
            with contextlib.suppress(Exception):
                h.stop_processes()
        for ns in reversed(self._created):
            _delete_namespace(ns)
        if self in _live:
            _live.remove(self)
        created, self._created = self._created, []
        left = set(created) & set(list_namespaces())
        if left:
            raise NetnsError(f"test namespaces not removed: {sorted(left)}")


@contextlib.contextmanager
def veth_hosts(n: int = 2, prefix: str = "bpt") -> Iterator[list[Host]]:
    """Context manager yielding the hosts of a ``VethPair(n, prefix)``."""
    with VethPair(n, prefix) as topo:
        yield topo.hosts


@atexit.register
def _cleanup_all() -> None:
    for topo in list(_live):
        if topo._owner == os.getpid():
            with contextlib.suppress(Exception):
                topo.cleanup()


# --------------------------------------------------------------------------- labs

_lab_counter = itertools.count()
_labs_reaped = False


@dataclass
class LabHosts:
    """A `beoperf lab` (beoperf.launch.lab.Lab) seen as test hosts: ``hosts`` (Host i is
    namespace beolab-NAME-i at 198.18.0.(i+1)), ``ctl`` (the unshaped controller, or
    None), ``lab`` (the Lab: ``ssh_agent``, ``key``, ``nodeset``, ``switch``) and
    ``state`` (what ``lab up --json`` prints)."""

    lab: object
    state: dict
    hosts: list[Host]
    ctl: Host | None

    def __iter__(self) -> Iterator[Host]:
        return iter(self.hosts)

    def __len__(self) -> int:
        return len(self.hosts)

    def __getitem__(self, i: int) -> Host:
        return self.hosts[i]

    def ssh(self, host: Host, command: str, **kw) -> subprocess.CompletedProcess:
        """``command`` on ``host`` over ssh from the controller, through the lab's agent."""
        assert self.ctl is not None and self.lab.ssh_agent is not None
        argv = [*self.lab.ssh_agent.split()[4:], host.addr4, command]  # after 'ip netns exec C'
        return self.ctl.run(argv, **kw)


def _reap_stale_labs() -> None:
    """Remove the labs of test processes that died (named t<pid>x<n> here and t<pid>y<n>
    by test_lab.py, pid gone)."""
    from beoperf.launch import lab

    for name in lab.labs():
        m = re.fullmatch(r"t(\d+)[xy]\d+", name)
        if m and int(m.group(1)) != os.getpid() and not _pid_alive(int(m.group(1))):
            with contextlib.suppress(Exception):
                lab.down(name)


@contextlib.contextmanager
def lab_hosts(n: int = 2, **opts) -> Iterator[LabHosts]:
    """A lab of ``n`` hosts (options as beoperf.launch.lab.Lab: rate in bit/s, burst, mtu,
    host_mtu, switch_mtu, sshd, controller), removed on exit, also when the block raises:
    the processes started in its hosts first, then ``lab down``."""
    from beoperf.launch import lab

    global _labs_reaped
    if not _labs_reaped:
        _labs_reaped = True
        _reap_stale_labs()
    the_lab = lab.Lab(f"t{os.getpid()}x{next(_lab_counter)}", hosts=n, **opts)
    hosts: list[Host] = []
    ctl: Host | None = None
    try:
        state = the_lab.up()
        hosts = [Host(h["name"], h["addr4"], h["addr6"]) for h in state["hosts"]]
        if the_lab.ctl:
            ctl = Host(the_lab.ctl, state["controller_addr4"], f"{NET6_PREFIX}fe")
        yield LabHosts(the_lab, state, hosts, ctl)
    finally:
        for h in [*hosts, *([ctl] if ctl else [])]:
            with contextlib.suppress(Exception):
                h.stop_processes()
        from beoperf.suites import lab as lab_suite

        lab_suite.down(the_lab.name)  # as `beoperf lab down`: the agents' study directories too
