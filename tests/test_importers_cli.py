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
