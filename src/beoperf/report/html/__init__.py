"""HTML: one self-contained page of many documents (`beoperf report`).

``page.page(entries)`` builds the page; each kind's section is the ``"html"`` renderer of
a module in this package (``@report.renderer(kind, "html")``), with an optional
``"title"`` renderer; a kind without one gets the generic section.  What a section says
first is the kind's answer (``beoperf.report.answer``, registered beside its text
renderer; a kind without one: its ``"warnings"`` renderer, one per line).  Importing
the package imports every view module named in :data:`VIEWS` (a literal table, read by
tests/test_architecture.py, which also fails on a module here that is in neither VIEWS
nor HELPERS): a new kind's section is one new file here and its name in VIEWS.
"""

from __future__ import annotations

import importlib

HELPERS = {"markup", "page", "style", "svg", "tails", "udp",
           "under_load"}  # tails, udp, under_load: parts of the ping-pong view
VIEWS = ("beoperf.report.html.audit", "beoperf.report.html.cluster",
         "beoperf.report.html.cluster_mpi", "beoperf.report.html.comparison",
         "beoperf.report.html.monitor", "beoperf.report.html.node",
         "beoperf.report.html.pingpong", "beoperf.report.html.prediction",
         "beoperf.report.html.study", "beoperf.report.html.tune",
         "beoperf.report.html.cluster_rma", "beoperf.report.html.cluster_p2p",
         "beoperf.report.html.cluster_coll")


def load_views() -> list[str]:
    """Import every kind's view module of this package; their names."""
    for module in VIEWS:
        importlib.import_module(module)
    return [module.rsplit(".", 1)[1] for module in VIEWS]


load_views()
