"""What the importers of other tools' files knew reaches the user (issue 28): every command
that read such a file (compare, plot, predict) shows the importer's warnings."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import cli

FIXTURES = Path(__file__).parent / "fixtures"
IMB = FIXTURES / "imb-2021-pingpong.txt"  # PingPong, then PingPing and Sendrecv
IMB_WARNING = f"{IMB}: the file also holds PingPing, Sendrecv; imported PingPong"


@pytest.fixture
def two_osu_tests(tmp_path: Path) -> Path:
    """Crafted: two real OSU outputs one after the other, as a job running both prints."""
    path = tmp_path / "osu-latency-then-bw-crafted.txt"
    path.write_text((FIXTURES / "osu_latency-7.2-datatype.txt").read_text()
                    + (FIXTURES / "osu_bw-7.4.txt").read_text())
    return path


def osu_warning(path: Path) -> str:
    return f"{path}: 2 OSU tests in the file; imported the first"


def test_compare_shows_the_importers_warnings(two_osu_tests):
    res = cli("compare", str(IMB), str(two_osu_tests))
    assert res.status == 0, res.stderr
    assert f"warning: {IMB_WARNING}" in res.stderr.splitlines()
    assert f"warning: {osu_warning(two_osu_tests)}" in res.stderr.splitlines()
    json_out = cli("compare", str(IMB), str(two_osu_tests), "--format", "json")
    assert f"warning: {IMB_WARNING}" in json_out.stderr  # stdout stays the document alone


def test_compare_of_beoperf_documents_adds_no_warning(tmp_path):
    res = cli("compare", str(FIXTURES / "mpi" / "openmpi-shm-vader-eager-4096.json"),
              str(FIXTURES / "mpi" / "openmpi-shm-vader-eager-32768.json"))
    assert res.status == 0, res.stderr
    assert "warning:" not in res.stderr


def test_plot_shows_the_importers_warnings(tmp_path, two_osu_tests):
    out = tmp_path / "figures"
    res = cli("plot", str(IMB), str(two_osu_tests), "-o", str(out))
    assert res.status == 0, res.stderr
    assert (out / "throughput.png").is_file()
    assert res.stderr.splitlines() == [f"warning: {IMB_WARNING}",
                                    f"warning: {osu_warning(two_osu_tests)}"]


def test_predict_shows_the_warnings_of_the_profile_and_of_the_networks(two_osu_tests):
    res = cli("predict", "--profile", str(two_osu_tests), "--network", str(IMB))
    assert res.status == 0, res.stderr
    assert f"note: {osu_warning(two_osu_tests)}" in res.stdout  # the profile's file
    assert "the file also holds PingPing, Sendrecv; imported PingPong" in res.stdout  # a network


def test_a_streams_time_per_message_is_not_compared_as_a_latency():
    """osu_bw's small-message time is size / bandwidth (a time per message), not a
    latency: against osu_latency there is no latency verdict; between two streams there
    is (the same figure on both sides)."""
    latency, bw = FIXTURES / "osu_latency-7.2-datatype.txt", FIXTURES / "osu_bw-7.4.txt"
    res = cli("compare", str(latency), str(bw), "--format", "json")
    assert res.status == 0, res.stderr
    row = next(r for r in res.json["body"]["rows"] if not r["baseline"])
    assert row["latency_test"]["verdict"] == "cannot tell"
    assert row["latency_test"]["ratio"] is None and row["latency_change_pct"] is None
    assert row["latency_test"]["reason"] == ("not compared: a stream run's time per message "
                                             "against a pingpong run's latency")
    assert row["peak_test"]["ratio"] is not None  # throughput still is
    streams = cli("compare", str(bw), str(FIXTURES / "osu_mbw_mr-7.4-openmpi-shm.txt"),
                  "--format", "json")
    other = next(r for r in streams.json["body"]["rows"] if not r["baseline"])
    assert other["latency_test"]["ratio"] is not None
