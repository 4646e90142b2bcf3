"""An application's point-to-point messages (`beoperf predict --profile`, `beoperf replay`).

A profile is a list of message classes: ``size`` bytes, ``count`` messages, how they are
sent (``pattern``) and how many pairs send at once (``concurrency``):

* ``pingpong`` (default): each message waits for the one before (blocking send and
  receive between two ranks, a request and its answer, a halo exchanged in turn);
* ``stream``: ``count`` messages one way, back to back (non-blocking sends of one
  rank to another, a pipeline);
* ``bidir``: both ends send at once (MPI_Sendrecv, an exchange);
* ``concurrency`` c > 1: c pairs of ranks do this at the same time over the same link.

Read from (``read_profile``, the format sniffed from the content or named):

* ``csv``: a header naming ``size`` and ``count`` (and optionally ``pattern`` and
  ``concurrency``) in any order, or no header and the columns in that order; sizes in
  beoperf's grammar (``64K``); ``#`` starts a comment;
* ``imb`` / ``osu``: an Intel MPI Benchmarks PingPong or an OSU osu_latency / osu_bw
  output (through ``model.importers``), as the messages that benchmark itself sent: a
  sanity case, whose time the benchmark also measured.  IMB records its repetitions (a
  round trip each: 2 messages); OSU files do not, so OSU's default loop counts are
  assumed (osu_latency: 10,000 iterations up to 8 KiB, 1,000 above; osu_bw: 100 / 20
  iterations of a 64-message window) and a note says so.  The other IMB and OSU tests
  (PingPing, Sendrecv, Exchange, osu_bibw, osu_mbw_mr) are refused: their messages
  cross or overlap, and their loops are not these;
* ``mpip``: an mpiP report: the point-to-point send call sites of its "Callsite Message
  Sent statistics" (the all-ranks line of each site: count and mean size), or when that
  section is absent its "Aggregate Sent Message Size" table (the top twenty sites only).
  Each site becomes one class at its mean size (a site that sent different sizes is
  noted); collectives are left out with a note (their cost is not a point-to-point
  message's); the pattern is assumed ``pingpong`` (mpiP does not say whether sends
  overlapped).

Score-P profiles (CUBE4 ``.cubex``, a zip of XML and binary metric data) are not read:
export the message-size histogram to CSV first.

Every file is read bounded (``LIMIT``) through safeio; a bad line is a ProfileError naming
the file and the line.
"""

from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path

from beoperf import safeio, units
from beoperf.model import narrow
from beoperf.model.document import JsonObject

PATTERNS = ("pingpong", "stream", "bidir")
FORMATS = ("csv", "imb", "osu", "mpip")
LIMIT = 16 * safeio.MiB
MAX_ENTRIES = 100_000
MAX_COUNT = 10**15
MAX_CONCURRENCY = 4096

# OSU micro-benchmarks' default loop counts (c/util/osu_util.h): messages above
# LARGE_MESSAGE_SIZE use the "large" counts.
OSU_LARGE_MESSAGE = 8192
OSU_LAT_LOOP = (10_000, 1_000)
OSU_BW_LOOP = (100, 20)
OSU_BW_WINDOW = 64

# mpiP's names of the calls that send point to point (without "MPI_").
MPIP_SENDS = {"Send", "Isend", "Ssend", "Issend", "Bsend", "Ibsend", "Rsend", "Irsend",
              "Sendrecv", "Sendrecv_replace", "Send_init", "Ssend_init", "Bsend_init",
              "Rsend_init", "Start", "Startall"}


class ProfileError(ValueError):
    """A profile that cannot be read; the message names the file and the line."""


@dataclass
class Entry:
    size: int
    count: int
    pattern: str = "pingpong"
    concurrency: int = 1
    label: str | None = None  # where it came from (an mpiP call site, ...)


