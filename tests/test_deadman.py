"""A study's dead-man agents (beoperf.factors.agent) and their controller
(beoperf.suites.study_hosts), on real network namespace hosts reached with the exec template
``ip netns exec %h``: arm, set, finish; the tune lock held; kill -9 of the controller; the
agent's signals and its lifetime; ``beoperf study restore``."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from beoperf.launch import remote
from beoperf.launch.base import LaunchSpec
from beoperf.suites import study_hosts
from helpers import child_env
from study_helpers import CUT, SITE_RULES, nft_ruleset

NETNS = "ip netns exec %h"
BEOPERF = f"{sys.executable} -m beoperf"
STUDY_DIR = Path("/run/beoperf/study")


# --------------------------------------------------------------------------- what is changed


class Factors:
    """The factors these tests change on a host (its MTU, and a sysctl that is per network
    namespace), and how a test reads them there."""

    SACK = "net.ipv4.tcp_sack"
    LEVELS = {"mtu": "9000", "sysctl": f"{SACK}=0"}

    def __init__(self, hosts) -> None:
        self.hosts = hosts

    def plan(self, host) -> dict:
        peer = next(h for h in self.hosts if h is not host)
        return {"factors": [{"name": "mtu", "levels": ["9000", "default"]},
                            {"name": "sysctl", "levels": [f"{self.SACK}=0"]}],
                "data_address": peer.addr4, "settle_s": 0}

    def values(self, host) -> dict:
        sack = host.run(["cat", f"/proc/sys/{self.SACK.replace('.', '/')}"]).stdout.strip()
        return {"mtu": str(host.link()["mtu"]), "sysctl": f"{self.SACK}={sack}"}


@pytest.fixture
def study(netns_hosts, tmp_path, request):
    """(hosts, factors, make_hostset): namespace hosts; HostSets made are finished and
    their agents' pids checked gone, their study directories removed."""
    made: list[study_hosts.HostSet] = []
    hosts = netns_hosts(2)
    factors = Factors(hosts)

    def make(lease_s: float = 10.0, study_id: str | None = None) -> study_hosts.HostSet:
        sid = study_id or f"t{os.getpid()}-{request.node.name[:30]}-{len(made)}"
        hs = study_hosts.HostSet(sid, [h.name for h in hosts], agent=NETNS,
                                 remote_command=BEOPERF, timeout=30, lease_s=lease_s,
                                 grace_s=1.0)
        made.append(hs)
        return hs

    yield hosts, factors, make
    for hs in made:
        if hs.renewer is not None:
            hs.renewer.stop()
        for armed in hs.armed.values():
            _end(armed.pid)
        for path in STUDY_DIR.glob(f"{hs.study_id}.net*"):
            subprocess.run(["rm", "-rf", "--", str(path)], check=False)


def _end(pid: int | None) -> None:
    """An agent this test started, ended if it is still there (it restores on SIGTERM)."""
    if pid and _alive(pid):
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def _wait(predicate, timeout: float, step: float = 0.05) -> float | None:
    """Seconds until ``predicate()`` held (None: not within ``timeout``)."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if predicate():
            return time.monotonic() - start
        time.sleep(step)
    return None


def _lock_free(host) -> bool:
    """Whether the tune lock of the host's namespace can be taken now."""
    code = "from beoperf.audit.lock import TuneLock\nwith TuneLock(): pass"
    return host.run([sys.executable, "-c", code], check=False, env=child_env()).returncode == 0


def _arm(hs, hosts, factors, **extra) -> dict:
    armed = hs.arm_all({h.name: {**factors.plan(h), **extra} for h in hosts})
    assert all(a.ok for a in armed.values()), {h: a.error for h, a in armed.items()}
    return armed


# --------------------------------------------------------------------------- 1. arm, set, finish


