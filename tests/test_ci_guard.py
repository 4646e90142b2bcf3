"""The CI guard: under CI no test may be skipped and no namespace test deselected."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
PROBE = "BEOPERF_CI_GUARD_PROBE"


def test_probe():
    """Passes normally; skips only when the guard test below asks it to."""
    if os.environ.get(PROBE):
        pytest.skip("asked to skip by the CI guard test")


def pytest_run(*args: str, ci: str | None, probe: bool = False) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("CI", PROBE)}
    if ci is not None:
        env["CI"] = ci
    if probe:
        env[PROBE] = "1"
    # in one process (-n 0) unless ARGS ask for pytest-xdist's workers (the last -n wins)
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                           "-n", "0", *args], cwd=HERE.parent, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.parametrize("ci", ["true", "1", "yes", "True", "YES"])
def test_a_skip_fails_under_ci(ci):
    res = pytest_run(f"{HERE / 'test_ci_guard.py'}::test_probe", ci=ci, probe=True)
    assert res.returncode == 1, res.stdout
    assert "skipped under CI: asked to skip" in res.stdout


def test_a_skip_is_a_skip_outside_ci():
    res = pytest_run(f"{HERE / 'test_ci_guard.py'}::test_probe", ci=None, probe=True)
    assert res.returncode == 0 and "1 skipped" in res.stdout, res.stdout


@pytest.mark.parametrize("ci, status", [("yes", 1), (None, 5)])
def test_deselecting_namespace_tests_fails_under_ci(ci, status):
    res = pytest_run(str(HERE / "test_netns.py"), "-m", "not netns", ci=ci)
    assert res.returncode == status, res.stdout
    assert ("namespace test(s) deselected" in res.stdout) == (ci is not None)


def test_a_missing_tool_is_a_skip_naming_the_package():
    from conftest import require_tools

    with pytest.raises(pytest.skip.Exception, match="needs no-such-tool-here .*apt-get install"):
        require_tools("sh", "no-such-tool-here")
    require_tools("sh")  # present: no skip


def test_deselecting_namespace_tests_fails_under_ci_with_workers():
    """Under pytest-xdist the workers collect; the controller still fails the run."""
    res = pytest_run(str(HERE / "test_netns.py"), "-n", "2", "-m", "not netns", ci="yes")
    assert res.returncode == 1, res.stdout
    assert "namespace test(s) deselected" in res.stdout


def test_a_skip_fails_under_ci_with_workers():
    res = pytest_run(f"{HERE / 'test_ci_guard.py'}::test_probe", "-n", "2", ci="true",
                     probe=True)
    assert res.returncode == 1, res.stdout
    assert "skipped under CI: asked to skip" in res.stdout


def _collected(*args: str) -> set[str]:
    res = pytest_run("--collect-only", *args, ci=None)
    assert res.returncode == 0, res.stdout + res.stderr
    return {line for line in res.stdout.splitlines() if "::" in line}


def test_the_three_phases_run_every_test_once():
    """README's command runs --phase parallel, paced and serial: together they are the
    whole suite, no test in two (a file is in one phase, whatever its tests)."""
    names = ("test_ci_guard.py", "test_netns.py", "test_effect.py", "test_predict_netns.py")
    files = [str(HERE / name) for name in names]
    whole = _collected(*files)
    phases = {phase: _collected("--phase", phase, *files)
              for phase in ("parallel", "paced", "serial")}
    assert all(phases.values())
    assert set().union(*phases.values()) == whole
    assert sum(len(tests) for tests in phases.values()) == len(whole)
    in_file = {phase: {t.split("::")[0].rsplit("/", 1)[-1] for t in tests}
               for phase, tests in phases.items()}
    assert in_file["serial"] == {"test_netns.py"}
    assert in_file["paced"] == {"test_predict_netns.py"}


def test_the_readme_command_runs_the_three_phases():
    readme = (HERE.parent / "README.md").read_text()
    command = readme.split("<!-- test-command -->", 1)[1].split("```")[1]
    at = [command.index(f"--phase {phase}") for phase in ("parallel", "paced", "serial")]
    assert at == sorted(at)
