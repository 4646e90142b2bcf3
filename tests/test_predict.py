"""`beoperf predict` and `beoperf replay` without shaped links: profiles read from every
format, the prediction's arithmetic on models whose truth is known, the claims, the
scaling, Amdahl, the CLI's errors, and a replay on loopback.  The validation on shaped
namespace links is tests/test_predict_netns.py."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from tests.helpers import checked, cli, save_run

from beoperf.analysis import predict
from beoperf.model.pingpong import RunResult, SizeResult
from beoperf.model.profile import Entry, Profile, ProfileError, parse_csv, parse_mpip, read_profile

FIXTURES = Path(__file__).parent / "fixtures"
SIZES = sorted({2**k for k in range(19)} | {1536})  # 1 B .. 256 KiB


def wire_us(n: int, alpha: float = 20.0, rate: float = 1e8, free: int = 0) -> float:
    """A link whose time is alpha plus the bytes beyond ``free`` at ``rate`` bit/s."""
    return alpha + max(0, n - free) * 8e6 / rate


def run_of(times: dict[int, float], mtu: int | None = None, mss: int | None = None,
           mode: str = "pingpong") -> RunResult:
    sizes = [SizeResult(size=n, samples=60, trials=6, reps=60,
                        time_us={"median": t, "mean": t, "min": t, "p90": t, "p99": t},
                        ci95_halfwidth_us=None, ci95_relative=None, converged=True,
                        throughput_bps={"from_median": n * 8e6 / t})
             for n, t in sorted(times.items())]
    local = {"interface": {"mtu": mtu}, "socket": {"mss": mss}} if mtu else {}
    return RunResult(parameters={"mode": mode}, local=local, remote={},
                     meta={"peer": "198.18.0.1 port 5202"}, sizes=sizes)


def prof(*entries: Entry) -> Profile:
    return Profile("test", "csv", list(entries))


# --------------------------------------------------------------------------- profiles


def test_csv_with_a_header_in_any_order_units_and_comments():
    p = parse_csv("# an app\ncount,size,pattern\n10,64K,stream  # halo\n3,8,\n", "app.csv")
    assert [(e.size, e.count, e.pattern, e.concurrency) for e in p.entries] == \
        [(65536, 10, "stream", 1), (8, 3, "pingpong", 1)]


def test_csv_without_a_header_is_size_count_pattern_concurrency():
    p = parse_csv("1024,5,bidir,4\n16,1e3\n", "x")
    assert [(e.size, e.count, e.pattern, e.concurrency) for e in p.entries] == \
        [(1024, 5, "bidir", 4), (16, 1000, "pingpong", 1)]


@pytest.mark.parametrize("text, message", [
    ("size,count\n64,0\n", "x: line 2: count 0: give a whole number"),
    ("size,count\n64,2.5\n", "x: line 2: '2.5' is not a whole number"),
    ("size,count,pattern\n64,10,warp\n", "x: line 2: pattern 'warp': choose pingpong, "
                                          "stream, bidir"),
    ("sizes,n\n1,2\n", "x: line 1: header 'sizes,n': name the columns size and count"),
    ("size,count\n", "x: no messages (a header only)"),
    ("", "x: no messages (an empty profile)"),
    ("64,1,pingpong,1,9\n", "x: line 1: '64,1,pingpong,1,9': expected size,count,pattern,"
                           "concurrency"),
])
def test_csv_errors_name_the_line(text, message):
    with pytest.raises(ProfileError) as err:
        parse_csv(text, "x")
    assert str(err.value).startswith(message), str(err.value)


def test_imb_run_is_the_profile_of_its_own_messages():
    p = read_profile(str(FIXTURES / "imb-2021-pingpong.txt"))
    assert p.format == "imb" and all(e.pattern == "pingpong" for e in p.entries)
    first = next(e for e in p.entries if e.size == 1)
    assert first.count == 2 * 1000  # 1000 repetitions, a round trip each
    assert "2 messages" in p.notes[0]


def test_osu_files_take_osu_default_loops():
    lat = read_profile(str(FIXTURES / "osu_latency-5.6.3.txt"))
    counts = {e.size: e.count for e in lat.entries}
    assert counts[8192] == 20_000 and counts[16384] == 2_000
    bw = read_profile(str(FIXTURES / "osu_bw-7.4.txt"))
    assert {e.pattern for e in bw.entries} == {"stream"}
    assert {e.size: e.count for e in bw.entries}[1] == 100 * 64
    assert any("defaults are assumed" in n for n in lat.notes)


@pytest.mark.parametrize("name, what", [
    ("osu_bibw-7.4-openmpi-shm.txt", "osu_bibw"),
    ("osu_mbw_mr-7.4-openmpi-shm.txt", "osu_mbw_mr"),
    ("imb-2021-pingping-sendrecv-exchange-openmpi-shm.txt", "IMB PingPing"),
])
def test_benchmarks_that_are_not_a_ping_pong_or_osu_bw_are_refused_as_profiles(name, what):
    with pytest.raises(ProfileError) as err:
        read_profile(str(FIXTURES / name))
    message = str(err.value)
    assert message.startswith(f"{FIXTURES / name}: {what}") and "\n" not in message
    assert "IMB PingPong, osu_latency or osu_bw" in message


def test_predict_refuses_an_imb_exchange_profile(tmp_path):
    """The real IMB file cut to its Exchange benchmark (as tests/test_importers_mpi.py)."""
    text = (FIXTURES / "imb-2021-pingping-sendrecv-exchange-openmpi-shm.txt").read_text()
    blocks = re.split(r"(?=^#-+\n# Benchmarking )", text, flags=re.M)
    path = tmp_path / "imb-exchange.txt"
    path.write_text(blocks[0] + next(b for b in blocks if "# Benchmarking Exchange" in b))
    res = cli("predict", "--profile", str(path), "--model", "alpha=10us,bw=1G")
    assert res.status != 0 and res.stdout == ""
    assert len(res.error_lines) == 1 and "IMB Exchange (two messages out" in res.stderr


def printf(fmt: str, *args: object) -> str:
    """C's printf, as mpiP formats its report (its own format strings, kept verbatim)."""
    return fmt % args  # noqa: UP031


