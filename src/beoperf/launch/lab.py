"""The lab: namespace hosts on one bridge, to try every command without a cluster.

``Lab(name, hosts=4, ...).up()`` builds, all inside network namespaces it creates (the
host's own interfaces, sysctls and services are never touched):

* ``beolab-<name>-<i>``: a host each, one interface ``eth0`` with 198.18.0.<i+1>/24 and
  2001:2::<i+1>/64 (benchmarking ranges), its MTU (``mtu``, or ``host_mtu[i]``), egress
  shaped by tbf when a ``rate`` is given, and an sshd listening on its lab addresses;
* ``beolab-<name>-sw``: the switch, a bridge whose ports are veth ends of MTU 65535, or
  ``switch_mtu`` (a switch that drops the frames larger than that);
* ``beolab-<name>-ctl``: an unshaped controller on the same bridge (198.18.0.254), from
  which the hosts are reached over ssh across the lab's own network.

The state, ``/run/beoperf/lab/<name>.json`` (0600, in a 0700 directory of root's), names
every namespace **before** one is created and, once started, the sshds' PIDs; so
:func:`down` removes everything, also after an ``up`` that crashed or was killed half way:
it kills by PID what runs inside each lab namespace (``ip netns pids``), deletes the
namespaces, the keys and the state.  The sshds are the lab's own daemons: they outlive
``up``, confined to the lab's namespaces, until ``down``.

Every ``ip``, ``tc``, ``bridge`` and ``ssh-keygen`` runs through :mod:`beoperf.launch.job`;
the sshds start in a session of their own (not under a job's guard, which would end them
with ``up``).  There is no delay option: this kernel has no netem.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import signal
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from beoperf import errors, safeio
from beoperf.launch import job

STATE_DIR = "/run/beoperf/lab"
STATE_LIMIT = 1024 * 1024
NAME_RE = re.compile(r"[a-z][a-z0-9]{0,15}")
PREFIX = "beolab"
NET4 = "198.18.0."
NET6 = "2001:2::"
PREFIXLEN4, PREFIXLEN6 = 24, 64
CTL_INDEX = 254  # the controller's last address byte
MAX_HOSTS = 250
IFNAME = "eth0"
BRIDGE = "br0"
PORT_MTU = 65535  # a bridge port that carries every frame a veth can send
MIN_MTU, MAX_MTU = 68, 65535
TBF_LATENCY = "50ms"
CMD_TIMEOUT_S = 30.0
READY_TIMEOUT_S = 20.0
TERM_GRACE_S = 3.0  # for what runs in a lab host to end on SIGTERM at `lab down`
SSHD = "/usr/sbin/sshd"
EXEC_TEMPLATE = "ip netns exec %h"
SSHD_CONFIG = """\
Port 22
HostKey /run/beolab/hostkey
PidFile none
AuthorizedKeysFile /run/beolab/authorized_keys
StrictModes no
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
UsePAM no
MaxStartups 100:30:200
Subsystem sftp internal-sftp
LogLevel ERROR
"""
KEY_FILES = ("hostkey", "authorized_keys", "sshd_config")

# the state file's JSON: its shape is checked on reading (_checked_state), then read freely
LabState = dict[str, Any]


class LabError(errors.Failed):
    """A command that builds or removes the lab failed (the message names it)."""

    category = "lab failed"


def tbf_burst(rate_bps: float) -> int:
    """tbf's bucket in bytes for ``rate_bps`` bit/s: one 4 ms tick (HZ=250) of traffic,
    and at least 64 KiB, so that one frame of any MTU (and a GSO burst) passes whole."""
    return max(64 * 1024, math.ceil(rate_bps / 8 / 250))


def check_name(name: str) -> str:
    """A lab name (what its namespaces are called after); BadSpec otherwise."""
    if not NAME_RE.fullmatch(name):
        raise errors.BadSpec(f"lab name {name!r}: 1-16 lowercase letters and digits, "
                             "starting with a letter")
    return name


def state_path(name: str) -> str:
    return f"{STATE_DIR}/{check_name(name)}.json"


def key_dir(name: str) -> str:
    """Where the lab's ssh keys and sshd configuration live."""
    return f"{STATE_DIR}/{check_name(name)}"


def require_root() -> None:
    if os.geteuid() != 0:
        raise errors.NotPermitted("beoperf lab creates network namespaces: run it as root")


