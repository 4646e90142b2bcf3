"""An application's communication time on a network, from the network's measured model.

The model of a network is the piecewise Hockney fit of `beoperf.analysis.curve`
(t(n) = alpha + beta * n per piece, the pieces split at the protocol thresholds; the
single fit when no threshold is found; none, and predict refuses the network with the
reason, when neither fit is physical: a latency <= 0 or an R^2 below 0.9), fitted
to the **mean** one-way time of each size of a ping-pong run: an application's time is
a sum over its messages, and a sum is count x mean, not count x median (a run's mean
sits above its median by its tail: 1-15% at small sizes on a shared machine).

Per message class of the profile (``model.profile``), with t(n) from the piece whose
range holds n (below the first piece: the first; above the last: the last, noted as
extrapolated):

* pingpong (each message waits for the one before): count x t(n);
* bidir (both ends send at once, a full-duplex link): count x t(n);
* stream (back to back, one way): t(n) + (count - 1) x n x beta_bw, beta_bw the per-byte
  cost of the bandwidth-bound (last) piece: the pipe stays full and one latency shows;
* concurrency c: c pairs at once share the link: (count / c) x alpha + count x n x beta
  (their latencies overlap, their bytes share the bandwidth).

**Interval.** Each piece's fit leaves residuals at the sizes it was fitted on: r =
measured / model - 1.  A class's interval is its time x (1 + min r) .. (1 + max r) of its
piece, and a network's interval the sum of its classes' (every class off in the same
direction at once: the model's own error, not a confidence interval; the run-to-run
noise of the link is not in it).

**Scaling** (``scaled``): the network of a measured result with its bottleneck's rate
changed from R_from to R_to (same path, same MTU, same hosts).  Only the time the
bottleneck takes to serialize the bytes changes: per wire byte 8 / R, and a payload byte
costs k = (MTU + 14) / MSS wire bytes (TCP segments in Ethernet frames, as a qdisc counts
them; from the run's interface MTU and socket MSS, k = 1 when it does not say).  A
piece's per-byte cost beta holds that wire cost and the hosts' own; its *wire fraction*
f = min(1, beta / (8 k / R_from)) is the share the link's rate explains.  Its beta gains
f x 8 k (1/R_to - 1/R_from), applied from the size n0 where the piece leaves the floor
(the model's time at its smallest size: bytes a shaper lets through without delay,
such as tbf's peak bucket of one frame, are free at any rate): alpha gains -that x n0.
The hosts' per-message and per-byte costs stay as measured.

**Claims.**  A class's prediction is *claimed* (what `beoperf replay` on the same kind of
link is expected to confirm to within the validation bound) when: its size lies within
the measured sizes; its pattern is pingpong or bidir at concurrency 1, or stream at a
size from the saturation point on (below it a stream's cost is the hosts' per-message
work, which a ping-pong model cannot separate from the latency); for a scaled network
also its piece was rate-bound (wire
fraction at least RATE_BOUND) or host-bound (at most HOST_BOUND, and the wire time of its
bytes at R_to at most WIRE_SHARE of its time): between the two the piece mixes the
shaper's and the hosts' costs in a way the rate alone does not predict; and a rate-bound
class is claimed up to SCALE_UP times the rate it was measured at (faster, the hosts'
own per-byte cost, hidden behind the slower link, may become the bottleneck: 50 ->
200 Mbit/s on the namespace links underestimated the large messages by 15-22%).  A given model
(``--model``) is not measured: nothing is claimed.  A network's prediction is claimed
when the claimed classes carry at least CLAIM_SHARE of its predicted time.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace

from beoperf import units
from beoperf.analysis.curve import Fit, analyze
from beoperf.model import jsonvalue, narrow
from beoperf.model.document import Document, DocumentError, JsonObject, JsonValue
from beoperf.model.pingpong import RunResult, SizeResult
from beoperf.model.prediction import PREDICTION
from beoperf.model.profile import Entry, Profile

RATE_BOUND = 0.9  # a piece whose wire fraction is >= 0.9 is rate-bound
HOST_BOUND = 0.1  # ... <= 0.1: host-bound
WIRE_SHARE = 0.1  # a host-bound class stays claimed while its wire time is <= 10%
SCALE_UP = 2.0  # a rate-bound class is claimed up to twice the rate it was measured at
CLAIM_SHARE = 0.9  # a network's prediction is claimed when claimed classes carry 90%
DOMINANT_SHARE = 0.8  # the sizes that dominate: the fewest classes carrying 80%
STATISTIC = "mean one-way time per message (a sum of messages is count x mean)"


class PredictError(ValueError):
    """A network or model that cannot be used for a prediction (one line)."""


@dataclass
class Piece:
    """t(n) = alpha_us + beta_us_per_byte x n from first_size; residual range lo..hi."""

    first_size: int
    last_size: int
    alpha_us: float
    beta_us_per_byte: float
    lo_rel: float = 0.0  # min of measured / model - 1 over the piece's sizes
    hi_rel: float = 0.0
    points: int = 0
    wire_fraction: float | None = None  # for a scaled network: f of the module docstring

    def time_us(self, n: float) -> float:
        return self.alpha_us + self.beta_us_per_byte * n

    @property
    def bandwidth_bps(self) -> float | None:
        return 8e6 / self.beta_us_per_byte if self.beta_us_per_byte > 0 else None

    @classmethod
    def from_dict(cls, o: JsonObject) -> Piece:
        num, integer = narrow.num_at, narrow.integer_at
        return cls(integer(o, "first_size"), integer(o, "last_size"), num(o, "alpha_us"),
                   num(o, "beta_us_per_byte"), num(o, "lo_rel"), num(o, "hi_rel"),
                   integer(o, "points"), narrow.opt_num_at(o, "wire_fraction"))


@dataclass
class NetModel:
    """A network as predict uses it."""

    name: str
    source: str
    method: str  # measured | given | scaled
    pieces: list[Piece]
    measured: tuple[int, int] | None = None  # the sizes fitted on
    saturation_size: int | None = None
    floor_us: float | None = None  # the model's time at its smallest measured size
    wire_factor: float | None = None  # wire bytes per payload byte: (MTU + 14) / MSS
    scale: dict[str, float] | None = None  # {"from_bps", "to_bps"}
    notes: list[str] = field(default_factory=list)
    collapses: list[tuple[int, int]] = field(default_factory=list)

    def piece_of(self, n: int) -> int:
        """Index of the piece whose range holds n (pieces are in size order)."""
        k = 0
        for i, p in enumerate(self.pieces):
            if p.first_size <= n:
                k = i
        return k

    def to_dict(self) -> JsonObject:
        d = asdict(self)
        d["measured"] = list(self.measured) if self.measured else None
        d["collapses"] = [list(c) for c in self.collapses]
        return d

    @classmethod
    def from_dict(cls, o: JsonObject) -> NetModel:
        """A model as a prediction stores it, every value narrowed (DocumentError)."""
        measured = _pair(o["measured"], "measured") if o.get("measured") is not None else None
        scale = narrow.opt_obj_at(o, "scale")
        return cls(narrow.text_at(o, "name"), narrow.text_at(o, "source"),
                   narrow.text_at(o, "method"),
                   [Piece.from_dict(p) for p in narrow.objects_or_empty(o, "pieces")], measured,
                   narrow.opt_int_at(o, "saturation_size"),
                   narrow.opt_num_at(o, "floor_us"), narrow.opt_num_at(o, "wire_factor"),
                   None if scale is None else {k: narrow.num_at(scale, k) for k in scale},
                   narrow.texts_or_empty(o, "notes"),
                   [_pair(c, "collapses") for c in narrow.values_or_empty(o, "collapses")])


def _pair(value: JsonValue, key: str) -> tuple[int, int]:
    """[first, last]: two sizes (DocumentError naming ``key`` otherwise)."""
    found = narrow.ints(value, key)
    if len(found) != 2:
        raise DocumentError(f"'{key}' is not a pair of sizes")
    return found[0], found[1]


# --------------------------------------------------------------------------- models


def mean_us(s: SizeResult) -> float:
    """The one-way time a sum needs: the mean (imports: what the source has)."""
    value = s.time_us.get("mean")
    return float(value) if value is not None and value > 0 else s.central_time_us()


def from_run(run: RunResult, name: str, source: str) -> NetModel:
    """The piecewise model of a ping-pong run, fitted to its mean times, with residuals."""
    mode = run.parameters.get("mode", "pingpong")
    if mode != "pingpong":
        raise PredictError(f"{source}: a {mode} run; predict needs a ping-pong run (one "
                           "message each way: its time is a message's)")
    rows = [s for s in run.sizes if s.size > 0 and mean_us(s) > 0]
    if len(rows) < 2:
        raise PredictError(f"{source}: fewer than two measured sizes, no model")
    sizes = [s.size for s in rows]
    times = [mean_us(s) for s in rows]
    bps = [8e6 * n / t for n, t in zip(sizes, times, strict=True)]
    a = analyze(sizes, times, [None] * len(rows), bps)
    fits = a.pieces or ([a.hockney] if a.hockney else [])
    if not fits:  # none that is physical (beoperf.analysis.curve): no prices from it
        why = "; ".join(p for p in (a.model_problem, a.pieces_problem) if p) or \
            "too few sizes"
        raise PredictError(f"{source}: no model of this network: the fit of its mean times "
                           f"is not physical ({why})")
    healthy = [(n, t) for n, t in zip(sizes, times, strict=True)
               if not any(c.first_size <= n <= c.last_size for c in a.collapses)]
    pieces = [_piece(f, healthy) for f in fits]
    model = NetModel(name, source, "measured", pieces, (sizes[0], sizes[-1]),
                     a.saturation_size, collapses=[(c.first_size, c.last_size)
                                                   for c in a.collapses],
                     wire_factor=wire_factor(run))
    model.floor_us = pieces[0].time_us(sizes[0])
    if run.status != "complete":
        model.notes.append(f"the run is {run.status}: the model covers the sizes measured")
    return model


def wire_factor(run: RunResult) -> float | None:
    """Wire bytes per payload byte of full TCP segments on Ethernet, (MTU + 14) / MSS,
    from the run's facts (None when it does not record them)."""
    mtu = jsonvalue.integer(jsonvalue.section(run.local, "interface"), "mtu")
    mss = jsonvalue.integer(jsonvalue.section(run.local, "socket"), "mss")
    if isinstance(mtu, int) and isinstance(mss, int) and 0 < mss < mtu <= 65536:
        return (mtu + 14) / mss
    return None


