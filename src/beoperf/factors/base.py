"""STAND-IN for P2's factors/base.py (PLAN27 1.2), reverted when P2 lands."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from beoperf import errors
from beoperf.model.document import JsonObject, JsonValue


@dataclass(frozen=True)
class Context:
    interface: str | None
    root: str = "/"
    directory: str | None = None
    settle_s: float = 1.0


@dataclass(frozen=True)
class Level:
    label: str
    value: str | None


class FactorError(errors.Failed):
    category = "factor failed"


class Factor:
    name: ClassVar[str] = ""
    scope: ClassVar[str] = "host"
    order: ClassVar[int] = 0

    def parse(self, texts: Sequence[str]) -> list[Level]:
        raise NotImplementedError

    def snapshot(self, ctx: Context) -> JsonObject:
        raise NotImplementedError

    def check_saved(self, saved: JsonObject) -> None:
        raise NotImplementedError

    def apply(self, ctx: Context, level: Level) -> JsonObject:
        raise NotImplementedError

    def restore(self, ctx: Context, saved: JsonObject) -> None:
        raise NotImplementedError

    def settle(self, ctx: Context) -> float:
        return 0.0

    def read(self, ctx: Context) -> JsonValue:
        raise NotImplementedError

    def set_level(self, ctx: Context, level: Level, saved: JsonObject) -> JsonObject:
        if level.value is not None:
            return self.apply(ctx, level)
        self.restore(ctx, saved)
        return {"read_back": self.read(ctx)}

    def files(self, saved: JsonObject) -> list[JsonObject]:
        return []