@dataclass
class Profile:
    source: str
    format: str
    entries: list[Entry] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> JsonObject:
        return {"source": self.source, "format": self.format,
                "entries": [asdict(e) for e in self.entries], "notes": list(self.notes)}

    @classmethod
    def from_dict(cls, d: JsonObject) -> Profile:
        """A profile as a document stores it, every value narrowed (DocumentError)."""
        return cls(narrow.text_at(d, "source"), narrow.text_at(d, "format"),
                   [_entry_of(e) for e in narrow.objects_or_empty(d, "entries")],
                   narrow.texts_or_empty(d, "notes"))

    def messages(self) -> int:
        return sum(e.count for e in self.entries)

    def bytes(self) -> int:
        return sum(e.count * e.size for e in self.entries)


def _entry_of(o: JsonObject) -> Entry:
    return Entry(narrow.integer_at(o, "size"), narrow.integer_at(o, "count"),
                 narrow.text_at(o, "pattern"), narrow.integer_at(o, "concurrency"),
                 narrow.opt_text_at(o, "label"))


def check_entry(e: Entry, where: str) -> Entry:
    """ProfileError unless the entry is usable."""
    if not 1 <= e.size <= units.MAX_SIZE:
        raise ProfileError(f"{where}: size {e.size}: give at least 1 byte")
    if not 1 <= e.count <= MAX_COUNT:
        raise ProfileError(f"{where}: count {e.count}: give a whole number from 1 to "
                           f"{MAX_COUNT:.0e}")
    if e.pattern not in PATTERNS:
        raise ProfileError(f"{where}: pattern {e.pattern!r}: choose {', '.join(PATTERNS)}")
    if not 1 <= e.concurrency <= MAX_CONCURRENCY:
        raise ProfileError(f"{where}: concurrency {e.concurrency}: give 1 to "
                           f"{MAX_CONCURRENCY}")
    return e


# --------------------------------------------------------------------------- CSV

COLUMNS = ("size", "count", "pattern", "concurrency")


def parse_csv(text: str, source: str) -> Profile:
    """A ``size,count[,pattern[,concurrency]]`` table (see the module docstring)."""
    rows = [(n, line.split("#", 1)[0].strip()) for n, line in enumerate(text.splitlines(), 1)]
    rows = [(n, line) for n, line in rows if line]
    if not rows:
        raise ProfileError(f"{source}: no messages (an empty profile)")
    columns = list(COLUMNS)
    first = [c.strip().lower() for c in rows[0][1].split(",")]
    if not re.match(r"\d", first[0]):  # a header
        unknown = [c for c in first if c not in COLUMNS]
        if unknown or "size" not in first or "count" not in first:
            raise ProfileError(f"{source}: line {rows[0][0]}: header {rows[0][1]!r}: name "
                               f"the columns size and count (and optionally pattern, "
                               f"concurrency)")
        columns, rows = first, rows[1:]
    if len(rows) > MAX_ENTRIES:
        raise ProfileError(f"{source}: {len(rows):,} lines, more than {MAX_ENTRIES:,}")
    profile = Profile(source, "csv")
    for n, line in rows:
        profile.entries.append(_csv_entry(line, columns, f"{source}: line {n}"))
    if not profile.entries:
        raise ProfileError(f"{source}: no messages (a header only)")
    return profile


def _csv_entry(line: str, columns: list[str], where: str) -> Entry:
    cells = [c.strip() for c in line.split(",")]
    if len(cells) > len(columns) or len(cells) < 2:
        raise ProfileError(f"{where}: {line!r}: expected {','.join(columns)}")
    values = dict(zip(columns, cells, strict=False))
    try:
        size = units.parse_size(values["size"])
        count = _whole(values["count"])
        concurrency = _whole(values.get("concurrency") or "1")
    except ValueError as exc:
        raise ProfileError(f"{where}: {exc}") from None
    pattern = (values.get("pattern") or "pingpong").lower()
    return check_entry(Entry(size, count, pattern, concurrency), where)


def _whole(text: str) -> int:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None
    if not math.isfinite(value) or value != int(value):
        raise ValueError(f"{text!r} is not a whole number")
    return int(value)


# --------------------------------------------------------------------------- IMB, OSU


