"""Pure data: the document envelope and one module per kind (see document.py).

Importing the package registers every kind, so :func:`load` reads any of them.
"""

from beoperf.model import (  # noqa: F401  (register their kinds)
    audit,
    cluster,
    cluster_mpi,
    comparison,
    fleet,
    monitor,
    node,
    pingpong,
    prediction,
    study,
    study_rollback,
    tune,
)
from beoperf.model.document import (
    FORMAT,
    KINDS,
    Document,
    DocumentError,
    from_json,
    load,
    make_meta,
)

__all__ = ["FORMAT", "KINDS", "Document", "DocumentError", "from_json", "load", "make_meta"]
