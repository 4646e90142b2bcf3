"""The firewall: saved, flushed or loaded from a file, and restored identical apart from
comments and counters (nftables, and iptables through iptables-save/-restore).

Levels: ``flush`` (no rules at all), ``file:PATH`` (an ``nft -f`` ruleset, or an
``iptables-save`` file when its first statement is a ``*table`` line; read like a rollback
file: the user's own, written by nobody else, no symlink, at most ``LIMITS["ruleset"]``).

The snapshot is written to the study's private directory before any change, as files
``firewall.<n>.nft.rules`` (``flush ruleset`` and every nftables table that iptables does
not own) and ``firewall.<n>.iptables.rules`` / ``.ip6tables.rules`` (``iptables-save``
and ``ip6tables-save``, whatever their backend): the tables iptables-nft keeps in
nftables go through iptables-restore, because ``nft -f`` of what ``nft list`` shows of them
loses what nft cannot print (an iptables comment match, for one).  A restore loads them in
that order, reads the firewall back and compares it with the snapshot, normalised (no
comments, counters, handles or blank lines); a difference is a FactorError naming the
first line that differs.  Every file is checked against the sha256 recorded at the
snapshot before it is loaded.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil

from beoperf import errors, safeio
from beoperf.audit.base import quoted
from beoperf.audit.lock import private_run_dir
from beoperf.audit.parsers import parse_nft_ruleset
from beoperf.factors.base import Context, Factor, FactorError, Level, command
from beoperf.model.document import JsonObject, JsonValue
from beoperf.model.study_rollback import FILE_NAME, SHA256

FLUSH, FILE = "flush", "file:"
TOOLS = {"nft": "nft", "iptables": "iptables", "ip6tables": "ip6tables"}
SAVE = {"iptables": ["iptables-save"], "ip6tables": ["ip6tables-save"]}
RESTORE = {"iptables": "iptables-restore", "ip6tables": "ip6tables-restore"}
PARTS = ("nft", "iptables", "ip6tables")  # the order a restore loads them in
SAVED_NAME = re.compile(r"firewall\.\d{1,6}\.(nft|iptables|ip6tables)\.rules")
TABLE = re.compile(r"table (\S+) (\S+) \{")
COMMENT = re.compile(r'\s*comment "(?:[^"\\]|\\.)*"')
COUNTER = re.compile(r"counter packets \d+ bytes \d+")
HANDLE = re.compile(r"\s*# handle \d+$")
IPT_COUNTS = re.compile(r"\[\d+:\d+\]")


# --------------------------------------------------------------------------- texts


def nft_tables(text: str) -> dict[str, str]:
    """``nft list ruleset`` split into its tables: "family name" -> the table's text."""
    tables: dict[str, str] = {}
    current: list[str] | None = None
    key = ""
    for line in text.splitlines():
        found = TABLE.match(line)
        if found:
            current = [line]
            key = f"{found.group(1)} {found.group(2)}"
        elif current is not None:
            current.append(line)
            if line == "}":
                tables[key] = "\n".join(current) + "\n"
                current = None
    return tables


def normal_nft(text: str) -> list[str]:
    """nft text without comments, counter values, handles, '#' lines and blank lines."""
    out = []
    for line in text.splitlines():
        line = COUNTER.sub("counter", HANDLE.sub("", COMMENT.sub("", line)))
        line = " ".join(line.split())
        if line and not line.startswith("#"):
            out.append(line)
    return out


def normal_iptables(text: str) -> list[str]:
    """iptables-save text without '#' lines, counters and blank lines."""
    return [IPT_COUNTS.sub("[0:0]", " ".join(line.split())) for line in text.splitlines()
            if line.strip() and not line.lstrip().startswith("#")]


def ipt_tables(text: str) -> set[str]:
    """The tables an iptables-save text names."""
    return {line[1:].strip() for line in text.splitlines() if line.startswith("*")}


def first_difference(want: list[str], got: list[str]) -> str:
    """The first line that differs, for an error message."""
    for i, (a, b) in enumerate(zip(want, got, strict=False)):
        if a != b:
            return f"line {i + 1}: saved {quoted(a)}, now {quoted(b)}"
    if len(want) > len(got):
        return f"line {len(got) + 1}: saved {quoted(want[len(got)])}, now nothing"
    return f"line {len(want) + 1}: nothing saved, now {quoted(got[len(want)])}"


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def is_iptables_format(text: str) -> bool:
    """Whether a ruleset file is iptables-save's format (its first statement '*table')."""
    for line in text.splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            return line.startswith("*")
    return False


# --------------------------------------------------------------------------- files


def read_ruleset(path: str) -> str:
    """A ruleset file a level names, read like a rollback file (the user's own, writable by
    nobody else, not a symlink, at most LIMITS["ruleset"]); ValueError saying why not."""
    if not os.path.isabs(path):
        raise ValueError(f"{quoted(path)}: give the ruleset's absolute path")
    directory, base = os.path.split(path)
    try:
        dir_fd = os.open(directory or "/", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        data = safeio.read_bytes_at(dir_fd, base, safeio.LIMITS["ruleset"], "a ruleset",
                                    shown=path, private=True)
    except safeio.FileInputError as exc:
        raise ValueError(str(exc)) from None
    finally:
        os.close(dir_fd)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path}: binary data, not a ruleset") from None
    if any(line.strip().startswith("include") for line in text.splitlines()):
        raise ValueError(f"{path}: includes other files; give one self-contained ruleset")
    return text


