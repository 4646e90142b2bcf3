"""The import rules of docs/ARCHITECTURE.md, checked on the source (AST, no import run).

Data flows one way: cli -> suites -> (sweep -> engines, launch, audit, factors, monitor)
-> _core; documents (model) -> analysis -> report.  A lower layer never imports a higher
one, and the CLI never reaches past the suites into engines, the C core or the machinery.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

SRC = Path(__file__).resolve().parent.parent / "src" / "beoperf"

BASE = {"beoperf", "units", "safeio", "interrupts", "procwait", "sysinfo", "pools", "_core",
        "_mpi", "_node", "_udp", "errors"}
ALLOWED: dict[str, set[str]] = {
    **{name: BASE for name in BASE},
    "model": BASE | {"model"},
    "analysis": BASE | {"model", "analysis"},
    "engines": BASE | {"model", "analysis", "engines"},
    "launch": BASE | {"model", "analysis", "launch"},
    "audit": BASE | {"model", "analysis", "audit"},
    "factors": BASE | {"model", "analysis", "audit", "launch", "factors"},
    "monitor": BASE | {"model", "analysis", "engines", "monitor"},
    "sweep": BASE | {"model", "analysis", "engines", "sweep"},
    "report": BASE | {"model", "analysis", "report"},
    "suites": BASE | {"model", "analysis", "engines", "launch", "audit", "factors", "monitor",
                      "sweep", "report", "suites"},
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
        name in ("_core", "_mpi", "_node", "_udp")


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


# --------------------------------------------------------------------------- processes
# (issue 26): children are started by launch/ only; a module loaded by name comes from a
# literal table checked here like an import; suites/ neither print nor have an entry.

SYSTEM_READERS = {"procwait.py", "sysinfo/__init__.py", "audit/base.py"}  # may use subprocess
OS_PROCESS_CALLS = {"system", "popen", "fork", "forkpty", "execv", "execve", "execvp",
                    "execvpe", "execl", "execle", "execlp", "execlpe", "spawnv", "spawnve",
                    "spawnvp", "spawnvpe", "spawnl", "spawnle", "spawnlp", "spawnlpe",
                    "posix_spawn", "posix_spawnp"}
SAFE_CALLS = {"dict", "tuple", "list", "sorted", "reversed"}  # keep what they are given


@functools.cache
def tree_of(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


def starts_processes(path: Path) -> list[str]:
    """What in a module starts or replaces processes: subprocess, os.system, os.exec* ..."""
    found = []
    for node in ast.walk(tree_of(path)):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "subprocess"
                                                for a in node.names):
            found.append(f"line {node.lineno}: import subprocess")
        elif isinstance(node, ast.ImportFrom) and node.module == "subprocess":
            found.append(f"line {node.lineno}: from subprocess import")
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id == "os" and node.attr in OS_PROCESS_CALLS):
            found.append(f"line {node.lineno}: os.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module == "os" and any(
                a.name in OS_PROCESS_CALLS for a in node.names):
            found.append(f"line {node.lineno}: from os import")
    return found


def literal_tables(tree: ast.Module) -> dict[str, list[str]]:
    """Module-level names bound to a literal dict, tuple, list or set: their strings."""
    tables = {}
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else \
            [node.target] if isinstance(node, ast.AnnAssign) and node.value else []
        value = getattr(node, "value", None)
        if isinstance(value, (ast.Dict, ast.Tuple, ast.List, ast.Set)):
            try:
                ast.literal_eval(value)
            except ValueError:
                continue
            strings = [c.value for c in ast.walk(value)
                       if isinstance(c, ast.Constant) and isinstance(c.value, str)]
            for target in targets:
                if isinstance(target, ast.Name):
                    tables[target.id] = strings
    return tables


def bindings_in(function: ast.AST) -> dict[str, list[ast.expr]]:
    """Each local name of a function and the expressions it is bound to."""
    found: dict[str, list[ast.expr]] = {}
    for node in ast.walk(function):
        pairs: list[tuple[ast.expr, ast.expr]] = []
        if isinstance(node, ast.Assign):
            pairs = [(t, node.value) for t in node.targets]
        elif isinstance(node, (ast.For, ast.comprehension)):
            pairs = [(node.target, node.iter)]
        for target, value in pairs:
            if isinstance(target, ast.Name):
                found.setdefault(target.id, []).append(value)
    return found


def from_tables(expr: ast.expr, tables: dict, bound: dict, used: set[str],
                seen: frozenset = frozenset()) -> bool:
    """Whether ``expr`` yields only strings of literal tables (or a literal 'beoperf.'
    name), never a string built at run time; the tables it reads are added to ``used``."""
    def ok(e: ast.expr) -> bool:
        return from_tables(e, tables, bound, used, seen)

    if isinstance(expr, ast.Constant):
        return constant_name(expr, used)
    if isinstance(expr, ast.Name):
        if expr.id in tables:
            used.add(expr.id)
            return True
        if expr.id in bound and expr.id not in seen:
            return all(from_tables(e, tables, bound, used, seen | {expr.id})
                       for e in bound[expr.id])
        return False
    if isinstance(expr, (ast.Subscript, ast.Attribute)):  # TABLE[key], TABLE.values
        return ok(expr.value)
    if isinstance(expr, ast.Call):
        return call_from_tables(expr, ok)
    if isinstance(expr, ast.IfExp):
        return ok(expr.body) and ok(expr.orelse)
    if isinstance(expr, (ast.Tuple, ast.List)):
        return all(ok(e) for e in expr.elts)
    return False


def constant_name(expr: ast.Constant, used: set[str]) -> bool:
    """A literal module name ('beoperf.'...), noted as ``=NAME``; None passes."""
    if isinstance(expr.value, str):
        used.add(f"={expr.value}")
        return expr.value.startswith("beoperf.")
    return expr.value is None


def call_from_tables(call: ast.Call, ok) -> bool:
    """TABLE.get(key), TABLE.values(); dict.fromkeys(...), tuple(...) of what qualifies."""
    func = call.func
    if isinstance(func, ast.Attribute) and func.attr in ("get", "values", "keys"):
        return ok(func.value)
    if isinstance(func, ast.Name) and func.id in SAFE_CALLS or (
            isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
            and func.value.id == "dict" and func.attr == "fromkeys"):
        return all(ok(a) for a in call.args)
    return False


def loads_by_name(path: Path) -> tuple[list[str], set[str]]:
    """(what is wrong with the module's loads by name, the module names its tables give)."""
    tree = tree_of(path)
    tables = literal_tables(tree)
    problems, names = [], set()
    bound: dict[str, list[ast.expr]] = {}
    for function in ast.walk(tree):
        if isinstance(function, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for name, values in bindings_in(function).items():
                bound.setdefault(name, []).extend(values)  # (names of all functions: stricter)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else \
            func.id if isinstance(func, ast.Name) else ""
        if name == "__import__":
            problems.append(f"line {node.lineno}: __import__")
        if name != "import_module":
            continue
        used: set[str] = set()
        if not node.args or not from_tables(node.args[0], tables, bound, used):
            problems.append(f"line {node.lineno}: import_module of a name not taken "
                            "from a literal table")
        for table in used:
            names |= {table[1:]} if table.startswith("=") else \
                {s for s in tables[table] if s.startswith("beoperf.")}
    return sorted(set(problems)), names


def test_children_are_started_by_launch_only():
    offenders = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = str(path.relative_to(SRC))
        if rel.startswith("launch/") or rel in SYSTEM_READERS:
            continue
        found = starts_processes(path)
        if found:
            offenders[rel] = found
    assert offenders == {}, "start children through beoperf.launch.job: " + str(offenders)


def test_modules_loaded_by_name_come_from_literal_tables_and_keep_the_layers():
    problems = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = str(path.relative_to(SRC))
        found, names = loads_by_name(path)
        allowed = ALLOWED.get(package_of(path), set())
        for name in sorted(names):
            parts = name.split(".")
            if len(parts) > 1 and parts[1] not in allowed:
                found.append(f"loads {name}: against the layer rules")
            elif not (SRC.parent / (name.replace(".", "/") + ".py")).exists() and \
                    not (SRC.parent / name.replace(".", "/")).is_dir():
                found.append(f"loads {name}: no such module")
        if found:
            problems[rel] = found
    assert problems == {}, problems


def test_suites_neither_print_nor_have_an_entry():
    offenders = {}
    for path in sorted((SRC / "suites").rglob("*.py")):
        found = []
        for node in ast.walk(tree_of(path)):
            if isinstance(node, ast.FunctionDef) and node.name == "main":
                found.append(f"line {node.lineno}: def main")
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
                    node.func.id == "print":
                found.append(f"line {node.lineno}: print")
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and \
                    node.value.id == "sys" and node.attr in ("argv", "stdout", "stderr"):
                found.append(f"line {node.lineno}: sys.{node.attr}")
            elif isinstance(node, ast.Constant) and node.value == "__main__":
                found.append(f"line {node.lineno}: __main__")
        if found:
            offenders[str(path.relative_to(SRC))] = found
    assert offenders == {}, offenders


def test_the_process_checks_can_fail(tmp_path):
    """Each rule catches what it is about (so that an empty answer means something)."""
    bad = tmp_path / "bad.py"
    bad.write_text("import importlib\nimport subprocess\nimport os\n"
                   "NAMES = {'a': 'beoperf.cli.rank'}\n"
                   "def f(kind):\n"
                   "    importlib.import_module(f'beoperf.suites.{kind}')\n"
                   "    importlib.import_module(NAMES[kind])\n"
                   "    os.execv('/bin/true', ['true'])\n"
                   "def main():\n    print('x')\n")
    assert starts_processes(bad) == ["line 2: import subprocess", "line 8: os.execv"]
    problems, names = loads_by_name(bad)
    assert problems == ["line 6: import_module of a name not taken from a literal table"]
    assert names == {"beoperf.cli.rank"}
    assert "cli" not in ALLOWED["suites"]  # so a suite's table naming it would fail


def test_every_html_view_module_is_in_the_table():
    from beoperf.report import html

    here = {p.stem for p in (SRC / "report" / "html").glob("*.py") if p.stem != "__init__"}
    assert {m.rsplit(".", 1)[1] for m in html.VIEWS} == here - html.HELPERS
