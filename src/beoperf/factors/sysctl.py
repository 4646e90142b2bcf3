"""Any sysctl the audit may set (``checks.Sysctls.VALUES``, its allow-list), as a level
``KEY=VALUE`` (``net.ipv4.tcp_sack=0``).

The snapshot holds every key of the allow-list this host shows (a key a network namespace
hides is recorded as absent and left alone), so that one snapshot restores whichever level
was applied; a restore writes back only the keys that differ, and reads each back.
"""

from __future__ import annotations

from typing import ClassVar

from beoperf import errors
from beoperf.audit.base import ValueSpec, quoted
from beoperf.audit.checks import SYSCTL_CONF, Sysctls
from beoperf.audit.tune import same
from beoperf.factors.base import (
    Context,
    Factor,
    FactorError,
    Level,
    proc_path,
    read_text,
    saved_text,
    write_text,
)
from beoperf.model.document import JsonObject, JsonValue


def sysctl_path(ctx: Context, key: str) -> str:
    """Where ``key`` (already in the allow-list) lives under the context's root."""
    return proc_path(ctx, Sysctls.path(key))


def put(ctx: Context, key: str, value: str) -> str:
    """Write ``value`` to ``key`` and read it back; FactorError if it differs."""
    write_text(sysctl_path(ctx, key), value)
    got = read_text(sysctl_path(ctx, key))
    if not same(got, value):
        raise FactorError(f"{key}: set {value!r} but read back {got!r}")
    return got


class SysctlFactor(Factor):
    """Sysctls of an allow-list (``KEYS``: key -> values), snapshot and restore."""

    KEYS: ClassVar[dict[str, ValueSpec]] = {}

    def check_pair(self, key: str, value: str) -> None:
        """ValueError naming the key unless ``key`` is in the allow-list and takes ``value``."""
        if key not in self.KEYS:
            raise ValueError(f"{quoted(key)} is not a sysctl beoperf changes (it changes: "
                             f"{', '.join(self.KEYS)})")
        try:
            self.KEYS[key].check(value)
        except ValueError as exc:
            raise ValueError(f"{key} = {exc}") from None

    def snapshot(self, ctx: Context) -> JsonObject:
        values: dict[str, JsonValue] = {}
        for key in self.KEYS:
            try:
                values[key] = " ".join(read_text(sysctl_path(ctx, key)).split())
            except FactorError:
                continue  # hidden in this namespace or not in this kernel: left alone
        return {"values": values}

    def saved_values(self, saved: JsonObject) -> dict[str, str]:
        """The snapshot's key -> value, every pair checked; FactorError naming the first bad."""
        values = saved.get("values")
        if set(saved) != {"values"} or not isinstance(values, dict):
            raise FactorError(f"{self.name}: a snapshot holds 'values' only")
        out = {}
        for key in values:
            try:
                self.check_pair(key, saved_text(values, key))
            except ValueError as exc:
                raise FactorError(f"{self.name}: saved {exc}") from None
            out[key] = saved_text(values, key)
        return out

    def check_saved(self, saved: JsonObject) -> None:
        self.saved_values(saved)

    def read(self, ctx: Context) -> JsonValue:
        return self.snapshot(ctx)["values"]

    def restore(self, ctx: Context, saved: JsonObject) -> None:
        for key, value in self.saved_values(saved).items():
            if not same(read_text(sysctl_path(ctx, key)), value):
                put(ctx, key, value)


class Sysctl(SysctlFactor):
    name = "sysctl"
    order = 0
    KEYS = Sysctls.VALUES
    summary = "KEY=VALUE of a sysctl the audit sets (its allow-list)"

    def level(self, text: str) -> Level:
        key, sep, value = text.strip().partition("=")
        value = " ".join(value.split())
        try:
            if not sep:
                raise ValueError(f"{quoted(text)} is not KEY=VALUE")
            self.check_pair(key.strip(), value)
        except ValueError as exc:
            raise errors.BadSpec(f"sysctl: {exc}") from None
        return Level(f"{key.strip()}={value}", f"{key.strip()}={value}")

    def apply(self, ctx: Context, level: Level) -> JsonObject:
        if level.value is None:
            raise FactorError("sysctl: the default level is restored, not applied")
        key, _, value = level.value.partition("=")
        try:
            self.check_pair(key, value)
        except ValueError as exc:
            raise FactorError(f"sysctl: {exc}") from None
        return {"read_back": put(ctx, key, value), "key": key}

    def restore_level(self, ctx: Context, saved: JsonObject, level: Level) -> None:
        """Only the key ``level`` set: the snapshot holds every key of the allow-list, and
        another factor may hold one of them at its own level (``buffers`` the buffer
        limits, ``congestion`` the congestion control) or keep it at the end."""
        values = self.saved_values(saved)
        key = (level.value or "").partition("=")[0]
        if level.value is None:
            self.restore(ctx, saved)
        else:  # a key the snapshot lacks was hidden here: setting it changed nothing
            self.restore(ctx, {"values": {key: values[key]} if key in values else {}})

    def persist(self, level: Level) -> tuple[str, str] | None:
        if level.value is None:
            return None
        key, _, value = level.value.partition("=")
        return (SYSCTL_CONF.rsplit("/", 1)[1], f"{key} = {value}\n")
