"""HPC Challenge (HPCC) files: the summary section of ``hpccoutf.txt``, and ``hpccinf.txt``.

HPCC 1.4 and 1.5 end each run's output with a block of ``key=value`` lines between
``Begin of Summary section.`` and ``End of Summary section.`` (src/io.c, HPCC_Finalize):
148 keys in 1.5.0, the same names since 1.4.0 (later sources add ``FFT_API``).  Every
key is kept; :data:`KEYS` says what each one is: its unit (as HPCC prints it: GB/s is
10^9 bytes/s, GUP/s 10^9 updates/s, latencies in microseconds), and its *role*:

=============  =================================================================
aggregate      performance of all processes together; ideally grows with their number
per-process    performance of each process while all run (Star*, ring and ping-pong
               bandwidth); ideally stays as it is
single         one process running alone (Single*); ideally stays as it is
latency        lower is better; ideally stays as it is
time           seconds a test took
check          correctness: Success, residuals, errors
parameter      problem sizes, grids, blocking, the process counts
build          how hpcc was built and the machine's arithmetic (sizeof, eps, CPS_*)
=============  =================================================================

HPCC opens ``hpccoutf.txt`` for appending, so one file may hold several runs:
:func:`parse_runs` returns each.  A run passed only if ``Success=1`` and HPL's scaled
residual ||Ax-b||_oo / (eps (||A||_oo ||x||_oo + ||b||_oo) N) is below the threshold
(16.0 unless the run's input says otherwise): :func:`hpl_residual` recomputes it from
the summary (HPL_RnormI, HPL_AnormI, HPL_XnormI, HPL_BnormI, HPL_eps, HPL_N), and the
PASSED/FAILED lines HPL itself printed are read too.

Files are read bounded (they may be crafted): at most :data:`MAX_RUNS` runs,
:data:`MAX_KEYS` keys a run, key names of at most 64 word characters, values of at most
200 characters.
"""

from __future__ import annotations

import math
import re
import sys
from dataclasses import dataclass, field

ROLES = ("aggregate", "per-process", "single", "latency", "time", "check", "parameter",
         "build")
PERFORMANCE = ("aggregate", "per-process", "single", "latency")
BEGIN = "Begin of Summary section."
END = "End of Summary section."
RUN_HEADER = "This is the DARPA/DOE HPC Challenge Benchmark"
DEFAULT_THRESHOLD = 16.0
MAX_RUNS = 1000
MAX_KEYS = 1000
MAX_VALUE_CHARS = 200

