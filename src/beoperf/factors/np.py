"""The process count of a measurement (run scope): ``np`` of the ring, HPL and HPCC, and
``{np}`` in a measured command."""

from __future__ import annotations

from beoperf import errors
from beoperf.audit.base import quoted
from beoperf.factors.base import RUN, Factor, Level
from beoperf.model.document import JsonObject

MAX_NP = 1 << 20


class ProcessCount(Factor):
    name = "np"
    scope = RUN
    summary = "the number of MPI processes"

    def level(self, text: str) -> Level:
        value = text.strip()
        if not value.isdigit() or not 1 <= int(value) <= MAX_NP:
            raise errors.BadSpec(f"np: {quoted(text)} is not a process count from 1 to "
                                 f"{MAX_NP}")
        return Level(str(int(value)), str(int(value)))

    def configure(self, measurement: JsonObject, level: Level) -> JsonObject:
        return {**measurement, "np": None if level.value is None else int(level.value)}
