"""Side-by-side benchmark of ``beoperf cluster coll`` against IMB-MPI1 and the OSU
Micro-Benchmarks, both built here from sources the developer fetched.

For each MPI (Open MPI, MPICH), each place (``shm``: every rank on this host;
``netns``: one rank on each of NP network-namespace hosts on a bridge, tests/netns.py)
and each process count NP, in ``--rounds`` rounds that alternate the tools' order, so
that both see the same machine:

- OSU: ``osu_allreduce|osu_alltoall|osu_bcast -m S:S -i I -x W -f`` per size (one job
  a collective and size; allreduce on MPI_FLOAT with ``-T mpi_float`` where the version
  has it); its "Avg Latency" is the mean over the ranks of each rank's mean time per call;
- IMB: ``IMB-MPI1 -npmin NP -msglen FILE -iter I -iter_policy off -sync on
  -red_data_type double Allreduce Alltoall Bcast`` per size (one job a size: the
  iterations are OSU's for that size; reductions on MPI_DOUBLE as beoperf's, where the
  version has the option); its t_avg[usec] is the same statistic;
- beoperf: ``beoperf cluster coll --ops ... --sizes ... --time-budget B`` (one job for
  all collectives and sizes); its t_avg is the median over the precision loop's trials of
  each trial's mean over the ranks of each rank's mean time per call, with its 95%
  interval.

The iterations per size are OSU's defaults (1000 and 100 warm-up calls up to 8 KiB, 100
and 10 above), given to OSU and IMB alike.  Every tool starts through the same launcher
command (beoperf's launch layer builds it: ``--host localhost:NP --bind-to none`` here,
an rsh agent, TCP only and the namespace interface across the bridge).

Building (into ``--build``, a scratch directory; nothing of theirs enters this
repository): IMB with its Makefile (``make IMB-MPI1 CC=mpicc.X CXX=mpicxx.X``), OSU with
its configure (``autoreconf -fi`` first when the tree has none; that needs libtool) and
make, once per MPI.  When the MPI's development headers are not installed (Debian:
libopenmpi-dev, libmpich-dev), ``--mpi-dev DIR`` names a directory where those packages
were unpacked without installing them (``apt-get download libopenmpi-dev libmpich-dev;
for d in *.deb; do dpkg -x $d DIR; done``): the compiler wrappers then get that tree's
include directories and a directory of links to the installed libraries' versioned files.

Usage::

    python bench/bench_coll.py --imb-src DIR --osu-src DIR [--mpi-dev DIR]
        [--impls openmpi,mpich] [--places shm,netns] [--np 2,4] [--rounds 2]
        [--time-budget 20] [--build /tmp/beoperf-bench-coll] [--out bench/out]
    python bench/bench_coll.py --report OUT/coll-results-<UTC>.json

Prints a Markdown table per MPI and place (beoperf's t_avg with its interval, OSU's
Avg Latency, IMB's t_avg, the ratios, each round's figures) and the load average before,
during and after; writes the raw figures and every command to OUT/coll-results-<UTC>.json.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

from bench_pingpong import LoadSampler  # noqa: E402

import netns  # noqa: E402
from beoperf.launch.base import LaunchSpec  # noqa: E402
from beoperf.launch.mpirun import Mpich, OpenMpi  # noqa: E402
from beoperf.model import coll_import  # noqa: E402
from helpers import child_env  # noqa: E402
from mpi_helpers import write_agent  # noqa: E402

OPS = ("allreduce", "alltoall", "bcast")
IMB_NAME = {"allreduce": "Allreduce", "alltoall": "Alltoall", "bcast": "Bcast"}
SIZES = (8, 1 << 20)
# a reference job's limit: MPICH over the namespace link hung in MPI_Finalize after
# printing (IMB) or in the measurement (osu_alltoall, np 4) for minutes
REF_TIMEOUT_S = 120
LARGE = 8192  # OSU's LARGE_MESSAGE_SIZE: its iterations change above it
ITERS = {False: (1000, 100), True: (100, 10)}  # OSU's defaults: (-i, -x) small, large
NET_ENV = {"openmpi": {"OMPI_MCA_btl": "tcp,self"},
           "mpich": {"UCX_TLS": "tcp,self", "UCX_NET_DEVICES": "eth0"}}
SHOW = {"openmpi": "--showme", "mpich": "-show"}
LIBDIR = Path("/usr/lib/x86_64-linux-gnu")


class BenchError(RuntimeError):
    """A step failed: the message says which, in one line."""


def sh(argv: Sequence[str], cwd: Path | None = None, timeout: float = 1800,
       env: dict[str, str] | None = None) -> str:
    """Run a build step; its output on failure (last lines) in one BenchError."""
    proc = subprocess.run(list(argv), cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)
    if proc.returncode != 0:
        tail = " | ".join((proc.stdout + proc.stderr).strip().splitlines()[-4:])
        raise BenchError(f"{' '.join(argv[:3])}... in {cwd}: exit {proc.returncode}: {tail}")
    return proc.stdout


# --------------------------------------------------------------------------- building


def compilers(impl: str, dev: Path | None, scratch: Path) -> dict[str, str]:
    """CC and CXX for this MPI: its wrappers, with --mpi-dev's headers and links to the
    installed libraries when the wrappers cannot compile on their own."""
    cc, cxx = f"mpicc.{impl}", f"mpicxx.{impl}"
    if shutil.which(cc) is None or shutil.which(cxx) is None:
        raise BenchError(f"{cc} or {cxx} not found: install {impl}")
    # the C++ bindings of Open MPI 4's headers fail IMB's -Werror: IMB uses the C API
    skip = "-DOMPI_SKIP_MPICXX=1 -DMPICH_SKIP_MPICXX=1"
    extra = ""
    probe = scratch / "probe.c"
    probe.write_text("#include <mpi.h>\nint main(int c, char **v) { MPI_Init(&c, &v); "
                     "MPI_Finalize(); return 0; }\n")
    try:
        sh([cc, str(probe), "-o", str(scratch / "probe")], cwd=scratch)
    except BenchError:
        if dev is None:
            raise BenchError(f"{cc} cannot build an MPI program (no mpi.h?): install the "
                             f"MPI's development package, or give --mpi-dev DIR (see "
                             f"--help)") from None
        extra = shim(impl, dev, scratch)
        sh([*f"{cc} {extra}".split(), str(probe), "-o", str(scratch / "probe")], cwd=scratch)
    return {"CC": f"{cc} {extra}".strip(), "CXX": f"{cxx} {extra} {skip}".strip()}


def shim(impl: str, dev: Path, scratch: Path) -> str:
    """-I for the wrappers' include directories under DEV, -L for a directory of
    lib<name>.so links to the installed lib<name>.so.<version> (the development packages'
    own links are relative to /usr and broken once unpacked elsewhere)."""
    words = [*sh([f"mpicc.{impl}", SHOW[impl]]).split(),
             *sh([f"mpicxx.{impl}", SHOW[impl]]).split()]
    incs = [f"-I{dev}{w[2:]}" for w in dict.fromkeys(words) if w.startswith("-I")
            and (dev / w[2:].lstrip("/")).is_dir()]
    if not incs:
        raise BenchError(f"--mpi-dev {dev}: none of {impl}'s include directories in it")
    links = scratch / "lib"
    links.mkdir(exist_ok=True)
    for name in dict.fromkeys(w[2:] for w in words if w.startswith("-l")):
        if (LIBDIR / f"lib{name}.so").exists() or (links / f"lib{name}.so").exists():
            continue
        found = sorted(LIBDIR.glob(f"lib{name}.so.*"), key=lambda p: len(p.name))
        if found:
            (links / f"lib{name}.so").symlink_to(found[0])
    return " ".join([*incs, f"-L{links}"])


def build_imb(src: Path, scratch: Path, cc: dict[str, str]) -> Path:
    tree = scratch / "imb"
    binary = tree / "IMB-MPI1"
    if binary.exists():
        return binary
    shutil.rmtree(tree, ignore_errors=True)
    shutil.copytree(src, tree, ignore=shutil.ignore_patterns(".git"))
    sh(["make", "IMB-MPI1", f"CC={cc['CC']}", f"CXX={cc['CXX']}"], cwd=tree)
    if not binary.exists():
        raise BenchError(f"IMB's make left no {binary}")
    return binary


def build_osu(src: Path, scratch: Path, cc: dict[str, str]) -> dict[str, Path]:
    tree = scratch / "osu"
    found = osu_binaries(tree)
    if len(found) == len(OPS):
        return found
    shutil.rmtree(tree, ignore_errors=True)
    shutil.copytree(src, tree, ignore=shutil.ignore_patterns(".git"))
    if not (tree / "configure").exists():
        sh(["autoreconf", "-fi"], cwd=tree)
    sh(["./configure", f"CC={cc['CC']}", f"CXX={cc['CXX']}"], cwd=tree)
    sh(["make", "-j2"], cwd=tree)
    found = osu_binaries(tree)
    if len(found) != len(OPS):
        raise BenchError(f"OSU's make left no osu_{'/'.join(OPS)} in {tree}")
    return found


def osu_binaries(tree: Path) -> dict[str, Path]:
    """osu_allreduce ... (7.x: c/mpi/collective/blocking/, 5.x: mpi/collective/)."""
    out: dict[str, Path] = {}
    for op in OPS:
        for p in sorted(tree.rglob(f"osu_{op}")) if tree.is_dir() else []:
            if p.is_file() and os.access(p, os.X_OK):
                out[op] = p
    return out


def imb_has_red_types(tree: Path) -> bool:
    """Whether this IMB takes -red_data_type (IMB 2019 on): its reductions then sum
    MPI_DOUBLEs as beoperf's do, else MPI_FLOATs."""
    return any("red_data_type" in p.read_text(errors="replace")
               for p in tree.rglob("MPI1_suite.cpp"))