# key, unit ("-": none), role, what it is.  The order is the order HPCC 1.5 prints them.
_TABLE = """
VersionMajor - build HPCC major version
VersionMinor - build HPCC minor version
VersionMicro - build HPCC micro version
VersionRelease - build release letter (a alpha, b beta, f final)
LANG - build language of the harness
Success - check 1 if every test passed its own check, else 0
sizeof_char B build size of char
sizeof_short B build size of short
sizeof_int B build size of int
sizeof_long B build size of long
sizeof_void_ptr B build size of a pointer
sizeof_size_t B build size of size_t
sizeof_float B build size of float
sizeof_double B build size of double
sizeof_s64Int B build size of the 64-bit signed integer type
sizeof_u64Int B build size of the 64-bit unsigned integer type
sizeof_struct_double_double B build size of a pair of doubles (a complex number)
CommWorldProcs - parameter MPI processes in MPI_COMM_WORLD
MPI_Wtick s parameter resolution of MPI_Wtime
HPL_Tflops TFLOP/s aggregate HPL: solving a dense linear system (LU), all processes
HPL_time s time HPL: time to solve
HPL_eps - check HPL: relative machine precision used in the residual
HPL_RnormI - check HPL: infinity norm of the residual Ax-b
HPL_Anorm1 - check HPL: 1-norm of A
HPL_AnormI - check HPL: infinity norm of A
HPL_Xnorm1 - check HPL: 1-norm of x
HPL_XnormI - check HPL: infinity norm of x
HPL_BnormI - check HPL: infinity norm of b
HPL_N - parameter HPL: matrix order N
HPL_NB - parameter HPL: block size NB
HPL_nprow - parameter HPL: process grid rows P
HPL_npcol - parameter HPL: process grid columns Q
HPL_depth - parameter HPL: look-ahead depth
HPL_nbdiv - parameter HPL: panels in recursion
HPL_nbmin - parameter HPL: recursive stopping criterion
HPL_cpfact - parameter HPL: panel factorization (L, C, R)
HPL_crfact - parameter HPL: recursive panel factorization (L, C, R)
HPL_ctop - parameter HPL: broadcast topology
HPL_order - parameter HPL: process mapping (R row-major, C column-major)
HPL_dMACH_EPS - build double precision: relative machine precision
HPL_dMACH_SFMIN - build double precision: safe minimum
HPL_dMACH_BASE - build double precision: base
HPL_dMACH_PREC - build double precision: eps times base
HPL_dMACH_MLEN - build double precision: mantissa digits
HPL_dMACH_RND - build double precision: 1 if rounding
HPL_dMACH_EMIN - build double precision: minimum exponent
HPL_dMACH_RMIN - build double precision: underflow threshold
HPL_dMACH_EMAX - build double precision: maximum exponent
HPL_dMACH_RMAX - build double precision: overflow threshold
HPL_sMACH_EPS - build single precision: relative machine precision
HPL_sMACH_SFMIN - build single precision: safe minimum
HPL_sMACH_BASE - build single precision: base
HPL_sMACH_PREC - build single precision: eps times base
HPL_sMACH_MLEN - build single precision: mantissa digits
HPL_sMACH_RND - build single precision: 1 if rounding
HPL_sMACH_EMIN - build single precision: minimum exponent
HPL_sMACH_RMIN - build single precision: underflow threshold
HPL_sMACH_EMAX - build single precision: maximum exponent
HPL_sMACH_RMAX - build single precision: overflow threshold
dweps - build double precision epsilon, computed by HPCC
sweps - build single precision epsilon, computed by HPCC
HPLMaxProcs - parameter HPL: largest process grid in the input
HPLMinProcs - parameter HPL: smallest process grid in the input
DGEMM_N - parameter DGEMM: matrix order
StarDGEMM_Gflops GFLOP/s per-process DGEMM: matrix multiply, each process at once
SingleDGEMM_Gflops GFLOP/s single DGEMM: matrix multiply, one process
PTRANS_GBs GB/s aggregate PTRANS: parallel matrix transpose, all processes
PTRANS_time s time PTRANS: time
PTRANS_residual - check PTRANS: residual
PTRANS_n - parameter PTRANS: matrix order
PTRANS_nb - parameter PTRANS: block size
PTRANS_nprow - parameter PTRANS: process grid rows
PTRANS_npcol - parameter PTRANS: process grid columns
MPIRandomAccess_LCG_N - parameter MPI RandomAccess (LCG): table size (64-bit words)
MPIRandomAccess_LCG_time s time MPI RandomAccess (LCG): time
MPIRandomAccess_LCG_CheckTime s time MPI RandomAccess (LCG): verification time
MPIRandomAccess_LCG_Errors - check MPI RandomAccess (LCG): wrong table entries
MPIRandomAccess_LCG_ErrorsFraction - check MPI RandomAccess (LCG): wrong entries, fraction
MPIRandomAccess_LCG_ExeUpdates - parameter MPI RandomAccess (LCG): updates executed
MPIRandomAccess_LCG_GUPs GUP/s aggregate MPI RandomAccess (LCG): updates, all processes
MPIRandomAccess_LCG_TimeBound s parameter MPI RandomAccess (LCG): time bound
MPIRandomAccess_LCG_Algorithm - parameter MPI RandomAccess (LCG): algorithm variant
MPIRandomAccess_N - parameter MPI RandomAccess: table size (64-bit words)
MPIRandomAccess_time s time MPI RandomAccess: time
MPIRandomAccess_CheckTime s time MPI RandomAccess: verification time
MPIRandomAccess_Errors - check MPI RandomAccess: wrong table entries
MPIRandomAccess_ErrorsFraction - check MPI RandomAccess: wrong entries, fraction
MPIRandomAccess_ExeUpdates - parameter MPI RandomAccess: updates executed
MPIRandomAccess_GUPs GUP/s aggregate MPI RandomAccess: updates, all processes
MPIRandomAccess_TimeBound s parameter MPI RandomAccess: time bound
MPIRandomAccess_Algorithm - parameter MPI RandomAccess: algorithm variant
RandomAccess_LCG_N - parameter RandomAccess (LCG): table size per process (64-bit words)
StarRandomAccess_LCG_GUPs GUP/s per-process RandomAccess (LCG): each process at once
SingleRandomAccess_LCG_GUPs GUP/s single RandomAccess (LCG): one process
RandomAccess_N - parameter RandomAccess: table size per process (64-bit words)
StarRandomAccess_GUPs GUP/s per-process RandomAccess: each process at once
SingleRandomAccess_GUPs GUP/s single RandomAccess: one process
STREAM_VectorSize - parameter STREAM: vector length (elements)
STREAM_Threads - parameter STREAM: threads per process
StarSTREAM_Copy GB/s per-process STREAM Copy, each process at once
StarSTREAM_Scale GB/s per-process STREAM Scale, each process at once
StarSTREAM_Add GB/s per-process STREAM Add, each process at once
StarSTREAM_Triad GB/s per-process STREAM Triad, each process at once
SingleSTREAM_Copy GB/s single STREAM Copy, one process
SingleSTREAM_Scale GB/s single STREAM Scale, one process
SingleSTREAM_Add GB/s single STREAM Add, one process
SingleSTREAM_Triad GB/s single STREAM Triad, one process
FFT_API - build FFT library (later HPCC sources only)
FFT_N - parameter FFT: vector length per process
StarFFT_Gflops GFLOP/s per-process FFT, each process at once
SingleFFT_Gflops GFLOP/s single FFT, one process
MPIFFT_N - parameter MPI FFT: vector length
MPIFFT_Gflops GFLOP/s aggregate MPI FFT: distributed FFT, all processes
MPIFFT_maxErr - check MPI FFT: largest error
MPIFFT_Procs - parameter MPI FFT: processes used
MaxPingPongLatency_usec us latency ping-pong latency, slowest pair (8 B)
RandomlyOrderedRingLatency_usec us latency ring latency, random order (8 B)
MinPingPongBandwidth_GBytes GB/s per-process ping-pong bandwidth, slowest pair (2,000,000 B)
NaturallyOrderedRingBandwidth_GBytes GB/s per-process ring bandwidth, natural order, per process
RandomlyOrderedRingBandwidth_GBytes GB/s per-process ring bandwidth, random order, per process
MinPingPongLatency_usec us latency ping-pong latency, fastest pair (8 B)
AvgPingPongLatency_usec us latency ping-pong latency, mean of pairs (8 B)
MaxPingPongBandwidth_GBytes GB/s per-process ping-pong bandwidth, fastest pair
AvgPingPongBandwidth_GBytes GB/s per-process ping-pong bandwidth, mean of pairs
NaturallyOrderedRingLatency_usec us latency ring latency, natural order (8 B)
FFTEnblk - parameter FFTE: blocking
FFTEnp - parameter FFTE: padding
FFTEl2size B parameter FFTE: L2 cache size assumed
M_OPENMP - build OpenMP version (-1: none)
omp_get_num_threads - build OpenMP threads
omp_get_max_threads - build OpenMP threads at most
omp_get_num_procs - build OpenMP processors
MemProc - parameter memory per process from hpccmemf.txt (-1: none)
MemSpec - parameter how hpccmemf.txt gave it (-1: no file)
MemVal - parameter the value in hpccmemf.txt (-1: no file)
MPIFFT_time0 s time MPI FFT: phase 0 time
MPIFFT_time1 s time MPI FFT: phase 1 time
MPIFFT_time2 s time MPI FFT: phase 2 time
MPIFFT_time3 s time MPI FFT: phase 3 time
MPIFFT_time4 s time MPI FFT: phase 4 time
MPIFFT_time5 s time MPI FFT: phase 5 time
MPIFFT_time6 s time MPI FFT: phase 6 time
CPS_HPCC_FFT_235 - build built with HPCC_FFT_235
CPS_HPCC_FFTW_ESTIMATE - build built with HPCC_FFTW_ESTIMATE
CPS_HPCC_MEMALLCTR - build built with HPCC_MEMALLCTR
CPS_HPL_USE_GETPROCESSTIMES - build built with HPL_USE_GETPROCESSTIMES
CPS_RA_SANDIA_NOPT - build built with RA_SANDIA_NOPT
CPS_RA_SANDIA_OPT2 - build built with RA_SANDIA_OPT2
CPS_USING_FFTW - build built with USING_FFTW
"""


