"""`beoperf study` on `beoperf lab` hosts where nothing rests on timing: a level the path
does not carry (the bridge capped at 1500) is skipped before any block, the plan changes
nothing and arms no agent, kill -9 of the controller leaves each host to restore itself
within its lease, SIGTERM restores every host and still writes the document, --peer
makes this host one end; and T2, a firewall ruleset of 3,000 rules in the server whose
effect on latency (about x2) is far beyond what the load of the parallel phase does."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest

from beoperf import model
from beoperf.model.study import Study
from helpers import child_env
from study_helpers import effect, mtu_of, no_agent_left, start_serve, study, study_argv

RATE = 100e6  # bit/s: the lab's tbf on every host's link


@pytest.mark.tools("tc", "bridge")
def test_t1b_a_switch_capped_at_1500_makes_the_9000_level_skipped(lab, tmp_path):
    hosts = lab(2, rate=RATE, switch_mtu=1500, sshd=False, controller=False)
    start_serve(hosts[0])
    out = tmp_path / "doc.json"
    done = study(hosts, "mtu", "--levels", "1500,9000", "--repeats", "4", "--apply",
                 "--block-time", "0.5", "--settle", "0", "-o", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    doc = Study.from_document(model.load(out))
    level = doc.factor("mtu").level("9000")
    assert level.status == "skipped" and level.path["carried"] == 1500, level
    c9000 = next(c.id for c in doc.configurations if c.levels == {"mtu": "9000"})
    assert not [b for b in doc.blocks if b.config == c9000]
    assert any(v.startswith("MTU 9000: not measured") for v in doc.verdicts), doc.verdicts
    assert [h.end.state for h in doc.hosts] == ["restored", "restored"]
    assert [mtu_of(h) for h in hosts] == [1500, 1500]


@pytest.mark.tools("tc", "bridge")
def test_the_plan_only_changes_nothing_and_arms_no_agent(lab, tmp_path):
    hosts = lab(2, sshd=False, controller=False)
    done = study(hosts, "mtu", "--levels", "1500,9000", "--json")
    assert done.returncode == 0, done.stderr[-3000:]
    doc = Study.from_document(model.from_json(json.loads(done.stdout)))
    assert doc.status == "planned" and not doc.applied and not doc.blocks
    assert [h.snapshot.get("mtu") for h in doc.hosts] == ["1500", "1500"]
    assert [mtu_of(h) for h in hosts] == [1500, 1500]
    assert no_agent_left(hosts)


LOCK_FREE = ("from beoperf.audit.lock import TuneLock\n"
             "with TuneLock():\n    print('free')")


@pytest.mark.tools("tc", "bridge")
def test_t3_kill_9_of_the_controller_and_each_host_restores_itself(lab, tmp_path):
    """The controller (a plain process, as a user starts it) is killed with SIGKILL at
    its first change: no finish, no renewals.  Each agent restores its host when its
    lease lapses: within T of the last renewal plus the restore itself (an MTU change
    and its settle, 1 s here), so T + 3 s after the kill on a loaded machine."""
    hosts = lab(2, sshd=False, controller=False)
    start_serve(hosts[0])
    lease = 6.0
    proc = subprocess.Popen(study_argv(hosts, "mtu", "--levels", "1500,9000", "--apply",
                                       "--lease", f"{lease:g}", "--block-time", "0.5",
                                       "--settle", "0"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=child_env())
    seen = []
    try:
        for line in proc.stderr:
            seen.append(line)
            if line.startswith("applied MTU 9000"):
                break
        assert [mtu_of(h) for h in hosts] == [9000, 9000], "".join(seen)
    finally:
        proc.kill()
        killed = time.monotonic()
        proc.wait()
        proc.stderr.close()
    while [mtu_of(h) for h in hosts] != [1500, 1500]:
        assert time.monotonic() - killed < lease + 3, [mtu_of(h) for h in hosts]
        time.sleep(0.1)
    waited = time.monotonic() - killed
    assert waited > lease / 3, waited  # not before the lease could have lapsed
    deadline = time.monotonic() + 5
    while not no_agent_left(hosts):
        assert time.monotonic() < deadline, "an agent outlived its restore"
        time.sleep(0.1)
    for h in hosts:
        free = h.run([sys.executable, "-c", LOCK_FREE], env=child_env(), check=False)
        assert free.stdout.strip() == "free", free.stderr


@pytest.mark.tools("tc", "bridge")
def test_sigterm_restores_every_host_and_still_writes_the_document(lab, tmp_path):
    hosts = lab(2, sshd=False, controller=False)
    start_serve(hosts[0])
    out = tmp_path / "doc.json"
    proc = subprocess.Popen(study_argv(hosts, "mtu", "--levels", "1500,9000", "--apply",
                                       "--block-time", "0.5", "--settle", "0", "-o", str(out)),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env=child_env())
    lines = []
    for line in proc.stderr:
        lines.append(line)
        if line.startswith("applied MTU 9000"):
            proc.send_signal(signal.SIGTERM)
            break
    _, rest = proc.communicate(timeout=120)
    lines.append(rest or "")
    assert proc.returncode == 128 + signal.SIGTERM, "".join(lines)[-3000:]
    assert "".join(lines).strip().splitlines()[-1].startswith("beoperf: ")
    doc = Study.from_document(model.load(out))
    assert doc.status == "interrupted"
    assert [h.end.state for h in doc.hosts] == ["restored", "restored"]
    assert [mtu_of(h) for h in hosts] == [1500, 1500]
    assert no_agent_left(hosts)




@pytest.mark.tools("tc", "bridge")
def test_peer_the_controller_is_one_end_and_its_address_is_its_route_to_the_peer(lab,
                                                                                  tmp_path):
    """`--peer HOST` from inside a lab host: this host is the client (in process) and is
    changed too, through its own agent; its data address is the source of its route to
    the peer, so the peer's agent changes the interface toward it, not the loopback."""
    hosts = lab(2, sshd=False, controller=False)
    start_serve(hosts[0])
    out = tmp_path / "doc.json"
    argv = hosts[1].argv([sys.executable, "-m", "beoperf", "study", "mtu", "--peer",
                          hosts[0].name, "--levels", "1500,9000", "--repeats", "4",
                          "--block-time", "0.5", "--settle", "0",
                          "--exec-template", "ip netns exec %h",
                          "--remote-command", f"{sys.executable} -m beoperf",
                          "--data-address", f"{hosts[0].name}={hosts[0].addr4}", "--apply",
                          "-o", str(out)])
    done = subprocess.run(argv, capture_output=True, text=True, timeout=400, env=child_env(),
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = Study.from_document(model.load(out))
    assert [(h.role, h.data_address, h.interface) for h in doc.hosts] == [
        ("controller", hosts[1].addr4, hosts[1].ifname), ("peer", hosts[0].addr4,
                                                           hosts[0].ifname)]
    c9000 = next(c.id for c in doc.configurations if c.levels == {"mtu": "9000"})
    assert len([b for b in doc.blocks if b.config == c9000 and b.status == "ok"]) == 4
    assert [h.end.state for h in doc.hosts] == ["restored", "restored"]
    assert [mtu_of(h) for h in hosts] == [1500, 1500]


def ruleset(n: int) -> str:
    """``n`` rules none of the study's packets match, on the input hook: each packet that
    arrives is compared with every one of them."""
    rules = "\n".join(f"    ip saddr 10.{200 + i // 65536}.{i // 256 % 256}.{i % 256} drop"
                      for i in range(n))
    return ("table inet beoperf_t2 {\n  chain input {\n"
            "    type filter hook input priority 0; policy accept;\n"
            f"{rules}\n  }}\n}}\n")


def normalised(text: str) -> list[str]:
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.strip().startswith("#")]


