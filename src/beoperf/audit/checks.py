"""The audit's checks: one small class each, registered with @register.  All read-only."""

from __future__ import annotations

import dataclasses
import glob
import os
import platform
import re
from typing import Any, ClassVar

from beoperf import sysinfo
from beoperf.audit.base import (
    INT_MAX,
    ON_OFF,
    Check,
    Finding,
    Integers,
    Unavailable,
    Unknown,
    ValueSpec,
    Words,
    as_text,
    read_file,
    register,
    run_tool,
)

SYSCTL_CONF = "/etc/sysctl.d/90-beoperf.conf"
CONGESTION_CONTROLS = sysinfo.CONGESTION_CONTROLS
ETHERNET_MTU = 1500
IFACE_PERSIST = ("a systemd oneshot unit (After=network-online.target) running the command, "
                 "or a NetworkManager dispatcher script in /etc/NetworkManager/dispatcher.d/")


def _parsers():
    from beoperf.audit import parsers  # lazily: a missing parser only costs its check

    return parsers


def _int_or_text(text: str) -> Any:
    parts = text.split()
    if parts and all(re.fullmatch(r"-?\d+", p) for p in parts):
        return int(parts[0]) if len(parts) == 1 else [int(p) for p in parts]
    return text


def _no_interface(keys: tuple[str, ...], reason: str) -> dict:
    return {key: Unknown(reason) for key in keys}


def available_congestion_controls() -> tuple[str, ...]:
    """The congestion controls this kernel offers (what tcp_congestion_control takes);
    none when the list cannot be read (then no value is accepted)."""
    return sysinfo.congestion_controls(CONGESTION_CONTROLS)


SIZE = Integers(0, INT_MAX)  # bytes; the kernel applies its own minimum
TRIPLE = Integers(1, INT_MAX, 3)  # tcp_rmem/tcp_wmem: min default max


@register
class Sysctls(Check):
    name = "sysctl"
    # The allow-list: the only sysctls tune writes, and the values each takes.
    VALUES: ClassVar[dict[str, ValueSpec]] = {
        "net.core.rmem_default": SIZE, "net.core.rmem_max": SIZE,
        "net.core.wmem_default": SIZE, "net.core.wmem_max": SIZE,
        "net.ipv4.tcp_rmem": TRIPLE, "net.ipv4.tcp_wmem": TRIPLE,
        "net.ipv4.tcp_low_latency": Integers(0, 1),
        "net.core.busy_read": Integers(0, INT_MAX), "net.core.busy_poll": Integers(0, INT_MAX),
        "net.ipv4.tcp_timestamps": Integers(0, 2), "net.ipv4.tcp_sack": Integers(0, 1),
        "net.ipv4.tcp_congestion_control": Words(available_congestion_controls),
        "net.core.netdev_max_backlog": Integers(0, INT_MAX),
    }
    KEYS = tuple(VALUES)

    def collect(self) -> dict:
        facts: dict = {}
        for key in self.KEYS:
            try:
                facts[key] = _int_or_text(read_file("/proc/sys/" + key.replace(".", "/")))
            except Unavailable as exc:
                facts[key] = Unknown(str(exc).replace(
                    " does not exist", " does not exist (not in this kernel, or not per "
                    "network namespace and so hidden inside one)"))
        return facts

    def fix(self, key: str, rule: dict) -> tuple[str | None, str | None]:
        value = rule.get("set", rule.get("value"))
        if value is None:
            return None, None
        value = as_text(value)
        arg = f'{key}="{value}"' if " " in value else f"{key}={value}"
        return f"sysctl -w {arg}", f"{SYSCTL_CONF}: {key} = {value}"

    @staticmethod
    def path(key: str) -> str:
        return "/proc/sys/" + key.replace(".", "/")

    def set_action(self, key: str, value: str) -> dict:
        self.check_value(key, value)
        return {"write": self.path(key), "value": value}

    def read_action(self, key: str) -> dict:
        if not self.settable(key):
            raise KeyError(key)
        return {"file": self.path(key)}


