"""Files read and written as root, safely.

beoperf runs as root on shared nodes, and every file it is handed may be crafted and every
directory it writes into may hold a planted symlink.  So:

* reading: only regular files (a FIFO would hang the reader, /dev/zero never ends, a
  directory is a mistake), at most a documented number of bytes (``LIMITS``), checked
  before a byte is parsed; JSON additionally without NaN, infinities, out-of-range numbers
  or nesting deeper than ``MAX_JSON_DEPTH``.  Files that can make root change the system
  (rollback files) must also be private: owned by the user running beoperf and writable
  by no one else, as ssh demands of key files.
* writing: every file goes through :func:`write_atomic`: a temporary file created
  exclusively (``O_EXCL|O_NOFOLLOW``) in the target's directory, written, fsynced and
  renamed over the target (a symlink at the target is replaced, never followed), or with
  ``overwrite=False`` linked into place only if nothing is there.  The directory is
  opened once and every step is relative to it.  When results cannot be written where
  asked, :func:`private_dir` gives a fresh 0700 directory instead of a predictable name
  in a shared /tmp.

Every failure is :class:`FileInputError` (reading) or ``OSError`` (writing) with a message
that names the file.
"""

from __future__ import annotations

import errno
import json
import math
import os
import secrets
import stat
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

MiB = 1024 * 1024

# The most each kind of input may hold (bytes); the README lists them.
LIMITS = {
    "result": 64 * MiB,  # a beoperf result or another tool's output (plot, compare)
    "rollback": 1 * MiB,  # tune --rollback FILE
    "profile": 1 * MiB,  # tune --profile-file
    "answer": 4 * MiB,  # one node's audit document in a fleet audit
    "ruleset": 16 * MiB,  # a firewall ruleset a study loads (factor firewall, file:PATH)
    "study": 1 * MiB,  # a study file (TOML), or a study's rollback file
}
MAX_JSON_DEPTH = 64
_READ_CHUNK = 1 * MiB


class FileInputError(ValueError):
    """A file that cannot be used as input; the message names it and says why."""


