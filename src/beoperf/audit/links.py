"""The audit's checks of the hardware under the interface: the NIC's PCIe link, the bond it
belongs to, and the Ethernet link's duplex and speed.  All read-only.

These are judged by the hardware's own figures, never by a profile: a bus that cannot
carry the line rate, a half-duplex link or a bond of mismatched slaves is wrong for any
workload, and none of it is something ``beoperf tune`` can change (a finding says what to
look at by hand).  Each check reads files under ``root`` ("/" on a node; a crafted
sysfs/procfs tree in tests, as issue 28 allows for what a VM cannot show: a PCIe link, a
bond, a half-duplex port), every read bounded.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any, ClassVar

from beoperf import safeio
from beoperf.audit.base import (
    Check,
    Finding,
    Unavailable,
    Unknown,
    quoted,
    register,
    run_tool,
    valid_ifname,
)
from beoperf.sysinfo import VIRTUAL_DRIVERS

__all__ = ["PcieLink", "Bond", "LinkMode", "pcie_bandwidth_gbps", "parse_pcie_speed",
           "parse_pcie_width", "parse_bonding", "parse_link_modes", "VIRTUAL_DRIVERS"]

MAX_SLAVES = 64  # of a bond, read (a crafted file may list any number)
SMALL_FILE = 64 * 1024  # bytes: a sysfs attribute is at most a page; /proc/net/bonding a few KiB
# Line code of each PCIe rate (GT/s): 8b/10b up to 5 GT/s (PCIe 1 and 2), 128b/130b from
# 8 to 32 GT/s (PCIe 3 to 5).  64 GT/s (PCIe 6, FLIT mode with FEC) is left unknown.
ENCODING = {2.5: 8 / 10, 5.0: 8 / 10, 8.0: 128 / 130, 16.0: 128 / 130, 32.0: 128 / 130}
LINK_FILES = ("current_link_speed", "current_link_width", "max_link_speed", "max_link_width")


def read_small(path: str) -> str:
    """Stripped content of a small sysfs/procfs file (bounded); Unavailable with the reason."""
    try:
        return safeio.read_text(path, SMALL_FILE, "a sysfs or procfs file").strip()
    except safeio.FileInputError as exc:
        raise Unavailable(str(exc)) from None


def _mbps(text: str | None) -> int | None:
    """A sysfs speed (Mb/s; -1 or empty when the link is down) as a positive int, or None."""
    return int(text) if text and text.isdigit() and 0 < int(text) < 10**7 else None


def _or_none(path: str) -> str | None:
    try:
        return read_small(path)
    except Unavailable:
        return None


# --------------------------------------------------------------------------- PCIe


def parse_pcie_speed(text: str | None) -> float | None:
    """GT/s of a link speed as sysfs shows it ("8.0 GT/s PCIe"; before Linux 5.3 "8 GT/s",
    "2.5 GT/s"); None for "Unknown"/"Unknown speed" (a link down) or anything else."""
    match = re.fullmatch(r"(\d{1,3}(?:\.\d{1,2})?) ?GT/s(?: PCIe)?", (text or "").strip())
    return float(match.group(1)) if match else None


def parse_pcie_width(text: str | None) -> int | None:
    """Lanes of a link width as sysfs shows it ("4"; "x4" as lspci writes it); None for 0
    (no link trained) or anything else."""
    match = re.fullmatch(r"x?(\d{1,2})", (text or "").strip())
    return int(match.group(1)) if match and 0 < int(match.group(1)) <= 32 else None


def pcie_bandwidth_gbps(gts: float, lanes: int) -> float | None:
    """Usable bit rate of a PCIe link in one direction, Gbit/s: transfers x lanes x the line
    code's share (8b/10b, 128b/130b); None for a rate whose line code is not known here.
    Packet (TLP) headers take a further 5-20% depending on the payload size; this figure
    is the bound no traffic exceeds."""
    share = ENCODING.get(gts)
    return None if share is None else gts * lanes * share


def _link_text(gts: float, lanes: int) -> str:
    return f"{gts:g} GT/s x{lanes}"


@dataclass(frozen=True)
class PcieFacts:
    """The four link files, parsed (None: not read or not trained)."""

    speed: float | None
    width: int | None
    max_speed: float | None
    max_width: int | None


class HardwareCheck(Check):
    """A check of the hardware under the audited interface, read under ``root``."""

    per_interface = True
    advice_reason: ClassVar[str | None] = "hardware: checked and changed by hand"
    root: str = "/"

    def path(self, absolute: str) -> str:
        """``absolute`` (a /sys or /proc path) under this check's root."""
        return os.path.join(self.root, absolute.lstrip("/"))

    def netdir(self) -> str:
        return self.path(f"/sys/class/net/{self.interface}")

    def driver(self) -> str | None:
        """The interface's driver (the name of device/driver's target), None if it has none."""
        target = os.path.realpath(os.path.join(self.netdir(), "device", "driver"))
        return os.path.basename(target) if os.path.isdir(target) else None

    def virtual_reason(self) -> str | None:
        """Why the interface's hardware figures are not its own (a virtual NIC), or None."""
        if not os.path.isdir(os.path.join(self.netdir(), "device")):
            return (f"{self.interface} has no device (a virtual interface: veth, bridge, bond, "
                    "tun...)")
        driver = self.driver()
        if driver in VIRTUAL_DRIVERS:
            return f"{self.interface} is a virtual NIC (driver {driver})"
        return None

    def interface_problem(self) -> str | None:
        """Why the interface cannot be looked at (none, or not a valid name), or None."""
        if not self.interface:
            return "no interface (no --interface and no default route)"
        if not valid_ifname(self.interface):
            return f"{quoted(self.interface)} is not an interface name"
        return None

    def unknown(self, key: str, reason: str) -> Finding:
        return Finding(self.name, key, None, "unknown", reason)


