"""`beoperf study` with bad input, in process and without root: every mistake is one line
and exit 2 before any host is contacted (nothing here reaches a host: the hosts named do
not exist, and a study that got as far as reaching them would fail otherwise)."""

from __future__ import annotations

import os

import pytest

from beoperf.suites import study_spec
from helpers import cli

HOSTS = ("--peer", "no-such-host.invalid")


def one_usage_line(result) -> str:
    assert result.status == 2, (result.status, result.stderr)
    lines = result.error_lines
    assert len(lines) == 1, lines
    assert "Traceback" not in result.stderr
    assert lines[0].startswith("beoperf: usage error: ")
    return lines[0]


def study_file(tmp_path, text: str, mode: int = 0o600):
    path = tmp_path / "study.toml"
    path.write_text(text)
    os.chmod(path, mode)
    return str(path)


GOOD = """
[hosts]
peer = "no-such-host.invalid"

[[factor]]
name = "mtu"
levels = ["1500", "9000"]

[[measure]]
name = "pingpong"

[design]
repeats = 6
margin = "1%"
"""


@pytest.mark.parametrize("argv, says", [
    (("mtu", *HOSTS, "--levels", "1500,jumbo"), "mtu"),
    (("mtu", *HOSTS, "--levels", "1500,70000"), "mtu"),
    (("mtu", *HOSTS, "--levels", "1500,1500"), "twice"),
    (("mtu", *HOSTS), "needs --levels"),
    (("mtu", *HOSTS, "--levels", "1500,9000", "--factor", "frobnicate=1,2"), "frobnicate"),
    (("mtu", *HOSTS, "--levels", "1500,9000", "--factor", "=1"), "--factor"),
    (("mtu", *HOSTS, "--levels", "1500,9000", "--repeats", "2"), "--repeats 2"),
    (("mtu", *HOSTS, "--levels", "1500,9000", "--margin", "150%"), "--margin"),
    (("mtu", *HOSTS, "--levels", "1500,9000", "--lease", "1"), "--lease"),
    (("mtu", *HOSTS, "--levels", "1500,9000", "--lease", "soon"), "--lease"),
    (("mtu", "--levels", "1500,9000"), "--peer HOST or -w"),
    (("mtu", "-w", "onlyone", "--levels", "1500,9000"), "at least 2"),
    (("mtu", "-w", "a,b", "--peer", "c", "--levels", "1500,9000"), "not both"),
    (("mtu", "-w", "a,b", "--exec-template", "ip netns exec", "--levels", "1,2"), "%h"),
    (("mtu", "-w", "a,b", "--ssh-command", "ssh %h", "--levels", "1,2"), "no %h"),
    (("mtu", "-w", "a,b", "--ssh-command", " ", "--levels", "1,2"), "ssh-like command"),
    (("mtu", "-w", "a,b", "--ssh-command", "ssh", "--exec-template", "ip netns exec %h",
      "--levels", "1,2"), "not both"),
    (("mtu", "-w", "a,b", "--data-address", "c=10.0.0.1", "--levels", "1500,9000"),
     "not one of the study's hosts"),
    (("mtu", "-w", "a,b", "--data-address", "a", "--levels", "1500,9000"), "HOST=ADDRESS"),
    (("mtu", *HOSTS, "--levels", "1500,9000", "--persist", "x"), "--keep best"),
    (("mtu", *HOSTS, "--levels", "1500,9000", "--measure", "bogus"), "--measure bogus"),
    (("mtu", *HOSTS, "--levels", "1500,9000", "--figure-regex", "x"), "--measure-command"),
    (("mtu", *HOSTS, "--levels", "1500,9000", "--decide-by", "nothing@1"), "--decide-by"),
    (("mtu", *HOSTS, "--levels", "1500,9000", "--precision", "lots"), "--precision"),
    (("mtu", *HOSTS, "--levels", "1500,9000", "--precision", "150%"), "--precision"),
    (("mtu", *HOSTS, "--levels", "1500,9000", "--max-repeats", "9"), "with --precision"),
    (("mtu", *HOSTS, "--levels", "1500,9000", "--precision", "1%", "--max-repeats", "3"),
     "--max-repeats 3"),
    (("mtu", *HOSTS, "--levels", "1500,9000", "--size", "16,32"), "one latency size"),
    (("mtu", *HOSTS, "--levels", "1500,9000", "--measure", "ring:x"), "node:METRIC"),
    (("latency-checklist", *HOSTS, "--levels", "1"), "audit"),
    (("mtu", *HOSTS, "--levels", "1500,9000"), "cannot tell this host's address"),
    (("frob",), "invalid choice"),
])
def test_bad_input_is_one_line_and_exit_2(argv, says):
    line = one_usage_line(cli("study", *argv))
    assert says in line, line


def test_no_subcommand_is_one_line():
    line = one_usage_line(cli("study"))
    assert "mtu" in line and "run" in line


def test_a_group_writable_study_file_is_refused(tmp_path):
    path = study_file(tmp_path, GOOD, 0o620)
    line = one_usage_line(cli("study", "run", path))
    assert "writable" in line and "chmod 600" in line


