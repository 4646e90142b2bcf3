"""Socket buffers: the sizes a measurement asks for (``sockbuf``, ``sndbuf``, ``rcvbuf``,
run scope: SO_SNDBUF/SO_RCVBUF at both ends, ``default`` leaving the system's own), and the
host's limits on them (``buffers``, host scope).

The kernel grants a socket at most ``net.core.{w,r}mem_max``: ``buffers`` raises those (and
the largest size of ``tcp_{w,r}mem``) to cover a level, never lowers them, and restores them
exactly.  The ``buffers`` preset applies its largest level in every configuration, Default
included, so that only the socket option varies.  What the kernel granted is recorded by
the measurement (its socket facts), not here.
"""

from __future__ import annotations

from typing import ClassVar

from beoperf import errors, units
from beoperf.audit.base import INT_MAX, ValueSpec, quoted
from beoperf.audit.checks import SYSCTL_CONF, Sysctls
from beoperf.factors.base import HOST, RUN, Context, Factor, FactorError, Level, read_text
from beoperf.factors.sysctl import SysctlFactor, put, sysctl_path
from beoperf.model.document import JsonObject, JsonValue

LIMITS = ("net.core.rmem_max", "net.core.wmem_max")
TRIPLES = ("net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem")


def size_level(name: str, text: str) -> Level:
    """A size level ("256K", "4M", bytes); BadSpec saying what it takes."""
    try:
        size = units.parse_size(text.strip())
    except ValueError as exc:
        raise errors.BadSpec(f"{name}: {quoted(text)} is not a size ({exc})") from None
    if not 0 < size <= INT_MAX:
        raise errors.BadSpec(f"{name}: {quoted(text)} is not a size from 1 byte to "
                             f"{INT_MAX} bytes")
    return Level(text.strip(), str(size))


class SocketBuffer(Factor):
    """Both socket buffers a measurement asks for (None: the system's default)."""

    name = "sockbuf"
    scope = RUN
    KEYS_SET: ClassVar[tuple[str, ...]] = ("sndbuf", "rcvbuf")
    summary = "SO_SNDBUF and SO_RCVBUF at both ends (default: the system's)"

    def level(self, text: str) -> Level:
        return size_level(self.name, text)

    def configure(self, measurement: JsonObject, level: Level) -> JsonObject:
        size = None if level.value is None else int(level.value)
        return {**measurement, **dict.fromkeys(self.KEYS_SET, size)}


class SendBuffer(SocketBuffer):
    name = "sndbuf"
    KEYS_SET = ("sndbuf",)
    summary = "SO_SNDBUF at both ends (default: the system's)"


class ReceiveBuffer(SocketBuffer):
    name = "rcvbuf"
    KEYS_SET = ("rcvbuf",)
    summary = "SO_RCVBUF at both ends (default: the system's)"


class Buffers(SysctlFactor):
    """The host's buffer limits raised to cover a size."""

    name = "buffers"
    scope = HOST
    order = 0
    KEYS: ClassVar[dict[str, ValueSpec]] = {k: Sysctls.VALUES[k] for k in LIMITS + TRIPLES}
    summary = "net.core.{r,w}mem_max and tcp_{r,w}mem's largest raised to cover a size"

    def level(self, text: str) -> Level:
        return size_level(self.name, text)

    def covering(self, ctx: Context, key: str, size: int) -> str | None:
        """The value of ``key`` that covers ``size`` (None: it already does)."""
        now = read_text(sysctl_path(ctx, key)).split()
        if key in LIMITS:
            return None if int(now[0]) >= size else str(size)
        if len(now) != 3 or int(now[2]) >= size:
            return None
        return f"{now[0]} {now[1]} {size}"

    def apply(self, ctx: Context, level: Level) -> JsonObject:
        if level.value is None:
            raise FactorError("buffers: the default level is restored, not applied")
        size = int(level.value)
        read_back: dict[str, JsonValue] = {}
        for key in self.KEYS:
            value = self.covering(ctx, key, size)
            if value is not None:
                try:
                    self.check_pair(key, value)
                except ValueError as exc:
                    raise FactorError(f"buffers: {exc}") from None
                put(ctx, key, value)
            read_back[key] = " ".join(read_text(sysctl_path(ctx, key)).split())
        return {"read_back": read_back}

    def persist(self, level: Level) -> tuple[str, str] | None:
        if level.value is None:
            return None
        lines = [f"{key} = {level.value}" for key in LIMITS]
        lines += [f"# {key}: raise its largest size to {level.value}" for key in TRIPLES]
        return (SYSCTL_CONF.rsplit("/", 1)[1], "\n".join(lines) + "\n")
