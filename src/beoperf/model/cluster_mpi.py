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

Version 1 of each: no upgrades yet (a later version registers its step from 1 here).
"""

from __future__ import annotations

from beoperf.model import document

RING_KIND = "cluster-ring"
PAIRS_KIND = "cluster-pairs"
MBW_KIND = "cluster-mbw"
KINDS = (RING_KIND, PAIRS_KIND, MBW_KIND)

for _kind in KINDS:
    document.register(_kind, 1)
