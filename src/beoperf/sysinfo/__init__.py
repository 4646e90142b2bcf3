"""Collect the host, interface, socket and clock metadata stored with every measurement.

Latency and bandwidth numbers are only comparable when we know what produced them: which
CPU and cache, which NIC and driver at which MTU and link speed, which socket buffers the
kernel actually granted, and how fine the clock is.  Everything here is pure stdlib and
Linux-oriented; every collector degrades to ``None`` for facts it cannot see instead of
raising, so metadata gathering can never abort a measurement.
"""

from __future__ import annotations

import array
import fcntl
import ipaddress
import json
import os
import platform
import shutil
import socket
import struct
import subprocess
import threading
import time
from pathlib import Path

from beoperf import units

__all__ = [
    "clock_facts",
    "endpoint_facts",
    "host_facts",
    "interface_facts",
    "llc_bytes",
    "qdisc_stats_json",
    "resolve_host",
    "route_interface",
    "socket_facts",
]

SIOCETHTOOL = 0x8946
ETHTOOL_GDRVINFO = 0x00000003
IFNAMSIZ = 16
_IFREQ_SIZE = 40
# struct ethtool_drvinfo: u32 cmd; char driver[32], version[32], fw_version[32],
# bus_info[32], erom_version[32], reserved2[12]; u32 n_priv_flags, n_stats,
# testinfo_len, eedump_len, regdump_len.
_DRVINFO_FMT = "=I32s32s32s32s32s12s5I"
_DRVINFO_SIZE = struct.calcsize(_DRVINFO_FMT)  # 196 bytes

_ROUTE_TIMEOUT_S = 2.0
RESOLVE_TIMEOUT_S = 5.0


# --------------------------------------------------------------------------- helpers


def _read_text(path: str | os.PathLike[str]) -> str | None:
    """Return the stripped contents of a small (sysfs/procfs) file, or None if unreadable."""
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace").strip()
    except (OSError, ValueError):
        return None


def _read_int(path: str | os.PathLike[str]) -> int | None:
    """Return a file's contents as an int, or None if unreadable or not an integer."""
    text = _read_text(path)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _nonempty(value: str | None) -> str | None:
    """Map empty strings to None so 'unknown' has a single representation."""
    return value if value else None


def _parse_cache_size(text: str | None) -> int | None:
    """Parse a sysfs cache size such as '32K', '32768K' or '1M' into bytes."""
    if text is None:
        return None
    try:
        return units.parse_size(text)
    except ValueError:
        return None


# --------------------------------------------------------------------------- host


def llc_bytes(root: str = "/sys") -> int | None:
    """Size in bytes of cpu0's last-level (largest-level) data/unified cache, or None.

    The LLC size decides where in a message-size sweep copies stop being cache-resident,
    which explains knees in bandwidth curves.
    """
    cache_dir = Path(root, "devices", "system", "cpu", "cpu0", "cache")
    try:
        indexes = sorted(cache_dir.glob("index*"))
    except OSError:
        return None
    best: tuple[int, int] | None = None
    for index in indexes:
        if _read_text(index / "type") == "Instruction":
            continue
        level = _read_int(index / "level")
        size = _parse_cache_size(_read_text(index / "size"))
        if level is None or size is None:
            continue
        if best is None or (level, size) > best:
            best = (level, size)
    return best[1] if best else None


def _os_pretty_name() -> str | None:
    """PRETTY_NAME from os-release(5), or None."""
    for path in ("/etc/os-release", "/usr/lib/os-release"):
        text = _read_text(path)
        if text is None:
            continue
        for line in text.splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() == "PRETTY_NAME":
                return _nonempty(value.strip().strip("\"'"))
    return None


def _cpu_model() -> str | None:
    """CPU model name from /proc/cpuinfo, falling back to platform.processor()."""
    text = _read_text("/proc/cpuinfo") or ""
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep and key.strip() == "model name":
            return _nonempty(value.strip())
    return _nonempty(platform.processor())


def host_facts() -> dict:
    """Describe this host (name, kernel, OS, CPU, cache, Python) for run comparability."""
    return {
        "hostname": _nonempty(socket.gethostname()),
        "kernel": _nonempty(platform.release()),
        "os": _os_pretty_name(),
        "cpu_model": _cpu_model(),
        "cpus": os.cpu_count(),
        "llc_bytes": llc_bytes(),
        "python": platform.python_version(),
    }


