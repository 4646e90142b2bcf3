"""Other tools' result files read into beoperf's own data model.

`load_any(path)` recognises a file by its content (not its name) and returns a
`RunResult` whose `source` says where it came from, which statistic its
central figure is and which of beoperf's statistics the source lacks:

============  ===========================================================  ==========
format        what it is                                                   central
============  ===========================================================  ==========
beoperf       beoperf's own JSON, any version (pingpong.from_json)         median
netpipe3      NetPIPE 3.x np.out: ``bytes Mbps seconds``                    fastest trial
netpipe5      NetPIPE 5.x np.out: ``bytes avgGbps minGbps maxGbps usec``    mean
imb-pingpong  Intel MPI Benchmarks, the "Benchmarking PingPong" table      mean
imb-pingping  IMB PingPing (both ends send at once): mode bidir            mean
imb-sendrecv  IMB Sendrecv (a periodic chain): mode bidir, t_max           mean
imb-exchange  IMB Exchange (both neighbours): bidir, 4 messages a sample  mean
osu-latency   OSU osu_latency ("# Size  Latency (us)"), optional P50..P99  mean/median
osu-bw        OSU osu_bw ("# Size  Bandwidth (MB/s)"), a streaming test    mean/median
osu-bibw      OSU osu_bibw: mode bidir, MB/s of both directions            mean/median
osu-mbw-mr    OSU osu_mbw_mr: stream of N pairs (their sum), window        mean/median
============  ===========================================================  ==========

A file with several IMB benchmarks is imported as the first of PingPong, PingPing,
Sendrecv, Exchange it holds (a warning names the others). IMB -multi's Multi-PingPong etc.
(several groups of processes at once) are not read: a warning names them, and a file with
nothing else is refused. Lines an MPI library prints first (Intel MPI's "[0] MPI
startup(): ...") do not make a text file JSON.

Units (all converted to one-way microseconds and SI bit/s):

- NetPIPE 3.x writes ``"%8d %lf %12.8lf"``: column 2 is "Mbps" with
  1 Mbps = 2**20 bit/s, column 3 the one-way time in seconds of the fastest
  trial (see results/netpipe.py).
- NetPIPE 5.x (Dave Turner, src/netpipe.c) writes ``"%9d %9.3lf %9.3lf %9.3lf
  %7.2lf"``: bytes, the Gbps (SI, 1e9) of the mean, slowest and fastest trial,
  and the mean time in usec. The min/max Gbps columns are not imported: they
  are trial means (not single-sample extremes) and their three decimals are too
  coarse for small messages.
- IMB: t[usec] is the mean over the repetitions of half a round trip.
  Mbytes/sec is 2**20 bytes/s in IMB 3.x and 4.0 (IMB_output.c:
  ``MEGA = 1.0/1048576.0``) and 10**6 bytes/s in IMB 2018 and later
  (``MEGA = 1.0 / 1e6``; the 2021 guide says "million bytes per second").
  The throughput is therefore computed from t[usec], and the column's unit is
  only identified (from the numbers) and recorded.
- OSU: latency is the mean over iterations of half a round trip; bandwidth is in
  MB/s with MB = 10**6 bytes (osu_bw: ``size / 1e6 * iterations * window / t``).
  OSU 7's tail columns are percentiles of per-iteration values, so P50 is a
  true median. For osu_bw the time per message is size / bandwidth.

Averages are stored as ``time_us["mean"]`` with ``throughput_bps["from_mean"]``;
SizeResult.central_bps() has to fall back to from_mean after from_median and
from_best_trial for them (as central_time_us() falls back to mean).

Anything else raises ResultFormatError with one line naming the file and what
is wrong with it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from beoperf import safeio
from beoperf.model import pingpong
from beoperf.model.document import JsonObject
from beoperf.model.netpipe import NETPIPE_MBPS
from beoperf.model.pingpong import ResultFormatError, RunResult, SizeResult

# The statistics a source can lack (source["lacks"] is a sorted subset of these).
LACKABLE = ("ci", "mad", "max", "median", "min", "p90", "p99", "samples", "stddev",
            "trial_medians", "trials")
TIME_KEYS = ("min", "median", "mean", "p90", "p99", "max", "stddev", "mad", "best_trial_mean")
BPS_KEYS = ("from_median", "from_min", "from_best_trial", "from_mean")
NOT_A_RESULT = "not a beoperf result, NetPIPE, IMB or OSU output"
SI_MEGA = 1e6
IMB_MEGA_OLD = 2.0**20  # IMB 3.x / 4.0 "Mbytes/sec"
RATIO_TOLERANCE = 0.02  # for telling column units apart (they differ by >= 4.6%)


@dataclass
class _Import:
    """What an importer found, before it becomes a RunResult."""

    fmt: str
    mode: str
    transport: str
    statistic: str
    units: str
    sizes: list[SizeResult] = field(default_factory=list)
    meta: JsonObject = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    parameters: JsonObject = field(default_factory=dict)
    dropped_zero: float | None = None  # time (us) of a 0-byte row, which beoperf cannot plot


def load_any(path: str | Path) -> RunResult:
    """Read a beoperf JSON result or a NetPIPE 3/5, IMB PingPong, osu_latency or
    osu_bw output file; ResultFormatError (one line, naming the file) otherwise."""
    path = Path(path)
    text = _read_text(path)
    lines = text.splitlines()
    if _looks_like_json(text, lines):
        return _load_beoperf_json(path, text)
    for sniff in (_sniff_imb, _sniff_osu, _sniff_netpipe):
        importer = sniff(path, lines)
        if importer is not None:
            return _to_run(path, importer())
    raise ResultFormatError(f"{path}: {NOT_A_RESULT}")


# ---------------------------------------------------------------------------
# reading and common helpers


def _read_text(path: Path) -> str:
    """The file as text: a regular file of at most LIMITS["result"] bytes, UTF-8 or
    UTF-16 with a BOM (a Windows redirect), no NUL bytes."""
    try:
        data = safeio.read_bytes(path, safeio.LIMITS["result"], "a result file")
    except safeio.FileInputError as exc:
        raise ResultFormatError(str(exc)) from None
    if data[:2] in (b"\xff\xfe", b"\xfe\xff"):
        data = _utf16_to_utf8(path, data)
    if not data.strip():
        raise ResultFormatError(f"{path}: empty file, not a result")
    if b"\x00" in data:
        raise ResultFormatError(f"{path}: binary data, not a text or JSON result file")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise ResultFormatError(f"{path}: binary data, not a text or JSON result file") from None


def _utf16_to_utf8(path: Path, data: bytes) -> bytes:
    try:
        return data.decode("utf-16").encode("utf-8")
    except UnicodeDecodeError:
        raise ResultFormatError(f"{path}: binary data, not a text or JSON result file") from None


_MPI_RANK_PREFIX = re.compile(r"^\[\d+(?:,\d+)*\]\s")  # "[0] MPI startup(): ..." (Intel MPI)


def _looks_like_json(text: str, lines: list[str]) -> bool:
    """Whether text is a JSON document: it starts with '{', or with '[' unless the '[' opens
    an MPI library's rank-prefixed line ("[0] MPI startup(): ...", which Intel MPI prints
    before the tool's output when I_MPI_DEBUG is set)."""
    start = text.lstrip()[:1]
    if start == "[":
        first = next(line for line in lines if line.strip())
        return not _MPI_RANK_PREFIX.match(first.lstrip())
    return start == "{"


