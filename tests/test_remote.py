"""The remote-host layer (beoperf.launch.remote): a command on many hosts, one result per
host, whatever each host does.  Hosts are network namespaces reached with the exec
template ``ip netns exec %h`` (root), or local commands told apart by ``env NODE=%h``."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time

import pytest

from beoperf.launch import clush, remote
from beoperf.launch.base import LaunchSpec
from conftest import require_tools
from helpers import child_env
from test_node_netns import SSHD, start_sshd, wait_port

NETNS = "ip netns exec %h"
LIMIT = 64 * 1024

# What a namespace host does, read from its standard input: its name on standard output,
# or a failure, a sleep, or output without end.
ON_HOST = """read what
here=$(ip netns identify)
case $what in
  sleep) exec sleep 60 ;;
  fail) echo "no disk in $here" >&2; exit 3 ;;
  flood) exec yes "$here" ;;
  *) echo "$here" ;;
esac"""


def pids_in(namespace: str) -> list[str]:
    done = subprocess.run(["ip", "netns", "pids", namespace], capture_output=True, text=True,
                          timeout=10)
    return done.stdout.split()


def wait_empty(namespace: str, seconds: float = 2) -> list[str]:
    """The processes left in ``namespace`` after ``seconds`` (less than the host's own
    timeout needs: what is gone was ended here)."""
    deadline = time.monotonic() + seconds
    while (left := pids_in(namespace)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return left


def test_every_host_has_a_result_whatever_the_others_do(netns_hosts):
    """One host sleeps past its timeout, one fails, one prints without end, one does not
    exist; the other two answer at once, from their own namespace, and the run ends at
    the timeout, not at the sleeper's end.  Nothing is left running in any host."""
    hosts = netns_hosts(5)
    sleeper, failing, flooding = (h.name for h in hosts[:3])
    fine = [h.name for h in hosts[3:]]
    missing = f"bptnone{os.getpid()}"
    names = (*fine, sleeper, failing, flooding, missing)
    stdin = {sleeper: b"sleep\n", failing: b"fail\n", flooding: b"flood\n"}
    started = time.monotonic()
    got = remote.run(LaunchSpec(("sh", "-c", ON_HOST), hosts=names, agent=NETNS),
                     timeout=3, limit=LIMIT, stdin=stdin)
    elapsed = time.monotonic() - started
    assert list(got) == list(names)
    assert 3 <= elapsed < 30  # the timeout, never the sleeper's 60 s

    for name in fine:
        assert (got[name].status, got[name].exit_code) == ("ok", 0)
        assert got[name].stdout == f"{name}\n".encode() and got[name].error == ""
        assert got[name].duration_s < got[sleeper].duration_s

    slow = got[sleeper]
    assert (slow.status, slow.exit_code, slow.error) == ("timeout", None, "timed out after 3 s")
    assert 3 <= slow.duration_s < 30

    bad = got[failing]
    assert (bad.status, bad.exit_code) == ("failed", 3)
    assert bad.error == f"exit status 3: no disk in {failing}"
    assert bad.reason == "exit status 3: no disk in %h"

    flood = got[flooding]
    assert (flood.status, flood.exit_code) == ("over-limit", None)
    assert flood.error == f"output over {LIMIT:,} bytes"
    assert flood.stdout_cut and len(flood.stdout) == LIMIT
    assert flood.stdout.startswith(f"{flooding}\n".encode())

    unknown = got[missing]
    assert (unknown.status, unknown.exit_code) == ("unreachable", 255)
    assert unknown.error.startswith("exit status 255: Cannot open network namespace")
    assert missing in unknown.error and "%h" in unknown.reason

    for host in hosts:
        assert wait_empty(host.name) == [], host.name


def test_grouped_as_clubak_groups_them(netns_hosts):
    hosts = netns_hosts(3)
    names = tuple(h.name for h in hosts)
    got = remote.run(LaunchSpec(("sh", "-c", ON_HOST), hosts=names, agent=NETNS),
                     timeout=20, stdin={names[0]: b"fail\n", names[1]: b"fail\n"})
    folded = remote.group(got)
    assert [set(ns) for ns in folded.outputs.values()] == [{names[2]}]
    assert {k: set(v) for k, v in folded.failed.items()} == {
        "exit status 3: no disk in %h": set(names[:2])}


