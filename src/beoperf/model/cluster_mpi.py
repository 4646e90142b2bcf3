"""The documents of the cluster's own MPI tests (``beoperf cluster ring | pairs | mbw``).

Each holds one *series* per ranks-per-node setting (one MPI job each): the ranks and the
node each ran on, the launch (the launcher's argv with the plan left out, the variables
it passed), the MPI library and what carried the messages, rank 0's MPI environment, how
the precision loop went, the status, and the test's own figures:

* ``cluster-ring``: per repeat, every ring (natural, random) at the latency and bandwidth
  sizes with its trials in seconds per message, and HPCC's four figures under HPCC's own
  keys and units (``NaturallyOrderedRingLatency_usec`` ... in us and 10^9 B/s) from the
  trials' minimum (HPCC's statistic) and from their median; each figure's mean and
  sample standard deviation over the repeats;
* ``cluster-pairs``: every pair of ranks' latency (s) and bandwidth (B/s), median of the
  trials with its 95% interval; the node x node matrices; the slow nodes and links with
  the rule that named them;
* ``cluster-mbw``: per pair count and message size, the aggregate bandwidth (B/s) and
  message rate (messages/s), and the slowest and fastest pair's own rate.

Version 2 of each: every 95% interval of a time or a rate has both bounds above 0 (the
schema says so); a version 1 file with a bound at or below zero loads with that interval
dropped and the reason in ``interval_note`` beside it.
"""

from __future__ import annotations

from typing import Any, TypeGuard

from beoperf.model import document

RING_KIND = "cluster-ring"
PAIRS_KIND = "cluster-pairs"
MBW_KIND = "cluster-mbw"
KINDS = (RING_KIND, PAIRS_KIND, MBW_KIND)
VERSION = 2  # 1: intervals whose bounds were not checked to be above 0


def _number(value: Any) -> TypeGuard[float]:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _positive_intervals(node: Any) -> None:
    """Drop, everywhere in ``node``, an interval with a bound at or below zero: a ring's
    ``ci_s`` [low, high], a statistic's ``ci_low``/``ci_high``; ``interval_note`` says so.
    (The order statistics of positive trials never give one; a version 1 file that holds
    one was made by hand or by a bug, and its interval is no interval of a time.)"""
    if isinstance(node, list):
        for item in node:
            _positive_intervals(item)
        return
    if not isinstance(node, dict):
        return
    ci = node.get("ci_s")
    if isinstance(ci, list) and len(ci) == 2 and all(map(_number, ci)) and min(ci) <= 0:
        node["ci_s"] = None
        node["interval_note"] = f"interval [{ci[0]:.4g}, {ci[1]:.4g}] s reached zero or below"
    low, high = node.get("ci_low"), node.get("ci_high")
    if "ci_low" in node and _number(low) and _number(high) and min(low, high) <= 0:
        node["ci_low"] = node["ci_high"] = None
        node["interval_note"] = f"interval [{low:.4g}, {high:.4g}] reached zero or below"
    for value in node.values():
        _positive_intervals(value)


def _v1_to_v2(doc: dict) -> dict:
    """Version 2: every interval's bounds above 0 (see the module docstring)."""
    _positive_intervals(doc["body"])
    return doc


for _kind in KINDS:
    document.register(_kind, VERSION, upgrades={1: _v1_to_v2})