def _load_beoperf_json(path: Path, text: str) -> RunResult:
    try:
        doc = safeio.parse_json(text, str(path))
    except safeio.FileInputError as exc:
        raise ResultFormatError(str(exc)) from None
    return pingpong.from_json(doc, str(path))  # any version; names the file


def _size_result(size: int, times: dict[str, float | None], bps: dict[str, float | None],
                 *, reps: int = 0, trials: int = 0, samples: int = 0) -> SizeResult:
    """A SizeResult with every statistic key present; unknown ones are None."""
    return SizeResult(size=size, samples=samples, trials=trials, reps=reps,
                      time_us={k: times.get(k) for k in TIME_KEYS},
                      ci95_halfwidth_us=None, ci95_relative=None, converged=True,
                      throughput_bps={k: bps.get(k) for k in BPS_KEYS})


def _has(s: SizeResult, key: str) -> bool:
    if key in ("samples", "trials"):
        return getattr(s, key) > 0
    if key == "ci":
        return s.ci95_halfwidth_us is not None
    if key == "trial_medians":
        return bool(s.trial_medians_us)
    return s.time_us.get(key) is not None


def lacks(sizes: list[SizeResult]) -> list[str]:
    """The statistics (of LACKABLE) that no size has."""
    return sorted(k for k in LACKABLE if not any(_has(s, k) for s in sizes))


def _to_run(path: Path, found: _Import) -> RunResult:
    if not found.sizes:
        raise ResultFormatError(f"{path}: {found.fmt} output without any data rows (truncated?)")
    previous = 0
    for s in found.sizes:
        _check_figures(path, s)
        if s.size <= previous:
            raise ResultFormatError(f"{path}: message sizes not ascending ({s.size} B after "
                                    f"{previous} B; two runs in one file?)")
        previous = s.size
    meta = {"imported_from": str(path), **found.meta}
    if found.dropped_zero is not None:
        meta["zero_byte_time_us"] = found.dropped_zero
        meta["dropped"] = "the 0-byte row (no throughput; beoperf sizes start at 1 B)"
    parameters = {"mode": found.mode, "transport": found.transport, "sizes": len(found.sizes),
                  **found.parameters}
    source: JsonObject = {"format": found.fmt, "path": str(path), "statistic": found.statistic,
                          "lacks": [*lacks(found.sizes)], "units": found.units}
    return RunResult(parameters=parameters, local={}, remote={}, meta=meta, sizes=found.sizes,
                     status="complete", warnings=found.warnings, source=source)