@register
class PcieLink(HardwareCheck):
    """The NIC's PCIe link: whether the bus carries the line rate (per direction: PCIe and
    full-duplex Ethernet both carry their rate each way at once, so one direction of each is
    compared) and whether the link trained at its maximum speed and width."""

    name = "pcie"
    KEYS = ("pcie.bandwidth_gbps", "pcie.trained")

    def collect(self) -> dict:
        problem = self.interface_problem()
        if problem:
            return {"problem": problem}
        virtual = self.virtual_reason()
        if virtual:
            return {"problem": f"{virtual}: its bus is not known"}
        device = os.path.join(self.netdir(), "device")
        texts = {name: _or_none(os.path.join(device, name)) for name in LINK_FILES}
        if all(t is None for t in texts.values()):
            return {"problem": f"{self.interface}'s device has no PCIe link files (not PCIe: "
                               "legacy PCI, whose bus width and clock sysfs does not show, or "
                               "another bus)"}
        return {"link": PcieFacts(parse_pcie_speed(texts["current_link_speed"]),
                                  parse_pcie_width(texts["current_link_width"]),
                                  parse_pcie_speed(texts["max_link_speed"]),
                                  parse_pcie_width(texts["max_link_width"])),
                "texts": texts,
                "line_mbps": _mbps(_or_none(os.path.join(self.netdir(), "speed"))),
                "ports": self.ports(device)}

    def ports(self, device: str) -> dict[str, int | None]:
        """The interfaces of every function of the NIC behind ``device`` (its ports: the
        functions of one PCI device, bus:device.0 to .7, share its link) -> their speeds
        (Mb/s; None when down).  Virtual functions (SR-IOV: a physfn link) are left out:
        their traffic is their port's."""
        real = os.path.realpath(device)
        parent, slot = os.path.split(real)
        match = re.fullmatch(r"([0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2})\.[0-7]", slot)
        if not match:
            return {}
        out: dict[str, int | None] = {}
        for function in (f"{match.group(1)}.{n}" for n in range(8)):
            where = os.path.join(parent, function)
            if os.path.exists(os.path.join(where, "physfn")) or \
                    not os.path.isdir(os.path.join(where, "net")):
                continue
            for name in sorted(os.listdir(os.path.join(where, "net")))[:MAX_SLAVES]:
                if valid_ifname(name):
                    out[name] = _mbps(_or_none(os.path.join(where, "net", name, "speed")))
        return out

    def judge(self, facts: dict, profile: dict) -> list[Finding]:
        if "problem" in facts:
            return [self.unknown(key, facts["problem"]) for key in self.KEYS]
        link: PcieFacts = facts["link"]
        bandwidth = self._bandwidth(link, facts["line_mbps"], facts["texts"])
        if bandwidth.status == "pass":
            bandwidth = self._shared(bandwidth, facts["ports"])
        return [bandwidth, self._trained(link, facts["texts"])]

    def _shared(self, found: Finding, ports: dict[str, int | None]) -> Finding:
        """A link that carries this port but not all the NIC's ports up at once: warn."""
        up = {name: mbps for name, mbps in ports.items() if mbps}
        total = sum(up.values()) / 1000
        usable = float(found.value)
        if len(up) < 2 or usable >= total:
            return found
        shown = " + ".join(f"{name} {mbps / 1000:g}" for name, mbps in sorted(up.items()))
        return Finding(self.name, found.key, found.value, "warn",
                       f"{found.reason}; but the NIC's {len(up)} ports up share the slot: "
                       f"{shown} = {total:g} Gbit/s, more than its {usable:.2f}: all at "
                       "line rate at once, the bus caps them")

    def _bandwidth(self, link: PcieFacts, line_mbps: int | None, texts: dict) -> Finding:
        key = "pcie.bandwidth_gbps"
        if link.speed is None or link.width is None:
            return self.unknown(key, f"the link's speed or width is not known (current "
                                     f"{quoted(texts['current_link_speed'])}, width "
                                     f"{quoted(texts['current_link_width'])}): link down?")
        usable = pcie_bandwidth_gbps(link.speed, link.width)
        trained = _link_text(link.speed, link.width)
        if usable is None:
            return self.unknown(key, f"{trained}: the line code of {link.speed:g} GT/s is not "
                                     "known to beoperf")
        value = round(usable, 2)
        if line_mbps is None:
            return Finding(self.name, key, value, "unknown",
                           f"{trained} carries {usable:.2f} Gbit/s each way; the NIC's line "
                           "rate is not known (link down?)")
        line = line_mbps / 1000
        if usable < line:
            return Finding(self.name, key, value, "fail",
                           f"{trained} carries at most {usable:.2f} Gbit/s each way, less than "
                           f"the link's {line:g} Gbit/s: the bus caps throughput; move the NIC "
                           "to a slot of more lanes or a faster generation")
        return Finding(self.name, key, value, "pass",
                       f"{trained} carries {usable:.2f} Gbit/s each way, {usable / line:.2f}x "
                       f"the link's {line:g} Gbit/s (before packet headers, 5-20%)")

    def _trained(self, link: PcieFacts, texts: dict) -> Finding:
        key = "pcie.trained"
        speed, width, max_speed, max_width = link.speed, link.width, link.max_speed, \
            link.max_width
        if speed is None or width is None or max_speed is None or max_width is None:
            shown = ", ".join(f"{k} {quoted(v)}" for k, v in texts.items())
            return self.unknown(key, "the link's current or maximum speed or width is not "
                                     f"known ({shown})")
        now, best = _link_text(speed, width), _link_text(max_speed, max_width)
        value = f"{now} of {best}"
        short = [what for what, low in (("speed", speed < max_speed),
                                        ("width", width < max_width)) if low]
        if short:
            return Finding(self.name, key, value, "warn",
                           f"trained at {now}, below its maximum {best} ({' and '.join(short)}):"
                           " a slot with fewer lanes or an older generation, a riser, or power "
                           "saving (ASPM may lower the speed while idle: read it under load)")
        return Finding(self.name, key, value, "pass", f"trained at its maximum, {best}")


