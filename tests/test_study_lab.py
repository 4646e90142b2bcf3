"""`beoperf study` on `beoperf lab` hosts where nothing rests on timing: a level the path
does not carry (the bridge capped at 1500) is skipped before any block, the plan changes
nothing and arms no agent, kill -9 of the controller leaves each host to restore itself
within its lease, SIGTERM restores every host and still writes the document, --peer
makes this host one end; T2, a firewall ruleset of 3,000 rules in the server whose
effect on latency (about x2) is far beyond what the load of the parallel phase does; and
T5, MPI across the lab hosts as the measurement: a command (mpirun of an mpi4py program)
with an mpienv factor, and HPL alone with an np factor (their figures are checked for
what reached the ranks, never for their timing)."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import textwrap
import time

import pytest

from beoperf import model, report
from beoperf.model.study import Study
from helpers import child_env
from study_helpers import effect, mtu_of, no_agent_left, sigterm_at, start_serve, study, study_argv

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
    said = sigterm_at(proc, "applied MTU 9000")
    assert said.strip().splitlines()[-1].startswith("beoperf: ")
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


EAGER = "OMPI_MCA_btl_tcp_eager_limit"
LAB_NET = "198.18.0.0/24"  # the lab hosts' addresses: MPI's daemons and ranks use it alone
# Each rank gives its host (its network namespace) and the eager limit it was given (Open
# MPI's own, 65536, when unset); rank 0 prints them, and the figure when the ranks agree.
# Ranks that disagree, or share a host, end the job with status 3: a failed block.
RANKS_APP = textwrap.dedent("""\
    import os, sys
    from mpi4py import MPI
    c = MPI.COMM_WORLD
    seen = c.allgather((os.readlink("/proc/self/ns/net"),
                        os.environ.get("OMPI_MCA_btl_tcp_eager_limit", "65536")))
    hosts, limits = {n for n, _ in seen}, {v for _, v in seen}
    if c.Get_rank() == 0:
        print(f"{c.Get_size()} ranks on {len(hosts)} hosts saw eager limits {sorted(limits)}")
        if len(limits) == 1:
            print(f"eager_limit: {min(limits)}")
    sys.exit(0 if len(hosts) == c.Get_size() and len(limits) == 1 else 3)
    """)


def private_file(path, text: str):
    path.write_text(text)
    path.chmod(0o600)
    return str(path)


@pytest.mark.tools("tc", "bridge", "mpirun.openmpi")
def test_t5_an_mpi_command_across_the_lab_with_an_mpienv_factor(lab, tmp_path):
    """`study run FILE --measure-command 'mpirun ...' --figure-regex RE`: the factor
    (the file's) is Open MPI's TCP eager limit, the command an mpi4py program on both lab
    hosts, launched from the lab's controller namespace.  Every block ran (exit status 0:
    a non-zero one is a failed block), has its wall time and the figure, and the figure is
    the limit every rank was given: the level's value at the level, Open MPI's own at
    Default (the factor took effect in the ranks, not only in the document)."""
    from mpi_helpers import require_mpi, write_agent

    require_mpi("openmpi")
    hosts = lab(2, sshd=False)  # with -ctl: mpirun's daemons call it back over the bridge
    app = tmp_path / "ranks.py"
    app.write_text(RANKS_APP)
    command = shlex.join([
        shutil.which("mpirun.openmpi") or "mpirun.openmpi", "--allow-run-as-root",
        "-np", "2", "--host", ",".join(h.addr4 for h in hosts),
        "--mca", "plm_rsh_agent", write_agent(tmp_path / "agent", hosts),
        "--mca", "btl", "tcp,self", "--mca", "btl_tcp_if_include", LAB_NET,
        "--mca", "oob_tcp_if_include", LAB_NET, sys.executable, str(app)])
    level = f"{EAGER}=16384"
    path = private_file(tmp_path / "t5.toml", f"""
[[factor]]
name = "mpienv"
levels = ["{level}"]