def test_a_command_per_host_under_one_fanout(netns_hosts):
    """run_each: each host its own command (a server here, clients there, as a study runs
    them); the fanout holds across them: three 0.4 s commands one at a time take 1.2 s."""
    hosts = netns_hosts(3)
    specs = [LaunchSpec(("sh", "-c", f"sleep 0.4; echo {i}; ip netns identify"),
                        hosts=(h.name,), agent=NETNS) for i, h in enumerate(hosts)]
    started = time.monotonic()
    got = remote.run_each(specs, timeout=20, fanout=1)
    elapsed = time.monotonic() - started
    assert [r.stdout.decode().split() for r in got.values()] == [
        [str(i), h.name] for i, h in enumerate(hosts)]
    assert elapsed >= 3 * 0.4
    assert all(r.duration_s >= 0.4 for r in got.values())


def test_over_ssh_across_the_namespace_network(netns_hosts, tmp_path):
    """An ssh-like agent (the controller's ssh in one namespace, sshd in another): the
    command's words arrive as given through both shells (this host's and the node's), its
    input too; an address nothing answers on is named with ssh's reason; and a command
    given up here for its timeout is ended on the node soon after by the node itself
    (ending ssh does not end it: there is no terminal to hang up)."""
    require_tools("ssh", "ssh-keygen")
    if not os.access(SSHD, os.X_OK):
        pytest.skip("needs sshd (apt-get install openssh-server)")
    server, client = netns_hosts(2)
    start_sshd(server, tmp_path)
    wait_port(client, server.addr4, 22)
    agent = (f"ip netns exec {client.name} ssh -i {tmp_path}/userkey -l root -o BatchMode=yes "
             "-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null -o LogLevel=ERROR "
             "-o ConnectTimeout=3")
    odd = "a  b 'c' \"d\" %h $HOME ;"
    nowhere = "198.18.0.250"  # on the test network, no host
    argv = ("sh", "-c", 'read what; echo "got $what"; printf "%s\\n" "$0"', odd)
    got = remote.run(LaunchSpec(argv, hosts=(server.addr4, nowhere), agent=agent),
                     timeout=30, stdin=b"hello there\n")
    assert got[server.addr4].ok and got[server.addr4].stdout == \
        f"got hello there\n{odd}\n".encode()
    far = got[nowhere]
    assert (far.status, far.exit_code) == ("unreachable", 255)
    assert far.error.startswith(f"exit status 255: ssh: connect to host {nowhere} port 22")
    assert far.reason.startswith("exit status 255: ssh: connect to host %h port 22")

    marker = f"bpt-ssh-sleep-{os.getpid()}"
    slow = remote.run(LaunchSpec(("sh", "-c", "sleep 120", marker), hosts=(server.addr4,),
                                 agent=agent), timeout=2)[server.addr4]
    assert (slow.status, slow.error) == ("timeout", "timed out after 2 s")
    started = time.monotonic()
    while pgrep(marker) and time.monotonic() - started < clush.REMOTE_GRACE_S + 20:
        time.sleep(0.1)
    assert pgrep(marker) == []


def pgrep(pattern: str) -> list[str]:
    return subprocess.run(["pgrep", "-f", pattern], capture_output=True, text=True).stdout.split()


# ------------------------------------------------------------------ local commands (no root)

LOCAL = """case $NODE in
  closer*) exec >&- 2>&-; sleep 60 ;;
  noisy*) exec yes complaint >&2 ;;
  echo*) cat ;;
  *) echo "$NODE" ;;
esac"""


def local(*names: str) -> LaunchSpec:
    return LaunchSpec(("sh", "-c", LOCAL), hosts=names, agent="exec env NODE=%h")


