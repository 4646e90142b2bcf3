"""`beoperf lab`: real namespace hosts on a bridge in its own namespace, tbf, MTUs, a
switch that drops jumbo frames, sshd in every host reached from the controller, and a
`lab down` that leaves nothing behind, also after a `lab up` killed with SIGKILL.

Every lab is named after this process (t<pid>x<n>) and removed in a `finally`, also when
an assertion fails."""

from __future__ import annotations

import itertools
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time

import pytest

import netns
from beoperf.launch import lab as mechanics
from beoperf.suites import lab as suite
from helpers import child_env, cli

pytestmark = pytest.mark.netns

_names = itertools.count()


def lab_name() -> str:
    return f"t{os.getpid()}y{next(_names)}"


def require_root_netns() -> None:
    ok, reason = netns.can_use_netns()
    if not ok:
        pytest.skip(f"needs network namespaces: {reason}")
    netns._reap_stale_labs()


def lab_namespaces(name: str) -> list[str]:
    return [ns for ns in netns.list_namespaces() if ns.startswith(f"beolab-{name}-")]


def assert_gone(name: str, pids: list[int]) -> None:
    assert lab_namespaces(name) == []
    assert not os.path.lexists(f"{mechanics.STATE_DIR}/{name}.json")
    assert not os.path.lexists(f"{mechanics.STATE_DIR}/{name}")
    assert not [p for p in pids if netns._pid_alive(p)]


def test_up_four_hosts_shaped_reached_over_ssh_then_down():
    require_root_netns()
    name = lab_name()
    try:
        up = cli("lab", "up", "--name", name, "--hosts", "4", "--rate", "100M",
                 "--host-mtu", "3=9000", "--json")
        assert up.status == 0, up.stderr
        state = json.loads(up.stdout)
        names = [h["name"] for h in state["hosts"]]
        assert names == [f"beolab-{name}-{i}" for i in range(4)]
        assert state["nodeset"] == f"beolab-{name}-[0-3]"
        assert state["exec_template"] == "ip netns exec %h"
        st = os.stat(f"{mechanics.STATE_DIR}/{name}.json")
        assert stat.S_IMODE(st.st_mode) == 0o600
        assert stat.S_IMODE(os.stat(mechanics.STATE_DIR).st_mode) == 0o700
        hosts = [netns.Host(h["name"], h["addr4"], h["addr6"]) for h in state["hosts"]]
        ctl = netns.Host(state["controller"], state["controller_addr4"], "2001:2::fe")
        assert [h.link()["mtu"] for h in hosts] == [1500, 1500, 1500, 9000]
        for a, b in itertools.permutations(hosts, 2):
            assert a.ping(b.addr4), (a.name, b.name)
        qdisc = hosts[1].run(["tc", "qdisc", "show", "dev", "eth0"]).stdout
        assert "tbf" in qdisc and "rate 100Mbit" in qdisc, qdisc
        assert "tbf" not in ctl.run(["tc", "qdisc", "show", "dev", "eth0"]).stdout
        agent = state["ssh_agent"].split()
        assert agent[:4] == ["ip", "netns", "exec", state["controller"]]
        for h in hosts:  # the printed agent, from the controller, across the lab's network
            done = subprocess.run([*agent, h.addr4, "nft list ruleset && ip -4 -o addr show "
                                   "dev eth0"], capture_output=True, text=True, timeout=60)
            assert done.returncode == 0, done.stderr
            assert f"inet {h.addr4}/24" in done.stdout
        pids = list(state["pids"].values())
        assert len(pids) == 4 and all(netns._pid_alive(p) for p in pids)
        shown = cli("lab", "status", "--name", name)
        assert shown.status == 0 and "sshd: running in 4 hosts" in shown.stdout
        again = cli("lab", "up", "--name", name)
        assert again.status == 1 and "exists already" in again.stderr
        assert again.stderr.count("\n") == 1
    finally:
        down = cli("lab", "down", "--name", name)
    assert down.status == 0, down.stderr
    assert "removed 6 namespaces" in down.stdout
    assert_gone(name, pids)
    assert cli("lab", "down", "--name", name).stdout.strip().endswith("nothing to remove")


