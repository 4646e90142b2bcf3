"""`beoperf cluster` and `beoperf compare` of HPCC results, in process and as a command:
real hpcc runs on this host (small N), imports of real output files, what a user sees
for bad input, and a study stopped by SIGTERM or by its time limit."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from beoperf import model
from beoperf.model import hpcc
from helpers import checked, child_env, cli

FIXTURES = Path(__file__).parent / "fixtures" / "hpcc"
N = 240

needs_hpcc = pytest.mark.tools("hpcc", "mpirun.openmpi")


def docs_in(directory: Path) -> dict[str, model.Document]:
    return {p.stem: model.load(p) for p in sorted((directory / "runs").glob("*.json"))}


@needs_hpcc
def test_a_study_on_this_host(tmp_path):
    out = tmp_path / "study"
    result = cli("cluster", "hpcc", "--np", "1,2", "--repeat", "2", "--n", str(N), "-o",
                 str(out), "--reference", "Medusa")
    assert result.status == 0, result.stderr
    runs = docs_in(out)
    assert sorted(runs) == ["np1-r1", "np1-r2", "np2-r1", "np2-r2"]
    for name, doc in runs.items():
        checked(doc.to_json())
        assert doc.body["status"] == "ok" and doc.body["input"]["n"] == N
        assert (out / "runs" / name / "hpccoutf.txt").exists()
        assert doc.body["launch"]["launcher"] == "openmpi"
    scaling = model.load(out / "scaling.json")
    # repeat by repeat: 1, 2, 1, 2
    assert [r["label"] for r in scaling.body["runs"]] == ["np1-r1", "np2-r1", "np1-r2",
                                                         "np2-r2"]
    assert [(p["np"], p["runs"]) for p in scaling.body["points"]] == [(1, 2), (2, 2)]
    lines = result.stderr.splitlines()
    assert lines[0] == "run 1/4: 1 process, repeat 1 (estimating the time left after " \
                       "the first run)"
    assert any(line.startswith("run 4/4: 2 processes, repeat 2 (about ") for line in lines)
    if os.geteuid() == 0:
        assert any(line.startswith("note: running as root: mpirun of Open MPI was given "
                                   "--allow-run-as-root") for line in lines)
    assert "Reference systems" in result.stdout and "Medusa (np 2)" in result.stdout
    again = cli("cluster", "hpcc", "--np", "1", "--n", str(N), "-o", str(out))
    assert again.status == 2 and "already holds a study" in again.stderr


def beoperf_process(*argv: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "beoperf", *argv], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            env=child_env())


def processes_in(directory: Path) -> list[int]:
    """PIDs of processes whose working directory is inside ``directory``."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                cwd = os.readlink(entry / "cwd")
            except OSError:
                continue
            if cwd.startswith(str(directory)):
                found.append(int(entry.name))
    return found


@needs_hpcc
def test_sigterm_keeps_what_was_measured_and_ends_the_running_job(tmp_path):
    out = tmp_path / "stopped"
    proc = beoperf_process("cluster", "hpcc", "--np", "1,2", "--repeat", "3", "--n", "400",
                           "-o", str(out))
    try:
        deadline = time.monotonic() + 120
        while not (out / "runs" / "np1-r1.json").exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert (out / "runs" / "np1-r1.json").exists(), proc.stderr.read() if proc.poll() else ""
        # the second run (2 processes) is under way once a process works in its directory
        # (a fixed wait raced with it: on a quiet machine it ended within 0.5 s)
        second = out / "runs" / "np2-r1"
        while not processes_in(second) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not (out / "runs" / "np2-r1.json").exists(), "the second run ended first"
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 143, err
    assert err.strip().splitlines()[-1] == "beoperf: terminated by SIGTERM"
    scaling = model.load(out / "scaling.json").body
    assert [(r["label"], r["status"]) for r in scaling["runs"]] == [("np1-r1", "ok"),
                                                                   ("np2-r1", "failed")]
    assert scaling["runs"][1]["failures"][0] == "stopped: terminated by SIGTERM"
    # the job's ranks end once the launcher has told them to (a CI run found two still
    # there the moment beoperf exited); they must be gone within seconds
    gone_by = time.monotonic() + 10
    while processes_in(out) and time.monotonic() < gone_by:
        time.sleep(0.05)
    assert processes_in(out) == []


@needs_hpcc
def test_a_run_over_its_time_limit_is_ended_and_failed(tmp_path):
    """Also: --hpcc takes another binary, recorded in the documents."""
    other = tmp_path / "bin" / "hpcc-other"
    other.parent.mkdir()
    shutil.copy2(shutil.which("hpcc"), other)
    out = tmp_path / "slow"
    result = cli("cluster", "hpcc", "--np", "2", "--n", "6000", "--timeout", "1", "-o",
                 str(out), "--hpcc", str(other), "--quiet")
    assert result.status == 1
    assert result.error_lines[-1] == ("beoperf: failed: 1 of 1 runs failed (left out of the "
                                      "statistics; see the table and their documents)")
    run = docs_in(out)["np2-r1"].body
    assert run["failures"][0] == "stopped after the --timeout of 1 s"
    assert run["exit_status"] is None and run["hpcc"]["binary"] == str(other)
    assert run["launch"]["argv"][-1] == str(other)
    assert "Left out of the statistics (1 run):" in result.stdout
    assert processes_in(out) == []