# ------------------------------------------------------------------ commands


def _cmd(argv: Sequence[str], check: bool = True) -> tuple[int, str, str]:
    """Run one command to its end: (exit status, stdout, stderr); LabError on failure."""
    try:
        done = job.run(list(argv), CMD_TIMEOUT_S)
    except OSError as exc:
        raise LabError(f"{argv[0]}: cannot run ({exc.strerror or exc})") from None
    code = -1 if done.stopped or done.returncode is None else done.returncode
    out, err = done.stdout_text(), done.stderr_text()
    if check and code != 0:
        detail = err.strip().splitlines()[-1] if err.strip() else f"exit status {code}"
        raise LabError(f"{' '.join(argv)}: {detail}")
    return code, out, err


def _ip(*args: str, check: bool = True) -> tuple[int, str, str]:
    return _cmd(["ip", *args], check)


def list_namespaces() -> list[str]:
    """Every named network namespace (``ip netns list``)."""
    out = _ip("netns", "list")[1]
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def namespace_pids(ns: str) -> list[int]:
    """The processes inside network namespace ``ns`` (none if it does not exist)."""
    out = _ip("netns", "pids", ns, check=False)[1]
    return [int(p) for p in out.split() if p.isdigit() and int(p) != os.getpid()]


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read(4096).rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")


def _reap(pid: int) -> None:
    """Collect ``pid`` if it is a child of this process (an sshd this process started)."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def kill_namespace(ns: str, also: Sequence[int] = ()) -> None:
    """End every process inside ``ns``: SIGTERM first, so that what can clean up does (a
    study's agent in a lab host restores and removes its files from the /run the lab
    shares with the host), SIGKILL to what is still inside after ``TERM_GRACE_S``, then
    wait (at most 5 s) until they are gone.  The SIGKILL goes to the namespace's
    processes listed again, never to a PID that has left it (and may have been reused)."""
    pids = namespace_pids(ns)
    _signal_all(pids, signal.SIGTERM)
    _wait_gone(pids, also, TERM_GRACE_S)
    left = namespace_pids(ns)
    _signal_all(left, signal.SIGKILL)
    _wait_gone([*pids, *left], also, 5)


def _signal_all(pids: Sequence[int], signum: int) -> None:
    for pid in pids:
        with contextlib.suppress(OSError):
            os.kill(pid, signum)


def _wait_gone(pids: Sequence[int], also: Sequence[int], timeout: float) -> None:
    """Until none of ``pids`` is alive (reaping those that are our children) or
    ``timeout`` seconds have passed."""
    deadline = time.monotonic() + timeout
    for pid in [*pids, *also]:
        _reap(pid)
    while any(_alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.02)
        for pid in [*pids, *also]:
            _reap(pid)


# ------------------------------------------------------------------ the state


def _open_state_dir(create: bool) -> int | None:
    try:
        return safeio.open_private_dir(STATE_DIR, create)
    except safeio.PrivateDirError as exc:
        raise errors.Failed(str(exc), "remove it, or make it root's and 0700") from None


def write_state(state: LabState, new: bool = False) -> None:
    """The lab's state, atomically, 0600 (``new``: only if no lab of that name exists)."""
    fd = _open_state_dir(create=True)
    assert fd is not None
    name = f"{state['name']}.json"
    try:
        safeio.write_atomic_at(fd, name, safeio.dump_json(state), overwrite=not new,
                               mode=0o600, shown=f"{STATE_DIR}/{name}")
    except FileExistsError:
        raise errors.Busy(f"lab {state['name']} exists already",
                          f"'beoperf lab down --name {state['name']}' removes it") from None
    finally:
        os.close(fd)


def read_state(name: str) -> LabState | None:
    """The state of lab ``name`` (None: there is none), checked against what a lab of
    that name can contain: ``down`` acts on it as root."""
    path = state_path(name)
    fd = _open_state_dir(create=False)
    if fd is None:
        return None
    try:
        os.stat(f"{name}.json", dir_fd=fd, follow_symlinks=False)
    except FileNotFoundError:
        os.close(fd)
        return None
    try:
        raw = safeio.read_bytes_at(fd, f"{name}.json", STATE_LIMIT, "the lab's state",
                                   shown=path)
        state = safeio.parse_json(raw, path)
    except (safeio.FileInputError, ValueError) as exc:
        raise errors.InputError(str(exc), "remove the file and any beolab-* namespace "
                                "by hand") from None
    finally:
        os.close(fd)
    return _checked_state(name, state)