def test_arm_set_finish_restores_every_host_and_frees_the_lock(study):
    hosts, factors, make = study
    hs = make()
    before = {h.name: factors.values(h) for h in hosts}
    plan_only = hs.read_values({h.name: factors.plan(h) for h in hosts})  # no agent, no lock
    assert {h: r.data["values"]["mtu"] for h, r in plan_only.items()} == \
        {h.name: before[h.name]["mtu"] for h in hosts}
    assert {r.data["interface"] for r in plan_only.values()} == {"eth0"}
    assert not list(STUDY_DIR.glob(f"{hs.study_id}.net*"))
    armed = _arm(hs, hosts, factors)
    for a in armed.values():  # detached: /dev/null for 0-2, not leading its session
        assert [os.readlink(f"/proc/{a.pid}/fd/{fd}") for fd in (0, 1, 2)] == \
            ["/dev/null"] * 3
        assert os.getsid(a.pid) not in (a.pid, os.getsid(0))
    for h in hosts:  # the way back is on disk before any change can be asked for
        doc = json.loads(Path(armed[h.name].rollback_file).read_text())
        assert doc["kind"] == "study-rollback"
        assert sorted(e["factor"] for e in doc["body"]["entries"]) == sorted(Factors.LEVELS)
        assert oct(Path(armed[h.name].rollback_file).stat().st_mode & 0o777) == "0o600"
        assert not _lock_free(h)
    for factor, level in Factors.LEVELS.items():
        replies = hs.set_level(factor, level)
        assert all(r.ok for r in replies.values()), {h: r.error for h, r in replies.items()}
    assert all(factors.values(h) == Factors.LEVELS for h in hosts)
    assert all(r.ok and r.data["levels"] == Factors.LEVELS for r in hs.status().values())
    default = hs.set_level("mtu", "default")  # the snapshot's value, a level like any other
    assert [r.data["read_back"] for r in default.values()] == \
        [before[h.name]["mtu"] for h in hosts]
    assert all(factors.values(h)["mtu"] == before[h.name]["mtu"] for h in hosts)
    assert all(r.ok for r in hs.set_level("mtu", "9000").values())
    assert all(r.ok and r.data["changed"] for r in hs.default("sysctl").values())
    assert all(factors.values(h)["sysctl"] == before[h.name]["sysctl"] for h in hosts)
    assert all(r.ok for r in hs.set_level("sysctl", Factors.LEVELS["sysctl"]).values())

    ends = hs.finish()
    assert {h: e.state for h, e in ends.items()} == {h.name: "restored" for h in hosts}
    assert {h.name: factors.values(h) for h in hosts} == before
    for h in hosts:
        pid = armed[h.name].pid
        assert _wait(lambda pid=pid: not _alive(pid), 5) is not None
        assert _lock_free(h)
        assert not Path(armed[h.name].rollback_file).exists()  # nothing left to restore
        result = json.loads(Path(armed[h.name].dir, "result.json").read_text())
        assert result["why"] == "finish"


def test_finish_keeps_what_it_is_told_to_and_says_how_to_undo_it(study):
    """``finish(keep=["mtu"])``: the sysctl is restored, the MTU stays, the rollback file
    keeps only the MTU's entry, and the host's restore command puts it back."""
    hosts, factors, make = study
    hs = make()
    before = {h.name: factors.values(h) for h in hosts}
    _arm(hs, hosts, factors)
    for factor, level in Factors.LEVELS.items():
        assert all(r.ok for r in hs.set_level(factor, level).values())
    ends = hs.finish(keep=["mtu"])
    for h in hosts:
        end = ends[h.name]
        assert (end.state, end.detail) == ("kept", "mtu: left at 9000")
        assert factors.values(h) == {**before[h.name], "mtu": "9000"}
        path = hs.armed[h.name].rollback_file
        entries = json.loads(Path(path).read_text())["body"]["entries"]
        assert [e["factor"] for e in entries] == ["mtu"]
        assert end.restore_command == f"ip netns exec {h.name} {BEOPERF} study restore {path}"
        undo = subprocess.run(end.restore_command, shell=True, capture_output=True, text=True,
                              env=child_env())
        assert undo.returncode == 0, undo.stderr
        assert factors.values(h) == before[h.name]


def test_a_level_not_in_the_plan_is_refused_by_the_agent(study):
    hosts, factors, make = study
    hs = make()
    _arm(hs, hosts, factors)
    before = {h.name: factors.values(h) for h in hosts}
    replies = hs.set_level("mtu", "3000")
    assert not any(r.ok for r in replies.values())
    assert all("not in this host's plan" in r.error for r in replies.values())
    assert {h.name: factors.values(h) for h in hosts} == before
    assert {e.state for e in hs.finish().values()} == {"not-changed"}


