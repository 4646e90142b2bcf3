"""STAND-IN test factor until P2 lands: a value kept in <root>/noop."""

from __future__ import annotations

import os
from collections.abc import Sequence

from beoperf import errors
from beoperf.factors.base import Context, Factor, FactorError, Level
from beoperf.model.document import JsonObject


class Noop(Factor):
    name, scope, order = "noop", "host", 0

    def _path(self, ctx: Context) -> str:
        return os.path.join(ctx.root, "noop")

    def parse(self, texts: Sequence[str]) -> list[Level]:
        for t in texts:
            if not t.isdigit() and t != "default":
                raise errors.BadSpec(f"noop level {t!r}: give digits")
        return [Level(t, None if t == "default" else t) for t in texts]

    def read(self, ctx: Context) -> str:
        return str(self.snapshot(ctx)["value"])

    def snapshot(self, ctx: Context) -> JsonObject:
        try:
            with open(self._path(ctx)) as f:
                return {"value": f.read().strip(), "root": ctx.root}
        except FileNotFoundError:
            return {"value": "0", "root": ctx.root}

    def check_saved(self, saved: JsonObject) -> None:
        if not str(saved.get("value", "")).isdigit():
            raise FactorError("noop: bad saved value")

    def apply(self, ctx: Context, level: Level) -> JsonObject:
        with open(self._path(ctx), "w") as f:
            f.write(str(level.value))
        return {"read_back": self.snapshot(ctx)["value"]}

    def restore(self, ctx: Context, saved: JsonObject) -> None:
        self.check_saved(saved)
        ctx = Context(ctx.interface, str(saved["root"]))  # stand-in only: tests' roots
        self.apply(ctx, Level("saved", str(saved["value"])))