def clock_facts() -> dict:
    """Describe the clock used for timing, so timer granularity can be judged."""
    try:
        resolution_ns: int | None = round(time.clock_getres(time.CLOCK_MONOTONIC) * 1e9)
    except (OSError, AttributeError):
        resolution_ns = None
    return {"source": "CLOCK_MONOTONIC", "resolution_ns": resolution_ns}


# --------------------------------------------------------------------------- routing


def _find_tool(name: str) -> str | None:
    """Path of an iproute2 binary (PATH first, then the usual sbin and bin dirs), or None."""
    found = shutil.which(name)
    if found:
        return found
    for directory in ("/usr/sbin", "/sbin", "/usr/bin", "/bin"):
        candidate = f"{directory}/{name}"
        if os.access(candidate, os.X_OK):
            return candidate
    return None


def _find_ip() -> str | None:
    """Path of the iproute2 `ip` binary, or None."""
    return _find_tool("ip")


def _route_get_argv(ip: str, addr: str) -> list[str] | None:
    """Build the `ip -j route get` argv for a (possibly scoped) IP address, or None if invalid."""
    host, _, scope = addr.partition("%")
    try:
        parsed = ipaddress.ip_address(host)
    except ValueError:
        return None
    if isinstance(parsed, ipaddress.IPv6Address) and parsed.ipv4_mapped is not None:
        parsed = parsed.ipv4_mapped  # v4-mapped peers are routed by the IPv4 table
    argv = [ip, "-j", "route", "get", str(parsed)]
    if scope:
        argv += ["oif", scope]
    return argv


def _is_ip(host: str) -> bool:
    try:
        ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return False
    return True


def resolve_host(host: str, timeout: float = RESOLVE_TIMEOUT_S) -> str:
    """The address ``host`` names: an IP address as given, a host name through
    getaddrinfo (the first address it gives, as a TCP client would use), waiting at most
    ``timeout`` seconds.  ValueError with a one-line reason when it cannot be resolved."""
    if _is_ip(host):
        return host
    if not host or len(host) > 253 or any(c.isspace() or not c.isprintable() for c in host):
        raise ValueError(f"{host!r} is not a host name or an IP address")
    result: list = []

    def lookup() -> None:
        try:
            result.append(socket.getaddrinfo(host, None, type=socket.SOCK_STREAM))
        except (OSError, UnicodeError) as exc:
            result.append(exc)

    worker = threading.Thread(target=lookup, name="resolve", daemon=True)  # never joined
    worker.start()                                                          # if it hangs
    worker.join(timeout)
    if not result:
        raise ValueError(f"resolving {host!r} took more than {timeout:g} s")
    if isinstance(result[0], BaseException):
        reason = getattr(result[0], "strerror", None) or str(result[0])
        raise ValueError(f"unknown host {host!r} ({reason})")
    return str(result[0][0][4][0])


def route_interface(addr: str) -> dict | None:
    """Ask the kernel which interface and source address it uses to reach `addr` (an IP
    address, or a host name: resolved with :func:`resolve_host`).

    Returns {"dev": name, "prefsrc": source address or None}, or None if `ip` (iproute2)
    is missing, the address is invalid or unknown, or the lookup fails.
    """
    if not _is_ip(addr):
        try:
            addr = resolve_host(addr)
        except ValueError:
            return None
    ip = _find_ip()
    argv = _route_get_argv(ip, addr) if ip else None
    if argv is None:
        return None
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=_ROUTE_TIMEOUT_S, check=True
        )
        routes = json.loads(proc.stdout)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    if not isinstance(routes, list) or not routes or not isinstance(routes[0], dict):
        return None
    dev = routes[0].get("dev")
    if not dev:
        return None
    return {"dev": dev, "prefsrc": routes[0].get("prefsrc")}


_TC_TIMEOUT_S = 1.0
_TC_MAX_OUTPUT = 4 * 1024 * 1024