def _piece(f: Fit, healthy: list[tuple[int, float]]) -> Piece:
    r = [t / (f.alpha_us + f.beta_us_per_byte * n) - 1.0 for n, t in healthy
         if f.first_size <= n <= f.last_size and f.alpha_us + f.beta_us_per_byte * n > 0]
    return Piece(f.first_size, f.last_size, f.alpha_us, f.beta_us_per_byte,
                 min(r, default=0.0), max(r, default=0.0), len(r))


_MODEL_KEYS = {"alpha", "bw", "name"}


def from_spec(text: str) -> NetModel:
    """``alpha=50us,bw=100Mbit/s[,name=...]``: a network not yet built (one piece)."""
    fields: dict[str, str] = {}
    for part in text.split(","):
        key, sep, value = part.partition("=")
        key = key.strip().lower()
        if not sep or key not in _MODEL_KEYS or key in fields:
            raise PredictError(f"--model {text!r}: give alpha=TIME,bw=RATE (and optionally "
                               "name=TEXT), e.g. alpha=50us,bw=100Mbit/s")
        fields[key] = value.strip()
    if "alpha" not in fields or "bw" not in fields:
        raise PredictError(f"--model {text!r}: both alpha= and bw= are needed")
    try:
        alpha = units.parse_time(fields["alpha"])
        rate = units.parse_rate(fields["bw"])
    except ValueError as exc:
        raise PredictError(f"--model {text!r}: {exc}") from None
    name = fields.get("name") or f"alpha {units.format_time(alpha)}, {units.format_rate(rate)}"
    return NetModel(name, f"--model {text}", "given",
                    [Piece(1, units.MAX_SIZE, alpha * 1e6, 8e6 / rate)],
                    notes=["a model given, not measured: no residuals, no interval"])