@register
class Kernel(Check):
    name = "kernel"
    KEYS = ("kernel.release",)

    def collect(self) -> dict:
        return {"kernel.release": platform.release()}


def default_route_interface(route: str | None = None, route6: str | None = None) -> str | None:
    """Device of the IPv4 default route (/proc/net/route), else of the IPv6 one
    (/proc/net/ipv6_route, skipping unreachable routes through lo), or None."""
    if route is None:
        route = _read_or_none("/proc/net/route") or ""
    for line in route.splitlines()[1:]:
        fields = line.split()
        if len(fields) > 7 and fields[1] == "00000000" and fields[7] == "00000000":
            return fields[0]
    if route6 is None:
        route6 = _read_or_none("/proc/net/ipv6_route") or ""
    for line in route6.splitlines():
        fields = line.split()
        # dest, dest prefix length, src, src prefix length, next hop, metric, ..., device
        if len(fields) == 10 and fields[0] == "0" * 32 and fields[1] == "00" \
                and fields[9] != "lo" and int(fields[8], 16) & 0x0200 == 0:  # not RTF_REJECT
            return fields[9]
    return None


class InterfaceCheck(Check):
    """A check of the audited interface; all its keys are unknown when there is none."""

    KEYS: ClassVar[tuple[str, ...]] = ()
    persist_advice: ClassVar[str | None] = IFACE_PERSIST
    per_interface = True

    def collect(self) -> dict:
        if not self.interface:
            return _no_interface(self.KEYS, "no interface (no --interface and no default route)")
        return self.collect_interface(self.interface)

    def collect_interface(self, ifname: str) -> dict:
        raise NotImplementedError

    def ethtool(self, option: str, key_prefix: str, keys: tuple[str, ...]) -> dict | str:
        """ethtool OPTION IF output, or (on failure) {key: Unknown} for ``keys``."""
        try:
            return run_tool(["ethtool", option, str(self.interface)])
        except Unavailable as exc:
            return {f"{key_prefix}{k}": Unknown(str(exc)) for k in keys}


@register
class Interface(InterfaceCheck):
    """The interface's facts, its MTU among them; a profile's larger MTU (jumbo frames)
    is advised only within what the NIC takes (its max MTU) and, with --peer, only once a
    don't-fragment probe of that size crossed the path both ways (:func:`mtu_advice`)."""

    name = "interface"
    KEYS = ("interface", "driver", "driver_version", "firmware_version", "bus_info", "mtu",
            "max_mtu", "speed_mbps", "duplex", "operstate")
    # the MTU only: from the IPv4 minimum to 65536, loopback's own default (restorable)
    VALUES: ClassVar[dict[str, ValueSpec]] = {"mtu": Integers(68, 65536)}

    def collect_interface(self, ifname: str) -> dict:
        from beoperf.sysinfo import interface_facts

        facts = interface_facts(ifname)
        out: dict = {"interface": ifname}
        for key in self.KEYS[1:]:
            value = facts.get(key)
            out[key] = value if value is not None else Unknown(f"{key} not reported for {ifname}")
        text = self.ethtool("-i", "", ())
        if isinstance(text, str):
            parsed = _parsers().parse_ethtool_driver(text)
            out["driver_version"] = parsed.get("version") or out["driver_version"]
            out["firmware_version"] = parsed.get("firmware_version") or out["firmware_version"]
        out["max_mtu"] = self._max_mtu(ifname)
        return out

    @staticmethod
    def _max_mtu(ifname: str) -> Any:
        """The driver's largest MTU (``ip -d -j link``; 0: it sets none), or Unknown."""
        try:
            limits = _parsers().parse_ip_link(run_tool(["ip", "-d", "-j", "link", "show",
                                                        "dev", ifname]))
        except Unavailable as exc:
            return Unknown(str(exc))
        if "max_mtu" not in limits:
            return Unknown(f"ip -d -j link does not report a max_mtu for {ifname} (iproute2 "
                           "before 4.19, or a kernel before 4.10)")
        return limits["max_mtu"]

    def set_action(self, key: str, value: str) -> dict:
        self.check_value(key, value)
        return {"argv": ["ip", "link", "set", "dev", str(self.interface), "mtu", value]}

    def read_action(self, key: str) -> dict:
        if not self.settable(key):
            raise KeyError(key)
        return {"file": f"/sys/class/net/{self.interface}/mtu"}

    def judge(self, facts: dict, profile: dict) -> list[Finding]:
        """The default judgement, then a larger MTU weighed against the NIC and the path."""
        return [self._jumbo(f, facts) if f.key == "mtu" else f
                for f in super().judge(facts, profile)]

    def _jumbo(self, found: Finding, facts: dict) -> Finding:
        want = int(found.target) if found.target and found.target.isdigit() else None
        mtu = found.value
        if found.status not in ("warn", "fail") or want is None or not isinstance(mtu, int) \
                or want <= mtu:
            return found
        max_mtu = facts.get("max_mtu")
        why_not = mtu_advice(mtu, max_mtu, want, self.peer_path)
        if why_not is not None:
            return Finding(self.name, found.key, mtu, why_not[0], why_not[1])
        takes = f"up to {max_mtu}" if max_mtu else "any size (no maximum set by its driver)"
        return dataclasses.replace(found, reason=(
            f"{found.reason}; the NIC takes {takes}: raise it on both ends and every switch "
            "between, then audit --peer HOST checks that the path carries it both ways"))