@dataclass(frozen=True)
class KeyInfo:
    """What one summary key is: its unit ('' for none), role and a few words."""

    unit: str
    role: str
    description: str


def _table() -> dict[str, KeyInfo]:
    keys = {}
    for line in _TABLE.strip().splitlines():
        key, unit, role, description = line.split(" ", 3)
        assert role in ROLES, line
        keys[key] = KeyInfo("" if unit == "-" else unit, role, description)
    return keys


KEYS: dict[str, KeyInfo] = _table()
# the keys HPCC 1.5.0 prints (FFT_API came later)
KEYS_1_5_0 = tuple(k for k in KEYS if k != "FFT_API")
UNIT_SUFFIXES = ("_Tflops", "_Gflops", "_GBs", "_GUPs", "_usec", "_GBytes")


def short_name(key: str) -> str:
    """A key without its unit suffix, as published tables name the figure:
    'HPL_Tflops' -> 'HPL', 'RandomlyOrderedRingLatency_usec' -> 'RandomlyOrderedRingLatency'."""
    for suffix in UNIT_SUFFIXES:
        if key.endswith(suffix):
            return key[: -len(suffix)]
    return key


def performance_keys() -> list[str]:
    """The keys that are performance figures, in HPCC's order."""
    return [k for k, info in KEYS.items() if info.role in PERFORMANCE]