def osu_has_types(tree: Path) -> bool:
    """Whether this OSU takes -T (a datatype; 7.x), else allreduce is on MPI_FLOAT."""
    return any("case 'T'" in p.read_text(errors="replace")
               for p in tree.rglob("osu_util.c"))


# --------------------------------------------------------------------------- places


class Place:
    """Where the ranks go: this host (``hosts`` None), or NP namespace hosts."""

    def __init__(self, name: str, hosts: list[Any] | None = None, agent: str | None = None):
        self.name, self.hosts, self.agent = name, hosts, agent

    def launch(self, impl: str, np_: int, argv: Sequence[str]) -> tuple[list[str], dict]:
        """The reference's command, as beoperf's launch layer makes its own, and the
        variables it needs in its environment (Open MPI exports -x VAR from there)."""
        launcher = OpenMpi() if impl == "openmpi" else Mpich()
        if self.hosts is None:
            spec = LaunchSpec(tuple(argv), hosts=("localhost",), ranks_per_host=np_,
                              bind="none")
        else:
            spec = LaunchSpec(tuple(argv), hosts=tuple(h.addr4 for h in self.hosts[:np_]),
                              bind="none", agent=self.agent, interface="eth0",
                              env=NET_ENV[impl])
        made = launcher.command(spec)
        return self.wrap(list(made.argv)), dict(made.env)

    def beoperf(self, impl: str, np_: int, args: Sequence[str]) -> list[str]:
        argv = [sys.executable, "-m", "beoperf", "cluster", "coll", "--mpi", impl,
                "--bind-to", "none"]
        if self.hosts is None:
            argv += ["--ranks-per-node", str(np_)]
        else:
            argv += ["--hosts", ",".join(h.addr4 for h in self.hosts[:np_]),
                     "--mpi-agent", str(self.agent), "--mpi-interface", "eth0"]
            for key, value in NET_ENV[impl].items():
                argv += ["--mpi-env", f"{key}={value}"]
        return self.wrap([*argv, *args])

    def wrap(self, argv: list[str]) -> list[str]:
        return argv if self.hosts is None else self.hosts[0].argv(argv)


