"""Results kept without ``-o``: every measured run is kept, as NetPIPE keeps np.out.

A run given no ``-o`` is written to the user's state directory (:func:`directory`):
``/var/lib/beoperf/runs`` as root, ``$XDG_STATE_HOME/beoperf/runs`` (default
``~/.local/state/beoperf/runs``) otherwise, or ``$BEOPERF_RUNS`` (``off``: none; the
tests point it at a temporary directory).  The directory is private (0700, this user's,
opened without following links: beoperf.safeio.open_private_dir), each file is written
atomically, and only the newest :data:`KEEP` runs stay: older ones are removed as a new
one is added, so the directory never grows without bound.  The path is printed.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import time
from pathlib import Path

from beoperf import safeio

ENV = "BEOPERF_RUNS"
OFF = "off"
KEEP = 20  # runs kept (a default ping-pong result is a few hundred KB: some MB in all)
NAME = re.compile(r"^(\d{8}T\d{6}Z-[a-z][a-z0-9-]{0,40}-[0-9a-f]{6})\.[a-z]{1,8}$")


def directory() -> Path | None:
    """Where runs without -o are kept (None: $BEOPERF_RUNS says off)."""
    text = os.environ.get(ENV, "").strip()
    if text:
        return None if text.lower() == OFF else Path(text).expanduser()
    return safeio.state_dir("runs")


def keep(command: str, files: dict[str, str | bytes]) -> Path | None:
    """Write one run's files (suffix -> content, e.g. {".json": ..., ".np": ...}) to the
    runs directory under one new name, drop the oldest runs beyond KEEP, and return the
    path of the first file (None when keeping is off).  OSError or
    safeio.PrivateDirError when it cannot be written."""
    where = directory()
    if where is None:
        return None
    stem = f"{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{command}-{secrets.token_hex(3)}"
    fd = safeio.open_private_dir(where, create=True)
    assert fd is not None
    try:
        for suffix, data in files.items():
            safeio.write_atomic_at(fd, stem + suffix, data, overwrite=False, mode=0o600)
        prune(fd, KEEP)
    finally:
        os.close(fd)
    return where / (stem + next(iter(files)))


def prune(dir_fd: int, keep_runs: int) -> list[str]:
    """Remove the files of all but the newest ``keep_runs`` runs (by the time in their
    names) from the open directory; other files are left alone.  The names removed."""
    runs: dict[str, list[str]] = {}
    for name in os.listdir(dir_fd):
        match = NAME.match(name)
        if match:
            runs.setdefault(match.group(1), []).append(name)
    removed = []
    stale = sorted(runs)[:-keep_runs] if keep_runs > 0 else sorted(runs)
    for stem in stale:
        for name in runs[stem]:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(name, dir_fd=dir_fd)
                removed.append(name)
    return removed