def scaled(model: NetModel, from_bps: float, to_bps: float, name: str) -> NetModel:
    """``model`` with its bottleneck rate changed (see the module docstring)."""
    if from_bps <= 0 or to_bps <= 0:
        raise PredictError("rates must be positive")
    k = model.wire_factor or 1.0
    wire_from = 8e6 * k / from_bps  # us per payload byte at the old rate
    delta = 8e6 * k * (1.0 / to_bps - 1.0 / from_bps)
    floor = model.floor_us if model.floor_us is not None else model.pieces[0].alpha_us
    pieces = []
    for p in model.pieces:
        f = min(1.0, max(0.0, p.beta_us_per_byte / wire_from))
        start = max(0.0, (floor - p.alpha_us) / p.beta_us_per_byte) \
            if p.beta_us_per_byte > 0 else 0.0
        pieces.append(replace(p, beta_us_per_byte=p.beta_us_per_byte + f * delta,
                              alpha_us=p.alpha_us - f * delta * start, wire_fraction=f))
    notes = [*model.notes, f"scaled from {units.format_rate(from_bps)} to "
             f"{units.format_rate(to_bps)} with {k:.4f} wire bytes per payload byte"
             + ("" if model.wire_factor else " (assumed: the run does not record MTU and MSS)")
             + "; wire fraction of the pieces: "
             + ", ".join(f"{p.wire_fraction:.2f}" for p in pieces)]
    return replace(model, name=name, method="scaled", pieces=pieces,
                   scale={"from_bps": from_bps, "to_bps": to_bps}, notes=notes)


