"""`beoperf node`: memory bandwidth, floating-point kernels against loop length, DGEMM,
RandomAccess, FFT and disk patterns on this node, or on a fleet (-w)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from beoperf import errors, interrupts, report, safeio, units
from beoperf.cli import ExitStatus, UsageError, check_seconds
from beoperf.cli.progress import PartsProgress, precision_summary
from beoperf.model.document import Document
from beoperf.report import conditions
from beoperf.suites import node as suite
from beoperf.suites import node_fleet

FORMATS = ("text", "markdown", "csv", "json")

EXAMPLES = f"""examples:
  beoperf node                                  # everything, 5 repetitions of each figure
  beoperf node stream --threads 1,2,4,8         # STREAM's scaling with thread count
  beoperf node kernels --lengths 1K,64K,4M --reference medusa
  beoperf node io --dir /scratch --dir /nfs/home --file-size 10M,100M
  beoperf node -o run1.json && beoperf compare run1.json run2.json
  beoperf node -w 'node[01-32]' kernels stream  # every node; outliers by robust z-score

Parts: {', '.join(suite.PARTS)} (default: all).  Every figure is a rate (GB/s = 10^9 B/s,
MFLOP/s, GFLOP/s, GUPS, MB/s = 10^6 B/s) with its repetitions' mean, stdev, min and max;
the document (--json, -o) has the samples and the conditions: CPU, caches, governor,
memory and NUMA, compiler and flags, numpy's BLAS with OPENBLAS_CORETYPE and the thread
variables, the file system and mount options of each --dir.
STREAM: arrays of 4 x the last-level cache unless --array-size (bytes per array);
--threads defaults to 1, 2, 4 ... and all cores.  Kernels (PMAC PEAK: div 1 flop,
daxpy 2, dot 2, degree-5 polynomial 10) at --lengths (1K, 4K, 16K, 64K, 256K, 512K, 1M,
4M elements), at least --repeat trials each, more where the spread is over 2%, within
--kernel-budget seconds per kernel.  I/O: PMAC's six patterns with --block blocks on
each --file-size, cold cache (O_DIRECT where the file system takes it, else fsync +
POSIX_FADV_DONTNEED; --warm-cache for the page cache); files are removed afterwards,
also on Ctrl-C.  Sizes are binary (4K = 4096 B; 10M = 10 MiB).