# The aggregate figures of tests that run on a part of the job, with the summary keys
# whose product is that part (HPCC reports it): HPL and PTRANS on their own P x Q grid
# (from hpccinf.txt; the other processes wait), MPI FFT on the largest count it can split
# its vector over (MPIFFT_Procs).  Every other figure is of all CommWorldProcs processes
# (Star*, ping-pong and ring, MPI RandomAccess) or of one (Single*).
OWN_PROCESSES = {"HPL_Tflops": ("HPL_nprow", "HPL_npcol"),
                 "PTRANS_GBs": ("PTRANS_nprow", "PTRANS_npcol"),
                 "MPIFFT_Gflops": ("MPIFFT_Procs",)}


def own_count_name(key: str) -> str:
    """How the summary names a figure's own process count: 'HPL_nprow x HPL_npcol'."""
    return " x ".join(OWN_PROCESSES.get(key, ("CommWorldProcs",)))


def key_of(name: str) -> str | None:
    """The summary key a name means: the key itself, or its short name ('HPL',
    'MPIFFT', 'StarSTREAM_Triad'), any case; None if neither."""
    if name in KEYS:
        return name
    wanted = name.strip().lower()
    for key in KEYS:
        if key.lower() == wanted or short_name(key).lower() == wanted:
            return key
    return None


def info(key: str) -> KeyInfo:
    """The key's description; an unknown key (another HPCC version) has no unit and the
    role 'parameter'."""
    return KEYS.get(key) or KeyInfo("", "parameter", "not in HPCC 1.5's summary")


# --------------------------------------------------------------------------- parsing


class HpccFormatError(ValueError):
    """Text that is not HPCC output this reader understands; the message says why."""


