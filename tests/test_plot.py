"""`beoperf plot` and the figure builders, on real loopback sweeps and a synthetic run."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib", reason="beoperf plot needs matplotlib")

from beoperf.analysis.curve import analyze_run  # noqa: E402
from beoperf.plots.figures import (  # noqa: E402
    BAND_GID,
    SATURATION_GID,
    SIZE_LABEL,
    THROUGHPUT_LABEL,
    TIME_LABEL,
    saturation_figure,
    series,
    signature_figure,
    size_text,
    throughput_figure,
    write_figures,
)
from beoperf.results.model import RunResult, SizeResult, load_json, save_json  # noqa: E402
from helpers import cli, running_server  # noqa: E402

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
NAMES = ("throughput", "signature", "saturation")


def synthetic_run(alpha_us: float = 20.0, bandwidth_bps: float = 1e9, *,
                  percentiles: bool = True, name: str = "synthetic") -> RunResult:
    """A Hockney-shaped sweep t = alpha + n/B, 1 B..4 MiB; without percentiles it looks
    like an import that only has NetPIPE's statistic."""
    rows = []
    for n in (2**k for k in range(23)):
        t = alpha_us + n * 8 / bandwidth_bps * 1e6
        if percentiles:
            times = {"min": 0.95 * t, "median": t, "mean": t, "p90": 1.08 * t, "p99": 1.2 * t}
            bps = {"from_median": n * 8 / (t * 1e-6)}
        else:
            times, bps = {"best_trial_mean": t}, {"from_best_trial": n * 8 / (t * 1e-6)}
        rows.append(SizeResult(size=n, samples=60, trials=6, reps=60, time_us=times,
                               ci95_halfwidth_us=None, ci95_relative=None, converged=True,
                               throughput_bps=bps))
    return RunResult(parameters={"mode": "pingpong"}, local={}, remote={},
                     meta={"peer": f"{name} port 5202"}, sizes=rows)


@pytest.fixture(scope="module")
def sweeps(tmp_path_factory) -> list[Path]:
    """Two real short loopback sweeps and the synthetic run, as JSON result files."""
    base = tmp_path_factory.mktemp("plot-inputs")
    paths = []
    with running_server() as srv:
        for name in ("a", "b"):
            prefix = base / name
            res = cli("pingpong", "127.0.0.1", "--port", str(srv.port),
                      "--sizes", "1,64,1K,16K,256K,1M", "--max-time", "0.5", "-o", str(prefix))
            assert res.status == 0, res.stderr
            paths.append(prefix.with_suffix(".json"))
    save_json(synthetic_run(), base / "synthetic.json")
    return [*paths, base / "synthetic.json"]


@pytest.fixture(scope="module")
def runs(sweeps) -> list[RunResult]:
    return [load_json(p) for p in sweeps]


def labels_of(runs: list[RunResult]) -> list[str]:
    return [f"run {i}" for i in range(len(runs))]


def curve_labels(fig) -> list[str]:
    return [line.get_label() for line in fig.axes[0].get_lines()]


def by_gid(fig, gid: str) -> list:
    return [c for c in fig.axes[0].collections if c.get_gid() == gid]


# --- the CLI -------------------------------------------------------------------------------

def test_writes_three_pngs_and_prints_their_paths(sweeps, tmp_path):
    res = cli("plot", *map(str, sweeps), "-o", str(tmp_path / "figs"))
    assert res.status == 0, res.stderr
    expected = [tmp_path / "figs" / f"{name}.png" for name in NAMES]
    assert res.stdout.split() == [str(p) for p in expected]
    for path in expected:
        data = path.read_bytes()
        assert data.startswith(PNG_MAGIC) and len(data) > 5000


def test_svg_format(sweeps, tmp_path):
    res = cli("plot", str(sweeps[0]), "--format", "svg", "-o", str(tmp_path))
    assert res.status == 0, res.stderr
    for name in NAMES:
        root = ET.parse(tmp_path / f"{name}.svg").getroot()
        assert root.tag.endswith("svg")