# the benchmarks whose messages a profile can be made of (their loops are known)
BENCHMARK_PROFILES = ("imb-pingpong", "osu-latency", "osu-bw")
OTHER_BENCHMARKS = {
    "imb-pingping": "IMB PingPing (both ends send at once)",
    "imb-sendrecv": "IMB Sendrecv (a periodic chain, a message out and one in)",
    "imb-exchange": "IMB Exchange (two messages out and two in a sample)",
    "osu-bibw": "osu_bibw (windows of messages both ways at once)",
    "osu-mbw-mr": "osu_mbw_mr (windows of several pairs at once)",
}


def from_benchmark(path: str) -> Profile:
    """The messages an IMB PingPong or OSU osu_latency / osu_bw run sent."""
    from beoperf.model.importers import load_any

    try:
        run = load_any(Path(path))
    except ValueError as exc:  # ResultFormatError
        raise ProfileError(str(exc)) from None
    fmt = str((run.source or {}).get("format", ""))
    if not fmt.startswith(("imb", "osu")):
        raise ProfileError(f"{path}: a {fmt or 'beoperf'} result, not an IMB or OSU run "
                           "(give --profile-format csv for a message list)")
    if fmt not in BENCHMARK_PROFILES:
        what = OTHER_BENCHMARKS.get(fmt, fmt)
        raise ProfileError(f"{path}: {what}, not a profile: a benchmark profile is IMB "
                           "PingPong, osu_latency or osu_bw output (whose loops are known)")
    profile = Profile(path, "imb" if fmt.startswith("imb") else "osu")
    stream = run.parameters.get("mode") == "stream"
    assumed = False
    for s in run.sizes:
        if s.reps:
            count = 2 * s.reps if not stream else s.reps
        else:
            assumed = True
            large = s.size > OSU_LARGE_MESSAGE
            count = (OSU_BW_LOOP[large] * OSU_BW_WINDOW if stream
                     else 2 * OSU_LAT_LOOP[large])
        profile.entries.append(check_entry(
            Entry(s.size, count, "stream" if stream else "pingpong"), path))
    profile.notes.append(f"the messages of the {fmt} run itself ("
                         + ("osu_bw windows: one way, back to back" if stream else
                            "one round trip per repetition: 2 messages") + ")")
    profile.notes += [f"{path}: {w}" for w in run.warnings]  # what the importer said
    if assumed:
        profile.notes.append("the file does not record its loop counts: OSU's defaults are "
                             "assumed (-i/-x not given)")
    return profile


# --------------------------------------------------------------------------- mpiP

_NUMBER = r"[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?"


def _heading(line: str) -> str | None:
    """The name in an mpiP heading, '@--- MPI Time (seconds) ------' (None: not one).
    Taken apart with str methods: the regex it replaces, '(.*?) -*\\s*$', tried every
    split of a long run of spaces (one 200 KB line took minutes)."""
    if not line.startswith("@--- "):
        return None
    return line[5:].rstrip().rstrip("-").strip()