@pytest.mark.parametrize("argv, status, message", [
    (["--np", "0"], 2, "--np '0': counts from 1"),
    (["--np", "1", "--hpcc", "/nonexistent/hpcc"], 2, "not found or not executable"),
    (["--np", "1,2", "--grid", "1x2"], 2, "--grid fits one process count"),
    (["--np", "2", "--memory-fraction", "1.5"], 2, "--memory-fraction"),
    (["--np", "2", "--memory-fraction", "0.99"], 2, "at most 0.95"),
    (["--np", "2", "--mpi-env", "no equals"], 2, "expected KEY=VALUE"),
    (["--np", "2", "--hosts", "a,-np"], 2, "'-np' is not a host name"),
    (["--np", "2", "--hostfile", "/nonexistent"], 1, "input error: /nonexistent: cannot read"),
    (["--np", "4", "--hosts", "a", "--ranks-per-node", "1"], 2, "need 4 hosts; 1 given"),
    (["--np", "2", "--reference", "Cray"], 2, "'Cray' is not a reference system"),
    (["--np", "2", "--timeout", "soon"], 2, "not a time"),
    (["--np", "2", "--node-memory", "lots"], 2, "not a size"),
    (["--np", "2", "--n", "10", "--nb", "80"], 2, "--n 10: from NB (80)"),
])
def test_bad_input_is_one_line_and_a_status(tmp_path, argv, status, message):
    if "--hpcc" not in argv and shutil.which("hpcc") is None:
        argv = [*argv, "--hpcc", "/bin/true"]  # checks before hpcc is needed
    result = cli("cluster", "hpcc", *argv, "-o", str(tmp_path / "x"))
    assert result.status == status, result.stderr
    assert len(result.error_lines) == 1 and message in result.stderr
    assert not (tmp_path / "x" / "scaling.json").exists()


def test_no_subcommand():
    result = cli("cluster")
    assert result.status == 2 and "no subcommand given" in result.stderr


def test_a_subcommand_brings_only_its_own_modules():
    code = ("import sys\nfrom beoperf.cli import build_parser\n"
            "build_parser('cluster', {rest!r}).parse_args({argv!r})\n"
            "print(sorted(m for m in sys.modules if m.startswith('beoperf.suites.cluster_')))")

    def loaded(rest, argv):
        proc = subprocess.run([sys.executable, "-c", code.format(rest=rest, argv=argv)],
                              capture_output=True, text=True, env=child_env(), check=True)
        return proc.stdout
    hpcc_only = loaded(["hpcc"], ["cluster", "hpcc", "--np", "1", "-o", "x"])
    assert "cluster_mbw" not in hpcc_only and "cluster_ring" not in hpcc_only
    assert "cluster_ring" in loaded(["ring"], ["cluster", "ring"])
    # without the rest of the arguments: every subcommand
    assert "cluster_ring" in loaded([], ["cluster", "hpcc", "--np", "1", "-o", "x"])


# --------------------------------------------------------------------------- import


def test_import_of_hpcc_1_4_and_1_5(tmp_path):
    files = [str(FIXTURES / n) for n in ("hpcc-1.4.2-np2.txt", "hpcc-1.5.0-np1.txt",
                                          "hpcc-1.5.0-srun-two-runs.txt")]
    result = cli("cluster", "import", *files, "-o", str(tmp_path / "old"), "--format", "json")
    assert result.status == 0, result.stderr
    doc = result.json
    labels = sorted(p.stem for p in (tmp_path / "old").glob("*.json") if p.stem != "scaling")
    assert labels == ["hpcc-1.4.2-np2", "hpcc-1.5.0-np1", "hpcc-1.5.0-srun-two-runs-run1",
                      "hpcc-1.5.0-srun-two-runs-run2"]
    old = model.load(tmp_path / "old" / "hpcc-1.4.2-np2.json").body
    assert old["hpcc"]["version"] == "1.4.2" and old["source"] == "import"
    assert len(old["metrics"]) == 148 and old["status"] == "ok"
    assert old["output"]["sha256"] == __import__("hashlib").sha256(
        Path(files[0]).read_bytes()).hexdigest()
    assert [(p["np"], p["runs"]) for p in doc["body"]["points"]] == [(1, 1), (2, 3)]
    second = model.load(tmp_path / "old" / "hpcc-1.5.0-srun-two-runs-run2.json").body
    assert second["output"]["run_in_file"] == 2 and second["output"]["runs_in_file"] == 2