def test_default_output_dir_is_cwd(sweeps, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert cli("plot", str(sweeps[2])).status == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{n}.png" for n in NAMES)


def test_label_count_mismatch_is_a_one_line_usage_error(sweeps, tmp_path):
    res = cli("plot", str(sweeps[0]), str(sweeps[1]), "--label", "only one", "-o", str(tmp_path))
    assert res.status == 2
    assert len(res.error_lines) == 1 and "--label" in res.stderr
    assert not list(tmp_path.iterdir())


def test_no_result_is_a_usage_error():
    res = cli("plot")
    assert res.status == 2 and len(res.error_lines) == 1


@pytest.mark.parametrize("content", [b"hello, not a result\n", PNG_MAGIC + b"\0\1\2" * 50,
                                     b'{"format": "something else"}', None])
def test_bad_input_file_is_one_line_naming_it(tmp_path, content):
    path = tmp_path / "bogus.dat"
    if content is not None:  # None: the file does not exist
        path.write_bytes(content)
    res = cli("plot", str(path), "-o", str(tmp_path / "out"))
    assert res.status not in (0, 2)
    assert len(res.error_lines) == 1, res.stderr
    assert res.stderr.startswith(f"beoperf: input error: {path}")
    assert "Traceback" not in res.stderr
    assert not (tmp_path / "out").exists()


def test_result_without_sizes_is_an_input_error(tmp_path):
    path = tmp_path / "empty.json"
    save_json(RunResult(parameters={"mode": "pingpong"}, local={}, remote={}, meta={},
                        status="interrupted"), path)
    res = cli("plot", str(path), "-o", str(tmp_path))
    assert res.status == 1 and len(res.error_lines) == 1
    assert str(path) in res.stderr and "no measured sizes" in res.stderr


@pytest.mark.parametrize("where", ["file", "under-file"])
def test_unwritable_output_dir_is_one_line(sweeps, tmp_path, where):
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    outdir = blocker if where == "file" else blocker / "figs"
    res = cli("plot", str(sweeps[2]), "-o", str(outdir))
    assert res.status == 1
    assert len(res.error_lines) == 1 and res.stderr.startswith("beoperf: output error: ")
    assert "Traceback" not in res.stderr


def test_netpipe_file(sweeps, tmp_path):
    """A NetPIPE np.out plots directly (without a band: NetPIPE keeps no percentiles)."""
    np_file = sweeps[0].with_suffix(".np")
    res = cli("plot", str(np_file), "-o", str(tmp_path))
    assert res.status == 0, res.stderr
    assert (tmp_path / "saturation.png").read_bytes().startswith(PNG_MAGIC)


# --- the figures ---------------------------------------------------------------------------

def test_one_curve_per_run_with_its_label(runs):
    labels = labels_of(runs)
    for build in (throughput_figure, signature_figure, saturation_figure):
        fig = build(runs, labels)
        assert curve_labels(fig) == labels
        assert fig.axes[0].get_title()
        legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        assert legend[:len(labels)] == labels


def test_axes_units_and_scales(runs):
    ax = throughput_figure(runs, labels_of(runs)).axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == (SIZE_LABEL, THROUGHPUT_LABEL)
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "linear")
    assert ax.xaxis.get_transform().base == 2
    ax = signature_figure(runs, labels_of(runs)).axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == (TIME_LABEL, THROUGHPUT_LABEL)
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "linear")
    ax = saturation_figure(runs, labels_of(runs)).axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == (SIZE_LABEL, TIME_LABEL)
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    assert "message size (bytes)" in SIZE_LABEL and "Mbit/s" in THROUGHPUT_LABEL
    assert "µs" in TIME_LABEL


def test_figure_size_and_resolution(runs):
    fig = throughput_figure(runs, labels_of(runs))
    assert tuple(fig.get_size_inches()) == (8.0, 5.0) and fig.dpi == 120


def test_curves_plot_the_central_statistic(runs):
    fig = throughput_figure(runs, labels_of(runs))
    for line, run in zip(fig.axes[0].get_lines(), runs, strict=True):
        x, y = line.get_data()
        assert list(x) == [s.size for s in run.sizes]
        assert np.allclose(y, [s.central_bps() / 1e6 for s in run.sizes])
    fig = signature_figure(runs, labels_of(runs))
    x, _ = fig.axes[0].get_lines()[0].get_data()
    assert x[0] == runs[0].sizes[0].central_time_us()  # the first point is the latency


