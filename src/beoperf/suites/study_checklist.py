"""The latency checklist's factors: what the latency audit would change on each host
(``beoperf tune --json``, its plan: nothing is changed), as study factors and levels
through ``factors.from_change`` (the same allow-list), added to the preset's own
(irqbalance off, the firewall flushed, busy polling).

Every host of the study is asked at once (ssh, or the exec template; this host through
``exec env``, as the agents are reached).  A change found on any host becomes a level
applied on every host, as the papers apply a change cluster-wide; each is measured alone
against Default.  The MTU is left to the MTU preset: a jumbo MTU needs its path probed,
and the audit advises none before it has seen the path carry it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from beoperf import __version__, errors, factors, safeio
from beoperf.launch import remote
from beoperf.launch.base import LaunchSpec
from beoperf.suites import fleet
from beoperf.suites.study_spec import LOCAL, FactorSpec, HostsSpec

PLAN_LIMIT = safeio.LIMITS["answer"]
LOCAL_TEMPLATE = "exec env BEOPERF_STUDY_HOST=%h"  # as suites.study_hosts reaches it
SKIPPED = ("mtu",)


def tune_plans(hosts: HostsSpec, names: Sequence[str]) -> dict[str, Any]:
    """Each host's latency tune plan (its body), or the reason it gave none."""
    args = ["tune", "--json", "--profile", "latency"]
    if hosts.interface:
        args += ["--interface", hosts.interface]
    argv = remote.node_argv(hosts.remote_command, args)
    groups: dict[str | None, list[str]] = {}
    for name in names:
        groups.setdefault(LOCAL_TEMPLATE if name == LOCAL else hosts.agent,
                          []).append(name)
    specs = [LaunchSpec(argv=argv, hosts=tuple(h), agent=a) for a, h in groups.items()]
    results = remote.run_each(specs, hosts.timeout, hosts.fanout)
    return {h: _plan_of(r) for h, r in results.items()}


def _plan_of(result: remote.HostResult) -> Any:
    if not result.ok:
        return result.error or "no answer"
    try:
        doc = fleet.parse_document(result.stdout, PLAN_LIMIT, "tune-plan",
                                   lambda raw: isinstance(raw, dict)
                                   and raw.get("kind") == "tune-plan",
                                   lambda raw: (raw.get("meta") or {}).get("beoperf"))
    except (ValueError, fleet.OtherVersion) as exc:
        return str(exc) or f"runs another beoperf than {__version__}"
    return doc.body


def found_factors(plans: Mapping[str, Any]) -> tuple[list[FactorSpec], list[str]]:
    """The changes of every host's plan as factors (a level each), and a line per host
    that gave no plan."""
    levels: dict[str, list[str]] = {}
    notes = []
    for host, plan in plans.items():
        if not isinstance(plan, dict):
            notes.append(f"{host}: no latency audit ({plan})")
            continue
        for change in plan.get("changes") or []:
            try:
                found = factors.from_change(str(change.get("check")), str(change.get("key")),
                                            str(change.get("target")))
            except errors.BadSpec as exc:
                notes.append(f"{host}: {exc}")
                continue
            if found is None or found[0] in SKIPPED:
                continue
            name, level = found
            if level.label not in levels.setdefault(name, []):
                levels[name].append(level.label)
    return [FactorSpec(name, tuple(labels)) for name, labels in levels.items()], notes


def merged(preset: Sequence[FactorSpec], found: Sequence[FactorSpec]) -> tuple[FactorSpec, ...]:
    """The preset's factors with the audit's levels added (a factor's levels once each)."""
    out: dict[str, list[str]] = {}
    for f in (*found, *preset):
        labels = out.setdefault(f.name, [])
        labels += [lv for lv in f.levels if lv not in labels]
    return tuple(FactorSpec(name, tuple(labels)) for name, labels in out.items())