def _sections(text: str) -> dict[str, list[str]]:
    """mpiP's sections by heading (the lines between its '@---' heading and the next)."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        heading = _heading(line)
        if heading is not None:
            current = out.setdefault(heading, [])
            continue
        if current is not None and line.strip() and not line.startswith("---"):
            current.append(line)
    return out


def parse_mpip(text: str, source: str) -> Profile:
    """The point-to-point sends of an mpiP report (see the module docstring)."""
    sections = _sections(text)
    callsite = next((v for k, v in sections.items()
                     if k.startswith("Callsite Message Sent statistics (all")
                     and "callsites" not in k), None)
    top = next((v for k, v in sections.items()
                if k.startswith("Aggregate Sent Message Size")), None)
    profile = Profile(source, "mpip")
    if callsite:
        rows = _mpip_callsites(callsite, source)
        profile.notes.append("from mpiP's Callsite Message Sent statistics (every call "
                             "site, all ranks); one class per site at its mean size")
    elif top:
        rows = _mpip_top(top, source)
        profile.notes.append("from mpiP's Aggregate Sent Message Size table: the top twenty "
                             "call sites only (the callsite details were not in the report)")
    else:
        raise ProfileError(f"{source}: an mpiP report without message sizes (neither "
                           "'Callsite Message Sent statistics' nor 'Aggregate Sent Message "
                           "Size')")
    others = sorted({call for call, *_ in rows if call not in MPIP_SENDS})
    mixed = []
    for call, site, count, mean, lo, hi in rows:
        if call not in MPIP_SENDS or count < 1 or mean < 1:
            continue
        profile.entries.append(check_entry(
            Entry(max(1, round(mean)), count, "pingpong", 1, f"{call} site {site}"), source))
        if lo is not None and hi is not None and hi > lo:
            mixed.append(f"{call} site {site} ({lo:g}..{hi:g} B)")
    if others:
        profile.notes.append(f"left out, not point to point: {', '.join(others)}")
    if mixed:
        profile.notes.append("sites that sent several sizes, counted at their mean: "
                             + "; ".join(mixed[:10]) + (" ..." if len(mixed) > 10 else ""))
    profile.notes.append("pattern assumed pingpong: mpiP does not say whether sends overlapped")
    if not profile.entries:
        raise ProfileError(f"{source}: no point-to-point sends in this mpiP report")
    return profile


def _mpip_callsites(lines: list[str], source: str) -> list[tuple]:
    """(call, site, count, mean, min, max) of each site's all-ranks ('*') line."""
    row = re.compile(rf"^\s*(\S+)\s+(\d+)\s+\*\s+(\d+)\s+({_NUMBER})\s+({_NUMBER})\s+"
                     rf"({_NUMBER})\s+({_NUMBER})\s*$")
    out = []
    for line in lines:
        m = row.match(line)
        if m:
            out.append(_mpip_row(m, (5, 6, 4), source))
    return out


def _mpip_top(lines: list[str], source: str) -> list[tuple]:
    """(call, site, count, mean, None, None) of the top-twenty table's rows."""
    row = re.compile(rf"^\s*(\S+)\s+(\d+)\s+(\d+)\s+({_NUMBER})\s+({_NUMBER})\s+({_NUMBER})\s*$")
    out = []
    for line in lines:
        m = row.match(line)
        if m:
            out.append(_mpip_row(m, (5,), source))
    return out


def _mpip_row(m: re.Match[str], sizes: tuple[int, ...], source: str) -> tuple:
    """(call, site, count, mean, min, max) of a matched row (min and max None if SIZES is
    the mean alone); ProfileError if a figure is not a finite number (1e999 overflows)
    or a count is beyond any run (a 5,000-digit count is no int Python will make)."""
    where = f"{source}: {m[1][:40]} site {m[2][:20]}"
    if len(m[2]) > 18 or len(m[3]) > 18:
        raise ProfileError(f"{where}: a site or count of over 18 digits")
    figures = [float(m[i]) for i in sizes]
    if not all(math.isfinite(f) for f in figures):
        raise ProfileError(f"{where}: a message size that is not a finite number")
    mean, low, high = (figures + [None, None])[:3]
    return m[1], int(m[2]), int(m[3]), mean, low, high


# --------------------------------------------------------------------------- any


def sniff(text: str) -> str:
    """The format of a profile's text: mpip, csv, or a benchmark's output (imb/osu)."""
    if "@ mpiP" in text[:2000] or "@--- MPI Time" in text:
        return "mpip"
    if "#bytes" in text or "# OSU" in text or "# Size" in text:
        return "benchmark"
    return "csv"


def read_profile(path: str, fmt: str = "auto") -> Profile:
    """A profile file in ``fmt`` (csv, imb, osu, mpip, or auto: sniffed)."""
    if fmt not in ("auto", *FORMATS):
        raise ProfileError(f"profile format {fmt!r}: choose auto, {', '.join(FORMATS)}")
    try:
        text = safeio.read_text(path, LIMIT, "a message profile")
    except safeio.FileInputError as exc:
        raise ProfileError(str(exc)) from None
    kind = sniff(text) if fmt == "auto" else fmt
    if kind in ("imb", "osu", "benchmark"):
        return from_benchmark(path)
    if kind == "mpip":
        return parse_mpip(text, path)
    return parse_csv(text, path)
