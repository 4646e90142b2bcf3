"""Shared fixtures: namespace test hosts, and no silent skips under CI (CI=true)."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import pytest

if str(Path(__file__).resolve().parent) not in sys.path:  # for --import-mode=importlib
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import netns  # noqa: E402

NETNS_FIXTURES = {"netns_pair", "netns_hosts"}


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


def pytest_configure(config):
    config.addinivalue_line("markers", "netns: needs root to create network namespaces")


def pytest_collection_modifyitems(items):
    for item in items:
        if NETNS_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.netns)


def _fail_skip_under_ci(report) -> None:
    if os.environ.get("CI") != "true" or not report.skipped or hasattr(report, "wasxfail"):
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