_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")
_INT = re.compile(r"[-+]?\d+")
_THRESHOLD = re.compile(r"scaled residuals are less than\s+([0-9.eE+-]+)")
# HPL's check line, "||Ax-b||_oo/(eps*(...)*N)=   0.0042 ...... PASSED". Each part is
# possessive or atomic, so that nothing is tried twice: with "[0-9.eE+-]+" then "\.+" a
# long run of dots was split every way (a 218 KB crafted hpccoutf took minutes).
_HPL_CHECK = re.compile(r"^\|\|Ax-b\|\|_oo/\(eps\*[^=\n]*+=\s*+"
                        r"((?>[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?nan|[-+]?inf))"
                        r"\s*+\.++\s*+(PASSED|FAILED)", re.MULTILINE)
_VERSION_LINE = re.compile(r"HPC Challenge Benchmark version ([0-9][0-9.]*\S*)")
_HOSTNAME = re.compile(r"^Hostname: '([^'\n]{0,253})'", re.MULTILINE)


def parse_value(text: str) -> int | float | str | None:
    """A summary value: an int, a finite float, None for nan/inf (HPCC prints them for
    tests that went wrong), else the text itself (HPL_cpfact=R, LANG=C)."""
    if _INT.fullmatch(text):
        return int(text)
    try:
        value = float(text)
    except ValueError:
        return text
    return value if math.isfinite(value) else None


# The tests HPCC runs, each with the summary key of its size: HPCC_Init sets the sizes to
# -1 and fills them in as a test runs, so a size of -1 is a test that did not run, and its
# figures are HPCC's initial -1 or memory never written (denormals such as 6.95e-310: the
# LCG RandomAccess figures and HPL_BnormI are never initialised).  A key belongs to the
# first test whose pattern it matches.
TEST_SIZES = {"HPL": "HPL_N", "DGEMM": "DGEMM_N", "PTRANS": "PTRANS_n",
              "MPIRandomAccess_LCG": "MPIRandomAccess_LCG_N",
              "MPIRandomAccess": "MPIRandomAccess_N", "RandomAccess_LCG": "RandomAccess_LCG_N",
              "RandomAccess": "RandomAccess_N", "STREAM": "STREAM_VectorSize",
              "MPIFFT": "MPIFFT_N", "FFT": "FFT_N"}
_TEST_OF = [(name, re.compile(pattern)) for name, pattern in (
    ("HPL", r"HPL_"), ("DGEMM", r".*DGEMM_"), ("PTRANS", r"PTRANS_"),
    ("MPIRandomAccess_LCG", r"MPIRandomAccess_LCG_"), ("MPIRandomAccess", r"MPIRandomAccess_"),
    ("RandomAccess_LCG", r".*RandomAccess_LCG_"), ("RandomAccess", r".*RandomAccess_"),
    ("STREAM", r".*STREAM_"), ("MPIFFT", r"MPIFFT_"), ("FFT", r"(Star|Single)?FFT_"))]


def benchmark_of(key: str) -> str | None:
    """The HPCC test a summary key belongs to (None: a build, harness or input key)."""
    if info(key).role == "build":
        return None
    return next((name for name, pattern in _TEST_OF if pattern.match(key)), None)


def is_uninitialised(value: object) -> bool:
    """A denormal double: memory HPCC printed without ever writing it (6.95e-310)."""
    return isinstance(value, float) and 0.0 < abs(value) < sys.float_info.min


def missing_text(raw: str | None) -> str:
    """How a summary value that is no figure reads: 'not run' for a number HPCC printed
    for a test that did not run (-1, 6.95e-310), its text for a NaN or an infinity, '-'
    when absent."""
    if raw is None:
        return "-"
    return "not run" if isinstance(parse_value(raw), int | float) else raw