def test_a_command_that_closes_its_output_and_runs_on_times_out_alone():
    """ClusterShell waits for a command whose output has ended: one that closes it and
    sleeps held every host until it ended.  Its timeout applies and the others are
    answered at once."""
    started = time.monotonic()
    got = remote.run(local("ok1", "closer1", "ok2"), timeout=2)
    elapsed = time.monotonic() - started
    assert (got["closer1"].status, got["closer1"].error) == ("timeout", "timed out after 2 s")
    assert [got[n].status for n in ("ok1", "ok2")] == ["ok", "ok"]
    assert elapsed < 30
    # not held meanwhile (without a pidfd they are, and each takes the closer's 2 s)
    assert max(got["ok1"].duration_s, got["ok2"].duration_s) < got["closer1"].duration_s / 2


def test_standard_input_per_host_then_its_end():
    got = remote.run(local("echo1", "echo2", "echo3"), timeout=20,
                     stdin={"echo1": b"first", "echo2": b"x" * 300_000})
    assert got["echo1"].stdout == b"first"
    assert got["echo2"].stdout == b"x" * 300_000  # more than a pipe holds
    assert got["echo3"].stdout == b"" and got["echo3"].ok  # its input ended at once
    same = remote.run(local("echo1", "echo2"), timeout=20, stdin=b"both")
    assert [r.stdout for r in same.values()] == [b"both", b"both"]


def test_standard_error_is_bounded_and_its_tail_kept():
    got = remote.run(local("noisy1", "ok1"), timeout=20, limit=10_000)["noisy1"]
    assert (got.status, got.error) == ("over-limit", "output over 10,000 bytes")
    assert got.stderr_cut and not got.stdout_cut
    assert got.stderr.endswith(b"complaint\n") and len(got.stderr) <= 4096


@pytest.mark.parametrize("specs, kw, message", [
    ([local("a", "b"), local("b")], {}, "host b named twice"),
    ([local("a")], {"fanout": 0}, "each must be positive"),
    ([local("a")], {"timeout": 0}, "each must be positive"),
    ([LaunchSpec(("true",), hosts=("a",), agent="env %hosts")], {}, "%hosts"),
    ([LaunchSpec(("true",))], {}, "needs hosts"),
    ([local("n1", "n[2-3]")], {}, "host 'n\\[2-3\\]' is not one host name"),
    ([local("a,b")], {}, "host 'a,b' is not one host name"),
])
def test_what_cannot_run_anywhere_is_refused_before_anything_runs(specs, kw, message):
    with pytest.raises(ValueError, match=message):
        remote.run_each(specs, **kw)


def test_beoperf_on_a_host():
    argv = remote.node_argv(f"{sys.executable} -m beoperf", ["--version"])
    [got] = remote.run(LaunchSpec(argv, hosts=("n1",), agent="exec env NODE=%h"),
                       timeout=60).values()
    assert got.ok and got.stdout.startswith(b"beoperf ")


STARVED = """
import json, resource, sys
resource.setrlimit(resource.RLIMIT_NOFILE, (40, 40))
from beoperf.launch import clush, remote
from beoperf.launch.base import LaunchSpec
hosts = tuple(f"n{i}" for i in range(20))
spec = LaunchSpec(("sh", "-c", "sleep 60", sys.argv[1]), hosts=hosts, agent="exec env NODE=%h")
got = remote.run(spec, timeout=60, fanout=20)
print(json.dumps({h: [r.status, r.error] for h, r in got.items()}))
"""


def test_a_fan_out_that_cannot_go_on_still_answers_for_every_host(tmp_path):
    """Out of file descriptors after a few hosts (ClusterShell's engine raises and stops):
    the hosts started are ended (nothing left running) and the rest are named as not run,
    each with the reason; nothing raises."""
    marker = f"bpt-starved-{os.getpid()}"
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", STARVED, marker], capture_output=True,
                          text=True, timeout=120, env=child_env())
    assert done.returncode == 0, done.stderr
    assert time.monotonic() - started < 30  # the sleeps were ended, not waited for
    got = json.loads(done.stdout)
    assert len(got) == 20
    why = "the fan-out stopped: [Errno 24] Too many open files"
    ended = [h for h, (status, error) in got.items() if status == "failed"]
    never = [h for h, (status, error) in got.items() if status == "not-run"]
    assert ended and never and len(ended) + len(never) == 20
    assert {got[h][1] for h in ended} == {f"ended early: {why}"}
    assert {got[h][1] for h in never} == {f"not run: {why}"}
    left = subprocess.run(["pgrep", "-f", marker], capture_output=True, text=True)
    assert left.stdout == ""


