"""`beoperf tune`: planning from fake findings, rollback files, and apply/rollback inside
network namespaces (per-namespace sysctls and the namespace's eth0 MTU only)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pytest

from beoperf.audit import base, tune
from beoperf.audit.base import Finding
from beoperf.audit.tune import ApplyFailed, Change, TuneError
from beoperf.cli import CliError, ExitStatus, Parser, UsageError
from beoperf.cli import tune as cli_tune

LATENCY = base.load_profile("latency")
MTU_RULE = {"op": "eq", "value": 9000, "severity": "warn", "reason": "jumbo frames"}


def parse(*argv: str) -> argparse.Namespace:
    parser = Parser(prog="beoperf")
    cli_tune.add_parser(parser.add_subparsers(dest="command", parser_class=Parser))
    return parser.parse_args(["tune", *argv])


def tune_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "beoperf", "tune", *args]


def fake_findings() -> list[Finding]:
    return [
        Finding("thp", "thp.enabled", "always", "warn", "r"),
        Finding("cpufreq", "cpu.governor", "powersave", "fail", "r", "cpupower frequency-set"),
        Finding("interface", "mtu", 1500, "warn", "r"),
        Finding("irqbalance", "irqbalance.active", True, "warn", "r", "systemctl stop x"),
        Finding("coalesce", "coalesce.rx_usecs", 8, "fail", "r"),
        Finding("coalesce", "coalesce.adaptive_rx", True, "fail", "r"),
        Finding("pause", "pause.autonegotiate", True, "warn", "r"),
        Finding("sysctl", "net.core.busy_poll", 0, "warn", "r"),
        Finding("sysctl", "net.ipv4.tcp_timestamps", 0, "warn", "r"),
        Finding("sysctl", "net.core.busy_read", 50, "pass", "r"),
        Finding("sysctl", "net.core.rmem_max", None, "unknown", "permission denied"),
        Finding("firewall", "iptables.rules", 300, "warn", "r"),
    ]


def latency_with_mtu() -> dict:
    return {"expect": {**LATENCY["expect"], "mtu": MTU_RULE}}


# --------------------------------------------------------------------------- planning


def test_plan_orders_changes_and_lists_advice():
    plan = tune.make_plan(fake_findings(), latency_with_mtu(), "eth9")
    assert [c.key for c in plan.changes] == [
        "net.core.busy_poll", "net.ipv4.tcp_timestamps", "coalesce.rx_usecs",
        "coalesce.adaptive_rx", "pause.autonegotiate", "mtu"]
    assert [a.key for a in plan.advice] == [
        "irqbalance.active", "cpu.governor", "thp.enabled", "iptables.rules"]
    assert all(a.reason for a in plan.advice)
    assert plan.advice[1].command == "cpupower frequency-set"


def test_plan_changes_say_how_to_apply_read_and_restore():
    got = {c.key: c.to_dict() for c in tune.make_plan(fake_findings(), latency_with_mtu(),
                                                       "eth9").changes}
    busy = got["net.core.busy_poll"]
    assert (busy["current"], busy["target"]) == ("0", "50")
    assert busy["apply"] == {"write": "/proc/sys/net/core/busy_poll", "value": "50"}
    assert busy["read"] == {"file": "/proc/sys/net/core/busy_poll"}
    assert busy["restore"] == {"write": "/proc/sys/net/core/busy_poll", "value": "0"}
    assert got["net.ipv4.tcp_timestamps"]["target"] == "1"
    rx = got["coalesce.rx_usecs"]
    assert rx["apply"] == {"argv": ["ethtool", "-C", "eth9", "rx-usecs", "0"]}
    assert rx["restore"] == {"argv": ["ethtool", "-C", "eth9", "rx-usecs", "8"]}
    assert rx["read"] == {"argv": ["ethtool", "-c", "eth9"], "field": "rx_usecs"}
    adaptive = got["coalesce.adaptive_rx"]
    assert adaptive["restore"]["argv"][-2:] == ["adaptive-rx", "on"]
    assert got["pause.autonegotiate"]["apply"]["argv"] == ["ethtool", "-A", "eth9", "autoneg",
                                                           "off"]
    mtu = got["mtu"]
    assert mtu["apply"] == {"argv": ["ip", "link", "set", "dev", "eth9", "mtu", "9000"]}
    assert mtu["restore"]["argv"][-1] == "1500"
    assert mtu["read"] == {"file": "/sys/class/net/eth9/mtu"}


def test_plan_without_interface_keeps_interface_settings_as_advice():
    plan = tune.make_plan(fake_findings(), latency_with_mtu(), None)
    assert {c.check for c in plan.changes} == {"sysctl"}
    assert {"mtu", "coalesce.rx_usecs"} <= {a.key for a in plan.advice}


def test_plan_skips_rules_without_a_single_target():
    profile = {"expect": {"thp.enabled": {"op": "in", "value": ["madvise", "never"]},
                          "net.ipv4.tcp_rmem": {"op": "ge", "value": 16777216,
                                                "set": "4096 131072 16777216"}}}
    findings = [Finding("sysctl", "net.ipv4.tcp_rmem", [4096, 131072, 6291456], "fail", "r"),
                Finding("sysctl", "net.core.rmem_max", 5, "warn", "r")]
    plan = tune.make_plan(findings, profile, "eth0")
    assert [(c.current, c.target) for c in plan.changes] == [
        ("4096 131072 6291456", "4096 131072 16777216")]
    assert plan.advice[0].reason == "the profile names no single value to set"


def test_an_unresolved_fact_reference_is_never_a_target():
    profile = {"expect": {"rings.rx": {"op": "ge", "value": "@rings.rx_max", "reason": "r"}}}
    findings = [Finding("rings", "rings.rx", 256, "warn", "r")]  # no target carried
    plan = tune.make_plan(findings, profile, "eth0")
    assert plan.changes == []
    assert plan.advice[0].reason == "the profile names no single value to set"


def test_same_ignores_whitespace():
    assert tune.same("4096\t131072\t6291456", "4096 131072 6291456")
    assert not tune.same("4096 131072", "4096 131073")


# --------------------------------------------------------------------------- apply (faked)


def test_apply_failure_rolls_back_in_reverse(monkeypatch):
    state = {"a": "1", "b": "2", "c": "3"}
    log: list[tuple[str, str]] = []

    def fake_set(change: Change, value: str) -> None:
        if change.key == "net.x.c" and value == "30":
            raise TuneError("cannot set c")
        log.append((change.key, value))
        state[change.key[-1]] = value

    monkeypatch.setattr(tune, "set_value", fake_set)
    monkeypatch.setattr(tune, "read_value", lambda c: state[c.key[-1]])
    changes = [Change(f"net.x.{k}", "sysctl", None, v, v + "0") for k, v in state.items()]
    with pytest.raises(ApplyFailed) as info:
        tune.apply_changes(changes)
    assert info.value.change.key == "net.x.c" and info.value.rolled_back == 2
    assert info.value.restore_errors == []
    assert log == [("net.x.a", "10"), ("net.x.b", "20"), ("net.x.b", "2"), ("net.x.a", "1")]
    assert state == {"a": "1", "b": "2", "c": "3"}


def test_interrupt_during_apply_undoes_only_what_was_touched(monkeypatch):
    state = {"a": "1", "b": "2", "c": "3"}
    log: list[tuple[str, str]] = []

    def fake_set(change: Change, value: str) -> None:
        log.append((change.key, value))
        state[change.key[-1]] = value
        if change.key == "net.x.b" and value == "20":
            raise KeyboardInterrupt  # Ctrl-C just after b was written

    monkeypatch.setattr(tune, "set_value", fake_set)
    monkeypatch.setattr(tune, "read_value", lambda c: state[c.key[-1]])
    changes = [Change(f"net.x.{k}", "sysctl", None, v, v + "0") for k, v in state.items()]
    with pytest.raises(KeyboardInterrupt):
        tune.apply_changes(changes)
    assert log == [("net.x.a", "10"), ("net.x.b", "20"), ("net.x.b", "2"), ("net.x.a", "1")]
    assert state == {"a": "1", "b": "2", "c": "3"}  # c never touched


def test_readback_mismatch_is_a_failure(monkeypatch):
    monkeypatch.setattr(tune, "set_value", lambda c, v: None)
    monkeypatch.setattr(tune, "read_value", lambda c: "7")
    with pytest.raises(TuneError, match="read back '7'"):
        tune.set_checked(Change("net.x.y", "sysctl", None, "7", "8"), "8")


# --------------------------------------------------------------------------- rollback files


def rollback_file(tmp_path: Path, changes: list[Change]) -> Path:
    path = tmp_path / "rb.json"
    tune.write_new_file(str(path), tune.rollback_document(changes, "latency", "eth0", "now"))
    return path


def test_rollback_file_round_trip(tmp_path):
    changes = [Change("net.ipv4.tcp_rmem", "sysctl", None, "4096 131072 6291456", "1 2 3"),
               Change("mtu", "interface", "eth0", "1500", "9000")]
    path = rollback_file(tmp_path, changes)
    doc, loaded = tune.load_rollback(str(path))
    assert loaded == changes
    assert doc["format"] == "beoperf.rollback" and doc["schema_version"] == 2
    assert doc["changes"][1]["restore"] == {"argv": ["ip", "link", "set", "dev", "eth0",
                                                     "mtu", "1500"]}
    assert [p.name for p in tmp_path.iterdir()] == ["rb.json"]  # no temporary left behind
    with pytest.raises(FileExistsError):  # never overwritten
        rollback_file(tmp_path, changes)


@pytest.mark.parametrize("mangle, message", [
    (lambda d: d.update(format="other"), "not a beoperf rollback file"),
    (lambda d: d.update(schema_version=9), "unsupported schema_version"),
    (lambda d: d["changes"][0].update(previous="9000"), "'restore' does not match"),
    (lambda d: d["changes"][0].update(check="shell"), "needs key, check"),
    (lambda d: d["changes"][0].update(check="sysctl"), "not a setting"),
    (lambda d: d["changes"][0].update(key="driver"), "not a setting"),
    (lambda d: d["changes"][0].update(interface="../x"), "not a setting"),
])
def test_bad_rollback_files_are_refused(tmp_path, mangle, message):
    path = rollback_file(tmp_path, [Change("mtu", "interface", "eth0", "1500", "9000")])
    doc = json.loads(path.read_text())
    mangle(doc)
    path.write_text(json.dumps(doc))
    with pytest.raises(TuneError, match=message):
        tune.load_rollback(str(path))


def test_cli_bad_rollback_file_is_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    for path in (bad, tmp_path / "missing.json"):
        res = subprocess.run(tune_argv("--rollback", str(path)), capture_output=True, text=True)
        assert res.returncode == 1
        assert res.stderr.strip().count("\n") == 0 and "bad rollback file" in res.stderr


# --------------------------------------------------------------------------- CLI checks


def test_cli_apply_refuses_without_root(monkeypatch):
    monkeypatch.setattr(cli_tune.os, "geteuid", lambda: 1000)
    monkeypatch.setattr(cli_tune, "run_audit", lambda *a: pytest.fail("audit ran"))
    with pytest.raises(CliError, match="run it as root") as info:
        cli_tune.run(parse("--apply", "--interface", "lo"))
    assert info.value.status == ExitStatus.ERROR


def test_cli_usage_errors(tmp_path):
    with pytest.raises(UsageError, match="unknown profile"):
        cli_tune.run(parse("--profile", "fastest"))
    bad = tmp_path / "p.json"
    bad.write_text('{"expect": []}')
    with pytest.raises(UsageError, match="no 'expect' object"):
        cli_tune.run(parse("--profile-file", str(bad)))
    with pytest.raises(UsageError, match="not allowed with"):
        parse("--apply", "--rollback", "x.json")


def test_cli_plan_on_this_machine_changes_nothing(capsys):
    before = Path("/proc/sys/net/ipv4/tcp_timestamps").read_text()
    assert cli_tune.run(parse("--interface", "lo", "--json")) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["format"] == "beoperf.tune-plan" and doc["interface"] == "lo"
    checks = [c["check"] for c in doc["changes"]]
    assert checks == sorted(checks, key=tune.ORDER.index)
    assert Path("/proc/sys/net/ipv4/tcp_timestamps").read_text() == before
    assert cli_tune.run(parse("--interface", "lo")) == 0
    assert "Nothing was changed" in capsys.readouterr().out


# --------------------------------------------------------------------------- namespaces


SYSCTLS = ("net.ipv4.tcp_timestamps", "net.ipv4.tcp_sack", "net.ipv4.tcp_rmem")
RMEM_TARGET = "4096 87380 4194304"


def host_state() -> dict:
    """This (root namespace) host's values of the sysctls touched, and its MTUs."""
    state = {k: Path("/proc/sys/" + k.replace(".", "/")).read_text() for k in SYSCTLS}
    links = json.loads(subprocess.run(["ip", "-j", "link", "show"], capture_output=True,
                                      text=True, check=True).stdout)
    state["mtus"] = {link["ifname"]: link["mtu"] for link in links}
    return state