def test_an_imported_failed_run_is_kept_out(tmp_path):
    bad = tmp_path / "failed.txt"
    bad.write_text((FIXTURES / "hpcc-1.5.0-np2.txt").read_text().replace("Success=1",
                                                                           "Success=0"))
    result = cli("cluster", "import", str(bad), str(FIXTURES / "hpcc-1.5.0-np2.txt"))
    assert result.status == 0
    assert "1 of 2" in result.stdout and "failed: Success=0" in result.stdout


@pytest.mark.parametrize("content, message", [
    (b"", "not HPCC output"), (b"\xff\xfe" * 10, "not HPCC output"),
    (b"Begin of Summary section.\nSuccess=1\n", "has no end"),
])
def test_import_refuses_what_is_not_hpcc_output(tmp_path, content, message):
    path = tmp_path / "x.txt"
    path.write_bytes(content)
    result = cli("cluster", "import", str(path))
    assert result.status == 1 and message in result.stderr and len(result.error_lines) == 1


def test_import_reads_bounded(tmp_path):
    path = tmp_path / "huge.txt"
    with open(path, "wb") as f:
        f.truncate(65 * 1024 * 1024)
    result = cli("cluster", "import", str(path))
    assert result.status == 1 and "over the 67,108,864-byte limit" in result.stderr


def test_show_plot_and_references(tmp_path):
    cli("cluster", "import", str(FIXTURES / "hpcc-1.5.0-np1.txt"),
        str(FIXTURES / "hpcc-1.5.0-np2.txt"), "-o", str(tmp_path / "s"))
    shown = cli("cluster", "show", str(tmp_path / "s" / "scaling.json"), "--reference", "P575",
                "--format", "markdown")
    assert shown.status == 0 and "| HPL | TFLOP/s |" in shown.stdout
    assert "P575 (np 64)" in shown.stdout
    run = cli("cluster", "show", str(tmp_path / "s" / "hpcc-1.5.0-np2.json"))
    assert run.stdout.startswith("HPC Challenge run hpcc-1.5.0-np2: 2 processes, passed")
    plotted = cli("cluster", "plot", str(tmp_path / "s" / "scaling.json"), "-o",
                  str(tmp_path / "png"), "--reference", "Medusa", "--metrics", "MPIFFT,HPL")
    assert plotted.status == 0, plotted.stderr
    assert sorted(p.name for p in (tmp_path / "png").iterdir()) == ["HPL_Tflops.png",
                                                                    "MPIFFT_Gflops.png"]
    unknown = cli("cluster", "plot", str(tmp_path / "s" / "scaling.json"), "-o",
                  str(tmp_path / "png"), "--metrics", "Linpack")
    assert unknown.status == 2 and "'Linpack' is not a performance metric" in unknown.stderr
    refs = cli("cluster", "references")
    assert refs.stdout.splitlines()[3].startswith("Medusa ")
    assert "[processes: 2, 6, 12]" in refs.stdout
    wrong = cli("cluster", "plot", str(tmp_path / "s" / "hpcc-1.5.0-np2.json"), "-o",
                str(tmp_path / "png2"))
    assert wrong.status == 1 and "plot a scaling document" in wrong.stderr


# --------------------------------------------------------------------------- compare


def test_compare_puts_runs_and_references_side_by_side(tmp_path):
    cli("cluster", "import", str(FIXTURES / "hpcc-1.5.0-np2-100mbit.txt"), "-o",
        str(tmp_path / "net"))
    result = cli("compare", str(tmp_path / "net" / "scaling.json"),
                 str(FIXTURES / "hpcc-1.5.0-np2.txt"), "--reference", "Medusa",
                 "--format", "json")
    assert result.status == 0, result.stderr
    body = result.json["body"]
    assert [(c["label"], c["np"], c["kind"]) for c in body["columns"]] == [
        ("net (np 2)", 2, "run"), ("hpcc-1.5.0-np2", 2, "run"), ("Medusa", 2, "reference")]
    fft = next(r for r in body["rows"] if r["metric"] == "MPIFFT_Gflops")
    net, local = (hpcc.parse_runs((FIXTURES / n).read_text())[0].summary["MPIFFT_Gflops"]
                  for n in ("hpcc-1.5.0-np2-100mbit.txt", "hpcc-1.5.0-np2.txt"))
    assert fft["values"] == [net, local, 0.05168]
    assert fft["ratios"] == [None, pytest.approx(net / local), pytest.approx(net / 0.05168)]
    assert fft["ratios"][1] < 0.05  # the 100 Mbit/s run's MPI FFT is 20x slower and more
    assert fft["verdicts"][:2] == [None, "better"] and fft["intervals"][1][0] > 100
    latency = next(r for r in body["rows"] if r["metric"] == "AvgPingPongLatency_usec")
    assert latency["ratios"][1] > 20 and latency["verdicts"][1] == "better"  # lower is better
    assert latency["intervals"][1][1] < -90
    first = cli("compare", str(tmp_path / "net" / "scaling.json"),
                str(FIXTURES / "hpcc-1.5.0-np2.txt")).stdout.splitlines()
    assert first[0].startswith("WARN      hpcc-1.5.0-np2 vs net (np 2): 1 metric worse: ")
    assert any(x.startswith("OK        hpcc-1.5.0-np2 vs net (np 2): ") and "MPIFFT" in x
               for x in first[:6])
    table = cli("compare", str(tmp_path / "net" / "scaling.json"), "--reference", "xc4000")
    assert table.status == 0 and "XC4000 (np 32)" in table.stdout
    assert "ratio = the baseline" in table.stdout
    impact = cli("compare", str(FIXTURES / "hpcc-1.5.0-np2.txt"), "--format", "impact")
    assert impact.status == 2 and "HPCC results render as" in impact.stderr