def _check_figures(path: Path, s: SizeResult) -> None:
    """ResultFormatError unless every time and throughput of S is a positive finite
    number: a latency of 1e-320 us, or a bandwidth of 1e-320 MB/s, is no measurement, and
    its throughput or time overflows."""
    for what, figures in (("time (us)", s.time_us), ("throughput (bit/s)", s.throughput_bps)):
        for key, value in figures.items():
            if value is not None and not (math.isfinite(value) and value > 0):
                raise ResultFormatError(f"{path}: {s.size} B: {what}, {key}, comes to "
                                        f"{value:g}: the file's figure is out of range, "
                                        "not a measurement")


def _quoted(text: str, limit: int = 60) -> str:
    """TEXT quoted for an error message, cut to LIMIT characters: a crafted file's one
    token may be megabytes long, and the message must stay one readable line."""
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _number(path: Path, number: int, token: str, what: str) -> float:
    try:
        value = float(token)
    except ValueError:
        raise ResultFormatError(f"{path}:{number}: {_quoted(token)} is not a number in "
                                f"{what}") from None
    if not math.isfinite(value):
        raise ResultFormatError(f"{path}:{number}: {_quoted(token)} is not a finite number "
                                f"in {what}")
    return value


def _message_size(path: Path, number: int, value: float, what: str) -> int:
    if value < 0 or not value.is_integer():
        raise ResultFormatError(f"{path}:{number}: {value:g} is not a message size in {what}")
    return int(value)


def _positive(path: Path, number: int, value: float, what: str) -> float:
    if value <= 0:
        raise ResultFormatError(f"{path}:{number}: {what} {value:g} is not positive")
    return value


def _bits_per_second(size: int, time_us: float) -> float:
    """Size over time; inf where the time underflows (1e-320 us is 0 s), which
    _check_figures then refuses."""
    seconds = time_us * 1e-6
    return size * 8.0 / seconds if seconds > 0 else math.inf


# ---------------------------------------------------------------------------
# NetPIPE 3.x and 5.x np.out

_NP5_WORKLOAD_UNITS = ("GB/sec", "GFlops")
_NP5_WORKLOAD_FIGURE = re.compile(r"[-+.\deE]+")
_NP5_INTEGRITY = re.compile(r"^\s*\d+\s+bytes\s+\d+\s+times\s+\d+\s+failures\s*$")
_NP_SCREEN = re.compile(r"^\s*\d+:\s+\d+\s+bytes\s+\d+\s+times\s+-->")
_NUMERIC = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")

Rows = list[tuple[int, list[float]]]


def _sniff_netpipe(path: Path, lines: list[str]) -> Callable[[], _Import] | None:
    data = [(n, line) for n, line in enumerate(lines, 1)
            if line.strip() and not line.lstrip().startswith("#")]
    if not data:
        return None
    if any(_NP_SCREEN.match(line) for _, line in data[:20]):
        raise ResultFormatError(f"{path}: NetPIPE's screen output; import the file it writes "
                                "with -o (np.out) instead")
    if _NP5_INTEGRITY.match(data[0][1]):
        raise ResultFormatError(f"{path}: NetPIPE integrity-check output (no timings), "
                                "not a performance result")
    if not all(_NUMERIC.match(t) for t in _np_tokens(data[0][1])):
        return None
    rows = _numeric_rows(path, data)
    kind = _netpipe_kind(path, rows)
    if kind == "netpipe5":
        return lambda: _import_netpipe5(path, rows)
    return lambda: _import_netpipe3(path, rows)


def _np_tokens(line: str) -> list[str]:
    """The numbers of a NetPIPE line, without NetPIPE 5's workload figure ("2.5 GB/sec",
    "1.2 GFlops") at its end. Split into tokens, not matched by a regex over the line: a
    regex with whitespace runs on both sides of the figure backtracked quadratically on
    one long crafted line (100 KB took minutes)."""
    tokens = line.split()
    if (len(tokens) >= 3 and tokens[-1] in _NP5_WORKLOAD_UNITS
            and _NP5_WORKLOAD_FIGURE.fullmatch(tokens[-2])):
        return tokens[:-2]
    return tokens


def _numeric_rows(path: Path, data: list[tuple[int, str]]) -> Rows:
    rows: Rows = []
    width = None
    for n, line in data:
        tokens = _np_tokens(line)
        values = [_number(path, n, t, "a NetPIPE data line") for t in tokens]
        if width is None:
            width = len(values)
        elif len(values) != width:
            raise ResultFormatError(f"{path}:{n}: {len(values)} columns where line {data[0][0]} "
                                    f"has {width} (truncated or mixed output?)")
        rows.append((n, values))
    return rows


def _netpipe_kind(path: Path, rows: Rows) -> str:
    width = len(rows[0][1])
    if width == 2:
        raise ResultFormatError(f"{path}: NetPIPE integrity-check output (bytes, repeats; "
                                "no timings), not a performance result")
    if width >= 5 and _np5_pairs(rows) is not None:
        return "netpipe5"
    if width == 3 or (width > 3 and _np3_ratio(rows) is not None):
        return "netpipe3"
    raise ResultFormatError(f"{path}: a table of {width} numbers per line, but neither NetPIPE 3 "
                            "(bytes Mbps seconds) nor NetPIPE 5 (bytes Gbps Gbps Gbps usec) "
                            f"output; {NOT_A_RESULT}")