def ns_state(host) -> dict:
    paths = ["/proc/sys/" + k.replace(".", "/") for k in SYSCTLS]
    out = host.run(["cat", *paths, f"/sys/class/net/{host.ifname}/mtu"]).stdout.splitlines()
    return {**dict(zip(SYSCTLS, [" ".join(v.split()) for v in out[:3]], strict=True)),
            "mtu": out[3]}


def write_profile(tmp_path: Path, mtu: int) -> Path:
    expect = {
        "net.ipv4.tcp_timestamps": {"op": "eq", "value": 0, "reason": "test"},
        "net.ipv4.tcp_sack": {"op": "eq", "value": 0, "reason": "test"},
        "net.ipv4.tcp_rmem": {"op": "eq", "value": [int(v) for v in RMEM_TARGET.split()],
                              "set": RMEM_TARGET, "reason": "test"},
        "mtu": {"op": "eq", "value": mtu, "reason": "test"},
    }
    path = tmp_path / f"profile-{mtu}.json"
    path.write_text(json.dumps({"name": "test", "expect": expect}))
    return path


def ns_tune(host, *args: str):
    return host.run(tune_argv("--interface", host.ifname, *args), check=False)


def test_netns_plan_apply_rollback(netns_pair, tmp_path):
    server, client = netns_pair
    host_before = host_state()
    server.run(["sysctl", "-w", "net.ipv4.tcp_rmem=4096 131072 6291456"])
    before = ns_state(server)
    assert before["net.ipv4.tcp_rmem"] == "4096 131072 6291456"
    profile = str(write_profile(tmp_path, 9000))

    res = ns_tune(server, "--profile-file", profile, "--plan", "--json")
    assert res.returncode == 0, res.stderr
    plan = json.loads(res.stdout)
    assert [c["key"] for c in plan["changes"]] == [
        "net.ipv4.tcp_rmem", "net.ipv4.tcp_timestamps", "net.ipv4.tcp_sack", "mtu"]
    assert plan["changes"][-1]["current"] == before["mtu"] == "1500"
    assert ns_state(server) == before  # planning changes nothing

    rb = tmp_path / "rb.json"
    res = ns_tune(server, "--profile-file", profile, "--apply", "--rollback-file", str(rb))
    assert res.returncode == 0, res.stderr
    assert ns_state(server) == {"net.ipv4.tcp_timestamps": "0", "net.ipv4.tcp_sack": "0",
                                "net.ipv4.tcp_rmem": RMEM_TARGET, "mtu": "9000"}
    saved = json.loads(rb.read_text())
    assert saved["format"] == "beoperf.rollback" and saved["interface"] == "eth0"
    assert {c["key"]: c["previous"] for c in saved["changes"]}["net.ipv4.tcp_rmem"] == \
        "4096 131072 6291456"
    assert ns_state(client)["mtu"] == "1500"  # the other end is not touched

    res = server.run(tune_argv("--rollback", str(rb)), check=False)
    assert res.returncode == 0, res.stderr
    assert "restored 4 value(s)" in res.stdout
    assert ns_state(server) == before
    assert host_state() == host_before