class StudyDir:
    """The study's private directory (0700, ours), opened once, every file relative to it."""

    def __init__(self, ctx: Context) -> None:
        if not ctx.directory:
            raise FactorError("firewall: no study directory to save the ruleset in")
        self.path = ctx.directory
        self.fd = private_run_dir(ctx.directory, "the study directory", FactorError)

    def __enter__(self) -> StudyDir:
        return self

    def __exit__(self, *exc: object) -> None:
        os.close(self.fd)

    def free_number(self) -> int:
        taken = {int(m.group(0).split(".")[1]) for name in os.listdir(self.fd)
                 if (m := SAVED_NAME.fullmatch(name))}
        return max(taken, default=0) + 1

    def write(self, name: str, text: str) -> None:
        try:
            safeio.write_atomic_at(self.fd, name, text, overwrite=False, mode=0o600,
                                   shown=os.path.join(self.path, name))
        except OSError as exc:
            raise FactorError(f"firewall: cannot save {name} in {self.path}: "
                              f"{exc.strerror or exc}") from None

    def read(self, name: str, digest: str) -> str:
        """The file's text, checked against its sha256; FactorError otherwise."""
        shown = os.path.join(self.path, name)
        try:
            data = safeio.read_bytes_at(self.fd, name, safeio.LIMITS["ruleset"],
                                        "a saved ruleset", shown=shown, private=True)
        except safeio.FileInputError as exc:
            raise FactorError(f"firewall: {exc}") from None
        if hashlib.sha256(data).hexdigest() != digest:
            raise FactorError(f"firewall: {shown} is not the file saved (its sha256 differs)")
        return data.decode("utf-8", "replace")


# --------------------------------------------------------------------------- the factor


def have(tool: str) -> bool:
    return shutil.which(tool) is not None


