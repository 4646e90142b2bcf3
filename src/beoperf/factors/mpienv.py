"""MPI environment variables for a measurement (run scope): a level is ``KEY=VALUE``, or
several joined by ``;`` (``OMPI_MCA_btl=self,tcp;OMPI_MCA_btl_tcp_eager_limit=65536``).

The names are what an MPI library reads (``[A-Za-z_][A-Za-z0-9_]*``: Open MPI's
``OMPI_MCA_*`` names carry lower case); those that change what runs
or what it loads (``PATH``, ``LD_*``, ``PYTHON*``, ``BEOPERF*``) are refused: a study file
may not make root run another program.
"""

from __future__ import annotations

import re

from beoperf import errors
from beoperf.audit.base import quoted
from beoperf.factors.base import RUN, Factor, Level
from beoperf.model.document import JsonObject, JsonValue

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")  # OMPI_MCA_btl: lower case too
REFUSED = re.compile(r"PATH|LD_.*|PYTHON.*|BEOPERF.*|IFS|SHELL|ENV|BASH_ENV|HOME|TMPDIR")
VALUE_CHARS = 1024


def pairs(text: str) -> dict[str, str]:
    """KEY=VALUE[;KEY=VALUE ...] as a dict; BadSpec naming the bad pair."""
    out: dict[str, str] = {}
    for part in text.split(";"):
        key, sep, value = part.strip().partition("=")
        if not sep or not NAME.fullmatch(key):
            raise errors.BadSpec(f"mpienv: {quoted(part)} is not KEY=VALUE (KEY: letters, "
                                 "digits and _)")
        if REFUSED.fullmatch(key):
            raise errors.BadSpec(f"mpienv: {key} changes what runs, not how MPI runs; "
                                 "refused")
        if len(value) > VALUE_CHARS or not value.isprintable():
            raise errors.BadSpec(f"mpienv: the value of {key} is not a short printable text")
        out[key] = value
    return out


class MpiEnv(Factor):
    name = "mpienv"
    scope = RUN
    summary = "MPI environment variables, KEY=VALUE[;KEY=VALUE ...]"

    def level(self, text: str) -> Level:
        found = pairs(text)
        shown = ";".join(f"{k}={v}" for k, v in found.items())
        return Level(shown, shown)

    def configure(self, measurement: JsonObject, level: Level) -> JsonObject:
        current = measurement.get("env")
        env: dict[str, JsonValue] = dict(current) if isinstance(current, dict) else {}
        if level.value is not None:
            env.update(pairs(level.value))
        return {**measurement, "env": env}