# --------------------------------------------------------------------------- predicting


@dataclass
class ClassTime:
    """One message class on one network (seconds)."""

    size: int
    count: int
    pattern: str
    concurrency: int
    time_s: float
    lo_s: float
    hi_s: float
    piece: int
    claimed: bool
    note: str | None = None
    share: float = 0.0
    label: str | None = None

    @classmethod
    def from_dict(cls, o: JsonObject) -> ClassTime:
        num, integer = narrow.num_at, narrow.integer_at
        return cls(integer(o, "size"), integer(o, "count"), narrow.text_at(o, "pattern"),
                   integer(o, "concurrency"), num(o, "time_s"), num(o, "lo_s"), num(o, "hi_s"),
                   integer(o, "piece"), narrow.flag_at(o, "claimed"),
                   narrow.opt_text_at(o, "note"), num(o, "share"), narrow.opt_text_at(o, "label"))


def class_time(model: NetModel, e: Entry) -> ClassTime:
    k = model.piece_of(e.size)
    p = model.pieces[k]
    last = model.pieces[-1]
    if e.pattern == "stream":  # the first message's latency, then the pipe's rate
        t_us = p.time_us(e.size) + (e.count - 1) * last.beta_us_per_byte * e.size
    else:
        rounds = e.count / e.concurrency
        t_us = rounds * p.alpha_us + e.count * p.beta_us_per_byte * e.size
    if model.method == "scaled" and model.floor_us:  # no message beats the floor
        t_us = max(t_us, e.count / e.concurrency * model.floor_us)
    t_us = max(t_us, 0.0)
    claimed, note = _claim(model, e, p, t_us)
    return ClassTime(e.size, e.count, e.pattern, e.concurrency, t_us * 1e-6,
                     t_us * (1 + p.lo_rel) * 1e-6, t_us * (1 + p.hi_rel) * 1e-6, k, claimed,
                     note, label=e.label)


