"""The errors a suite raises, by what went wrong (not by which command saw it).

Every capability raises these (or the library errors `cli/errors.py` lists), and the CLI
turns each into one line `beoperf: category: message; hint` and an exit status through
one table, so the same condition gives the same status in every command: a peer that
refuses is 4 in `pingpong`, in `audit --link-speed` and in `tune --procedure` alike.
"""

from __future__ import annotations


class BeoperfError(Exception):
    """A failure a user can act on: a one-line message and, when useful, a hint."""

    category = "error"

    def __init__(self, message: str, hint: str = "", category: str | None = None) -> None:
        self.hint = hint
        if category is not None:
            self.category = category  # a more precise word for this one ("server error")
        super().__init__(message)


class BadSpec(BeoperfError):
    """A value the user gave cannot be used (exit 2)."""

    category = "usage error"


class InputError(BeoperfError):
    """A file given as input cannot be used (exit 1)."""

    category = "input error"


class OutputError(BeoperfError):
    """A result cannot be written where asked (exit 1; it was saved elsewhere)."""

    category = "output error"


class ConnectError(BeoperfError, ConnectionError):
    """The peer cannot be reached, or was lost (exit 3)."""

    category = "connection error"


class PeerError(BeoperfError):
    """The peer answered but refused or failed: busy, another version, over its limits,
    not a beoperf server (exit 4)."""

    category = "peer error"


class IntegrityError(BeoperfError):
    """Messages arrived with wrong content (exit 5)."""

    category = "integrity error"


class PartialAnswer(BeoperfError):
    """Some nodes of a fleet did not answer (exit 6); the document still holds the rest."""

    category = "partial answer"


class NoAnswer(BeoperfError):
    """No node of a fleet answered (exit 7)."""

    category = "no answer"


class NotPermitted(BeoperfError):
    """The command needs root (or another right) it does not have (exit 1)."""

    category = "not root"


class Busy(BeoperfError):
    """Another beoperf holds what this one needs (a lock) (exit 1)."""

    category = "busy"


class Failed(BeoperfError):
    """The capability ran and failed; the message says how, and what was undone (exit 1)."""

    category = "failed"
