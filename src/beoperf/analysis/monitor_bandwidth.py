"""The monitor report's bandwidth: what the large probes say, and what they cannot say.

Per cycle the large probe's extra time over the small probes' median RTT gives
B = 2 x 8 x (n_large - n_small) / extra time (t = alpha + beta x n; the echo carries the
payload both ways).  Two things make such a figure meaningless, and this module finds
them so that the report says why instead of printing it:

* **Resolution.**  The extra time must stand clear of the timing noise of the small
  probes themselves: at least ``RESOLUTION_FACTOR`` x the larger of their RTT IQR (in
  the event windows, so a level shift or a congested hour does not inflate it) and the
  noise floor (the probing host's own noise, `model.monitor.NOISE_FLOOR_US`).  Below
  that, the probes only show that the path is faster than 2 x 8 x (n_large - n_small) /
  (RESOLUTION_FACTOR x noise): a lower bound, never a figure.
* **The link speed** (``--link-speed``, recorded in the run's config).  An estimate
  above it is not a bandwidth: a token-bucket shaper lets a probe smaller than its burst
  through at line rate (the issue's 10 Mbit/s tbf link gave 4,022 Mbit/s with 20 KB
  probes), or the probes took a faster path.  Such estimates are counted, and left out
  of the median.

A period's figure (a day, a week, the whole range) is the median of its cycles' estimates
when most of them are resolved and within the link; when most are above the link it is
"above link"; when most are within the noise it is "> lower bound".  The plotted series
show estimates only of days whose bandwidth is a figure.  When the estimates exceed the
link, their extra time tells how much of each probe the shaper's burst let through, and
so which probe size would measure the shaped rate.  Everything is a numpy array indexed
by cycle, as in `monitor_cycles.py`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from beoperf import units
from beoperf.analysis import monitor_events as events
from beoperf.analysis.monitor_cycles import Context, num, per_run
from beoperf.model.monitor import Bandwidth, Period

RESOLUTION_FACTOR = 2.0  # the extra time must be this many noise widths
MIN_NOISE_US = events.MIN_IQR_US  # the clock's resolution: no noise is taken as smaller
MAX_DATAGRAM, MAX_TCP = 65507, 1 << 20  # the largest probes (monitor.schedule.MAX_SIZE)
IPV4_HEADER, IPV6_HEADER, TCP_HEADER = 20, 40, 32  # as monitor.schedule counts them
ETHERNET_HEADER = 14  # what tc and a NIC's shaper count beyond the IP packet
BELOW_LINK_MARGIN = 1.25  # a suggested probe size is this much above the least one


def link_of_run(run: dict) -> float | None:
    """The link speed (bit/s) a run was started with: its config's ``link_bps`` or, for a
    run recorded before beoperf stored it there, its command line's --link-speed."""
    config = run.get("config") or {}
    value = config.get("link_bps")
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value) if math.isfinite(value) and value > 0 else None
    argv = config.get("argv")
    if not isinstance(argv, list):
        return None
    for i, arg in enumerate(argv):
        text = None
        if arg == "--link-speed" and i + 1 < len(argv):
            text = argv[i + 1]
        elif isinstance(arg, str) and arg.startswith("--link-speed="):
            text = arg.partition("=")[2]
        if isinstance(text, str):
            try:
                return units.parse_rate(text)
            except ValueError:
                return None
    return None


@dataclass(frozen=True)
class CycleBandwidth:
    """Per cycle: the estimate and how far it can be trusted (NaN/False: no pair)."""

    extra_us: np.ndarray  # large probe's median RTT - the small probes' median RTT, µs
    extra_bits: np.ndarray  # 8 x (n_large - n_small), 0 without a large probe
    bps: np.ndarray  # the estimate, bit/s (NaN: no pair, or the large probe not slower)
    noise_us: np.ndarray  # the small probes' timing noise around this cycle, µs
    ceiling: np.ndarray  # the fastest rate the probes can resolve here, bit/s
    link: np.ndarray  # the run's --link-speed, bit/s (NaN: not given)
    pair: np.ndarray  # an answered large probe and an answered small one
    above: np.ndarray  # faster than the link, which the probes could have resolved
    unresolved: np.ndarray  # extra time within the noise (and not above the link)

    @property
    def kept(self) -> np.ndarray:
        """Cycles whose estimate may enter a median (not above the link)."""
        return self.pair & ~self.above