def _claim(model: NetModel, e: Entry, p: Piece, t_us: float) -> tuple[bool, str | None]:
    """(claimed, why not) for one class (see the module docstring)."""
    if model.method == "given":
        return False, "a given model: not measured"
    lo, hi = model.measured or (0, 0)
    if not lo <= e.size <= hi:
        return False, f"outside the measured sizes {lo}..{hi} B (extrapolated)"
    if any(a <= e.size <= b for a, b in model.collapses):
        return False, "in a throughput collapse of the run (the model leaves it out)"
    if e.concurrency > 1:
        return False, f"{e.concurrency} pairs at once: replay checks one pair"
    if e.pattern == "stream" and (model.saturation_size is None
                                  or e.size < model.saturation_size):
        return False, "a stream below the saturation point: the hosts' per-message cost"
    if model.method == "scaled" and model.scale and p.wire_fraction is not None:
        f, scale = p.wire_fraction, model.scale
        if HOST_BOUND < f < RATE_BOUND:
            return False, f"its piece is partly rate-bound (wire fraction {f:.2f})"
        up = scale["to_bps"] / scale["from_bps"]
        if f >= RATE_BOUND and up > SCALE_UP:
            return False, (f"rate-bound, scaled {up:g}x up: whether the hosts keep up at the "
                           "new rate is not measured (the slower link hid their per-byte cost)")
        wire_us = e.count * e.size * 8e6 * (model.wire_factor or 1.0) / scale["to_bps"]
        if f <= HOST_BOUND and wire_us > WIRE_SHARE * max(t_us, 1e-9):
            return False, (f"host-bound piece whose wire time at the new rate is "
                           f"{wire_us / t_us:.0%} of its time")
    return True, None


@dataclass
class WholeRun:
    """With a compute time: the whole run's time on a network, its speedup over the first
    network and the share of it spent communicating (None: a whole time of zero)."""

    whole_s: float | None  # None only in a file that says so (the schema allows it)
    speedup: float | None
    comm_fraction: float | None


@dataclass
class NetPrediction:
    """A network's prediction: its model, each class's time, the total and its interval,
    whether the method claims it, the classes that dominate, and (:func:`amdahl`) the
    ratio to the first network and the whole run's time."""

    model: NetModel
    classes: list[ClassTime]
    total_s: float
    lo_s: float
    hi_s: float
    claimed: bool
    claim_reason: str
    dominant: list[int]  # indexes of the classes that dominate (largest first)
    ratio: float | None = None  # to the first network's total (None: that total is 0)
    whole: WholeRun | None = None  # None: no compute time given

    def to_dict(self) -> JsonObject:
        out: JsonObject = {
            "name": self.model.name, "source": self.model.source,
            "method": self.model.method, "model": self.model.to_dict(),
            "classes": [asdict(c) for c in self.classes], "total_s": self.total_s,
            "interval_s": [self.lo_s, self.hi_s], "claimed": self.claimed,
            "claim_reason": self.claim_reason, "dominant": list(self.dominant),
            "ratio": self.ratio}
        return {**out, **(asdict(self.whole) if self.whole is not None else {})}

    @classmethod
    def from_dict(cls, o: JsonObject) -> NetPrediction:
        """A network as a prediction stores it, every value narrowed (DocumentError)."""
        interval = narrow.nums_or_empty(o, "interval_s")
        if len(interval) != 2:
            raise DocumentError("'interval_s' is not a pair of times")
        whole = WholeRun(narrow.opt_num_at(o, "whole_s"), narrow.opt_num_at(o, "speedup"),
                         narrow.opt_num_at(o, "comm_fraction")) if "whole_s" in o else None
        return cls(NetModel.from_dict(narrow.obj(o.get("model"), "model")),
                   [ClassTime.from_dict(c) for c in narrow.objects_or_empty(o, "classes")],
                   narrow.num_at(o, "total_s"), interval[0], interval[1],
                   narrow.flag_at(o, "claimed"), narrow.text_at(o, "claim_reason"),
                   narrow.ints_or_empty(o, "dominant"),
                   narrow.opt_num_at(o, "ratio"), whole)

    @property
    def dominant_classes(self) -> list[ClassTime]:
        """The classes that dominate, largest first."""
        return [self.classes[i] for i in self.dominant if 0 <= i < len(self.classes)]