def test_compare_refuses_to_mix_hpcc_with_ping_pong(tmp_path):
    pingpong = Path(__file__).parent / "fixtures" / "documents" / "pingpong-v1-after-issue9.json"
    result = cli("compare", str(FIXTURES / "hpcc-1.5.0-np2.txt"), str(pingpong))
    assert result.status == 1 and "compare HPCC results with HPCC results" in result.stderr


def test_reference_files_of_the_user(tmp_path):
    csv_path = tmp_path / "lab.csv"
    csv_path.write_text("metric,unit,np2\nMPIFFT,GFLOPS,0.5\n")
    result = cli("compare", str(FIXTURES / "hpcc-1.5.0-np2.txt"), "--reference-file",
                 str(csv_path), "--format", "csv")
    assert result.status == 0, result.stderr
    row = next(line for line in result.stdout.splitlines()
               if line.startswith("MPIFFT_Gflops,GFLOP/s,lab,"))
    assert row.split(",")[3:5] == ["2", "reference"]
    cli("cluster", "import", str(FIXTURES / "hpcc-1.5.0-np2.txt"), "-o", str(tmp_path / "a"))
    by_doc = cli("compare", str(FIXTURES / "hpcc-1.5.0-np2-100mbit.txt"), "--reference-file",
                 str(tmp_path / "a" / "scaling.json"))
    assert by_doc.status == 0 and "a (np 2)" in by_doc.stdout
    bad = tmp_path / "bad.csv"
    bad.write_text("metric,unit,np2\nMPIFFT,GB/s,0.5\n")
    refused = cli("compare", str(FIXTURES / "hpcc-1.5.0-np2.txt"), "--reference-file", str(bad))
    assert refused.status == 1 and "does not fit MPIFFT_Gflops" in refused.stderr


def test_documents_are_valid_json_with_their_schema(tmp_path):
    result = cli("cluster", "import", str(FIXTURES / "hpcc-1.5.0-np2.txt"), "--format", "json")
    doc = json.loads(result.stdout)
    checked(doc)
    assert doc["kind"] == "scaling" and doc["body"]["units"]["HPL_Tflops"] == "TFLOP/s"


def test_an_hpcc_of_another_mpi_than_the_launchers_is_caught(tmp_path):
    """Debian's hpcc is Open MPI's: MPICH's mpirun starts it as separate one-process jobs
    (each appending a run with CommWorldProcs=1 to hpccoutf.txt; seen here, 18 s for
    N=240, too slow to run in the suite), which the run's document must catch."""
    from beoperf.launch import binary, plan
    from beoperf.suites import cluster as suite

    rundir = tmp_path / "runs" / "np2-r1"
    rundir.mkdir(parents=True)
    one = (FIXTURES / "hpcc-1.5.0-np1.txt").read_text()
    (rundir / "hpccoutf.txt").write_text(one + one)
    study = suite.Study(suite.Spec(output=str(tmp_path), np=(2,)), tmp_path, None,
                        binary.Linked("/usr/bin/hpcc", "openmpi", None, None), [], "this host")
    config = plan.Config(2, "this host", 2, (), hpcc.Input(N, 80, 1, 2))
    record = {"launcher": "mpich", "argv": ["mpirun.mpich"], "env": {}, "environment": {},
              "notes": []}
    body = suite._body(study, config, 1, "np2-r1", record,
                       suite.Finished(0, 18.0, "", ""), rundir)
    checked(model.Document("cluster", body).to_json())
    assert body["np"] == 2 and body["status"] == "failed"
    assert body["output"]["runs_in_file"] == 2
    assert body["failures"] == [
        "hpcc reports 1 process (CommWorldProcs), not 2: is hpcc built for the MPI of "
        "mpich? (a program of another MPI starts as separate single processes)"]


def test_a_launcher_that_failed_is_named_with_what_it_said(tmp_path):
    """A run whose mpirun failed before hpcc wrote anything: its failure quotes the
    headline of Open MPI's message, not the rule of dashes that closes it."""
    from beoperf.launch import binary, plan
    from beoperf.suites import cluster as suite

    rundir = tmp_path / "runs" / "np2-r1"
    rundir.mkdir(parents=True)
    study = suite.Study(suite.Spec(output=str(tmp_path), np=(2,)), tmp_path, None,
                        binary.Linked("/usr/bin/hpcc", "openmpi", None, None), [], "this host")
    config = plan.Config(2, "this host", 2, (), hpcc.Input(N, 80, 1, 2))
    record = {"launcher": "openmpi", "argv": ["mpirun.openmpi"], "env": {},
              "environment": {}, "notes": []}
    rule = "-" * 74
    stderr = (f"{rule}\nORTE was unable to reliably start one or more daemons.\n"
              f"This usually is caused by:\n\n* not finding the required libraries\n{rule}\n")
    body = suite._body(study, config, 1, "np2-r1", record,
                       suite.Finished(1, 0.2, "", stderr), rundir)
    assert body["status"] == "failed"
    assert body["failures"][0] == ("openmpi exited with status 1: ORTE was unable to "
                                   "reliably start one or more daemons.")