def test_a_bad_plan_is_one_line_and_touches_nothing(study):
    hosts, factors, make = study
    hs = make()
    plan = {**factors.plan(hosts[0]), "factors": [{"name": "mtu", "levels": ["9000", "x"]}]}
    armed = hs.arm_all({hosts[0].name: plan})[hosts[0].name]
    assert not armed.ok and "mtu: " in armed.error and "'x'" in armed.error
    assert armed.result.exit_code == 2
    assert not list(STUDY_DIR.glob(f"{hs.study_id}.net*"))
    assert _lock_free(hosts[0])
    assert hs.finish()[hosts[0].name].state == "not-changed"


def test_the_probe_from_a_host_tells_whether_the_path_carries_a_level(study):
    """``study agent probe`` on the client host (what the study's MTU path check runs):
    with 9000 on one end only, 1500-byte packets are the largest that cross both ways;
    with 9000 at both ends, 9000-byte ones cross."""
    from test_audit import serve_in

    hosts, factors, make = study
    hs = make()
    client, server = hosts
    serve_in(server)
    _arm(hs, hosts, factors)
    assert hs.set_level("mtu", "9000", [client.name])[client.name].ok
    half = hs.probe(client.name, server.addr4, 5202)
    assert half.ok, half.error
    assert (half.data["mtu"], half.data["carried"]) == (9000, 1500)
    assert all(r.ok for r in hs.set_level("mtu", "9000").values())
    both = hs.probe(client.name, server.addr4, 5202)
    assert (both.data["mtu"], both.data["carried"]) == (9000, 9000)
    assert {e.state for e in hs.finish().values()} == {"restored"}


# --------------------------------------------------------------------------- 2. the lock


def test_while_armed_tune_and_a_second_arm_are_refused(study):
    hosts, factors, make = study
    hs = make()
    armed = _arm(hs, hosts[:1], factors)[hosts[0].name]
    tune = hosts[0].run([*BEOPERF.split(), "tune", "--apply", "--interface", "eth0"],
                        check=False, env=child_env())
    assert tune.returncode == 1
    assert "tune busy" in tune.stderr and f"pid {armed.pid}" in tune.stderr
    second = make().arm_all({hosts[0].name: factors.plan(hosts[0])})[hosts[0].name]
    assert not second.ok and second.error.startswith("busy:")
    assert f"pid {armed.pid}" in second.error
    restore = hosts[0].run([*BEOPERF.split(), "study", "restore", armed.rollback_file],
                           check=False, env=child_env())
    assert restore.returncode == 1
    assert f"(pid {armed.pid}) is running: it restores by itself within" in restore.stderr
    assert hs.finish()[hosts[0].name].state == "not-changed"
    assert _lock_free(hosts[0])


# --------------------------------------------------------------------------- 3. kill -9


CONTROLLER = """
import json, sys, time
from beoperf.suites import study_hosts
sid, lease, plans = sys.argv[1], float(sys.argv[2]), json.loads(sys.argv[3])
hs = study_hosts.HostSet(sid, list(plans), agent="ip netns exec %h",
                         remote_command=sys.executable + " -m beoperf", lease_s=lease)
armed = hs.arm_all(plans)
assert all(a.ok for a in armed.values()), armed
for factor, level in json.loads(sys.argv[4]).items():
    assert all(r.ok for r in hs.set_level(factor, level).values())
hs.start_renewer()
print("applied", json.dumps({h: [a.pid, a.dir] for h, a in armed.items()}), flush=True)
time.sleep(600)
"""