@dataclass
class HpccRun:
    """One run of HPCC as its output file tells it.  The figures of a test that did not
    run (its size -1) and uninitialised performance figures are None in summary, their
    text kept in raw, and the test named in not_run (also when only part of it, one
    figure never written, did not run)."""

    summary: dict[str, int | float | str | None]
    raw: dict[str, str]  # the values as printed (non-finite numbers keep their text here)
    threshold: float = DEFAULT_THRESHOLD
    hpl_checks: list[tuple[float | None, bool]] = field(default_factory=list)
    version: str | None = None
    hostname: str | None = None
    not_run: list[str] = field(default_factory=list)

    def number(self, key: str) -> float | None:
        value = self.summary.get(key)
        return float(value) if isinstance(value, int | float) else None


Value = int | float | str | None  # a summary value (parse_value)


def parse_summary(lines: list[tuple[int, str]], source: str
                  ) -> tuple[dict[str, Value], dict[str, str]]:
    """The key=value lines of one summary section: (values, raw texts)."""
    values: dict[str, Value] = {}
    raw: dict[str, str] = {}
    for number, line in lines:
        key, sep, value = line.strip().partition("=")
        if not sep or not _KEY.fullmatch(key):
            raise HpccFormatError(f"{source}: line {number}: not key=value in the summary "
                                  "section")
        if len(value) > MAX_VALUE_CHARS:
            raise HpccFormatError(f"{source}: line {number}: value of {key} is over "
                                  f"{MAX_VALUE_CHARS} characters")
        if key in values:
            raise HpccFormatError(f"{source}: line {number}: {key} twice in one summary")
        if len(values) >= MAX_KEYS:
            raise HpccFormatError(f"{source}: over {MAX_KEYS} keys in one summary")
        values[key] = parse_value(value.strip())
        raw[key] = value.strip()
    return values, raw


def _chunks(text: str) -> list[tuple[list[str], list[tuple[int, str]]]]:
    """Per run: the lines before its summary section, and the summary's numbered lines."""
    runs: list[tuple[list[str], list[tuple[int, str]]]] = []
    before: list[str] = []
    summary: list[tuple[int, str]] = []
    inside = False
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        if stripped == BEGIN:
            if inside:
                raise HpccFormatError(f"line {number}: a summary section inside another")
            inside, summary = True, []
        elif stripped == END:
            if not inside:
                raise HpccFormatError(f"line {number}: end of a summary section never begun")
            runs.append((before, summary))
            if len(runs) > MAX_RUNS:
                raise HpccFormatError(f"over {MAX_RUNS} runs in one file")
            inside, before = False, []
        elif inside:
            summary.append((number, line))
        else:
            if RUN_HEADER in line:
                before = []
            before.append(line)
    if inside:
        raise HpccFormatError("the last summary section has no end (truncated file?)")
    return runs


def _tests_not_run(values: dict[str, Value]) -> list[str]:
    """The tests whose size is HPCC's initial -1 (HPL also by its -1 TFLOP/s)."""
    out = []
    for name, size_key in TEST_SIZES.items():
        size = values.get(size_key)
        ran = not isinstance(size, int | float) or size > 0
        if name == "HPL":
            tflops = values.get("HPL_Tflops")
            ran = ran and not (isinstance(tflops, int | float) and tflops < 0)
        if not ran:
            out.append(name)
    return out


def _blank_not_run(values: dict[str, Value]) -> list[str]:
    """Set to None what a run did not measure (see HpccRun); the tests not run."""
    tests = _tests_not_run(values)
    not_run = list(tests)
    for key, value in values.items():
        test = benchmark_of(key)
        if test in tests or (test is not None and info(key).role in PERFORMANCE
                             and is_uninitialised(value)):
            values[key] = None
            if test not in not_run:  # a figure never written: that part did not run
                not_run.append(test)
    return not_run


def _run_of(before: list[str], summary: list[tuple[int, str]], source: str) -> HpccRun:
    values, raw = parse_summary(summary, source)
    body = "\n".join(before)
    run = HpccRun(values, raw)
    run.not_run = _blank_not_run(values)
    found = _THRESHOLD.search(body)
    if found:
        try:
            run.threshold = float(found.group(1))
        except ValueError:
            pass
    for value, verdict in _HPL_CHECK.findall(body):
        number = parse_value(value)
        run.hpl_checks.append((float(number) if isinstance(number, int | float) else None,
                               verdict == "PASSED"))
    version = _VERSION_LINE.search(body)
    run.version = version.group(1) if version else _version_of(values)
    host = _HOSTNAME.search(body)
    run.hostname = host.group(1) if host else None
    return run


