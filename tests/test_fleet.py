"""Fleet audit (-w NODESET): grouping of per-node findings, fan-out with ClusterShell."""

from __future__ import annotations

import json
import os
import sys
import textwrap

import pytest
from ClusterShell.NodeSet import NodeSet

from beoperf import fleet
from beoperf.cli import main
from beoperf.fleet import fanout

BEOPERF = f"{sys.executable} -m beoperf"


def doc(**values: object) -> dict:
    """A fake audit document: one finding per keyword (check.key = value)."""
    findings = []
    for name, value in values.items():
        check, key = name.split("__")
        findings.append({"check": check, "key": key, "value": value, "status": "pass",
                         "reason": ""})
    return {"format": "beoperf.audit", "findings": findings}


def fake_fleet() -> dict[str, dict]:
    answers = {}
    for i in range(1, 33):
        version = "5.7.6" if i in (3, 7) else "6.0.54"
        answers[f"node{i:02d}"] = doc(interface__driver_version=version, interface__mtu=1500,
                                      sysctl__net_core=[4096, 8192])
    return answers


# ------------------------------------------------------------------ grouping


def test_grouping_folds_nodes_minority_first():
    groups = {kg.label: kg for kg in fleet.group_findings(fake_fleet())}
    line = fleet.format_inconsistent(groups["interface.driver_version"])
    assert line == ("interface.driver_version: 5.7.6 on node[03,07]; "
                    "6.0.54 on node[01-02,04-06,08-32]")
    assert len(groups["interface.mtu"].groups) == 1


def test_report_lists_same_once_and_no_answer():
    nodes = NodeSet("node[01-34]")
    groups = fleet.group_findings(fake_fleet())
    lines = fleet.format_report(nodes, groups, {"exit status 255: no route": "node[33-34]"})
    assert lines[0] == "did not answer: node[33-34] (exit status 255: no route)"
    assert "32 of 34 nodes answered: node[01-32]" in lines
    assert "same on node[01-32]:" in lines
    assert "  interface.mtu = 1500" in lines
    assert "  sysctl.net_core = 4096 8192" in lines
    assert sum("driver_version" in line for line in lines) == 1


def test_fleet_document():
    groups = fleet.group_findings(fake_fleet())
    d = fleet.fleet_document(NodeSet("node[01-32]"), groups, {})
    assert d["format"] == "beoperf.fleet-audit" and d["schema_version"] == 1
    assert d["nodes"] == d["answered"] == "node[01-32]"
    [bad] = d["inconsistent"]
    assert (bad["check"], bad["key"]) == ("interface", "driver_version")
    assert [(g["value"], g["nodes"]) for g in bad["groups"]] == [
        ("5.7.6", "node[03,07]"), ("6.0.54", "node[01-02,04-06,08-32]")]
    assert {c["label"] for c in d["consistent"]} == {"interface.mtu", "sysctl.net_core"}
    json.dumps(d)


def test_missing_key_is_its_own_group():
    answers = {"n1": doc(a__x=1, a__y=2), "n2": doc(a__x=1)}
    groups = {kg.label: kg for kg in fleet.group_findings(answers)}
    assert fleet.format_inconsistent(groups["a.y"]) == "a.y: 2 on n1; - on n2"
    assert fleet.group_findings({}) == []


# ------------------------------------------------------------------ fan-out (local, no root)


def test_audit_command_quotes_and_escapes():
    cmd = fanout.audit_command("python3 -m beoperf", "latency", "eth 0")
    assert cmd == "python3 -m beoperf audit --json --profile latency --interface 'eth 0'"
    assert fanout.audit_command("x", "latency", "a%h").endswith("--interface a%%h")


@pytest.mark.parametrize("text", ["", "not json", "[1]", '{"format": "other"}',
                                  '{"format": "beoperf.audit"}'])
def test_parse_answer_rejects(text):
    with pytest.raises(ValueError):
        fanout.parse_answer(text)


FAKE_NODE = textwrap.dedent("""
    import json, os, sys, time
    node = os.environ["NODE"]
    if node.startswith("bad"):
        sys.exit("boom on " + node)
    if node.startswith("slow"):
        time.sleep(30)
    if node.startswith("junk"):
        print("not json")
        sys.exit(0)
    mtu = 9000 if node == "ok3" else 1500
    print(json.dumps({"format": "beoperf.audit", "findings": [
        {"check": "interface", "key": "mtu", "value": mtu, "status": "pass"}]}))
""")


def test_fan_out_sorts_answers_and_reasons(tmp_path):
    script = tmp_path / "fake_node.py"
    script.write_text(FAKE_NODE)
    nodes = NodeSet("ok[1-4],bad[1-2],slow1,junk1")
    got = fanout.fan_out(nodes, f"{sys.executable} {script}", exec_template="env NODE=%h",
                         fanout=8, timeout=3)
    assert sorted(got.answers) == ["ok1", "ok2", "ok3", "ok4"]
    reasons = fanout.group_reasons(got.no_answer)
    assert reasons == {"exit status 1: boom on %h": "bad[1-2]",
                       "timed out after 3 s": "slow1",
                       "unparsable output (Expecting value)": "junk1"}
    [mtu] = fleet.group_findings(got.answers)
    assert fleet.format_inconsistent(mtu) == "interface.mtu: 9000 on ok3; 1500 on ok[1-2,4]"


def test_cli_rejects_bad_nodeset(capsys):
    assert main(["audit", "-w", "node[1-", "--exec-template", "env %h"]) == 2
    assert "-w/--nodes" in capsys.readouterr().err
    assert main(["audit", "-w", "n1", "--fanout", "0"]) == 2


# ------------------------------------------------------------------ namespaces


def test_fleet_audit_over_namespaces(netns_hosts, capsys):
    hosts = netns_hosts(4)
    hosts[2].set_mtu(9000)
    missing = f"bptnone{os.getpid()}"
    nodes = NodeSet.fromlist([h.name for h in hosts] + [missing])
    status = main(["audit", "-w", str(nodes), "--exec-template", "ip netns exec %h",
                   "--remote-command", BEOPERF, "--interface", "eth0", "--json"])
    assert status == 0
    d = json.loads(capsys.readouterr().out)
    assert d["format"] == "beoperf.fleet-audit"
    assert NodeSet(d["answered"]) == NodeSet.fromlist([h.name for h in hosts])
    [(reason, silent)] = d["no_answer"].items()
    assert silent == missing and "exit status" in reason
    [mtu] = [kg for kg in d["inconsistent"] if kg["key"] == "mtu"]
    assert [(g["value"], NodeSet(g["nodes"])) for g in mtu["groups"]] == [
        (9000, NodeSet(hosts[2].name)),
        (1500, NodeSet.fromlist([h.name for h in hosts if h is not hosts[2]]))]