def _checked_state(name: str, state: Any) -> LabState:
    ours = re.compile(rf"{PREFIX}-{re.escape(name)}-(?:\d{{1,3}}|sw|ctl)")
    ok = (isinstance(state, dict) and state.get("name") == name
          and isinstance(state.get("namespaces"), list)
          and all(isinstance(n, str) and ours.fullmatch(n) for n in state["namespaces"])
          and isinstance(state.get("pids", {}), dict)
          and all(isinstance(k, str) and ours.fullmatch(k) and type(v) is int and v > 1
                  for k, v in state.get("pids", {}).items())
          and _shaped_like(state, Lab(name, hosts=1).state("up")))
    if not ok:
        raise errors.InputError(f"{state_path(name)}: not the state of lab {name}",
                                "remove the file and any beolab-* namespace by hand")
    return state


def _shaped_like(state: LabState, model: LabState) -> bool:
    """Each key of ``model`` is in ``state`` with a value of the same type (None and
    numbers as each other), the hosts each an object like the model's host."""
    def same(value: Any, like: Any) -> bool:
        if isinstance(like, bool):
            return isinstance(value, bool)
        if isinstance(like, (int, float)) or like is None:
            return value is None or type(value) in (int, float)
        if isinstance(like, str):
            return value is None or isinstance(value, str)
        return isinstance(value, type(like))

    def like(obj: LabState, model: LabState) -> bool:
        return all(k in obj and same(obj[k], v) for k, v in model.items())

    return like(state, model) and all(isinstance(h, dict) and like(h, model["hosts"][0])
                                      for h in state["hosts"])


def _remove_state(name: str) -> None:
    fd = _open_state_dir(create=False)
    if fd is None:
        return
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(f"{name}.json", dir_fd=fd)
        with contextlib.suppress(FileNotFoundError):
            shutil.rmtree(name, dir_fd=fd)
    finally:
        os.close(fd)


# ------------------------------------------------------------------ the lab