def test_kill_9_of_the_controller_every_host_restores_within_the_lease(study):
    hosts, factors, make = study
    lease = 4.0
    hs = make(lease)  # (for the fixture's clean-up: the study id and its agents)
    before = {h.name: factors.values(h) for h in hosts}
    plans = {h.name: factors.plan(h) for h in hosts}
    # plain Popen, not launch.job: the guard would reap the agents with the controller
    proc = subprocess.Popen([sys.executable, "-c", CONTROLLER, hs.study_id, str(lease),
                             json.dumps(plans), json.dumps(Factors.LEVELS)],
                            stdout=subprocess.PIPE, text=True, env=child_env())
    try:
        line = proc.stdout.readline()
        assert line.startswith("applied"), line
        agents = json.loads(line.split(" ", 1)[1])
        hs.armed = {h: study_hosts.Armed(h, True, pid, dir) for h, (pid, dir) in agents.items()}
        time.sleep(lease * 1.25)  # renewals (every T/3) carry the leases past their first T
        assert all(factors.values(h) == Factors.LEVELS for h in hosts)
    finally:
        proc.kill()
        killed = time.monotonic()
        proc.wait()
    back: dict[str, float] = {}
    while len(back) < len(hosts) and time.monotonic() - killed < lease + 4:
        for h in hosts:
            if h.name not in back and factors.values(h) == before[h.name]:
                back[h.name] = time.monotonic() - killed
        time.sleep(0.05)
    # a renewal round takes at most T/3 (its timeout) every T/3: the last one reached the
    # agent at most 2T/3 before the kill, so its lease lapses between T/3 and T after it,
    # and it restores at once (2 s: the restore and the polling, on a busy VM)
    assert set(back) == {h.name for h in hosts}, back
    assert all(lease / 3 - 0.2 <= t <= lease + 2 for t in back.values()), back
    for h in hosts:
        pid, where = agents[h.name]
        assert _wait(lambda pid=pid: not _alive(pid), 5) is not None
        assert json.loads(Path(where, "result.json").read_text())["why"] == "lease lapsed"
        assert _lock_free(h)


# --------------------------------------------------------------------------- 5. signals


def test_sigterm_restores_at_once_and_sigkill_leaves_the_file_study_restore_uses(study):
    hosts, factors, make = study
    hs = make(lease_s=4)  # (finish waits a lease for the host whose agent is gone)
    before = {h.name: factors.values(h) for h in hosts}
    armed = _arm(hs, hosts, factors)
    for factor, level in Factors.LEVELS.items():
        assert all(r.ok for r in hs.set_level(factor, level).values())
    term, kill = hosts
    os.kill(armed[term.name].pid, signal.SIGTERM)
    assert _wait(lambda: factors.values(term) == before[term.name], 3) is not None
    assert _wait(lambda: not _alive(armed[term.name].pid), 3) is not None
    os.kill(armed[kill.name].pid, signal.SIGKILL)
    assert _wait(lambda: not _alive(armed[kill.name].pid), 3) is not None
    assert factors.values(kill) == Factors.LEVELS  # nobody restored it
    path = armed[kill.name].rollback_file
    restore = kill.run([*BEOPERF.split(), "study", "restore", path], check=False,
                       env=child_env())
    assert restore.returncode == 0, restore.stderr
    assert restore.stdout.splitlines()[:2] == ["mtu: restored (back to the snapshot)",
                                               "sysctl: restored (back to the snapshot)"]
    assert factors.values(kill) == before[kill.name]
    # restored from: renamed, so that a second restore cannot put back an old snapshot
    assert not Path(path).exists() and Path(path + ".restored").is_file()
    assert restore.stdout.splitlines()[2].startswith(f"{path}: renamed {path}.restored")
    kill.run(["ip", "link", "set", "dev", kill.ifname, "mtu", "9000"])  # the admin's own
    again = kill.run([*BEOPERF.split(), "study", "restore", path], check=False,
                     env=child_env())
    assert again.returncode != 0 and "Traceback" not in again.stderr
    assert len(again.stderr.strip().splitlines()) == 1, again.stderr
    assert factors.values(kill)["mtu"] == "9000"  # not put back a second time
    ends = hs.finish()
    assert ends[term.name].state == "restored-by-agent"
    assert "signal" in ends[term.name].detail
    assert ends[kill.name].state == "restore-failed"  # no agent, no result: named, with
    assert "ended without restoring" in ends[kill.name].detail
    assert ends[kill.name].restore_command == \
        f"ip netns exec {kill.name} {BEOPERF} study restore {path}"