def mtu_advice(mtu: int, max_mtu: Any, want: int, path: dict | None) -> tuple[str, str] | None:
    """Why an MTU of ``want`` (more than the ``mtu`` now) is not advised here, as (status,
    reason), or None when it may be: the NIC must take it (``max_mtu``; 0: its driver sets
    no maximum; Unknown: not advised, cannot tell) and, when a peer was given (``path``),
    a don't-fragment probe of that size must have crossed the path both ways, which cannot
    happen while this end's MTU is below it: with --peer, jumbo frames are confirmed (the
    path check passes at the MTU set), never advised blind.  Without a peer, an MTU set
    below Ethernet's 1500 (a VM's, an overlay's) says the path carries less: not advised
    either."""
    jumbo = f"jumbo frames ({want}) not advised"
    if isinstance(max_mtu, Unknown) or not isinstance(max_mtu, int):
        reason = max_mtu.reason if isinstance(max_mtu, Unknown) else "not read"
        return "unknown", f"{jumbo}: the NIC's maximum MTU is unknown ({reason})"
    if 0 < max_mtu < want:
        return "pass", f"{jumbo}: this NIC takes at most {max_mtu}"
    if mtu < ETHERNET_MTU and path is None:
        return "pass", (f"{jumbo}: this NIC's MTU {mtu} is below Ethernet's {ETHERNET_MTU}, as a "
                        "VM's or an overlay's is set when the path beneath carries less; audit "
                        "--peer HOST probes what the path carries")
    if path is not None:
        peer = path.get("peer", "the peer")
        return "pass", (f"{jumbo} for the path to {peer}: a {want}-byte don't-fragment probe "
                        f"must cross it both ways first, and cannot leave this end while its "
                        f"MTU is {mtu}; to try them, raise the MTU on both ends and every "
                        f"switch between, then audit --peer {peer} probes the path")
    return None


@register
class PathMtu(Check):
    """With --peer: whether packets of this interface's MTU cross the path to the peer and
    back (don't-fragment UDP probes to its ``beoperf serve``, whose replies go with DF as
    long as they fit its own MTU): an end whose MTU the path does not carry loses every
    larger packet, which TCP hides by its MSS and UDP, ICMP and MPI over UDP do not."""

    name = "path"
    KEYS = ("path.mtu",)
    advice_reason = ("the MTU must be the same on every host and switch of the path: change "
                     "it by hand on the end that differs")

    def collect(self) -> dict:
        if self.peer_path is None:
            return {"path.mtu": Unknown("no --peer: the path's MTU was not probed")}
        return {"path.mtu": self.peer_path.get("carried")}

    def judge(self, facts: dict, profile: dict) -> list[Finding]:
        """No finding without --peer (the MTU's finding says how to check the path)."""
        return [] if self.peer_path is None else [path_finding(self.peer_path, self.interface)]


