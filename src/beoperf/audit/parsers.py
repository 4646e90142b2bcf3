"""Pure parsers of the command output the latency audit reads (no subprocess calls here).

Every parser takes the text a command printed and returns plain dicts.  Odd or missing
fields become ``None``; an ethtool "Operation not supported" style message yields the
parser's keys all set to ``None`` (or an empty dict).  ``ValueError`` is raised only when
the text is clearly the output of something else.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any, TypedDict

__all__ = [
    "parse_conntrack_count",
    "parse_ethtool_coalesce",
    "parse_ethtool_driver",
    "parse_ethtool_features",
    "parse_ethtool_pause",
    "parse_ethtool_rings",
    "parse_ip_link",
    "parse_iptables_save",
    "parse_nft_ruleset",
]

Value = bool | int | str | None

_NONE_WORDS = {"", "n/a", "na", "none", "unknown", "-"}
_TRUE_WORDS = {"yes", "on", "true", "enabled"}
_FALSE_WORDS = {"no", "off", "false", "disabled"}

# "Cannot get device pause settings: Operation not supported", "netlink error: ...",
# "No data available", "Cannot get driver information: No such device", ...
_ERROR_RE = re.compile(
    r"^(cannot\s|netlink error|no data available|no such device|operation not supported"
    r"|ethtool:|.*:\s*(operation not supported|no such device|no data available"
    r"|invalid argument|permission denied|operation not permitted))",
    re.IGNORECASE,
)
# "Ring parameters for eth0:", "Features for lo:", "Settings for eth0:" ...
_HEADER_RE = re.compile(r"^([A-Za-z][A-Za-z ]*?) (?:parameters |settings )?for \S+:\s*$")
_FIELD_RE = re.compile(r"^\s*([A-Za-z][\w .()/-]*?)\s*:\s*(.*?)\s*$")
_NOCOLON_RE = re.compile(r"^\s*([a-z][a-z0-9]*(?:-[a-z0-9]+)+)\s+(\d+|n/a)\s*$")
_RXTX_RE = re.compile(r"^\s*(.*?)\s*RX:\s*(\S+)\s+TX:\s*(\S+)\s*$")
_INT_RE = re.compile(r"^[+-]?\d+$")


def _snake(name: str) -> str:
    """``"Firmware-Version"``/``"RX Buf Len"`` -> ``"firmware_version"``/``"rx_buf_len"``."""
    return re.sub(r"[^a-z0-9]+", "_", name.strip().lower()).strip("_")


def _value(raw: str) -> Value:
    """Typed value of a field: bool for yes/no/on/off, int for digits, None for n/a."""
    text = raw.strip()
    low = text.lower()
    if low in _NONE_WORDS:
        return None
    if low in _TRUE_WORDS:
        return True
    if low in _FALSE_WORDS:
        return False
    if _INT_RE.match(text):
        return int(text)
    return text


def _flag(raw: str) -> bool | None:
    """on/off -> bool, anything else -> None."""
    value = _value(raw)
    return value if isinstance(value, bool) else None


def _lines(text: Any) -> list[str]:
    """Non-blank lines of ``text`` (non-strings count as no output)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not isinstance(text, str):
        return []
    return [line.rstrip() for line in text.splitlines() if line.strip()]


def _is_error(line: str) -> bool:
    """True for ethtool/kernel error messages ("... Operation not supported")."""
    return bool(_ERROR_RE.match(line.strip()))


def _check_header(line: str, expected: tuple[str, ...], command: str) -> bool:
    """True if ``line`` is a header; ValueError if it is the header of another command."""
    match = _HEADER_RE.match(line.strip())
    if not match:
        return False
    if match.group(1).strip().lower() not in expected:
        raise ValueError(f"not {command} output: {line.strip()!r}")
    return True


def _reject(lines: list[str], matched: int, command: str) -> None:
    """ValueError when the text had content but nothing of ``command`` in it."""
    if matched == 0 and lines and not any(_is_error(line) for line in lines):
        raise ValueError(f"not {command} output: {lines[0].strip()[:80]!r}")


def _key_values(
    text: Any, expected: tuple[str, ...], known: tuple[str, ...], command: str
) -> list[tuple[str, str]]:
    """(name, raw value) pairs of "name: value" lines, after header and error checks.

    The text must hold at least one field whose snake_case name is in ``known``.
    """
    lines = _lines(text)
    pairs: list[tuple[str, str]] = []
    for line in lines:
        if _is_error(line) or _check_header(line, expected, command):
            continue
        match = _FIELD_RE.match(line)
        if match:
            pairs.append((match.group(1), match.group(2)))
    _reject(lines, sum(_snake(name) in known for name, _ in pairs), command)
    return pairs


# --------------------------------------------------------------------- ethtool -i

