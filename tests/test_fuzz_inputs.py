"""Arbitrary bytes and arbitrary JSON into every loader: only the documented error comes out.

Each loader promises one error class (a one-line message naming the file); anything else
escaping (KeyError, TypeError, OverflowError, RecursionError, numpy errors ...) would be a
traceback on a user's screen, so hypothesis looks for one.
"""

from __future__ import annotations

import copy
import json
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from beoperf import __version__, safeio
from beoperf.audit.tune import TuneError, check_profile, load_rollback
from beoperf.engines import protocol
from beoperf.errors import InputError
from beoperf.model.importers import load_any
from beoperf.model.netpipe import read_netpipe
from beoperf.model.pingpong import ResultFormatError, from_json, load_json
from beoperf.model.tune import ROLLBACK_LEGACY
from beoperf.suites.fleet import parse_answer
from beoperf.suites.results import load_result
from helpers import run_json
from test_results import make_run

SETTINGS = settings(max_examples=150, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

scalars = (st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20))
json_values = st.recursive(scalars, lambda kids: st.lists(kids, max_size=5)
                           | st.dictionaries(st.text(max_size=10), kids, max_size=5),
                           max_leaves=30)
VALID = run_json(make_run())


def paths_in(doc, prefix=()):
    """Every path (tuple of keys/indices) into a JSON document."""
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from paths_in(v, (*prefix, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from paths_in(v, (*prefix, i))


PATHS = [p for p in paths_in(VALID) if p]


@st.composite
def mutated_results(draw):
    """A valid result document with one part replaced by arbitrary JSON (or removed)."""
    doc = copy.deepcopy(VALID)
    path = draw(st.sampled_from(PATHS))
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if draw(st.booleans()) and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = draw(json_values)
    return doc


def with_file(data: bytes, check) -> None:
    fd, name = tempfile.mkstemp(prefix="fuzz-", suffix=".out")
    try:
        os.write(fd, data)
        os.close(fd)
        check(Path(name))
    finally:
        os.unlink(name)


def only(error: type[BaseException], call, *args) -> None:
    try:
        call(*args)
    except error as exc:
        assert "\n" not in str(exc), str(exc)


text_lines = st.lists(st.text(alphabet=st.characters(codec="utf-8"), max_size=40)
                      | st.builds(lambda xs: " ".join(map(str, xs)),
                                  st.lists(st.integers() | st.floats(), max_size=6)),
                      max_size=20).map("\n".join)


@SETTINGS
@given(st.binary(max_size=2000) | text_lines.map(str.encode))
@example(b"1\x1f180000000\x1f96e286")  # a time of 9.6e287 us: the rate x time overflowed
def test_result_loaders_on_arbitrary_bytes(data):
    def check(path):
        only(ResultFormatError, load_any, path)
        only(ResultFormatError, load_json, path)
        only(ResultFormatError, read_netpipe, path)
        only(InputError, load_result, str(path))

    with_file(data, check)


@SETTINGS
@given(json_values | mutated_results())
def test_result_loaders_on_arbitrary_json(doc):
    only(ResultFormatError, from_json, doc)
    with_file(json.dumps(doc).encode(), lambda path: only(InputError, load_result, str(path)))


@SETTINGS
@given(st.binary(max_size=300))
def test_control_frames(data):
    frame = protocol.HEADER.pack(protocol.MAGIC, protocol.PROTOCOL_VERSION, len(data)) + data
    only(protocol.ProtocolError, protocol.decode, frame)
    only(protocol.ProtocolError, protocol.decode, data)


@SETTINGS
@given(st.binary(max_size=500) | json_values.map(lambda d: json.dumps(d).encode()))
def test_parse_json(data):
    only(safeio.FileInputError, safeio.parse_json, data, "x.json")


change_entries = st.fixed_dictionaries(
    {}, optional={"key": st.sampled_from(["net.core.busy_read", "kernel.core_pattern", "mtu",
                                          "coalesce.rx_usecs", "offload.generic-receive-offload"])
                  | st.text(max_size=30),
                  "check": st.sampled_from(["sysctl", "interface", "coalesce", "offloads"])
                  | st.text(max_size=10),
                  "interface": st.none() | st.sampled_from(["lo", "eth0", "../x"]),
                  "previous": json_values, "target": json_values, "restore": json_values})


@st.composite
def rollback_docs(draw):
    """Rollback files as issue 9 wrote them (version 2) and as the envelope (version 3),
    one part replaced by arbitrary JSON half the time."""
    changes = draw(st.lists(change_entries, max_size=4))
    if draw(st.booleans()):
        doc = {"format": ROLLBACK_LEGACY, "schema_version": 2, "host": "x", "netns": 1,
               "changes": changes}
        part = doc
    else:
        doc = {"format": "beoperf", "kind": "rollback", "schema_version": 3, "meta": {},
               "body": {"host": "x", "netns": 1, "profile": "p", "interface": None,
                        "changes": changes}}
        part = draw(st.sampled_from([doc, doc["body"]]))
    if draw(st.booleans()):
        part[draw(st.sampled_from(list(part)))] = draw(json_values)
    return doc


@SETTINGS
@given(st.binary(max_size=1000) | json_values.map(lambda d: json.dumps(d).encode())
       | rollback_docs().map(lambda d: json.dumps(d).encode()))
def test_rollback_loader(data):
    """Only loaded and checked here, never applied."""
    with_file(data, lambda path: only(TuneError, load_rollback, str(path)))


@SETTINGS
@given(json_values | st.fixed_dictionaries({"expect": st.dictionaries(
    st.sampled_from(["net.core.busy_read", "interface.mtu", "mtu", "x"]) | st.text(max_size=9),
    json_values | st.fixed_dictionaries({}, optional={
        "op": st.sampled_from(["eq", "le", "ge", "in", "??"]), "value": json_values,
        "set": json_values, "reason": json_values, "severity": json_values}), max_size=4)}))
def test_profile_checker(doc):
    only(ValueError, check_profile, doc, "profile.json")


audit_answers = (
    st.fixed_dictionaries({"format": st.just("beoperf.audit"), "schema_version": json_values,
                           "beoperf": st.just(__version__) | json_values,
                           "findings": json_values, "profile": json_values})
    | st.fixed_dictionaries({"format": st.just("beoperf"), "kind": st.just("audit"),
                             "schema_version": st.just(2) | json_values,
                             "meta": st.just({"beoperf": __version__}) | json_values,
                             "body": st.fixed_dictionaries(
                                 {"findings": json_values},
                                 optional={"profile": json_values, "interface": json_values,
                                           "host": json_values,
                                           "buffer_advice": json_values})}))


@SETTINGS
@given(st.binary(max_size=1000) | json_values.map(lambda d: json.dumps(d).encode())
       | audit_answers.map(lambda d: json.dumps(d).encode()))
def test_fleet_answers(data):
    only(ValueError, parse_answer, data)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=3000) | st.binary(max_size=200).map(
    lambda tail: b"SQLite format 3\x00" + tail))