Exit status: 0 done; {ExitStatus.INTEGRITY:d} a check failed (STREAM validation, a kernel's result,
DGEMM residual, RandomAccess errors, FFT inverse): the figures are kept; 130/143 stopped
(what was measured is printed and saved).  Fleet: {ExitStatus.PARTIAL:d} some nodes did not answer,
{ExitStatus.NO_ANSWER:d} none did.
"""


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("node", help="node suite: STREAM, PEAK kernels, DGEMM, RandomAccess, "
                                    "FFT, I/O patterns",
                       description="Measure this node (or every node of a fleet): memory "
                                   "bandwidth, kernels against loop length, DGEMM, "
                                   "RandomAccess, FFT and file I/O, each repeated and "
                                   "checked.",
                       epilog=EXAMPLES, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("parts", nargs="*", metavar="PART",
                   help=f"parts to run: {', '.join(suite.PARTS)} (default: all)")
    p.add_argument("--repeat", type=int, default=suite.DEFAULT_REPEAT, metavar="N",
                   help="repetitions of every figure (default %(default)s)")
    g = p.add_argument_group("memory and compute")
    g.add_argument("--array-size", metavar="SIZE", help="STREAM bytes per array (e.g. 512M)")
    g.add_argument("--threads", metavar="LIST", help="STREAM thread counts, e.g. 1,2,4")
    g.add_argument("--lengths", metavar="LIST", help="kernel loop lengths, e.g. 1K,64K,4M")
    g.add_argument("--kernel-budget", default="3", metavar="SECONDS",
                   help="time per kernel for the trials past --repeat (default %(default)s)")
    g.add_argument("--dgemm-n", type=int, default=suite.node_compute.DEFAULT_DGEMM_N,
                   metavar="N", help="DGEMM matrix order (default %(default)s)")
    g.add_argument("--table-size", metavar="SIZE",
                   help="RandomAccess table bytes (default 4 x the last-level cache)")
    g.add_argument("--fft-size", metavar="N", help="FFT length, e.g. 1M (default: a vector "
                                                   "the size of the last-level cache)")
    g = p.add_argument_group("I/O")
    g.add_argument("--dir", action="append", metavar="DIR",
                   help="directory to test (repeat to compare mounts; default .)")
    g.add_argument("--block", default="4K", metavar="SIZE", help="block size (default 4K)")
    g.add_argument("--file-size", default="10M,100M", metavar="LIST",
                   help="file sizes (default 10M,100M)")
    g.add_argument("--warm-cache", action="store_true",
                   help="through the page cache (default: cold, O_DIRECT or fsync + drop)")
    g = p.add_argument_group("output")
    g.add_argument("--reference", metavar="NAME",
                   help="show a published system beside the run (medusa, itanium2, power4, "
                        "xc4000, altix3700, p575)")
    g.add_argument("--json", action="store_true", help="print the JSON document")
    g.add_argument("--format", choices=FORMATS, default="text",
                   help="what to print (default text)")
    g.add_argument("-o", "--output", metavar="FILE", help="also write the JSON document here")
    g.add_argument("--no-progress", action="store_true", help="no progress display")
    g = p.add_argument_group("fleet (the suite on many nodes with ClusterShell)")
    g.add_argument("-w", "--nodes", metavar="NODESET", help="run on these nodes, e.g. "
                                                             "'node[01-32]'")
    g.add_argument("--exec-template", metavar="TEMPLATE",
                   help="a local command per node instead of ssh, with %%h (e.g. "
                        "'ip netns exec %%h')")
    g.add_argument("--fanout", type=int, default=node_fleet.remote.DEFAULT_FANOUT, metavar="N",
                   help="at most N nodes at a time (default %(default)s)")
    g.add_argument("--remote-command", default=node_fleet.DEFAULT_REMOTE, metavar="CMD",
                   help="how to start beoperf on a node (default '%(default)s')")
    g.add_argument("--timeout", type=float, default=node_fleet.DEFAULT_TIMEOUT_S,
                   metavar="SECONDS", help="per-node time limit (default %(default)s)")
    g.add_argument("--threshold", type=float, default=node_fleet.analysis.THRESHOLD,
                   metavar="Z", help="outlier beyond this robust z-score (default %(default)s)")
    p.set_defaults(func=run)


def _sizes(name: str, text: str | None) -> tuple[int, ...] | None:
    if text is None:
        return None
    try:
        return suite.parse_list(text, units.parse_size, name)
    except ValueError as exc:
        raise UsageError(f"{name}: {exc}") from None


def _size(name: str, text: str | None) -> int | None:
    got = _sizes(name, text)
    if got is not None and len(got) != 1:
        raise UsageError(f"{name}: give one size")
    return got[0] if got else None


def spec_of(args: argparse.Namespace) -> suite.Spec:
    try:
        budget = units.parse_time(args.kernel_budget)
    except ValueError as exc:
        raise UsageError(f"--kernel-budget: {exc}") from None
    return suite.Spec(
        parts=tuple(args.parts) or suite.PARTS, repeat=args.repeat,
        array_size=_size("--array-size", args.array_size),
        threads=_sizes("--threads", args.threads),
        lengths=_sizes("--lengths", args.lengths) or suite.node_kernels.DEFAULT_LENGTHS,
        kernel_budget=budget, dgemm_n=args.dgemm_n,
        table_size=_size("--table-size", args.table_size),
        fft_size=_size("--fft-size", args.fft_size), dirs=tuple(args.dir or (".",)),
        block=_size("--block", args.block) or suite.DEFAULT_BLOCK,
        file_sizes=_sizes("--file-size", args.file_size) or suite.DEFAULT_FILE_SIZES,
        cold=not args.warm_cache, reference=args.reference, command_line=tuple(args.argv))


FLEET_ONLY = {"-w", "--nodes", "--exec-template", "--fanout", "--remote-command", "--timeout",
              "--threshold", "-o", "--output", "--format"}
NO_VALUE = {"--json", "--no-progress"}


def node_args(argv: list[str]) -> tuple[str, ...]:
    """The command line each node runs: this one without the fleet and output options."""
    out, words, i = [], argv[2:], 0
    while i < len(words):
        word = words[i]
        name = word.split("=", 1)[0]
        if name in FLEET_ONLY:
            i += 1 if "=" in word else 2
            continue
        if name not in NO_VALUE:
            out.append(word)
        i += 1
    return tuple(out)


def save(path: str | None, doc: Document) -> None:
    if not path:
        return
    try:
        with interrupts.deferred():
            doc.save(Path(path))
    except OSError as exc:
        fallback = safeio.private_dir() / "node.json"
        doc.save(fallback)
        raise errors.OutputError(f"cannot write {path}: {exc.strerror}",
                                 f"the result was saved to {fallback}") from None


def show(doc: Document, fmt: str, stream: Any = None) -> None:
    (stream or sys.stdout).write(doc.dumps() if fmt == "json" else report.render(doc, fmt))


def run_fleet(args: argparse.Namespace, fmt: str) -> int:
    check_seconds("--timeout", args.timeout)
    spec = node_fleet.Spec(nodes=args.nodes, args=node_args(args.argv),
                           exec_template=args.exec_template, fanout=args.fanout,
                           timeout=args.timeout, remote_command=args.remote_command,
                           threshold=args.threshold, command_line=tuple(args.argv))
    doc = node_fleet.run(spec)
    save(args.output, doc)
    show(doc, "json" if fmt == "json" else "text")
    answered, asked = node_fleet.answer_counts(doc.body)
    if answered == asked:
        return ExitStatus.OK
    return ExitStatus.PARTIAL if answered else ExitStatus.NO_ANSWER


def run(args: argparse.Namespace) -> int:
    fmt = "json" if args.json else args.format
    if args.nodes:
        return run_fleet(args, fmt)
    spec = spec_of(args)
    with PartsProgress(spec.parts, sys.stderr.isatty() and not args.no_progress,
                       lines=not args.no_progress) as progress:
        measured = suite.run(spec, progress)
    save(args.output, measured.document)
    missed = precision_summary(measured.document.body.get("metrics") or [],
                               suite.node_kernels.PRECISION)
    if missed:  # after the result is saved, on stderr
        print(missed, file=sys.stderr, flush=True)
    for warning in conditions.warnings_of(measured.document.meta):
        print(f"beoperf: WARN: {warning}", file=sys.stderr)
    if measured.interrupt is not None:  # what was measured, on stderr; then 130/143
        show(measured.document, "text", sys.stderr)
        if fmt == "json":
            show(measured.document, "json")
        return interrupts.exit_status(measured.interrupt)
    show(measured.document, fmt)
    return ExitStatus.INTEGRITY if measured.failed else ExitStatus.OK