@dataclass
class Lab:
    """A lab of ``hosts`` namespace hosts (see the module's docstring).  ``rate`` in bit/s
    shapes each host's egress (tbf, bucket ``burst`` bytes, by default :func:`tbf_burst`);
    ``mtu`` is every host's MTU but those in ``host_mtu`` (index -> MTU); ``switch_mtu``
    the bridge ports' (None: 65535); ``sshd`` an sshd in each host; ``controller`` the
    ``-ctl`` namespace.  Use as a context manager, or :meth:`up` then :meth:`down`."""

    name: str
    hosts: int = 4
    rate: float | None = None
    burst: int | None = None
    mtu: int = 1500
    switch_mtu: int | None = None
    sshd: bool = True
    controller: bool = True
    host_mtu: Mapping[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_name(self.name)
        if not 1 <= self.hosts <= MAX_HOSTS:
            raise errors.BadSpec(f"--hosts {self.hosts}: from 1 to {MAX_HOSTS}")
        if any(not 0 <= i < self.hosts for i in self.host_mtu):
            raise errors.BadSpec(f"--host-mtu: hosts are numbered 0 to {self.hosts - 1}")
        for what, mtu in [("--mtu", self.mtu), ("--switch-mtu", self.switch_mtu),
                          *((f"--host-mtu {i}=", m) for i, m in self.host_mtu.items())]:
            if mtu is not None and not MIN_MTU <= mtu <= MAX_MTU:
                raise errors.BadSpec(f"{what}{'' if what.endswith('=') else ' '}{mtu}: "
                                     f"an MTU from {MIN_MTU} to {MAX_MTU}")
        if self.rate is not None and not (math.isfinite(self.rate) and self.rate >= 8):
            raise errors.BadSpec("--rate: at least 8 bit/s")
        if self.burst is not None and self.rate is None:
            raise errors.BadSpec("--burst needs --rate")
        if self.burst is not None and not 1500 <= self.burst <= 2**30:
            raise errors.BadSpec(f"--burst {self.burst}: from 1500 bytes to 1 GiB")

    # -------------------------------------------------------------- names

    def host_name(self, i: int) -> str:
        return f"{PREFIX}-{self.name}-{i}"

    @property
    def host_names(self) -> list[str]:
        return [self.host_name(i) for i in range(self.hosts)]

    @property
    def switch(self) -> str:
        return f"{PREFIX}-{self.name}-sw"

    @property
    def ctl(self) -> str | None:
        return f"{PREFIX}-{self.name}-ctl" if self.controller else None

    @property
    def namespaces(self) -> list[str]:
        """Every namespace of the lab: the switch, the hosts, the controller."""
        return [self.switch, *self.host_names, *([self.ctl] if self.ctl else [])]

    @staticmethod
    def addr4(i: int) -> str:
        return f"{NET4}{i + 1}"

    @staticmethod
    def addr6(i: int) -> str:
        return f"{NET6}{i + 1:x}"

    def mtu_of(self, i: int) -> int:
        return self.host_mtu.get(i, self.mtu)

    @property
    def nodeset(self) -> str:
        last = self.hosts - 1
        return f"{PREFIX}-{self.name}-" + (f"[0-{last}]" if last else "0")

    @property
    def key(self) -> str:
        """The private key that logs in as root on every host's sshd."""
        return f"{key_dir(self.name)}/userkey"

    @property
    def ssh_agent(self) -> str | None:
        """How to reach the hosts over ssh from the controller (an ``--exec-template``
        -like agent: the host's lab address follows)."""
        if not (self.sshd and self.ctl):
            return None
        return (f"ip netns exec {self.ctl} ssh -i {self.key} -l root -o BatchMode=yes "
                "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null")

    def state(self, status: str, pids: Mapping[str, int] | None = None) -> LabState:
        """What the state file records (and ``lab up --json`` prints)."""
        return {"name": self.name, "status": status, "namespaces": self.namespaces,
                "hosts": [{"name": self.host_name(i), "index": i, "addr4": self.addr4(i),
                           "addr6": self.addr6(i), "mtu": self.mtu_of(i)}
                          for i in range(self.hosts)],
                "switch": self.switch, "controller": self.ctl,
                "controller_addr4": f"{NET4}{CTL_INDEX}" if self.ctl else None,
                "rate_bps": self.rate, "burst": self.shaper_burst(),
                "switch_mtu": self.switch_mtu, "sshd": self.sshd,
                "exec_template": EXEC_TEMPLATE, "nodeset": self.nodeset,
                "ssh_agent": self.ssh_agent, "key": self.key if self.sshd else None,
                "pids": dict(pids or {})}

    def shaper_burst(self) -> int | None:
        if self.rate is None:
            return None
        return self.burst if self.burst is not None else tbf_burst(self.rate)

    # -------------------------------------------------------------- up, down

    def __enter__(self) -> Lab:
        self.up()
        return self

    def __exit__(self, *exc: object) -> None:
        self.down()

    def up(self) -> LabState:
        """Build the lab; on any failure (Ctrl-C too) remove what was made, then raise.
        The state is written before the first namespace exists."""
        require_root()
        _require_tools(["ip", "tc", "bridge", *(["ssh-keygen", SSHD] if self.sshd else [])])
        taken = set(self.namespaces) & set(list_namespaces())
        if taken:
            raise errors.Busy(f"namespace {sorted(taken)[0]} exists already",
                              f"'beoperf lab down --name {self.name}' removes a lab of that name")
        write_state(self.state("building"), new=True)
        try:
            pids = self._build()
            final = self.state("up", pids)
            write_state(final)
        except BaseException:
            with contextlib.suppress(Exception):
                down(self.name)
            raise
        return final

    def down(self) -> list[str]:
        return down(self.name)

    def _build(self) -> dict[str, int]:
        for ns in self.namespaces:
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "dev", "lo", "up")
        port_mtu = str(self.switch_mtu or PORT_MTU)
        _ip("-n", self.switch, "link", "add", BRIDGE, "mtu", port_mtu, "type", "bridge",
            "mcast_snooping", "0")
        _ip("-n", self.switch, "link", "set", "dev", BRIDGE, "up")
        ends = [(self.host_name(i), f"p{i}", self.addr4(i), self.addr6(i), self.mtu_of(i))
                for i in range(self.hosts)]
        if self.ctl:
            ends.append((self.ctl, "pc", f"{NET4}{CTL_INDEX}", f"{NET6}{CTL_INDEX:x}",
                         self.mtu))
        for ns, port, a4, a6, mtu in ends:
            self._plug(ns, port, port_mtu, a4, a6, mtu)
        if self.rate is not None:
            for ns in self.host_names:
                self._shape(ns)
        for ns in [e[0] for e in ends]:
            _wait(lambda ns=ns: _ready(ns), f"{ns}/{IFNAME} up")
        _wait(lambda: _ports_forwarding(self.switch), f"the bridge ports of {self.switch}")
        return self._start_sshds() if self.sshd else {}

    def _plug(self, ns: str, port: str, port_mtu: str, a4: str, a6: str, mtu: int) -> None:
        """One veth from the bridge (``port``) to ``ns`` (``eth0``) with its addresses."""
        _ip("-n", self.switch, "link", "add", port, "mtu", port_mtu, "type", "veth",
            "peer", "name", IFNAME, "netns", ns)
        _ip("-n", self.switch, "link", "set", "dev", port, "master", BRIDGE, "up")
        _ip("-n", ns, "link", "set", "dev", IFNAME, "mtu", str(mtu))
        _ip("-n", ns, "addr", "add", f"{a4}/{PREFIXLEN4}", "dev", IFNAME)
        _ip("-n", ns, "addr", "add", f"{a6}/{PREFIXLEN6}", "dev", IFNAME, "nodad")
        _ip("-n", ns, "link", "set", "dev", IFNAME, "up")

    def _shape(self, ns: str) -> None:
        assert self.rate is not None
        _cmd(["ip", "netns", "exec", ns, "tc", "qdisc", "replace", "dev", IFNAME, "root",
              "tbf", "rate", f"{round(self.rate)}bit", "burst", str(self.shaper_burst()),
              "latency", TBF_LATENCY])

    def _start_sshds(self) -> dict[str, int]:
        keys = key_dir(self.name)
        _make_keys(keys)
        pids = {}
        for i, ns in enumerate(self.host_names):
            pids[ns] = _spawn_sshd(ns, keys, [self.addr4(i), f"[{self.addr6(i)}]"])
            write_state(self.state("building", pids))
        for ns, pid in pids.items():
            _wait(lambda pid=pid: _listening(pid, 22), f"sshd in {ns}")
        return pids