def _largest(rows: Rows) -> list[float]:
    return max(rows, key=lambda r: r[1][0])[1]


def _np3_ratio(rows: Rows) -> float | None:
    """Mbps * 2^20 * seconds / bits at the largest size: 1 for NetPIPE 3 (None if not)."""
    size, mbps, seconds = _largest(rows)[:3]
    if size <= 0 or mbps <= 0 or seconds <= 0:
        return None
    ratio = mbps * NETPIPE_MBPS * seconds / (8.0 * size)
    return ratio if abs(ratio - 1.0) <= RATIO_TOLERANCE else None


def _np5_pairs(rows: Rows) -> int | None:
    """Pairs of processes measured at once (Gbps is their sum), or None if not NetPIPE 5."""
    size, avg_gbps, min_gbps, max_gbps, usec = _largest(rows)[:5]
    if size <= 0 or usec <= 0 or not min_gbps <= avg_gbps <= max_gbps:
        return None
    ratio = avg_gbps * 1e3 * usec / (8.0 * size)  # Gbps * us = 1e3 bits
    pairs = round(ratio)
    if pairs < 1 or abs(ratio - pairs) > RATIO_TOLERANCE * pairs:
        return None
    return pairs


def _import_netpipe3(path: Path, rows: Rows) -> _Import:
    found = _Import(
        fmt="netpipe3", mode="pingpong", transport="tcp",
        statistic="NetPIPE: mean of the fastest trial (one-way, half the round trip)",
        units="time: column 3 (seconds) x 1e6 -> us; throughput: column 2 'Mbps' x 2^20 -> "
              "bit/s (NetPIPE's Mbps is 2^20 bit/s)",
        meta={"tool": "NetPIPE 3.x",
              "assumed": "mode pingpong and transport tcp (NPtcp): np.out records neither"})
    for n, values in rows:
        size = _message_size(path, n, values[0], "a NetPIPE data line")
        mbps = _positive(path, n, values[1], "throughput (Mbps)")
        seconds = _positive(path, n, values[2], "time (s)")
        if size == 0:
            found.dropped_zero = seconds * 1e6
            continue
        found.sizes.append(_size_result(size, {"best_trial_mean": seconds * 1e6},
                                        {"from_best_trial": mbps * NETPIPE_MBPS}))
    if len(rows[0][1]) > 3:
        found.warnings.append(f"{len(rows[0][1]) - 3} extra column(s) after bytes, Mbps, "
                              "seconds were ignored")
    if _np3_ratio(rows) is None:
        found.warnings.append("column 2 is not 8 x bytes / seconds / 2^20: the file may not be "
                              "NetPIPE 3 np.out; imported as if it were")
    return found


def _import_netpipe5(path: Path, rows: Rows) -> _Import:
    pairs = _np5_pairs(rows) or 1
    found = _Import(
        fmt="netpipe5", mode="pingpong", transport="unknown",
        statistic="NetPIPE 5: mean over the trials (one-way, half the round trip)",
        units="time: column 5 (usec) as is; throughput = pairs x 8 x bytes / time (SI bit/s); "
              "the Gbps columns are SI (1e9 bit/s); min/max Gbps (slowest/fastest trial) "
              "not imported",
        meta={"tool": "NetPIPE 5.x",
              "assumed": "mode pingpong: np.out does not record --stream/--bidir or the module"})
    if pairs > 1:
        found.parameters["pairs"] = pairs
        found.meta["aggregate"] = f"{pairs} pairs of processes; throughput is their sum"
    for n, values in rows:
        size = _message_size(path, n, values[0], "a NetPIPE data line")
        usec = values[4]
        if usec <= 0 < values[1]:  # below the file's 0.01 us resolution: from the mean Gbps
            usec = pairs * 8e-3 * size / values[1]
        usec = _positive(path, n, usec, "time (usec)")
        if size == 0:
            found.dropped_zero = usec
            continue
        found.sizes.append(_size_result(size, {"mean": usec},
                                        {"from_mean": pairs * _bits_per_second(size, usec)}))
    return found


# ---------------------------------------------------------------------------
# Intel MPI Benchmarks: the PingPong table

_IMB_BENCHMARK = re.compile(r"^\s*#\s*Benchmarking\s+(\S+)")
_IMB_BANNER = re.compile(r"Intel\s*\(R\)\s*MPI\s+Benchmark(?:s|\s+Suite)\s+"
                         r"(V?[\w.]+(?:\s+Update\s+\d+)?)")  # "2019 Update 2" whole
_IMB_FAILED = ("time-out", "out-of-mem", "int-overflow")
_IMB_COLUMNS = {"#bytes": "size", "#repetitions": "reps", "t[usec]": "t", "t_avg[usec]": "t_avg",
                "t_max[usec]": "t_max", "t_min[usec]": "t_min", "Mbytes/sec": "mbytes"}


