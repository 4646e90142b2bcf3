"""Prometheus exposition of the monitor (prometheus-client), in base units.

* ``beoperf_probe_rtt_seconds`` histogram {transport, size}: answered probes only, so a
  failed probe never exports a latency;
* ``beoperf_probes_total`` counter {transport, size, outcome};
* ``beoperf_probe_bytes_total`` counter {transport}: bytes sent, with headers;
* ``beoperf_monitor_budget_bytes_per_second`` gauge (absent without a budget);
* ``beoperf_monitor_last_success_timestamp_seconds`` gauge;
* ``beoperf_monitor_cycles_total`` counter.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

# from 50 us (loopback) to 10 s (a congested WAN), roughly x2.5 apart
RTT_BUCKETS = (5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 1e-2, 2.5e-2, 5e-2, 0.1,
               0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


class Metrics:
    def __init__(self, budget_bytes_per_s: float | None = None) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.rtt = Histogram("beoperf_probe_rtt_seconds", "Round-trip time of answered probes",
                             ["transport", "size"], buckets=RTT_BUCKETS, registry=r)
        self.probes = Counter("beoperf_probes", "Probes sent, by outcome",
                              ["transport", "size", "outcome"], registry=r)
        self.bytes = Counter("beoperf_probe_bytes", "Bytes the probes sent, with headers",
                             ["transport"], registry=r)
        self.cycles = Counter("beoperf_monitor_cycles", "Probe cycles completed", registry=r)
        self.last_ok = Gauge("beoperf_monitor_last_success_timestamp_seconds",
                             "UTC time of the last answered probe", registry=r)
        if budget_bytes_per_s is not None:
            Gauge("beoperf_monitor_budget_bytes_per_second", "The traffic budget",
                  registry=r).set(budget_bytes_per_s)

    def observe(self, transport: str, size: int, outcome: str, rtt_us: float | None,
                wire_bytes: int, t_utc: float) -> None:
        labels = (transport, str(size))
        self.probes.labels(*labels, outcome).inc()
        self.bytes.labels(transport).inc(wire_bytes)
        if outcome == "ok" and rtt_us is not None:
            self.rtt.labels(*labels).observe(rtt_us / 1e6)
            self.last_ok.set(t_utc)

    def serve(self, port: int, addr: str = "127.0.0.1") -> None:
        """Start the /metrics HTTP endpoint in a daemon thread (OSError if the port is taken)."""
        start_http_server(port, addr=addr, registry=self.registry)