def predict_one(profile: Profile, model: NetModel) -> NetPrediction:
    classes = [class_time(model, e) for e in profile.entries]
    total = sum(c.time_s for c in classes)
    for c in classes:
        c.share = c.time_s / total if total > 0 else 0.0
    claimed_share = sum(c.share for c in classes if c.claimed)
    claimed = claimed_share >= CLAIM_SHARE
    reason = (f"claimed classes carry {claimed_share:.1%} of the predicted time "
              f"({'at least' if claimed else 'less than'} {CLAIM_SHARE:.0%})")
    order = sorted(range(len(classes)), key=lambda i: -classes[i].time_s)
    dominant, acc = [], 0.0
    for i in order:
        dominant.append(i)
        acc += classes[i].share
        if acc >= DOMINANT_SHARE:
            break
    return NetPrediction(model, classes, total, sum(c.lo_s for c in classes),
                         sum(c.hi_s for c in classes), claimed, reason, dominant)


def amdahl(predictions: list[NetPrediction], compute_s: float | None) -> list[JsonObject]:
    """Per network: its ratio to the first network's communication time, and with the
    compute time the whole run's time and its speedup over the first network (set on
    each prediction by :func:`with_amdahl`; here as the document stores them)."""
    out = []
    for p in with_amdahl(predictions, compute_s):
        row: JsonObject = {"ratio": p.ratio}
        if p.whole is not None:
            row.update(asdict(p.whole))
        out.append(row)
    return out


def with_amdahl(predictions: list[NetPrediction],
                compute_s: float | None) -> list[NetPrediction]:
    """The predictions with their ratio to the first and (with a compute time) the whole
    run's time set, in place."""
    base = predictions[0].total_s if predictions else 0.0
    for p in predictions:
        p.ratio = p.total_s / base if base > 0 else None
        if compute_s is not None:
            whole = compute_s + p.total_s
            first = compute_s + base
            p.whole = WholeRun(whole, first / whole if whole > 0 else None,
                               p.total_s / whole if whole > 0 else None)
    return predictions


# --------------------------------------------------------------------------- the document


@dataclass
class Prediction:
    """A prediction document's body, typed: the profile, the statistic the models are
    fitted to, the compute time (None: not given), each network's prediction, the method
    in words (name -> text) and the warnings."""

    profile: Profile
    statistic: str
    compute_s: float | None
    networks: list[NetPrediction]
    method: dict[str, str]
    warnings: list[str] = field(default_factory=list)

    def body(self) -> JsonObject:
        return {"profile": self.profile.to_dict(), "statistic": self.statistic,
                "compute_s": self.compute_s, "networks": [n.to_dict() for n in self.networks],
                "method": dict(self.method), "warnings": list(self.warnings)}

    def to_document(self, meta: JsonObject) -> Document:
        return Document(PREDICTION, self.body(), meta)

    @classmethod
    def from_document(cls, doc: Document) -> Prediction:
        """The typed body of a prediction document (DocumentError: another kind, or a value
        of the wrong type)."""
        if doc.kind != PREDICTION:
            raise DocumentError(f"a beoperf {doc.kind} document, not a prediction")
        b: JsonObject = doc.body
        method = narrow.opt_obj_at(b, "method") or {}
        return cls(Profile.from_dict(narrow.obj(b.get("profile"), "profile")),
                   narrow.text_at(b, "statistic"), narrow.opt_num_at(b, "compute_s"),
                   [NetPrediction.from_dict(n) for n in narrow.objects_or_empty(b, "networks")],
                   {k: narrow.text_at(method, k) for k in method},
                   narrow.texts_or_empty(b, "warnings"))