@dataclass(frozen=True)
class _ImbKind:
    """An IMB point-to-point benchmark as a beoperf run: its format name, mode, how many
    payloads one sample time carries per process (beoperf's throughput) and IMB's own
    bandwidth factor (its Mbytes/sec = factor x bytes / time)."""

    fmt: str
    mode: str
    carried: int
    imb_factor: int
    statistic: str


_IMB_KINDS = {  # the order is the preference when a file holds several
    "PingPong": _ImbKind("imb-pingpong", "pingpong", 1, 1,
                         "IMB: mean over repetitions (one-way, half the round trip)"),
    "PingPing": _ImbKind("imb-pingping", "bidir", 2, 1,
                         "IMB PingPing: mean time of a message sent while the other end's "
                         "crosses it (a bidirectional exchange)"),
    "Sendrecv": _ImbKind("imb-sendrecv", "bidir", 2, 2,
                         "IMB Sendrecv: t_max, the slowest process's mean time of one "
                         "MPI_Sendrecv in the periodic chain (a message out, one in)"),
    "Exchange": _ImbKind("imb-exchange", "bidir", 4, 4,
                         "IMB Exchange: t_max, the slowest process's mean time of one exchange "
                         "with both neighbours (two messages out, two in)"),
}


def _sniff_imb(path: Path, lines: list[str]) -> Callable[[], _Import] | None:
    found = [m.group(1) for line in lines if (m := _IMB_BENCHMARK.match(line))]
    names = list(dict.fromkeys(found))
    usable = [n for n in _IMB_KINDS if n in names]
    # IMB -multi 0 with several groups prints "Multi-PingPong" etc.: pairs measured while
    # others run at once, not one pair's ping-pong; never read, and never passed over silently
    multi = [n for n in names if n.startswith("Multi-") and n[6:] in _IMB_KINDS]
    if usable:
        name = usable[0]
        starts = [i for i, line in enumerate(lines)
                  if (m := _IMB_BENCHMARK.match(line)) and m.group(1) == name]
        return lambda: _import_imb(path, lines, starts, name, usable[1:], multi)
    if multi:
        raise ResultFormatError(f"{path}: IMB {', '.join(multi)} (-multi: several groups of "
                                "processes at once) is not read; beoperf reads IMB PingPong, "
                                "PingPing, Sendrecv and Exchange of one group")
    if names:
        raise ResultFormatError(f"{path}: IMB output without a PingPong, PingPing, Sendrecv "
                                f"or Exchange benchmark (found: {', '.join(names)})")
    return None


def _imb_header(path: Path, lines: list[str], start: int) -> tuple[int, list[str]]:
    """Index and column names of the table header after '# Benchmarking PingPong'."""
    for i in range(start + 1, len(lines)):
        stripped = lines[i].strip()
        if "#bytes" in stripped.split():
            return i, stripped.split()
        if _IMB_BENCHMARK.match(lines[i]):
            break
        if stripped and not stripped.startswith("#"):
            break
    raise ResultFormatError(f"{path}:{start + 1}: IMB PingPong block without its "
                            "'#bytes #repetitions t[usec] Mbytes/sec' table (truncated?)")


def _imb_rows(path: Path, lines: list[str], header: int, width: int,
              warnings: list[str]) -> Rows:
    rows: Rows = []
    tails = 0
    for i in range(header + 1, len(lines)):
        tokens = lines[i].split()
        if not tokens:
            if rows:
                break
            continue
        if tokens[0].startswith("#"):
            break
        if rows and tokens[0].startswith("[") and tokens[-1].endswith("]"):
            tails += 1  # PerfKitBenchmarker's patched IMB (-show_tail): a row's percentiles
            continue
        if len(tokens) > 1 and any(f in tokens[1] for f in _IMB_FAILED):
            warnings.append(f"size {tokens[0]} B: IMB reported {tokens[1].rstrip('.;')}; skipped")
            continue
        if len(tokens) != width:
            raise ResultFormatError(f"{path}:{i + 1}: {len(tokens)} columns in an IMB table of "
                                    f"{width} (truncated?)")
        rows.append((i + 1, [_number(path, i + 1, t, "the IMB PingPong table") for t in tokens]))
    if tails:
        warnings.append(f"{tails} bracketed line(s) of latency percentiles under the rows "
                        "(PerfKitBenchmarker's patched IMB, -show_tail) not read")
    return rows