# ------------------------------------------------------------------ building blocks


def _require_tools(tools: Sequence[str]) -> None:
    missing = [t for t in tools if shutil.which(t) is None and not os.access(t, os.X_OK)]
    if missing:
        raise errors.Failed(f"beoperf lab needs {', '.join(missing)}",
                            "install iproute2 and openssh-server (or use --no-sshd)")


def _wait(predicate: Any, what: str, timeout: float = READY_TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise LabError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.05)


def _ready(ns: str) -> bool:
    """The interface is up with carrier, and IPv6 configured on it (until then IPv6
    drops incoming neighbour solicitations)."""
    link = json.loads(_ip("-n", ns, "-j", "link", "show", "dev", IFNAME)[1] or "[]")
    if not link or link[0].get("operstate") != "UP":
        return False
    out = _ip("-n", ns, "-j", "-6", "route", "show", "table", "local", "dev", IFNAME)[1]
    return any(r.get("dst") == "ff00::/8" for r in json.loads(out or "[]"))


def _ports_forwarding(ns: str) -> bool:
    out = _cmd(["bridge", "-n", ns, "-j", "link", "show"])[1]
    return all(p.get("state") == "forwarding" for p in json.loads(out or "[]"))


def _make_keys(keys: str) -> None:
    """The lab's host key and root's login key, and sshd's configuration, in a 0700
    directory under the state directory."""
    fd = safeio.open_private_dir(keys, create=True)
    assert fd is not None
    os.close(fd)
    for key in ("hostkey", "userkey"):
        for path in (f"{keys}/{key}", f"{keys}/{key}.pub"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)
        _cmd(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "beoperf-lab",
              "-f", f"{keys}/{key}"])
    with open(f"{keys}/userkey.pub", "rb") as f:
        safeio.write_atomic(f"{keys}/authorized_keys", f.read(4096), mode=0o600)
    safeio.write_atomic(f"{keys}/sshd_config", SSHD_CONFIG, mode=0o600)