def _version_of(values: dict[str, Value]) -> str | None:
    parts = [values.get(k) for k in ("VersionMajor", "VersionMinor", "VersionMicro")]
    return ".".join(str(p) for p in parts) if all(isinstance(p, int) for p in parts) else None


def parse_runs(text: str, source: str = "hpccoutf.txt") -> list[HpccRun]:
    """Every run in an HPCC output file (HPCC appends); HpccFormatError if there is none
    or the file is not HPCC output."""
    try:
        chunks = _chunks(text)
    except HpccFormatError as exc:
        raise HpccFormatError(f"{source}: {exc}") from None
    if not chunks:
        raise HpccFormatError(f"{source}: no HPCC summary section (\"{BEGIN}\"): not HPCC "
                              "1.x output, or the run ended before its summary")
    runs = [_run_of(before, summary, source) for before, summary in chunks]
    for i, run in enumerate(runs, 1):
        if "Success" not in run.summary or "CommWorldProcs" not in run.summary:
            raise HpccFormatError(f"{source}: run {i}: the summary has no Success or "
                                  "CommWorldProcs: not HPCC 1.4-1.5 output")
        procs = run.summary["CommWorldProcs"]
        if not isinstance(procs, int) or procs < 1:  # every ratio of a scaling divides by it
            raise HpccFormatError(f"{source}: run {i}: CommWorldProcs="
                                  f"{run.raw['CommWorldProcs'][:20]} is not a process count")
    return runs


def looks_like_hpcc(text: str) -> bool:
    """Whether text is HPCC output (its summary section marker is there)."""
    return BEGIN in text


# --------------------------------------------------------------------------- checks


RESIDUAL_KEYS = ("HPL_RnormI", "HPL_AnormI", "HPL_XnormI", "HPL_BnormI", "HPL_eps", "HPL_N")


def hpl_residual(run: HpccRun) -> float | None:
    """HPL's scaled residual recomputed from the summary; None if a figure is missing or
    the denominator is zero (HPL did not run)."""
    found = [run.number(k) for k in RESIDUAL_KEYS]
    need = [v for v in found if v is not None]
    if len(need) < len(found):
        return None
    rnorm, anorm, xnorm, bnorm, eps, n = need
    denominator = eps * (anorm * xnorm + bnorm) * n
    if not denominator > 0:
        return None
    return rnorm / denominator


def _no_residual(run: HpccRun) -> str:
    """Why HPL's residual cannot be computed: it did not run, it failed (a NaN or an
    infinity among its figures), or the summary lacks a figure."""
    if "HPL" in run.not_run:
        return (f"HPL did not run (HPL_N={run.raw.get('HPL_N', '?')}, "
                f"HPL_Tflops={run.raw.get('HPL_Tflops', '?')})")
    bad = [f"{k}={run.raw[k]}" for k in RESIDUAL_KEYS
           if k in run.raw and run.summary.get(k) is None]
    if bad:
        return f"HPL failed: {', '.join(bad)} (not a number)"
    missing = [k for k in RESIDUAL_KEYS if k not in run.summary]
    if missing:
        return f"HPL residual cannot be computed: the summary has no {', '.join(missing)}"
    return "HPL residual cannot be computed from the summary (a zero norm)"


def failures(run: HpccRun) -> list[str]:
    """Why a run does not count (empty: it passed): Success must be 1, HPL must have run
    and its residual check passed, by the summary's figures and by HPL's own verdict when
    printed."""
    reasons = []
    if run.summary.get("Success") != 1:
        reasons.append(f"Success={run.raw.get('Success', '?')}: a test failed its own check")
    residual = hpl_residual(run)
    if residual is None:
        reasons.append(_no_residual(run))
    elif residual < 0:
        reasons.append(f"HPL scaled residual {residual:.4g} is negative: not HPL's figures")
    elif not residual < run.threshold:
        reasons.append(f"HPL scaled residual {residual:.4g} is not below {run.threshold:g}")
    if any(not passed for _, passed in run.hpl_checks):
        reasons.append("HPL printed FAILED for its residual check")
    return reasons