def path_finding(path: dict, interface: str | None) -> Finding:
    """The path check's verdict from the probes (``path``: peer, this interface's mtu, the
    probes made in order, ``{"role": "small" | "mtu" | "ethernet", "bytes": packet size,
    "ok", "outcome"}``; ``carried``: the largest size that crossed; ``error``: why nothing
    could be probed)."""
    peer, mtu = path.get("peer", "the peer"), path.get("mtu")
    probes = path.get("probes") or []
    small = probes[0] if probes else None
    if path.get("error") or small is None or not small.get("ok"):
        why = path.get("error") or (f"no answer to a {small['bytes']}-byte probe "
                                    f"({small.get('outcome')})" if small else "no probe made")
        return Finding("path", "path.mtu", None, "unknown",
                       f"the path to {peer} was not probed: {why}; its MTU is checked against "
                       "beoperf serve's UDP echo there (start it: beoperf serve)")
    at_mtu = next((p for p in probes if p.get("role") == "mtu"), None)
    if at_mtu is None or at_mtu.get("ok"):
        return Finding("path", "path.mtu", mtu, "pass",
                       f"a {mtu}-byte don't-fragment packet crossed to {peer} and back")
    carried = path.get("carried")
    return Finding("path", "path.mtu", carried, "fail",
                   f"MTU mismatch on the path to {peer}: {mtu}-byte packets (this "
                   f"interface's MTU) do not cross it, {carried}-byte ones do (don't-fragment "
                   f"probes, both ways; {at_mtu.get('outcome')}): larger packets are lost, as "
                   f"UDP, ICMP and MPI over UDP send them; lower this end's MTU to {carried}, "
                   f"or raise {peer}'s and every switch's between to {mtu}",
                   f"ip link set dev {interface or 'IF'} mtu {carried}" if carried else None)


class EthtoolSetting(InterfaceCheck):
    """An interface check whose keys ("prefix.field") ethtool sets (SET) and shows (SHOW).

    ARG maps each settable field to ethtool's own keyword for it, and SPEC to its values;
    VALUES (the allow-list) is built from the two."""

    PREFIX: ClassVar[str] = ""
    FIELDS: ClassVar[tuple[str, ...]] = ()  # collected (ARG: the settable ones)
    SET: ClassVar[str] = ""
    SHOW: ClassVar[str] = ""
    ARG: ClassVar[dict[str, str]] = {}  # field -> ethtool's own keyword for it
    SPEC: ClassVar[dict[str, ValueSpec]] = {}  # field -> its values

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.KEYS = tuple(f"{cls.PREFIX}{f}" for f in cls.FIELDS)
        cls.VALUES = {f"{cls.PREFIX}{f}": cls.SPEC[f] for f in cls.ARG}

    def field(self, key: str) -> str:
        if not self.settable(key):
            raise KeyError(key)
        return key.removeprefix(self.PREFIX)

    def set_action(self, key: str, value: str) -> dict:
        self.check_value(key, value)
        name = self.field(key)
        return {"argv": ["ethtool", self.SET, str(self.interface), self.ARG[name], value]}

    def read_action(self, key: str) -> dict:
        return {"argv": ["ethtool", self.SHOW, str(self.interface)], "field": self.field(key)}

    def parse_read(self, key: str, output: str) -> Any:
        return self.parse(output).get(self.field(key))

    def parse(self, output: str) -> dict:
        """field -> value of ethtool SHOW's output."""
        raise NotImplementedError

    def collect_interface(self, ifname: str) -> dict:
        """"PREFIX.field" for each of FIELDS, from ethtool SHOW IF."""
        text = self.ethtool(self.SHOW, self.PREFIX, self.FIELDS)
        if not isinstance(text, str):
            return text
        parsed = self.parse(text)
        return {f"{self.PREFIX}{f}": _or_unsupported(parsed.get(f), ifname)
                for f in self.FIELDS}


