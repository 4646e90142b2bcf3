"""Reading and writing files as root: bounded, regular files only, never through a link."""

from __future__ import annotations

import os
import stat
import time
from pathlib import Path

import pytest

from beoperf import safeio
from beoperf.safeio import FileInputError
from helpers import cli


def fifo(tmp_path: Path) -> Path:
    path = tmp_path / "pipe.json"
    os.mkfifo(path)
    return path


# --------------------------------------------------------------------------- reading


def test_read_regular_file(tmp_path):
    path = tmp_path / "a.json"
    path.write_bytes(b"x" * 100)
    assert safeio.read_bytes(path, 100) == b"x" * 100


@pytest.mark.parametrize("make, why", [
    (fifo, "is a FIFO"),
    (lambda tmp: tmp, "is a directory"),
    (lambda tmp: Path("/dev/zero"), "is a device"),
    (lambda tmp: Path("/dev/null"), "is a device"),
])
def test_non_regular_files_are_refused_at_once(tmp_path, make, why):
    path = make(tmp_path)
    started = time.monotonic()
    with pytest.raises(FileInputError, match=why) as err:
        safeio.read_bytes(path, 1024)
    assert time.monotonic() - started < 2, "no hang on a FIFO or a device"
    assert str(err.value).startswith(str(path))


def test_oversize_file_is_refused_before_reading(tmp_path):
    path = tmp_path / "big.json"
    with open(path, "wb") as f:
        f.truncate(200 * 1024 * 1024)  # sparse: 200 MiB that cost nothing to make
    started = time.monotonic()
    with pytest.raises(FileInputError, match="over the 1,024-byte limit for a thing"):
        safeio.read_bytes(path, 1024, "a thing")
    assert time.monotonic() - started < 1


def test_limit_holds_for_a_file_that_grows(tmp_path, monkeypatch):
    """st_size may lie (procfs says 0): at most limit + 1 bytes are read."""
    path = tmp_path / "a"
    path.write_bytes(b"y" * 5000)
    real_fstat = os.fstat

    def small_fstat(fd):
        st = real_fstat(fd)
        values = list(st)
        values[stat.ST_SIZE] = 0
        return os.stat_result(values)

    monkeypatch.setattr(safeio.os, "fstat", small_fstat)
    with pytest.raises(FileInputError, match="limit"):
        safeio.read_bytes(path, 4096)


def test_missing_file(tmp_path):
    with pytest.raises(FileInputError, match="cannot read"):
        safeio.read_bytes(tmp_path / "nope", 10)


@pytest.mark.skipif(os.geteuid() != 0, reason="chown to another user needs root")
def test_private_file_must_be_owned_by_the_caller(tmp_path):
    path = tmp_path / "rollback.json"
    path.write_text("{}")
    path.chmod(0o600)
    assert safeio.read_bytes(path, 10, private=True) == b"{}"
    os.chown(path, 65534, 65534)
    with pytest.raises(FileInputError, match="owned by uid 65534"):
        safeio.read_bytes(path, 10, private=True)


@pytest.mark.parametrize("mode", [0o620, 0o602, 0o666])
def test_private_file_must_not_be_writable_by_others(tmp_path, mode):
    path = tmp_path / "rollback.json"
    path.write_text("{}")
    path.chmod(mode)
    with pytest.raises(FileInputError, match="writable by group or others"):
        safeio.read_bytes(path, 10, private=True)
    assert safeio.read_bytes(path, 10) == b"{}"  # only private files ask for it


# --------------------------------------------------------------------------- JSON


@pytest.mark.parametrize("text, why", [
    ('{"a": NaN}', "NaN is not a number"),
    ('{"a": Infinity}', "Infinity is not a number"),
    ('[-Infinity]', "-Infinity is not a number"),
    ('{"a": 1e999}', "out of range"),
    ('{"a": -1e999}', "out of range"),
    ("[" * 100 + "]" * 100, "nested more than 64 deep"),
    ("[" * 100000 + "]" * 100000, "nested more than 64 deep"),
    ('{"a": ' + "9" * 5000 + "}", "invalid JSON"),
    ("", "empty file"),
    ('{"a": 1', "truncated JSON"),
    ("{'a': 1}", "invalid JSON"),
])
def test_bad_json_is_one_error(text, why):
    with pytest.raises(FileInputError, match=why) as err:
        safeio.parse_json(text, "doc.json")
    assert str(err.value).startswith("doc.json: ") and "\n" not in str(err.value)