def test_what_the_launcher_cannot_express_fails_before_anything_runs(tmp_path):
    """srun has no agent: refused while planning, no directory made."""
    env_free = {"SLURM_JOB_ID": "", "SLURM_JOB_NODELIST": ""}
    old = {k: os.environ.pop(k) for k in env_free if k in os.environ}
    try:
        result = cli("cluster", "hpcc", "--np", "2", "--n", "240", "--launcher", "srun",
                     "--hosts", "a,b", "--mpi-agent", "ssh", "-o", str(tmp_path / "x"),
                     *(["--hpcc", "/bin/true"] if shutil.which("hpcc") is None else []))
    finally:
        os.environ.update(old)
    assert result.status == 2 and "srun: the srun launcher cannot honour agent" in result.stderr
    assert not (tmp_path / "x").exists()


def test_compact_json_documents_are_recognised(tmp_path):
    cli("cluster", "import", str(FIXTURES / "hpcc-1.5.0-np2.txt"), "-o", str(tmp_path / "a"))
    compact = tmp_path / "compact.json"
    compact.write_text(json.dumps(json.loads((tmp_path / "a" / "scaling.json").read_text()),
                                  separators=(",", ":")))
    result = cli("compare", str(compact), "--format", "csv")
    assert result.status == 0 and result.stdout.startswith("metric,unit,column")


def test_import_of_runs_none_passed_exits_non_zero(tmp_path):
    """Crafted fixtures (tests/fixtures/hpcc/README.md): HPL not run, HPL failed with NaN."""
    files = [str(FIXTURES / f"hpcc-1.5.0-np2-crafted-{n}.txt") for n in ("hpl-not-run",
                                                                          "hpl-nan")]
    result = cli("cluster", "import", *files, "-o", str(tmp_path / "s"))
    assert result.status == 1
    assert result.error_lines == [result.stderr.strip().splitlines()[-1]]
    assert "none of the 2 imported run(s) passed" in result.stderr
    assert "HPL did not run (HPL_N=-1, HPL_Tflops=-1)" in result.stderr
    assert "HPL failed: HPL_RnormI=-nan" in result.stderr
    assert "did not run?" not in result.stdout + result.stderr
    assert (tmp_path / "s" / "scaling.json").is_file()  # written all the same
    ok = cli("cluster", "import", files[0], str(FIXTURES / "hpcc-1.5.0-np2.txt"))
    assert ok.status == 0, ok.stderr  # one run passed


def test_values_of_tests_not_run_are_never_averaged_shown_or_compared(tmp_path):
    real, crafted = (str(FIXTURES / n) for n in ("hpcc-1.5.0-np2.txt",
                                                 "hpcc-1.5.0-np2-crafted-lcg-not-run.txt"))
    result = cli("cluster", "import", real, crafted, "-o", str(tmp_path / "s"))
    assert result.status == 0, result.stderr
    point, = model.load(tmp_path / "s" / "scaling.json").body["points"]
    assert point["runs"] == 2
    for key in ("RandomAccess_LCG_N", "StarRandomAccess_LCG_GUPs"):
        assert point["metrics"][key]["n"] == 1, key  # the real run's alone
    assert point["metrics"]["StarRandomAccess_LCG_GUPs"]["mean"] == 2.12082
    assert point["metrics"]["RandomAccess_LCG_N"]["mean"] == 65536
    shown = cli("cluster", "show", str(tmp_path / "s" / "scaling.json"), "--all")
    assert shown.status == 0 and "e-310" not in shown.stdout
    one = cli("cluster", "show", str(tmp_path / "s" / "hpcc-1.5.0-np2-crafted-lcg-not-run.json"))
    assert one.status == 0 and "e-310" not in one.stdout
    assert re.search(r"^StarRandomAccess_LCG\s+not run\s+GUP/s$", one.stdout, re.M)
    rows = cli("cluster", "show", str(tmp_path / "s" / "hpcc-1.5.0-np2-crafted-lcg-not-run.json"),
               "--format", "csv").stdout
    assert ",StarRandomAccess_LCG_GUPs,not run,GUP/s," in rows
    compared = cli("compare", real, crafted, "--format", "json")
    assert compared.status == 0, compared.stderr
    row, = (r for r in compared.json["body"]["rows"]
            if r["metric"] == "StarRandomAccess_LCG_GUPs")
    assert row["values"] == [2.12082, None] and row["ratios"] == [None, None]