# --------------------------------------------------------------------------- bonds


def parse_bonding(text: str) -> dict:
    """/proc/net/bonding/BOND as {"mode", "slaves": [{"interface", "mii_status", "speed_mbps"
    (None: "Unknown"), "duplex", "link_failures"}]}.  Indented lines (802.3ad details) and
    lines this does not know are skipped, slaves past MAX_SLAVES too (a name that is no
    interface's is shown quoted); ValueError if there is no "Bonding Mode" line."""
    out: dict[str, Any] = {"mode": None, "slaves": []}
    slave: dict[str, Any] | None = None
    for line in text.splitlines():
        if not line or line[0].isspace() or ": " not in line:
            continue
        name, value = (part.strip() for part in line.split(": ", 1))
        if name == "Bonding Mode":
            out["mode"] = value
        elif name == "Slave Interface" and len(out["slaves"]) < MAX_SLAVES:
            slave = {"interface": value if valid_ifname(value) else quoted(value, 20),
                     "mii_status": None, "speed_mbps": None, "duplex": None,
                     "link_failures": None}
            out["slaves"].append(slave)
        elif name == "Slave Interface":
            slave = None  # past MAX_SLAVES: not read
        elif slave is not None:
            _slave_field(slave, name, value)
    if out["mode"] is None:
        raise ValueError("no 'Bonding Mode' line: not a /proc/net/bonding file")
    return out