@contextlib.contextmanager
def place_of(name: str, most: int, raw: Path) -> Iterator[Place]:
    if name == "shm":
        yield Place("shm")
        return
    if name != "netns":
        raise BenchError(f"--places {name}: shm or netns")
    with netns.VethPair(max(2, most)) as topo:
        yield Place("netns", topo.hosts, write_agent(raw / "agent", topo.hosts))


# --------------------------------------------------------------------------- running


HUNG: list[str] = []


def run(argv: list[str], env: dict[str, str], timeout: float, out: Path) -> str:
    """Run in a process group of its own (killed whole at the timeout, and noted); its
    standard output, also written to OUT."""
    full = child_env(os.environ | env)  # a child beoperf imports this one
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=full, start_new_session=True)
    try:
        stdout, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        stdout, err = proc.communicate()
        HUNG.append(" ".join(argv))
    except BaseException:  # interrupted: the job in its own session must not live on
        os.killpg(proc.pid, signal.SIGKILL)
        raise
    out.write_text(stdout + ("\n# stderr:\n" + err if err.strip() else ""))
    if proc.returncode not in (0, -9):
        raise BenchError(f"{' '.join(argv[:6])}... exited {proc.returncode}: "
                         f"{' | '.join(err.strip().splitlines()[-3:])}")
    return stdout


