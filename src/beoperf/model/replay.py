"""The replay document (kind "replay", registered in ``model.prediction``), typed.

`beoperf replay` sends an application's message profile (``model.profile``) to a peer and
times it (``sweep.replay``): per message class every repeat's time, its median and range;
in total the sum of the classes' medians and every complete repeat's own total; both
ends' facts, how it ended and the method in words.  Times in seconds.
"""

from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field

from beoperf.model.document import Document, DocumentError, JsonObject
from beoperf.model.prediction import REPLAY
from beoperf.model.profile import Entry, Profile


@dataclass
class ClassTimes:
    """One message class of the profile as replayed: what it is, each repeat's time of
    its messages, their median, minimum and maximum, and how many messages a repeat
    timed (a ping-pong class times whole round trips)."""

    size: int
    count: int
    pattern: str
    concurrency: int
    label: str | None
    times_s: list[float]
    median_s: float | None
    min_s: float | None
    max_s: float | None
    messages_timed: int

    @classmethod
    def of(cls, entry: Entry, times_s: list[float], messages_timed: int) -> ClassTimes:
        """The class's row from its profile entry and its repeats' times."""
        t = list(times_s)
        return cls(entry.size, entry.count, entry.pattern, entry.concurrency, entry.label, t,
                   statistics.median(t) if t else None, min(t, default=None),
                   max(t, default=None), messages_timed)


@dataclass
class Totals:
    """The profile's time: ``median`` the sum of each class's median over the repeats (a
    stall of the machine in one repeat of one class does not move it); ``per_repeat``
    every complete repeat's own total, with their median, minimum and maximum."""

    per_repeat: list[float]
    median: float | None
    median_of_repeats: float | None
    min: float | None
    max: float | None

    @classmethod
    def of(cls, classes: list[ClassTimes]) -> Totals:
        done = min((len(c.times_s) for c in classes), default=0)
        per = [sum(c.times_s[r] for c in classes) for r in range(done)]
        typical = sum(statistics.median(c.times_s) for c in classes) if done else None
        return cls(per, typical, statistics.median(per) if per else None,
                   min(per, default=None), max(per, default=None))


@dataclass
class Replay:
    """One replay of a profile: the body of a replay document, and its meta."""

    profile: Profile
    transport: str
    peer: str
    repeats: int
    classes: list[ClassTimes]
    total_s: Totals
    local: JsonObject
    remote: JsonObject
    status: str  # complete | interrupted | failed
    status_reason: str | None
    warnings: list[str]
    method: str
    meta: JsonObject = field(default_factory=dict)

    def body(self) -> JsonObject:
        """The document body (every field but the meta, the profile as its to_dict)."""
        out: JsonObject = asdict(self)
        del out["meta"]
        return out

    def to_document(self) -> Document:
        return Document(REPLAY, self.body(), dict(self.meta))

    @classmethod
    def from_document(cls, doc: Document, source: str = "document") -> Replay:
        """The typed replay of a (schema-valid) replay document; DocumentError for another
        kind, or a profile that is not one (the schema leaves its inside free)."""
        if doc.kind != REPLAY:
            raise DocumentError(f"{source}: a beoperf {doc.kind} document, not a replay")
        b = doc.body
        try:
            profile = Profile.from_dict(b["profile"])
        except (KeyError, TypeError, ValueError) as exc:
            raise DocumentError(f"{source}: the replay's profile is not one "
                                f"({type(exc).__name__}: {exc})") from None
        return cls(profile=profile, transport=b["transport"], peer=b["peer"],
                   repeats=b["repeats"],
                   classes=[ClassTimes(**{"label": None, **c}) for c in b["classes"]],
                   total_s=Totals(**b["total_s"]), local=b["local"], remote=b["remote"],
                   status=b["status"], status_reason=b["status_reason"],
                   warnings=list(b["warnings"]), method=b["method"], meta=doc.meta)