def test_switch_mtu_drops_jumbo_frames_hosts_carry(lab):
    hosts = lab(2, mtu=9000, switch_mtu=1500, sshd=False, controller=False)
    a, b = hosts
    assert a.link()["mtu"] == b.link()["mtu"] == 9000
    assert a.ping(b.addr4, size=1472)
    assert not a.ping(b.addr4, size=8972, wait=1)
    for port in ("p0", "p1"):  # the same frames pass once the switch carries them
        netns._ip("-n", hosts.lab.switch, "link", "set", "dev", port, "mtu", "9000")
    assert a.ping(b.addr4, size=8972)


def test_down_after_up_killed_mid_build():
    require_root_netns()
    name = lab_name()
    proc = subprocess.Popen([sys.executable, "-m", "beoperf", "lab", "up", "--name", name,
                             "--hosts", "3"], env=child_env(), stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 30
        while not lab_namespaces(name) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert lab_namespaces(name), "lab up made no namespace in 30 s"
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(10)
        state = json.loads(open(f"{mechanics.STATE_DIR}/{name}.json").read())
        assert state["status"] == "building"
        assert set(lab_namespaces(name)) <= set(state["namespaces"])  # recorded first
        refused = cli("lab", "up", "--name", name)
        assert refused.status == 1 and "lab down" in refused.stderr
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
        down = cli("lab", "down", "--name", name)
    assert down.status == 0, down.stderr
    assert_gone(name, [])
    assert not [p for ns in state["namespaces"] for p in mechanics.namespace_pids(ns)]


def test_down_lets_what_runs_in_a_host_end_on_sigterm_first(tmp_path):
    """A process in a lab host that cleans up on SIGTERM (as a study's agent restores
    and removes its files from the /run the lab shares) gets to: ``lab down`` sends
    SIGTERM, then SIGKILL only to what is still inside the namespace."""
    require_root_netns()
    name = lab_name()
    marker = tmp_path / "cleaned"
    script = ("import signal, sys, time, pathlib\n"
              "def bye(*_):\n"
              f"    pathlib.Path({str(marker)!r}).write_text('done')\n"
              "    sys.exit(0)\n"
              "signal.signal(signal.SIGTERM, bye)\n"
              "print('ready', flush=True)\n"
              "time.sleep(60)\n")
    proc = None
    try:
        up = cli("lab", "up", "--name", name, "--hosts", "1", "--no-sshd", "--no-controller")
        assert up.status == 0, up.stderr
        proc = subprocess.Popen(["ip", "netns", "exec", f"beolab-{name}-0", sys.executable,
                                 "-c", script], stdout=subprocess.PIPE, text=True,
                                start_new_session=True)
        assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
        down = cli("lab", "down", "--name", name)
        assert down.status == 0, down.stderr
        assert proc.wait(10) == 0  # it ended by its handler, not by SIGKILL (-9)
        assert marker.read_text() == "done"
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait(10)
        cli("lab", "down", "--name", name)
    assert_gone(name, [])


def test_a_state_file_naming_other_namespaces_is_refused():
    require_root_netns()
    name = lab_name()
    fd = mechanics._open_state_dir(create=True)
    os.close(fd)
    path = f"{mechanics.STATE_DIR}/{name}.json"
    with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as f:
        json.dump({"name": name, "namespaces": ["not-a-lab"], "pids": {}}, f)
    try:
        done = cli("lab", "down", "--name", name)
        assert done.status == 1
        assert "not the state of lab" in done.stderr and done.stderr.count("\n") == 1
    finally:
        os.unlink(path)


def test_without_root_one_line_and_exit_1():
    import beoperf.cli.lab  # noqa: F401  (imported before the fork: the child reads nothing)

    if os.geteuid() != 0:
        pytest.skip("needs root to drop to another user")
    for argv in (["lab", "up"], ["lab", "down"], ["lab", "status"]):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: nobody; what the command printed on stderr, to the pipe
            status = 99
            try:
                os.close(r)
                os.setgid(65534)
                os.setuid(65534)
                done = cli(*argv)
                os.write(w, done.stderr.encode())
                status = done.status
            finally:
                os._exit(status)
        os.close(w)
        with os.fdopen(r) as f:
            err = f.read()
        _, wait_status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(wait_status) == 1, (argv, err)
        assert err == "beoperf: not root: beoperf lab creates network namespaces: run it " \
                      "as root\n", argv


def test_bad_options_are_one_line_and_exit_2():
    for argv, words in ((["--name", "Bad!"], "lab name"),
                        (["--hosts", "2", "--host-mtu", "5=9000"], "numbered 0 to 1"),
                        (["--mtu", "70000"], "an MTU from 68"),
                        (["--burst", "64K"], "--burst needs --rate"),
                        (["--rate", "fast"], "not a rate")):
        done = cli("lab", "up", *argv)
        assert done.status == 2, (argv, done.stderr)
        assert words in done.stderr and done.stderr.count("\n") == 1, done.stderr


def test_up_lines_say_how_to_reach_the_hosts():
    state = mechanics.Lab("x", hosts=2, rate=1e8).state("up")
    text = "\n".join(suite.up_lines(state))
    assert "--exec-template 'ip netns exec %h' -w 'beolab-x-[0-1]'" in text
    assert ("ip netns exec beolab-x-ctl ssh -i /run/beoperf/lab/x/userkey -l root -o "
            "BatchMode=yes -o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null") in text
    assert "--data-address beolab-x-0=198.18.0.1 --data-address beolab-x-1=198.18.0.2" in text
    assert "--ssh-command 'ip netns exec beolab-x-ctl ssh -i" in text
    assert "-w 198.18.0.1,198.18.0.2" in text
    assert "100 Mbit/s" in text and "burst 64 KiB" in text
    assert "beoperf study mtu" in text and "beoperf lab down --name x" in text
    assert mechanics.tbf_burst(1e8) == 64 * 1024
    assert mechanics.tbf_burst(1e10) == 5_000_000  # 4 ms at 10 Gbit/s


def test_a_state_file_of_another_shape_is_refused():
    require_root_netns()
    name = lab_name()
    good = mechanics.Lab(name, hosts=2).state("up")
    fd = mechanics._open_state_dir(create=True)
    os.close(fd)
    path = f"{mechanics.STATE_DIR}/{name}.json"
    try:
        for bad in ({**good, "hosts": [{"name": 1}]}, {**good, "sshd": "yes"},
                    {k: v for k, v in good.items() if k != "nodeset"}):
            with open(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
                json.dump(bad, f)
            done = cli("lab", "status", "--name", name)
            assert done.status == 1 and "not the state of lab" in done.stderr, done.stderr
        with open(path, "w") as f:
            json.dump(good, f)
        shown = cli("lab", "status", "--name", name)
        assert shown.status == 0 and "missing namespaces" in shown.stdout
    finally:
        os.unlink(path)


def test_down_removes_the_study_directories_its_hosts_left():
    """A study agent in a lab host keeps its directory under the /run the lab shares with
    this host, named by the host's namespace inode; `lab down` removes those, and only
    those (a namespace made later may get the same inode)."""
    require_root_netns()
    from beoperf.factors import agent

    name = lab_name()
    other = agent.study_dir("t-keep-me")  # this host's own: never touched
    os.makedirs(other, mode=0o700, exist_ok=True)
    try:
        up = cli("lab", "up", "--name", name, "--hosts", "2", "--no-sshd", "--no-controller")
        assert up.status == 0, up.stderr
        made = subprocess.run(
            ["ip", "netns", "exec", f"beolab-{name}-0", sys.executable, "-c",
             "from beoperf.factors import agent; print(agent.make_study_dir('t-lab-left'))"],
            capture_output=True, text=True, env=child_env(), check=True).stdout.strip()
        assert os.path.isdir(made) and made != other
        assert cli("lab", "down", "--name", name).status == 0
        assert not os.path.exists(made)
        assert os.path.isdir(other)
    finally:
        cli("lab", "down", "--name", name)
        shutil.rmtree(other, ignore_errors=True)