def _slave_field(slave: dict, name: str, value: str) -> None:
    if name == "MII Status" and slave["mii_status"] is None:
        slave["mii_status"] = value
    elif name == "Speed":
        match = re.fullmatch(r"(\d{1,7}) Mbps", value)
        slave["speed_mbps"] = int(match.group(1)) if match else None
    elif name == "Duplex":
        slave["duplex"] = value.lower()
    elif name == "Link Failure Count" and value.isdigit():
        slave["link_failures"] = int(value)


# the modes as /proc/net/bonding names them (drivers/net/bonding/bond_options.c)
ROUND_ROBIN = "load balancing (round-robin)"
LACP = "IEEE 802.3ad Dynamic link aggregation"


@register
class Bond(HardwareCheck):
    """The bond the interface is (or is a slave of): its mode and slaves, judged for slaves
    down, mismatched slaves and link failures since the bond came up."""

    name = "bond"
    KEYS = ("bond.mode", "bond.slaves_down", "bond.mismatch", "bond.link_failures")

    def bond_name(self) -> str | None:
        """The interface itself when it is a bond, else its master when that is a bond."""
        if os.path.isfile(self.path(f"/proc/net/bonding/{self.interface}")):
            return self.interface
        master = os.path.join(self.netdir(), "master")
        if os.path.islink(master):
            name = os.path.basename(os.path.realpath(master))
            if valid_ifname(name) and os.path.isfile(self.path(f"/proc/net/bonding/{name}")):
                return name
        return None

    def collect(self) -> dict:
        problem = self.interface_problem()
        if problem:
            return {"problem": problem}
        bond = self.bond_name()
        if bond is None:
            return {"bond": None}
        try:
            parsed = parse_bonding(read_small(self.path(f"/proc/net/bonding/{bond}")))
        except (Unavailable, ValueError) as exc:
            return {"problem": f"/proc/net/bonding/{bond}: {exc}"}
        return {"bond": bond, **parsed}

    def judge(self, facts: dict, profile: dict) -> list[Finding]:
        if "problem" in facts:
            return [self.unknown("bond.mode", facts["problem"])]
        bond = facts["bond"]
        if bond is None:
            return [Finding(self.name, "bond.mode", None, "pass",
                            f"{self.interface} is not in a bond (no /proc/net/bonding entry)")]
        slaves = facts["slaves"]
        names = " ".join(s["interface"] for s in slaves) or "none"
        out = [Finding(self.name, "bond.mode", facts["mode"], "pass",
                       f"{bond}: {len(slaves)} slave(s): {names}")]
        return out + [self._down(bond, slaves), self._mismatch(bond, facts["mode"], slaves),
                      self._failures(bond, slaves)]

    def _down(self, bond: str, slaves: list[dict]) -> Finding:
        down = [s["interface"] for s in slaves if s["mii_status"] != "up"]
        if not slaves or len(down) == len(slaves):
            return Finding(self.name, "bond.slaves_down", " ".join(down) or None, "fail",
                           f"{bond} has no slave up: it carries nothing")
        if down:
            return Finding(self.name, "bond.slaves_down", " ".join(down), "warn",
                           f"{len(down)} of {len(slaves)} slaves of {bond} down: it runs on "
                           "the others, without their capacity or redundancy; check cables and "
                           "switch ports")
        return Finding(self.name, "bond.slaves_down", None, "pass",
                       f"all {len(slaves)} slaves of {bond} up")

    def _mismatch(self, bond: str, mode: str, slaves: list[dict]) -> Finding:
        """Slaves up at different speeds or duplex.  Half duplex fails (collisions); speeds
        that differ fail in round-robin (each slave gets an equal share, so the bond runs at
        the slowest one's rate times the slaves, and segments arrive out of order) and warn
        in the other modes (802.3ad aggregates only ports of one speed and uses one
        aggregator; elsewhere a failover, or the flows hashed to the slower slave, run
        slower)."""
        up = [s for s in slaves if s["mii_status"] == "up"]
        shown = " ".join(f"{s['interface']}:{s['speed_mbps'] or '?'}Mb/s/{s['duplex'] or '?'}"
                         for s in up)
        half = [s["interface"] for s in up if s["duplex"] == "half"]
        if half:
            return Finding(self.name, "bond.mismatch", shown, "fail",
                           f"half duplex on {' '.join(half)} of {bond}: collisions and late "
                           "frames; set the switch port and the NIC to autonegotiate")
        speeds = {s["speed_mbps"] for s in up}
        if None in speeds:
            return self.unknown("bond.mismatch", f"a speed of a slave of {bond} is not "
                                                 f"reported ({shown or 'no slave up'})")
        if len(speeds) > 1:
            rr = mode == ROUND_ROBIN
            if rr:
                why = ("round-robin gives each slave an equal share: the bond runs at the "
                       "slowest slave's rate per slave and reorders segments")
            elif mode == LACP:
                why = ("802.3ad puts ports of different speeds in different aggregators and "
                       "sends on one: the others carry nothing")
            else:
                why = ("traffic on the slower slave (a failover, or the flows hashed to it) "
                       "runs slower")
            return Finding(self.name, "bond.mismatch", shown, "fail" if rr else "warn",
                           f"slaves of {bond} at different speeds: {why}")
        return Finding(self.name, "bond.mismatch", shown or None, "pass",
                       f"the slaves of {bond} that are up match in speed and duplex")

    def _failures(self, bond: str, slaves: list[dict]) -> Finding:
        counts = {s["interface"]: s["link_failures"] for s in slaves}
        shown = " ".join(f"{k}:{'?' if v is None else v}" for k, v in counts.items())
        failed = [k for k, v in counts.items() if v]
        if failed:
            return Finding(self.name, "bond.link_failures", shown, "warn",
                           f"links of {bond} went down since it came up ({', '.join(failed)}): "
                           "a flapping cable, port or driver; a run during a failover is not "
                           "a measure of the network")
        if any(v is None for v in counts.values()):
            return self.unknown("bond.link_failures", f"not reported for every slave ({shown})")
        return Finding(self.name, "bond.link_failures", shown or None, "pass",
                       f"no link failure on {bond}'s slaves since it came up")