USECS = Integers(0, 1_000_000)  # interrupt moderation: up to a second
FRAMES = Integers(0, 1_000_000)
RING = Integers(1, 1 << 20)  # descriptors; hardware rings hold up to tens of thousands


@register
class Coalescing(EthtoolSetting):
    name = "coalesce"
    FIELDS = ("adaptive_rx", "adaptive_tx", "rx_usecs", "rx_frames", "tx_usecs", "tx_frames")
    PREFIX, SET, SHOW = "coalesce.", "-C", "-c"
    ARG = {f: f.replace("_", "-") for f in FIELDS}
    SPEC = {"adaptive_rx": ON_OFF, "adaptive_tx": ON_OFF, "rx_usecs": USECS,
            "rx_frames": FRAMES, "tx_usecs": USECS, "tx_frames": FRAMES}

    def parse(self, output: str) -> dict:
        return _parsers().parse_ethtool_coalesce(output)


def _or_unsupported(value: Any, ifname: str) -> Any:
    return Unknown(f"not supported by the driver of {ifname}") if value is None else value


@register
class Rings(EthtoolSetting):
    """Ring sizes, judged against the driver's maximum by rules like {"value": "@rings.rx_max"}."""

    name = "rings"
    FIELDS = ("rx", "tx", "rx_max", "tx_max")
    PREFIX, SET, SHOW = "rings.", "-G", "-g"
    ARG = {"rx": "rx", "tx": "tx"}
    SPEC = {"rx": RING, "tx": RING}

    def parse(self, output: str) -> dict:
        parsed = _parsers().parse_ethtool_rings(output)
        cur, top = parsed.get("current", {}), parsed.get("max", {})
        return {"rx": cur.get("rx"), "tx": cur.get("tx"),
                "rx_max": top.get("rx"), "tx_max": top.get("tx")}


@register
class Offloads(EthtoolSetting):
    name = "offloads"
    FIELDS = ("tcp-segmentation-offload", "generic-segmentation-offload",
              "generic-receive-offload", "large-receive-offload", "rx-checksumming",
              "tx-checksumming")
    PREFIX, SET, SHOW = "offload.", "-K", "-k"
    ARG = {"tcp-segmentation-offload": "tso", "generic-segmentation-offload": "gso",
           "generic-receive-offload": "gro", "large-receive-offload": "lro",
           "rx-checksumming": "rx", "tx-checksumming": "tx"}
    SPEC = dict.fromkeys(FIELDS, ON_OFF)

    def parse(self, output: str) -> dict:
        return {name: state.get("on")
                for name, state in _parsers().parse_ethtool_features(output).items()}


@register
class Pause(EthtoolSetting):
    name = "pause"
    FIELDS = ("autonegotiate", "rx", "tx")
    PREFIX, SET, SHOW = "pause.", "-A", "-a"
    ARG = {"autonegotiate": "autoneg", "rx": "rx", "tx": "tx"}  # ethtool -A's keywords
    SPEC = dict.fromkeys(FIELDS, ON_OFF)

    def parse(self, output: str) -> dict:
        return _parsers().parse_ethtool_pause(output)


def _process_running(name: str) -> bool:
    for comm in glob.glob("/proc/[0-9]*/comm"):
        try:
            if read_file(comm) == name:
                return True
        except Unavailable:
            continue
    return False


SYSTEMD_RUN = "/run/systemd/system"  # there when systemd is the init (as sd_booted() tells)
# what `systemctl is-enabled` answers for a unit that starts at boot
ENABLED_AT_BOOT = ("enabled", "enabled-runtime", "generated", "alias")
# the services that load a firewall's rules: while enabled, flushed rules come back at boot
FIREWALL_UNITS = ("firewalld", "ufw", "nftables", "iptables", "ip6tables",
                  "netfilter-persistent")
