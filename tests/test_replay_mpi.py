"""`beoperf replay --transport mpi`: a message profile between two MPI ranks that beoperf
starts on this machine (Open MPI and MPICH), timed by the MPI transport's C loops; the
replay document as TCP's, with both ranks' facts; nothing of the job left behind
(mpi_helpers.run_bounded); bad combinations are one-line usage errors."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest

from helpers import checked
from mpi_helpers import beoperf, kill_group, require_mpi, run_bounded

PROFILE = "size,count,pattern\n8,400,pingpong\n65536,40,pingpong\n16384,20,bidir\n" \
          "65536,20,stream\n"
TIMEOUT_S = 120


@pytest.mark.parametrize("impl", ["openmpi", "mpich"])
def test_a_profile_replays_between_two_local_ranks(impl, tmp_path):
    pytest.importorskip("mpi4py")
    require_mpi(impl)
    profile = tmp_path / "app.csv"
    profile.write_text(PROFILE)
    out = tmp_path / "replay.json"
    done = run_bounded(beoperf("replay", str(profile), "--transport", "mpi", "--mpi", impl,
                               "--repeats", "2", "-o", str(out)), TIMEOUT_S)
    assert done.returncode == 0, done.stderr[-2000:]
    doc = checked(json.loads(out.read_text()))
    body = doc["body"]
    assert doc["kind"] == "replay" and body["transport"] == "mpi"
    assert body["status"] == "complete" and body["peer"].startswith("MPI rank 1 on ")
    assert body["local"]["rank"] == 0 and body["remote"]["rank"] == 1
    assert body["local"]["mpi"]["implementation"] == impl
    assert body["local"]["mpi"]["thread_level"] == "single"
    rows = {(c["size"], c["pattern"]): c for c in body["classes"]}
    assert len(rows) == 4 and all(len(c["times_s"]) == 2 for c in rows.values())
    assert rows[(8, "pingpong")]["messages_timed"] == 400
    # per message, 64 KiB takes longer than 8 B on any machine
    per = {k: c["median_s"] / c["count"] for k, c in rows.items()}
    assert per[(65536, "pingpong")] > per[(8, "pingpong")] > 0
    total = body["total_s"]
    assert total["median"] == pytest.approx(sum(c["median_s"] for c in rows.values()))
    assert "MPI rank 1 on" in done.stdout and "(complete)" in done.stdout
    # the conditions around the job, on this host (the MPI library owns the sockets)
    assert doc["meta"]["conditions"]["network"]["socket_retransmissions"] is None
    assert "\nmachine    load " in done.stdout


def test_sigterm_is_said_as_such_and_what_was_timed_is_kept(tmp_path):
    """Issue 28: SIGTERM to beoperf (a scheduler's limit) while the ranks replay: the
    document says "terminated by SIGTERM", not "interrupted by the user" (rank 0 saw
    the SIGUSR1 beoperf relays), keeps the class timed so far, and the exit is 143."""
    pytest.importorskip("mpi4py")
    require_mpi("openmpi")
    profile = tmp_path / "app.csv"
    profile.write_text("size,count,pattern\n65536,4000,pingpong\n1048576,400,stream\n")
    out = tmp_path / "replay.json"
    proc = subprocess.Popen(beoperf("replay", str(profile), "--transport", "mpi",
                                    "--repeats", "500", "-o", str(out)),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        time.sleep(8)
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            kill_group(proc)
    assert proc.returncode == 143, err[-2000:]
    body = json.loads(out.read_text())["body"]
    assert (body["status"], body["status_reason"]) == ("interrupted", "terminated by SIGTERM")
    assert body["classes"][0]["messages_timed"] > 0
    assert "terminated by SIGTERM" in err and "by the user" not in err


@pytest.mark.parametrize(("args", "message"), [
    (["node02", "--transport", "mpi"], "give no HOST"),
    (["--mpi", "mpich"], "--mpi goes with --transport mpi"),
])
def test_mpi_options_out_of_place_are_usage_errors(tmp_path, args, message):
    from helpers import cli

    profile = tmp_path / "app.csv"
    profile.write_text(PROFILE)
    result = cli("replay", str(profile), *args)
    assert result.status == 2 and message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