def test_a_process_that_detaches_outlives_its_command():
    """The contract a study's dead-man agent relies on: started through the layer, in a
    session of its own with its output closed, it outlives its command, the timeout here
    and the host's own timeout after it; its command answers at once."""
    marker = f"bpt-detached-{os.getpid()}"
    detach = f'setsid sh -c "sleep 60; :" {marker} </dev/null >/dev/null 2>&1 & echo armed'
    started = time.monotonic()
    [got] = remote.run(local_spec(detach), timeout=1).values()
    try:
        assert (got.status, got.stdout) == ("ok", b"armed\n")
        assert got.duration_s < 1
        time.sleep(max(0.0, started + 1 + clush.REMOTE_GRACE_S + 1 - time.monotonic()))
        assert len(pgrep(marker)) == 1
    finally:
        for pid in pgrep(marker):
            os.killpg(int(pid), 9)  # its session: the shell and its sleep


def local_spec(script: str) -> LaunchSpec:
    return LaunchSpec(("sh", "-c", script), hosts=("n1",), agent="exec env NODE=%h")


def test_a_host_without_timeout_runs_the_command_unbounded_there(tmp_path):
    """The host's own timeout is used where there is one (coreutils): a host with no
    `timeout` on its PATH (here: only sh) still runs the command."""
    (tmp_path / "sh").symlink_to("/bin/sh")
    script = 'command -v timeout || echo "no timeout here"; echo "$NODE ran"'
    bare = LaunchSpec(("sh", "-c", script), hosts=("n1",),
                      agent=f"exec env PATH={tmp_path} NODE=%h")
    assert remote.run(bare, timeout=20)["n1"].stdout == b"no timeout here\nn1 ran\n"
    [usual] = remote.run(local_spec(script), timeout=20).values()
    assert usual.stdout.decode().splitlines()[1:] == ["n1 ran"]  # the first: timeout's path


def test_an_agent_that_is_not_here_makes_its_hosts_unreachable_not_the_others():
    """A host whose exec template names a command this host does not have is unreachable
    (never run); a host reached whose command fails is failed; the others answer, under
    the same fan-out."""
    gone = LaunchSpec(("sh", "-c", "echo never"), hosts=("n1",),
                      agent=f"/nonexistent/bpt-agent-{os.getpid()} %h")
    fails = LaunchSpec(("sh", "-c", "echo no disk >&2; exit 3"), hosts=("n2",),
                       agent="exec env NODE=%h")
    runs = LaunchSpec(("sh", "-c", 'echo "$NODE ran"'), hosts=("n3",),
                      agent="exec env NODE=%h")
    got = remote.run_each([gone, fails, runs], timeout=20)
    assert list(got) == ["n1", "n2", "n3"]
    assert (got["n1"].status, got["n1"].exit_code, got["n1"].duration_s) == (
        "unreachable", None, None)
    assert "bpt-agent" in got["n1"].error and "not found" in got["n1"].error
    assert (got["n2"].status, got["n2"].exit_code) == ("failed", 3)
    assert (got["n3"].status, got["n3"].stdout) == ("ok", b"n3 ran\n")
    assert [r.ok for r in got.values()] == [False, False, True]
    reached = LaunchSpec(("true",), hosts=("n1",), agent="LC_ALL=C exec env NODE=%h")
    assert remote.run(reached, timeout=20)["n1"].ok  # the agent's command: env


