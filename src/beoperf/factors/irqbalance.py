"""The irqbalance service, stopped (``off``) or started (``on``) through systemd, and its
state put back exactly: whether it ran (``systemctl is-active``) and whether it starts at
boot (``is-enabled``), each changed back only if it differs.

Only under systemd (``/run/systemd/system`` under the context's root): elsewhere the
service's state cannot be read and restored, so it is not changed ("cannot change here").
The interrupt affinities a running irqbalance wrote are not restored: it writes them again
once started.
"""

from __future__ import annotations

import os

from beoperf import errors
from beoperf.audit.base import quoted
from beoperf.factors.base import (
    WORD,
    Context,
    Factor,
    FactorError,
    Level,
    command,
    machine_wide,
    proc_path,
    saved_text,
)
from beoperf.launch import job
from beoperf.model.document import JsonObject, JsonValue

SERVICE = "irqbalance"
TIMEOUT_S = 30.0
LEVELS = {"off": "inactive", "on": "active"}
SWITCHABLE = ("enabled", "disabled")  # is-enabled states a restore may change between


def systemctl_word(verb: str) -> str:
    """The one word ``systemctl VERB irqbalance`` prints (its exit status says the same)."""
    try:
        done = job.run(["systemctl", verb, SERVICE], TIMEOUT_S,
                       env={**os.environ, "LC_ALL": "C"})
    except OSError as exc:
        raise FactorError(f"irqbalance: systemctl: {exc.strerror or exc}") from None
    words = done.stdout_text().split()
    if done.stopped or not words or not WORD.fullmatch(words[0].replace("-", "_")):
        raise FactorError(f"irqbalance: systemctl {verb} {SERVICE} gave no state")
    return words[0]


class Irqbalance(Factor):
    name = "irqbalance"
    order = 3
    summary = "the irqbalance service: off (stopped) or on (started)"

    def level(self, text: str) -> Level:
        value = text.strip()
        if value not in LEVELS:
            raise errors.BadSpec(f"irqbalance: {quoted(text)} is not off, on or default")
        return Level(value, value)

    def systemd(self, ctx: Context) -> None:
        machine_wide(ctx, "irqbalance")
        if not os.path.isdir(proc_path(ctx, "/run/systemd/system")):
            raise FactorError("irqbalance: cannot change here: no systemd (no "
                              "/run/systemd/system), so its state cannot be restored")

    def read(self, ctx: Context) -> JsonValue:
        self.systemd(ctx)
        return {"active": systemctl_word("is-active"), "enabled": systemctl_word("is-enabled")}

    def snapshot(self, ctx: Context) -> JsonObject:
        found = self.read(ctx)
        assert isinstance(found, dict)
        return found

    def check_saved(self, saved: JsonObject) -> None:
        if set(saved) != {"active", "enabled"}:
            raise FactorError("irqbalance: a snapshot holds 'active' and 'enabled' only")
        for key in saved:
            if not WORD.fullmatch(saved_text(saved, key).replace("-", "_")):
                raise FactorError(f"irqbalance: saved {key} {quoted(saved[key])} is not a "
                                  "state")

    def run_state(self, ctx: Context, active: bool) -> str:
        """Start or stop the service as needed; the state read back."""
        now = systemctl_word("is-active")
        if (now == "active") != active:
            command(["systemctl", "start" if active else "stop", SERVICE], TIMEOUT_S)
            now = systemctl_word("is-active")
        if (now == "active") != active:
            raise FactorError(f"irqbalance: asked to {'start' if active else 'stop'} it, "
                              f"it is {now}")
        return now

    def apply(self, ctx: Context, level: Level) -> JsonObject:
        if level.value not in LEVELS:
            raise FactorError(f"irqbalance: {quoted(level.value)} is not a level to apply")
        self.systemd(ctx)
        return {"read_back": self.run_state(ctx, level.value == "on")}

    def restore(self, ctx: Context, saved: JsonObject) -> None:
        self.check_saved(saved)
        self.systemd(ctx)
        self.run_state(ctx, saved["active"] == "active")
        enabled, want = systemctl_word("is-enabled"), saved_text(saved, "enabled")
        if enabled != want and {enabled, want} <= set(SWITCHABLE):
            command(["systemctl", "enable" if want == "enabled" else "disable", SERVICE],
                    TIMEOUT_S)
        if systemctl_word("is-enabled") != want:
            raise FactorError(f"irqbalance: it was {want} at the snapshot and is "
                              f"{systemctl_word('is-enabled')} now")

    def persist(self, level: Level) -> tuple[str, str] | None:
        if level.value is None:
            return None
        verb = "disable --now" if level.value == "off" else "enable --now"
        return ("beoperf-irqbalance.txt", f"systemctl {verb} {SERVICE}\n")