def _spawn_sshd(ns: str, keys: str, listen: Sequence[str]) -> int:
    """sshd inside ``ns``, in a session of its own (it outlives ``lab up``) and in a mount
    namespace of its own (``ip netns exec`` gives one) where a tmpfs /run holds its
    privilege-separation directory and a copy of the lab's keys: nothing outside is
    written.  Its PID (``ip netns exec`` and ``sh`` exec into it)."""
    listen_opts = " ".join(f"-o ListenAddress={a}" for a in listen)
    script = (f"cd {keys} && mount -t tmpfs -o mode=0755 tmpfs /run && "
              "mkdir -m 0755 /run/sshd && mkdir -m 0700 /run/beolab && "
              f"cp {' '.join(KEY_FILES)} /run/beolab/ && "
              f"exec {SSHD} -D -e -f /run/beolab/sshd_config {listen_opts}")
    argv = ["ip", "netns", "exec", ns, "sh", "-c", script]
    actions = [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]
    ip = shutil.which("ip") or "/usr/sbin/ip"
    return os.posix_spawn(ip, argv, _clean_env(), file_actions=actions, setsid=True)


def _clean_env() -> dict[str, str]:
    return {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "LANG": "C"}


def _listening(pid: int, port: int) -> bool:
    """Whether a TCP socket listens on ``port`` in the network namespace of ``pid``
    (read in /proc/PID/net: that namespace's tables)."""
    if not _alive(pid):
        raise LabError(f"sshd (pid {pid}) ended at once; is openssh-server installed?")
    want = f":{port:04X} "
    for table in ("tcp", "tcp6"):
        try:
            with open(f"/proc/{pid}/net/{table}", "rb") as f:
                text = f.read(1024 * 1024).decode(errors="replace")
        except OSError:
            continue
        for line in text.splitlines()[1:]:
            fields = line.split()
            if len(fields) > 3 and f"{fields[1]} ".endswith(want) and fields[3] == "0A":
                return True
    return False


# ------------------------------------------------------------------ down, status


def namespace_inodes(name: str) -> set[int]:
    """The network namespace inodes of lab ``name``'s namespaces that exist now."""
    require_root()
    ours = re.compile(rf"{PREFIX}-{re.escape(check_name(name))}-(?:\d{{1,3}}|sw|ctl)")
    found = set()
    for ns in list_namespaces():
        if ours.fullmatch(ns):
            with contextlib.suppress(OSError):
                found.add(os.stat(os.path.join("/run/netns", ns)).st_ino)
    return found


def down(name: str) -> list[str]:
    """Remove lab ``name``: what runs in its namespaces (by PID), the namespaces, its keys
    and state.  Idempotent; also after an ``up`` that crashed.  The namespaces removed."""
    require_root()
    state = read_state(name)
    ours = re.compile(rf"{PREFIX}-{re.escape(check_name(name))}-(?:\d{{1,3}}|sw|ctl)")
    existing = [ns for ns in list_namespaces() if ours.fullmatch(ns)]
    recorded = list(state["namespaces"]) if state else []
    pids = list(state.get("pids", {}).values()) if state else []
    removed = []
    for ns in dict.fromkeys([*recorded, *existing]):
        if ns not in existing:
            continue
        kill_namespace(ns, pids)
        _ip("netns", "del", ns, check=False)
        removed.append(ns)
    left = set(removed) & set(list_namespaces())
    if left:
        raise LabError(f"namespaces not removed: {', '.join(sorted(left))}")
    _remove_state(name)
    return removed


def status(name: str) -> LabState | None:
    """The state of lab ``name`` with what is true now: which namespaces exist and which
    sshds run (None: no such lab)."""
    require_root()
    state = read_state(name)
    if state is None:
        return None
    existing = set(list_namespaces())
    return state | {"present": [ns for ns in state["namespaces"] if ns in existing],
                    "missing": [ns for ns in state["namespaces"] if ns not in existing],
                    "sshd_running": {ns: _alive(pid) and ns in existing
                                     for ns, pid in state.get("pids", {}).items()}}


def labs() -> list[str]:
    """The names of the labs that have a state file."""
    fd = _open_state_dir(create=False)
    if fd is None:
        return []
    try:
        names = os.listdir(fd)
    finally:
        os.close(fd)
    return sorted(n[:-5] for n in names if n.endswith(".json") and NAME_RE.fullmatch(n[:-5]))


