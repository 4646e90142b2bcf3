"""The host's TCP congestion control (``net.ipv4.tcp_congestion_control``), one of those the
kernel offers (``tcp_available_congestion_control`` under the context's root).

Studying it only means something if the measurement uses the system's congestion control
rather than the ping-pong's own choice: :meth:`Congestion.configure` says so (congestion
None), whatever the level.
"""

from __future__ import annotations

from typing import ClassVar

from beoperf import errors
from beoperf.audit.base import Check, Words, quoted
from beoperf.audit.checks import SYSCTL_CONF, Sysctls
from beoperf.factors.base import WORD, CheckedValue, Context, FactorError, Level, proc_path
from beoperf.factors.base import read_text as read_proc
from beoperf.model.document import JsonObject

KEY = "net.ipv4.tcp_congestion_control"
AVAILABLE = "/proc/sys/net/ipv4/tcp_available_congestion_control"


def available(ctx: Context | None) -> tuple[str, ...]:
    """The congestion controls the kernel offers (none when the list cannot be read)."""
    try:
        return tuple(read_proc(proc_path(ctx or Context(None), AVAILABLE)).split())
    except FactorError:
        return ()


class Congestion(CheckedValue):
    name = "congestion"
    order = 1
    KEY: ClassVar[str] = KEY
    summary = "the TCP congestion control (reno, cubic, bbr ... as the kernel offers)"

    def unit(self, ctx: Context | None) -> Check:
        return Sysctls(None)

    def path(self, ctx: Context) -> str:
        return proc_path(ctx, Sysctls.path(KEY))

    def check(self, value: str, ctx: Context | None = None) -> None:
        if not WORD.fullmatch(value):
            raise ValueError(f"{quoted(value)} is not a congestion control's name")
        Words(available(ctx)).check(value)

    def level(self, text: str) -> Level:
        value = text.strip()
        if not WORD.fullmatch(value):
            raise errors.BadSpec(f"congestion: {quoted(value)} is not a congestion "
                                 "control's name")
        return Level(value, value)  # whether the host offers it: checked where it is set

    def configure(self, measurement: JsonObject, level: Level) -> JsonObject:
        return {**measurement, "congestion": None}

    def persist(self, level: Level) -> tuple[str, str] | None:
        if level.value is None:
            return None
        return (SYSCTL_CONF.rsplit("/", 1)[1], f"{KEY} = {level.value}\n")