_DRIVER_KEYS = (
    "driver",
    "version",
    "firmware_version",
    "expansion_rom_version",
    "bus_info",
    "supports_statistics",
    "supports_test",
    "supports_eeprom_access",
    "supports_register_dump",
    "supports_priv_flags",
)


def parse_ethtool_driver(text: str) -> dict[str, Value]:
    """``ethtool -i IF`` -> {"driver", "version", "firmware_version", "bus_info", ...}.

    Keys are the field names in snake_case; yes/no -> bool; empty or N/A -> None.
    Free-text fields (driver, version, firmware, bus) stay strings.
    """
    pairs = _key_values(text, (), _DRIVER_KEYS, "ethtool -i")
    out: dict[str, Value] = dict.fromkeys(_DRIVER_KEYS)
    for name, raw in pairs:
        key = _snake(name)
        if not key:
            continue
        if key.startswith("supports_"):
            out[key] = _flag(raw)
        else:
            out[key] = None if raw.strip().lower() in _NONE_WORDS else raw.strip()
    return out


# --------------------------------------------------------------------- ethtool -c

_COALESCE_KEYS = (
    "adaptive_rx",
    "adaptive_tx",
    "rx_usecs",
    "rx_frames",
    "rx_usecs_irq",
    "rx_frames_irq",
    "tx_usecs",
    "tx_frames",
    "tx_usecs_irq",
    "tx_frames_irq",
)


def _coalesce_line(line: str) -> dict[str, Value]:
    """Fields of one ``ethtool -c`` line ({} if the line is not a field)."""
    pair = _RXTX_RE.match(line)
    if pair:  # "Adaptive RX: on  TX: off", "CQE mode RX: n/a  TX: n/a"
        prefix = _snake(pair.group(1))
        return {f"{prefix}_rx": _flag(pair.group(2)), f"{prefix}_tx": _flag(pair.group(3))}
    match = _FIELD_RE.match(line) or _NOCOLON_RE.match(line)  # "tx-aggr-time-usecs\t0"
    if not match or not _snake(match.group(1)):
        return {}
    value = _value(match.group(2))
    return {_snake(match.group(1)): value if not isinstance(value, str) else None}


def parse_ethtool_coalesce(text: str) -> dict[str, Value]:
    """``ethtool -c IF`` -> {"adaptive_rx": bool|None, "rx_usecs": int|None, ...}.

    Every "name: value" line becomes a snake_case key (ethtool's own spelling kept, e.g.
    "rx_frame_low"); "n/a" -> None; "X RX: a  TX: b" lines give "x_rx" and "x_tx".
    """
    lines = _lines(text)
    out: dict[str, Value] = dict.fromkeys(_COALESCE_KEYS)
    matched = 0
    for line in lines:
        if _is_error(line) or _check_header(line, ("coalesce",), "ethtool -c"):
            continue
        fields = _coalesce_line(line)
        matched += any(re.search(r"usecs|frame|adaptive|pkt_rate|sample", k) for k in fields)
        out.update(fields)
    _reject(lines, matched, "ethtool -c")
    return out


# --------------------------------------------------------------------- ethtool -g

_RING_KEYS = ("rx", "rx_mini", "rx_jumbo", "tx")


def _ring_value(raw: str) -> int | str | None:
    """Ring field value: int for digits, None for n/a, else the word ("on", "off", ...)."""
    text = raw.strip()
    if text.lower() in _NONE_WORDS:
        return None
    return int(text) if _INT_RE.match(text) else text


_RING_SECTIONS = {"pre-set maximums": "max", "current hardware settings": "current"}


def parse_ethtool_rings(text: str) -> dict[str, dict[str, int | str | None]]:
    """``ethtool -g IF`` -> {"max": {"rx", "rx_mini", "rx_jumbo", "tx", ...}, "current": {...}}.

    Values are int, str (words such as "on"/"off") or None (n/a); newer fields such as
    "RX Buf Len", "CQE Size", "TX Push", "TCP data split" are kept in snake_case.
    """
    lines = _lines(text)
    out: dict[str, dict[str, int | str | None]] = {
        "max": dict.fromkeys(_RING_KEYS),
        "current": dict.fromkeys(_RING_KEYS),
    }
    section: str | None = None
    matched = 0
    for line in lines:
        if _is_error(line) or _check_header(line, ("ring",), "ethtool -g"):
            continue
        match = _FIELD_RE.match(line)
        if not match:
            continue
        name = match.group(1).strip().lower()
        if name in _RING_SECTIONS and not match.group(2):
            section = _RING_SECTIONS[name]
            matched += 1
        elif section is not None and _snake(name):
            out[section][_snake(name)] = _ring_value(match.group(2))
    _reject(lines, matched, "ethtool -g")
    return out


# --------------------------------------------------------------------- ethtool -k