def test_study_restore_refuses_a_file_of_another_namespace_and_a_crafted_one(study, tmp_path):
    hosts, factors, make = study
    hs = make(lease_s=30)
    armed = _arm(hs, hosts[:1], factors)[hosts[0].name]
    os.kill(armed.pid, signal.SIGKILL)
    assert _wait(lambda: not _alive(armed.pid), 3) is not None
    other = hosts[1].run([*BEOPERF.split(), "study", "restore", armed.rollback_file],
                         check=False, env=child_env())
    assert other.returncode == 2 and "network namespace" in other.stderr
    assert len(other.stderr.strip().splitlines()) == 1
    doc = json.loads(Path(armed.rollback_file).read_text())
    doc["body"]["entries"][-1]["saved"] = {"value": "1500; reboot"}
    crafted = tmp_path / "crafted.json"
    crafted.write_text(json.dumps(doc))
    crafted.chmod(0o600)
    bad = hosts[0].run([*BEOPERF.split(), "study", "restore", str(crafted)], check=False,
                       env=child_env())
    assert bad.returncode == 1 and "mtu: saved" in bad.stderr, bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1
    assert _lock_free(hosts[0])  # the kernel dropped the killed agent's lock


# --------------------------------------------------------------------------- 6. the lifetime


def test_the_lifetime_ends_the_agent_while_renewals_go_on(study):
    """A lease of 3 s renewed every second, a lifetime of 4 s: the agent restores when
    its lifetime ends (its result says so: had the renewals failed, the lease would have
    lapsed first), not before it (it was armed after ``start``) and not long after."""
    hosts, factors, make = study
    hs = make(lease_s=3)
    before = factors.values(hosts[0])
    start = time.monotonic()
    armed = _arm(hs, hosts[:1], factors, max_life_s=4)[hosts[0].name]
    armed_at = time.monotonic()
    assert all(r.ok for r in hs.set_level("mtu", "9000").values())
    hs.start_renewer()
    assert _wait(lambda: factors.values(hosts[0]) == before, 10) is not None
    back_at = time.monotonic()
    assert back_at - start >= 4
    assert back_at - armed_at <= 4 + 2.5  # (the polling, through ip netns exec, on a busy VM)
    # the agent writes its result after it has restored (a CI run read it too soon)
    done = Path(armed.dir, "result.json")
    assert _wait(done.exists, 10) is not None
    result = json.loads(done.read_text())
    assert result["why"] == "lifetime"
    assert hs.renewer.rounds >= 1
    assert hs.finish()[hosts[0].name].state == "restored-by-agent"


# --------------------------------------------------------------------------- one level at a time


def test_a_factor_moved_from_one_level_to_another_carries_the_new_one_alone(tmp_path):
    """``set`` B while the factor is at A puts the snapshot back first: a sysctl factor
    at ``tcp_sack=0`` then ``tcp_timestamps=0`` must not measure B with A still changed.
    A crafted /proc root stands for the host (only what the agent does is under test)."""
    from beoperf.factors import agent as agent_mod
    from beoperf.factors.base import Context

    values = {"net/ipv4/tcp_sack": "1", "net/ipv4/tcp_timestamps": "1"}
    for key, value in values.items():
        (tmp_path / "proc/sys" / key).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "proc/sys" / key).write_text(value + "\n")
    plan = agent_mod.parse_plan({
        "study_id": "s1", "root": str(tmp_path),
        "factors": [{"name": "sysctl", "levels": ["net.ipv4.tcp_sack=0",
                                                  "net.ipv4.tcp_timestamps=0"]}]})
    ctx = Context(None, str(tmp_path))
    saved = {hf.factor.name: hf.factor.snapshot(ctx) for hf in plan.factors}
    agent = agent_mod.Agent(plan, ctx, saved, str(tmp_path), held=None, sock=None, wake=-1)

    def now() -> dict[str, str]:
        return {k: (tmp_path / "proc/sys" / k).read_text().strip() for k in values}

    assert agent.handle({"op": "set", "factor": "sysctl", "level": "net.ipv4.tcp_sack=0"})["ok"]
    assert now() == {"net/ipv4/tcp_sack": "0", "net/ipv4/tcp_timestamps": "1"}
    reply = agent.handle({"op": "set", "factor": "sysctl",
                          "level": "net.ipv4.tcp_timestamps=0"})
    assert reply["ok"], reply
    assert now() == {"net/ipv4/tcp_sack": "1", "net/ipv4/tcp_timestamps": "0"}
    assert agent.status()["levels"] == {"sysctl": "net.ipv4.tcp_timestamps=0"}
    assert [r["status"] for r in agent.restore_all()] == ["restored"]
    assert now() == values


