"""Issue 27 R1 end to end through `beoperf study`: a study refuses to change a Slurm node
that is running a job unless ``--force``.  A real Slurm (munged, slurmctld, a slurmd in
each of two namespace hosts: tests/slurm.py), a job running on n1; the controller runs
where slurmctld does (its squeue and scontrol reach it there) and reaches the nodes by
their Slurm names through an exec template that maps each name to its namespace.
Without --force: one line naming the node and the job, exit 1 (a host refused), no agent
armed, nothing changed, no document.  With --force: the study arms and changes both
nodes, n1 too; it is ended with SIGTERM at its first change (a study run to its end is
test_study_lab.py's), restores both and writes a document that records each host's
Slurm state; the job runs on.

Nothing here is timed: the file runs in the parallel phase.  Its Slurm runs beside any
other (test_deadman.py's runs in the same phase; test_cluster_slurm.py's is serial for
its timing, not its Slurm): each daemon listens in network namespaces of its own test,
and its configuration, state, spool, munge key and socket are in a private directory."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from beoperf import model
from beoperf.model.study import Study
from helpers import child_env
from study_helpers import PORT, SACK, no_agent_left, sack, sigterm_at, start_serve

REACH = """#!/bin/sh
# reach a Slurm node of the test by its name: its network namespace
case "$1" in
{cases}
  *) echo "no such node: $1" >&2; exit 255 ;;
esac
"""


STUDY_FILE = f"""
[[factor]]
name = "sysctl"
levels = ["{SACK}=0"]
hosts = ["n1", "n2"]

[[measure]]
name = "pingpong"

[design]
repeats = 4
"""


def reach_script(path, names: dict[str, str]) -> str:
    """An exec template (``PATH %h``) that runs the command in node %h's namespace."""
    cases = "\n".join(f'  {node}) shift; exec ip netns exec {ns} "$@" ;;'
                      for node, ns in names.items())
    path.write_text(REACH.format(cases=cases))
    path.chmod(0o700)
    return f"{path} %h"


def forced_until_the_first_change(slurm, argv: list[str], env) -> str:
    """The study run with --force until it has changed the nodes (n1 runs the job), then
    ended with SIGTERM (it restores every host and writes its document): its stderr."""
    proc = slurm.controller.popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True, env=env)
    return sigterm_at(proc, "applied sysctl")


def running(slurm, env, job: str) -> bool:
    out = slurm.controller.run(["squeue", "-h", "-t", "R", "-o", "%i"], env=env, check=False)
    return job in out.stdout.split()


@pytest.mark.tools("slurmctld", "slurmd", "munged", "sbatch", "squeue", "scontrol", "nsenter")
def test_a_study_refuses_a_slurm_node_running_a_job_and_goes_on_with_force(netns_hosts,
                                                                            tmp_path):
    from slurm import SlurmCluster

    hosts = netns_hosts(3)
    with SlurmCluster(hosts[0], hosts[1:]) as slurm:
        env = child_env(slurm.env)
        n1, n2 = slurm.nodes
        names = dict(zip(slurm.node_names, (h.name for h in slurm.nodes), strict=True))
        assert list(names) == ["n1", "n2"]
        start_serve(n1)
        template = reach_script(tmp_path / "reach", names)
        sack_before = [sack(h) for h in slurm.nodes]
        study_file = tmp_path / "sack.toml"
        study_file.write_text(STUDY_FILE)
        study_file.chmod(0o600)
        argv = [sys.executable, "-m", "beoperf", "study", "run", str(study_file), "-w",
                "n1,n2", "--exec-template", template, "--remote-command",
                f"{sys.executable} -m beoperf", "--port", str(PORT),
                "--data-address", f"n1={n1.addr4}", "--data-address", f"n2={n2.addr4}",
                "--mode", "pingpong", "--block-time", "0.3", "--apply"]
        job = slurm.controller.run(["sbatch", "--parsable", "-w", "n1", "-o", "/dev/null",
                                    "--wrap", "sleep 300"],
                                   env=env).stdout.strip().split(";")[0]
        try:
            deadline = time.monotonic() + 30
            while not running(slurm, env, job):
                assert time.monotonic() < deadline, f"job {job} did not start"
                time.sleep(0.2)
            refused_doc = tmp_path / "refused.json"
            refused = slurm.controller.run([*argv, "-o", str(refused_doc)], env=env,
                                           check=False, timeout=120)
            assert refused.returncode == 1, refused.stderr[-3000:]  # a host refused
            [line] = refused.stderr.strip().splitlines()
            assert "Slurm node n1" in line and f"job {job} (user root)" in line, line
            assert "--force" in line
            assert not refused_doc.exists()  # refused before the study began
            assert no_agent_left(slurm.nodes)  # nothing armed, nothing changed
            assert [sack(h) for h in slurm.nodes] == sack_before
            out = tmp_path / "forced.json"
            stderr = forced_until_the_first_change(slurm, [*argv, "--force", "-o", str(out)],
                                                   env)
            assert running(slurm, env, job)  # the study left the job alone
        finally:
            slurm.controller.run(["scancel", job], env=env, check=False)
    doc = Study.from_document(model.load(out))
    assert doc.status == "interrupted", stderr[-3000:]
    assert doc.factor("sysctl").level(f"{SACK}=0").granted.keys() == {"n1", "n2"}
    slurm_of = {h.name: h.slurm for h in doc.hosts}
    assert slurm_of == {"n1": {"node": True, "jobs": [f"{job} (user root)"]},
                        "n2": {"node": True, "jobs": []}}, slurm_of
    assert [h.end.state for h in doc.hosts] == ["restored", "restored"]
    assert [sack(h) for h in hosts[1:]] == sack_before
    assert no_agent_left(hosts[1:])
