"""HPCC files: the summary section of real hpccoutf.txt files (tests/fixtures/hpcc, see the
README there), the verdict of each run, and the hpccinf.txt beoperf writes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from beoperf import units
from beoperf.model import hpcc

FIXTURES = Path(__file__).parent / "fixtures" / "hpcc"
NP2 = FIXTURES / "hpcc-1.5.0-np2.txt"


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def summary_lines(body: str) -> list[str]:
    start = body.index(hpcc.BEGIN) + len(hpcc.BEGIN)
    return body[start:body.index(hpcc.END)].strip().splitlines()


def test_every_key_of_hpcc_1_5_0_is_read_with_its_value_and_unit():
    body = NP2.read_text()
    run, = hpcc.parse_runs(body)
    assert list(run.summary) == list(hpcc.KEYS_1_5_0) and len(run.summary) == 148
    # independently of the parser: every printed line is key=value, in the same order
    printed = [line.split("=", 1) for line in summary_lines(body)]
    assert [k for k, _ in printed] == list(run.summary)
    for key, raw in printed:
        assert run.raw[key] == raw
        value = run.summary[key]
        if re.fullmatch(r"-?\d+", raw):
            assert value == int(raw)
        elif isinstance(value, float):
            assert value == float(raw)
        else:
            assert value == raw
    assert run.summary["HPL_cpfact"] == "R" and run.summary["CommWorldProcs"] == 2
    assert run.version == "1.5.0" and run.threshold == 16.0


def test_units_and_roles_of_the_published_figures():
    expect = {"HPL_Tflops": ("TFLOP/s", "aggregate"), "PTRANS_GBs": ("GB/s", "aggregate"),
              "MPIFFT_Gflops": ("GFLOP/s", "aggregate"),
              "MPIRandomAccess_GUPs": ("GUP/s", "aggregate"),
              "StarSTREAM_Triad": ("GB/s", "per-process"),
              "SingleDGEMM_Gflops": ("GFLOP/s", "single"),
              "RandomlyOrderedRingLatency_usec": ("us", "latency"),
              "NaturallyOrderedRingBandwidth_GBytes": ("GB/s", "per-process"),
              "HPL_time": ("s", "time"), "Success": ("", "check"), "HPL_N": ("", "parameter"),
              "sizeof_double": ("B", "build")}
    for key, (unit, role) in expect.items():
        assert (hpcc.KEYS[key].unit, hpcc.KEYS[key].role) == (unit, role), key
    for info in hpcc.KEYS.values():
        if info.unit:
            units.canonical_unit(info.unit)  # every unit is one beoperf.units knows
    # HPCC's GB/s is 10^9 bytes/s (bench_lat_bw: bandwidth * 1e-9), GUP/s 10^9 updates/s
    assert units.convert(1, "GB/s", "B/s") == 1e9 and units.convert(1, "GUPS", "UP/s") == 1e9
    assert units.convert(14.2655, "usec", "s") == pytest.approx(14.2655e-6)


def test_short_names_are_the_published_table_names():
    assert [hpcc.key_of(n) for n in ("HPL", "PTRANS", "MPIFFT", "SingleSTREAM_Copy",
                                     "RandomlyOrderedRingLatency", "starfft", "nope")] == \
        ["HPL_Tflops", "PTRANS_GBs", "MPIFFT_Gflops", "SingleSTREAM_Copy",
         "RandomlyOrderedRingLatency_usec", "StarFFT_Gflops", None]


def test_a_file_with_two_runs_gives_both():
    first, second = hpcc.parse_runs(text("hpcc-1.5.0-srun-two-runs.txt"))
    assert first.summary["HPL_Tflops"] != second.summary["HPL_Tflops"]
    assert first.hpl_checks and second.hpl_checks


def test_one_process_has_no_ping_pong_and_hpcc_says_minus_one():
    run, = hpcc.parse_runs(text("hpcc-1.5.0-np1.txt"))
    assert run.summary["CommWorldProcs"] == 1
    assert run.summary["MaxPingPongLatency_usec"] == -1
    assert hpcc.failures(run) == []


def test_the_residual_is_recomputed_and_agrees_with_hpl():
    run, = hpcc.parse_runs(NP2.read_text())
    (printed, passed), = run.hpl_checks
    assert passed and hpcc.hpl_residual(run) == pytest.approx(printed, rel=1e-3)
    assert hpcc.failures(run) == []


def _edited(old: str, new: str) -> str:
    body = NP2.read_text()
    assert old in body
    return body.replace(old, new)


def test_a_run_without_success_fails():
    run, = hpcc.parse_runs(_edited("Success=1", "Success=0"))
    assert hpcc.failures(run) == ["Success=0: a test failed its own check"]


def test_a_residual_over_the_threshold_fails_even_if_success_says_1():
    run, = hpcc.parse_runs(re.sub(r"HPL_RnormI=\S+", "HPL_RnormI=1", NP2.read_text()))
    assert len(hpcc.failures(run)) == 1 and "is not below 16" in hpcc.failures(run)[0]


def test_hpl_printing_failed_fails():
    run, = hpcc.parse_runs(_edited("...... PASSED", "...... FAILED"))
    assert hpcc.failures(run) == ["HPL printed FAILED for its residual check"]


def test_a_non_finite_value_is_none_with_its_text_kept():
    run, = hpcc.parse_runs(re.sub(r"MPIFFT_Gflops=\S+", "MPIFFT_Gflops=-nan",
                                  NP2.read_text()))
    assert run.summary["MPIFFT_Gflops"] is None and run.raw["MPIFFT_Gflops"] == "-nan"


@pytest.mark.parametrize("body, message", [
    ("hello\n", "no HPCC summary section"),
    (f"{hpcc.BEGIN}\nSuccess=1\n", "has no end"),
    (f"{hpcc.BEGIN}\nSuccess=1\nSuccess=1\n{hpcc.END}\n", "Success twice"),
    (f"{hpcc.BEGIN}\nnot a pair\n{hpcc.END}\n", "not key=value"),
    (f"{hpcc.BEGIN}\nbad key=1\n{hpcc.END}\n", "not key=value"),
    (f"{hpcc.BEGIN}\nSuccess={'9' * 300}\n{hpcc.END}\n", "over 200 characters"),
    (f"{hpcc.BEGIN}\nSuccess=1\n{hpcc.END}\n", "no Success or CommWorldProcs"),
    (f"{hpcc.END}\n", "never begun"),
    (f"{hpcc.BEGIN}\n{hpcc.BEGIN}\n", "inside another"),
    (f"{hpcc.BEGIN}\n" + "".join(f"k{i}=1\n" for i in range(1001)) + f"{hpcc.END}\n",
     "over 1000 keys"),
])
def test_what_is_not_hpcc_output_is_refused_with_a_reason(body, message):
    with pytest.raises(hpcc.HpccFormatError, match=message):
        hpcc.parse_runs(body, "f.txt")


def test_too_many_runs_are_refused():
    one = f"{hpcc.BEGIN}\nSuccess=1\nCommWorldProcs=1\n{hpcc.END}\n"
    with pytest.raises(hpcc.HpccFormatError, match="over 1000 runs"):
        hpcc.parse_runs(one * 1001)


# --------------------------------------------------------------------------- input


def test_the_input_file_is_what_hpcc_reads():
    text_ = hpcc.Input(1500, 80, 2, 3).text()
    lines = text_.splitlines()
    assert len(lines) == 36  # HPL's 31, the ignored line 32, PTRANS's 4
    first = [line.split()[0] for line in lines]
    assert first[5:8] == ["1500", "1", "80"] and first[10:12] == ["2", "3"]
    assert first[12] == "16" and first[32:36] == ["0", "0", "0", "0"]


@pytest.mark.parametrize("fields", [dict(n=0, nb=80, p=1, q=1), dict(n=10, nb=-1, p=1, q=1),
                                    dict(n=10, nb=8, p=1, q=10**9), dict(n=1.5, nb=8, p=1, q=1)])
def test_bad_input_figures_are_refused(fields):
    with pytest.raises(ValueError):
        hpcc.Input(**fields)


@pytest.mark.parametrize("np_, grid", [(1, (1, 1)), (2, (1, 2)), (6, (2, 3)), (12, (3, 4)),
                                       (7, (1, 7)), (16, (4, 4)), (32, (4, 8))])
def test_the_grid_is_the_most_square(np_, grid):
    assert hpcc.square_grid(np_) == grid


def test_n_fills_the_memory_in_multiples_of_nb():
    gib = 2**30
    n = hpcc.n_for_memory(0.5 * 4 * gib, 80)
    assert n % 80 == 0 and 8 * n * n <= 2 * gib < 8 * (n + 80) ** 2
    assert hpcc.n_for_memory(100, 80) == 80  # never below one block


# --------------------------------------------------------------------------- sentinels
# Crafted variants of hpcc-1.5.0-np2.txt (see the README here): what HPCC prints for a test
# that did not run (HPCC_Init's -1 sizes, memory it never wrote) and for HPL failing.


def crafted(name: str) -> hpcc.HpccRun:
    run, = hpcc.parse_runs(text(f"hpcc-1.5.0-np2-crafted-{name}.txt"))
    return run


def test_hpl_not_run_is_not_run_never_passed_with_a_residual():
    run = crafted("hpl-not-run")
    assert run.not_run == ["HPL"]
    assert hpcc.hpl_residual(run) is None  # -1 / (-1 x (1 + 6.95e-310) x -1) was -1.0
    assert hpcc.failures(run) == ["HPL did not run (HPL_N=-1, HPL_Tflops=-1)"]
    hpl = [k for k in run.summary if hpcc.benchmark_of(k) == "HPL"]
    assert "HPL_N" in hpl and "HPL_BnormI" in hpl and "HPL_dMACH_EPS" not in hpl
    assert all(run.summary[k] is None for k in hpl)
    assert run.raw["HPL_N"] == "-1" and run.raw["HPL_BnormI"] == "6.95313e-310"
    assert run.summary["PTRANS_GBs"] == hpcc.parse_runs(NP2.read_text())[0].summary[
        "PTRANS_GBs"]  # the tests that ran keep their figures


def test_a_test_not_run_has_no_values_and_the_run_still_passes():
    run = crafted("lcg-not-run")
    assert run.not_run == ["RandomAccess_LCG"] and hpcc.failures(run) == []
    for key in ("RandomAccess_LCG_N", "StarRandomAccess_LCG_GUPs",
                "SingleRandomAccess_LCG_GUPs"):
        assert run.summary[key] is None
    assert run.raw["StarRandomAccess_LCG_GUPs"] == "6.95313e-310"
    assert run.summary["MPIRandomAccess_LCG_GUPs"] == 0.000538258  # another test: it ran


def test_an_uninitialised_figure_alone_is_not_a_value():
    run, = hpcc.parse_runs(re.sub(r"StarFFT_Gflops=\S+", "StarFFT_Gflops=6.95313e-310",
                                  NP2.read_text()))
    assert run.summary["StarFFT_Gflops"] is None and run.not_run == ["FFT"]
    assert run.summary["SingleFFT_Gflops"] is not None


def test_hpl_that_ran_and_gave_nan_failed_it_did_not_not_run():
    run = crafted("hpl-nan")
    assert run.not_run == [] and run.summary["HPL_N"] == 400
    reasons = hpcc.failures(run)
    assert "HPL failed: HPL_RnormI=-nan (not a number)" in reasons
    assert "HPL printed FAILED for its residual check" in reasons  # '-nan ...... FAILED'
    assert not any("did not run" in r for r in reasons)


def test_every_real_fixture_ran_every_test():
    for path in sorted(FIXTURES.glob("hpcc-*.txt")):
        if "crafted" not in path.name:
            assert all(r.not_run == [] for r in hpcc.parse_runs(path.read_text())), path
