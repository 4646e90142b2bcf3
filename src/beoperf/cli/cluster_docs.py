"""`beoperf cluster import | show | plot | references`: HPCC results already on disk."""

from __future__ import annotations

import argparse
import functools
import sys
from pathlib import Path

from beoperf import errors, model, report, safeio
from beoperf.cli import ExitStatus, UsageError
from beoperf.cli.cluster import add_output_options, add_reference_options
from beoperf.model.cluster import ScalingStudy
from beoperf.model.document import Document, DocumentError
from beoperf.suites import cluster_compare, cluster_import, cluster_refs

FORMATS = ("text", "markdown", "csv", "json")

IMPORT_EXAMPLES = """examples:
  beoperf cluster import old/np*/hpccoutf.txt -o runs/2019 --reference Medusa
  beoperf cluster import hpccoutf.txt --format markdown

Each run in each file (HPCC appends runs to hpccoutf.txt) becomes a cluster document
(LABEL.json) and all of them a scaling document (scaling.json), grouped by process
count; HPCC 1.4 and 1.5 output is read. A run counts only with Success=1 and HPL's
residual check passed."""


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("import", help="read hpccoutf.txt files into documents",
                       description="Read existing HPCC output (1.4, 1.5) into cluster "
                                   "documents and one scaling document.",
                       epilog=IMPORT_EXAMPLES,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+", metavar="HPCCOUTF", help="HPCC output files")
    p.add_argument("-o", "--output", metavar="DIR", help="write the documents here")
    p.add_argument("--label", help="the study's name (default: DIR's name)")
    p.add_argument("--plots", action="store_true", help="also draw DIR/plots/*.png")
    add_reference_options(p)
    add_output_options(p, FORMATS)
    p.set_defaults(func=run_import)

    p = sub.add_parser("show", help="print a cluster or scaling document",
                       description="Print a cluster or scaling document, optionally with "
                                   "reference systems beside it.")
    p.add_argument("file", metavar="FILE", help="a cluster or scaling document (JSON)")
    add_reference_options(p)
    add_output_options(p, FORMATS)
    p.set_defaults(func=run_show)

    p = sub.add_parser("plot", help="draw each metric against the process count",
                       description="Draw a scaling document: each performance metric "
                                   "against the process count, with its spread, ideal "
                                   "scaling and the reference systems as points.")
    p.add_argument("file", metavar="SCALING", help="a scaling document (scaling.json)")
    p.add_argument("-o", "--output", metavar="DIR", required=True,
                   help="directory for the PNG files")
    p.add_argument("--metrics", metavar="LIST",
                   help="only these (HPCC keys or short names: HPL,PTRANS,MPIFFT); default: "
                        "every performance metric the study has")
    add_reference_options(p)
    p.set_defaults(func=run_plot)

    p = sub.add_parser("references", help="list the built-in reference systems",
                       description="List the reference systems --reference can name.")
    p.set_defaults(func=run_references)


SHOWN = ("cluster show and plot read beoperf cluster and scaling documents (JSON, as "
         "cluster hpcc and cluster import write them)")


def load_study(path: str) -> Document:
    """A cluster or scaling document; InputError for anything else."""
    try:
        doc = model.load(path)
    except DocumentError as exc:
        if cluster_compare.is_hpcc(path):
            raise errors.InputError(f"{path}: HPC Challenge output, not a document: import "
                                    "it first (beoperf cluster import FILE -o DIR)") from None
        raise errors.InputError(f"{exc}; {SHOWN}") from None
    if doc.kind not in ("cluster", "scaling"):
        raise errors.InputError(f"{path}: a {doc.kind} document, not a cluster or scaling "
                                f"one; {SHOWN}")
    return doc


def with_references(doc: Document, names: list[str], files: list[str]) -> Document:
    """The document with these reference systems beside it (a scaling document; a run is
    shown as a study of one run)."""
    if not names and not files:
        return doc
    from beoperf.analysis.scaling import reference_points

    systems = cluster_refs.systems_for(tuple(names), tuple(files))
    if doc.kind == "cluster":
        from beoperf.analysis.scaling import RunRef, scaling_body

        body = scaling_body([RunRef(doc.body)], doc.body["label"], systems)
        return Document("scaling", body, doc.meta)
    study = ScalingStudy.from_document(doc)
    named = {s.name for s in systems}  # a system named again replaces what was stored
    study.references = [*(r for r in study.references if r.name not in named),
                        *reference_points(systems)]
    return study.to_document(doc.meta)


def print_doc(doc: Document, fmt: str, all_keys: bool) -> None:
    sys.stdout.write(report.for_terminal(report.render(doc, fmt, all_keys=all_keys)))


def metrics_of(text: str | None) -> list[str] | None:
    """--metrics 'HPL,MPIFFT' as performance keys (None: all)."""
    if text is None:
        return None
    from beoperf.model import hpcc

    keys = []
    for name in (n.strip() for n in text.split(",") if n.strip()):
        key = hpcc.key_of(name)
        if key is None or hpcc.info(key).role not in hpcc.PERFORMANCE:
            raise UsageError(f"--metrics: {name!r} is not a performance metric of HPCC",
                             "e.g. HPL,PTRANS,MPIFFT,StarSTREAM_Triad")
        keys.append(key)
    return keys


def write_plots(doc: Document, directory: Path, only: list[str] | None = None) -> list[Path]:
    """One PNG per metric (``only`` these, when given), written through safeio."""
    from beoperf.report import scaling_plots  # matplotlib only when plots are drawn

    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise errors.OutputError(f"{directory}: {exc.strerror or exc}") from None
    written = []
    for key in scaling_plots.keys(doc):
        if only is not None and key not in only:
            continue
        fig = scaling_plots.figure(doc, key)
        path = directory / scaling_plots.file_name(key)
        safeio.write_via(path, functools.partial(fig.savefig, format="png"))
        written.append(path)
    return written


def run_import(args: argparse.Namespace) -> int:
    if args.plots and not args.output:
        raise UsageError("--plots needs -o DIR")
    spec = cluster_import.Spec(files=tuple(args.files), output=args.output, label=args.label,
                               references=tuple(args.reference),
                               reference_files=tuple(args.reference_file),
                               command_line=tuple(args.argv))
    doc = cluster_import.run(spec)
    if args.plots:
        write_plots(doc, Path(args.output) / "plots")
    print_doc(doc, args.format, args.all_keys)
    _none_passed(doc)
    return ExitStatus.OK


def _none_passed(doc: Document) -> None:
    """Failed (exit 1) when no imported run passed: nothing in the study is a figure to
    use (the documents are written and printed all the same)."""
    runs = doc.body["runs"]
    if runs and not any(r["status"] == "ok" for r in runs):
        why = "; ".join(dict.fromkeys(f for r in runs for f in r["failures"]))
        raise errors.Failed(f"none of the {len(runs)} imported run(s) passed ({why})")


def run_show(args: argparse.Namespace) -> int:
    doc = with_references(load_study(args.file), args.reference, args.reference_file)
    print_doc(doc, args.format, args.all_keys)
    return ExitStatus.OK


def run_plot(args: argparse.Namespace) -> int:
    doc = load_study(args.file)
    if doc.kind != "scaling":
        raise errors.InputError(f"{args.file}: a cluster document; plot a scaling document "
                                "(scaling.json)")
    only = metrics_of(args.metrics)
    doc = with_references(doc, args.reference, args.reference_file)
    written = write_plots(doc, Path(args.output), only)
    print(f"{len(written)} figures in {args.output}", file=sys.stderr)
    return ExitStatus.OK


def run_references(_args: argparse.Namespace) -> int:
    for name, description, counts, source in cluster_refs.describe():
        procs = ", ".join(str(c) for c in counts if c is not None)
        print(f"{name:<12} {description} [processes: {procs}] ({source})")
    return ExitStatus.OK


# --------------------------------------------------------------------------- compare

COMPARE_FORMATS = {"table": "text", "markdown": "markdown", "csv": "csv", "json": "json"}


def any_hpcc(files: list[str]) -> bool:
    """Whether `beoperf compare` was given HPCC results (then all must be)."""
    return any(cluster_compare.is_hpcc(f) for f in files)


def run_hpcc_compare(args: argparse.Namespace) -> int:
    """`beoperf compare` of HPCC results and reference systems."""
    if args.format not in COMPARE_FORMATS:
        raise UsageError(f"--format {args.format}: HPCC results render as "
                         f"{', '.join(COMPARE_FORMATS)}")
    if args.baseline is not None:
        raise UsageError("--baseline: with HPCC results the first FILE is the baseline")
    spec = cluster_compare.Spec(files=tuple(args.files),
                                labels=tuple(args.label) if args.label is not None else None,
                                references=tuple(args.reference),
                                reference_files=tuple(args.reference_file),
                                command_line=tuple(args.argv))
    doc = cluster_compare.run(spec)
    sys.stdout.write(report.for_terminal(report.render(doc, COMPARE_FORMATS[args.format])))
    return ExitStatus.OK