def test_a_denormal_stored_by_an_older_import_is_not_run(tmp_path):
    """A cluster document as imports before issue 28 wrote it: a figure HPCC never wrote
    kept as the number it printed (crafted from the real np2 file's document)."""
    real = FIXTURES / "hpcc-1.5.0-np2.txt"
    assert cli("cluster", "import", str(real), "-o", str(tmp_path / "s")).status == 0
    path = tmp_path / "s" / "hpcc-1.5.0-np2.json"
    doc = json.loads(path.read_text())
    doc["body"]["metrics"]["StarRandomAccess_LCG_GUPs"]["value"] = 6.95313e-310
    old = tmp_path / "old-crafted.json"
    old.write_text(json.dumps(doc))
    shown = cli("cluster", "show", str(old))
    assert shown.status == 0 and "e-310" not in shown.stdout
    assert re.search(r"^StarRandomAccess_LCG\s+not run\s+GUP/s$", shown.stdout, re.M)
    compared = cli("compare", str(path), str(old), "--format", "json")
    assert compared.status == 0, compared.stderr
    row, = (r for r in compared.json["body"]["rows"]
            if r["metric"] == "StarRandomAccess_LCG_GUPs")
    assert row["values"] == [2.12082, None]


# --------------------------------------------------------------------------- crafted scaling


def crafted(tmp_path: Path, name: str, source: str = "hpcc-1.5.0-np2.txt",
            **summary: object) -> str:
    """A fixture (hpcc-1.5.0-np2.txt) with these summary values (key=value lines
    replaced), written as hpcc-1.5.0-np2-crafted-NAME.txt (tests/fixtures/hpcc/README.md)."""
    text = (FIXTURES / source).read_text()
    for key, value in summary.items():
        text, count = re.subn(rf"^{key}=.*$", f"{key}={value}", text, flags=re.MULTILINE)
        assert count == 1, key
    path = tmp_path / f"hpcc-1.5.0-np2-crafted-{name}.txt"
    path.write_text(text)
    return str(path)


def test_hpl_scales_by_its_own_grid_not_the_jobs_processes(tmp_path):
    # HPL on a 1 x 1 grid inside jobs of 2 and 4 processes: one process both times, so
    # x0.967 from np 2 to np 4 is no step of HPL's scaling; then a 2 x 2 grid at np 8
    files = [crafted(tmp_path, "grid-1x1", HPL_nprow=1, HPL_npcol=1, HPL_Tflops="0.001"),
             crafted(tmp_path, "np4-grid-1x1", CommWorldProcs=4, HPL_nprow=1, HPL_npcol=1,
                     HPL_Tflops="0.000967"),
             crafted(tmp_path, "np8-grid-2x2", CommWorldProcs=8, HPL_nprow=2, HPL_npcol=2,
                     HPL_Tflops="0.0035")]
    result = cli("cluster", "import", *files, "--format", "json")
    assert result.status == 0, result.stderr
    body = result.json["body"]
    assert not [s for s in body["stopped_scaling"] if s["metric"] == "HPL_Tflops"]
    by_np = {p["np"]: p for p in body["points"]}
    # speedup and efficiency against HPL's 1 process: x3.5 on 4 processes
    assert by_np[8]["speedup"]["HPL_Tflops"] == pytest.approx(3.5)
    assert by_np[8]["efficiency"]["HPL_Tflops"] == pytest.approx(3.5 / 4)
    # figures of the whole job keep the job's count: PTRANS's own 1 x 2 grid at every np
    # did not grow, MPI RandomAccess (all the processes, the same figure) stopped at np 4
    assert by_np[8]["speedup"]["PTRANS_GBs"] == pytest.approx(1.0)
    assert [(s["metric"], s["np"]) for s in body["stopped_scaling"]
            if s["metric"] in ("PTRANS_GBs", "MPIRandomAccess_GUPs")] == [
        ("MPIRandomAccess_GUPs", 4)]
    text = cli("cluster", "import", *files).stdout
    assert re.search(r"HPL processes +HPL_nprow x HPL_npcol +1 +1 +4", text), text
    assert "np 2 (HPL on 1)" in text


def test_hpl_stopping_on_its_own_grid_says_its_counts(tmp_path):
    files = [crafted(tmp_path, "grid-1x1", HPL_nprow=1, HPL_npcol=1, HPL_Tflops="0.001"),
             crafted(tmp_path, "np8-grid-2x2", CommWorldProcs=8, HPL_nprow=2, HPL_npcol=2,
                     HPL_Tflops="0.0012")]
    result = cli("cluster", "import", *files)
    assert result.status == 0, result.stderr
    assert ("HPL at np 8: HPL on 1 -> 4 processes (HPL_nprow x HPL_npcol; the job's 2 -> 8)"
            ": x1.2 (ideal x4)") in result.stdout