def cycle_noise_us(cycles: np.ndarray, windows: events.Windows, n_cycles: int,
                   floor_us: float) -> np.ndarray:
    """Each cycle's timing noise: the small probes' RTT IQR in its event window (cycles
    at `cycles` of the analysed sequence), at least `floor_us` and the clock's 1 µs."""
    floor = max(floor_us, MIN_NOISE_US)
    noise = np.full(n_cycles, floor)
    if windows.count and cycles.size:
        window = np.minimum(np.arange(cycles.size) // windows.width, windows.count - 1)
        iqr = np.nan_to_num(windows.iqr, nan=0.0)
        noise[cycles] = np.maximum(iqr[window], floor)
    return noise


def per_cycle(ctx: Context, extra_bits: np.ndarray, noise_us: np.ndarray,
              runs: list[dict], link_bps: float | None = None) -> CycleBandwidth:
    """The estimate of every cycle and its classification (see the module's text);
    `link_bps`, when given, is the link speed of every run (else each run's own)."""
    extra_us = ctx.large_us - ctx.small_us
    pair = np.isfinite(extra_us) & (extra_bits > 0)
    with np.errstate(invalid="ignore", divide="ignore"):
        bps = np.where(pair & (extra_us > 0), 2.0 * extra_bits / (extra_us * 1e-6), np.nan)
        ceiling = np.where(pair, 2.0 * extra_bits / (RESOLUTION_FACTOR * noise_us * 1e-6),
                           np.nan)
    links = {r["id"]: link_bps or link_of_run(r) for r in runs}
    heads = ctx.c.start[:-1]
    link = per_run(ctx.p.run[heads], {k: np.nan if v is None else v for k, v in links.items()})
    speed = np.where(extra_us > 0, bps, np.inf)  # not slower: as if infinitely fast
    with np.errstate(invalid="ignore"):
        above = pair & (ceiling > link) & (speed > link)  # NaN link: never
        unresolved = pair & ~above & ~(extra_us >= RESOLUTION_FACTOR * noise_us)
    return CycleBandwidth(extra_us, extra_bits, bps, noise_us, ceiling, link, pair, above,
                          unresolved)


# --- periods -------------------------------------------------------------------------


@dataclass(frozen=True)
class Periods:
    """The bandwidth of each period (arrays, one entry per period)."""

    median: np.ndarray  # of the kept estimates, bit/s
    count: np.ndarray  # kept estimates (the large probe slower), in the median
    cycles: np.ndarray  # cycles with a pair
    above: np.ndarray  # of which above the link
    unresolved: np.ndarray  # of which within the noise
    resolvable: np.ndarray  # median ceiling of the kept cycles, bit/s
    link: np.ndarray  # the largest --link-speed of the period's cycles (NaN: none)
    status: list[str]

    def item(self, i: int) -> Bandwidth:
        """Period i as the document's "bandwidth_bps" (the median only when a figure)."""
        figure = self.status[i] == "figure"
        return Bandwidth(int(self.count[i]), num(self.median[i], 0) if figure else None,
                         self.status[i], int(self.cycles[i]), int(self.above[i]),
                         int(self.unresolved[i]), num(self.resolvable[i], 0),
                         num(self.link[i], 0))


def _status(cycles: int, above: int, unresolved: int) -> str:
    if cycles == 0:
        return "none"
    if 2 * above > cycles:
        return "above_link"
    if 2 * unresolved > cycles - above:
        return "lower_bound"
    return "figure"


def periods(bw: CycleBandwidth, groups: np.ndarray, n: int) -> Periods:
    """The bandwidth of the periods 0..n-1 (`groups`: each cycle's period)."""
    kept = bw.kept
    median, count = events.grouped_quantiles(groups, np.where(kept, bw.bps, np.nan), (0.5,), n)
    resolvable, _ = events.grouped_quantiles(groups, np.where(kept, bw.ceiling, np.nan),
                                             (0.5,), n)
    cycles = np.bincount(groups, weights=bw.pair, minlength=n)
    above = np.bincount(groups, weights=bw.above, minlength=n)
    unresolved = np.bincount(groups, weights=bw.unresolved, minlength=n)
    link = np.full(n, np.nan)
    known = bw.pair & np.isfinite(bw.link)
    np.fmax.at(link, groups[known], bw.link[known])
    status = [_status(int(c), int(a), int(u))
              for c, a, u in zip(cycles.tolist(), above.tolist(), unresolved.tolist(),
                                 strict=True)]
    return Periods(median[:, 0], count, cycles.astype(np.int64), above.astype(np.int64),
                   unresolved.astype(np.int64), resolvable[:, 0], link, status)


def shown_bps(bw: CycleBandwidth, groups: np.ndarray, n: int) -> np.ndarray:
    """Per cycle, the estimate as a plot may show it: NaN above the link, and in every
    period (`groups`: the days) whose bandwidth is not a figure.  (Not per plotted bin: a
    majority of a few cycles is the noise's to give.)"""
    figure = np.array([s == "figure" for s in periods(bw, groups, n).status], dtype=bool)
    return np.where(bw.kept & figure[groups], bw.bps, np.nan)


# --- words -----------------------------------------------------------------------------


def _mbit(bps: float) -> str:
    return f"{bps / 1e6:,.2f} Mbit/s"


def _bytes(n: float) -> str:
    return f"{n:,.0f} B"


def payload_share(run: dict) -> float:
    """Payload bytes per byte a shaper counts (the Ethernet frame) in the full frames of a
    large probe of the run: TCP segments carry IP and TCP headers, ICMP and UDP fragments
    the IP header (the datagram's own header once)."""
    mtu = (run.get("config") or {}).get("path_mtu")
    mtu = mtu if isinstance(mtu, int) and not isinstance(mtu, bool) and mtu >= 1280 else 1500
    ip = IPV6_HEADER if ":" in str(run.get("address") or "") else IPV4_HEADER
    l4 = TCP_HEADER if run.get("transport") == "tcp" else 0
    return (mtu - ip - l4) / (mtu + ETHERNET_HEADER)


def _probe_size(burst: float, run: dict) -> tuple[float | None, str]:
    """The probe size whose estimate falls within the link (with a margin), and how to
    send it: the estimate of n bytes is about the goodput x n / (n - burst), above the
    link until n = burst / (1 - payload share); ICMP and UDP stop at 65,507 bytes."""
    transport = run.get("transport")
    size = BELOW_LINK_MARGIN * burst / (1.0 - payload_share(run))
    if transport == "tcp" or size <= MAX_DATAGRAM:
        how = ""
    else:
        size = BELOW_LINK_MARGIN * burst / (1.0 - payload_share(run | {"transport": "tcp"}))
        how = f" with --transport tcp (ICMP and UDP probes carry at most {_bytes(MAX_DATAGRAM)})"
    if size > MAX_TCP:
        least = size / BELOW_LINK_MARGIN
        return (MAX_TCP if least < MAX_TCP else None), how
    return size, how


def _advice_above(bw: CycleBandwidth, sel: np.ndarray, link: float, run: dict) -> str:
    """What the extra time of the cycles `sel` says about a shaper's burst, and the probe
    size that would measure the shaped rate."""
    extra_bytes = float(np.median(bw.extra_bits[sel])) / 8.0
    # the least delayed probe: a late ACK, a drop or a busy host only add time, and each
    # would shrink the burst found, and so the probe size suggested
    extra_s = max(0.0, float(np.min(bw.extra_us[sel])) * 1e-6)
    share = payload_share(run)
    shaped = extra_s * link / 16.0 * share  # payload bytes one way at the link's rate
    if shaped < 0.1 * extra_bytes:
        seen = (f"the large probe (+{_bytes(extra_bytes)} over the small ones) passed "
                "within the burst, so the burst is at least that")
        burst = extra_bytes
    else:
        burst = extra_bytes - shaped
        seen = (f"about {_bytes(burst)} of each large probe's payload passed at line rate "
                "(the burst), the rest at the link's rate")
    size, how = _probe_size(burst, run)
    rule = (f"{seen}. A probe of n bytes gives about the goodput (the rate x {share:.3f}, "
            "payload per byte on the wire) x n / (n - burst): above the link until n is "
            "burst / (1 - that share)")
    if size is None:
        return (f"{rule}; no probe the monitor sends is that large ({_bytes(MAX_TCP)} with "
                "--transport tcp): with this burst the estimate stays above the link")
    return (f"{rule}. --step SIZE:1:SPACING with SIZE of {_bytes(size)} or more{how} gives "
            "an estimate between the goodput and the link's rate; a --period that keeps "
            "it within the budget")


def _above_warning(bw: CycleBandwidth, whole: Periods, run: dict) -> str:
    """How many estimates exceed the link, as what, why, and what to change."""
    link = float(np.max(bw.link[bw.above]))  # runs may differ: the fastest link exceeded
    sel = bw.above & (bw.link == link)
    seen = float(np.median(np.where(bw.extra_us[sel] > 0, bw.bps[sel], np.inf)))
    as_if = f"as if at {_mbit(seen)}" if math.isfinite(seen) else "no slower than the small ones"
    left = "no figure is shown" if whole.status[0] == "above_link" else "left out of the median"
    return (f"bandwidth: {whole.above[0]} of {whole.cycles[0]} cycles' large probes came back "
            f"{as_if}, above the {units.format_rate(link)} link (--link-speed): probes "
            f"pass within a shaper's burst or take a faster path; not a bandwidth ({left}); "
            + _advice_above(bw, sel, link, run))


def _lower_bound_warning(bw: CycleBandwidth, whole: Periods) -> str:
    """The lower bound, the extra time and the noise it is lost in."""
    kept = bw.kept
    extra = float(np.median(bw.extra_us[kept]))
    noise = float(np.median(bw.noise_us[kept]))
    return (f"bandwidth: > {_mbit(whole.resolvable[0])} is a lower bound, not a figure: the "
            f"large probe's extra time (median {extra:,.0f} µs) is within the small probes' "
            f"noise in {whole.unresolved[0]} of {whole.cycles[0] - whole.above[0]} cycles "
            f"(noise {noise:,.0f} µs: their RTT IQR or the noise floor; the extra time must "
            f"be {RESOLUTION_FACTOR:g} x that); a larger probe (--step SIZE:1:SPACING) takes "
            "longer and resolves a faster link")


def warnings(bw: CycleBandwidth, days: list[Period], run: dict) -> list[str]:
    """Why the bandwidth is not a figure, what the probes did see, and what to change."""
    whole = periods(bw, np.zeros(bw.pair.size, dtype=np.int64), 1)
    out = []
    if whole.above[0]:
        out.append(_above_warning(bw, whole, run))
    if whole.status[0] == "lower_bound":
        out.append(_lower_bound_warning(bw, whole))
    flagged = [d.period for d in days if d.bandwidth_bps.status in
               ("lower_bound", "above_link")]
    if flagged and whole.status[0] == "figure":
        out.append(f"bandwidth: on {len(flagged)} day(s) ({', '.join(flagged[:5])}"
                   f"{', ...' if len(flagged) > 5 else ''}) most estimates are above the "
                   "link or within the noise: those days show no figure")
    return out


def method(noise_floor_us: float) -> str:
    """The bandwidth rule in words, with this report's noise floor."""
    k = f"{RESOLUTION_FACTOR:g}"
    return (
        "Per cycle, with t = alpha + beta x n and the small probes' median RTT of the cycle "
        "as alpha: B = 2 x 8 x (n_large - n_small) / (RTT_large - median RTT_small) bit/s, "
        "n in payload bytes (the echo carries the payload both ways; headers are not "
        "counted). Cycles where the large probe was not slower give no estimate. Tables "
        "show the median. It is a figure only where the probes resolve it: the large "
        f"probe's extra time must be at least {k} x the small probes' noise (their RTT IQR "
        f"in the event window, at least the noise floor of {noise_floor_us:g} µs); where it "
        "is not, in most of a period's cycles, the table shows '> X', X = 2 x 8 x (n_large "
        f"- n_small) / ({k} x the noise), a lower bound. A token-bucket shaper lets a probe "
        "smaller than its burst through at line rate: such probes measure the line, not "
        "the shaped rate, and one of n bytes through full buckets of b bytes (one each "
        "way) gives about the goodput x n / (n - b), above the link's rate until the "
        "headers' share of n outweighs b. With --link-speed, an estimate above the "
        "link that the probes could resolve is not a bandwidth: it is left out of the "
        "median, and a period where most estimates are shows 'above link'.")