def test_a_result_as_json_and_back():
    """to_dict is JSON (text when the output is UTF-8, base64 when not) and from_dict
    gives the same result back; a field that is not as written is a ValueError naming it."""
    results = [remote.HostResult("n1", "ok", 0, "é\n".encode(), b"", False, False, 0.25),
               remote.HostResult("n2", "over-limit", None, b"\xff\x00raw", b"tail", True,
                                 False, 1.5, "output over 10 bytes", "output over 10 bytes"),
               remote.HostResult("n3", "unreachable", 255, b"", b"ssh: no route", False,
                                 True, 0.1, "exit status 255: ssh: no route",
                                 "exit status 255: ssh: no route")]
    for result in results:
        data = json.loads(json.dumps(result.to_dict()))
        assert remote.HostResult.from_dict(data) == result
        assert set(data) == {"host", "status", "exit_code", "stdout", "stdout_encoding",
                             "stdout_cut", "stderr", "stderr_encoding", "stderr_cut",
                             "duration_s", "error", "reason"}
    assert results[0].to_dict()["stdout"] == "é\n"
    assert results[1].to_dict()["stdout_encoding"] == "base64"
    good = results[2].to_dict()
    for bad, field in (({"status": "lost"}, "status"), ({"exit_code": True}, "exit_code"),
                       ({"duration_s": "1"}, "duration_s"), ({"stdout_cut": 1}, "stdout_cut"),
                       ({"stderr_encoding": "rot13"}, "stderr_encoding"),
                       ({"stdout": "%%", "stdout_encoding": "base64"}, "stdout"),
                       ({"host": None}, "host")):
        with pytest.raises(ValueError, match=field):
            remote.HostResult.from_dict(good | bad)


KILLED_OWNER = """
import sys
from beoperf.launch import remote
from beoperf.launch.base import LaunchSpec
spec = LaunchSpec(("sh", "-c", "sleep 60; :", sys.argv[1]), hosts=("n1", "n2"),
                  agent="exec env NODE=%h")
remote.run(spec, timeout=60)
"""


def test_the_commands_end_when_beoperf_is_killed():
    """beoperf killed with SIGKILL while its hosts' commands run (issue 26, item 10): each
    command gets SIGTERM at once (it dies with its parent), which the host's `timeout`
    passes on to what it runs; nothing is left long before the 60 s timeout."""
    marker = f"bpt-owner-killed-{os.getpid()}"
    owner = subprocess.Popen([sys.executable, "-c", KILLED_OWNER, marker], env=child_env())
    try:
        started = time.monotonic()
        while len(pgrep(marker)) < 2 and time.monotonic() - started < 30:
            time.sleep(0.05)
        assert len(pgrep(marker)) >= 2
        owner.kill()
        owner.wait()
        killed = time.monotonic()
        while pgrep(marker) and time.monotonic() - killed < 10:
            time.sleep(0.05)
        left = pgrep(marker)
    finally:
        owner.kill()
        owner.wait()
        for pid in pgrep(marker):
            with contextlib.suppress(OSError):
                os.kill(int(pid), 9)
    assert left == []


def test_a_popen_clustershell_dropped_with_its_child_running_breaks_no_fan_out():
    """ClusterShell's fastsubprocess keeps a Popen dropped while its child still runs in
    ``_active``, and the next Popen's ``_cleanup`` compares its returncode, None, with 0:
    a TypeError (a study's restore fan-out after a SIGTERM mid-fan-out failed so).  The
    next fan-out works, and the child is reaped once it has ended."""
    from ClusterShell.Worker import fastsubprocess

    running = fastsubprocess.Popen(["sleep", "1"])
    pid = running.pid
    del running  # dropped while its child runs: ClusterShell keeps it in _active
    assert any(p.pid == pid for p in fastsubprocess._active)
    with pytest.raises(TypeError):
        fastsubprocess._cleanup()  # ClusterShell's own: what every new Popen runs
    got = remote.run(local("ok1", "ok2"), timeout=20)
    assert [got[n].status for n in ("ok1", "ok2")] == ["ok", "ok"]
    assert not any(p.pid == pid for p in fastsubprocess._active)
    deadline = time.monotonic() + 10
    while any(p.pid == pid for p in clush._UNREAPED) and time.monotonic() < deadline:
        time.sleep(0.1)
        clush.take_over_unreaped()
    assert not any(p.pid == pid for p in clush._UNREAPED)  # reaped: no zombie left
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