def _import_imb(path: Path, lines: list[str], starts: list[int], name: str = "PingPong",
                others: list[str] | None = None, multi: list[str] | None = None) -> _Import:
    kind = _IMB_KINDS[name]
    header, names = _imb_header(path, lines, starts[0])
    if names[0].lstrip("#&") == "Group":
        raise ResultFormatError(f"{path}:{header + 1}: IMB per-group (-multi 1) {name} table "
                                "is not supported")
    columns = {_IMB_COLUMNS[n]: j for j, n in enumerate(names) if n in _IMB_COLUMNS}
    time_key = next((k for k in (("t",) if kind.imb_factor == 1 else ("t_max",)) + ("t", "t_avg")
                     if k in columns), None)
    if "size" not in columns or time_key is None:
        raise ResultFormatError(f"{path}:{header + 1}: IMB {name} table without #bytes and "
                                "t[usec] columns")
    found = _Import(
        fmt=kind.fmt, mode=kind.mode, transport="mpi",
        statistic=kind.statistic + ("; t_avg over process pairs" if time_key == "t_avg"
                                    and kind.imb_factor == 1 else ""),
        units="", meta={"tool": "Intel MPI Benchmarks", "benchmark": name})
    if kind.carried > 1:
        found.parameters["messages_per_sample"] = kind.carried
    banner = next((m.group(1) for line in lines if (m := _IMB_BANNER.search(line))), None)
    if banner:
        found.meta["version"] = banner
    processes = _imb_processes(lines, starts[0], header)
    if processes:
        found.parameters["processes"] = processes
    if len(starts) > 1:
        found.warnings.append(f"{len(starts)} {name} tables in the file; imported the first")
    if others:
        found.warnings.append(f"the file also holds {', '.join(others)}; imported {name}")
    if multi:
        found.warnings.append(f"{', '.join(multi)} (-multi: several groups of processes at "
                              "once) not read")
    rows = _imb_rows(path, lines, header, len(names), found.warnings)
    for n, values in rows:
        _imb_size(path, found, n, values, columns, time_key, kind.carried)
    carried = f"{kind.carried} x " if kind.carried > 1 else ""
    found.units = (f"time: {names[columns[time_key]]} as is; throughput = {carried}8 x bytes / "
                   "t (SI bit/s); "
                   + _imb_mbytes_unit(rows, columns, found.warnings, kind.imb_factor))
    return found


def _imb_processes(lines: list[str], start: int, header: int) -> int | None:
    for line in lines[start:header]:
        m = re.match(r"^\s*#\s*#processes\s*=\s*(\d+)", line)
        if m:
            return int(m.group(1))
    return None


def _imb_size(path: Path, found: _Import, n: int, values: list[float], columns: dict[str, int],
              time_key: str, carried: int = 1) -> None:
    size = _message_size(path, n, values[columns["size"]], "the IMB table")
    t = _positive(path, n, values[columns[time_key]], "time (usec)")
    if size == 0:
        found.dropped_zero = t
        return
    reps = int(values[columns["reps"]]) if "reps" in columns else 0
    found.sizes.append(_size_result(size, {"mean": t},
                                    {"from_mean": carried * _bits_per_second(size, t)},
                                    reps=reps, trials=1))


def _imb_mbytes_unit(rows: Rows, columns: dict[str, int], warnings: list[str],
                     factor: int = 1) -> str:
    """Which megabyte the file's Mbytes/sec column uses, judged from its numbers."""
    if "mbytes" not in columns:
        return "no Mbytes/sec column"
    time_key = "t_max" if "t_max" in columns else ("t" if "t" in columns else "t_avg")
    size, t, mbytes = max(((r[columns["size"]], r[columns[time_key]], r[columns["mbytes"]])
                           for _, r in rows), default=(0.0, 0.0, 0.0))
    if size <= 0 or t <= 0 or mbytes <= 0:
        return "Mbytes/sec column not checked"
    ratio = mbytes / (factor * size / t)  # size / t is in 10^6 bytes/s
    if abs(ratio - 1.0) <= RATIO_TOLERANCE:
        return "the file's Mbytes/sec column is 10^6 bytes/s (IMB 2018 and later)"
    if abs(ratio * IMB_MEGA_OLD / SI_MEGA - 1.0) <= RATIO_TOLERANCE:
        return "the file's Mbytes/sec column is 2^20 bytes/s (IMB 3.x/4.x)"
    warnings.append(f"Mbytes/sec column matches neither 10^6 nor 2^20 bytes/s (ratio {ratio:.3f}); "
                    "not used")
    return "Mbytes/sec column not used (unit not recognised)"


# ---------------------------------------------------------------------------
# OSU micro-benchmarks: osu_latency and osu_bw

_OSU_TITLE = re.compile(r"^\s*#\s*(OSU\b.*?\bTest)\b\s*(v[\d.]+)?")
_OSU_KIND = {"Latency": "osu-latency", "Bandwidth": "osu-bw", "Bi-Directional Bandwidth":
             "osu-bibw", "Multiple Bandwidth / Message Rate": "osu-mbw-mr"}
_OSU_SUPPORTED = re.compile(r"^OSU\s+MPI(?:-\w+)?\s+(Latency|Bandwidth|Bi-Directional Bandwidth|"
                            r"Multiple Bandwidth / Message Rate)\s+Test$")