def kind_of(mode: int) -> str:
    """'a directory', 'a FIFO', 'a socket', 'a device' or 'not a regular file'."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _check_regular(path: str, st: os.stat_result) -> None:
    if not stat.S_ISREG(st.st_mode):
        raise FileInputError(f"{path}: is {kind_of(st.st_mode)}, not a regular file")


def _check_private(path: str, st: os.stat_result) -> None:
    """Owned by whoever runs beoperf (root: root) and writable by nobody else."""
    if st.st_uid != os.geteuid():
        raise FileInputError(f"{path}: owned by uid {st.st_uid}, not by uid {os.geteuid()} "
                             "who runs beoperf; refusing a file another user could have "
                             "written (chown it after checking its content)")
    if st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise FileInputError(f"{path}: writable by group or others (mode "
                             f"{stat.S_IMODE(st.st_mode):04o}); refusing it "
                             "(chmod go-w after checking its content)")


def _too_big(path: str, size: int, limit: int, what: str) -> FileInputError:
    return FileInputError(f"{path}: {size:,} bytes or more, over the {limit:,}-byte limit "
                          f"for {what}")


def read_bytes(path: str | os.PathLike[str], limit: int, what: str = "this input", *,
               private: bool = False) -> bytes:
    """The content of a regular file of at most ``limit`` bytes; FileInputError otherwise.

    The path is checked before it is opened (so a FIFO or device is never opened) and
    the open file again (so a file swapped in between is caught); at most limit + 1
    bytes are ever read, whatever the file claims its size to be."""
    name = os.fspath(path)
    try:
        _check_regular(name, os.stat(name))
        fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK)
    except OSError as exc:
        raise FileInputError(f"{name}: cannot read ({exc.strerror or exc})") from None
    return _read_open(fd, name, limit, what, private)


def read_bytes_at(dir_fd: int, entry: str, limit: int, what: str = "this input", *,
                  shown: str | None = None, private: bool = False) -> bytes:
    """read_bytes of ``entry`` in the open directory ``dir_fd``, never through a symlink
    (O_NOFOLLOW: a link planted there is refused, not followed): for walking a tree
    one directory descriptor at a time.  ``shown`` names the file in messages;
    ``private``: as read_bytes's (a ruleset root loads must be the user's own)."""
    name = shown or entry
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NOCTTY | os.O_NONBLOCK | os.O_NOFOLLOW
    try:
        fd = os.open(entry, flags, dir_fd=dir_fd)
    except OSError as exc:
        reason = "a symbolic link, not followed" if exc.errno == errno.ELOOP else \
            f"cannot read ({exc.strerror or exc})"
        raise FileInputError(f"{name}: {reason}") from None
    return _read_open(fd, name, limit, what, private)


def _read_open(fd: int, name: str, limit: int, what: str, private: bool) -> bytes:
    """Up to ``limit`` bytes of an open file (closed here) that must be a regular file."""
    try:
        st = os.fstat(fd)
        _check_regular(name, st)
        if private:
            _check_private(name, st)
        if st.st_size > limit:
            raise _too_big(name, st.st_size, limit, what)
        chunks, total = [], 0
        while total <= limit:
            chunk = os.read(fd, min(_READ_CHUNK, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        if total > limit:
            raise _too_big(name, total, limit, what)
        return b"".join(chunks)
    except OSError as exc:
        raise FileInputError(f"{name}: cannot read ({exc.strerror or exc})") from None
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike[str], limit: int, what: str = "this input", *,
              private: bool = False) -> str:
    """read_bytes, decoded as UTF-8 (a BOM is dropped); FileInputError if it is not text."""
    data = read_bytes(path, limit, what, private=private)
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise FileInputError(f"{os.fspath(path)}: binary data, not UTF-8 text") from None


# --------------------------------------------------------------------------- JSON


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number (JSON allows finite numbers only)")


def _finite_float(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"number {text[:40]} is out of range")
    return value


def json_depth(doc: Any, limit: int = MAX_JSON_DEPTH) -> int:
    """Nesting depth of a parsed document (iterative); stops counting past ``limit``."""
    deepest = 0
    stack = [(doc, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict | list):
            deepest = max(deepest, depth)
            if deepest > limit:
                return deepest
            children = node.values() if isinstance(node, dict) else node
            stack.extend((child, depth + 1) for child in children)
    return deepest


def parse_json(text: str | bytes, source: str, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """A JSON document of finite numbers nested at most ``max_depth`` deep; FileInputError
    naming ``source`` and the problem otherwise."""
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8-sig")
        except UnicodeDecodeError:
            raise FileInputError(f"{source}: binary data, not JSON") from None
    if not text.strip():
        raise FileInputError(f"{source}: empty file, not JSON")
    try:
        doc = json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except json.JSONDecodeError as exc:
        where = f"line {exc.lineno} column {exc.colno}"
        if exc.pos >= len(text.rstrip()) or exc.msg.startswith("Unterminated string"):
            raise FileInputError(f"{source}: truncated JSON (ends inside the document, "
                                 f"{where})") from None
        raise FileInputError(f"{source}: invalid JSON ({exc.msg} at {where})") from None
    except RecursionError:
        raise FileInputError(f"{source}: JSON nested more than {max_depth} deep") from None
    except ValueError as exc:  # our hooks, and integers too long to convert
        raise FileInputError(f"{source}: invalid JSON ({exc})") from None
    if json_depth(doc, max_depth) > max_depth:
        raise FileInputError(f"{source}: JSON nested more than {max_depth} deep")
    return doc


def load_json(path: str | os.PathLike[str], limit: int, what: str = "this input", *,
              private: bool = False) -> Any:
    """read_bytes + parse_json: a bounded, validated JSON file."""
    return parse_json(read_bytes(path, limit, what, private=private), os.fspath(path))


def dump_json(doc: Any, indent: int | None = 1) -> str:
    """JSON text of a document (NaN and infinities refused, as parse_json refuses them)."""
    return json.dumps(doc, indent=indent, allow_nan=False) + "\n"


# --------------------------------------------------------------------------- writing


def _open_dir(directory: str) -> int:
    return os.open(directory or ".", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)


def _create_temp(dir_fd: int, name: str, mode: int) -> tuple[int, str]:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(100):
        tmp = f".{name[:200]}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(tmp, flags, mode, dir_fd=dir_fd), tmp
        except FileExistsError:
            continue
    raise FileExistsError(f"cannot create a temporary file beside {name}")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]
    os.fsync(fd)


def write_atomic(path: str | os.PathLike[str], data: bytes | str, *, overwrite: bool = True,
                 mode: int = 0o644) -> None:
    """Write ``data`` to ``path`` so that it is complete or absent, never through a link.

    overwrite=False: FileExistsError if anything (even a dangling symlink) is at path.
    OSError (with the filename) on failure; no temporary file is left behind."""
    name = os.fspath(path)
    directory, base = os.path.split(os.path.abspath(name))
    if not base:
        raise IsADirectoryError(21, "is a directory", name)
    dir_fd = _open_dir(directory)
    try:
        write_atomic_at(dir_fd, base, data, overwrite=overwrite, mode=mode, shown=name)
    finally:
        os.close(dir_fd)


def write_atomic_at(dir_fd: int, base: str, data: bytes | str, *, overwrite: bool = True,
                    mode: int = 0o644, shown: str | None = None) -> None:
    """write_atomic of ``base`` in the open directory ``dir_fd`` (the caller's, still
    open after): for a directory the caller has opened and checked itself."""
    name = shown or base
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, tmp = _create_temp(dir_fd, base, mode)
    placed = False
    try:
        try:
            _write_all(fd, payload)
        finally:
            os.close(fd)
        if overwrite:
            os.rename(tmp, base, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            placed = True
        else:
            os.link(tmp, base, src_dir_fd=dir_fd, dst_dir_fd=dir_fd, follow_symlinks=False)
    except OSError as exc:
        if exc.filename is None or exc.filename == tmp:
            exc.filename = name
        raise
    finally:
        if not placed:
            os.unlink(tmp, dir_fd=dir_fd)
    os.fsync(dir_fd)


def write_via(path: str | os.PathLike[str], produce: Callable[[Any], None], *,
              overwrite: bool = True, mode: int = 0o644) -> None:
    """write_atomic of what ``produce(stream)`` writes into an in-memory binary stream
    (for writers that want a file object, such as matplotlib's savefig)."""
    import io

    buf = io.BytesIO()
    produce(buf)
    write_atomic(path, buf.getvalue(), overwrite=overwrite, mode=mode)


def private_dir(prefix: str = "beoperf-") -> Path:
    """A new directory only this user can enter (0700, unpredictable name) under the
    temporary directory: where results go when they cannot go where asked."""
    return Path(tempfile.mkdtemp(prefix=prefix))


class PrivateDirError(ValueError):
    """A directory that cannot be used as this user's private one (the message says why)."""


def state_dir(name: str) -> Path:
    """This user's state directory for ``name`` ("history", "runs"): under
    /var/lib/beoperf as root, else under $XDG_STATE_HOME/beoperf (~/.local/state/beoperf
    when it is unset or relative, as the XDG specification says)."""
    if os.geteuid() == 0:
        return Path("/var/lib/beoperf") / name
    state = os.environ.get("XDG_STATE_HOME", "")
    if not os.path.isabs(state):  # unset or relative: the XDG default
        state = str(Path.home() / ".local" / "state")
    return Path(state) / "beoperf" / name


def open_private_dir(path: str | os.PathLike[str], create: bool) -> int | None:
    """An open descriptor of the directory ``path`` (O_NOFOLLOW: a link there is refused),
    checked on the descriptor itself to be this user's and writable by nobody else; made
    if absent and ``create`` (intermediate directories 0755, the last 0700, whatever the
    umask); None if absent; PrivateDirError otherwise.  Where a command keeps its own
    state (the runs' history, results kept without -o): a directory another local user
    could write into would let them plant or swap what root reads back."""
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        if not create:
            return None
        _make_private_dirs(Path(path))
        return open_private_dir(path, create=False)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(path):
            raise PrivateDirError(f"{path}: is a symbolic link, not a directory") from None
        raise PrivateDirError(f"{path}: {exc.strerror or exc}") from None
    st = os.fstat(fd)
    if st.st_uid != os.geteuid() or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        os.close(fd)
        raise PrivateDirError(f"{path}: not a private directory of uid {os.geteuid()} "
                              f"(owner {st.st_uid}, mode {stat.S_IMODE(st.st_mode):04o})")
    return fd


def _make_private_dirs(path: Path) -> None:
    missing = []
    at = path
    while not os.path.lexists(at) and at != at.parent:
        missing.append(at)
        at = at.parent
    for i, directory in enumerate(reversed(missing)):
        mode = 0o700 if i == len(missing) - 1 else 0o755
        try:
            os.mkdir(directory, mode)
            fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
            try:
                os.fchmod(fd, mode)  # the umask may have taken bits away, or left some
            finally:
                os.close(fd)
        except OSError as exc:
            raise PrivateDirError(f"{directory}: cannot create ({exc.strerror or exc})") \
                from None
