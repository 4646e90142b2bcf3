"""`beoperf tune --procedure`: the keep/revert decision with fake measurements, the whole
procedure with faked settings, and end to end between two namespace hosts."""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
from pathlib import Path

import pytest

from beoperf import errors, model, report
from beoperf.audit import procedure, tune
from beoperf.audit.procedure import ProcedureFailed
from beoperf.audit.tune import Change, TuneError
from beoperf.cli import Parser, UsageError
from beoperf.cli import tune as cli_tune
from beoperf.model.document import validate
from beoperf.suites import tune as suite

FIXTURES = Path(__file__).parent / "fixtures"


def noisy(mean: float, n: int = 10, spread: float = 0.01, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [mean * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


def document(out: procedure.Outcome, repeats: int, rollback_file: str | None,
             **fields) -> model.Document:
    """The procedure document of an outcome, checked against the schema."""
    given = {"profile": "p", "interface": None, "peer": "h", "port": 1, "keep_all": False,
             **fields}
    body = procedure.body(out, repeats=repeats, rollback_file=rollback_file, **given)
    doc = model.tune.procedure(body, model.make_meta())
    validate("procedure", doc.to_json())
    return doc


def render(out: procedure.Outcome, repeats: int, rollback_file: str | None) -> str:
    return report.render(document(out, repeats, rollback_file)) + "\n"


def parse(*argv: str) -> argparse.Namespace:
    parser = Parser(prog="beoperf")
    cli_tune.add_parser(parser.add_subparsers(dest="command", parser_class=Parser))
    return parser.parse_args(["tune", *argv])


# --------------------------------------------------------------------------- the decision


def test_clear_improvement_is_kept():
    d = procedure.decide(noisy(40.0, seed=2), noisy(50.0, seed=3))
    assert d.keep and d.significant and d.p < 0.05
    assert d.improvement_pct == pytest.approx(20.0, abs=1.0)
    assert d.text().startswith("kept (significant: p=")


def test_noise_is_reverted():
    d = procedure.decide(noisy(50.0, spread=0.05, seed=4), noisy(50.0, spread=0.05, seed=5))
    assert not d.keep and not d.significant and d.p > 0.05
    assert d.text().startswith("reverted (not significant")


def test_significant_but_small_or_slower_is_reverted():
    small = procedure.decide(noisy(49.3, spread=0.001, seed=6), noisy(50.0, spread=0.001))
    assert small.p < 0.05 and 0 < small.improvement_pct < 2 and not small.keep
    slower = procedure.decide(noisy(60.0, seed=7), noisy(50.0, seed=8))
    assert slower.p < 0.05 and slower.improvement_pct < 0 and not slower.keep


def test_keep_all_keeps_noise():
    d = procedure.decide(noisy(50.0, seed=4), noisy(50.0, seed=5), keep_all=True)
    assert d.keep and not d.significant


# --------------------------------------------------------------------------- the procedure (faked)


@pytest.fixture
def fake_settings(monkeypatch):
    """Sysctl-like settings in a dict; the log of every value set."""
    state = {"a": "1", "b": "1", "c": "1"}
    log: list[tuple[str, str]] = []

    def fake_set(change: Change, value: str) -> None:
        log.append((change.key, value))
        state[change.key[-1]] = value

    monkeypatch.setattr(tune, "set_value", fake_set)
    monkeypatch.setattr(tune, "read_value", lambda c: state[c.key[-1]])
    return state, log


def changes() -> list[Change]:
    return [Change(f"net.x.{k}", "sysctl", None, "1", "0") for k in "abc"]


def latency_of(state: dict, fail_when: str | None = None):
    """A measurement: 50 us, 20% less with a=0, 2% more with c=0, b no effect; 1% noise."""
    rng = random.Random(9)

    def measure() -> float:
        if fail_when and state[fail_when] == "0":
            raise TuneError("cannot connect to peer")
        mean = 50.0 * (0.8 if state["a"] == "0" else 1.0) * (1.02 if state["c"] == "0" else 1)
        return mean * (1 + rng.uniform(-0.01, 0.01))

    return measure


def test_procedure_keeps_improvements_and_reverts_the_rest(fake_settings):
    state, log = fake_settings
    measure = latency_of(state)
    default = procedure.baseline(measure, 8)
    out = procedure.run_changes(changes(), default, measure, 8)
    assert [r.label for r in out.rows] == ["Default", "net.x.a=0", "net.x.b=0", "net.x.c=0",
                                           "Combined"]
    assert [r.verdict for r in out.rows] == ["baseline", "kept", "reverted", "reverted",
                                             "combined"]
    assert [c.key for c in out.kept] == ["net.x.a"]
    assert state == {"a": "0", "b": "1", "c": "1"}
    assert log == [("net.x.a", "0"), ("net.x.b", "0"), ("net.x.b", "1"), ("net.x.c", "0"),
                   ("net.x.c", "1")]
    assert out.rows[0].impact_pct is None
    assert out.combined.impact_pct == pytest.approx(20.0, abs=1.5)
    assert all(len(r.repeats_us) == 8 and r.variance_us2 > 0 for r in out.rows)
    text = render(out, 8, "rb.json")
    lines = text.splitlines()
    assert lines[0].split() == ["Configuration", "Latency", "mean", "(variance)", "Impact"]
    assert lines[1].startswith("Default ") and lines[1].endswith("-")
    assert lines[5].startswith("Combined") and lines[5].endswith("%")
    assert "net.x.a=0: kept (significant" in text and "beoperf tune --rollback rb.json" in text


def test_when_no_change_is_kept_combined_is_default_not_a_second_measurement(fake_settings):
    state, log = fake_settings
    calls = {"n": 0}
    measure_noise = latency_of(state)

    def measure() -> float:  # no change helps: a=0 is 50% slower here
        calls["n"] += 1
        return measure_noise() * (1.5 if state["a"] == "0" else 1.0)

    default = procedure.baseline(measure, 6)
    out = procedure.run_changes(changes(), default, measure, 6)
    assert out.kept == [] and state == {"a": "1", "b": "1", "c": "1"}
    assert calls["n"] == 6 * 4  # Default and the three changes: Combined not re-measured
    combined = out.combined
    assert combined.label == "Combined" and combined.same_as == "Default"
    assert combined.repeats_us == default.repeats_us and combined.impact_pct is None
    assert combined.decision == "no change kept: same as Default"
    assert all(r.impact_pct is not None for r in out.rows[1:-1])
    lines = render(out, 6, "rb.json").splitlines()
    assert lines[5].startswith("Combined (= Default) ") and lines[5].endswith(" -")
    assert "Combined: no change kept: same as Default" in "\n".join(lines)
    doc = document(out, 6, None)
    assert doc.body["rows"][-1]["same_as"] == "Default" and doc.body["kept"] == []


def test_keep_all_keeps_every_change(fake_settings):
    state, _log = fake_settings
    measure = latency_of(state)
    out = procedure.run_changes(changes(), procedure.baseline(measure, 6), measure, 6,
                                keep_all=True)
    assert len(out.kept) == 3 and state == {"a": "0", "b": "0", "c": "0"}


def test_failure_halfway_restores_everything_in_reverse(fake_settings):
    state, log = fake_settings
    measure = latency_of(state, fail_when="c")
    with pytest.raises(ProcedureFailed, match="net.x.c: cannot connect") as info:
        procedure.run_changes(changes(), procedure.baseline(measure, 6), measure, 6,
                              keep_all=True)
    assert info.value.rolled_back == 3 and info.value.restore_errors == []
    assert log[-3:] == [("net.x.c", "1"), ("net.x.b", "1"), ("net.x.a", "1")]
    assert state == {"a": "1", "b": "1", "c": "1"}


def test_interrupt_while_measuring_restores_what_is_applied(fake_settings):
    state, log = fake_settings
    calls = {"n": 0}

    def measure() -> float:  # Ctrl-C while b is being measured (a kept by then)
        calls["n"] += 1
        if state["b"] == "0":
            raise KeyboardInterrupt
        return 50.0 * (0.8 if state["a"] == "0" else 1.0) * (1 + 0.001 * (calls["n"] % 3))

    with pytest.raises(KeyboardInterrupt):
        procedure.run_changes(changes(), procedure.baseline(measure, 6), measure, 6)
    assert log == [("net.x.a", "0"), ("net.x.b", "0"), ("net.x.b", "1"), ("net.x.a", "1")]
    assert state == {"a": "1", "b": "1", "c": "1"}


def test_document_is_versioned(fake_settings):
    state, _log = fake_settings
    measure = latency_of(state)
    out = procedure.run_changes(changes()[:1], procedure.baseline(measure, 6), measure, 6)
    doc = document(out, 6, "rb.json", interface="eth0", peer="10.0.0.2", port=5202)
    assert (doc.kind, doc.schema_version) == ("procedure", 2)
    assert [r["label"] for r in doc.body["rows"]] == ["Default", "net.x.a=0", "Combined"]
    assert doc.body["rollback_file"] == "rb.json" and doc.body["kept"] == ["net.x.a"]
    assert model.from_json(json.loads(doc.dumps())).body == doc.body


# --------------------------------------------------------------------------- CLI checks


def test_cli_procedure_usage_and_root(monkeypatch):
    monkeypatch.setattr(suite, "run_audit", lambda *a: pytest.fail("audit ran"))
    with pytest.raises(errors.BadSpec, match="needs --peer"):
        cli_tune.run(parse("--procedure"))
    with pytest.raises(errors.BadSpec, match="at least 4"):
        cli_tune.run(parse("--procedure", "--peer", "127.0.0.1", "--repeats", "2"))
    with pytest.raises(UsageError, match="not allowed with"):
        parse("--procedure", "--apply")
    monkeypatch.setattr(suite.os, "geteuid", lambda: 1000)
    with pytest.raises(errors.NotPermitted, match="run it as root"):
        cli_tune.run(parse("--procedure", "--peer", "127.0.0.1"))


def test_procedure_files_of_earlier_versions_load():
    path = FIXTURES / "documents" / "procedure-v1-after-issue9.json"
    raw = json.loads(path.read_text())
    doc = model.load(path)
    validate("procedure", doc.to_json())
    assert (doc.kind, doc.schema_version) == ("procedure", 2)
    assert doc.body["rows"] == raw["rows"] and doc.meta["host"] == raw["host"]


def test_procedure_text_is_what_issue_9_printed():
    """Byte for byte what procedure.render printed before issue 10 for the same rows
    (tests/fixtures/rendered/made_by_issue9.py wrote the expected text)."""
    doc = model.load(FIXTURES / "documents" / "procedure-v1-after-issue9.json")
    assert report.render(doc) + "\n" == (FIXTURES / "rendered" / "procedure.txt").read_text()


def test_a_lost_peer_keeps_its_class_after_the_rollback():
    """What stopped the procedure decides the exit status, as in every command: a peer
    lost halfway is a connection error (3), a refusal a peer error (4); a failed restore
    is a failure (1) whatever the cause."""
    lost = errors.ConnectError("cannot connect to h port 1: refused", "is it running?")
    got = suite.procedure_failed(ProcedureFailed("net.x.b: cannot connect", 2, [], lost), "rb")
    assert type(got) is errors.ConnectError and got.hint == "is it running?"
    assert str(got) == "net.x.b: cannot connect; rolled back the 2 change(s) applied"
    refused = errors.PeerError("h port 1 refused: busy")
    assert type(suite.procedure_failed(ProcedureFailed("x", 1, [], refused), "rb")) is \
        errors.PeerError
    stuck = suite.procedure_failed(ProcedureFailed("x", 1, ["net.x.a: EPERM"], lost), "rb")
    assert isinstance(stuck, suite.ProcedureError) and "try 'beoperf tune --rollback rb'" \
        in str(stuck)
    readback = suite.procedure_failed(ProcedureFailed("x", 1, [], TuneError("read back")), "rb")
    assert isinstance(readback, suite.ProcedureError)


# --------------------------------------------------------------------------- namespaces


SYSCTLS = ("net.ipv4.tcp_timestamps", "net.ipv4.tcp_sack")


def sysctl_path(key: str) -> str:
    return "/proc/sys/" + key.replace(".", "/")


def ns_values(host) -> list[str]:
    return host.run(["cat", *map(sysctl_path, SYSCTLS)]).stdout.split()


def tune_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "beoperf", "tune", *args]


@pytest.mark.tools("sysctl")
def test_netns_procedure_and_rollback(netns_pair, tmp_path):
    server, client = netns_pair
    host_before = [Path(sysctl_path(k)).read_text() for k in SYSCTLS]
    client.run(["sysctl", "-w", "net.ipv4.tcp_timestamps=1", "net.ipv4.tcp_sack=1"])
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({"name": "test", "expect": {
        k: {"op": "eq", "value": 0, "reason": "test"} for k in SYSCTLS}}))
    rb = tmp_path / "rb.json"
    serve = server.popen([sys.executable, "-m", "beoperf", "serve", "--port", "5202"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert "port 5202" in serve.stdout.readline()

    res = client.run(tune_argv("--procedure", "--peer", server.addr4, "--profile-file",
                               str(profile), "--repeats", "6", "--json", "--rollback-file",
                               str(rb)), check=False, timeout=120)
    assert res.returncode == 0, res.stderr
    raw = json.loads(res.stdout)
    validate("procedure", raw)
    assert (raw["kind"], raw["schema_version"]) == ("procedure", 2)
    doc = raw["body"]
    assert [r["label"] for r in doc["rows"]] == [
        "Default", "net.ipv4.tcp_timestamps=0", "net.ipv4.tcp_sack=0", "Combined"]
    assert all(len(r["repeats_us"]) == 6 and r["mean_us"] > 0 for r in doc["rows"])
    assert doc["rollback_file"] == str(rb) and rb.exists()
    kept = {r["key"] for r in doc["rows"] if r["verdict"] == "kept"}
    assert ns_values(client) == ["0" if k in kept else "1" for k in SYSCTLS]

    res = client.run(tune_argv("--rollback", str(rb)), check=False)
    assert res.returncode == 0, res.stderr
    assert ns_values(client) == ["1", "1"]
    assert [Path(sysctl_path(k)).read_text() for k in SYSCTLS] == host_before


def sack_profile(tmp_path: Path) -> Path:
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({"expect": {
        "net.ipv4.tcp_sack": {"op": "eq", "value": 0, "reason": "test"}}}))
    return profile


def test_netns_unreachable_peer_is_one_line(netns_pair, tmp_path):
    """Exit 3, as pingpong and audit --link-speed say it (1 before issue 10)."""
    server, client = netns_pair  # no beoperf serve running
    rb = tmp_path / "rb.json"
    res = client.run(tune_argv("--procedure", "--peer", server.addr4, "--profile-file",
                               str(sack_profile(tmp_path)), "--repeats", "4",
                               "--rollback-file", str(rb)), check=False)
    assert res.returncode == 3, res.stderr
    assert res.stderr.strip().count("\n") == 0 and "cannot connect" in res.stderr
    assert res.stderr.startswith("beoperf: connection error: ")
    assert not rb.exists() and ns_values(client)[1] == "1"


def test_netns_refusing_peer_is_a_peer_error(netns_pair, tmp_path):
    """Exit 4, as pingpong and audit --link-speed say it (1 before issue 10)."""
    server, client = netns_pair
    serve = server.popen([sys.executable, "-m", "beoperf", "serve", "--port", "5202",
                          "--max-memory", "1"],  # refuses even 16-byte messages
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert "port 5202" in serve.stdout.readline()
    rb = tmp_path / "rb.json"
    res = client.run(tune_argv("--procedure", "--peer", server.addr4, "--profile-file",
                               str(sack_profile(tmp_path)), "--repeats", "4",
                               "--rollback-file", str(rb)), check=False)
    assert res.returncode == 4, res.stderr
    assert res.stderr.strip().count("\n") == 0 and "this server's" in res.stderr
    assert res.stderr.startswith("beoperf: peer error: ")
    assert not rb.exists() and ns_values(client)[1] == "1"


@pytest.mark.tools("sysctl")
def test_netns_peer_lost_mid_procedure_rolls_back_and_exits_3(netns_pair, tmp_path):
    """The peer's server ends while a change is being measured: every change is undone,
    and the exit status says the peer was lost (3), the message what was rolled back."""
    import time

    server, client = netns_pair
    client.run(["sysctl", "-w", "net.ipv4.tcp_timestamps=1", "net.ipv4.tcp_sack=1"])
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({"name": "test", "expect": {
        k: {"op": "eq", "value": 0, "reason": "test"} for k in SYSCTLS}}))
    serve = server.popen([sys.executable, "-m", "beoperf", "serve", "--port", "5202"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert "port 5202" in serve.stdout.readline()
    rb = tmp_path / "rb.json"
    proc = client.popen(tune_argv("--procedure", "--peer", server.addr4, "--profile-file",
                                  str(profile), "--repeats", "40", "--keep-all",
                                  "--rollback-file", str(rb)),
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while ns_values(client) == ["1", "1"] and time.monotonic() < deadline:
        time.sleep(0.05)  # until the first change is applied (and being measured)
    assert ns_values(client) != ["1", "1"], "the procedure never applied a change"
    serve.kill()
    serve.wait()
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    assert err.startswith("beoperf: connection error: net.ipv4.tcp_timestamps: ")
    assert "rolled back the 1 change(s) applied" in err and err.count("\n") == 1
    assert ns_values(client) == ["1", "1"] and rb.exists()


@pytest.mark.tools("sysctl")
def test_netns_sigterm_mid_procedure_restores_everything(netns_pair, tmp_path):
    """A batch scheduler's SIGTERM during the measured procedure undoes every change,
    as Ctrl-C does, and the exit status says it was a SIGTERM (143)."""
    import signal
    import time

    server, client = netns_pair
    client.run(["sysctl", "-w", "net.ipv4.tcp_timestamps=1", "net.ipv4.tcp_sack=1"])
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({"name": "test", "expect": {
        k: {"op": "eq", "value": 0, "reason": "test"} for k in SYSCTLS}}))
    serve = server.popen([sys.executable, "-m", "beoperf", "serve", "--port", "5202"],
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert "port 5202" in serve.stdout.readline()
    proc = client.popen(tune_argv("--procedure", "--peer", server.addr4, "--profile-file",
                                  str(profile), "--repeats", "40", "--keep-all",
                                  "--rollback-file", str(tmp_path / "rb.json")),
                        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while ns_values(client) == ["1", "1"] and time.monotonic() < deadline:
        time.sleep(0.05)  # until the first change is applied (and being measured)
    assert ns_values(client) != ["1", "1"], "the procedure never applied a change"
    proc.send_signal(signal.SIGTERM)
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    assert "terminated by SIGTERM" in err and "Traceback" not in err
    assert ns_values(client) == ["1", "1"]
