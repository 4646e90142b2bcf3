"""The inter-cluster link monitor: budgeted probes, SQLite store, reports, metrics."""