def test_monitor_report_on_arbitrary_bytes(data):
    from helpers import cli

    def check(path):
        res = cli("monitor", "report", str(path))
        assert res.status == 1 and len(res.error_lines) == 1, res.stderr

    with_file(data, check)


MONITOR_V1 = json.loads((Path(__file__).resolve().parent / "fixtures" / "documents"
                         / "monitor-report-v1-after-issue9.json").read_text())


@st.composite
def mutated_monitor_reports(draw):
    """A monitor report written before the envelope, or as one, with one part replaced
    by arbitrary JSON (or removed)."""
    from beoperf import model

    doc = copy.deepcopy(MONITOR_V1)
    if draw(st.booleans()):
        doc = model.from_json(doc).to_json()
    paths = [p for p in paths_in(doc) if p]
    outside_series = [p for p in paths if "series" not in p]  # most paths are series points
    path = draw(st.sampled_from(outside_series) | st.sampled_from(paths))
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if draw(st.booleans()) and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = draw(st.sampled_from([None, 1e300, -1.0, 0, ""]) | json_values)
    return doc


@SETTINGS
@given(json_values | mutated_monitor_reports())
def test_monitor_report_documents(doc):
    """Only a DocumentError comes out of the loader; a document it accepts renders."""
    from beoperf import model, report
    from beoperf.model.document import DocumentError

    try:
        loaded = model.from_json(doc, "report.json")
    except DocumentError as exc:
        assert "\n" not in str(exc), str(exc)
        return
    if loaded.kind == "monitor-report":
        assert report.render(loaded, "markdown").startswith("# Link report: ")