@pytest.mark.tools("tc", "bridge", "nft")
def test_t2_a_firewall_ruleset_makes_latency_worse_and_is_restored(lab, tmp_path):
    """A study file (TOML, 0600) with the firewall factor on the server: 3,000 rules none
    of the packets match, each compared on the way in.  Latency at 16 B is "worse" with
    an interval above 1, and the server's ruleset is as it was (comments and counters
    aside).  --precision 25% (up to 10 blocks): in a busy parallel phase the 4 blocks'
    interval can be too wide to exclude 1; a ratio of 2 or more ±25% is far above 1."""
    hosts = lab(2, sshd=False, controller=False)
    start_serve(hosts[0])
    before = hosts[0].run(["nft", "-s", "list", "ruleset"]).stdout
    rules = tmp_path / "rules.nft"
    rules.write_text(ruleset(3000))
    rules.chmod(0o600)
    path = tmp_path / "t2.toml"
    path.write_text(f"""
[[factor]]
name = "firewall"
levels = ["default", "file:{rules}"]
hosts = ["{hosts[0].name}"]

[[measure]]
name = "pingpong"

[design]
repeats = 4
seed = 3
precision = "25%"
max_repeats = 10
""")
    path.chmod(0o600)
    out = tmp_path / "doc.json"
    done = study(hosts, "run", str(path), "--mode", "pingpong", "--block-time", "0.5",
                 "--apply", "-o", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    doc = Study.from_document(model.load(out))
    c_rules = next(c.id for c in doc.configurations
                   if c.levels == {"firewall": "file:rules.nft"})
    found = effect(doc, c_rules, "latency_us@16")
    assert found["verdict"] == "worse" and found["low"] > 1, found
    assert [h.end.state for h in doc.hosts] == ["restored", "not-changed"]
    after = hosts[0].run(["nft", "-s", "list", "ruleset"]).stdout
    assert normalised(after) == normalised(before)
    print(f"T2: latency x{found['ratio']:.3f} [{found['low']:.3f}, {found['high']:.3f}]")
