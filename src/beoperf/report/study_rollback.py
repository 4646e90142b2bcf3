"""A study's rollback file (kind "study-rollback") as text: what it restores on which host,
and the command that does it."""

from __future__ import annotations

from typing import Any

from beoperf.model.document import Document
from beoperf.model.study_rollback import StudyRollback
from beoperf.report import renderer
from beoperf.report.answer import Level, Line, answer


@renderer("study-rollback", "text")
def study_rollback_text(doc: Document, **_options: Any) -> str:
    """The snapshot: the host, the namespace, each factor in restore order."""
    saved = StudyRollback.from_document(doc)
    lines = [f"study {saved.study_id}: snapshot of {len(saved.entries)} factor(s) on host "
             f"{saved.host}, network namespace {saved.netns}, interface "
             f"{saved.interface or '(none)'}, lease {saved.lease_s:g} s"]
    lines += [f"  {e.factor} (restored {i})" for i, e in enumerate(saved.restore_order(), 1)]
    lines += [f"  file {f.name} (sha256 {f.sha256[:16]}...)" for f in saved.files]
    return "\n".join(lines)


@answer("study-rollback")
def study_rollback_answer(doc: Document) -> list[Line]:
    saved = StudyRollback.from_document(doc)
    return [Line(Level.NOTE, f"study {saved.study_id}: a snapshot of "
                             f"{len(saved.entries)} factor(s) on {saved.host}: 'beoperf study "
                             "restore FILE' restores them")]
