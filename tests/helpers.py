"""Shared test helpers: the CLI in-process, and an in-process server."""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import beoperf
from beoperf.cli import main
from beoperf.engines import protocol
from beoperf.engines.tcp_server import Server, ServerConfig


@dataclass
class CliResult:
    status: int
    stdout: str
    stderr: str

    @property
    def json(self) -> Any:
        """The JSON on stdout; a beoperf document is checked against its kind's schema."""
        doc = json.loads(self.stdout)
        return checked(doc)

    @property
    def error_lines(self) -> list[str]:
        return [line for line in self.stderr.splitlines() if line.strip()]


def child_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """ENV (default: this process's) for a child `python -m beoperf`, which must import the
    same beoperf as the tests: an editable checkout or an installed package (the C core
    is built only in the latter's directory, never in a plain clone's src/)."""
    root = str(Path(beoperf.__file__).resolve().parents[1])
    return {**(os.environ if env is None else env), "PYTHONPATH": root}


def cli(*argv: str) -> CliResult:
    """Run `beoperf ARGV` in this process, capturing its exit status and output."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(list(argv))
    return CliResult(status, out.getvalue(), err.getvalue())


@dataclass
class RunningServer:
    server: Server
    thread: threading.Thread
    log: list[str] = field(default_factory=list)

    @property
    def port(self) -> int:
        return self.server.port


@contextlib.contextmanager
def running_server(**overrides: Any) -> Iterator[RunningServer]:
    """A Server on 127.0.0.1, free port, in a thread; its log lines are collected."""
    log: list[str] = []
    cfg = ServerConfig(bind="127.0.0.1", port=0, log=log.append, **overrides)
    server = Server(cfg)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield RunningServer(server, thread, log)
    finally:
        server.shutdown()
        thread.join(5)


def hello(mode: str = "pingpong", max_size: int = 1024, **params: Any) -> dict[str, Any]:
    return {"op": "hello", "role": "control", "beoperf": "test",
            "params": {"mode": mode, "max_size": max_size, **params}}


def raw_exchange(host: str, port: int, payload: bytes, timeout: float = 5.0) -> dict | None:
    """Send raw bytes, return the server's reply frame (None if it just closed)."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(payload)
        try:
            return protocol.recv_message(sock)
        except (protocol.PeerGone, ConnectionResetError):
            return None


def wait_for(predicate, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def checked(doc: Any) -> Any:
    """``doc`` after validating it against its kind's JSON Schema, if it is a document."""
    if isinstance(doc, dict) and doc.get("format") == "beoperf":
        from beoperf.model.document import validate

        validate(doc["kind"], doc)
    return doc


def save_run(run, path) -> None:
    """Write a RunResult as beoperf writes it (the document with summary and analysis)."""
    from beoperf.analysis.pingpong import document

    document(run).save(path)


def run_json(run) -> dict:
    """The JSON document of a RunResult, as a dict."""
    from beoperf.analysis.pingpong import document

    return checked(json.loads(document(run).dumps()))


def scratch_open(pid: int, directory: Path) -> bool:
    """Whether ``pid`` holds a file of ``directory`` open (the I/O test's, once unlinked:
    ' (deleted)')."""
    with contextlib.suppress(OSError):
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with contextlib.suppress(OSError):
                if os.readlink(fd).startswith(f"{directory}/"):
                    return True
    return False
