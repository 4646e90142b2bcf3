"""A factor, driven from a test, inside a network namespace: one JSON request per line on
stdin, one JSON reply per line on stdout.

Started as ``ip netns exec NS python tests/factor_driver.py`` (ip netns exec mounts the
namespace's own /sys, which a process that only setns()es would not see), so every change a
factor makes stays inside the namespace the test created.

Request: {"op": "parse|snapshot|check_saved|read|apply|restore|set_level|settle|configure",
"factor": NAME, "ctx": {Context fields}, "level": {"label", "value"}, "texts": [...],
"saved": {...}, "measurement": {...}}.
Reply: {"ok": true, "result": ...} or {"ok": false, "type": exception class, "error": text}.
"""

from __future__ import annotations

import json
import sys

from beoperf import errors, factors
from beoperf.factors import Context, Level


def handle(request: dict) -> object:
    factor = factors.get(request["factor"])
    op = request["op"]
    if op == "parse":
        return [lv.to_dict() for lv in factor.parse(request["texts"])]
    if op == "check_saved":
        factor.check_saved(request["saved"])
        return None
    if op == "configure":
        return factor.configure(request.get("measurement", {}), Level(**request["level"]))
    ctx = Context(**request.get("ctx", {"interface": None}))
    if op in ("snapshot", "read", "settle"):
        return getattr(factor, op)(ctx)
    if op == "restore":
        factor.restore(ctx, request["saved"])
        return None
    level = Level(**request["level"])
    if op == "apply":
        return factor.apply(ctx, level)
    if op == "set_level":
        return factor.set_level(ctx, level, request["saved"])
    raise ValueError(f"unknown op {op!r}")


def main() -> None:
    for line in sys.stdin:
        try:
            reply = {"ok": True, "result": handle(json.loads(line))}
        except (errors.BeoperfError, ValueError, KeyError) as exc:
            reply = {"ok": False, "type": type(exc).__name__, "error": str(exc)}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