_FEATURE_RE = re.compile(r"^(\s*)([\w.-]+):\s+(\S+)(?:\s+\[(.*?)\])?\s*$")


class Feature(TypedDict):
    """One ``ethtool -k`` feature: on (None: unreadable), fixed, the requested state (of
    "[requested on|off]"), the feature it belongs to (None: a top-level one)."""

    on: bool | None
    fixed: bool
    requested: bool | None
    parent: str | None


def _feature(state: str, marker: str | None, parent: str | None) -> Feature:
    """One feature's record from its state word and optional "[...]" marker."""
    marker = (marker or "").strip().lower()
    requested: bool | None = None
    if marker.startswith("requested"):
        requested = _flag(marker.split()[-1])
    return {
        "on": {"on": True, "off": False}.get(state.lower()),
        "fixed": marker == "fixed",
        "requested": requested,
        "parent": parent,
    }


def parse_ethtool_features(text: str) -> dict[str, Feature]:
    """``ethtool -k IF`` -> {"tcp-segmentation-offload": {"on", "fixed", "requested", "parent"}}.

    ``on`` is bool or None; ``fixed`` is True for "[fixed]"; ``requested`` is the state in
    "[requested on|off]" (else None); ``parent`` names the feature an indented
    sub-feature belongs to (None for top-level ones).  Feature names are kept verbatim.
    """
    lines = _lines(text)
    out: dict[str, Feature] = {}
    parent: str | None = None
    for line in lines:
        if _is_error(line) or _check_header(line, ("features", "offload"), "ethtool -k"):
            continue
        match = _FEATURE_RE.match(line)
        if not match:
            continue
        indent, name, state, marker = match.groups()
        out[name] = _feature(state, marker, parent if indent else None)
        if not indent:
            parent = name
    _reject(lines, sum(f["on"] is not None for f in out.values()), "ethtool -k")
    return out


# --------------------------------------------------------------------- ethtool -a


def parse_ethtool_pause(text: str) -> dict[str, bool | None]:
    """``ethtool -a IF`` -> {"autonegotiate", "rx", "tx"} as bool or None.

    Newer ethtool's "RX negotiated"/"TX negotiated" lines add "rx_negotiated" and
    "tx_negotiated"; "Operation not supported" gives all None.
    """
    out: dict[str, bool | None] = {"autonegotiate": None, "rx": None, "tx": None}
    pairs = _key_values(text, ("pause",), tuple(out), "ethtool -a")
    for name, raw in pairs:
        key = _snake(name)
        if key:
            out[key] = _flag(raw)
    return out


# --------------------------------------------------------------------- iptables-save

_IPT_CHAIN_RE = re.compile(r"^:(\S+)\s")
_IPT_RULE_RE = re.compile(r"^-[AI]\s+(\S+)")
_IPT_DECL_RE = re.compile(r"^-[NP]\s+(\S+)")


def _iptables_line(line: str, table: str, out: dict[str, dict[str, int]]) -> str | None:
    """Account one line; return the new table name, "" for an unknown line, None if known."""
    if line.startswith("*"):
        out.setdefault(line[1:].strip(), {})
        return line[1:].strip()
    match = _IPT_CHAIN_RE.match(line + " ") or _IPT_DECL_RE.match(line)
    if match:
        out.setdefault(table, {}).setdefault(match.group(1), 0)
        return None
    match = _IPT_RULE_RE.match(line)
    if match:
        chains = out.setdefault(table, {})
        chains[match.group(1)] = chains.get(match.group(1), 0) + 1
        return None
    return None if line.startswith("#") or line == "COMMIT" else ""


def parse_iptables_save(text: str) -> dict[str, dict[str, int]]:
    """``iptables-save``/``ip6tables-save`` (or ``iptables -S``) -> {table: {chain: rules}}.

    Chains declared by ":CHAIN" (or -N/-P) lines count 0 until "-A CHAIN" lines are seen;
    rules before any "*table" line go to "filter".
    """
    lines = [line.strip() for line in _lines(text)]
    out: dict[str, dict[str, int]] = {}
    table = "filter"
    unknown = 0
    for line in lines:
        result = _iptables_line(line, table, out)
        if result == "":
            unknown += 1
        elif result is not None:
            table = result
    if lines and not out and unknown and not any(_is_error(line) for line in lines):
        raise ValueError(f"not iptables-save output: {lines[0][:80]!r}")
    return out


# --------------------------------------------------------------------- nft


def _nft_key(obj: Mapping[str, object], chain_field: str) -> str | None:
    """The "FAMILY TABLE CHAIN" key of a chain or rule object (None if fields are missing)."""
    parts = [obj.get("family"), obj.get("table"), obj.get(chain_field)]
    texts = [part for part in parts if isinstance(part, str) and part]
    return " ".join(texts) if len(texts) == len(parts) else None


