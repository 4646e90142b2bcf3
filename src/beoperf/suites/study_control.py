"""The study's hosts as the block loop sees them (``suites.study.Control``), on
``suites.study_hosts.HostSet``: each call reaches every host at once and gives per host a
plain reply (``ok``, ``error``, ``lost`` when the host did not answer at all, and what the
agent said).

Each host's agent finds the interface it changes by the route to the other end of its
first pair (the server's route to its own address would be the loopback), unless
``--interface`` names it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

from beoperf.launch import remote
from beoperf.model.document import JsonObject
from beoperf.suites import study_hosts
from beoperf.suites.study_spec import LOCAL

LIFE_FACTOR = 2.0  # an agent's lifetime: twice the study's estimate, plus LIFE_EXTRA_S
LIFE_EXTRA_S = 600.0
SILENT = (remote.UNREACHABLE, remote.TIMEOUT, remote.NOT_RUN)


def new_study_id(name: str) -> str:
    """A study's id on every host: the preset's name, the UTC time and this process."""
    stem = "".join(c if c.isalnum() else "-" for c in name.rsplit("/", 1)[-1])[:24] or "study"
    return f"{stem}-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}-{os.getpid()}"


def partners(names: Sequence[str], pairs: Sequence[tuple[str, str]],
             addresses: Mapping[str, str]) -> dict[str, str | None]:
    """Each host's route target: the data address of the other end of its first pair."""
    out: dict[str, str | None] = {h: None for h in names}
    for client, server in pairs:
        out[client] = out[client] or addresses[server]
        out[server] = out[server] or addresses[client]
    return out


def snapshot_value(saved: Any) -> Any:
    """A factor's snapshot as a value to compare a level with ({"value": "1500"} ->
    "1500"); other snapshots as they are."""
    if isinstance(saved, dict) and set(saved) == {"value"}:
        return saved["value"]
    return saved


class HostsControl:
    """The hosts of one study, through their dead-man agents."""

    def __init__(self, names: Sequence[str], *, study_name: str, agent: str | None,
                 remote_command: str, fanout: int, timeout: float, lease_s: float,
                 interface: str | None, routes: Mapping[str, str | None],
                 levels: Mapping[str, Mapping[str, Sequence[str]]], estimate_s: float,
                 settle_s: float = 1.0) -> None:
        self.names = list(names)
        self.hs = study_hosts.HostSet(
            new_study_id(study_name), self.names, agent=agent,
            remote_command=remote_command, local=[LOCAL] if LOCAL in names else (),
            fanout=fanout, timeout=timeout, lease_s=lease_s)
        self.interface, self.routes, self.levels = interface, dict(routes), levels
        self.life_s = estimate_s * LIFE_FACTOR + LIFE_EXTRA_S
        self.settle_s = settle_s

    def plan(self, host: str) -> JsonObject:
        """The host's plan: its host factors and their levels, how to find the interface,
        the lifetime."""
        plan: JsonObject = {"factors": [{"name": f, "levels": list(levels)}
                                        for f, levels in self.levels.get(host, {}).items()],
                            "max_life_s": self.life_s, "settle_s": self.settle_s}
        if self.interface:
            plan["interface"] = self.interface
        elif self.routes.get(host):
            plan["data_address"] = self.routes[host]
        return plan

    def read(self, factors: Sequence[str]) -> dict[str, dict[str, Any]]:
        replies = self.hs.read_values({h: self.plan(h) for h in self.names})
        out: dict[str, dict[str, Any]] = {}
        for host, reply in replies.items():
            values = reply.data.get("values")
            if not reply.ok or not isinstance(values, dict):
                out[host] = {"error": reply.error or "no values"}
                continue
            out[host] = {f: snapshot_value(v) for f, v in values.items()}
        return out

    def check_slurm(self, force: bool) -> JsonObject:
        hosts = [h for h in self.names if h != LOCAL]
        state = study_hosts.check_slurm(hosts, force).to_dict()
        nodes = state.get("nodes")
        per_host: JsonObject = dict(nodes) if isinstance(nodes, dict) else {}
        if not state.get("checked"):
            per_host = {h: {"node": None, "note": state.get("note")} for h in self.names}
        return per_host

    def arm(self, hosts: Sequence[str]) -> dict[str, JsonObject]:
        armed = self.hs.arm_all({h: self.plan(h) for h in hosts})
        out: dict[str, JsonObject] = {}
        for host, a in armed.items():
            out[host] = {"ok": a.ok, "error": a.error, "interface": a.interface,
                         "snapshot": a.snapshot, **a.agent_dict()}
        if any(a.ok for a in armed.values()):
            self.hs.start_renewer()
        return out

    def set_level(self, factor: str, level: str, value: str | None,
                  hosts: Sequence[str]) -> dict[str, JsonObject]:
        if value is None:
            replies = self.hs.default(factor, hosts)
        else:
            replies = self.hs.set_level(factor, level, hosts)
        return {h: {**r.data, "ok": r.ok, "error": r.error,
                    "lost": not r.ok and r.result.status in SILENT}
                for h, r in replies.items()}

    def lapsed(self) -> list[str]:
        """The hosts whose lease may have lapsed by now (see HostSet.lapsed_by)."""
        return self.hs.lapsed_by(time.monotonic())

    def probe(self, client: str, address: str, port: int) -> JsonObject:
        reply = self.hs.probe(client, address, port, self.interface)
        if reply.result.ok and "carried" in reply.data:
            return reply.data
        return {"peer": address, "port": port, "mtu": None, "carried": None,
                "error": reply.error or "no answer to the probe"}

    def finish(self, keep: Sequence[tuple[str, str]]) -> dict[str, JsonObject]:
        ends = self.hs.finish(keep=[f for f, _ in keep])
        return {h: e.to_dict() for h, e in ends.items()}