_OSU_PAIRS = re.compile(r"^\s*#\s*\[\s*pairs:\s*(\d+)\s*\](?:\s*\[\s*window size:\s*(\d+)\s*\])?")
_OSU_HEADER = re.compile(r"^\s*#\s*Size\b")
_OSU_COLUMNS = [(name, re.compile(pattern)) for name, pattern in (  # tried in this order
    ("min_ranks", r"Min\s+Latency\s*\(us\)"),
    ("max_ranks", r"Max\s+Latency\s*\(us\)"),
    ("mean", r"(?:Avg\s+)?Latency\s*\(us\)"),
    ("bw", r"Bandwidth\s*\(MB/s\)"),
    ("bw", r"MB/s"),  # osu_mbw_mr
    ("msgrate", r"Messages/s"),
    ("p{}", r"P(\d+)\s+Tail\s+(?:Lat\s*\(us\)|BW\s*\(MB/s\))"),
    ("iterations", r"Iterations"),
    ("validation", r"Validation"),
    ("transmit", r"Transmit\s+Size"),
)]


def _sniff_osu(path: Path, lines: list[str]) -> Callable[[], _Import] | None:
    titles = [(i, m) for i, line in enumerate(lines) if (m := _OSU_TITLE.match(line))]
    if not titles:
        return None
    start, match = titles[0]
    name = " ".join(match.group(1).split())
    kind = _OSU_SUPPORTED.match(name)
    if not kind:
        raise ResultFormatError(f"{path}: {_quoted(name)} is not supported (OSU osu_latency, "
                                "osu_bw, osu_bibw and osu_mbw_mr are); OSU's collectives "
                                "read with 'beoperf cluster coll --import FILE --np N'")
    return lambda: _import_osu(path, lines, start, _OSU_KIND[kind.group(1)], match.group(2),
                               len(titles))


def _osu_columns(path: Path, number: int, header: str) -> list[str]:
    """Column names after '# Size' (OSU pads them to a fixed width; names hold spaces)."""
    text = re.sub(r"^\s*#\s*Size", "", header).strip()
    columns: list[str] = []
    while text:
        for name, pattern in _OSU_COLUMNS:
            m = pattern.match(text)
            if m:
                columns.append(name.format(*m.groups()))
                text = text[m.end():].lstrip()
                break
        else:
            raise ResultFormatError(f"{path}:{number}: unknown OSU column {_quoted(text)}")
    return columns


def _osu_table(path: Path, lines: list[str], start: int,
               warnings: list[str] | None = None) -> tuple[list[str], Rows, int]:
    """The columns, rows and header index of the OSU table after the title at start: comment
    lines before the first row are skipped, and the table ends at a comment, or at a line
    that is not a row (the rest of a job log, which a warning in warnings mentions)."""
    header = next((i for i in range(start + 1, len(lines)) if _OSU_HEADER.match(lines[i])), None)
    if header is None:
        raise ResultFormatError(f"{path}: OSU output without its '# Size ...' header (truncated?)")
    columns = _osu_columns(path, header + 1, lines[header])
    rows: Rows = []
    for i in range(header + 1, len(lines)):
        tokens = lines[i].split()
        if not tokens:
            continue
        if tokens[0].startswith("#"):
            if rows:
                break
            continue  # OSU 7.1-7.3 print '# Datatype: MPI_CHAR.' after the header
        if rows and not _NUMERIC.match(tokens[0]) and not _osu_rows_follow(lines, i,
                                                                          len(columns) + 1):
            if warnings is not None:
                warnings.append(f"the OSU table ends at line {i}; the {len(lines) - i} "
                                "line(s) after it are other output, not read")
            break
        if len(tokens) != len(columns) + 1:
            raise ResultFormatError(f"{path}:{i + 1}: {len(tokens)} columns in an OSU table of "
                                    f"{len(columns) + 1} (truncated, or other output mixed in?)")
        values = [_osu_value(path, i + 1, t, c) for t, c in zip(tokens, ["size", *columns],
                                                                  strict=True)]
        rows.append((i + 1, values))
    return columns, rows, header


def _osu_rows_follow(lines: list[str], start: int, width: int) -> bool:
    """Whether a table row (width numbers) comes after line start before the next comment:
    other output mixed into the table, not the end of it."""
    for line in lines[start + 1:]:
        tokens = line.split()
        if tokens and tokens[0].startswith("#"):
            return False
        if len(tokens) == width and all(_NUMERIC.match(t) for t in tokens):
            return True
    return False


def _osu_value(path: Path, number: int, token: str, column: str) -> float:
    if column == "validation":
        if token not in ("Pass", "Fail"):
            raise ResultFormatError(f"{path}:{number}: {_quoted(token)} is not Pass/Fail in "
                                    "the OSU Validation column")
        return 1.0 if token == "Pass" else 0.0
    return _number(path, number, token, "the OSU table")


# what each OSU test is, as a beoperf run: mode, and how many message payloads one sample
# time carries (osu_bibw: one each way; osu_mbw_mr: one per pair)
_OSU_MODE = {"osu-latency": "pingpong", "osu-bw": "stream", "osu-bibw": "bidir",
             "osu-mbw-mr": "stream"}