def test_a_sysctl_level_undone_leaves_what_another_factor_holds(tmp_path):
    """The sysctl factor's snapshot holds every key of the allow-list; going back to
    Default (or on to another level) undoes the key its level set, not the buffer limits
    the ``buffers`` factor holds at its level meanwhile (the buffers preset keeps them
    raised in every configuration), and a finish that keeps ``buffers`` keeps them."""
    from beoperf.factors import agent as agent_mod
    from beoperf.factors.base import Context

    values = {"net/core/rmem_max": "212992", "net/core/wmem_max": "212992",
              "net/ipv4/tcp_rmem": "4096 131072 6291456",
              "net/ipv4/tcp_wmem": "4096 16384 4194304", "net/ipv4/tcp_sack": "1"}
    for key, value in values.items():
        (tmp_path / "proc/sys" / key).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "proc/sys" / key).write_text(value + "\n")
    plan = agent_mod.parse_plan({
        "study_id": "s1", "root": str(tmp_path),
        "factors": [{"name": "buffers", "levels": ["4M"]},
                    {"name": "sysctl", "levels": ["net.ipv4.tcp_sack=0"]}]})
    ctx = Context(None, str(tmp_path))
    saved = {hf.factor.name: hf.factor.snapshot(ctx) for hf in plan.factors}
    agent = agent_mod.Agent(plan, ctx, saved, str(tmp_path), held=None, sock=None, wake=-1)

    def now(key: str) -> str:
        return (tmp_path / "proc/sys" / key).read_text().strip()

    raised = str(4 << 20)
    assert agent.handle({"op": "set", "factor": "buffers", "level": "4M"})["ok"]
    assert agent.handle({"op": "set", "factor": "sysctl", "level": "net.ipv4.tcp_sack=0"})["ok"]
    assert agent.handle({"op": "default", "factor": "sysctl"})["ok"]
    assert (now("net/ipv4/tcp_sack"), now("net/core/rmem_max")) == ("1", raised)
    assert agent.handle({"op": "set", "factor": "sysctl", "level": "net.ipv4.tcp_sack=0"})["ok"]
    ends = {r["factor"]: r["status"] for r in agent.restore_all(keep=["buffers"])}
    assert ends == {"buffers": "kept", "sysctl": "restored"}
    assert (now("net/ipv4/tcp_sack"), now("net/core/rmem_max")) == ("1", raised)
    ends = {r["factor"]: r["status"] for r in agent.restore_all()}
    assert ends == {"buffers": "restored", "sysctl": "not-changed"}
    assert {k: " ".join(now(k).split()) for k in values} == values


def test_every_study_id_the_agent_takes_gives_a_rollback_file_study_restore_reads():
    """The agent's study ids and the study-rollback schema agree: an id the agent would
    arm under is one ``study restore`` accepts in the file it leaves (else the way back
    of a long id would be refused as "not a valid study-rollback document")."""
    from beoperf import errors
    from beoperf.factors import agent as agent_mod
    from beoperf.model import document
    from beoperf.model.study_rollback import StudyRollback

    longest = "s" + "x" * 63
    plan = agent_mod.parse_plan({"study_id": longest, "factors": []})
    doc = agent_mod.rollback_document(plan, "eth0", [])
    assert StudyRollback.from_document(document.from_json(doc, "rollback.json")).study_id \
        == longest
    with pytest.raises(errors.BadSpec, match="at most 64"):
        agent_mod.check_study_id(longest + "x")


def test_an_arm_that_fails_after_the_snapshot_leaves_no_rollback_file(tmp_path):
    """Nothing is changed before the control socket listens: an arm that fails there (a
    socket path too long for AF_UNIX) leaves no rollback file that would send an admin to
    'study restore' and refuse the next arm of the study, and frees the lock."""
    from beoperf.audit.lock import TuneLock
    from beoperf.factors import agent as agent_mod

    base = tmp_path / ("b" * 90)
    base.mkdir(mode=0o700)
    plan = agent_mod.parse_plan({"study_id": "s1", "factors": []})
    with pytest.raises(OSError):
        agent_mod.arm(plan, -1, str(base))
    where = Path(agent_mod.study_dir("s1", str(base)))
    assert not (where / "rollback.json").exists()
    with TuneLock(str(base)):
        pass


# --------------------------------------------------------------------------- ClusterShell