def test_saturation_point_marked_where_the_analysis_finds_one(runs):
    found = [(run, analyze_run(run).saturation_size) for run in runs]
    found = [(run, size) for run, size in found if size is not None]
    assert found, "the synthetic run has a saturation point"
    for build in (throughput_figure, signature_figure, saturation_figure):
        assert len(by_gid(build(runs, labels_of(runs)), SATURATION_GID)) == len(found)
    fig = saturation_figure(runs, labels_of(runs))
    texts = [t.get_text() for t in fig.axes[0].texts]
    for (run, size), marker in zip(found, by_gid(fig, SATURATION_GID), strict=True):
        assert f"saturation {size} B" in texts
        point = next(s for s in run.sizes if s.size == size)
        assert np.allclose(marker.get_offsets()[0], (size, point.central_time_us()))


def test_synthetic_saturation_is_where_time_turns_linear():
    run = synthetic_run(alpha_us=20.0, bandwidth_bps=1e9)  # alpha = n/B at n = 2500 B
    size = analyze_run(run).saturation_size
    assert size is not None and 2500 < size <= 2**20
    fig = saturation_figure([run], ["synthetic"])
    assert [t.get_text() for t in fig.axes[0].texts] == [f"saturation {size} B"]


def test_band_from_percentiles_and_skipped_without_them():
    with_band = synthetic_run()
    without = synthetic_run(alpha_us=60.0, bandwidth_bps=4e8, percentiles=False, name="np")
    assert series(without).band_us is None
    for build in (throughput_figure, signature_figure, saturation_figure):
        fig = build([with_band, without], ["with", "without"])
        assert len(by_gid(fig, BAND_GID)) == 1
        assert curve_labels(fig) == ["with", "without"]
    fig = throughput_figure([with_band], ["with"])
    band = by_gid(fig, BAND_GID)[0].get_paths()[0].vertices[:, 1]
    mbps = [s.central_bps() / 1e6 for s in with_band.sizes]
    # min..p90 time is 0.95..1.08 of the median: throughput from median/1.08 to median/0.95
    assert np.isclose(band.max(), max(mbps) / 0.95) and np.isclose(band.min(), min(mbps) / 1.08)


def test_band_is_skipped_when_a_size_lacks_percentiles():
    run = synthetic_run()
    run.sizes[3].time_us.pop("p90")
    assert series(run).band_us is None
    assert not by_gid(saturation_figure([run], ["x"]), BAND_GID)


def test_identical_default_labels_get_their_file_names(sweeps, tmp_path, monkeypatch):
    from beoperf.cli.inputs import labels_for

    paths = [str(p) for p in sweeps[:2]]
    runs = [load_json(p) for p in sweeps[:2]]
    assert runs[0].label() == runs[1].label()
    labels = labels_for(None, paths, runs)
    assert labels == [f"{runs[0].label()} ({p.name})" for p in sweeps[:2]]
    assert labels_for(["MTU 9000"], paths[:1], runs[:1]) == ["MTU 9000"]


def test_write_figures_returns_paths_and_rejects_other_formats(runs, tmp_path):
    paths = write_figures(runs, labels_of(runs), tmp_path / "new" / "dir", "svg")
    assert [p.name for p in paths] == [f"{n}.svg" for n in NAMES]
    assert all(p.stat().st_size > 0 for p in paths)
    with pytest.raises(ValueError, match="format"):
        write_figures(runs, labels_of(runs), tmp_path, "jpg")
    with pytest.raises(ValueError, match="label"):
        throughput_figure(runs, ["too few"])


@pytest.mark.parametrize("n, text", [(1, "1"), (512, "512"), (1024, "1K"), (65536, "64K"),
                                     (2**20, "1M"), (8 * 2**20, "8M"), (1536, "1536")])
def test_size_ticks(n, text):
    assert size_text(float(n)) == text