NO_SYSTEMD = "no systemd (no /run/systemd/system): what starts at boot is not known"


def unit_state(unit: str, verb: str) -> str | Unknown:
    """``systemctl VERB UNIT``'s one-word answer (is-active: active, inactive, failed ...;
    is-enabled: enabled, disabled, static, masked ...; "not-found" for no such unit), or
    Unknown when systemctl cannot answer.  Its exit status says "not active/enabled" (1 to
    4): the word is read all the same."""
    try:
        out = run_tool(["systemctl", verb, unit], accept=(0, 1, 2, 3, 4))
    except Unavailable as exc:
        return Unknown(str(exc))
    words = out.split()
    return words[0] if words else "not-found"


def _is(state: str | Unknown, yes: tuple[str, ...]) -> bool | Unknown:
    return state if isinstance(state, Unknown) else state in yes


@register
class Irqbalance(Check):
    """irqbalance running now and enabled at boot: while enabled, a reboot starts it again
    and it moves the NIC interrupts pinned since."""

    name = "irqbalance"
    KEYS = ("irqbalance.active", "irqbalance.enabled")
    advice_reason = ("stopping a service is not restored exactly (its enabled state and the "
                     "IRQ affinities it wrote); do it by hand")

    def collect(self) -> dict:
        if os.path.isdir(SYSTEMD_RUN):
            return {"irqbalance.active": _is(unit_state("irqbalance", "is-active"),
                                             ("active",)),
                    "irqbalance.enabled": _is(unit_state("irqbalance", "is-enabled"),
                                              ENABLED_AT_BOOT)}
        return {"irqbalance.active": _process_running("irqbalance"),
                "irqbalance.enabled": Unknown(NO_SYSTEMD)}

    def fix(self, key: str, rule: dict) -> tuple[str | None, str | None]:
        if key == "irqbalance.enabled":
            return ("systemctl disable irqbalance",
                    "a disabled unit stays off at boot (systemctl mask irqbalance: also when "
                    "another unit asks for it)")
        return "systemctl stop irqbalance", "systemctl disable irqbalance"


@register
class FirewallServices(Check):
    """The firewall services running now and enabled at boot (firewalld, ufw, nftables,
    iptables ...): rules flushed for a measurement come back with a service that starts at
    boot.  Each value is the units, space-separated, or "none"."""

    name = "firewall-services"
    KEYS = ("firewall.services_active", "firewall.services_enabled")
    advice_reason = "firewall services are stopped and disabled by hand, never by tune"

    def collect(self) -> dict:
        if not os.path.isdir(SYSTEMD_RUN):
            return {"firewall.services_active": Unknown(
                        "no systemd (no /run/systemd/system): which firewall services run is "
                        "not known (the rule counts say what is loaded)"),
                    "firewall.services_enabled": Unknown(NO_SYSTEMD)}
        return {"firewall.services_active": self._units("is-active", ("active",)),
                "firewall.services_enabled": self._units("is-enabled", ENABLED_AT_BOOT)}

    @staticmethod
    def _units(verb: str, yes: tuple[str, ...]) -> str | Unknown:
        found = []
        for unit in FIREWALL_UNITS:
            state = unit_state(unit, verb)
            if isinstance(state, Unknown):
                return state
            if state in yes:
                found.append(unit)
        return " ".join(found) or "none"

    def fix(self, key: str, rule: dict) -> tuple[str | None, str | None]:
        return None, None  # the units are the finding's value: the command is in judge

    def judge_one(self, key: str, value: Any, rule: dict | None) -> Finding:
        found = super().judge_one(key, value, rule)
        if found.status not in ("warn", "fail") or not isinstance(value, str):
            return found
        units = value
        if key == "firewall.services_enabled":
            return dataclasses.replace(found, command=f"systemctl disable {units}",
                                       persist="a disabled unit stays off at boot")
        return dataclasses.replace(found, command=f"systemctl stop {units}",
                                   persist=f"systemctl disable {units}")


