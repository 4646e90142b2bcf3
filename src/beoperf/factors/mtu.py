"""The MTU of the interface carrying the measured traffic (``ip link set dev IF mtu N``).

The allow-list is the audit's (``checks.Interface.VALUES``: 68..65536); a level above the
driver's largest MTU (``max_mtu`` of ``ip -d -j link``) is refused before anything is
written.  A change can reset a real NIC's link: :meth:`Mtu.settle` waits for the
interface to be up with a carrier (at most ``SETTLE_MAX_S``), then ``--settle`` more.
Whether the *path* carries the frames is not this factor's to say: the study probes the
path before it measures across a level.  MTU is applied last and restored first.
"""

from __future__ import annotations

import time
from typing import ClassVar

from beoperf.audit.base import Unavailable
from beoperf.audit.checks import IFACE_PERSIST, Interface
from beoperf.factors.base import (
    CheckedValue,
    Context,
    FactorError,
    Level,
    interface_of,
    proc_path,
    read_text,
    wait_until,
)
from beoperf.model.document import JsonObject

SETTLE_MAX_S = 10.0  # a link reset on a real NIC takes seconds; veth none


class Mtu(CheckedValue):
    name = "mtu"
    order = 9
    KEY: ClassVar[str] = "mtu"
    summary = "the interface's MTU (bytes), on every host of the pairs"

    def unit(self, ctx: Context | None) -> Interface:
        return Interface(None if ctx is None else interface_of(ctx, self.name))

    def path(self, ctx: Context) -> str:
        return proc_path(ctx, f"/sys/class/net/{interface_of(ctx, self.name)}/mtu")

    def write(self, ctx: Context, value: str) -> None:
        try:
            self.unit(ctx).apply(self.KEY, value)
        except Unavailable as exc:
            raise FactorError(f"mtu: {exc}") from None

    def max_mtu(self, ctx: Context) -> int:
        """The driver's largest MTU (0: it sets none); FactorError when unknown."""
        found = Interface._max_mtu(interface_of(ctx, self.name))
        if not isinstance(found, int):
            raise FactorError(f"mtu: the largest MTU of {ctx.interface} is unknown "
                              f"({getattr(found, 'reason', found)}); not changing it")
        return found

    def settle(self, ctx: Context) -> float:
        """Wait for operstate up (or unknown: no carrier reported) and a carrier, then
        ``ctx.settle_s``; FactorError if the link is not back within SETTLE_MAX_S."""
        base = proc_path(ctx, f"/sys/class/net/{interface_of(ctx, self.name)}")

        def up() -> bool:
            try:
                state = read_text(f"{base}/operstate")
                return state in ("up", "unknown") and read_text(f"{base}/carrier") == "1"
            except FactorError:
                return False

        waited = wait_until(up, SETTLE_MAX_S)
        if waited < 0:
            raise FactorError(f"mtu: {ctx.interface} is not up with a carrier "
                              f"{SETTLE_MAX_S:g} s after the change")
        time.sleep(ctx.settle_s)
        return waited + ctx.settle_s

    def persist(self, level: Level) -> tuple[str, str] | None:
        if level.value is None:
            return None
        return ("beoperf-mtu.txt", f"ip link set dev IF mtu {level.value}\n"
                f"# make it persistent with {IFACE_PERSIST}\n")

    def apply(self, ctx: Context, level: Level) -> JsonObject:
        """A level within what the driver takes (a restore puts back what was there
        without asking: the snapshot's MTU was the interface's own)."""
        limit = self.max_mtu(ctx)
        if level.value is not None and level.value.isdigit() and limit \
                and int(level.value) > limit:
            raise FactorError(f"mtu: {level.value} is above what {ctx.interface} takes (its "
                              f"driver's largest MTU is {limit})")
        return {**super().apply(ctx, level), "interface": ctx.interface}
