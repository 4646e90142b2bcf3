"""Local processes: the command run here, once per rank.

Each rank is its own process with ``BEOPERF_RANK`` (0, 1, ...) and ``BEOPERF_RANKS`` (how
many) in its environment, so that a program started this way knows its place as it would
from an MPI launcher.  Only this host: a spec naming other hosts, an agent, an interface
or a CPU binding is refused.
"""

from __future__ import annotations

import os
import platform
from typing import Any

from beoperf.launch.base import Launch, Launcher, LaunchSpec, refuse, register
from beoperf.launch.job import Job

LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")


def is_local(host: str) -> bool:
    return host in LOCAL_NAMES or host == platform.node()


def _check(spec: LaunchSpec) -> None:
    refuse(spec, "local", agent=None, interface=None, bind="none", extra=())
    remote = [h for h in spec.hosts if not is_local(h)]
    if remote:
        raise ValueError(f"the local launcher runs on this host only, not on {remote[0]!r}")
    if len(spec.hosts) > 1:
        raise ValueError("the local launcher runs on this host only: name it once")


def launches(spec: LaunchSpec) -> list[Launch]:
    """One Launch per rank: the command, and the spec's environment with its rank."""
    _check(spec)
    ranks = spec.ranks_per_host
    return [Launch(spec.argv, {**spec.env, "BEOPERF_RANK": str(rank),
                               "BEOPERF_RANKS": str(ranks)}) for rank in range(ranks)]


@register("local")
class Local(Launcher):
    """This host, one process per rank."""

    def available(self) -> bool:
        return True

    def command(self, spec: LaunchSpec) -> Launch:
        """The one process of a one-rank spec (several ranks: :func:`launches`)."""
        if spec.ranks_per_host != 1:
            raise ValueError("one argv cannot start several local processes: use "
                             "beoperf.launch.local.launches (or start)")
        return launches(spec)[0]


def start(spec: LaunchSpec, **options: Any) -> list[Job]:
    """Start every rank, each a guarded :class:`beoperf.launch.job.Job` (``options``: its
    keyword arguments, e.g. ``on_line``, ``keep``); the caller waits for them and closes
    them (a rank still running is then stopped, what it started too).  If one cannot
    start, those already started are stopped and the OSError raised."""
    jobs: list[Job] = []
    try:
        for launch in launches(spec):
            jobs.append(Job(list(launch.argv), env={**os.environ, **launch.env},
                            **options).start())
    except BaseException:
        for started in jobs:
            started.close()
        raise
    return jobs