def _import_osu(path: Path, lines: list[str], start: int, fmt: str, version: str | None,
                tables: int) -> _Import:
    warnings: list[str] = []
    columns, rows, header = _osu_table(path, lines, start, warnings)
    latency = fmt == "osu-latency"
    if ("mean" if latency else "bw") not in columns:
        raise ResultFormatError(f"{path}:{header + 1}: OSU "
                                f"{'latency' if latency else 'bandwidth'} table without its "
                                f"{'Latency (us)' if latency else 'Bandwidth (MB/s)'} column")
    tail = "p50" in columns
    found = _Import(fmt=fmt, mode=_OSU_MODE[fmt], transport="mpi",
                    statistic=_osu_statistic(fmt, tail), units=_osu_units(fmt, columns),
                    meta={"tool": "OSU micro-benchmarks"}, warnings=warnings)
    if version:
        found.meta["version"] = version
    if tables > 1:
        found.warnings.append(f"{tables} OSU tests in the file; imported the first")
    pairs = _osu_pairs(lines, start, header, found) if fmt == "osu-mbw-mr" else 1
    for n, values in rows:
        row = dict(zip(["size", *columns], values, strict=True))
        if row.get("validation") == 0.0:
            found.warnings.append(f"size {int(row['size'])} B: OSU validation failed")
        _osu_size(path, found, n, row, fmt, pairs)
    return found


def _osu_pairs(lines: list[str], start: int, header: int, found: _Import) -> int:
    """osu_mbw_mr's '# [ pairs: N ] [ window size: W ]' line: pairs (and window) recorded;
    the throughput is the pairs' sum."""
    for line in lines[start:header]:
        m = _OSU_PAIRS.match(line)
        if m:
            pairs = int(m.group(1))
            found.parameters["pairs"] = pairs
            if m.group(2):
                found.parameters["window"] = int(m.group(2))
            found.meta["aggregate"] = f"{pairs} pair(s) of processes; throughput is their sum"
            return max(pairs, 1)
    found.warnings.append("no '# [ pairs: N ]' line: one pair assumed")
    return 1


def _osu_statistic(fmt: str, tail: bool) -> str:
    if fmt == "osu-latency":
        return ("OSU: median (P50) of the per-iteration one-way times; the average is kept as "
                "mean" if tail else "OSU: average over the iterations (one-way, half the round "
                "trip)")
    if tail:
        return "OSU: median (P50) of the per-iteration bandwidth; the average is kept as mean"
    return {"osu-bw": "OSU: average bandwidth over the iterations (windows of messages back "
                      "to back)",
            "osu-bibw": "OSU: average bidirectional bandwidth over the iterations (windows of "
                        "messages both ways at once)",
            "osu-mbw-mr": "OSU: aggregate bandwidth of all pairs over the iterations (windows "
                          "of messages back to back)"}[fmt]


def _osu_units(fmt: str, columns: list[str]) -> str:
    if fmt == "osu-latency":
        text = "time: Latency (us) as is; throughput = 8 x size / time (SI bit/s)"
        if "min_ranks" in columns:
            text += "; Min/Max Latency (over ranks, not samples) not imported"
    else:
        text = {"osu-bw": "time per message (us) = size / (MB/s)",
                "osu-bibw": "time per exchange (a message each way, us) = 2 x size / (MB/s)",
                "osu-mbw-mr": "time per message of one pair (us) = pairs x size / (MB/s); "
                              "Messages/s not imported (MB/s / size)"}[fmt]
        text = "MB/s with MB = 10^6 bytes: bit/s = MB/s x 8e6; " + text
        if "p90" in columns or "p99" in columns:
            text += "; P90/P99 Tail BW (the 10th/1st percentile of time) not imported"
    extra = sorted(c for c in columns if re.fullmatch(r"p\d+", c) and c not in
                   ("p50", "p90", "p99"))
    if extra:
        text += f"; percentiles {', '.join(extra)} not imported"
    return text


def _osu_size(path: Path, found: _Import, n: int, row: dict[str, float], fmt: str,
              pairs: int) -> None:
    size = _message_size(path, n, row["size"], "the OSU table")
    latency = fmt == "osu-latency"
    if size == 0:  # osu_latency starts at 0 B; beoperf cannot place it on a log axis
        found.dropped_zero = row["mean"] if latency else None
        return
    if latency:
        mean, median = _positive(path, n, row["mean"], "latency (us)"), row.get("p50")
        times = {"mean": mean, "median": median, "p90": row.get("p90"), "p99": row.get("p99")}
        bps = {"from_mean": _bits_per_second(size, mean),
               "from_median": _bits_per_second(size, median) if median else None}
    else:  # bytes one sample time carries, over MB/s (10^6 B/s): microseconds
        carried = size * (2 if fmt == "osu-bibw" else pairs)
        p50 = row.get("p50")
        times = {"mean": carried / _positive(path, n, row["bw"], "bandwidth (MB/s)"),
                 "median": carried / p50 if p50 else None}
        bps = {"from_mean": row["bw"] * 8e6, "from_median": p50 * 8e6 if p50 else None}
    reps = int(row.get("iterations", 0))
    found.sizes.append(_size_result(size, times, bps, reps=reps, trials=1,
                                    samples=reps if times["median"] is not None else 0))