def test_fan_outs_in_two_threads_run_side_by_side():
    """The renewer's fan-outs run beside the study's own (ClusterShell: a task per
    thread, PLAN27 risk 5): a 1.5 s command in one thread does not hold up short ones in
    another."""
    out: dict[str, list[float]] = {"short": []}

    def short() -> None:
        for _ in range(4):
            t = time.monotonic()
            spec = LaunchSpec(argv=("sh", "-c", "sleep 0.1; echo x"), hosts=("a", "b"),
                              agent="exec env H=%h")
            assert all(r.ok for r in remote.run(spec, timeout=10).values())
            out["short"].append(time.monotonic() - t)

    thread = threading.Thread(target=short)
    start = time.monotonic()
    thread.start()
    spec = LaunchSpec(argv=("sh", "-c", "sleep 1.5; echo y"), hosts=("c",),
                      agent="exec env H=%h")
    assert remote.run(spec, timeout=10)["c"].stdout == b"y\n"
    long_took = time.monotonic() - start
    thread.join()
    assert len(out["short"]) == 4
    assert sum(out["short"]) < long_took  # all four ended while the long one ran


# --------------------------------------------------------------------------- 7. Slurm


CHECK_SLURM = """
import json, sys
from beoperf import errors
from beoperf.suites import study_hosts
try:
    state = study_hosts.check_slurm(sys.argv[1].split(","), force=sys.argv[2] == "force")
except errors.Busy as exc:
    print("busy", exc)
else:
    print(json.dumps(state.to_dict()))
"""


@pytest.mark.tools("slurmctld", "slurmd", "munged", "sbatch", "squeue", "scontrol", "nsenter")
def test_a_slurm_node_running_a_job_is_refused_unless_forced(netns_hosts):
    from slurm import SlurmCluster

    hosts = netns_hosts(3)
    with SlurmCluster(hosts[0], hosts[1:]) as slurm:
        env = child_env(slurm.env)

        def check(nodes: str, force: str = "") -> str:
            out = slurm.controller.run([sys.executable, "-c", CHECK_SLURM, nodes, force],
                                       env=env)
            return out.stdout.strip()

        job = slurm.controller.run(["sbatch", "--parsable", "-w", "n1", "-o", "/dev/null",
                                    "--wrap", "sleep 120"],
                                   env=env).stdout.strip().split(";")[0]
        try:
            running = _wait(lambda: job in slurm.controller.run(
                ["squeue", "-h", "-t", "R", "-o", "%i"], env=env).stdout.split(), 30)
            assert running is not None
            refused = check("n1,n2")
            assert refused.startswith("busy") and "n1" in refused and f"job {job}" in refused
            forced = json.loads(check("n1,n2", "force"))
            assert forced["checked"] and forced["nodes"]["n1"]["jobs"] == [
                f"{job} (user root)"]
            idle = json.loads(check("n2,elsewhere"))
            assert idle["nodes"] == {"n2": {"node": True, "jobs": []},
                                     "elsewhere": {"node": False, "jobs": []}}
        finally:
            slurm.controller.run(["scancel", job], env=env, check=False)


# --------------------------------------------------------------------------- 4. a cut link


