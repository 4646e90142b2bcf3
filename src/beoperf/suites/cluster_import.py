"""`beoperf cluster import`: existing ``hpccoutf.txt`` files (HPCC 1.4 and 1.5) as the
same documents a measured study writes, so that old and published runs compare with new
ones.

Each run in each file (HPCC appends: a file may hold several) becomes a cluster document
(source "import": no launch record, no input file; the file's path, SHA-256 and the
run's place in it instead), and all of them one scaling document, series "import",
grouped by process count (CommWorldProcs).  With ``output`` the documents are written
there (``LABEL.json`` and ``scaling.json``); the scaling document is returned either way.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from beoperf import errors, interrupts, safeio
from beoperf.analysis import scaling
from beoperf.model import cluster, document, hpcc
from beoperf.model.document import Document, DocumentError, JsonObject, make_meta
from beoperf.suites.cluster_refs import systems_for

MAX_FILES = 10000
SERIES = "import"


@dataclass(frozen=True)
class Spec:
    files: tuple[str, ...]
    output: str | None = None
    label: str | None = None
    references: tuple[str, ...] = ()
    reference_files: tuple[str, ...] = ()
    command_line: tuple[str, ...] = ()


READS = ("cluster import reads HPC Challenge 1.4-1.5 output (hpccoutf.txt), compare and "
         "cluster show also beoperf cluster and scaling documents; NetPIPE, IMB and OSU "
         "files and beoperf ping-pong results go to compare, plot and predict")


def not_hpcc(text: str) -> str:
    """Why a file without a summary section is not read, and what is: HPCC output that
    ended before its summary, a beoperf document of another use, or another format."""
    if hpcc.RUN_HEADER in text:
        return (f"HPCC output without a summary section (\"{hpcc.BEGIN}\"): the run ended "
                "before it, nothing to import")
    kind = _document_kind(text)
    if kind:
        return f"a beoperf {kind} document, not HPCC output; {READS}"
    return f"not HPCC output (no \"{hpcc.BEGIN}\" line); {READS}"


def _document_kind(text: str) -> str | None:
    """The kind of a beoperf document's text (None: not one)."""
    if not text.lstrip().startswith("{"):
        return None
    try:
        found = document.from_json(json.loads(text))
    except (ValueError, DocumentError, RecursionError):
        return None
    return found.kind


def read_runs(path: str) -> tuple[list[hpcc.HpccRun], bytes]:
    """The runs of one HPCC output file, read bounded; InputError naming the file (and,
    for a file of another format, the formats read)."""
    try:
        data = safeio.read_bytes(path, safeio.LIMITS["result"], "HPCC output")
        text = data.decode("utf-8", errors="replace")
        if not hpcc.looks_like_hpcc(text):
            raise errors.InputError(f"{path}: {not_hpcc(text)}")
        return hpcc.parse_runs(text, path), data
    except (safeio.FileInputError, hpcc.HpccFormatError) as exc:
        raise errors.InputError(str(exc)) from None


def _labels(path: str, count: int, taken: set[str]) -> list[str]:
    stem = Path(path).stem if Path(path).name != "hpccoutf.txt" else \
        (Path(path).parent.name or "hpccoutf")
    base = [stem] if count == 1 else [f"{stem}-run{i}" for i in range(1, count + 1)]
    out = []
    for name in base:
        unique, k = name, 2
        while unique in taken:
            unique, k = f"{name}-{k}", k + 1
        taken.add(unique)
        out.append(unique)
    return out


def import_file(path: str, taken: set[str]) -> list[JsonObject]:
    """One cluster body per run in the file."""
    runs, data = read_runs(path)
    digest = cluster.sha256(data)
    bodies = []
    for i, (run, label) in enumerate(zip(runs, _labels(path, len(runs), taken), strict=True),
                                     1):
        output = cluster.Output(str(Path(path).resolve()), digest, run_in_file=i,
                                runs_in_file=len(runs))
        bodies.append(cluster.cluster_body(run, label=label, output=output, source="import",
                                           series=SERIES))
    return bodies


def run(spec: Spec) -> Document:
    if not spec.files:
        raise errors.BadSpec("name at least one hpccoutf.txt")
    if len(spec.files) > MAX_FILES:
        raise errors.BadSpec(f"over {MAX_FILES} files")
    systems = systems_for(spec.references, spec.reference_files)
    taken: set[str] = set()
    bodies = [b for path in spec.files for b in import_file(path, taken)]
    meta = make_meta(list(spec.command_line), imported=list(spec.files))
    refs = []
    root = Path(spec.output) if spec.output else None
    with interrupts.deferred():
        if root is not None:
            try:
                root.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise errors.OutputError(f"-o {spec.output}: {exc.strerror or exc}") from None
        for body in bodies:
            name = f"{body['label']}.json"
            if root is not None:
                Document(cluster.CLUSTER_KIND, body, dict(meta)).save(root / name)
            refs.append(scaling.RunRef(body, name if root is not None else None))
        label = spec.label or (root.name if root is not None else "import")
        doc = Document(cluster.SCALING_KIND, scaling.scaling_body(refs, label, systems), meta)
        if root is not None:
            doc.save(root / "scaling.json")
    return doc