class Firewall(Factor):
    name = "firewall"
    order = 5
    summary = "flush, or file:PATH (an nft ruleset or an iptables-save file)"

    def level(self, text: str) -> Level:
        text = text.strip()
        if text == FLUSH:
            return Level(FLUSH, FLUSH)
        if not text.startswith(FILE):
            raise errors.BadSpec(f"firewall: {quoted(text)} is not a level (flush, "
                                 "file:PATH or default)")
        path = os.path.abspath(text[len(FILE):])
        try:
            read_ruleset(path)
        except ValueError as exc:
            raise errors.BadSpec(f"firewall: {exc}") from None
        return Level(f"{FILE}{os.path.basename(path)}", FILE + path)

    # ------------------------------------------------------------------ reading

    def texts(self) -> dict[str, str]:
        """What the firewall holds now: "nft" (the tables iptables does not own),
        "iptables", "ip6tables" (save files); a tool that is not installed is absent."""
        got: dict[str, str] = {}
        for part in ("iptables", "ip6tables"):
            if have(SAVE[part][0]):
                got[part] = command(SAVE[part])
        if have("nft"):
            owned = {f"{'ip' if part == 'iptables' else 'ip6'} {table}"
                     for part in ("iptables", "ip6tables")
                     for table in ipt_tables(got.get(part, ""))}
            tables = nft_tables(command(["nft", "-s", "list", "ruleset"]))
            got["nft"] = "".join(text for key, text in tables.items() if key not in owned)
        if not got:
            raise FactorError("firewall: neither nft nor iptables-save is installed")
        return got

    def read(self, ctx: Context) -> JsonValue:
        texts = self.texts()
        return {"rules": self.count(texts), "sha256": sha256(repr(self.normal(texts)))}

    @staticmethod
    def normal(texts: dict[str, str]) -> dict[str, list[str]]:
        return {part: normal_nft(text) if part == "nft" else normal_iptables(text)
                for part, text in texts.items()}

    @staticmethod
    def count(texts: dict[str, str]) -> int:
        rules = sum(1 for part in ("iptables", "ip6tables")
                    for line in texts.get(part, "").splitlines() if line.startswith("-A "))
        try:
            return rules + sum(parse_nft_ruleset(texts.get("nft", "")).values())
        except ValueError:
            return rules

    # ------------------------------------------------------------------ snapshot

    def snapshot(self, ctx: Context) -> JsonObject:
        texts = self.texts()
        files: dict[str, JsonValue] = {}
        with StudyDir(ctx) as where:
            n = where.free_number()
            for part, text in texts.items():
                body = f"flush ruleset\n{text}" if part == "nft" else text
                name = f"firewall.{n}.{part}.rules"
                where.write(name, body)
                files[part] = {"name": name, "sha256": sha256(body)}
        return {"files": files, "rules": self.count(texts)}

    def saved_files(self, saved: JsonObject) -> dict[str, tuple[str, str]]:
        """part -> (file name, sha256) of a snapshot, checked; FactorError naming the bad."""
        files = saved.get("files")
        if set(saved) - {"files", "rules"} or not isinstance(files, dict) or not files:
            raise FactorError("firewall: a snapshot holds 'files' and 'rules' only")
        out = {}
        for part, entry in files.items():
            name = entry.get("name") if isinstance(entry, dict) else None
            digest = entry.get("sha256") if isinstance(entry, dict) else None
            if part not in PARTS or not isinstance(name, str) or not isinstance(digest, str):
                raise FactorError(f"firewall: saved {quoted(part)} is not a saved ruleset")
            if not SAVED_NAME.fullmatch(name) or not name.endswith(f".{part}.rules") \
                    or not FILE_NAME.fullmatch(name):
                raise FactorError(f"firewall: {quoted(name)} is not a file the firewall "
                                  "saves in the study directory")
            if not SHA256.fullmatch(digest):
                raise FactorError(f"firewall: the sha256 of {name} is not 64 hex digits")
            out[part] = (name, digest)
        return out

    def check_saved(self, saved: JsonObject) -> None:
        self.saved_files(saved)

    def files(self, saved: JsonObject) -> list[JsonObject]:
        return [{"name": name, "sha256": digest}
                for name, digest in self.saved_files(saved).values()]

    # ------------------------------------------------------------------ apply, restore

    def load(self, part: str, path: str) -> None:
        """Load a ruleset file: nft -f, or iptables-restore / ip6tables-restore."""
        command(["nft", "-f", path] if part == "nft" else [RESTORE[part], path])

    def apply(self, ctx: Context, level: Level) -> JsonObject:
        if level.value is None:
            raise FactorError("firewall: the default level is restored, not applied")
        if level.value == FLUSH:
            self.flush(ctx)
        elif level.value.startswith(FILE):
            self.load_file(ctx, level.value[len(FILE):])
        else:
            raise FactorError(f"firewall: {quoted(level.value)} is not a level")
        return {"read_back": self.read(ctx)}

    def flush(self, ctx: Context) -> None:
        """No rules: nft's whole ruleset flushed (iptables-nft's tables with it); with
        the legacy backend, every table iptables-save shows emptied too."""
        with StudyDir(ctx) as where:
            name = f"firewall.flush.{os.getpid()}.nft"
            where.write(name, "flush ruleset\n")
            try:
                if have("nft"):
                    self.load("nft", os.path.join(where.path, name))
            finally:
                os.unlink(name, dir_fd=where.fd)
        for part in ("iptables", "ip6tables"):
            if have(SAVE[part][0]) and self.legacy(part):
                self.empty_legacy(ctx, part)

    @staticmethod
    def legacy(part: str) -> bool:
        return "(legacy)" in command([TOOLS[part], "-V"])

    def empty_legacy(self, ctx: Context, part: str) -> None:
        """Every table of a legacy iptables emptied: iptables-restore of its chains with
        the policy ACCEPT and no rules."""
        text = command(SAVE[part])
        lines = []
        for line in text.splitlines():
            if line.startswith(("*", "COMMIT")):
                lines.append(line)
            elif line.startswith(":") and line.split()[1] != "-":
                lines.append(f"{line.split()[0]} ACCEPT [0:0]")
        self.load_text(ctx, part, "\n".join(lines) + "\n")

    def load_text(self, ctx: Context, part: str, text: str) -> None:
        with StudyDir(ctx) as where:
            name = f"firewall.load.{os.getpid()}.{part}"
            where.write(name, text)
            try:
                self.load(part, os.path.join(where.path, name))
            finally:
                os.unlink(name, dir_fd=where.fd)

    def load_file(self, ctx: Context, path: str) -> None:
        try:
            text = read_ruleset(path)
        except ValueError as exc:
            raise FactorError(f"firewall: {exc}") from None
        if is_iptables_format(text):
            self.load_text(ctx, "iptables", text)
        else:
            self.load_text(ctx, "nft", f"flush ruleset\n{text}")

    def restore(self, ctx: Context, saved: JsonObject) -> None:
        files = self.saved_files(saved)
        texts: dict[str, str] = {}
        with StudyDir(ctx) as where:
            for part in PARTS:
                if part in files:
                    name, digest = files[part]
                    texts[part] = where.read(name, digest)
            for part in PARTS:
                if part in texts:
                    self.load(part, os.path.join(where.path, files[part][0]))
        want = self.normal({p: t.removeprefix("flush ruleset\n") for p, t in texts.items()})
        got = self.normal({p: t for p, t in self.texts().items() if p in texts})
        for part in PARTS:
            if want.get(part) != got.get(part):
                raise FactorError(f"firewall: the {part} ruleset restored differs from the "
                                  f"one saved: {first_difference(want[part], got[part])}")

    def persist(self, level: Level) -> tuple[str, str] | None:
        if level.value is None:
            return None
        return ("beoperf-firewall.txt", f"firewall level {level.label}: make it permanent "
                "with your distribution's firewall service (nftables.service's "
                "/etc/nftables.conf, or iptables-persistent), after review\n")
