"""PMAC I/O Bench's six patterns, in C, on a file in each directory asked for.

For each directory and file size: one file, created in that directory as
``.beoperf-io-<random>`` with O_CREAT | O_EXCL | O_NOFOLLOW (a name planted in advance, a
symlink above all, is never opened: another random name is tried), mode 0600, through a
descriptor of the directory opened once (a path swapped later changes nothing).  The
patterns run in PMAC's order (sequential write, sequential read, random read-rewrite,
random read, backward write, backward read), ``repeat`` times; MB/s = 10^6 B/s of the
file covered (random read-rewrite reads and writes each block, and counts it once, as
PMAC's figure of a pass over the file).  The file's
name is removed (through the same directory descriptor) as soon as it is opened: the
patterns run on the descriptor, and no file is left behind however the run ends, even
when beoperf is killed with SIGKILL (the space is freed when the descriptor closes).

Cold cache (the default), said in the document for each directory:
- "O_DIRECT" where the file system takes it (the first aligned write succeeds): every
  read and write bypasses the page cache;
- otherwise "fsync + POSIX_FADV_DONTNEED": the file's cached pages are dropped before
  every pattern.
In both, a pattern that writes is timed up to an fsync of the file: an O_DIRECT write to a
network file system (sshfs, NFS) may be acknowledged before it has left the node.
``warm`` ("page cache") measures through the page cache with neither.

The file is laid out (written whole and synced, untimed) before the first pattern, as fio
lays out its file, so that every repetition's writes overwrite blocks already allocated.

Free space is checked before anything is written: the largest file plus 10% and 16 MiB.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
from collections.abc import Callable, Iterator

from beoperf import _node, errors, interrupts, units
from beoperf.model.document import JsonObject, JsonValue
from beoperf.model.node import metric
from beoperf.sysinfo.node import mount_of

PATTERNS = ("sequential write", "sequential read", "random read-rewrite", "random read",
            "backward write", "backward read")
WRITES = {"sequential write", "backward write", "random read-rewrite"}
PREFIX = ".beoperf-io-"
NAME_TRIES = 16
SPACE_MARGIN = 1.1
SPACE_SLACK = 16 << 20
DIRECT = "O_DIRECT"
DROP = "fsync + POSIX_FADV_DONTNEED"
WARM = "page cache (warm)"


def open_dir(path: str) -> int:
    """A descriptor of the directory (BadSpec if it is not one)."""
    try:
        return os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise errors.BadSpec(f"--dir {path}: {exc.strerror}",
                             "give a directory beoperf can write in") from None


def check_space(dfd: int, path: str, largest: int) -> int:
    st = os.statvfs(dfd)
    free = st.f_bavail * st.f_frsize
    need = int(largest * SPACE_MARGIN) + SPACE_SLACK
    if free < need:
        raise errors.BadSpec(f"--dir {path}: {units.format_size(free)} free, the "
                             f"{units.format_size(largest)} file needs "
                             f"{units.format_size(need)} (10% and 16 MiB kept)",
                             "give a smaller --file-size or another --dir")
    return free


def create(dfd: int, path: str) -> tuple[int, str]:
    """A new file of ours in the directory, never through a planted name."""
    flags = os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(NAME_TRIES):
        name = PREFIX + secrets.token_hex(8)
        try:
            return os.open(name, flags, 0o600, dir_fd=dfd), name
        except FileExistsError:
            continue
        except OSError as exc:
            raise errors.Failed(f"cannot create a file in {path}: {exc.strerror}") from None
    raise errors.Failed(f"{path}: {NAME_TRIES} random names were all taken")


@contextlib.contextmanager
def scratch(dfd: int, path: str) -> Iterator[tuple[int, str]]:
    """A file with no name: unlinked as soon as it is opened, so that nothing is left
    in the directory however the run ends (SIGKILL included); its space is freed when
    the descriptor closes, at the end of the block or of the process."""
    fd, name = create(dfd, path)
    try:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=dfd)
        yield fd, name
    finally:
        with interrupts.deferred():
            os.close(fd)


def set_direct(fd: int, on: bool) -> bool:
    flags = _fcntl_flags(fd)
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETFL, (flags | os.O_DIRECT) if on else (flags & ~os.O_DIRECT))
    except OSError:
        return False
    return True


def _fcntl_flags(fd: int) -> int:
    import fcntl

    return fcntl.fcntl(fd, fcntl.F_GETFL)


def choose_method(fd: int, block: int, nblocks: int, cold: bool) -> str:
    """O_DIRECT if the file system takes it (the first pattern's write proves it), else
    fsync + drop; the page cache when warm."""
    if not cold:
        return WARM
    if not hasattr(os, "O_DIRECT") or not set_direct(fd, True):
        return DROP
    try:
        _node.io(fd, "sequential write", block, 1)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP, errno.ENOTSUP):
            raise
        set_direct(fd, False)
        return DROP
    return DIRECT


def one_pattern(fd: int, pattern: str, block: int, nblocks: int, method: str,
                seed: int) -> float:
    """MB/s of one pattern over the file."""
    if method == DROP:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    ns, nbytes = _node.io(fd, pattern, block, nblocks, seed,
                          method != WARM and pattern in WRITES)
    return nbytes / (ns / 1e9) / 1e6


def run_file(dfd: int, path: str, size: int, block: int, repeat: int, cold: bool,
             progress: Callable[[str], None], rates: dict[str, list[float]]) -> str:
    """The method used; each pattern's MB/s appended to ``rates`` as measured."""
    nblocks = size // block
    with scratch(dfd, path) as (fd, _name):
        method = choose_method(fd, block, nblocks, cold)
        _node.io(fd, "sequential write", block, nblocks, 0, True)  # laid out, untimed
        for r in range(repeat):
            progress(f"io: {path}, {units.format_size(size)} file, repetition {r + 1}/{repeat}")
            for i, pattern in enumerate(PATTERNS):
                rates[pattern].append(one_pattern(fd, pattern, block, nblocks, method,
                                                  seed=1 + r * 8 + i))
    return method


def check_sizes(block: int, sizes: list[int]) -> None:
    for size in sizes:
        if size < block or size % block:
            raise errors.BadSpec(f"--file-size {units.format_size(size)} is not a whole "
                                 f"number of {units.format_size(block)} blocks",
                                 "give a multiple of --block")


def run(dirs: list[str], sizes: list[int], block: int, repeat: int, cold: bool,
        progress: Callable[[str], None], metrics: list[JsonObject], detail: JsonObject
        ) -> None:
    """Every directory and file size; metrics appended and ``detail`` filled as they are
    measured."""
    check_sizes(block, sizes)
    stored: list[JsonValue] = []  # each directory's entry, as it is filled
    methods: list[JsonObject] = []  # each directory's file size -> method
    detail.update({"block": block, "file_sizes": list(sizes), "cold": cold, "mb": 1e6,
                   "patterns": list(PATTERNS), "dirs": stored})
    opened = []
    try:
        for path in dirs:  # every directory checked before anything is written
            dfd = open_dir(path)
            opened.append(dfd)
            free = check_space(dfd, path, max(sizes))
            methods.append({})
            stored.append({"dir": path, "realpath": os.path.realpath(path),
                           "free_bytes": free, "mount": dict(mount_of(path)),
                           "method": methods[-1]})
        for dfd, path, method_of in zip(opened, dirs, methods, strict=True):
            for size in sizes:
                rates: dict[str, list[float]] = {p: [] for p in PATTERNS}
                method = None
                try:
                    method = run_file(dfd, path, size, block, repeat, cold, progress, rates)
                finally:
                    method_of[str(size)] = method
                    metrics.extend(metric("io", pattern, "MB/s", got, method=method,
                                          params={"dir": path, "file_size": size},
                                          block=block)
                                   for pattern, got in rates.items() if got)
    finally:
        for dfd in opened:
            os.close(dfd)
