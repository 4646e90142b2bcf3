"""`beoperf predict`: an application's communication time on each network, and the ratio.

:func:`run` reads the profile (``model.profile``), builds one model per network (a
ping-pong result's piecewise fit, that fit scaled to another rate, or a model given as
alpha and bandwidth: ``analysis.predict``) and returns the prediction document.
Nothing is measured; the CLI renders and writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from beoperf import errors, units
from beoperf.analysis import predict
from beoperf.model.document import Document, make_meta
from beoperf.model.profile import ProfileError, read_profile
from beoperf.suites.results import input_error, load_result

HINT = "see 'beoperf predict --help'"

METHOD = {
    "model": "Each measured network is the piecewise Hockney fit t(n) = alpha + beta x n "
             "(beoperf.analysis.curve: pieces split at the protocol thresholds, chosen by "
             "BIC) of the mean one-way time of each size of its ping-pong run.",
    "patterns": "pingpong and bidir: count x t(n); stream: t(n) + (count - 1) x n x beta of "
                "the last (bandwidth-bound) piece; concurrency c: (count / c) x alpha + count "
                "x n x beta.",
    "interval": "Each class's time x (1 + the smallest .. largest relative residual of its "
                "piece's fit), summed over the classes: the model's own error at the sizes "
                "it was fitted on, not a confidence interval; the link's run-to-run noise is "
                "not in it.",
    "claims": "A class is claimed when its size is within the measured sizes, outside any "
              "throughput collapse, at concurrency 1, pingpong or bidir (stream: from the "
              "saturation point on); for a scaled network its piece must be rate-bound (wire "
              "fraction >= 0.9, and then to at most twice its measured rate) or host-bound "
              "(<= 0.1, with its wire time at the new rate at most 10% of its time). A "
              "network is claimed when claimed classes carry 90% of its predicted time.",
    "scaling": "--scale RESULT FROM TO: the same path, hosts and MTU with the "
               "bottleneck's rate changed from FROM to TO: only the serialization of the "
               "wire bytes ((MTU + 14) / MSS per payload byte) changes, by 8 x (1/TO - "
               "1/FROM) per wire byte, in each piece in proportion to its wire fraction "
               "(the share of its per-byte cost FROM explains) and from the size where it "
               "leaves the model's floor; the hosts' costs stay as measured.",
    "amdahl": "With --compute S: whole time = S + communication time; speedup over the "
              "first network = its whole time / this one's.",
}


@dataclass(frozen=True)
class Spec:
    profile: str
    networks: tuple[str, ...] = ()
    models: tuple[str, ...] = ()
    scales: tuple[tuple[str, str, str], ...] = ()  # (result, from rate, to rate)
    profile_format: str = "auto"
    compute_s: float | None = None
    command_line: tuple[str, ...] = ()


def _measured(path: str) -> predict.NetModel:
    run = load_result(path)
    label = run.label()
    name = f"{Path(path).stem} ({label})" if label != Path(path).stem else label
    try:
        model = predict.from_run(run, name, path)
    except predict.PredictError as exc:
        raise input_error(path, exc) from None
    if run.source is not None:  # another tool's file: what its importer said, among warnings
        model.notes += run.warnings
    return model


def _scaled(path: str, rate_from: str, rate_to: str) -> predict.NetModel:
    try:
        low, high = units.parse_rate(rate_from), units.parse_rate(rate_to)
    except ValueError as exc:
        raise errors.BadSpec(f"--scale {path} {rate_from} {rate_to}: {exc}", HINT) from None
    base = _measured(path)
    name = f"{Path(path).stem} scaled {units.format_rate(low)} -> {units.format_rate(high)}"
    return predict.scaled(base, low, high, name)


def networks(spec: Spec) -> list[predict.NetModel]:
    """The networks in the order given: results, then scaled results, then models."""
    out = [_measured(p) for p in spec.networks]
    out += [_scaled(*s) for s in spec.scales]
    for text in spec.models:
        try:
            out.append(predict.from_spec(text))
        except predict.PredictError as exc:
            raise errors.BadSpec(str(exc), HINT) from None
    if not out:
        raise errors.BadSpec("no network: give --network RESULT, --scale RESULT FROM TO or "
                             "--model alpha=TIME,bw=RATE", HINT)
    return out


def run(spec: Spec) -> Document:
    """The prediction document (see beoperf.model.prediction)."""
    if spec.compute_s is not None and not 0 <= spec.compute_s < 1e12:
        raise errors.BadSpec(f"--compute {spec.compute_s}: give seconds, 0 or more", HINT)
    try:
        profile = read_profile(spec.profile, spec.profile_format)
    except ProfileError as exc:
        raise errors.InputError(str(exc), "a CSV size,count[,pattern,concurrency], an IMB "
                                          "or OSU output, or an mpiP report") from None
    predictions = predict.with_amdahl([predict.predict_one(profile, m) for m in networks(spec)],
                                      spec.compute_s)
    found = predict.Prediction(profile, predict.STATISTIC, spec.compute_s, predictions,
                               dict(METHOD), warnings(profile.notes, predictions))
    return found.to_document(make_meta(list(spec.command_line)))


def warnings(profile_notes: list[str], predictions: list[predict.NetPrediction]) -> list[str]:
    """What a reader must know: networks not claimed and classes extrapolated."""
    out = []
    for p in predictions:
        if p.model.method != "given" and not p.claimed:
            out.append(f"{p.model.name}: not claimed by the method ({p.claim_reason})")
        outside = [c for c in p.classes if c.note and "extrapolated" in c.note]
        if outside:
            out.append(f"{p.model.name}: {len(outside)} class(es) outside the measured sizes "
                       f"(extrapolated with the nearest piece): "
                       f"{', '.join(str(c.size) for c in outside[:6])} B")
        out += [f"{p.model.name}: {n}" for n in p.model.notes
                if not n.startswith(("scaled from", "a model given"))]
    return out
