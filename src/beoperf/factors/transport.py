"""How the ping-pong moves its messages (run scope): ``tcp`` or ``mpi``, the transports of
``beoperf.engines`` (whose layer this one may not import: ``TRANSPORTS`` repeats its
``BUILTIN`` names, and a test keeps the two the same)."""

from __future__ import annotations

from beoperf import errors
from beoperf.audit.base import quoted
from beoperf.factors.base import RUN, Factor, Level
from beoperf.model.document import JsonObject

TRANSPORTS = ("tcp", "mpi")


class Transport(Factor):
    name = "transport"
    scope = RUN
    summary = "the ping-pong's transport: tcp or mpi"

    def level(self, text: str) -> Level:
        value = text.strip()
        if value not in TRANSPORTS:
            raise errors.BadSpec(f"transport: {quoted(text)} is not one of "
                                 f"{', '.join(TRANSPORTS)}")
        return Level(value, value)

    def configure(self, measurement: JsonObject, level: Level) -> JsonObject:
        return {**measurement, "transport": level.value}
