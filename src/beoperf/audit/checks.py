"""The audit's checks: one small class each, registered with @register.  All read-only."""

from __future__ import annotations

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

    KEYS: tuple[str, ...] = ()
    persist_advice = IFACE_PERSIST
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
    name = "interface"
    KEYS = ("interface", "driver", "driver_version", "firmware_version", "bus_info", "mtu",
            "speed_mbps", "duplex", "operstate")
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
        return out

    def set_action(self, key: str, value: str) -> dict:
        self.check_value(key, value)
        return {"argv": ["ip", "link", "set", "dev", str(self.interface), "mtu", value]}

    def read_action(self, key: str) -> dict:
        if not self.settable(key):
            raise KeyError(key)
        return {"file": f"/sys/class/net/{self.interface}/mtu"}


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


@register
class Irqbalance(Check):
    name = "irqbalance"
    KEYS = ("irqbalance.active", "irqbalance.enabled")
    advice_reason = ("stopping a service is not restored exactly (its enabled state and the "
                     "IRQ affinities it wrote); do it by hand")

    def collect(self) -> dict:
        if os.path.isdir("/run/systemd/system"):
            return {"irqbalance.active": self._systemctl("is-active") == "active",
                    "irqbalance.enabled": self._systemctl("is-enabled") == "enabled"}
        note = Unknown("no systemd: cannot tell whether irqbalance is enabled")
        return {"irqbalance.active": _process_running("irqbalance"), "irqbalance.enabled": note}

    @staticmethod
    def _systemctl(verb: str) -> str:
        try:
            return run_tool(["systemctl", verb, "irqbalance"]).strip()
        except Unavailable as exc:  # is-active exits non-zero when inactive
            return "inactive" if "inactive" in str(exc) or "disabled" in str(exc) else str(exc)

    def fix(self, key: str, rule: dict) -> tuple[str | None, str | None]:
        return "systemctl stop irqbalance", "systemctl disable irqbalance"


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
