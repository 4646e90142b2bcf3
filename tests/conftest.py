"""Shared fixtures: namespace test hosts, tools the tests need, and no silent skips under CI.

Under CI (CI=true, 1 or yes, any case) a skipped test fails, and so does a run that
deselects namespace tests (``-m "not netns"``, ``-k``): CI must run everything.  With
pytest-xdist's workers (``-n``) each worker collects and reports its deselections to the
controller, which judges the run.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

if str(Path(__file__).resolve().parent) not in sys.path:  # for --import-mode=importlib
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import netns  # noqa: E402

# The tests' runs keep no history of earlier runs (/var/lib/beoperf/history as root):
# that would widen one test's intervals by another's runs.  The history's own tests ask
# for a directory of theirs.
os.environ["BEOPERF_HISTORY"] = "off"
# Nor do they keep runs given no -o in the real runs directory (/var/lib/beoperf/runs as
# root): every run of the session goes to one temporary directory (beoperf.cli.runs);
# the tests of keeping point it at a directory of theirs.
_RUNS = tempfile.mkdtemp(prefix="beoperf-test-runs-")
os.environ["BEOPERF_RUNS"] = _RUNS
atexit.register(shutil.rmtree, _RUNS, True)

NETNS_FIXTURES = {"netns_pair", "netns_hosts", "lab"}
CI_VALUES = {"true", "1", "yes"}


def under_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in CI_VALUES


def require_tools(*tools: str) -> None:
    """Skip (with the package to install) when a command a test runs is absent."""
    missing = [t for t in tools if shutil.which(t) is None]
    if missing:
        pytest.skip(f"needs {', '.join(missing)} (apt-get install {PACKAGES_HINT})")


PACKAGES_HINT = "iproute2 iptables nftables ethtool iputils-ping procps iperf3"
_deselected_netns: list[str] = []


def _require_netns() -> None:
    ok, reason = netns.can_use_netns()
    if not ok:
        pytest.skip(f"needs network namespaces: {reason}")


@pytest.fixture
def netns_pair():
    """(server_host, client_host): two namespaces joined by one veth pair."""
    _require_netns()
    with netns.VethPair(2) as topo:
        yield topo.hosts[0], topo.hosts[1]


@pytest.fixture
def netns_hosts():
    """Factory ``make_hosts(n=2) -> list[Host]``; everything made is removed afterwards."""
    _require_netns()
    with contextlib.ExitStack() as stack:

        def make_hosts(n: int = 2) -> list[netns.Host]:
            return stack.enter_context(netns.VethPair(n)).hosts

        yield make_hosts


@pytest.fixture
def lab():
    """Factory ``make_lab(n=2, **opts) -> netns.LabHosts``: a `beoperf lab` of n hosts
    (options as beoperf.launch.lab.Lab), removed afterwards, also on failure."""
    _require_netns()
    with contextlib.ExitStack() as stack:

        def make_lab(n: int = 2, **opts) -> netns.LabHosts:
            return stack.enter_context(netns.lab_hosts(n, **opts))

        yield make_lab


def pytest_configure(config):
    config.addinivalue_line("markers", "netns: needs root to create network namespaces")
    config.addinivalue_line("markers", "tools(*names): commands the test runs (skipped, "
                                       "with the package to install, when one is absent)")


def pytest_runtest_setup(item):
    for mark in item.iter_markers("tools"):
        require_tools(*mark.args)


# The suite runs in three phases (README's test command runs them one after the other):
# ``--phase parallel`` runs every file but the timing ones on three pytest-xdist workers
# (-n 3 in the command; addopts' --dist loadfile keeps a file on one worker): their tests
# wait on children and namespaces as much as they compute (1.7 CPUs busy on three
# workers here).  ``--phase serial`` runs SERIAL_FILES in one process (-n 0): each
# compares timings that the CPU bounds (ping-pong and stream rates, MPI overheads, trials
# that must fit a budget, A/A verdicts) and loses when another file loads the two CPUs
# beside it: a CI run on two workers failed three stream tests (sizes cut by the budget, a
# shaper's fall unseen), another called an A/A pair "worse".  ``--phase paced`` runs
# PACED_FILES on three workers, a file each (-n 3): their timings are paced by the clock
# and by shaped links (the monitor's probe windows, sweeps and replays through tbf at
# 50-200 Mbit/s), not by the CPU (51 s of CPU in the 106 s the three files take at once),
# so they run beside each other but beside nothing else.  ``--phase all`` (the default)
# runs everything.
SERIAL_FILES = frozenset({"test_netns.py", "test_loopback.py", "test_mpi_netns.py",
                          "test_mpi.py", "test_node_netns.py", "test_replay_mpi.py",
                          "test_node.py", "test_compare_runs.py", "test_study_netns.py",
                          # a sweep's hard budget beside a CPU hog: a CI run's busy parallel
                          # phase stalled its last trial a second past the budget
                          "test_budget.py",
                          # how many round trips a few seconds hold: p99.9 needs 10,000
                          "test_tails_loopback.py",
                          # a stuck srun's step must end within the guard's 5 s grace
                          "test_cluster_slurm.py"})
PACED_FILES = frozenset({"test_monitor.py", "test_monitor_links.py", "test_predict_netns.py"})
PHASES = ("all", "parallel", "paced", "serial")


def phase_of(filename: str) -> str:
    """The phase a test file runs in."""
    if filename in SERIAL_FILES:
        return "serial"
    return "paced" if filename in PACED_FILES else "parallel"


def pytest_addoption(parser):
    parser.addoption("--phase", choices=PHASES, default="all",
                     help="the suite's three phases: 'parallel' every file but the timing "
                          "ones, 'paced' the clock- and link-paced timing files, 'serial' "
                          "the CPU-bound timing files (README's command runs all three)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if NETNS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.netns)
    phase = config.getoption("--phase")
    if phase != "all":  # the other phases run the rest: not a deselection
        items[:] = [i for i in items if phase_of(i.path.name) == phase]


def pytest_deselected(items):
    _deselected_netns.extend(i.nodeid for i in items if i.get_closest_marker("netns"))


def pytest_sessionfinish(session, exitstatus):
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # a pytest-xdist worker: it collected, the controller judges
        workeroutput["deselected_netns"] = list(_deselected_netns)
        return
    if under_ci() and _deselected_netns:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"CI: {len(_deselected_netns)} namespace test(s) deselected "
                                f"(e.g. {_deselected_netns[0]}); CI must run them all", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """pytest-xdist's controller, as a worker ends: the namespace tests it deselected."""
    _deselected_netns.extend(getattr(node, "workeroutput", {}).get("deselected_netns", ()))


def _fail_skip_under_ci(report) -> None:
    if not under_ci() or not report.skipped or hasattr(report, "wasxfail"):
        return
    longrepr = report.longrepr
    reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
    reason = reason.removeprefix("Skipped: ")
    report.outcome = "failed"
    report.longrepr = f"skipped under CI: {reason}"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    _fail_skip_under_ci(outcome.get_result())


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector):
    outcome = yield
    _fail_skip_under_ci(outcome.get_result())