def test_a_count_without_a_figure_does_not_hide_a_collapse(tmp_path):
    # MPI FFT not written at np 4 (the run passed); from np 2 to np 10 it kept x0.287
    files = [crafted(tmp_path, "np2", HPL_npcol=2),
             crafted(tmp_path, "np4-no-mpifft", CommWorldProcs=4, HPL_npcol=4,
                     MPIFFT_Gflops="-nan", MPIFFT_Procs=4),
             crafted(tmp_path, "np10", CommWorldProcs=10, HPL_nprow=2, HPL_npcol=5,
                     HPL_Tflops="0.00024", MPIFFT_Gflops=f"{4.57941 * 0.287:.6g}",
                     MPIFFT_Procs=10)]
    result = cli("cluster", "import", *files, "--format", "json")
    assert result.status == 0, result.stderr
    body = result.json["body"]
    assert [p["np"] for p in body["points"] if "MPIFFT_Gflops" not in p["metrics"]] == [4]
    hits = {s["metric"]: s for s in body["stopped_scaling"]}
    assert (hits["MPIFFT_Gflops"]["from_np"], hits["MPIFFT_Gflops"]["np"]) == (2, 10)
    assert hits["MPIFFT_Gflops"]["why"] == ("2 -> 10 processes: x0.287 (ideal x5); "
                                            "no figure at np 4")
    assert {p["np"]: p["runs"] for p in body["points"]} == {2: 1, 4: 1, 10: 1}
    text = cli("cluster", "import", *files).stdout
    assert "MPIFFT at np 10: 2 -> 10 processes: x0.287 (ideal x5); no figure at np 4" in text


def test_a_count_where_no_run_passed_does_not_hide_a_collapse(tmp_path):
    # the case: HPL did not run at np 4 (that run fails), x0.287 from np 2 to 10
    files = [crafted(tmp_path, "np2", HPL_npcol=2),
             crafted(tmp_path, "np4-hpl-not-run", "hpcc-1.5.0-np2-crafted-hpl-not-run.txt",
                     CommWorldProcs=4),
             crafted(tmp_path, "np10", CommWorldProcs=10, HPL_nprow=2, HPL_npcol=5,
                     HPL_Tflops=f"{0.000240592 * 0.287:.6g}", MPIFFT_Procs=10)]
    result = cli("cluster", "import", *files)
    assert result.status == 0, result.stderr
    assert ("HPL at np 10: 2 -> 10 processes: x0.287 (ideal x5); no figure at np 4"
            in result.stdout), result.stdout


def crafted_host(tmp_path: Path, name: str, source: str, host: str, np_: int) -> str:
    """A fixture with another Hostname line and CommWorldProcs (crafted, as above)."""
    path = Path(crafted(tmp_path, name, source, CommWorldProcs=np_))
    text, count = re.subn(r"^Hostname: '.*'$", f"Hostname: '{host}'", path.read_text(),
                          flags=re.MULTILINE)
    assert count == 1
    path.write_text(text)
    return str(path)


def test_runs_of_several_hosts_and_versions_pooled_in_a_series_are_said(tmp_path):
    files = [crafted_host(tmp_path, "host-a-np1", "hpcc-1.5.0-np1.txt", "node-a", 1),
             crafted_host(tmp_path, "host-b-np2", "hpcc-1.5.0-np2.txt", "node-b", 2),
             crafted_host(tmp_path, "host-c-np4", "hpcc-1.4.2-np2.txt", "node-c\x1b[2J", 4)]
    result = cli("cluster", "import", *files, "--format", "json")
    assert result.status == 0, result.stderr
    assert result.json["body"]["warnings"] == [
        "series import: runs of 3 hosts pooled in one series: node-a (np 1); node-b (np 2); "
        "node-c?[2J (np 4); its speedups and stopped-scaling verdicts compare them",
        "series import: runs of 2 HPCC versions pooled in one series: 1.4.2 (np 4); "
        "1.5.0 (np 1, 2); its speedups and stopped-scaling verdicts compare them"]
    text = cli("cluster", "import", *files).stdout
    assert text.count("WARN      series import: runs of") == 2
    assert "\x1b" not in text
    # the same files from one host and one version: no warning
    same = cli("cluster", "import", *(str(FIXTURES / n) for n in (
        "hpcc-1.5.0-np1.txt", "hpcc-1.5.0-np2.txt")), "--format", "json")
    assert same.json["body"]["warnings"] == []


def test_a_scaling_document_of_version_1_loads_without_warnings(tmp_path):
    old = Path(__file__).parent / "fixtures" / "documents" / "scaling-v1-issue14.json"
    doc = model.load(old)
    assert doc.schema_version == 2 and doc.body["warnings"] == []
    assert cli("cluster", "show", str(old)).status == 0


READS = ("cluster import reads HPC Challenge 1.4-1.5 output (hpccoutf.txt), compare and "
         "cluster show also beoperf cluster and scaling documents; NetPIPE, IMB and OSU "
         "files and beoperf ping-pong results go to compare, plot and predict")
SHOWN = ("cluster show and plot read beoperf cluster and scaling documents (JSON, as "
         "cluster hpcc and cluster import write them)")
OTHER = Path(__file__).parent / "fixtures"