@pytest.mark.tools("ssh", "ssh-keygen", "sshd", "nft")
def test_a_level_that_cuts_the_link_is_undone_by_the_agent_without_the_controller(lab, tmp_path):
    """A `beoperf lab` of two hosts; the controller reaches them over ssh from the lab's
    controller namespace, as `lab up` prints.  A firewall level dropping everything cuts
    the first: its set is never answered and its renewals fail, and within the lease its
    agent loads the saved ruleset back by itself (ssh works again; finish names it
    restored-by-agent).  The second host's sshd is stopped: it is named unreachable with
    the ssh command that restores it, and its own agent has put its MTU back when its
    lease lapsed."""
    hosts = lab(2)
    cut, silent = hosts.hosts
    cut.run(["nft", "-f", "-"], input=SITE_RULES)
    before = nft_ruleset(cut)
    rules = tmp_path / "cut.nft"
    rules.write_text(CUT)
    rules.chmod(0o600)
    agent = hosts.lab.ssh_agent
    root = Path(study_hosts.__file__).resolve().parents[2]
    lease = 6.0
    hs = study_hosts.HostSet(f"t{os.getpid()}-cut", [cut.addr4, silent.addr4], agent=agent,
                             remote_command=f"env PYTHONPATH={root} {BEOPERF}", timeout=lease,
                             lease_s=lease, grace_s=2.0)
    try:
        armed = hs.arm_all({
            cut.addr4: {"factors": [{"name": "firewall", "levels": [f"file:{rules}"]}],
                        "data_address": hosts.ctl.addr4},
            silent.addr4: {"factors": [{"name": "mtu", "levels": ["9000"]}],
                           "data_address": hosts.ctl.addr4}})
        assert all(a.ok for a in armed.values()), {h: a.error for h, a in armed.items()}
        assert hs.set_level("mtu", "9000", [silent.addr4])[silent.addr4].ok
        assert silent.link()["mtu"] == 9000
        hs.start_renewer()
        os.kill(hosts.state["pids"][silent.name], signal.SIGTERM)  # its sshd
        started = time.monotonic()
        # waited T/3 at most: the agent restores at its lease's lapse, 2T/3 after the set
        # at the earliest (the last renewal at most T/3 before it), and a reply written
        # before the cut can then still arrive (TCP resends it once the link is back)
        reply = hs.set_level("firewall", f"file:{rules}", [cut.addr4],
                             timeout=lease / 3)[cut.addr4]
        assert not reply.ok and reply.result.status == "timeout", reply
        ends = hs.finish()
        took = time.monotonic() - started
    finally:
        if hs.renewer is not None:
            hs.renewer.stop()
    assert ends[cut.addr4].state == "restored-by-agent", ends[cut.addr4]
    assert "lease lapsed" in ends[cut.addr4].detail
    assert nft_ruleset(cut) == before
    # the set's timeout, then at most a lease, two graces and a last status over ssh
    assert took <= 2 * lease + 2 * hs.grace_s + 4, took
    assert hosts.ssh(cut, "true", check=False).returncode == 0
    end = ends[silent.addr4]
    assert end.state == "unreachable" and "mtu=9000" in end.detail
    assert end.restore_command == f"{agent} {silent.addr4} " + shlex.quote(
        f"env PYTHONPATH={root} {BEOPERF} study restore {armed[silent.addr4].rollback_file}")
    assert _wait(lambda: silent.link()["mtu"] == 1500, lease) is not None  # its agent did




def test_an_agent_that_cannot_accept_lapses_on_time_without_a_busy_loop(tmp_path):
    """A connection waits that accept() cannot take (out of descriptors): past its lease
    the agent returns "lease lapsed" (it used to answer "a request waited" for ever, until
    its lifetime), and before it, it does not spin on the readable socket."""
    import errno
    import socket as socket_mod

    from beoperf.factors import agent as agent_mod
    from beoperf.factors.base import Context

    class NoDescriptors:
        def __init__(self, real):
            self.real, self.accepts = real, 0

        def fileno(self):
            return self.real.fileno()

        def accept(self):
            self.accepts += 1
            raise OSError(errno.EMFILE, "Too many open files")

    listener = socket_mod.socket(socket_mod.AF_UNIX, socket_mod.SOCK_STREAM)
    listener.bind(str(tmp_path / "ctl"))
    listener.listen(4)
    waiting = socket_mod.socket(socket_mod.AF_UNIX, socket_mod.SOCK_STREAM)
    waiting.connect(str(tmp_path / "ctl"))  # the socket is readable from now on
    wake_r, wake_w = os.pipe()
    try:
        plan = agent_mod.parse_plan({"study_id": "s1", "root": str(tmp_path), "factors": []})
        sock = NoDescriptors(listener)
        agent = agent_mod.Agent(plan, Context(None, str(tmp_path)), {}, str(tmp_path),
                                held=None, sock=sock, wake=wake_r)
        start = time.monotonic()
        agent.lease_end, agent.life_end = start + 0.5, start + 30
        why = agent.serve()
        took = time.monotonic() - start
    finally:
        for s in (waiting, listener):
            s.close()
        os.close(wake_r)
        os.close(wake_w)
    assert why == agent_mod.LAPSED and 0.5 <= took < 5, (why, took)
    assert sock.accepts <= 0.5 / agent_mod.ACCEPT_BACKOFF_S + 3, sock.accepts
