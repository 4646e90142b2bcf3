"""``beoperf study restore FILE``: a host put back from the rollback file its agent left.

What an admin runs on a host stranded by a study whose agent could not restore (it was
killed with SIGKILL, or the host rebooted into a state nobody restored).  The file may have
been crafted: it is read bounded and private (owned by root, writable by no one else),
its shape checked, every saved value checked against its factor's allow-list
(``Factor.check_saved``) before anything is written, and it must have been written on
this host and in this network namespace unless ``force``.  The restore holds the host's
tune lock, so it never runs beside a live agent (which restores by itself), and goes in
reverse apply order.  A file every entry of which was restored is renamed FILE.restored,
so that running the command twice cannot put back an old snapshot.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from beoperf import errors, factors, safeio
from beoperf.audit import lock
from beoperf.audit.base import quoted, valid_ifname
from beoperf.factors.agent import AgentError, AgentGone, request
from beoperf.factors.base import Context, Factor
from beoperf.model import document
from beoperf.model.document import DocumentError, JsonObject
from beoperf.model.study_rollback import StudyRollback

LIMIT = safeio.LIMITS["rollback"]


class RestoreError(AgentError):
    """A rollback file that cannot be restored from (unreadable, not one, a bad entry)."""

    category = "study restore"


@dataclass
class Saved:
    """A rollback file read and checked: where it was written, and each factor's
    snapshot in apply order."""

    study_id: str
    host: str
    netns: int | None
    interface: str | None
    entries: list[tuple[Factor, JsonObject]]


def _printable(text: str) -> str:
    return " ".join("".join(c if c.isprintable() else "?" for c in text).split())


def read(path: str) -> Saved:
    """The rollback file at ``path``, its shape and every entry checked; RestoreError naming
    what is wrong (nothing has been touched)."""
    try:
        raw = safeio.load_json(path, LIMIT, "a study rollback file", private=True)
        body = StudyRollback.from_document(document.from_json(raw, path))
    except (safeio.FileInputError, DocumentError) as exc:
        raise RestoreError(_printable(str(exc))) from None
    try:
        checked = factors.checked_entries(body)
    except errors.BeoperfError as exc:
        raise RestoreError(f"{path}: {_printable(str(exc))}") from None
    if body.interface is not None and not valid_ifname(body.interface):
        raise RestoreError(f"{path}: interface {quoted(body.interface)} is not an "
                           "interface's name")
    entries = [(factor, entry.saved) for factor, entry in reversed(checked)]
    return Saved(body.study_id, body.host, body.netns, body.interface, entries)


def restore(path: str, force: bool = False, root: str = "/",
            base: str = lock.LOCK_DIR) -> list[JsonObject]:
    """Put this host back from ``path``: each factor's end ({factor, status, detail}),
    in the order restored.  Busy while the study's agent still runs."""
    saved = read(path)
    _same_place(saved, force)
    _no_agent(saved.study_id, base)
    ctx = Context(saved.interface, root, os.path.dirname(os.path.abspath(path)))
    with lock.TuneLock(base):
        ends = [_one(factor, ctx, entry) for factor, entry in reversed(saved.entries)]
        if all(e["status"] == "restored" for e in ends):
            retire(path)
    return ends


def retire(path: str) -> str:
    """A rollback file fully restored from, renamed to FILE.restored (the agent removes
    its own when it has restored): a second ``study restore FILE`` would otherwise put
    back a snapshot older than whatever the host has had set since.  The new name."""
    done = path + RESTORED
    os.replace(path, done)  # (renames a symlink itself, never what it points to)
    return done


RESTORED = ".restored"


def _same_place(saved: Saved, force: bool) -> None:
    here, netns = os.uname().nodename, lock.netns_id()
    if force:
        return
    if saved.host != here or saved.netns != netns:
        raise errors.BadSpec(f"this rollback file was written on {saved.host} (network "
                             f"namespace {saved.netns}), this is {here} ({netns})",
                             "restore it where it was written, or give --force")


def _no_agent(study_id: str, base: str) -> None:
    try:
        status = request(study_id, {"op": "status"}, 5.0, base)
    except AgentGone:
        return
    except AgentError:
        return  # no answer: the lock decides
    raise errors.Busy(f"the agent of study {study_id} (pid {status.get('pid')}) is "
                      f"running: it restores by itself within "
                      f"{status.get('lease_left_s', '?')} s")


def _one(factor: Factor, ctx: Context, entry: JsonObject) -> JsonObject:
    try:
        factor.restore(ctx, entry)
        factor.settle(ctx)
    except errors.BeoperfError as exc:
        return {"factor": factor.name, "status": "restore-failed", "detail": str(exc)}
    return {"factor": factor.name, "status": "restored", "detail": "back to the snapshot"}
