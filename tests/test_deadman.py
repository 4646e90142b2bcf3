"""A study's dead-man agents (beoperf.factors.agent) and their controller
(beoperf.suites.study_hosts), on real network namespace hosts reached with the exec template
``ip netns exec %h``: arm, set, finish; the tune lock held; kill -9 of the controller; the
agent's signals and its lifetime; ``beoperf study restore``."""

from __future__ import annotations

import json
import os
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

NETNS = "ip netns exec %h"
BEOPERF = f"{sys.executable} -m beoperf"
STUDY_DIR = Path("/run/beoperf/study")


# --------------------------------------------------------------------------- what is changed


class Factors:
    """The factors these tests change on a host, and how a test reads them there."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def plan(self, host) -> dict:
        where = self.root / host.name
        where.mkdir(exist_ok=True)
        return {"factors": [{"name": "noop", "levels": ["5", "7"]}], "root": str(where),
                "data_address": None}

    LEVELS = {"noop": "7"}

    def values(self, host) -> dict:
        path = self.root / host.name / "noop"
        return {"noop": path.read_text().strip() if path.exists() else "0"}


@pytest.fixture
def study(netns_hosts, tmp_path, request):
    """(hosts, factors, make_hostset): namespace hosts; HostSets made are finished and
    their agents' pids checked gone, their study directories removed."""
    made: list[study_hosts.HostSet] = []
    hosts = netns_hosts(2)
    factors = Factors(tmp_path)

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
    armed = _arm(hs, hosts, factors)
    for h in hosts:  # the way back is on disk before any change can be asked for
        doc = json.loads(Path(armed[h.name].rollback_file).read_text())
        assert doc["kind"] == "study-rollback"
        assert [e["factor"] for e in doc["body"]["entries"]] == list(Factors.LEVELS)
        assert oct(Path(armed[h.name].rollback_file).stat().st_mode & 0o777) == "0o600"
        assert not _lock_free(h)
    for factor, level in Factors.LEVELS.items():
        replies = hs.set_level(factor, level)
        assert all(r.ok for r in replies.values()), {h: r.error for h, r in replies.items()}
    assert all(factors.values(h) == Factors.LEVELS for h in hosts)
    assert all(r.ok and r.data["levels"] == Factors.LEVELS for r in hs.status().values())

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


def test_a_level_not_in_the_plan_is_refused_by_the_agent(study):
    hosts, factors, make = study
    hs = make()
    _arm(hs, hosts, factors)
    replies = hs.set_level("noop", "9")
    assert not any(r.ok for r in replies.values())
    assert all("not in this host's plan" in r.error for r in replies.values())
    assert all(factors.values(h) == {"noop": "0"} for h in hosts)
    assert {e.state for e in hs.finish().values()} == {"not-changed"}


def test_a_bad_plan_is_one_line_and_touches_nothing(study):
    hosts, factors, make = study
    hs = make()
    plan = {**factors.plan(hosts[0]), "factors": [{"name": "noop", "levels": ["x"]}]}
    armed = hs.arm_all({hosts[0].name: plan})[hosts[0].name]
    assert not armed.ok and "noop level 'x'" in armed.error
    assert armed.result.exit_code == 2
    assert not list(STUDY_DIR.glob(f"{hs.study_id}.net*"))
    assert _lock_free(hosts[0])
    assert hs.finish()[hosts[0].name].state == "not-changed"


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
    lease = 5.0
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
        time.sleep(lease * 0.8)  # renewals: the leases outlive their first T
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
    # the last renewal came at most T/3 (and a round trip) before the kill: the lease
    # lapses between 2T/3 and T after it, and the agent restores at once
    assert set(back) == {h.name for h in hosts}, back
    assert all(lease / 2 <= t <= lease + 2 for t in back.values()), back
    for h in hosts:
        pid, where = agents[h.name]
        assert _wait(lambda pid=pid: not _alive(pid), 5) is not None
        assert json.loads(Path(where, "result.json").read_text())["why"] == "lease lapsed"
        assert _lock_free(h)


# --------------------------------------------------------------------------- 5. signals


def test_sigterm_restores_at_once_and_sigkill_leaves_the_file_study_restore_uses(study):
    hosts, factors, make = study
    hs = make(lease_s=4)  # (finish waits a lease for the host whose agent is gone)
    armed = _arm(hs, hosts, factors)
    assert all(r.ok for r in hs.set_level("noop", "7").values())
    term, kill = hosts
    os.kill(armed[term.name].pid, signal.SIGTERM)
    assert _wait(lambda: factors.values(term) == {"noop": "0"}, 3) is not None
    assert _wait(lambda: not _alive(armed[term.name].pid), 3) is not None
    os.kill(armed[kill.name].pid, signal.SIGKILL)
    assert _wait(lambda: not _alive(armed[kill.name].pid), 3) is not None
    assert factors.values(kill) == {"noop": "7"}  # nobody restored it
    path = armed[kill.name].rollback_file
    restore = kill.run([*BEOPERF.split(), "study", "restore", path], check=False,
                       env=child_env())
    assert restore.returncode == 0, restore.stderr
    assert "noop: restored" in restore.stdout
    assert factors.values(kill) == {"noop": "0"}
    ends = hs.finish()
    assert ends[term.name].state == "restored-by-agent"
    assert "signal" in ends[term.name].detail
    assert ends[kill.name].state == "unreachable"  # no agent, no result: named, with
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
    doc["body"]["entries"][0]["saved"] = {"value": "1; reboot"}
    crafted = tmp_path / "crafted.json"
    crafted.write_text(json.dumps(doc))
    crafted.chmod(0o600)
    bad = hosts[0].run([*BEOPERF.split(), "study", "restore", str(crafted)], check=False,
                       env=child_env())
    assert bad.returncode == 1 and "bad saved value" in bad.stderr, bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


# --------------------------------------------------------------------------- 6. the lifetime


def test_the_lifetime_ends_the_agent_while_renewals_go_on(study):
    hosts, factors, make = study
    hs = make(lease_s=3)
    start = time.monotonic()
    armed = _arm(hs, hosts[:1], factors, max_life_s=4)[hosts[0].name]
    assert all(r.ok for r in hs.set_level("noop", "7").values())
    hs.start_renewer()
    back = _wait(lambda: factors.values(hosts[0]) == {"noop": "0"}, 10)
    assert back is not None
    assert 4 - 0.5 <= time.monotonic() - start <= 4 + 3
    assert hs.renewer.rounds >= 2  # renewed past the lease: the lifetime ended it
    result = json.loads(Path(armed.dir, "result.json").read_text())
    assert result["why"] == "lifetime"
    assert hs.finish()[hosts[0].name].state == "restored-by-agent"


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

        job = slurm.controller.run(["sbatch", "--parsable", "-w", "n1", "--wrap",
                                    "sleep 120"], env=env).stdout.strip().split(";")[0]
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