@pytest.mark.parametrize("argv, message", [
    (["cluster", "import", str(OTHER / "osu_latency-7.4-tail.txt")],
     'osu_latency-7.4-tail.txt: not HPCC output (no "Begin of Summary section." line); '
     + READS),
    (["cluster", "import", str(OTHER / "imb-2021-pingpong.txt")],
     'imb-2021-pingpong.txt: not HPCC output (no "Begin of Summary section." line); '
     + READS),
    (["cluster", "import", str(OTHER / "documents" / "pingpong-v1-after-issue9.json")],
     "pingpong-v1-after-issue9.json: a beoperf pingpong document, not HPCC output; " + READS),
    (["compare", str(FIXTURES / "hpcc-1.5.0-np2.txt"), str(OTHER / "netpipe5-mpi.out")],
     'netpipe5-mpi.out: not HPCC output (no "Begin of Summary section." line); ' + READS),
    (["cluster", "show", str(OTHER / "osu_latency-7.4-tail.txt")],
     "osu_latency-7.4-tail.txt: invalid JSON (Expecting value at line 1 column 1); " + SHOWN),
    (["cluster", "plot", str(OTHER / "documents" / "pingpong-v1-after-issue9.json"), "-o",
      "unused"],
     "pingpong-v1-after-issue9.json: a pingpong document, not a cluster or scaling one; "
     + SHOWN),
    (["cluster", "show", str(FIXTURES / "hpcc-1.5.0-np2.txt")],
     "hpcc-1.5.0-np2.txt: HPC Challenge output, not a document: import it first "
     "(beoperf cluster import FILE -o DIR)"),
])
def test_a_file_of_another_format_says_which_formats_are_read(argv, message):
    result = cli(*argv)
    assert result.status == 1 and len(result.error_lines) == 1, result.stderr
    assert result.stderr.strip().endswith(message), result.stderr


def test_hpcc_output_that_ended_before_its_summary_says_so(tmp_path):
    head = tmp_path / "hpccoutf.txt"
    head.write_text("".join((FIXTURES / "hpcc-1.5.0-np2.txt").read_text()
                            .splitlines(keepends=True)[:40]))
    result = cli("cluster", "import", str(head))
    assert result.status == 1 and len(result.error_lines) == 1
    assert "HPCC output without a summary section" in result.stderr


def test_runs_of_one_count_on_different_hpl_grids_are_not_scaled(tmp_path):
    files = [crafted(tmp_path, "grid-1x1", HPL_nprow=1, HPL_npcol=1),
             crafted(tmp_path, "np4-grid-1x1", CommWorldProcs=4, HPL_nprow=1, HPL_npcol=1),
             crafted(tmp_path, "np4-grid-2x2", CommWorldProcs=4, HPL_nprow=2, HPL_npcol=2,
                     HPL_Tflops="0.0001")]
    result = cli("cluster", "import", *files, "--format", "json")
    assert result.status == 0, result.stderr
    body = result.json["body"]
    assert body["warnings"] == [
        "series import, np 4: HPL ran on different process counts in its runs (HPL_nprow 1"
        "..2, HPL_npcol 1..2): its mean mixes them and is not scaled"]
    point = [p for p in body["points"] if p["np"] == 4][0]
    assert "HPL_Tflops" not in point["efficiency"]
    assert not [s for s in body["stopped_scaling"] if s["metric"] == "HPL_Tflops"]
    assert re.search(r"HPL processes +HPL_nprow x HPL_npcol +1 +\?",
                     cli("cluster", "import", *files).stdout)
    assert "to do: give the runs of one count one grid" in cli("cluster", "import",
                                                               *files).stdout


def test_runs_of_one_count_at_different_problem_sizes_are_said(tmp_path):
    # a real file of 20 runs (tests/fixtures/others: hpcc-buaa) ran HPL at N 10000 to
    # 80000 at np 2; crafted: two runs of HPL_N 400 and 800 at one count
    real = FIXTURES.parent / "others" / "hpcc" / "hpcc-1.5.0-buaa-20-runs-hpl-not-run-and-nan.txt"
    result = cli("cluster", "import", str(real), "--format", "json")
    assert result.status == 0, result.stderr
    assert ("series import, np 2: HPL ran at different problem sizes in its runs "
            "(HPL_N 10000..80000): its mean mixes them") in result.json["body"]["warnings"]
    assert "HPL ran at different problem sizes" in cli("cluster", "import", str(real)).stdout
    same = cli("cluster", "import", crafted(tmp_path, "a", HPL_N=400),
               crafted(tmp_path, "b", HPL_N=400), "--format", "json")
    assert not [w for w in same.json["body"]["warnings"] if "problem sizes" in w]
    mixed = cli("cluster", "import", crafted(tmp_path, "c", HPL_N=400),
                crafted(tmp_path, "d", HPL_N=800), "--format", "json")
    assert [w for w in mixed.json["body"]["warnings"] if "problem sizes" in w] == [
        "series import, np 2: HPL ran at different problem sizes in its runs "
        "(HPL_N 400..800): its mean mixes them"]
