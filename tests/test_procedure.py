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

from beoperf.audit import procedure, tune
from beoperf.audit.procedure import ProcedureFailed
from beoperf.audit.tune import Change, TuneError
from beoperf.cli import CliError, ExitStatus, Parser, UsageError
from beoperf.cli import tune as cli_tune


def noisy(mean: float, n: int = 10, spread: float = 0.01, seed: int = 1) -> list[float]:
    rng = random.Random(seed)
    return [mean * (1 + rng.uniform(-spread, spread)) for _ in range(n)]


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
    text = procedure.render(out, 8, "rb.json")
    lines = text.splitlines()
    assert lines[0].split() == ["Configuration", "Latency", "mean", "(variance)", "Impact"]
    assert lines[1].startswith("Default ") and lines[1].endswith("-")
    assert lines[5].startswith("Combined") and lines[5].endswith("%")
    assert "net.x.a=0: kept (significant" in text and "beoperf tune --rollback rb.json" in text


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
    doc = procedure.document(out, profile="p", interface="eth0", peer="10.0.0.2", port=5202,
                             repeats=6, keep_all=False, rollback_file="rb.json")
    assert (doc["format"], doc["schema_version"]) == ("beoperf.tune-procedure", 1)
    assert [r["label"] for r in doc["rows"]] == ["Default", "net.x.a=0", "Combined"]
    assert doc["rollback_file"] == "rb.json" and doc["kept"] == ["net.x.a"]
    json.dumps(doc, allow_nan=False)


# --------------------------------------------------------------------------- CLI checks


def test_cli_procedure_usage_and_root(monkeypatch):
    monkeypatch.setattr(cli_tune, "run_audit", lambda *a: pytest.fail("audit ran"))
    with pytest.raises(UsageError, match="needs --peer"):
        cli_tune.run(parse("--procedure"))
    with pytest.raises(UsageError, match="at least 4"):
        cli_tune.run(parse("--procedure", "--peer", "127.0.0.1", "--repeats", "2"))
    with pytest.raises(UsageError, match="not allowed with"):
        parse("--procedure", "--apply")
    monkeypatch.setattr(cli_tune.os, "geteuid", lambda: 1000)
    with pytest.raises(CliError, match="run it as root") as info:
        cli_tune.run(parse("--procedure", "--peer", "127.0.0.1"))
    assert info.value.status == ExitStatus.ERROR


# --------------------------------------------------------------------------- namespaces


SYSCTLS = ("net.ipv4.tcp_timestamps", "net.ipv4.tcp_sack")


def sysctl_path(key: str) -> str:
    return "/proc/sys/" + key.replace(".", "/")


def ns_values(host) -> list[str]:
    return host.run(["cat", *map(sysctl_path, SYSCTLS)]).stdout.split()


def tune_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "beoperf", "tune", *args]


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
    doc = json.loads(res.stdout)
    assert doc["format"] == "beoperf.tune-procedure" and doc["schema_version"] == 1
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


def test_netns_unreachable_peer_is_one_line(netns_pair, tmp_path):
    server, client = netns_pair  # no beoperf serve running
    rb = tmp_path / "rb.json"
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({"expect": {
        "net.ipv4.tcp_sack": {"op": "eq", "value": 0, "reason": "test"}}}))
    res = client.run(tune_argv("--procedure", "--peer", server.addr4, "--profile-file",
                               str(profile), "--repeats", "4", "--rollback-file", str(rb)),
                     check=False)
    assert res.returncode == 1
    assert res.stderr.strip().count("\n") == 0 and "cannot connect" in res.stderr
    assert not rb.exists() and ns_values(client)[1] == "1"