def osu_avg(text: str, size: int) -> float | None:
    """OSU's "Avg Latency(us)" of SIZE, in seconds."""
    for line in text.splitlines():
        words = line.split()
        if len(words) >= 2 and words[0] == str(size):
            return float(words[1]) * 1e-6
    return None


def imb_avg(text: str) -> dict[tuple[str, int, int], tuple[float, int]]:
    """IMB's t_avg[usec] per (benchmark, #processes, #bytes), in seconds, with its
    #repetitions."""
    out, bench, procs = {}, None, None
    for line in text.splitlines():
        if m := re.match(r"#\s*Benchmarking\s+(\w+)", line):
            bench = m.group(1)
        elif m := re.match(r"#\s*#processes\s*=\s*(\d+)", line):
            procs = int(m.group(1))
        elif bench and procs and re.fullmatch(r"\s*\d+(\s+[\d.]+){4}\s*", line):
            b, reps, _tmin, _tmax, tavg = line.split()
            out[(bench, procs, int(b))] = (float(tavg) * 1e-6, int(reps))
    return out


IMPORTED: list[dict] = []  # each reference figure as `cluster coll --import` reads it


def cross_check(path: Path, np_: int, op: str, size: int, ours: float | None) -> None:
    """What beoperf's importer (`cluster coll --import`) reads from the same file, beside
    this script's own reading of it: the two must agree."""
    try:
        found = coll_import.read(path, np_)
        got = next((p.t_avg_s.median for p in found.points.get(np_, [])
                    if p.op == op and p.bytes == size), None)
        IMPORTED.append({"file": str(path), "op": op, "size": size, "np": np_,
                         "bench_s": ours, "import_s": got})
    except Exception as exc:  # noqa: BLE001 - recorded, the benchmark goes on
        IMPORTED.append({"file": str(path), "op": op, "size": size, "np": np_,
                         "bench_s": ours, "import_error": str(exc)})


def iters(size: int) -> tuple[int, int]:
    return ITERS[size > LARGE]


def osu_round(place: Place, impl: str, np_: int, tools: dict, raw: Path, tag: str) -> dict:
    out = {}
    for op in OPS:
        for size in SIZES:
            i, x = iters(size)
            opts = ["-m", f"{size}:{size}", "-i", str(i), "-x", str(x), "-f"]
            if op == "allreduce" and tools["osu_types"]:
                opts += ["-T", "mpi_float"]
            argv, env = place.launch(impl, np_, [str(tools["osu"][op]), *opts])
            path = raw / f"{tag}-osu-{op}-{size}.txt"
            avg = osu_avg(run(argv, env, REF_TIMEOUT_S, path), size)
            cross_check(path, np_, op, size, avg)
            out[f"{op}/{size}"] = {"avg_s": avg, "iters": i, "warmup": x, "cmd": argv}
    return out


def imb_round(place: Place, impl: str, np_: int, tools: dict, raw: Path, tag: str) -> dict:
    out = {}
    for size in SIZES:
        lengths = raw / f"msglen-{size}"
        lengths.write_text(f"{size}\n")
        i, _x = iters(size)
        argv, env = place.launch(impl, np_, [
            str(tools["imb"]), "-npmin", str(np_), "-msglen", str(lengths), "-iter", str(i),
            "-iter_policy", "off", "-sync", "on",
            *(["-red_data_type", "double"] if tools["imb_double"] else []),
            *(IMB_NAME[op] for op in OPS)])
        path = raw / f"{tag}-imb-{size}.txt"
        got = imb_avg(run(argv, env, REF_TIMEOUT_S, path))
        for op in OPS:
            avg, reps = got.get((IMB_NAME[op], np_, size), (None, None))
            cross_check(path, np_, op, size, avg)
            out[f"{op}/{size}"] = {"avg_s": avg, "reps": reps, "cmd": argv}
    return out