def qdisc_stats_json() -> str | None:
    """The output of ``tc -s -j qdisc show`` (every qdisc of this network namespace and
    its counters, as JSON text), or None when tc is missing, fails, takes longer than a
    second or says too much (beoperf.sysinfo.counters parses it)."""
    tc = _find_tool("tc")
    if tc is None:
        return None
    try:
        proc = subprocess.run([tc, "-s", "-j", "qdisc", "show"], capture_output=True,
                              text=True, timeout=_TC_TIMEOUT_S, check=True)
    except (OSError, subprocess.SubprocessError, ValueError):
        return None
    return proc.stdout if len(proc.stdout) <= _TC_MAX_OUTPUT else None


# --------------------------------------------------------------------------- interfaces


def _cstr(raw: bytes) -> str | None:
    """Decode a NUL-terminated fixed-size C char array; empty becomes None."""
    return _nonempty(raw.split(b"\0", 1)[0].decode("utf-8", errors="replace").strip())


def _ethtool_drvinfo(ifname: str) -> dict | None:
    """Query driver info via the SIOCETHTOOL/ETHTOOL_GDRVINFO ioctl, or None on failure."""
    name = ifname.encode("utf-8", errors="replace")
    if not name or len(name) >= IFNAMSIZ or b"\0" in name:
        return None
    drvinfo = array.array("B", struct.pack("=I", ETHTOOL_GDRVINFO) + bytes(_DRVINFO_SIZE - 4))
    address, _ = drvinfo.buffer_info()
    ifreq = struct.pack("16sP", name, address).ljust(_IFREQ_SIZE, b"\0")
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            fcntl.ioctl(sock.fileno(), SIOCETHTOOL, ifreq)
    except (OSError, ValueError):
        return None
    fields = struct.unpack(_DRVINFO_FMT, drvinfo.tobytes())
    return {
        "driver": _cstr(fields[1]),
        "driver_version": _cstr(fields[2]),
        "firmware_version": _cstr(fields[3]),
        "bus_info": _cstr(fields[4]),
    }


def _sysfs_driver(ifname: str, root: str) -> dict:
    """Driver name/version from sysfs: device/driver symlink and /sys/module/DRIVER/version."""
    try:
        target = os.readlink(Path(root, "class", "net", ifname, "device", "driver"))
    except OSError:
        return {"driver": None, "driver_version": None}
    driver = _nonempty(os.path.basename(target.rstrip("/")))
    version = _read_text(Path(root, "module", driver, "version")) if driver else None
    return {"driver": driver, "driver_version": _nonempty(version)}


# Drivers of virtual NICs: the speed they report is nominal (veth's 10000, tun's 10, a
# hypervisor's configured figure), and any PCIe link under them is emulated.
VIRTUAL_DRIVERS = frozenset({"veth", "tun", "bridge", "bonding", "dummy", "ifb", "macvlan",
                             "ipvlan", "vxlan", "virtio_net", "vmxnet3", "hv_netvsc",
                             "xen-netfront", "vif", "ena", "gve", "vrf", "team"})


def virtual_reason(ifname: str, driver: str | None, root: str = "/sys") -> str | None:
    """Why an interface's speed is nominal rather than its wire's (no device under it:
    loopback, veth, a bridge; or a virtual NIC's driver), or None for a physical NIC (or
    an interface sysfs does not show)."""
    netdir = Path(root, "class", "net", ifname)
    if not netdir.is_dir():
        return None
    if driver in VIRTUAL_DRIVERS:
        return f"{ifname} is a virtual NIC (driver {driver})"
    if not (netdir / "device").is_dir():
        kind = "loopback" if ifname == "lo" else "a virtual interface"
        return f"{ifname} has no device under it ({kind})"
    return None


