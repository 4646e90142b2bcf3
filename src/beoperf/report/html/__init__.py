"""HTML: one self-contained page of many documents (`beoperf report`).

``page.page(entries)`` builds the page; each kind's section is the ``"html"`` renderer of
a module in this package (``@report.renderer(kind, "html")``), with an optional
``"title"`` renderer; a kind without one gets the generic section.  What a section says
first is the kind's answer (``beoperf.report.answer``, registered beside its text
renderer; a kind without one: its ``"warnings"`` renderer, one per line).  Importing
the package imports every module in it, so a new kind's section is one new file here.
"""

from __future__ import annotations

import importlib
import pkgutil

HELPERS = {"markup", "page", "style", "svg"}


def load_views() -> list[str]:
    """Import every kind's view module of this package; their names."""
    names = sorted(m.name for m in pkgutil.iter_modules(__path__) if m.name not in HELPERS)
    for name in names:
        importlib.import_module(f"{__name__}.{name}")
    return names


load_views()