def beoperf_round(place: Place, impl: str, np_: int, budget: float, raw: Path,
                  tag: str) -> dict:
    doc_path = raw / f"{tag}-beoperf.json"
    argv = place.beoperf(impl, np_, ["--ops", ",".join(OPS), "--sizes",
                                     ",".join(map(str, SIZES)), "--time-budget", str(budget),
                                     "--quiet", "--format", "json", "-o", str(doc_path)])
    run(argv, {}, 3 * budget + 180, raw / f"{tag}-beoperf.txt")
    (series,) = json.loads(doc_path.read_text())["body"]["series"]
    out: dict[str, Any] = {"status": series["status"], "cmd": argv}
    for p in series["collectives"]:
        t = p["t_avg_s"]
        out[f"{p['op']}/{p['size']}"] = {
            "avg_s": t["median"], "ci_low_s": t.get("ci_low"), "ci_high_s": t.get("ci_high"),
            "trial_min_s": t["min"], "trial_max_s": t["max"], "trials": p["trials"],
            "calls": p["calls"], "corrupt": p["corrupt"], "checked": p["checked"]}
    return out


def bench(place: Place, impl: str, np_: int, rounds: int, budget: float, tools: dict,
          raw: Path) -> list[dict]:
    """The rounds: OSU, IMB and beoperf, in turn, beoperf first in every other round."""
    done = []
    for k in range(rounds):
        tag = f"{place.name}-{impl}-np{np_}-r{k}"
        steps = [("osu", lambda t=tag: osu_round(place, impl, np_, tools, raw, t)),
                 ("imb", lambda t=tag: imb_round(place, impl, np_, tools, raw, t)),
                 ("beoperf", lambda t=tag: beoperf_round(place, impl, np_, budget, raw, t))]
        if k % 2:
            steps.reverse()
        one: dict[str, Any] = {"load_before": loadavg()}
        for name, step in steps:
            began = time.monotonic()
            one[name] = step()
            one[f"{name}_wall_s"] = time.monotonic() - began
        one["load_after"] = loadavg()
        done.append(one)
        print(f"done {tag} (load {one['load_before']:.2f} -> {one['load_after']:.2f})",
              file=sys.stderr, flush=True)
    return done


def loadavg() -> float:
    return float(Path("/proc/loadavg").read_text().split()[0])


# --------------------------------------------------------------------------- the table


def us(x: float | None) -> str:
    return "-" if x is None else f"{x * 1e6:.2f}"


def ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or not b else f"{a / b:.3f}"


def median_of(rounds: list[dict], tool: str, key: str) -> float | None:
    got = [r[tool][key]["avg_s"] for r in rounds if r[tool].get(key, {}).get("avg_s")]
    return statistics.median(got) if got else None


def least_of(rounds: list[dict], tool: str, key: str) -> float | None:
    """The tool's fastest round (NetPIPE's statistic over rounds: on a VM whose vCPUs
    change placement between runs, the rounds in its fastest state)."""
    got = [r[tool][key]["avg_s"] for r in rounds if r[tool].get(key, {}).get("avg_s")]
    return min(got) if got else None