def test_good_json_and_depth_limit_edge():
    assert safeio.parse_json('{"a": [1, 2.5, "x", null, true]}', "d") == {
        "a": [1, 2.5, "x", None, True]}
    assert safeio.parse_json("[" * 64 + "]" * 64, "d") is not None
    with pytest.raises(FileInputError):
        safeio.parse_json("[" * 65 + "]" * 65, "d")


def test_dump_json_refuses_nan():
    with pytest.raises(ValueError):
        safeio.dump_json({"a": float("nan")})


# --------------------------------------------------------------------------- writing


def test_write_atomic_replaces_a_planted_symlink_without_following_it(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious")
    target = tmp_path / "out.json"
    target.symlink_to(victim)
    safeio.write_atomic(target, "result")
    assert victim.read_text() == "precious"
    assert not target.is_symlink() and target.read_text() == "result"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.json", "victim"]


def test_write_atomic_never_follows_a_planted_temporary_name(tmp_path):
    """The old writer used PREFIX.json.tmp: a symlink there must not matter."""
    victim = tmp_path / "victim"
    victim.write_text("precious")
    (tmp_path / "out.json.tmp").symlink_to(victim)
    safeio.write_atomic(tmp_path / "out.json", "result")
    assert victim.read_text() == "precious"
    assert (tmp_path / "out.json").read_text() == "result"


def test_write_exclusive_refuses_anything_there(tmp_path):
    path = tmp_path / "rollback.json"
    path.symlink_to(tmp_path / "does-not-exist")  # dangling
    with pytest.raises(FileExistsError):
        safeio.write_atomic(path, "x", overwrite=False)
    assert not (tmp_path / "does-not-exist").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["rollback.json"], "no temporary left"


def test_write_exclusive_and_mode(tmp_path):
    path = tmp_path / "rollback.json"
    old = os.umask(0o022)
    try:
        safeio.write_atomic(path, "x", overwrite=False, mode=0o600)
    finally:
        os.umask(old)
    assert path.read_text() == "x" and stat.S_IMODE(path.stat().st_mode) == 0o600


def test_write_into_missing_directory_names_it(tmp_path):
    with pytest.raises(OSError) as err:
        safeio.write_atomic(tmp_path / "no" / "out.json", "x")
    assert err.value.filename is not None


def test_private_dir_is_private():
    d = safeio.private_dir()
    try:
        st = d.stat()
        assert stat.S_IMODE(st.st_mode) == 0o700 and st.st_uid == os.geteuid()
    finally:
        d.rmdir()


# --------------------------------------------------------------------------- commands


@pytest.mark.parametrize("command", [["plot"], ["compare"]])
def test_commands_refuse_a_fifo_in_one_line(tmp_path, command):
    path = fifo(tmp_path)
    started = time.monotonic()
    res = cli(*command, str(path))
    assert time.monotonic() - started < 5
    assert res.status == 1
    assert res.error_lines == [f"beoperf: input error: {path}: is a FIFO, not a regular file"]


def test_plot_does_not_write_through_a_symlink(tmp_path):
    fixture = Path(__file__).parent / "fixtures" / "nptcp-loopback.out"
    victim = tmp_path / "victim"
    victim.write_text("precious")
    out = tmp_path / "figs"
    out.mkdir()
    (out / "throughput.png").symlink_to(victim)
    res = cli("plot", str(fixture), "-o", str(out))
    assert res.status == 0, res.stderr
    assert victim.read_text() == "precious"
    assert (out / "throughput.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize("text, why", [
    ('{"format": "beoperf.pingpong", "schema_version": 1, "x": NaN}', "NaN is not a number"),
    ('{"format": "beoperf.pingpong", "schema_version": 1, "x": 1e999}', "out of range"),
    ('{"format": "beoperf.pingpong", "x": ' + "[" * 5000 + "]" * 5000 + "}", "nested"),
])
@pytest.mark.parametrize("command", ["plot", "compare"])
def test_commands_refuse_bad_numbers_and_nesting_in_one_line(tmp_path, text, why, command):
    path = tmp_path / "result.json"
    path.write_text(text)
    res = cli(command, str(path), "-o", str(tmp_path)) if command == "plot" else \
        cli(command, str(path))
    assert res.status == 1
    assert len(res.error_lines) == 1 and why in res.stderr and str(path) in res.stderr


def test_pingpong_refuses_an_empty_size_list():
    res = cli("pingpong", "--sizes", "")
    assert res.status == 2 and res.error_lines == [
        "beoperf: usage error: no usable sizes in ''; "
        "see 'beoperf COMMAND --help'"]