@register
class Firewall(Check):
    name = "firewall"
    advice_reason = "firewall rules and connection tracking need reviewing by hand"
    KEYS = ("iptables.rules", "iptables.backend", "nft.rules", "nft.iptables_nft_rules",
            "conntrack.count")

    # the tables iptables-nft (and ip6tables-nft) keep in nftables
    XT_TABLES = {f"{family} {table}" for family in ("ip", "ip6")
                 for table in ("filter", "nat", "mangle", "raw", "security")}

    def collect(self) -> dict:
        backend = self._backend()
        facts = {**self._iptables(), "iptables.backend": backend, **self._nft(),
                 "conntrack.count": self._conntrack()}
        if backend == "nf_tables" and isinstance(facts.get("nft.rules"), int):
            # iptables-nft rules live in nftables too: count them once, under iptables
            shared = sum(v for k, v in facts.items() if k.startswith("nft.") and k != "nft.rules"
                         and " ".join(k[4:].split()[:2]) in self.XT_TABLES)
            facts["nft.rules"] -= shared
            facts["nft.iptables_nft_rules"] = shared
        return facts

    @staticmethod
    def _backend() -> Any:
        """"nf_tables" or "legacy" (from iptables -V), or Unknown."""
        try:
            text = run_tool(["iptables", "-V"])
        except Unavailable as exc:
            return Unknown(str(exc))
        match = re.search(r"\((nf_tables|legacy)\)", text)
        return match.group(1) if match else "legacy"  # before 1.8 there was only legacy

    def owns(self, key: str) -> bool:  # also one key per table and chain
        return key in self.KEYS or key.startswith(("iptables.", "nft."))

    @staticmethod
    def _iptables() -> dict:
        try:
            tables = _parsers().parse_iptables_save(run_tool(["iptables-save"]))
        except Unavailable as exc:
            return {"iptables.rules": Unknown(str(exc))}
        facts: dict = {"iptables.rules": sum(sum(c.values()) for c in tables.values())}
        for table, chains in sorted(tables.items()):
            for chain, count in sorted(chains.items()):
                facts[f"iptables.{table}.{chain}"] = count
        return facts

    @staticmethod
    def _nft() -> dict:
        try:
            chains = _parsers().parse_nft_ruleset(run_tool(["nft", "list", "ruleset"]))
        except Unavailable as exc:
            return {"nft.rules": Unknown(str(exc))}
        facts: dict = {"nft.rules": sum(chains.values())}
        facts.update({f"nft.{name}": count for name, count in sorted(chains.items())})
        return facts

    @staticmethod
    def _conntrack() -> Any:
        try:
            text = read_file("/proc/sys/net/netfilter/nf_conntrack_count")
        except Unavailable as exc:
            return Unknown(f"{exc} (nf_conntrack not loaded)")
        count = _parsers().parse_conntrack_count(text)
        return Unknown(f"unreadable count {text!r}") if count is None else count


@register
class CpuFreq(Check):
    name = "cpufreq"
    KEYS = ("cpu.governor",)
    advice_reason = ("the governor is per CPU (possibly mixed) and set through cpupower; not "
                     "restored exactly, do it by hand")

    def collect(self) -> dict:
        paths = sorted(glob.glob("/sys/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor"))
        if not paths:
            return {"cpu.governor": Unknown("no cpufreq (no scaling_governor in sysfs: "
                                            "virtual machine or driver not loaded)")}
        governors = sorted({_read_or_none(p) or "?" for p in paths})
        value = governors[0] if len(governors) == 1 else "mixed: " + ",".join(governors)
        return {"cpu.governor": value}

    def fix(self, key: str, rule: dict) -> tuple[str | None, str | None]:
        gov = rule.get("set")
        return (f"cpupower frequency-set -g {gov}",
                f"kernel command line cpufreq.default_governor={gov}, or cpupower.service")


