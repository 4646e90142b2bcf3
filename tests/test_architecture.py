"""The import rules of docs/ARCHITECTURE.md, checked on the source (AST, no import run).

Data flows one way: cli -> suites -> (sweep -> engines, launch, audit, monitor) -> _core;
documents (model) -> analysis -> report.  A lower layer never imports a higher one, and the
CLI never reaches past the suites into engines, the C core or the machinery.
"""

from __future__ import annotations

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "beoperf"

BASE = {"beoperf", "units", "safeio", "interrupts", "procwait", "sysinfo", "pools", "_core",
        "_mpi", "_node", "errors"}
ALLOWED: dict[str, set[str]] = {
    **{name: BASE for name in BASE},
    "model": BASE | {"model"},
    "analysis": BASE | {"model", "analysis"},
    "engines": BASE | {"model", "analysis", "engines"},
    "launch": BASE | {"model", "analysis", "launch"},
    "audit": BASE | {"model", "analysis", "audit"},
    "monitor": BASE | {"model", "analysis", "engines", "monitor"},
    "sweep": BASE | {"model", "analysis", "engines", "sweep"},
    "report": BASE | {"model", "analysis", "report"},
    "suites": BASE | {"model", "analysis", "engines", "launch", "audit", "monitor", "sweep",
                      "report", "suites"},
    "cli": {"beoperf", "units", "safeio", "interrupts", "errors", "model", "analysis",
            "report", "suites", "cli"},
    "__main__": {"cli"},
}

# Modules not yet moved to their place (issue 10 in progress); must shrink to nothing.
NOT_YET: set[str] = set()


def package_of(path: Path) -> str:
    """'model' for src/beoperf/model/x.py, 'units' for src/beoperf/units.py."""
    parts = path.relative_to(SRC).parts
    return parts[0] if len(parts) > 1 else (path.stem if path.stem != "__init__" else "beoperf")


def is_module(name: str) -> bool:
    return (SRC / f"{name}.py").exists() or (SRC / name).is_dir() or \
        name in ("_core", "_mpi", "_node")


def imported_packages(path: Path) -> set[str]:
    """The beoperf packages a module imports (module-level or inside functions)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names
                                     if node.module == "beoperf" and is_module(a.name)]
        for name in names:
            parts = name.split(".")
            if parts[0] == "beoperf":
                found.add(parts[1] if len(parts) > 1 else "beoperf")
    return found


def violations() -> dict[str, set[str]]:
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        package = package_of(path)
        allowed = ALLOWED.get(package)
        bad = imported_packages(path) - allowed if allowed is not None else {"(unknown package)"}
        if bad:
            out[str(path.relative_to(SRC))] = bad
    return out


def test_imports_follow_the_layers():
    found = violations()
    unexpected = {m: bad for m, bad in found.items() if m not in NOT_YET}
    assert not unexpected, "imports against docs/ARCHITECTURE.md: " + "; ".join(
        f"{m} imports {sorted(bad)}" for m, bad in sorted(unexpected.items()))
    stale = NOT_YET - set(found)
    assert not stale, f"now follow the rules, drop from NOT_YET: {sorted(stale)}"


def test_every_package_has_a_rule():
    packages = {package_of(p) for p in SRC.rglob("*.py")}
    assert packages <= set(ALLOWED) | NOT_YET_PACKAGES, sorted(packages - set(ALLOWED))


NOT_YET_PACKAGES: set[str] = set()


def test_the_checker_sees_a_violation(tmp_path):
    """The rule can fail: a module of the model importing the analysis is caught."""
    module = tmp_path / "bad.py"
    module.write_text("from beoperf.analysis.curve import analyze_run\nimport beoperf.cli\n")
    assert imported_packages(module) == {"analysis", "cli"}
    assert imported_packages(module) - ALLOWED["model"] == {"analysis", "cli"}


def test_every_kind_has_its_renderer_module():
    from beoperf import model, report

    assert set(report.MODULES) == set(model.KINDS)
    for kind in model.KINDS:
        assert "text" in report.formats(kind) or "markdown" in report.formats(kind), kind


def test_no_child_beoperf_is_pointed_at_the_checkouts_src():
    """CI installs the package (not editable): src/ there has no compiled C core, so a child
    `python -m beoperf` with PYTHONPATH=<checkout>/src fails to import it (the cluster
    tests did, and only under CI).  Children take helpers.child_env()."""
    repo = SRC.parent.parent
    offenders = [f"{path.name}:{n}" for path in [*repo.glob("tests/*.py"), *repo.glob("bench/*.py")]
                 if path.name not in ("helpers.py", "test_architecture.py")
                 for n, line in enumerate(path.read_text().splitlines(), 1)
                 if '"PYTHONPATH"' in line]
    assert offenders == []