def test_netns_failure_halfway_rolls_back(netns_pair, tmp_path):
    server, _client = netns_pair
    host_before = host_state()
    before = ns_state(server)
    profile = str(write_profile(tmp_path, 70000))  # above the veth maximum (65535)
    rb = tmp_path / "rb.json"
    res = ns_tune(server, "--profile-file", profile, "--apply", "--rollback-file", str(rb))
    assert res.returncode == 1
    err = res.stderr.strip()
    assert err.count("\n") == 0, err
    assert "mtu" in err and "rolled back the 3 change(s)" in err
    assert res.stdout.count("set net.ipv4.") == 3
    assert ns_state(server) == before
    assert len(json.loads(rb.read_text())["changes"]) == 4  # snapshot written first
    assert host_state() == host_before


def gro(host) -> str:
    out = host.run(["ethtool", "-k", host.ifname]).stdout
    return next(line.split(":")[1].split()[0] for line in out.splitlines()
                if line.startswith("generic-receive-offload:"))


def offload_profile(tmp_path: Path) -> str:
    path = tmp_path / "gro.json"
    path.write_text(json.dumps({"name": "gro", "expect": {
        "offload.generic-receive-offload": {"op": "eq", "value": True, "set": "on",
                                            "reason": "test"},
        "net.ipv4.tcp_sack": {"op": "eq", "value": 0, "reason": "test"}}}))
    return str(path)


