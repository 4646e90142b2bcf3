"""The inter-cluster link monitor: probe schedule and budget, probes, the loop, the SQLite
store (and the report's query), metrics.  The report's analysis is in analysis/monitor*.py,
its Markdown and plots in report/monitor*.py, the sessions and reports in suites/monitor.py.
"""
