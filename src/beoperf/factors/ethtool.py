"""The interface settings ethtool changes and the audit knows: interrupt coalescing
(``coalesce.rx-usecs=0``), offloads (``offloads.tso=off``), rings (``rings.rx=4096``) and
pause frames (``pause.rx=off``).

A level is ``GROUP.NAME=VALUE``: GROUP one of the audit's checks (coalesce, offloads, rings,
pause), NAME its field or ethtool's own keyword for it; the values and the commands are
the checks' own (``VALUES``, ``set_action``, ``parse``).  The snapshot holds every
setting of the four groups the driver reports (one ``ethtool -c/-k/-g/-a`` each); a
restore sets back only those that differ, each read back.
"""

from __future__ import annotations

from typing import ClassVar

from beoperf import errors
from beoperf.audit.base import Unavailable, as_text, quoted, run_tool
from beoperf.audit.checks import IFACE_PERSIST, Coalescing, EthtoolSetting, Offloads, Pause, Rings
from beoperf.audit.tune import same
from beoperf.factors.base import Context, Factor, FactorError, Level, interface_of, saved_text
from beoperf.model.document import JsonObject, JsonValue

GROUPS: dict[str, type[EthtoolSetting]] = {"coalesce": Coalescing, "offloads": Offloads,
                                           "rings": Rings, "pause": Pause}


def key_of(text: str) -> str:
    """The audit's key for ``GROUP.NAME`` ("offloads.tso" -> "offload.tcp-segmentation-
    offload"; the audit's own key is one too); ValueError naming what there is."""
    group, _, name = text.partition(".")
    cls = GROUPS.get(group) or GROUPS.get(f"{group}s")  # the audit's "offload." prefix
    if cls is None:
        raise ValueError(f"{quoted(group)} is not one of {', '.join(GROUPS)}")
    by_keyword = {word: field for field, word in cls.ARG.items()}
    field = by_keyword.get(name, name)
    if field not in cls.ARG:
        raise ValueError(f"{group} has no setting {quoted(name)} (it has: "
                         f"{', '.join(cls.ARG.values())})")
    return f"{cls.PREFIX}{field}"


def check_of(key: str, interface: str | None) -> EthtoolSetting:
    """The audit check that owns ``key`` (one of the four groups'); KeyError otherwise."""
    for cls in GROUPS.values():
        if key.startswith(cls.PREFIX) and key in cls.VALUES:
            return cls(interface)
    raise KeyError(key)


class Ethtool(Factor):
    name = "ethtool"
    order = 4
    summary = "GROUP.NAME=VALUE of ethtool -C/-K/-G/-A (coalesce, offloads, rings, pause)"
    PERSIST: ClassVar[str] = IFACE_PERSIST

    def level(self, text: str) -> Level:
        name, sep, value = text.strip().partition("=")
        try:
            if not sep:
                raise ValueError(f"{quoted(text)} is not GROUP.NAME=VALUE")
            key = key_of(name.strip())
            check_of(key, "eth0").check_value(key, value.strip())
        except (KeyError, ValueError) as exc:
            raise errors.BadSpec(f"ethtool: {exc}") from None
        return Level(f"{name.strip()}={value.strip()}", f"{key}={value.strip()}")

    def group_values(self, ifname: str, cls: type[EthtoolSetting]) -> dict[str, str]:
        """Every settable key of a group the driver reports now ({} if it reports none)."""
        unit = cls(ifname)
        try:
            parsed = unit.parse(run_tool(["ethtool", cls.SHOW, ifname]))
        except (Unavailable, ValueError):
            return {}
        return {f"{cls.PREFIX}{f}": as_text(parsed[f]) for f in cls.ARG
                if parsed.get(f) is not None}

    def read(self, ctx: Context) -> JsonValue:
        ifname = interface_of(ctx, self.name)
        values: dict[str, JsonValue] = {}
        for cls in GROUPS.values():
            values.update(self.group_values(ifname, cls))
        return values

    def snapshot(self, ctx: Context) -> JsonObject:
        return {"values": self.read(ctx)}

    def saved_values(self, saved: JsonObject) -> dict[str, str]:
        values = saved.get("values")
        if set(saved) != {"values"} or not isinstance(values, dict):
            raise FactorError("ethtool: a snapshot holds 'values' only")
        out = {}
        for key in values:
            value = saved_text(values, key)
            try:
                check_of(key, "eth0").check_value(key, value)
            except (KeyError, ValueError) as exc:
                raise FactorError(f"ethtool: saved {quoted(key)}: {exc}") from None
            out[key] = value
        return out

    def check_saved(self, saved: JsonObject) -> None:
        self.saved_values(saved)

    def put(self, ifname: str, key: str, value: str) -> str:
        """Set one key and read it back; FactorError if either fails or they differ."""
        unit = check_of(key, ifname)
        try:
            unit.apply(key, value)
            got = unit.read(key)
        except (Unavailable, KeyError, ValueError) as exc:
            raise FactorError(f"ethtool: {key}: {exc}") from None
        if not same(got, value):
            raise FactorError(f"ethtool: {key}: set {value!r} but read back {got!r}")
        return got

    def apply(self, ctx: Context, level: Level) -> JsonObject:
        if level.value is None:
            raise FactorError("ethtool: the default level is restored, not applied")
        key, _, value = level.value.partition("=")
        return {"read_back": self.put(interface_of(ctx, self.name), key, value), "key": key}

    def restore(self, ctx: Context, saved: JsonObject) -> None:
        """Set back what differs, in two rounds: one setting can depend on another (TSO
        needs TX checksumming back first), so a failure is final only the second time."""
        ifname = interface_of(ctx, self.name)
        want = self.saved_values(saved)
        failed: list[str] = []
        for _ in range(2):
            now = self.read(ctx)
            assert isinstance(now, dict)
            failed = []
            for key, value in want.items():
                current = now.get(key)
                if isinstance(current, str) and same(current, value):
                    continue
                try:
                    self.put(ifname, key, value)
                except FactorError as exc:
                    failed.append(str(exc))
            if not failed:
                return
        raise FactorError(failed[0])

    def persist(self, level: Level) -> tuple[str, str] | None:
        if level.value is None:
            return None
        key, _, value = level.value.partition("=")
        unit = check_of(key, "IF")
        return ("beoperf-ethtool.txt", " ".join(unit.set_action(key, value)["argv"]) +
                f"\n# make it persistent with {self.PERSIST}\n")