def interface_facts(ifname: str, root: str = "/sys") -> dict:
    """Describe network interface `ifname`: MTU, link speed/duplex/state, driver details
    and, for a virtual one, why its speed is nominal (``virtual``).

    Unknown values are None (e.g. speed of lo, which reports -1 or EINVAL); never raises.
    """
    netdir = Path(root, "class", "net", ifname)
    speed = _read_int(netdir / "speed")
    facts: dict = {
        "name": ifname,
        "mtu": _read_int(netdir / "mtu"),
        "speed_mbps": speed if speed is not None and speed >= 0 else None,
        "duplex": _nonempty(_read_text(netdir / "duplex")),
        "operstate": _nonempty(_read_text(netdir / "operstate")),
        "driver": None,
        "driver_version": None,
        "firmware_version": None,
        "bus_info": None,
    }
    for source in (_ethtool_drvinfo(ifname) or {}, _sysfs_driver(ifname, root)):
        for key, value in source.items():
            if facts.get(key) is None:
                facts[key] = value
    facts["virtual"] = virtual_reason(ifname, facts["driver"], root)
    return facts


# --------------------------------------------------------------------------- sockets


def _sockopt(sock: socket.socket, level: int, option: int) -> int | None:
    """getsockopt() as an int, or None if the option is unsupported on this socket."""
    try:
        return sock.getsockopt(level, option)
    except (OSError, ValueError):
        return None


def _format_sockaddr(addr: object) -> str | None:
    """Format an AF_INET/AF_INET6 sockaddr tuple as 'addr:port' ('[addr]:port' for IPv6)."""
    if not isinstance(addr, tuple) or len(addr) < 2:
        return None
    host, port = _unmap(str(addr[0])), addr[1]
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _unmap(host: str) -> str:
    """'::ffff:198.18.0.2' -> '198.18.0.2': a dual-stack socket talking IPv4."""
    return host[7:] if host.lower().startswith("::ffff:") and "." in host else host


def _sockname(sock: socket.socket, peer: bool) -> object:
    """getpeername()/getsockname() result, or None if unavailable (e.g. not connected)."""
    try:
        return sock.getpeername() if peer else sock.getsockname()
    except (OSError, ValueError):
        return None


CONGESTION_CONTROLS = "/proc/sys/net/ipv4/tcp_available_congestion_control"


def congestion_controls(path: str = CONGESTION_CONTROLS) -> tuple[str, ...]:
    """The TCP congestion controls this kernel has loaded (TCP_CONGESTION and the
    tcp_congestion_control sysctl take these without loading a module); none when the
    list cannot be read."""
    return tuple((_read_text(path) or "").split())


def congestion_of(sock: socket.socket) -> str | None:
    """The congestion control a TCP socket uses (TCP_CONGESTION), None if unknown."""
    option = getattr(socket, "TCP_CONGESTION", None)
    if option is None:
        return None
    try:
        return _cstr(sock.getsockopt(socket.IPPROTO_TCP, option, 16))
    except (OSError, ValueError):
        return None


def socket_facts(sock: socket.socket) -> dict:
    """Report the socket options the kernel actually granted (Linux doubles SO_*BUF requests)."""
    nodelay = _sockopt(sock, socket.IPPROTO_TCP, socket.TCP_NODELAY)
    families = {socket.AF_INET: "ipv4", socket.AF_INET6: "ipv6"}
    kind = getattr(sock, "family", None)
    family = families.get(kind) if kind is not None else None
    peer = _sockname(sock, peer=True)
    if isinstance(peer, tuple) and peer and _unmap(str(peer[0])) != str(peer[0]):
        family = "ipv4"  # v4-mapped: the wire carries IPv4
    return {
        "sndbuf": _sockopt(sock, socket.SOL_SOCKET, socket.SO_SNDBUF),
        "rcvbuf": _sockopt(sock, socket.SOL_SOCKET, socket.SO_RCVBUF),
        "mss": _sockopt(sock, socket.IPPROTO_TCP, socket.TCP_MAXSEG),
        "nodelay": None if nodelay is None else bool(nodelay),
        "congestion": congestion_of(sock) if family else None,
        "family": family,
        "local": _format_sockaddr(_sockname(sock, peer=False)),
        "peer": _format_sockaddr(peer),
    }


def endpoint_facts(sock: socket.socket) -> dict:
    """Combine host, socket and peer-route interface facts for one measurement endpoint."""
    peer = _sockname(sock, peer=True)
    route = None
    if isinstance(peer, tuple) and peer and isinstance(peer[0], str):
        route = route_interface(peer[0])
    return {
        "host": host_facts(),
        "socket": socket_facts(sock),
        "interface": interface_facts(route["dev"]) if route else None,
    }