@pytest.mark.parametrize("text, says", [
    (GOOD.replace('name = "mtu"', 'name = "mtu"\ncolour = "blue"'), "factor/0"),
    (GOOD.replace('repeats = 6', 'repeats = 2'), "design/repeats"),
    (GOOD.replace('repeats = 6', 'repeats = 6\nprecision = "a lot"'), "design/precision"),
    (GOOD.replace('name = "pingpong"', 'name = "fortune"'), "measure/0/name"),
    (GOOD.replace('levels = ["1500", "9000"]', 'levels = 9000'), "factor/0/levels"),
    (GOOD.replace('[hosts]', '[hosts]\nnodes = "a,b"'), "hosts"),
    (GOOD.replace('name = "pingpong"', 'name = "pingpong"\nparams = {colour = "x"}'),
     "colour"),
    ("[[factor]\nname =", "not TOML"),
    ("name = 'x'\n", "factor"),
])
def test_a_study_file_that_breaks_the_schema_is_refused_naming_where(tmp_path, text, says):
    line = one_usage_line(cli("study", "run", study_file(tmp_path, text)))
    assert says in line, line


def test_a_study_file_over_its_limit_or_not_a_file_is_refused(tmp_path):
    big = study_file(tmp_path, GOOD + "#" * study_spec.STUDY_LIMIT)
    assert "bytes" in one_usage_line(cli("study", "run", big))
    assert "directory" in one_usage_line(cli("study", "run", str(tmp_path)))
    assert "cannot read" in one_usage_line(cli("study", "run", str(tmp_path / "none.toml")))


def test_a_study_file_with_an_unknown_level_is_refused_before_any_host(tmp_path):
    path = study_file(tmp_path, GOOD.replace('"9000"]', '"9000", "huge"]'))
    line = one_usage_line(cli("study", "run", path))
    assert "huge" in line


def test_the_study_file_is_read_into_the_spec(tmp_path):
    content = study_spec.read_study_file(study_file(tmp_path, GOOD))
    found = study_spec.from_file(content, "s.toml", study_spec.HostsSpec(),
                                 study_spec.DesignSpec())
    assert found.hosts.peer == "no-such-host.invalid"
    assert found.factors == (study_spec.FactorSpec("mtu", ("1500", "9000")),)
    assert found.design.margin == pytest.approx(0.01) and found.design.repeats == 6
    assert found.design.precision is None
    precise = GOOD.replace('repeats = 6', 'repeats = 6\nprecision = "0.5%"\nmax_repeats = 20')
    content = study_spec.read_study_file(study_file(tmp_path, precise))
    found = study_spec.from_file(content, "s.toml", study_spec.HostsSpec(),
                                 study_spec.DesignSpec())
    assert found.design.precision == pytest.approx(0.005) and found.design.max_repeats == 20
    # a level is one string of the list, commas and all
    env = GOOD + '[[factor]]\nname = "mpienv"\nlevels = ["OMPI_A=1,OMPI_B=2"]\n'
    content = study_spec.read_study_file(study_file(tmp_path, env))
    found = study_spec.from_file(content, "s.toml", study_spec.HostsSpec(),
                                 study_spec.DesignSpec())
    assert found.factors[1] == study_spec.FactorSpec("mpienv", ("OMPI_A=1,OMPI_B=2",))


def test_pairs_files_and_data_addresses():
    assert study_spec.parse_pairs("a b  # first\n\nc a\n", "p") == (("a", "b"), ("c", "a"))
    for bad in ("a\n", "a b c\n", "", "a b;rm\n"):
        with pytest.raises(study_spec.errors.BadSpec):
            study_spec.parse_pairs(bad, "p")
    hosts = study_spec.HostsSpec(nodes="n[1-3]")
    names = study_spec.host_names(hosts)
    assert study_spec.pairs_of(hosts, names) == [("n2", "n1"), ("n3", "n1")]
    peer = study_spec.HostsSpec(peer="node02")
    assert study_spec.pairs_of(peer, study_spec.host_names(peer)) == [
        (study_spec.LOCAL, "node02")]
    given = study_spec.parse_data_addresses(["n1=10.0.0.1", "n2=fe80::1%eth0"])
    assert study_spec.data_addresses(study_spec.HostsSpec(nodes="n[1-3]",
                                                          data_address=given), names) == {
        "n1": "10.0.0.1", "n2": "fe80::1%eth0", "n3": "n3"}


def preset_args(*argv):
    from beoperf.cli import build_parser

    rest = ("mtu", *HOSTS, "--levels", "1500,9000")
    return build_parser("study", argv or rest).parse_args(["study", *(argv or rest)])


@pytest.mark.parametrize("argv, decide_by", [
    (("mtu", *HOSTS, "--levels", "1500,9000"), "goodput_bps@1M"),
    (("buffers", *HOSTS, "--levels", "default,4M"), "goodput_bps@4M"),
    (("mtu", *HOSTS, "--levels", "1500,9000", "--mode", "pingpong"), None),
    (("mtu", *HOSTS, "--levels", "1500,9000", "--decide-by", "latency_us@16"),
     "latency_us@16"),
])
def test_mtu_and_buffers_decide_by_the_stream_goodput(argv, decide_by):
    from beoperf.cli import study as cli_study

    spec = cli_study.study_of(preset_args(*argv))
    assert spec.design.decide_by == decide_by


def test_the_spec_default_margin_is_the_effects_and_the_agent_needs_no_numpy():
    import subprocess
    import sys

    from beoperf.analysis import effect

    assert study_spec.DEFAULT_MARGIN == effect.DEFAULT_MARGIN
    code = ("import sys; import beoperf.cli.study, beoperf.cli.study_agent; "
            "print('numpy' in sys.modules)")
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           check=True)
    assert found.stdout.strip() == "False"
