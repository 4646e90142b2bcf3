"""What every factor of a study is: levels parsed from text, a snapshot, set and read back,
an exact restore, and a check of a saved snapshot read back from a (hostile) file.

A *factor* is one thing a study changes, with *levels* (``Level``): ``mtu`` at 1500 and
9000, ``firewall`` flushed or loaded from a file.  Two scopes:

* ``host``: the state of a host (a sysctl, the MTU, the firewall).  The dead-man agent on
  the host takes a :meth:`Factor.snapshot` before any change, applies levels with
  :meth:`Factor.apply` (which reads the value back) and puts the host back with
  :meth:`Factor.restore`, exactly or with a :class:`FactorError`;
* ``run``: how a measurement runs (socket buffer sizes, MPI environment, process count,
  transport): nothing on the host changes; :meth:`Factor.configure` says how the
  measurement's parameters change.

The level ``default`` (value None) is the host's own value, the snapshot's: it is put back
by ``restore``, never "applied" (:meth:`Factor.set_level` does either).

Factors sit at the audit layer: what they may set is the audit checks' allow-list
(``Check.VALUES``), and a snapshot read back from a rollback file passes through the same
checks (:meth:`Factor.check_saved`) before anything is written as root.  Commands run through
``beoperf.launch.job`` (:func:`command`) or the checks' own ``apply``/``read``.
``Context.root`` prefixes every /proc and /sys path, so that tests can give a crafted tree
for what a namespace cannot show.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from beoperf import errors, safeio
from beoperf.audit.base import Check, Unavailable, quoted, read_file, valid_ifname
from beoperf.audit.tune import same
from beoperf.launch import job
from beoperf.model.document import JsonObject, JsonValue

__all__ = ["Context", "Level", "Factor", "FactorError", "DEFAULT", "command", "proc_path",
           "HOST", "RUN", "machine_wide"]

HOST, RUN = "host", "run"
DEFAULT = "default"  # the level that is the host's own value (the snapshot's)
COMMAND_TIMEOUT_S = 30.0
OUTPUT_BYTES = safeio.LIMITS["ruleset"]  # of a command's output kept (whole, or an error)
SAVED_TEXT = 4096  # characters of a saved value: longer is no value a factor writes
NETNS_DIR = "/run/netns"  # where `ip netns` names the namespaces it made (a lab's hosts)
NAMED_LIMIT = 4096  # names looked at there


class FactorError(errors.Failed):
    """A factor could not be set, read back or restored; the message says which and how."""

    category = "factor failed"


@dataclass(frozen=True)
class Context:
    """Where a factor acts on a host: the interface carrying the measured traffic (None:
    none found), the root that prefixes /proc and /sys (tests give a crafted tree), the
    study's private directory (where the firewall keeps the rulesets it saved; None: no
    such directory) and the extra wait after a change that resets a link (``--settle``)."""

    interface: str | None
    root: str = "/"
    directory: str | None = None
    settle_s: float = 1.0


@dataclass(frozen=True)
class Level:
    """One level of a factor: the label a user sees and the value set (None: the host's
    own value, the snapshot's)."""

    label: str
    value: str | None

    def to_dict(self) -> JsonObject:
        return {"label": self.label, "value": self.value}


def proc_path(ctx: Context, path: str) -> str:
    """``path`` (an absolute /proc or /sys path) under the context's root."""
    return os.path.join(ctx.root, path.lstrip("/"))


def command(argv: Sequence[str], timeout: float = COMMAND_TIMEOUT_S) -> str:
    """The whole standard output of ``argv`` run to its end through beoperf.launch
    (LC_ALL=C); FactorError naming the command and its first line of error when it fails,
    cannot start, outlasts ``timeout`` or says more than ``OUTPUT_BYTES`` (a ruleset's
    text must be whole to be restored)."""
    env = {**os.environ, "LC_ALL": "C", "LANG": "C"}
    shown = " ".join(argv)
    try:
        done = job.run(list(argv), timeout, env=env, keep=OUTPUT_BYTES)
    except OSError as exc:
        raise FactorError(f"{shown}: {exc.strerror or exc}") from None
    if done.stopped:
        raise FactorError(f"{shown}: no answer within {timeout:g} s")
    if done.returncode != 0:
        lines = (done.stderr_text() or done.stdout_text()).strip().splitlines()
        why = lines[0].strip() if lines else f"exit status {done.returncode}"
        raise FactorError(f"{shown}: {why}")
    if done.out is not None and done.out.total > OUTPUT_BYTES:
        raise FactorError(f"{shown}: more than {OUTPUT_BYTES:,} bytes of output")
    return done.stdout_text()


def read_text(path: str) -> str:
    """A /proc or /sys file's stripped content; FactorError with the reason."""
    try:
        return read_file(path)
    except Unavailable as exc:
        raise FactorError(str(exc)) from None


def write_text(path: str, value: str) -> None:
    """Write ``value`` (and a newline) to a /proc or /sys file; FactorError with the reason."""
    try:
        with open(path, "w", encoding="ascii") as f:
            f.write(value + "\n")
    except OSError as exc:
        raise FactorError(f"writing {value!r} to {path}: {exc.strerror or exc}") from None


def saved_text(saved: JsonObject, key: str) -> str:
    """``saved[key]``, which must be a short string; FactorError naming the key."""
    value = saved.get(key)
    if not isinstance(value, str) or len(value) > SAVED_TEXT:
        raise FactorError(f"the saved {key!r} is not a value ({quoted(value)})")
    return value


class Factor:
    """One factor; subclasses set ``name``, ``scope`` and ``order`` and override what
    their scope needs.  Instances hold no state: one may serve many hosts."""

    name: ClassVar[str] = "factor"
    scope: ClassVar[str] = HOST
    order: ClassVar[int] = 0  # apply order on a host (restore reverses it)
    summary: ClassVar[str] = ""  # one line for --help and the plan

    # ------------------------------------------------------------------ levels

    def parse(self, texts: Sequence[str]) -> list[Level]:
        """The levels named by ``texts`` ("default" is the host's own value); BadSpec
        saying what is wrong with the first bad one, or with a level named twice."""
        levels: list[Level] = []
        for text in texts:
            level = Level(DEFAULT, None) if text.strip() == DEFAULT else self.level(text)
            if any(lv.label == level.label for lv in levels):
                raise errors.BadSpec(f"{self.name}: level {quoted(level.label)} is named twice")
            levels.append(level)
        if not levels:
            raise errors.BadSpec(f"{self.name}: no levels given")
        return levels

    def level(self, text: str) -> Level:
        """One level other than default; BadSpec if ``text`` is no level of this factor."""
        raise errors.BadSpec(f"{self.name}: {quoted(text)} is not a level (only 'default')")

    # ------------------------------------------------------------------ host scope

    def snapshot(self, ctx: Context) -> JsonObject:
        """What restores this factor exactly on this host (host scope; {} for run scope)."""
        return {}

    def check_saved(self, saved: JsonObject) -> None:
        """FactorError unless ``saved`` (from a rollback file: hostile) is a snapshot this
        factor would have taken: every value through the allow-list."""
        if saved:
            raise FactorError(f"{self.name} saves nothing, the file holds {quoted(saved)}")

    def read(self, ctx: Context) -> JsonValue:
        """The factor's value on this host now (host scope)."""
        raise FactorError(f"{self.name} changes how a measurement runs, not the host")

    def apply(self, ctx: Context, level: Level) -> JsonObject:
        """Set ``level`` (not default: see :meth:`set_level`) and read it back:
        {"read_back": value, ...}; FactorError when either fails or they differ."""
        raise FactorError(f"{self.name} changes how a measurement runs, not the host")

    def restore(self, ctx: Context, saved: JsonObject) -> None:
        """Put back the snapshot ``saved`` exactly, read back; FactorError otherwise."""
        self.check_saved(saved)

    def restore_level(self, ctx: Context, saved: JsonObject, level: Level) -> None:
        """Put back from the snapshot ``saved`` what setting ``level`` changed (a study
        going back to Default, or on to another level); by default all of it
        (:meth:`restore`).  A factor whose snapshot holds more than its levels change,
        and settings another factor may hold at a level of its own, narrows it."""
        self.restore(ctx, saved)

    def set_level(self, ctx: Context, level: Level, saved: JsonObject) -> JsonObject:
        """``level`` on this host: applied, or, for default, the snapshot restored."""
        if level.value is not None:
            return self.apply(ctx, level)
        self.restore(ctx, saved)
        return {"read_back": self.read(ctx)}

    def settle(self, ctx: Context) -> float:
        """Wait until a change has taken effect; the seconds waited (0: nothing to wait)."""
        return 0.0

    def persist(self, level: Level) -> tuple[str, str] | None:
        """(file name, content) that makes ``level`` survive a reboot, or None (advice
        only, or nothing to persist)."""
        return None

    def files(self, saved: JsonObject) -> list[JsonObject]:
        """The files of the study directory a snapshot refers to: [{name, sha256}]."""
        return []

    # ------------------------------------------------------------------ run scope

    def configure(self, measurement: JsonObject, level: Level) -> JsonObject:
        """The run parameters of a measurement with ``level`` (a new dict; run scope):
        keys ``sndbuf``, ``rcvbuf`` (bytes or None: the system's), ``env`` (MPI
        environment), ``np``, ``transport``, ``congestion`` (None: the system's)."""
        return dict(measurement)


class CheckedValue(Factor):
    """A host factor whose value is one setting of an audit check (its ``VALUES`` is the
    allow-list), read from a file under the root: ``mtu``, ``congestion``."""

    KEY: ClassVar[str] = ""

    def unit(self, ctx: Context | None) -> Check:
        raise NotImplementedError

    def path(self, ctx: Context) -> str:
        raise NotImplementedError

    def check(self, value: str, ctx: Context | None = None) -> None:
        """ValueError saying what the value takes, unless it is one (the allow-list; a
        list the kernel gives is read under ``ctx``'s root)."""
        spec = self.unit(None).VALUES[self.KEY]
        spec.check(value)

    def level(self, text: str) -> Level:
        value = text.strip()
        try:
            self.check(value)
        except ValueError as exc:
            raise errors.BadSpec(f"{self.name}: {exc}") from None
        return Level(value, value)

    def read(self, ctx: Context) -> str:
        return read_text(self.path(ctx))

    def snapshot(self, ctx: Context) -> JsonObject:
        return {"value": self.read(ctx)}

    def check_saved(self, saved: JsonObject) -> None:
        if set(saved) != {"value"}:
            raise FactorError(f"{self.name}: a snapshot holds 'value' only, not "
                              f"{quoted(sorted(saved))}")
        try:
            self.check(saved_text(saved, "value"))
        except ValueError as exc:
            raise FactorError(f"{self.name}: saved {exc}") from None

    def write(self, ctx: Context, value: str) -> None:
        """Set ``value`` (already checked)."""
        write_text(self.path(ctx), value)

    def put(self, ctx: Context, value: str) -> str:
        """Set ``value`` and read it back; FactorError if it reads back otherwise."""
        self.write(ctx, value)
        got = self.read(ctx)
        if not same(got, value):
            raise FactorError(f"{self.name}: set {value!r} but read back {got!r}")
        return got

    def apply(self, ctx: Context, level: Level) -> JsonObject:
        if level.value is None:
            raise FactorError(f"{self.name}: the default level is restored, not applied")
        try:
            self.check(level.value, ctx)
        except ValueError as exc:
            raise FactorError(f"{self.name}: {exc}") from None
        return {"read_back": self.put(ctx, level.value)}

    def restore(self, ctx: Context, saved: JsonObject) -> None:
        self.check_saved(saved)
        value = saved_text(saved, "value")
        try:
            self.check(value, ctx)
        except ValueError as exc:
            raise FactorError(f"{self.name}: saved {exc}") from None
        if not same(self.read(ctx), value):
            self.put(ctx, value)


def named_namespace() -> str | None:
    """The name ``ip netns`` gives this process's network namespace (None: it has none,
    as the machine's own namespace has none)."""
    try:
        here = os.stat("/proc/self/ns/net")
        names = sorted(os.listdir(NETNS_DIR))[:NAMED_LIMIT]
    except OSError:
        return None
    for name in names:
        try:
            st = os.stat(os.path.join(NETNS_DIR, name))
        except OSError:
            continue
        if (st.st_ino, st.st_dev) == (here.st_ino, here.st_dev):
            return name
    return None


def machine_wide(ctx: Context, what: str) -> None:
    """FactorError ("cannot change here") when ``what``, a setting of the whole machine
    (the CPU governor, a systemd service), would be changed from inside a named network
    namespace (a lab host): it would change the machine under every namespace, and the
    tune lock, taken per network namespace, would not keep two such hosts apart.  A
    crafted root (tests) is no machine's."""
    if ctx.root != "/":
        return
    name = named_namespace()
    if name is not None:
        raise FactorError(f"{what}: cannot change here: it is the machine's, not network "
                          f"namespace {name}'s (run the study where it is the host's own)")


def interface_of(ctx: Context, name: str) -> str:
    """The context's interface, checked to be a name beoperf passes to tools; FactorError."""
    if not valid_ifname(ctx.interface):
        raise FactorError(f"{name}: no interface to change (got {quoted(ctx.interface)})")
    assert ctx.interface is not None
    return ctx.interface


def wait_until(ready: Callable[[], bool], timeout: float, step: float = 0.05) -> float:
    """Poll ``ready()`` until it is true or ``timeout`` passes; the seconds waited, or -1."""
    start = time.monotonic()
    while not ready():
        if time.monotonic() - start > timeout:
            return -1.0
        time.sleep(step)
    return time.monotonic() - start


WORD = re.compile(r"[a-z0-9_]{1,32}")