def host_offloads() -> str:
    return subprocess.run(["ethtool", "-k", "lo"], capture_output=True, text=True).stdout


def test_netns_ethtool_offload_applied_and_rolled_back(netns_pair, tmp_path):
    server, client = netns_pair
    host_before, lo_before = host_state(), host_offloads()
    server.run(["ethtool", "-K", server.ifname, "gro", "off"])
    profile, rb = offload_profile(tmp_path), tmp_path / "rb.json"
    res = ns_tune(server, "--profile-file", profile, "--plan", "--json")
    plan = json.loads(res.stdout)
    assert [(c["check"], c["key"]) for c in plan["changes"]] == [
        ("sysctl", "net.ipv4.tcp_sack"), ("offloads", "offload.generic-receive-offload")]
    assert plan["changes"][1]["apply"] == {"argv": ["ethtool", "-K", "eth0", "gro", "on"]}
    res = ns_tune(server, "--profile-file", profile, "--apply", "--rollback-file", str(rb))
    assert res.returncode == 0, res.stderr
    assert gro(server) == "on" and gro(client) == "off"
    res = server.run(tune_argv("--rollback", str(rb)), check=False)
    assert res.returncode == 0, res.stderr
    assert gro(server) == "off" and ns_state(server)["net.ipv4.tcp_sack"] == "1"
    assert host_state() == host_before and host_offloads() == lo_before