def markdown(results: dict) -> str:
    lines = []
    for where, by_np in results["runs"].items():
        lines += [f"\n**{where}** (figures: medians over the rounds; per round: beoperf / "
                  f"OSU / IMB, us)\n",
                  "| test | np | size | beoperf t_avg us [95% interval] | OSU avg us | "
                  "IMB t_avg us | beoperf/OSU | beoperf/IMB | OSU/IMB | fastest rounds: "
                  "beoperf/OSU, beoperf/IMB | rounds |",
                  "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
        for np_, rounds in by_np.items():
            for op in OPS:
                for size in SIZES:
                    key = f"{op}/{size}"
                    b, o, i = (median_of(rounds, t, key) for t in ("beoperf", "osu", "imb"))
                    ivs = [(r["beoperf"][key]["ci_low_s"], r["beoperf"][key]["ci_high_s"])
                           for r in rounds if key in r["beoperf"]]
                    lo = min((v[0] for v in ivs if v[0] is not None), default=None)
                    hi = max((v[1] for v in ivs if v[1] is not None), default=None)
                    per = "; ".join(" / ".join(us(r[t].get(key, {}).get("avg_s"))
                                               for t in ("beoperf", "osu", "imb"))
                                    for r in rounds)
                    fb, fo, fi = (least_of(rounds, t, key) for t in ("beoperf", "osu", "imb"))
                    lines.append(f"| {op} | {np_} | {size} | {us(b)} [{us(lo)}, {us(hi)}] | "
                                 f"{us(o)} | {us(i)} | {ratio(b, o)} | {ratio(b, i)} | "
                                 f"{ratio(o, i)} | {ratio(fb, fo)}, {ratio(fb, fi)} | {per} |")
        loads = [(r["load_before"], r["load_after"]) for rs in by_np.values() for r in rs]
        lines.append("\nLoad average (1 min) before/after each round: "
                     + ", ".join(f"{a:.2f}/{b:.2f}" for a, b in loads))
    sampled = results.get("load_average") or [0.0]
    lines.append(f"\nLoad average: {results['load_before']:.2f} before, "
                 f"{results['load_after']:.2f} after; sampled every 5 s during the run "
                 f"{min(sampled):.2f}-{max(sampled):.2f}, median "
                 f"{statistics.median(sampled):.2f}.")
    checked = results.get("imported", [])
    wrong = [c for c in checked if c.get("import_s") is None or c.get("bench_s") is None
             or abs(c["import_s"] - c["bench_s"]) > 1e-12 + 1e-9 * c["bench_s"]]
    lines.append(f"`beoperf cluster coll --import` read {len(checked) - len(wrong)} of "
                 f"{len(checked)} reference figures as this script did"
                 + "".join(f"; differs: {c}" for c in wrong[:5]) + ".")
    if results.get("hung_and_killed"):
        lines.append(f"Ended at their timeout: {len(results['hung_and_killed'])} jobs.")
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------- main


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--imb-src", type=Path, help="IMB's source tree (intel/mpi-benchmarks)")
    p.add_argument("--osu-src", type=Path, help="the OSU Micro-Benchmarks' source tree")
    p.add_argument("--mpi-dev", type=Path, help="the MPI development packages unpacked "
                   "(when not installed; see the module's text)")
    p.add_argument("--build", type=Path, default=Path("/tmp/beoperf-bench-coll"),
                   help="scratch directory for the builds (default %(default)s)")
    p.add_argument("--impls", default="openmpi,mpich")
    p.add_argument("--places", default="shm,netns")
    p.add_argument("--np", default="2,4")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--time-budget", type=float, default=20.0,
                   help="beoperf's, per job (default %(default)s)")
    p.add_argument("--build-only", action="store_true", help="build, run nothing")
    p.add_argument("--out", type=Path, default=REPO / "bench" / "out")
    p.add_argument("--report", metavar="JSON", help="print an earlier run's tables")
    return p.parse_args(argv)


def tools_of(args: argparse.Namespace, impl: str) -> dict:
    for flag, path in (("--imb-src", args.imb_src), ("--osu-src", args.osu_src)):
        if path is None or not path.is_dir():
            raise BenchError(f"{flag} {path}: give the source directory")
    scratch = args.build.resolve() / impl
    scratch.mkdir(parents=True, exist_ok=True)
    cc = compilers(impl, args.mpi_dev.resolve() if args.mpi_dev else None, scratch)
    osu = build_osu(args.osu_src.resolve(), scratch, cc)
    return {"imb": build_imb(args.imb_src.resolve(), scratch, cc), "osu": osu,
            "osu_types": osu_has_types(scratch / "osu"),
            "imb_double": imb_has_red_types(scratch / "imb"), "cc": cc}


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    if args.report:
        print(markdown(json.loads(Path(args.report).read_text())))
        return 0
    impls = [s for s in args.impls.split(",") if s]
    nps = [int(s) for s in args.np.split(",") if s]
    tools = {impl: tools_of(args, impl) for impl in impls}
    if args.build_only:
        print(json.dumps({i: {k: str(v) for k, v in t.items()} for i, t in tools.items()},
                         indent=1))
        return 0
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    raw = args.out.resolve() / f"coll-raw-{stamp}"
    raw.mkdir(parents=True, exist_ok=True)
    results: dict[str, Any] = {"utc_start": stamp, "argv": sys.argv, "runs": {},
                               "load_before": loadavg(), "iterations": {
                                   str(s): iters(s) for s in SIZES}}
    with LoadSampler() as load:
        for name in args.places.split(","):
            with place_of(name, max(nps), raw) as place:
                for impl in impls:
                    results["runs"][f"{name}/{impl}"] = {
                        np_: bench(place, impl, np_, args.rounds, args.time_budget,
                                   tools[impl], raw) for np_ in nps}
    results.update(load_after=loadavg(), load_average=load.samples, hung_and_killed=HUNG,
                   imported=IMPORTED,
                   tools={i: {k: str(v) for k, v in t.items()} for i, t in tools.items()})
    path = args.out / f"coll-results-{stamp}.json"
    path.write_text(json.dumps(results, indent=1))
    print(markdown(results))
    print(f"raw figures: {path}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BenchError as exc:
        print(f"bench_coll: {exc}", file=sys.stderr)
        sys.exit(1)