def _parse_nft_json(data: Any) -> dict[str, int]:
    """Rule counts from the decoded ``nft -j list ruleset`` document."""
    if not isinstance(data, dict) or not isinstance(data.get("nftables"), list):
        raise ValueError("not nft -j output: no 'nftables' list")
    out: dict[str, int] = {}
    for item in data["nftables"]:
        if not isinstance(item, dict):
            continue
        if isinstance(item.get("chain"), dict):
            key = _nft_key(item["chain"], "name")
            if key:
                out.setdefault(key, 0)
        elif isinstance(item.get("rule"), dict):
            key = _nft_key(item["rule"], "chain")
            if key:
                out[key] = out.get(key, 0) + 1
    return out


_NFT_NAME = r'("[^"]*"|[^\s"{]+)'
_NFT_TABLE_RE = re.compile(rf"^table\s+(?:([a-z0-9]+)\s+)?{_NFT_NAME}\s*\{{$")
_NFT_CHAIN_RE = re.compile(rf"^chain\s+{_NFT_NAME}\s*\{{$")
_NFT_NOT_RULE_RE = re.compile(r"^(type\s|policy\s|comment\s|devices\s*=|#|\})")


class _NftText:
    """State machine counting rule lines inside ``chain NAME { ... }`` blocks."""

    def __init__(self) -> None:
        self.out: dict[str, int] = {}
        self.depth = 0
        self.table: str | None = None
        self.chain: str | None = None
        self.chain_depth = 0

    def feed(self, line: str) -> None:
        """Account one stripped line."""
        table = _NFT_TABLE_RE.match(line) if self.depth == 0 else None
        chain = _NFT_CHAIN_RE.match(line) if self.table and self.depth == 1 else None
        if table:
            self.table = f"{table.group(1) or 'ip'} {unquote(table.group(2))}"
        elif chain:
            self.chain = f"{self.table} {unquote(chain.group(1))}"
            self.chain_depth = self.depth + 1
            self.out.setdefault(self.chain, 0)
        elif self.chain and self.depth == self.chain_depth and not _NFT_NOT_RULE_RE.match(line):
            self.out[self.chain] += 1
        self.depth = max(0, self.depth + line.count("{") - line.count("}"))
        if self.chain and self.depth < self.chain_depth:
            self.chain = None
        if self.depth == 0:
            self.table = None


def unquote(name: str) -> str:
    """Strip the double quotes nft puts around some identifiers."""
    return name[1:-1] if len(name) >= 2 and name[0] == name[-1] == '"' else name


def parse_nft_ruleset(text: str) -> dict[str, int]:
    """``nft -j list ruleset`` (JSON) or ``nft list ruleset`` (text) -> {"FAMILY TABLE CHAIN": n}.

    Chains without rules count 0.  In the text form, rule lines are the lines at chain level
    other than the "type ... hook ...", "policy", "comment" and "devices" statements.
    """
    lines = [line.strip() for line in _lines(text)]
    if not lines:
        return {}
    if lines[0].startswith(("{", "[")):
        try:
            data = json.loads("\n".join(lines))
        except (json.JSONDecodeError, RecursionError) as exc:
            raise ValueError(f"not nft -j output: {exc}") from exc
        return _parse_nft_json(data)
    state = _NftText()
    for line in lines:
        state.feed(line)
    if not state.out and not any(_NFT_TABLE_RE.match(line) for line in lines):
        if not any(_is_error(line) for line in lines):
            raise ValueError(f"not nft list ruleset output: {lines[0][:80]!r}")
    return state.out


# --------------------------------------------------------------------- conntrack


def parse_conntrack_count(text: str) -> int | None:
    """Content of /proc/sys/net/netfilter/nf_conntrack_count -> int (None if unreadable)."""
    lines = _lines(text)
    if not lines:
        return None
    word = lines[0].strip()
    if _INT_RE.match(word):
        value = int(word)
        return value if value >= 0 else None
    if _is_error(word) or "no such file" in word.lower():
        return None
    raise ValueError(f"not an nf_conntrack_count value: {word[:80]!r}")


MAX_MTU_VALUE = 1 << 20  # beyond any MTU a kernel takes (65536 for loopback)


def parse_ip_link(text: str) -> dict[str, int]:
    """``mtu``, ``min_mtu`` and ``max_mtu`` of ``ip -d -j link show dev IF`` (the driver's
    limits: sysfs has no file for them; 0 means the driver sets none).  A value that is
    absent or not an integer in range is left out; text that is not such JSON: ``{}``."""
    try:
        data = json.loads(text)
    except ValueError:
        return {}
    link = data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else {}
    out = {}
    for key in ("mtu", "min_mtu", "max_mtu"):
        value = link.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and \
                0 <= value <= MAX_MTU_VALUE:
            out[key] = value
    return out