LOCK_HOLDER = ("import sys, time; from beoperf.audit.tune import TuneLock\n"
               "with TuneLock():\n    print('locked', flush=True); time.sleep(60)\n")


def test_netns_second_tune_is_refused_while_one_runs(netns_pair, tmp_path):
    server, client = netns_pair
    before = ns_state(server)
    holder = server.popen([sys.executable, "-c", LOCK_HOLDER], stdout=subprocess.PIPE,
                          text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        profile = str(write_profile(tmp_path, 9000))
        res = ns_tune(server, "--profile-file", profile, "--apply",
                      "--rollback-file", str(tmp_path / "rb.json"))
        assert res.returncode == 1
        assert f"another beoperf tune (pid {holder.pid})" in res.stderr
        assert res.stderr.strip().count("\n") == 0
        assert ns_state(server) == before
        # another namespace has its own lock
        res = ns_tune(client, "--profile-file", profile, "--apply",
                      "--rollback-file", str(tmp_path / "rb-client.json"))
        assert res.returncode == 0, res.stderr
        res = client.run(tune_argv("--rollback", str(tmp_path / "rb-client.json")),
                         check=False)
        assert res.returncode == 0, res.stderr
    finally:
        holder.kill()
        holder.wait()
    res = ns_tune(server, "--profile-file", profile, "--apply",
                  "--rollback-file", str(tmp_path / "rb.json"))
    assert res.returncode == 0, res.stderr  # released when its holder died
    assert server.run(tune_argv("--rollback", str(tmp_path / "rb.json")), check=False) \
        .returncode == 0
    assert ns_state(server) == before


def test_netns_rollback_file_of_another_namespace_is_refused(netns_pair, tmp_path):
    server, client = netns_pair
    before_server, before_client = ns_state(server), ns_state(client)
    profile, rb = str(write_profile(tmp_path, 9000)), tmp_path / "rb.json"
    assert ns_tune(server, "--profile-file", profile, "--apply",
                   "--rollback-file", str(rb)).returncode == 0
    res = client.run(tune_argv("--rollback", str(rb)), check=False)
    assert res.returncode == 1 and "rollback refused" in res.stderr
    assert "network namespace" in res.stderr and "--force" in res.stderr
    assert ns_state(client) == before_client
    assert server.run(tune_argv("--rollback", str(rb)), check=False).returncode == 0
    assert ns_state(server) == before_server


def test_persist_files_for_a_plan(tmp_path, capsys):
    changes = [Change("net.ipv4.tcp_sack", "sysctl", None, "1", "0"),
               Change("coalesce.rx_usecs", "coalesce", "eth9", "8", "0"),
               Change("mtu", "interface", "eth9", "1500", "9000")]
    files = tune.persist_files(changes)
    assert files["90-beoperf.conf"].splitlines()[1:] == ["net.ipv4.tcp_sack = 0"]
    unit = files["beoperf-tune.service"].splitlines()
    assert [line for line in unit if line.startswith("ExecStart=")] == [
        "ExecStart=ethtool -C eth9 rx-usecs 0", "ExecStart=ip link set dev eth9 mtu 9000"]
    assert "After=network-online.target" in unit and "Type=oneshot" in unit
    assert tune.persist_files([]) == {}
    plan = tune.Plan(changes=changes)
    assert cli_tune.write_persist(str(tmp_path / "p"), plan) == 0
    assert sorted(p.name for p in (tmp_path / "p").iterdir()) == [
        "90-beoperf.conf", "beoperf-tune.service"]
    with pytest.raises(UsageError, match="exists; not overwritten"):
        cli_tune.write_persist(str(tmp_path / "p"), plan)
