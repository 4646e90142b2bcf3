"""Every beoperf document under some paths (files or directory trees), found safely.

`beoperf report` reads whatever folder a user points it at, as root, and a folder may
hold anything another user put there: so the walk

* never follows a symbolic link inside a tree (each directory is opened relative to its
  parent's descriptor with O_NOFOLLOW, each file with ``safeio.read_bytes_at``): a link
  planted in a results folder cannot make the report read /etc/shadow or loop; a path
  given on the command line is the user's own choice and is followed (as ``find -H``);
* reads only regular files named ``*.json`` (beoperf writes every document as JSON), each
  bounded (``safeio.LIMITS["result"]``) and parsed strictly, then loaded as a document
  (found kind, upgraded, validated against its schema: ``document.from_json``);
* is bounded as a whole: at most MAX_DEPTH levels, MAX_ENTRIES directory entries looked
  at, MAX_DOCUMENTS documents and MAX_TOTAL bytes read;
* reads a file once even when two paths reach it (by device and inode).

What is not a document is skipped with a note saying why (one line each; files that are
not JSON are counted by extension in one line); hidden entries (a name starting with a
dot) are not looked into.
"""

from __future__ import annotations

import os
import stat
from collections import Counter
from dataclasses import dataclass, field

from beoperf import safeio
from beoperf.model import document
from beoperf.model.document import Document, DocumentError

MAX_DEPTH = 32
MAX_ENTRIES = 100_000
MAX_DOCUMENTS = 5_000
MAX_TOTAL = 1024 * safeio.MiB
DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC | os.O_NOFOLLOW


@dataclass(frozen=True)
class Found:
    """A document and the path it was read from (as the user would type it)."""

    path: str
    document: Document


@dataclass
class Collection:
    """What the walk found, and a note for everything it skipped."""

    documents: list[Found] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    not_json: Counter = field(default_factory=Counter)  # extension -> files not read
    hidden: int = 0
    entries: int = 0
    bytes_read: int = 0
    seen: set[tuple[int, int]] = field(default_factory=set)
    stopped: str | None = None  # the limit that ended the walk early

    def summary_notes(self) -> list[str]:
        """The notes, with the files that are not JSON and the hidden entries counted."""
        out = list(self.notes)
        if self.not_json:
            kinds = ", ".join(f"{ext or '(no extension)'}: {n}"
                              for ext, n in sorted(self.not_json.items()))
            out.append(f"{sum(self.not_json.values())} file(s) not read: not JSON ({kinds})")
        if self.hidden:
            out.append(f"{self.hidden} hidden entr{'y' if self.hidden == 1 else 'ies'} "
                       "(name starting with a dot) not looked into")
        if self.stopped:
            out.append(f"the search stopped early: {self.stopped}")
        return out


def collect(paths: list[str]) -> Collection:
    """Every document under ``paths``, in the order found (directories by name)."""
    out = Collection()
    for path in paths:
        if out.stopped:
            break
        try:
            st = os.stat(path)  # the user's own path: followed
        except OSError as exc:
            out.notes.append(f"{path}: cannot read ({exc.strerror or exc})")
            continue
        if stat.S_ISDIR(st.st_mode):
            _walk_top(path, out)
        elif stat.S_ISREG(st.st_mode):
            _read_top(path, st, out)
        else:
            out.notes.append(f"{path}: is {safeio.kind_of(st.st_mode)}, not a file or "
                             "directory")
    return out


def _walk_top(path: str, out: Collection) -> None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        out.notes.append(f"{path}: cannot open ({exc.strerror or exc})")
        return
    try:
        _walk(fd, path, 0, out)
    finally:
        os.close(fd)


def _read_top(path: str, st: os.stat_result, out: Collection) -> None:
    if not path.endswith(".json"):
        out.notes.append(f"{path}: not a .json file, not read")
        return
    if (st.st_dev, st.st_ino) in out.seen:
        return
    out.seen.add((st.st_dev, st.st_ino))
    try:
        data = safeio.read_bytes(path, safeio.LIMITS["result"], "a beoperf document")
    except safeio.FileInputError as exc:
        out.notes.append(str(exc))
        return
    _load(data, path, out)


def _walk(dir_fd: int, shown: str, depth: int, out: Collection) -> None:
    """The entries of one open directory, by name; subdirectories depth first."""
    try:
        entries = sorted(os.scandir(dir_fd), key=lambda e: e.name)
    except OSError as exc:
        out.notes.append(f"{shown}: cannot list ({exc.strerror or exc})")
        return
    for entry in entries:
        if out.stopped:
            return
        out.entries += 1
        if out.entries > MAX_ENTRIES:
            out.stopped = f"more than {MAX_ENTRIES:,} entries"
            return
        _entry(dir_fd, entry, os.path.join(shown, entry.name), depth, out)


def _entry(dir_fd: int, entry: os.DirEntry, shown: str, depth: int, out: Collection) -> None:
    if entry.name.startswith("."):
        out.hidden += 1
        return
    try:
        st = entry.stat(follow_symlinks=False)
    except OSError as exc:
        out.notes.append(f"{shown}: cannot read ({exc.strerror or exc})")
        return
    if stat.S_ISLNK(st.st_mode):
        out.notes.append(f"{shown}: a symbolic link, not followed")
    elif stat.S_ISDIR(st.st_mode):
        _subdir(dir_fd, entry.name, shown, depth + 1, out)
    elif not stat.S_ISREG(st.st_mode):
        out.notes.append(f"{shown}: is {safeio.kind_of(st.st_mode)}, not read")
    elif not entry.name.endswith(".json"):
        out.not_json[os.path.splitext(entry.name)[1].lower()] += 1
    elif (st.st_dev, st.st_ino) not in out.seen:
        out.seen.add((st.st_dev, st.st_ino))
        _read_at(dir_fd, entry.name, shown, out)


def _subdir(dir_fd: int, name: str, shown: str, depth: int, out: Collection) -> None:
    if depth > MAX_DEPTH:
        out.notes.append(f"{shown}: deeper than {MAX_DEPTH} levels, not looked into")
        return
    try:
        fd = os.open(name, DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        out.notes.append(f"{shown}: cannot open ({exc.strerror or exc})")
        return
    try:
        _walk(fd, shown, depth, out)
    finally:
        os.close(fd)


def _read_at(dir_fd: int, name: str, shown: str, out: Collection) -> None:
    left = MAX_TOTAL - out.bytes_read
    try:
        data = safeio.read_bytes_at(dir_fd, name, min(safeio.LIMITS["result"], left),
                                    "a beoperf document", shown=shown)
    except safeio.FileInputError as exc:
        if left < safeio.LIMITS["result"] and "limit" in str(exc):
            out.stopped = f"more than {MAX_TOTAL // safeio.MiB} MiB of documents read"
        out.notes.append(str(exc))
        return
    _load(data, shown, out)


def _load(data: bytes, shown: str, out: Collection) -> None:
    out.bytes_read += len(data)
    try:
        doc = document.from_json(safeio.parse_json(data, shown), shown)
    except (safeio.FileInputError, DocumentError) as exc:
        out.notes.append(str(exc))
        return
    out.documents.append(Found(shown, doc))
    if len(out.documents) >= MAX_DOCUMENTS:
        out.stopped = f"{MAX_DOCUMENTS:,} documents found (the most one report holds)"