[design]
repeats = 4
seed = 5
""")
    out = tmp_path / "doc.json"
    done = study(hosts, "run", path, "--measure-command", command, "--figure-regex",
                 r"eager_limit: (\d+)", "--figure-unit", "B", "--apply", "-o", str(out),
                 inside=hosts.ctl, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = Study.from_document(model.load(out))
    assert doc.status == "complete", doc.status_reason
    [measured] = doc.measurements
    assert measured.name == "command" and measured.params["command"] == command
    c_env = next(c.id for c in doc.configurations if c.levels == {"mpienv": level})
    c_default = next(c.id for c in doc.configurations if not c.levels)
    seen: dict[str, set[float]] = {}
    for b in doc.blocks:
        assert b.status == "ok" and b.error is None, b
        assert set(b.figures) == {"wall_s", "figure"} and b.figures["wall_s"] > 0, b
        seen.setdefault(b.config, set()).add(b.figures["figure"])
    assert seen == {c_default: {65536.0}, c_env: {16384.0}}, seen
    counted = [b.config for b in doc.blocks if not b.warmup]
    assert counted.count(c_env) == 4 and counted.count(c_default) >= 4, counted
    assert [h.end.state for h in doc.hosts] == ["not-changed", "not-changed"]
    assert no_agent_left(hosts)


@pytest.mark.tools("tc", "bridge", "hpcc", "mpirun.openmpi")
def test_t5_hpl_alone_across_the_lab_with_an_np_factor(lab, tmp_path):
    """`study run FILE`, the file's measurement HPL alone (one HPCC run per block through
    the cluster suite) with N = 200 (`--measure hpl` takes HPCC's N = 1000: a block of 2
    ranks across the lab took 7-15 s), the factor np at 2, one rank a host, against the
    measurement's 1 (Default, the cheaper, is measured most).  Every block has a positive
    HPL_Tflops, each block's kept run has the block's np on its hosts, and the document
    loads and renders as text, markdown and HTML."""
    from mpi_helpers import require_mpi, write_netns_agent

    require_mpi("openmpi")
    hosts = lab(2, sshd=False)
    runs, agent = tmp_path / "runs", write_netns_agent(tmp_path / "agent.sh")
    path = private_file(tmp_path / "hpl.toml", f"""
[[factor]]
name = "np"
levels = ["2"]

[[measure]]
name = "hpl"
[measure.params]
n = 200
np = 1
agent = "{agent}"
interface = "{LAB_NET}"
launcher = "openmpi"
output = "{runs}"
timeout = 60

[design]
repeats = 4
seed = 2
""")
    out = tmp_path / "doc.json"
    done = study(hosts, "run", path, "--apply", "-o", str(out), inside=hosts.ctl,
                 timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    doc = Study.from_document(model.load(out))
    assert doc.status == "complete", doc.status_reason
    c_np2 = next(c.id for c in doc.configurations if c.levels == {"np": "2"})
    assert all(b.status == "ok" and b.figures["HPL_Tflops"] > 0 for b in doc.blocks), \
        doc.blocks
    assert [b.config for b in doc.blocks if not b.warmup].count(c_np2) == 4
    # the runs kept, one a block in the order of the blocks (numbered by the study)
    kept = sorted(runs.glob("block-*/runs/np*-r1.json"),
                  key=lambda p: int(p.parent.parent.name.rsplit("-", 1)[1]))
    bodies = [json.loads(p.read_text())["body"] for p in kept]
    assert [b["np"] for b in bodies] == [2 if b.config == c_np2 else 1 for b in doc.blocks]
    assert all(b["nodes"] == [h.name for h in hosts] for b in bodies if b["np"] == 2)
    assert [h.end.state for h in doc.hosts] == ["not-changed", "not-changed"]
    assert no_agent_left(hosts)
    document = model.load(out)
    for fmt in ("text", "markdown"):
        assert "HPL_Tflops" in report.render(document, fmt)
    html = tmp_path / "report.html"
    shown = subprocess.run([sys.executable, "-m", "beoperf", "report", str(out), "-o",
                            str(html)], capture_output=True, text=True, env=child_env(),
                           timeout=120, check=False)
    assert shown.returncode == 0, shown.stderr[-2000:]
    assert html.read_text().count('data-plot="study-blocks"') == 1  # one figure
