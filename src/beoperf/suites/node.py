"""`beoperf node`: the node suite, or the parts named, as one "node" document.

Parts, in this order: ``stream`` (memory bandwidth against thread count), ``kernels``
(PEAK's four loops against loop length), ``dgemm``, ``randomaccess``, ``fft`` and ``io``
(PMAC's six patterns in each directory).  Each part's module says what it measures and
how it is checked.  Every figure is a metric with its samples (``repeat`` repetitions,
more for kernels that need them to reach their precision) and their mean, stdev, min and
max; the conditions (CPU, caches, memory, NUMA, governor, compiler and flags, BLAS and
its variables; each I/O directory's mount) are in the document.

Stopping: Ctrl-C or SIGTERM ends the part running; every figure measured before stays in
the document (status "interrupted"), I/O files are removed.  A failed check (STREAM
validation, a kernel's result, a DGEMM residual, RandomAccess errors, the FFT's inverse)
keeps its figures, marked ``ok: false``, and the status is "failed".
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from beoperf import errors, interrupts, units
from beoperf.model import node as node_doc
from beoperf.model import node_reference
from beoperf.model.document import Document, JsonObject, make_meta, utc_now
from beoperf.suites import node_compute, node_io, node_stream
from beoperf.sweep import node_kernels
from beoperf.sysinfo import around
from beoperf.sysinfo import node as node_conditions

PARTS = node_doc.PARTS
DEFAULT_REPEAT = 5
DEFAULT_BLOCK = 4096
DEFAULT_FILE_SIZES = (10 << 20, 100 << 20)
MAX_REPEAT = 1000
MAX_LENGTH = 1 << 28

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Spec:
    """What to run.  Sizes in bytes (``array_size`` and ``table_size`` per array/table),
    ``threads`` STREAM's thread counts (None: 1, 2, 4 ... and all cores), ``lengths`` the
    kernels' loop lengths, ``dirs`` the I/O directories, ``cold`` bypassing the page
    cache."""

    parts: tuple[str, ...] = PARTS
    repeat: int = DEFAULT_REPEAT
    array_size: int | None = None
    threads: tuple[int, ...] | None = None
    lengths: tuple[int, ...] = node_kernels.DEFAULT_LENGTHS
    kernel_budget: float = node_kernels.DEFAULT_BUDGET_S
    dgemm_n: int = node_compute.DEFAULT_DGEMM_N
    table_size: int | None = None
    fft_size: int | None = None
    dirs: tuple[str, ...] = (".",)
    block: int = DEFAULT_BLOCK
    file_sizes: tuple[int, ...] = DEFAULT_FILE_SIZES
    cold: bool = True
    reference: str | None = None
    command_line: tuple[str, ...] = field(default=())


@dataclass
class Measured:
    """The document, and the interruption that ended the run early (None: it did not)."""

    document: Document
    interrupt: KeyboardInterrupt | None = None

    @property
    def failed(self) -> bool:
        return self.document.body["status"] == "failed"


def default_threads(cores: int) -> list[int]:
    """1, 2, 4 ... below the core count, and the core count."""
    out, t = [], 1
    while t < cores:
        out.append(t)
        t *= 2
    return [*out, cores]


def check(spec: Spec) -> None:
    """BadSpec for values the suite cannot take (before anything runs)."""
    unknown = [p for p in spec.parts if p not in PARTS]
    if unknown or not spec.parts:
        raise errors.BadSpec(f"unknown part {unknown[0]!r}" if unknown else "no part named",
                             f"name some of: {', '.join(PARTS)}")
    cores = os.cpu_count() or 1
    problems = [
        (not 1 <= spec.repeat <= MAX_REPEAT, f"--repeat {spec.repeat}: give 1 to {MAX_REPEAT}"),
        (spec.threads is not None and not all(1 <= t <= 64 * cores for t in spec.threads),
         f"--threads: give counts from 1 to {64 * cores}"),
        (not spec.lengths or not all(1 <= n <= MAX_LENGTH for n in spec.lengths),
         f"--lengths: give loop lengths from 1 to {MAX_LENGTH:,}"),
        (not 2 <= spec.dgemm_n <= 100_000, f"--dgemm-n {spec.dgemm_n}: give 2 to 100,000"),
        (spec.fft_size is not None and not 2 <= spec.fft_size <= 1 << 34,
         f"--fft-size {spec.fft_size}: give 2 to 2^34"),
        (spec.array_size is not None and spec.array_size < 8,
         "--array-size: at least one 8-byte element"),
        (spec.table_size is not None and not 2048 <= spec.table_size <= 8 << 40,
         "--table-size: give 2K to 8T (a power of two of 8-byte words)"),
        (not 1 <= spec.block <= 1 << 30, f"--block {spec.block}: give 1 B to 1 GiB"),
    ]
    for bad, message in problems:
        if bad:
            raise errors.BadSpec(message)
    if spec.reference is not None and node_reference.find(spec.reference) is None:
        raise errors.BadSpec(f"--reference {spec.reference}: no such published system",
                             f"choose one of {', '.join(node_reference.names())}")


def _part(name: str, spec: Spec, facts: node_conditions.Facts, conditions: JsonObject,
          progress: Progress, metrics: list[JsonObject], detail: JsonObject) -> None:
    cores, llc = facts["cores_used"], facts["llc_total"]
    if name == "stream":
        elements = spec.array_size // 8 if spec.array_size else None
        node_stream.run(elements, list(spec.threads or default_threads(cores)), spec.repeat,
                        conditions, progress, metrics, detail)
    elif name == "kernels":
        node_kernels.run(list(spec.lengths), spec.repeat, spec.kernel_budget, conditions,
                         progress, metrics, detail)
    elif name == "dgemm":
        node_compute.dgemm(spec.dgemm_n, spec.repeat, cores, progress, metrics, detail)
    elif name == "randomaccess":
        node_compute.randomaccess(spec.table_size or node_compute.default_table(llc),
                                  spec.repeat, cores, progress, metrics, detail)
    elif name == "fft":
        node_compute.fft(spec.fft_size or node_compute.default_fft(llc), spec.repeat,
                         progress, metrics, detail)
    else:
        node_io.run(list(spec.dirs), list(spec.file_sizes), spec.block, spec.repeat,
                    spec.cold, progress, metrics, detail)


def run(spec: Spec, progress: Progress | None = None) -> Measured:
    """Run the parts; the document holds every figure measured, whatever stopped it."""
    check(spec)
    say = progress or (lambda _text: None)
    started, t0 = utc_now(), time.monotonic()
    facts = node_conditions.collect()
    conditions = node_doc.conditions_of(facts)
    watch = around.Watch(network=False).start()
    metrics: list[JsonObject] = []  # as each part stores them
    parts: dict[str, JsonObject] = {}
    interrupt: KeyboardInterrupt | None = None
    status, reason = "complete", None
    ordered = [p for p in PARTS if p in spec.parts]
    try:
        for name in ordered:
            detail = parts.setdefault(name, {})
            begun = time.monotonic()
            try:
                _part(name, spec, facts, conditions, say, metrics, detail)
            except errors.IntegrityError as exc:
                status, reason = "failed", str(exc)
            detail["elapsed_s"] = time.monotonic() - begun
    except KeyboardInterrupt as exc:
        interrupt, status, reason = exc, "interrupted", interrupts.reason(exc)
    measured = [node_doc.Metric.from_dict(m) for m in metrics]
    bad = next((m.id for m in measured if m.ok is False), None)
    if status == "complete" and bad is not None:
        status, reason = "failed", f"a check failed: {bad}"
    conditions["elapsed_s"] = time.monotonic() - t0
    ref = node_reference.load(spec.reference).to_json() if spec.reference else None
    node_run = node_doc.NodeRun(conditions, spec.repeat, parts, measured, status, reason, ref)
    meta = make_meta(list(spec.command_line), utc_start=started, utc_end=utc_now(),
                     conditions=watch.stop()[0])
    return Measured(node_run.to_document(meta), interrupt)


def parse_list(text: str, parse: Callable[[str], int], what: str) -> tuple[int, ...]:
    """'1,2,4' -> (1, 2, 4) with ``parse`` for each; ValueError naming ``what``."""
    items = [w for w in text.replace(" ", "").split(",") if w]
    if not items:
        raise ValueError(f"{what}: give a comma-separated list")
    return tuple(parse(w) for w in items)


def parse_count(text: str) -> int:
    """A plain count, or a size-like count with K/M (binary: 4M = 4,194,304)."""
    return units.parse_size(text)
