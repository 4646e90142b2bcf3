"""The audit's checks: one small class each, registered with @register.  All read-only."""

from __future__ import annotations

import glob
import os
import platform
import re
from typing import Any

from beoperf.audit.base import Check, Unavailable, Unknown, read_file, register, run_tool

SYSCTL_CONF = "/etc/sysctl.d/90-beoperf.conf"
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


@register
class Sysctls(Check):
    name = "sysctl"
    KEYS = ("net.core.rmem_default", "net.core.rmem_max", "net.core.wmem_default",
            "net.core.wmem_max", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem",
            "net.ipv4.tcp_low_latency", "net.core.busy_read", "net.core.busy_poll",
            "net.ipv4.tcp_timestamps", "net.ipv4.tcp_sack", "net.ipv4.tcp_congestion_control",
            "net.core.netdev_max_backlog")

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
        arg = f'{key}="{value}"' if " " in str(value) else f"{key}={value}"
        return f"sysctl -w {arg}", f"{SYSCTL_CONF}: {key} = {value}"


@register
class Kernel(Check):
    name = "kernel"

    def collect(self) -> dict:
        return {"kernel.release": platform.release()}


def default_route_interface() -> str | None:
    """Device of the IPv4 default route (from /proc/net/route), or None."""
    try:
        lines = read_file("/proc/net/route").splitlines()[1:]
    except Unavailable:
        return None
    for line in lines:
        fields = line.split()
        if len(fields) > 7 and fields[1] == "00000000" and fields[7] == "00000000":
            return fields[0]
    return None


class InterfaceCheck(Check):
    """A check of the audited interface; all its keys are unknown when there is none."""

    KEYS: tuple[str, ...] = ()

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


@register
class Coalescing(InterfaceCheck):
    name = "coalesce"
    FIELDS = ("adaptive_rx", "adaptive_tx", "rx_usecs", "rx_frames", "tx_usecs", "tx_frames")
    KEYS = tuple(f"coalesce.{f}" for f in FIELDS)

    def collect_interface(self, ifname: str) -> dict:
        text = self.ethtool("-c", "coalesce.", self.FIELDS)
        if not isinstance(text, str):
            return text
        parsed = _parsers().parse_ethtool_coalesce(text)
        return {f"coalesce.{f}": _or_unsupported(parsed.get(f), ifname) for f in self.FIELDS}

    def fix(self, key: str, rule: dict) -> tuple[str | None, str | None]:
        field = key.removeprefix("coalesce.").replace("_", "-")
        return f"ethtool -C {self.interface} {field} {rule.get('set')}", IFACE_PERSIST


def _or_unsupported(value: Any, ifname: str) -> Any:
    return Unknown(f"not supported by the driver of {ifname}") if value is None else value


@register
class Rings(InterfaceCheck):
    name = "rings"
    KEYS = ("rings.rx", "rings.tx", "rings.rx_max", "rings.tx_max")

    def collect_interface(self, ifname: str) -> dict:
        text = self.ethtool("-g", "rings.", ("rx", "tx", "rx_max", "tx_max"))
        if not isinstance(text, str):
            return text
        parsed = _parsers().parse_ethtool_rings(text)
        cur, top = parsed.get("current", {}), parsed.get("max", {})
        return {"rings.rx": _or_unsupported(cur.get("rx"), ifname),
                "rings.tx": _or_unsupported(cur.get("tx"), ifname),
                "rings.rx_max": _or_unsupported(top.get("rx"), ifname),
                "rings.tx_max": _or_unsupported(top.get("tx"), ifname)}


@register
class Offloads(InterfaceCheck):
    name = "offloads"
    FEATURES = ("tcp-segmentation-offload", "generic-segmentation-offload",
                "generic-receive-offload", "large-receive-offload", "rx-checksumming",
                "tx-checksumming")
    KEYS = tuple(f"offload.{f}" for f in FEATURES)
    SHORT = {"tcp-segmentation-offload": "tso", "generic-segmentation-offload": "gso",
             "generic-receive-offload": "gro", "large-receive-offload": "lro",
             "rx-checksumming": "rx", "tx-checksumming": "tx"}

    def collect_interface(self, ifname: str) -> dict:
        text = self.ethtool("-k", "offload.", self.FEATURES)
        if not isinstance(text, str):
            return text
        parsed = _parsers().parse_ethtool_features(text)
        out: dict = {}
        for name in self.FEATURES:
            state = parsed.get(name)
            out[f"offload.{name}"] = (state["on"] if state and state.get("on") is not None
                                      else Unknown(f"{name} not reported for {ifname}"))
        return out

    def fix(self, key: str, rule: dict) -> tuple[str | None, str | None]:
        short = self.SHORT.get(key.removeprefix("offload."), key)
        return f"ethtool -K {self.interface} {short} {rule.get('set')}", IFACE_PERSIST


@register
class Pause(InterfaceCheck):
    name = "pause"
    FIELDS = ("autonegotiate", "rx", "tx")
    KEYS = tuple(f"pause.{f}" for f in FIELDS)

    def collect_interface(self, ifname: str) -> dict:
        text = self.ethtool("-a", "pause.", self.FIELDS)
        if not isinstance(text, str):
            return text
        parsed = _parsers().parse_ethtool_pause(text)
        return {f"pause.{f}": _or_unsupported(parsed.get(f), ifname) for f in self.FIELDS}

    def fix(self, key: str, rule: dict) -> tuple[str | None, str | None]:
        field = key.removeprefix("pause.")
        field = "autoneg" if field == "autonegotiate" else field  # ethtool's own keyword
        value = "on" if rule.get("value") else "off"
        return f"ethtool -A {self.interface} {field} {value}", IFACE_PERSIST


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

    def collect(self) -> dict:
        return {**self._iptables(), **self._nft(), "conntrack.count": self._conntrack()}

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
