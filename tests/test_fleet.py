"""Fleet audit (-w NODESET): grouping of per-node findings, fan-out with ClusterShell."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from ClusterShell.NodeSet import NodeSet

from beoperf import __version__, model, report
from beoperf.cli import ExitStatus, main
from beoperf.launch import clush, remote
from beoperf.launch.base import LaunchSpec
from beoperf.model import fleet as fleet_model
from beoperf.model.document import Document, validate
from beoperf.report import fleet as fleet_report
from beoperf.suites import fleet as suite

BEOPERF = f"{sys.executable} -m beoperf"
FIXTURES = Path(__file__).parent / "fixtures"


def doc(**values: object) -> list[dict]:
    """A fake audit's findings: one per keyword (check__key = value, or = (value,
    status))."""
    findings = []
    for name, value in values.items():
        check, key = name.split("__")
        value, status = value if isinstance(value, tuple) else (value, "pass")
        findings.append({"check": check, "key": key, "value": value, "status": status,
                         "reason": ""})
    return findings


def fake_fleet() -> dict[str, list[dict]]:
    answers = {}
    for i in range(1, 33):
        version = "5.7.6" if i in (3, 7) else "6.0.54"
        answers[f"node{i:02d}"] = doc(interface__driver_version=version, interface__mtu=1500,
                                      sysctl__net_core=[4096, 8192],
                                      sysctl__busy=(0, "warn"),
                                      coalesce__rx=(8, "fail") if i == 5 else (0, "pass"))
    return answers


def body_of(answers: dict, nodes: str | None = None, no_answer: dict | None = None,
            other: dict | None = None) -> dict:
    groups = fleet_model.group_findings(answers)
    asked = NodeSet(nodes) if nodes else NodeSet.fromlist(list(answers))
    return fleet_model.body(asked, groups, no_answer or {}, other)


def lines_of(body: dict) -> dict[str, str]:
    """label -> the text line of each key (inconsistent or consistent)."""
    out = {k["label"]: fleet_report.inconsistent_line(k) for k in body["inconsistent"]}
    out.update({k["label"]: fleet_report.consistent_line(k) for k in body["consistent"]})
    return out


def text_of(body: dict) -> list[str]:
    """The text report after its answer (the lines issue 9 printed)."""
    return rendered(body)[1]


def rendered(body: dict) -> tuple[list[str], list[str]]:
    """(the answer's lines, the rest) of the text report."""
    doc = Document("fleet-audit", body, model.make_meta())
    validate("fleet-audit", doc.to_json())
    top, rest = report.render(doc).split("\n\n", 1)
    assert top.split()[0] in ("FAIL", "WARN", "OK"), top
    return top.splitlines(), rest.splitlines()


# ------------------------------------------------------------------ grouping


def test_grouping_folds_nodes_minority_first():
    lines = lines_of(body_of(fake_fleet()))
    assert lines["interface.driver_version"] == (
        "interface.driver_version: 5.7.6 [ok] on node[03,07]; "
        "6.0.54 [ok] on node[01-02,04-06,08-32]")
    groups = {kg.label: kg for kg in fleet_model.group_findings(fake_fleet())}
    assert len(groups["interface.mtu"].groups) == 1
    assert lines["coalesce.rx"] == "coalesce.rx: 8 [FAIL] on node05; 0 [ok] on node[01-04,06-32]"


def test_same_value_with_another_verdict_is_an_inconsistency():
    answers = {"n1": doc(a__x=(7, "pass")), "n2": doc(a__x=(7, "warn")),
               "n3": doc(a__x=(7, "pass"))}
    assert lines_of(body_of(answers)) == {"a.x": "a.x: 7 [WARN] on n2; 7 [ok] on n[1,3]"}


def test_report_lists_same_once_and_no_answer():
    lines = text_of(body_of(fake_fleet(), "node[01-34]",
                            {"exit status 255: no route": "node[33-34]"}))
    assert lines[0] == "did not answer: node[33-34] (exit status 255: no route)"
    assert "32 of 34 nodes answered: node[01-32]" in lines
    assert "same on node[01-32]:" in lines
    assert "  ok    interface.mtu = 1500" in lines
    assert "  ok    sysctl.net_core = 4096 8192" in lines
    assert "  WARN  sysctl.busy = 0" in lines
    assert sum("driver_version" in line for line in lines) == 1


def test_report_lists_other_versions_and_escapes_what_nodes_send():
    answers = {"n1": doc(a__x="\x1b[2Jgone")}
    lines = text_of(body_of(answers, "n[1-3]", {"exit status 1: \x1b]0;owned\x07": "n3"},
                            {"0.0.9": "n2"}))
    assert lines[:3] == ["did not answer: n3 (exit status 1: \\x1b]0;owned\\x07)",
                         f"another beoperf version, not used: n2 (beoperf 0.0.9; this is "
                         f"{__version__})",
                         "1 of 3 nodes answered: n1"]
    assert "  ok    a.x = \\x1b[2Jgone" in lines
    assert not any("\x1b" in line for line in lines)


def test_fleet_answer_comes_first_by_severity():
    answers = fake_fleet()
    body = body_of(answers, "node[01-33]", {"timed out": "node33"}, {})
    top, _ = rendered(body)
    labels = [line.split()[0] for line in top if not line.startswith(" ")]
    assert labels == sorted(labels, key=["FAIL", "WARN", "IMPRECISE", "NOTE", "OK"].index)
    assert top[0] == "FAIL      did not answer: node33 (timed out)"
    assert any(line.startswith("WARN      ") and "differ" in line for line in top)
    same = body_of({"n1": answers["node01"]}, "n1", {}, {})
    for key in same["consistent"]:
        key["status"] = "pass"
    top, _ = rendered(same)
    assert top[0].startswith("OK        n1 answered; ") and len(top) == 1


def test_fleet_text_is_what_issue_9_printed():
    """The renderer, on the grouping of fixed answers, prints byte for byte what
    fleet.format_report printed before issue 10 (fixtures/rendered/made_by_issue9.py)."""
    given = json.loads((FIXTURES / "rendered" / "fleet-audit-answers.json").read_text())
    body = body_of(given["answers"], "node[01-36]", given["no_answer"], given["other"])
    expected = (FIXTURES / "rendered" / "fleet-audit.txt").read_text()
    assert "\n".join(text_of(body)) + "\n" == expected


def test_fleet_document():
    body = body_of(fake_fleet(), "node[01-32]", {}, {"0.0.9": "node33"})
    d = Document("fleet-audit", body, model.make_meta(["beoperf", "audit"])).to_json()
    validate("fleet-audit", d)
    assert (d["format"], d["kind"], d["schema_version"]) == ("beoperf", "fleet-audit", 2)
    assert d["meta"]["beoperf"] == __version__
    assert body["other_version"] == {"0.0.9": "node33"}
    assert body["nodes"] == body["answered"] == "node[01-32]"
    assert fleet_model.answer_counts(body) == (32, 32)
    bad = {kg["key"]: kg for kg in body["inconsistent"]}["driver_version"]
    assert bad["check"] == "interface"
    assert [(g["value"], g["nodes"], g["status"]) for g in bad["groups"]] == [
        ("5.7.6", "node[03,07]", "pass"), ("6.0.54", "node[01-02,04-06,08-32]", "pass")]
    assert {c["label"]: c["status"] for c in body["consistent"]} == {
        "interface.mtu": "pass", "sysctl.net_core": "pass", "sysctl.busy": "warn"}


def test_fleet_audit_files_of_earlier_versions_load():
    path = FIXTURES / "documents" / "fleet-audit-v1-after-issue9.json"
    raw = json.loads(path.read_text())
    loaded = model.load(path)
    validate("fleet-audit", loaded.to_json())
    assert (loaded.kind, loaded.schema_version) == ("fleet-audit", 2)
    assert loaded.meta["beoperf"] == raw["beoperf"]
    assert {k: loaded.body[k] for k in fleet_model.BODY_KEYS} == \
        {k: raw[k] for k in fleet_model.BODY_KEYS}
    assert fleet_model.answer_counts(loaded.body) == (2, 2)
    assert "\n2 of 2 nodes answered: n[1-2]\n" in report.render(loaded)


def test_missing_key_is_its_own_group():
    answers = {"n1": doc(a__x=1, a__y=2), "n2": doc(a__x=1)}
    assert lines_of(body_of(answers))["a.y"] == "a.y: 2 [ok] on n1; - [?] on n2"
    assert fleet_model.group_findings({}) == []


# ------------------------------------------------------------------ fan-out (local, no root)


def test_node_command_quotes_and_escapes():
    argv = remote.node_argv("python3 -m beoperf", suite.audit_args("latency", "eth 0"))
    assert argv == ("python3", "-m", "beoperf", "audit", "--json", "--profile", "latency",
                    "--interface", "eth 0")
    spec = LaunchSpec(argv, hosts=("n1",))
    assert clush.remote_command(spec) == \
        "python3 -m beoperf audit --json --profile latency --interface 'eth 0'"
    odd = LaunchSpec(remote.node_argv("x", suite.audit_args("latency", "a%h")), hosts=("n1",))
    assert clush.remote_command(odd).endswith("--interface a%%h")


def test_remote_command_with_shell_syntax_runs_in_a_shell():
    """--remote-command 'cd /opt && python3 -m beoperf' meant what it said when it was
    pasted into the command string; as words it would not, so it runs as sh -c."""
    argv = remote.node_argv("cd /opt && python3 -m beoperf", ["audit", "--json"])
    assert argv == ("sh", "-c", "cd /opt && python3 -m beoperf audit --json")
    assert remote.node_argv("  python3   -m beoperf ", ["audit"]) == (
        "python3", "-m", "beoperf", "audit")


ENVELOPE = ('"format": "beoperf", "kind": "audit", "schema_version": 2, '
            f'"meta": {{"beoperf": "{__version__}"}}')
BODY = '"profile": "latency", "interface": null, "host": {}, "buffer_advice": null'
LEGACY = f'"format": "beoperf.audit", "schema_version": 1, "beoperf": "{__version__}"'


@pytest.mark.parametrize("text, reason", [
    ("", "empty"), ("not json", "invalid JSON"), ("[1]", "not a beoperf audit document"),
    ('{"format": "other"}', "not a beoperf audit document"),
    ('{"format": "beoperf", "kind": "pingpong"}', "not a beoperf audit document"),
    ("{" + ENVELOPE + "}", "'body' is a required property"),
    ("{" + ENVELOPE + ', "body": {' + BODY + ', "findings": [1]}}',
     "at body/findings/0: 1 is not of type 'object'"),
    ("{" + ENVELOPE + ', "body": {' + BODY + ', "findings": [], "x": 1}}',
     "Additional properties"),
    ("{" + LEGACY + ', "profile": "latency", "findings": [1]}', "'interface' is a required"),
    ("{" + ENVELOPE + ', "body": {' + BODY + ', "findings": [], "x": NaN}}',
     "NaN is not a number"),
    ("{" + ENVELOPE + ', "x": 1e999}', "out of range"),
    ("{" + ENVELOPE + ', "x": ' + "[" * 5000 + "]" * 5000 + "}", "nested more than"),
    ("x" * 101, "output over 100 bytes"),
])
def test_parse_answer_rejects(text, reason):
    with pytest.raises(ValueError, match=reason):
        suite.parse_answer(text, limit=100 if text == "x" * 101 else suite.ANSWER_LIMIT)


def test_parse_answer_reads_this_version_in_both_shapes():
    findings = '[{"check": "a", "key": "x", "value": 1, "status": "pass", "reason": "r"}]'
    now = suite.parse_answer("{" + ENVELOPE + ', "body": {' + BODY + ', "findings": '
                             + findings + "}}")
    before = suite.parse_answer("{" + LEGACY + ', "profile": "latency", "interface": null, '
                                f'"host": {{}}, "findings": {findings}}}')
    assert now.body["findings"] == before.body["findings"] == json.loads(findings)


@pytest.mark.parametrize("version, shown", [('"0.0.9"', "0.0.9"), ("null", "of unknown")])
def test_parse_answer_sets_other_versions_apart(version, shown):
    for text in ('{"format": "beoperf.audit", "beoperf": ' + version + ', "findings": []}',
                 '{"format": "beoperf", "kind": "audit", "meta": {"beoperf": ' + version + "}}"):
        with pytest.raises(suite.OtherVersion, match=f"beoperf {shown}") as info:
            suite.parse_answer(text)
        assert info.value.version.startswith(shown)


@pytest.mark.parametrize("template, problem", [
    ("env NODE=x", "has no %h"), ("env %hosts", "%hosts"), ("env 5%", "not a valid"),
    ("ip netns exec %h", None), ("ssh %{host}", None), ("x %%h %host", None)])
def test_exec_template_must_name_the_node(template, problem):
    got = clush.template_problem(template)
    assert got is None if problem is None else problem in got


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
    if node.startswith("silent"):
        sys.exit(0)
    if node.startswith("huge"):  # 100 MB of short lines
        os.execvp("sh", ["sh", "-c", "yes x | head -c 100000000"])
    if node.startswith("endless"):  # never stops
        os.execvp("sh", ["sh", "-c", "yes 'no end'"])
    if node.startswith("noisy"):  # stderr only, without end
        os.execvp("sh", ["sh", "-c", "yes 'complaint' >&2"])
    mtu = 9000 if node == "ok3" else 1500
    status = "warn" if mtu == 9000 else "pass"
    finding = {"check": "interface", "key": "mtu", "value": mtu, "status": status,
               "reason": "r"}
    if node.startswith("old"):  # what beoperf 0.0.9 printed
        print(json.dumps({"format": "beoperf.audit", "beoperf": "0.0.9",
                          "findings": [finding]}))
        sys.exit(0)
    print(json.dumps({"format": "beoperf", "kind": "audit", "schema_version": 2,
                      "meta": {"beoperf": "THIS_VERSION"},
                      "body": {"profile": "latency", "interface": None, "host": {},
                               "findings": [finding], "buffer_advice": None}}))
""")


def fake_node(tmp_path) -> str:
    script = tmp_path / "fake_node.py"
    script.write_text(FAKE_NODE.replace("THIS_VERSION", __version__))
    return str(script)


def fan_out(nodes: str, script: str, timeout: float) -> suite.Sorted:
    spec = LaunchSpec((sys.executable, script), hosts=tuple(NodeSet(nodes)),
                      agent="exec env NODE=%h")
    return suite.sort_outcome(remote.run(spec, timeout=timeout, fanout=8), suite.ANSWER_LIMIT)


def test_fan_out_sorts_answers_and_reasons(tmp_path):
    got = fan_out("ok[1-4],bad[1-2],slow1,junk1,silent1", fake_node(tmp_path), timeout=3)
    assert sorted(got.answers) == ["ok1", "ok2", "ok3", "ok4"]
    reasons = remote.group_reasons(got.no_answer)
    assert reasons == {"exit status 1: boom on %h": "bad[1-2]",
                       "timed out after 3 s": "slow1", "no output": "silent1",
                       "unparsable output: invalid JSON (Expecting value at line 1 column 1)":
                           "junk1"}
    [mtu] = body_of(got.answers)["inconsistent"]
    assert fleet_report.inconsistent_line(mtu) == \
        "interface.mtu: 9000 [WARN] on ok3; 1500 [ok] on ok[1-2,4]"


def test_fan_out_bounds_each_nodes_output(tmp_path):
    """A node printing 100 MB, one printing forever and one complaining forever on stderr
    are each cut off at the limit: the fan-out ends at once, the others are answered."""
    started = time.monotonic()
    got = fan_out("ok[1-2],huge1,endless1,noisy1,old[1-2]", fake_node(tmp_path), timeout=60)
    elapsed = time.monotonic() - started
    assert sorted(got.answers) == ["ok1", "ok2"]
    assert remote.group_reasons(got.no_answer) == {
        f"output over {suite.ANSWER_LIMIT:,} bytes": "endless1,huge1,noisy1"}
    assert remote.group_reasons(got.other_version) == {"0.0.9": "old[1-2]"}
    assert elapsed < 30  # the 60 s timeout never came into it


def test_fleet_audit_output_bound_keeps_memory_bounded(tmp_path):
    """Peak memory of a fleet audit with a node printing 100 MB, against the same audit
    without it, both measured here: the difference stays near the 4 MiB limit."""
    script = fake_node(tmp_path)
    probe = textwrap.dedent("""
        import resource, subprocess, sys
        subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    """)

    def peak_kib(nodes: str) -> int:
        argv = [sys.executable, "-c", probe, sys.executable, "-m", "beoperf", "audit", "-w",
                nodes, "--exec-template", "exec env NODE=%h", "--remote-command",
                f"{sys.executable} {script}", "--timeout", "60"]
        return int(subprocess.run(argv, capture_output=True, text=True, timeout=120,
                                  check=True).stdout)

    without, with_huge = peak_kib("ok[1-2]"), peak_kib("ok[1-2],huge1")
    assert with_huge - without < 32 * 1024  # KiB: 4 MiB kept plus slack, never 100 MB


def test_cli_fleet_exit_status_and_text(tmp_path, capsys):
    script = fake_node(tmp_path)
    common = ["--exec-template", "exec env NODE=%h", "--remote-command",
              f"{sys.executable} {script}", "--timeout", "20"]
    assert main(["audit", "-w", "ok[1-3]", *common]) == ExitStatus.OK
    out = capsys.readouterr().out
    assert "interface.mtu: 9000 [WARN] on ok3; 1500 [ok] on ok[1-2]" in out
    assert main(["audit", "-w", "ok[1-2],bad1,old1", *common]) == ExitStatus.PARTIAL == 6
    out = capsys.readouterr().out
    assert "did not answer: bad1 (exit status 1: boom on %h)" in out
    assert "another beoperf version, not used: old1 (beoperf 0.0.9" in out
    assert "  ok    interface.mtu = 1500" in out
    assert main(["audit", "-w", "bad[1-2],old1", *common, "--json"]) == \
        ExitStatus.NO_ANSWER == 7
    d = json.loads(capsys.readouterr().out)
    validate("fleet-audit", d)
    assert d["body"]["answered"] == "" and d["body"]["other_version"] == {"0.0.9": "old1"}
    assert d["meta"]["command_line"][:3] == ["beoperf", "audit", "-w"]


def test_cli_remote_command_with_shell_syntax(tmp_path, capsys):
    script = fake_node(tmp_path)
    assert main(["audit", "-w", "ok[1-2]", "--exec-template", "exec env NODE=%h",
                 "--remote-command", f"cd / && exec {sys.executable} {script}",
                 "--timeout", "20"]) == ExitStatus.OK
    assert "2 of 2 nodes answered: ok[1-2]" in capsys.readouterr().out


def test_clush_launcher_command(tmp_path):
    spec = LaunchSpec(("python3", "-m", "beoperf", "audit"), hosts=("n1", "n2", "n3"),
                      env={"LC_ALL": "C"})
    assert clush.Clush().command(spec).argv == (
        "clush", "-w", "n[1-3]", "--options=-oBatchMode=yes",
        "env LC_ALL=C python3 -m beoperf audit")
    netns = LaunchSpec(("true",), hosts=("n1",), agent="ip netns exec %h")
    assert clush.Clush().command(netns).argv == ("clush", "-w", "n1", "-R", "exec",
                                                 "ip netns exec %h true")
    port = LaunchSpec(("true",), hosts=("n1",), agent="ssh -p 2222")
    assert clush.Clush().command(port).argv[-1] == "ssh -p 2222 %h true"
    for bad, words in ((LaunchSpec(("true",), hosts=("n1",), ranks_per_host=2), "ranks"),
                       (LaunchSpec(("true",)), "needs hosts"),
                       (LaunchSpec(("true",), hosts=("n1",), interface="eth0"), "interface"),
                       (LaunchSpec(("true",), hosts=("n1",), agent="env %hosts"), "%hosts")):
        with pytest.raises(ValueError, match=words):
            clush.Clush().command(bad)


def test_clush_run_through_the_clush_command(tmp_path):
    """The argv the launcher gives runs as it says (the clush tool, exec worker)."""
    script = fake_node(tmp_path)
    spec = LaunchSpec((sys.executable, script), hosts=("ok1", "ok3"), agent="exec env NODE=%h")
    launch = clush.Clush().command(spec)
    res = subprocess.run(launch.argv, capture_output=True, text=True, timeout=60,
                         env={**os.environ, **launch.env})
    assert res.returncode == 0, res.stderr
    assert '"value": 9000' in res.stdout and '"value": 1500' in res.stdout


def test_cli_rejects_bad_nodeset(capsys):
    assert main(["audit", "-w", "node[1-", "--exec-template", "env %h"]) == 2
    assert "-w/--nodes" in capsys.readouterr().err
    assert main(["audit", "-w", "n1", "--fanout", "0"]) == 2


def test_cli_exec_template_without_node_is_a_usage_error(capsys):
    started = time.monotonic()
    assert main(["audit", "-w", "n[1-2]", "--exec-template", "sleep 30;"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--exec-template 'sleep 30;' has no %h" in err
    assert time.monotonic() - started < 10  # refused before anything ran


# ------------------------------------------------------------------ namespaces


def test_fleet_audit_over_namespaces(netns_hosts, capsys):
    hosts = netns_hosts(4)
    hosts[2].set_mtu(9000)
    missing = f"bptnone{os.getpid()}"
    nodes = NodeSet.fromlist([h.name for h in hosts] + [missing])
    status = main(["audit", "-w", str(nodes), "--exec-template", "ip netns exec %h",
                   "--remote-command", BEOPERF, "--interface", "eth0", "--json"])
    assert status == ExitStatus.PARTIAL  # one node did not answer
    raw = json.loads(capsys.readouterr().out)
    validate("fleet-audit", raw)
    assert raw["kind"] == "fleet-audit"
    d = raw["body"]
    assert NodeSet(d["answered"]) == NodeSet.fromlist([h.name for h in hosts])
    [(reason, silent)] = d["no_answer"].items()
    assert silent == missing and "exit status" in reason
    [mtu] = [kg for kg in d["inconsistent"] if kg["key"] == "mtu"]
    assert [(g["value"], NodeSet(g["nodes"])) for g in mtu["groups"]] == [
        (9000, NodeSet(hosts[2].name)),
        (1500, NodeSet.fromlist([h.name for h in hosts if h is not hosts[2]]))]