# --------------------------------------------------------------------------- duplex, speed


MODE = re.compile(r"\b(\d{1,7})base[A-Za-z0-9_-]*/(Half|Full)\b")


def parse_link_modes(text: str, heading: str = "Supported link modes") -> list[int]:
    """Speeds (Mb/s) of the link modes ``ethtool IF`` lists under ``heading`` (its
    continuation lines included); empty for "Not reported" or no such heading."""
    speeds: list[int] = []
    inside = False
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith(heading + ":"):
            inside, stripped = True, stripped[len(heading) + 1:]
        elif inside and ":" in stripped:
            break
        if inside:
            speeds += [int(m.group(1)) for m in MODE.finditer(stripped)]
    return speeds


@register
class LinkMode(HardwareCheck):
    """The Ethernet link's duplex (half fails: collisions, and a peer at full duplex sees
    late collisions and CRC errors) and speed (below the fastest mode the NIC supports
    warns, naming what the link partner advertises when the NIC reports it)."""

    name = "link"
    KEYS = ("link.duplex", "link.speed")

    def collect(self) -> dict:
        problem = self.interface_problem() or self.virtual_reason()
        if problem:
            return {"problem": problem}
        speed = _or_none(os.path.join(self.netdir(), "speed"))
        try:
            text: str | Unknown = run_tool(["ethtool", str(self.interface)])
        except Unavailable as exc:
            text = Unknown(str(exc))
        return {"duplex": _or_none(os.path.join(self.netdir(), "duplex")),
                "speed": int(speed) if speed and speed.isdigit() and int(speed) > 0 else None,
                "ethtool": text}

    def judge(self, facts: dict, profile: dict) -> list[Finding]:
        if "problem" in facts:
            reason = f"{facts['problem']}: its speed and duplex are nominal, not known"
            return [self.unknown(key, reason) for key in self.KEYS]
        return [self._duplex(facts["duplex"]), self._speed(facts["speed"], facts["ethtool"])]

    def _duplex(self, duplex: str | None) -> Finding:
        if duplex == "half":
            command = f"ethtool -s {self.interface} autoneg on"
            return Finding(self.name, "link.duplex", duplex, "fail",
                           f"{self.interface} runs half duplex: it cannot send while it "
                           "receives, and collides; usually one end forced and the other "
                           "autonegotiating: set both to autonegotiate", command,
                           "the switch port set to autonegotiate too; on this end a "
                           "NetworkManager connection (802-3-ethernet.auto-negotiation yes) "
                           "or a systemd .link file (AutoNegotiation=yes)")
        if duplex == "full":
            return Finding(self.name, "link.duplex", duplex, "pass", "full duplex")
        return self.unknown("link.duplex", f"duplex {quoted(duplex)} (link down?)")

    def _speed(self, speed: int | None, text: str | Unknown) -> Finding:
        if speed is None:
            return self.unknown("link.speed", "the link's speed is not reported (link down?)")
        if isinstance(text, Unknown):
            return Finding(self.name, "link.speed", speed, "unknown",
                           f"the NIC's supported modes are not known ({text.reason})")
        supported = parse_link_modes(text)
        if not supported:
            return Finding(self.name, "link.speed", speed, "unknown",
                           "ethtool reports no supported link modes for "
                           f"{self.interface}: its fastest speed is not known")
        best = max(supported)
        if speed >= best:
            return Finding(self.name, "link.speed", speed, "pass",
                           f"{speed} Mb/s, the fastest mode {self.interface} supports")
        partner = parse_link_modes(text, "Link partner advertised link modes")
        why = (f"the link partner advertises at most {max(partner)} Mb/s: the switch port "
               "or its settings" if partner and max(partner) <= speed else
               "a cable (a pair broken: gigabit needs all four), a switch port, or a forced "
               "setting")
        return Finding(self.name, "link.speed", speed, "warn",
                       f"{self.interface} runs at {speed} Mb/s, below the {best} Mb/s it "
                       f"supports: {why}")