# --------------------------------------------------------------------------- input


@dataclass(frozen=True)
class Input:
    """The figures of an ``hpccinf.txt`` beoperf writes: one HPL problem (N, NB) on one
    P x Q grid; PTRANS takes N/2 from it (HPCC's default when no sizes of its own)."""

    n: int
    nb: int
    p: int
    q: int
    threshold: float = DEFAULT_THRESHOLD

    def __post_init__(self) -> None:
        for name in ("n", "nb", "p", "q"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1 or value > 10**8:
                raise ValueError(f"hpccinf.txt: {name.upper()} {value!r} must be an integer "
                                 "from 1 to 10^8")
        if not (math.isfinite(self.threshold) and self.threshold > 0):
            raise ValueError(f"hpccinf.txt: threshold {self.threshold!r} must be above 0")

    def text(self) -> str:
        """The file: HPL's 31 lines, then HPCC's 4 for PTRANS (none of its own)."""
        rows = [
            ("HPLinpack benchmark input file", None),
            ("written by beoperf cluster hpcc", None),
            ("HPL.out", "output file name (HPCC writes hpccoutf.txt)"),
            ("8", "device out (6=stdout,7=stderr,file)"),
            ("1", "# of problems sizes (N)"), (str(self.n), "Ns"),
            ("1", "# of NBs"), (str(self.nb), "NBs"),
            ("0", "PMAP process mapping (0=Row-,1=Column-major)"),
            ("1", "# of process grids (P x Q)"), (str(self.p), "Ps"), (str(self.q), "Qs"),
            (f"{self.threshold:g}", "threshold"),
            ("1", "# of panel fact"), ("2", "PFACTs (0=left, 1=Crout, 2=Right)"),
            ("1", "# of recursive stopping criterium"), ("4", "NBMINs (>= 1)"),
            ("1", "# of panels in recursion"), ("2", "NDIVs"),
            ("1", "# of recursive panel fact."), ("1", "RFACTs (0=left, 1=Crout, 2=Right)"),
            ("1", "# of broadcast"), ("1", "BCASTs (0=1rg,1=1rM,2=2rg,3=2rM,4=Lng,5=LnM)"),
            ("1", "# of lookahead depth"), ("1", "DEPTHs (>=0)"),
            ("2", "SWAP (0=bin-exch,1=long,2=mix)"), ("64", "swapping threshold"),
            ("0", "L1 in (0=transposed,1=no-transposed) form"),
            ("0", "U  in (0=transposed,1=no-transposed) form"),
            ("1", "Equilibration (0=no,1=yes)"), ("8", "memory alignment in double (> 0)"),
            ("##### line 32 is ignored by HPCC #####", None),
            ("0", "Number of additional problem sizes for PTRANS"),
            ("0", "values of N"),
            ("0", "number of additional blocking sizes for PTRANS"),
            ("0", "values of NB"),
        ]
        return "".join(f"{v:<13}{c}\n" if c else f"{v}\n" for v, c in rows)


def square_grid(processes: int) -> tuple[int, int]:
    """The most square P x Q = processes with P <= Q (HPL prefers the flatter side)."""
    if processes < 1:
        raise ValueError(f"process count {processes} must be at least 1")
    p = max(d for d in range(1, math.isqrt(processes) + 1) if processes % d == 0)
    return p, processes // p


def n_for_memory(memory_bytes: float, nb: int) -> int:
    """The largest multiple of NB whose N x N matrix of doubles fits in memory_bytes
    (HPCC's other tests are sized from HPL's matrix: PTRANS takes two of N/2, and the
    local tests about as much as one process's share); at least NB."""
    n = math.isqrt(max(0, int(memory_bytes // 8)))
    return max(nb, n // nb * nb)