def mpip_report(callsites: bool = True) -> str:
    """An mpiP 3.5 report written with mpiP's own printf formats (report.c:
    print_section_heading, MPIP_AGGREGATE_MESS_FMT, MPIP_CALLSITE_MESS_*_FMT)."""
    def heading(name: str) -> str:
        return "-" * 75 + "\n" + f"@--- {name} ".ljust(75, "-") + "\n" + "-" * 75 + "\n"

    out = ["@ mpiP\n@ Command : ./halo \n@ Version                  : 3.5.0\n"
           "@ MPI Task Assignment      : 0 node01\n@ MPI Task Assignment      : 1 node02\n",
           heading("MPI Time (seconds)"), "Task    AppTime    MPITime     MPI%\n",
           printf("%4d %10.3g %10.3g    %5.2f\n", 0, 100.0, 12.5, 12.5),
           heading("Aggregate Sent Message Size (top twenty, descending, bytes)"),
           printf("%-20s %4s %10s %10s %10s %6s\n", "Call", "Site", "Count", "Total", "Avrg",
                  "Sent%")]
    sites = [("Isend", 3, 4000, 262144.0, 262144.0), ("Send", 7, 100, 100.0, 3000.0),
             ("Allreduce", 2, 500, 8.0, 8.0)]
    for call, site, count, lo, hi in sites:
        mean = (lo + hi) / 2
        out.append(printf("%-20s %4d %10d %10.3g %10.3g %6.2f\n", call, site, count,
                          mean * count, mean, 10.0))
    if callsites:
        out += [heading("Callsite Message Sent statistics (all, sent bytes)"),
                printf("%-17s %4s %4s %7s %9s %9s %9s %9s\n", "Name", "Site", "Rank", "Count",
                       "Max", "Mean", "Min", "Sum")]
        for call, site, count, lo, hi in sites:
            mean = (lo + hi) / 2
            for rank in (0, 1):
                out.append(printf("%-17s %4d %4d %7d %9.4g %9.4g %9.4g %9.4g\n", call, site,
                                  rank, count // 2, hi, mean, lo, mean * count / 2))
            out.append(printf("%-17s %4d %4s %7d %9.4g %9.4g %9.4g %9.4g\n", call, site, "*",
                              count, hi, mean, lo, mean * count))
    return "".join(out)


def test_mpip_point_to_point_sites_only():
    p = parse_mpip(mpip_report(), "halo.mpiP")
    assert [(e.size, e.count, e.label) for e in p.entries] == \
        [(262100, 4000, "Isend site 3"), (1550, 100, "Send site 7")]  # %9.4g of 262144
    notes = " ".join(p.notes)
    assert "Callsite Message Sent statistics" in notes
    assert "left out, not point to point: Allreduce" in notes
    assert "Send site 7 (100..3000 B)" in notes


def test_mpip_without_callsite_details_uses_the_top_twenty():
    p = parse_mpip(mpip_report(callsites=False), "halo.mpiP")
    assert [(e.size, e.count) for e in p.entries] == [(262000, 4000), (1550, 100)]  # %10.3g
    assert "top twenty call sites only" in " ".join(p.notes)


def test_mpip_is_sniffed(tmp_path):
    path = tmp_path / "halo.mpiP"
    path.write_text(mpip_report())
    assert read_profile(str(path)).format == "mpip"


# --------------------------------------------------------------------------- arithmetic


def test_pingpong_bidir_stream_and_concurrency_follow_the_model():
    """On a one-piece model t = 20 us + n / 100 Mbit/s, each pattern's formula."""
    run = run_of({n: wire_us(n) for n in SIZES})
    model = predict.from_run(run, "link", "link.json")
    assert len(model.pieces) == 1 and model.pieces[0].lo_rel == pytest.approx(0, abs=1e-9)
    n = 65536
    assert model.saturation_size is not None and model.saturation_size <= n
    t1 = wire_us(n)
    got = predict.predict_one(prof(Entry(n, 100), Entry(n, 100, "bidir"),
                                   Entry(n, 100, "stream"), Entry(n, 100, "pingpong", 4)),
                              model)
    times = [c.time_s * 1e6 for c in got.classes]
    assert times[0] == pytest.approx(100 * t1, rel=1e-6)
    assert times[1] == pytest.approx(100 * t1, rel=1e-6)
    assert times[2] == pytest.approx(t1 + 99 * n * 8e6 / 1e8, rel=1e-6)
    assert times[3] == pytest.approx(25 * 20.0 + 100 * n * 8e6 / 1e8, rel=1e-6)
    assert got.total_s == pytest.approx(sum(times) * 1e-6)
    assert [c.claimed for c in got.classes] == [True, True, True, False]  # stream: saturated


def test_pieces_are_used_by_size_and_residuals_give_the_interval():
    """Two regimes (the first frame free, then the rate): each class priced by its piece;
    noise of +-3% on the measured times gives an interval of about +-3%."""
    times = {n: wire_us(n, free=1448) * (1.03 if k % 2 else 0.97)
             for k, n in enumerate(SIZES)}
    model = predict.from_run(run_of(times), "link", "link.json")
    assert len(model.pieces) >= 2
    got = predict.predict_one(prof(Entry(64, 1000), Entry(262144, 10)), model)
    small, large = got.classes
    assert small.piece == 0 and large.piece == len(model.pieces) - 1
    assert large.time_s * 1e6 == pytest.approx(10 * wire_us(262144, free=1448), rel=0.04)
    assert got.lo_s < got.total_s < got.hi_s
    assert 0.93 < got.lo_s / got.total_s and got.hi_s / got.total_s < 1.07


def test_sizes_outside_the_run_are_extrapolated_and_not_claimed():
    model = predict.from_run(run_of({n: wire_us(n) for n in SIZES}), "link", "l.json")
    got = predict.predict_one(prof(Entry(1 << 20, 10), Entry(64, 1)), model)
    assert got.classes[0].claimed is False and "extrapolated" in got.classes[0].note
    assert got.classes[0].time_s * 1e6 == pytest.approx(10 * wire_us(1 << 20), rel=1e-6)
    assert not got.claimed  # the unclaimed class carries nearly all the time


def test_scaling_a_wire_model_gives_the_other_rate_exactly():
    """Scaled from 100 to 400 Mbit/s, a link that serializes every byte at its rate (wire
    factor from MTU 1500 and MSS 1448) becomes the 400 Mbit/s link."""
    k = 1514 / 1448
    slow = run_of({n: wire_us(n, rate=1e8 / k) for n in SIZES}, mtu=1500, mss=1448)
    fast = {n: wire_us(n, rate=4e8 / k) for n in SIZES}
    model = predict.scaled(predict.from_run(slow, "slow", "s.json"), 1e8, 4e8, "fast")
    for n in (64, 4096, 262144):
        p = model.pieces[model.piece_of(n)]
        # exact but for the smallest size's own byte, taken as the floor: 0.06 us
        assert p.time_us(n) == pytest.approx(fast[n], abs=8 * k / 100 * 0.75 + 1e-9), n
    assert model.pieces[-1].wire_fraction == pytest.approx(1.0)


def test_scaling_keeps_the_free_first_frame_free():
    """A shaper that lets one frame through free (tbf's peak bucket): scaled, the small
    sizes stay at the floor and the large ones move by their bytes beyond the frame."""
    k = 1514 / 1448
    slow = {n: wire_us(n, rate=5e7 / k, free=1448) for n in SIZES}
    fast = {n: wire_us(n, rate=2e8 / k, free=1448) for n in SIZES}
    model = predict.scaled(predict.from_run(run_of(slow, 1500, 1448), "slow", "s"), 5e7, 2e8,
                           "fast")
    for n in (64, 1024, 16384, 262144):
        got = predict.predict_one(prof(Entry(n, 1)), model).total_s * 1e6
        assert got == pytest.approx(fast[n], rel=0.02), (n, got, fast[n])


def test_given_model_and_amdahl():
    a = predict.from_spec("alpha=50us,bw=100Mbit/s")
    b = predict.from_spec("alpha=5us,bw=10Gbit/s,name=fast")
    profile = prof(Entry(1000, 1000))
    pa, pb = predict.predict_one(profile, a), predict.predict_one(profile, b)
    assert pa.total_s == pytest.approx(1000 * (50e-6 + 8000 / 1e8))
    assert not pa.claimed and pa.classes[0].note == "a given model: not measured"
    rows = predict.amdahl([pa, pb], compute_s=1.0)
    assert rows[1]["ratio"] == pytest.approx(pb.total_s / pa.total_s)
    assert rows[1]["speedup"] == pytest.approx((1 + pa.total_s) / (1 + pb.total_s))
    assert b.name == "fast"


@pytest.mark.parametrize("text", ["alpha=50us", "bw=1G", "alpha=x,bw=1G", "alpha=1us,bw=1G,q=1",
                                  "alpha=1us,alpha=2us,bw=1G"])
def test_bad_model_specs(text):
    with pytest.raises(predict.PredictError, match="--model"):
        predict.from_spec(text)


# --------------------------------------------------------------------------- the CLI


@pytest.fixture
def files(tmp_path) -> dict[str, Path]:
    run = run_of({n: wire_us(n) for n in SIZES}, 1500, 1448)
    save_run(run, tmp_path / "link.json")
    profile = tmp_path / "app.csv"
    profile.write_text("size,count\n64,1000\n16K,100\n256K,10\n")
    return {"run": tmp_path / "link.json", "profile": profile, "dir": tmp_path}


def test_cli_predict_prints_and_writes_the_document(files):
    out = files["dir"] / "p.json"
    res = cli("predict", "--profile", str(files["profile"]), "--network", str(files["run"]),
              "--scale", str(files["run"]), "100Mbit/s", "1Gbit/s",
              "--model", "alpha=20us,bw=100Mbit/s", "--compute", "2s", "-o", str(out))
    assert res.status == 0, res.stderr
    doc = checked(json.loads(out.read_text()))
    assert doc["kind"] == "prediction" and len(doc["body"]["networks"]) == 3
    first, scaled, given = doc["body"]["networks"]
    assert given["total_s"] == pytest.approx(first["total_s"], rel=1e-6)  # the same link
    assert scaled["total_s"] < first["total_s"]
    lines = res.stdout.splitlines()
    assert lines[0].startswith(f"beoperf predict: profile {files['profile']} (csv): 3 message")
    assert any(line.startswith("link (pingpong 198.18.0.1 mtu1500)") and "measured" in line
               for line in lines)
    assert "Sizes that dominate" in res.stdout


@pytest.mark.parametrize("args, status, message", [
    (["--network", "MISSING.json"], 1, "beoperf: input error: MISSING.json: cannot read"),
    ([], 2, "beoperf: usage error: no network: give --network RESULT"),
    (["--model", "alpha=1"], 2, "beoperf: usage error: --model 'alpha=1'"),
    (["--scale", "RUN", "fast", "1G"], 2, "beoperf: usage error: --scale "),
    (["--network", "RUN", "--compute", "soon"], 2, "beoperf: usage error: --compute 'soon'"),
])
def test_cli_predict_errors_are_one_line(files, args, status, message):
    args = [str(files["run"]) if a == "RUN" else a for a in args]
    res = cli("predict", "--profile", str(files["profile"]), *args)
    assert res.status == status and len(res.error_lines) == 1, res.stderr
    assert res.error_lines[0].startswith(message), res.error_lines
    assert "Traceback" not in res.stderr


def test_cli_predict_refuses_a_stream_run(files):
    run = run_of({n: wire_us(n) for n in SIZES}, mode="stream")
    save_run(run, files["dir"] / "stream.json")
    res = cli("predict", "--profile", str(files["profile"]), "--network",
              str(files["dir"] / "stream.json"))
    assert res.status == 1 and "predict needs a ping-pong run" in res.stderr


def test_cli_predict_refuses_a_run_whose_model_is_not_physical(files):
    """Times that jump tenfold from one size to the next (a run on a machine that came and
    went): no line and no pieces explain them (R^2 0); predict says why, in one line, and
    prices nothing from it."""
    times = {n: 10.0 if i % 2 else 100.0 for i, n in enumerate(SIZES)}
    run = run_of(times)
    a = predict.analyze([s.size for s in run.sizes], [s.time_us["mean"] for s in run.sizes],
                        [None] * len(run.sizes), [s.central_bps() for s in run.sizes])
    assert a.hockney is None and a.pieces == [] and a.model_problem
    save_run(run, files["dir"] / "noisy.json")
    res = cli("predict", "--profile", str(files["profile"]), "--network",
              str(files["dir"] / "noisy.json"))
    assert res.status == 1 and len(res.error_lines) == 1, res.stderr
    assert "no model of this network: the fit of its mean times is not physical (" in \
        res.error_lines[0] and a.model_problem in res.error_lines[0]
    assert "Traceback" not in res.stderr


def test_imb_sanity_case_predicts_its_own_time():
    """The IMB run priced from its own model: within the interval of the time IMB itself
    measured (sum over sizes of 2 x repetitions x t[usec])."""
    path = str(FIXTURES / "imb-2021-pingpong.txt")
    res = cli("predict", "--profile", path, "--network", path, "--format", "json")
    net = json.loads(res.stdout)["body"]["networks"][0]
    from beoperf.model.importers import load_any

    run = load_any(path)
    measured = sum(2 * s.reps * s.time_us["mean"] * 1e-6 for s in run.sizes)
    lo, hi = net["interval_s"]
    assert lo <= measured <= hi and abs(net["total_s"] / measured - 1) < 0.1


# --------------------------------------------------------------------------- replay


def test_replay_on_loopback_times_every_class(tmp_path):
    profile = tmp_path / "app.csv"
    profile.write_text("size,count,pattern\n64,200,pingpong\n64K,20,stream\n1K,50,bidir\n")
    out = tmp_path / "r.json"
    res = cli("replay", str(profile), "--repeats", "2", "-o", str(out))
    assert res.status == 0, res.stderr
    body = checked(json.loads(out.read_text()))["body"]
    assert body["status"] == "complete"
    assert [(c["size"], c["pattern"], c["messages_timed"], len(c["times_s"]))
            for c in body["classes"]] == [(64, "pingpong", 200, 2), (65536, "stream", 20, 2),
                                          (1024, "bidir", 50, 2)]
    total = body["total_s"]
    assert total["median"] == pytest.approx(sum(c["median_s"] for c in body["classes"]))
    assert all(0 < t < 10 for c in body["classes"] for t in c["times_s"])
    assert "total" in res.stdout and "64 B" not in res.stdout
    # the conditions around it: loopback, the sockets inside the replay not counted
    network = json.loads(out.read_text())["meta"]["conditions"]["network"]
    assert network["socket_retransmissions"] is None and "lo" in network["watched"]["interfaces"]
    assert "\nmachine    load " in res.stdout


def test_replay_refuses_concurrency_and_unknown_transports(tmp_path):
    profile = tmp_path / "app.csv"
    profile.write_text("size,count,pattern,concurrency\n64,10,pingpong,4\n")
    res = cli("replay", str(profile), "127.0.0.1", "--port", "1")
    assert res.status == 2 and "concurrency > 1" in res.stderr
    res = cli("replay", str(profile), "--transport", "carrier-pigeon")
    assert res.status == 2 and "unknown transport 'carrier-pigeon'" in res.stderr
