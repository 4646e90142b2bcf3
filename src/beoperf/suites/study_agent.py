"""A study's host side: what ``beoperf study agent ...`` and ``study restore`` run on a host.

The controller (:mod:`beoperf.suites.study_hosts`) reaches each host through the
remote-host layer and runs these there, its data on standard input:

* :func:`arm`: the host's plan checked (nothing is touched when it is wrong), then the
  dead-man agent (:mod:`beoperf.factors.agent`) started detached; its ready line
  (``armed {...}`` / ``failed <why>``) is all the command prints;
* :func:`control`: one request to the armed agent, its JSON reply; when the agent is gone,
  what it left in ``result.json``;
* :func:`read_values`: the plan's factors as they are now, without an agent or the lock
  (a plan printed without ``--apply``);
* :func:`probe`: the path to a peer probed with don't-fragment datagrams both ways;
* :func:`restore`: ``beoperf study restore FILE``.

Nothing heavy is imported here (no numpy): a request costs a short Python start.
"""

from __future__ import annotations

import os
import sys

from beoperf import errors, safeio
from beoperf.factors import agent, rollback
from beoperf.factors.base import Context
from beoperf.launch import detach
from beoperf.model.document import JsonObject

READY_TIMEOUT_S = 60.0  # snapshots (a firewall's ruleset) and the rollback file's fsync


def _plan_json(data: bytes, what: str = "the plan") -> JsonObject:
    if len(data) > agent.PLAN_LIMIT:
        raise errors.BadSpec(f"{what}: over {agent.PLAN_LIMIT:,} bytes")
    try:
        raw = safeio.parse_json(data, what)
    except safeio.FileInputError as exc:
        raise errors.BadSpec(str(exc)) from None
    if not isinstance(raw, dict):
        raise errors.BadSpec(f"{what} is not a JSON object")
    return raw


def arm(study_id: str, data: bytes, ready_timeout: float = READY_TIMEOUT_S) -> str:
    """Check the plan (BadSpec), start the agent detached: its ready line."""
    raw = _plan_json(data)
    if raw.get("study_id") != agent.check_study_id(study_id):
        raise errors.BadSpec(f"the plan is for study {raw.get('study_id')!r}, not {study_id}")
    agent.parse_plan(raw)
    argv = [sys.executable, "-m", "beoperf.factors.agent"]
    _pid, line = detach.detach(argv, dict(os.environ), ready_timeout, data)
    return line


def control(study_id: str, data: bytes, timeout: float = 30.0) -> JsonObject:
    """One request (JSON) to this host's agent of ``study_id``: its reply; when no agent
    listens, ``{"ok": false, "gone": true, "result": result.json or null}`` (for a
    ``status``: ``ok`` true, ``armed`` false)."""
    agent.check_study_id(study_id)
    message = _plan_json(data, "the request")
    try:
        return agent.request(study_id, message, timeout)
    except agent.AgentGone as exc:
        result = agent.result_of(study_id)
        if message.get("op") == "status":
            return {"ok": True, "armed": False, "result": result}
        return {"ok": False, "gone": True, "error": str(exc), "result": result}
    except agent.AgentError as exc:
        return {"ok": False, "error": str(exc)}


def read_values(data: bytes) -> JsonObject:
    """The plan's host factors as they are now: no agent, no lock, nothing written."""
    plan = agent.parse_plan(_plan_json(data))
    ctx = Context(agent.interface_of(plan), plan.root)
    return {"ok": True, "interface": ctx.interface, "values": agent.read_all(plan, ctx)}


def probe(address: str, port: int, interface: str | None) -> JsonObject:
    """The path to ``address`` (its ``beoperf serve`` on ``port``) probed both ways with
    don't-fragment datagrams, from this host: PathFacts as JSON, and ``ok`` when the
    probes ran (``carried`` then says the largest packet that crossed both ways)."""
    from beoperf import sysinfo
    from beoperf.suites import audit  # numpy: only here

    if interface is None:
        route = sysinfo.route_interface(address)
        interface = str(route["dev"]) if route else None
    facts = audit.probe_path(address, port, interface).to_dict()
    return {"ok": facts["error"] is None, **facts}


RESTORED = rollback.RESTORED  # the suffix of a rollback file fully restored from


def restore(path: str, force: bool = False) -> list[JsonObject]:
    """``beoperf study restore FILE``: each factor's end (the file renamed FILE.restored
    when every one was restored)."""
    return rollback.restore(path, force)