def _read_or_none(path: str) -> str | None:
    try:
        return read_file(path)
    except Unavailable:
        return None


@register
class CStates(Check):
    name = "cstates"
    KEYS = ("cpu.cstates", "cpu.deep_cstates_enabled")
    advice_reason = "C-states are set through cpupower or the kernel command line; do it by hand"
    SHALLOW = ("POLL", "C1")

    def collect(self) -> dict:
        dirs = sorted(glob.glob("/sys/devices/system/cpu/cpu0/cpuidle/state[0-9]*"),
                      key=lambda d: int(d.rsplit("state", 1)[1]))
        if not dirs:
            reason = Unknown("no cpuidle states in sysfs (virtual machine or cpuidle off)")
            return {"cpu.cstates": reason, "cpu.deep_cstates_enabled": reason}
        states = [(_read_or_none(f"{d}/name") or "?", _read_or_none(f"{d}/disable") == "0")
                  for d in dirs]
        names = " ".join(n if on else f"{n}(disabled)" for n, on in states)
        deep = sum(1 for n, on in states if on and n not in self.SHALLOW)
        return {"cpu.cstates": names, "cpu.deep_cstates_enabled": deep}

    def fix(self, key: str, rule: dict) -> tuple[str | None, str | None]:
        return ("cpupower idle-set -D 2",
                "kernel command line: intel_idle.max_cstate=1 processor.max_cstate=1 "
                "(or a tuned profile such as latency-performance)")


@register
class Thp(Check):
    name = "thp"
    KEYS = ("thp.enabled",)
    advice_reason = ("transparent huge pages are best set on the kernel command line; do it "
                     "by hand")

    def collect(self) -> dict:
        try:
            text = read_file("/sys/kernel/mm/transparent_hugepage/enabled")
        except Unavailable as exc:
            return {"thp.enabled": Unknown(str(exc))}
        match = re.search(r"\[(\w+)\]", text)
        return {"thp.enabled": match.group(1) if match else text}

    def fix(self, key: str, rule: dict) -> tuple[str | None, str | None]:
        mode = rule.get("set")
        return (f"echo {mode} > /sys/kernel/mm/transparent_hugepage/enabled",
                f"kernel command line: transparent_hugepage={mode}")


@register
class IrqAffinity(InterfaceCheck):
    name = "irq"
    KEYS = ("irq.count", "irq.affinity", "numa_node")

    def collect_interface(self, ifname: str) -> dict:
        irqs = nic_irqs(ifname)
        affinity = " ".join(f"{irq}:{_read_or_none(f'/proc/irq/{irq}/smp_affinity_list')}"
                            for irq in irqs)
        numa = _read_or_none(f"/sys/class/net/{ifname}/device/numa_node")
        return {"irq.count": len(irqs),
                "irq.affinity": affinity or Unknown(f"no interrupts named after {ifname} "
                                                    "in /proc/interrupts"),
                "numa_node": int(numa) if numa and numa.lstrip("-").isdigit()
                else Unknown(f"{ifname} has no device NUMA node (virtual interface?)")}


def nic_irqs(ifname: str, text: str | None = None) -> list[int]:
    """IRQ numbers of /proc/interrupts lines naming the interface (eth0, eth0-TxRx-3 ...)."""
    if text is None:
        text = _read_or_none("/proc/interrupts") or ""
    pattern = re.compile(rf"(^|[\s@-]){re.escape(ifname)}($|[\s:@-])")
    irqs = []
    for line in text.splitlines():
        head, sep, rest = line.partition(":")
        if sep and head.strip().isdigit() and pattern.search(rest):
            irqs.append(int(head))
    return irqs


# the checks of the hardware under the interface (PCIe link, bond, duplex and speed),
# registered after these, so that the audit lists them last
from beoperf.audit import links  # noqa: E402, F401
