"""`beoperf plot` and the figure builders, on real loopback sweeps and a synthetic run."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("matplotlib", reason="beoperf plot needs matplotlib")

from beoperf.analysis.curve import analyze_run  # noqa: E402
from beoperf.cli.plot import write_figures  # noqa: E402
from beoperf.model.pingpong import RunResult, SizeResult, load_json  # noqa: E402
from beoperf.report.plots import (  # noqa: E402
    BAND_GID,
    COLLAPSE_GID,
    GBIT_FROM_MBPS,
    MIN_LOG_TICKS,
    SATURATION_GID,
    SIZE_LABEL,
    TIME_LABEL,
    log2_ticks,
    log10_ticks,
    saturation_figure,
    series,
    signature_figure,
    size_text,
    throughput_figure,
    throughput_label,
    throughput_unit,
    time_text,
)
from helpers import cli, running_server, save_run  # noqa: E402

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
    save_run(synthetic_run(), base / "synthetic.json")
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
    save_run(RunResult(parameters={"mode": "pingpong"}, local={}, remote={}, meta={},
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

def legend_texts(fig) -> list[str]:
    return [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


def test_one_curve_per_run_with_its_label(runs):
    labels = labels_of(runs)
    for build in (throughput_figure, signature_figure, saturation_figure):
        fig = build(runs, labels)
        assert curve_labels(fig) == labels
        assert fig.axes[0].get_title()
        legend = legend_texts(fig)
        assert [t.split("\n")[0] for t in legend[:len(labels)]] == labels


def test_axes_units_and_scales(runs):
    top = max(s.central_bps() / 1e6 for run in runs for s in run.sizes)
    label = throughput_label(throughput_unit(top)[0])
    ax = throughput_figure(runs, labels_of(runs)).axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == (SIZE_LABEL, label)
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "linear")
    assert ax.xaxis.get_transform().base == 2
    ax = signature_figure(runs, labels_of(runs)).axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == (TIME_LABEL, label)
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "linear")
    ax = saturation_figure(runs, labels_of(runs)).axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == (SIZE_LABEL, TIME_LABEL)
    assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
    assert "message size (bytes)" in SIZE_LABEL and "bit/s" in label
    drawn(ax.figure)
    assert all(t.endswith(("ns", "µs", "ms", " s")) for t in labelled_ticks(ax, "y"))


def test_figure_size_and_resolution(runs):
    """5 inches high, 8 wide for the axes and their labels plus room for the legend."""
    fig = throughput_figure(runs, labels_of(runs))
    width, height = fig.get_size_inches()
    assert height == 5.0 and 8.0 < width <= 8.0 + 4.5 and fig.dpi == 120


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
    found = [(i, analyze_run(run).saturation_size) for i, run in enumerate(runs)]
    found = [(i, size) for i, size in found if size is not None]
    assert found, "the synthetic run has a saturation point"
    for build in (throughput_figure, signature_figure, saturation_figure):
        assert len(by_gid(build(runs, labels_of(runs)), SATURATION_GID)) == len(found)
    fig = saturation_figure(runs, labels_of(runs))
    legend = legend_texts(fig)
    for (i, size), marker in zip(found, by_gid(fig, SATURATION_GID), strict=True):
        assert legend[i] == f"run {i}\nsaturation {size} B"  # the run's own legend entry
        point = next(s for s in runs[i].sizes if s.size == size)
        assert np.allclose(marker.get_offsets()[0], (size, point.central_time_us()))


def test_synthetic_saturation_is_where_time_turns_linear():
    run = synthetic_run(alpha_us=20.0, bandwidth_bps=1e9)  # alpha = n/B at n = 2500 B
    size = analyze_run(run).saturation_size
    assert size is not None and 2500 < size <= 2**20
    fig = saturation_figure([run], ["synthetic"])
    assert legend_texts(fig)[0] == f"synthetic\nsaturation {size} B"


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
    from beoperf.suites.results import labels_for

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


# --- readable figures (issue 9, section 7) -------------------------------------------------

FIXTURES = Path(__file__).parent / "fixtures"
IMPORTS = ["nptcp-loopback.out", "netpipe5-mpi.out", "osu_latency-7.4-tail.txt",
           "imb-2021-pingpong.txt"]


@pytest.fixture(scope="module")
def seven(runs) -> tuple[list[RunResult], list[str]]:
    """Seven curves: the two loopback sweeps and the synthetic run (with the long labels
    beoperf gives them) and the NetPIPE, OSU and IMB imports."""
    from beoperf.model.importers import load_any

    found = [*runs, *(load_any(FIXTURES / name) for name in IMPORTS)]
    labels = [f"{run.label()} sndbuf=262144 rcvbuf=262144 #{i}" if run.source is None
              else run.label() for i, run in enumerate(found)]
    return found, labels


def stalled_run() -> RunResult:
    """The synthetic run with every size from 64 KiB on stalled 1000x (delayed-ACK-like)."""
    run = synthetic_run(alpha_us=5.0, bandwidth_bps=40e9)
    for s in run.sizes:
        if s.size >= 65536:
            for key in ("min", "median", "mean", "p90", "p99"):
                s.time_us[key] *= 1000.0
            s.throughput_bps["from_median"] /= 1000.0
    return run


def drawn(fig):
    """Draw the figure with the Agg renderer (as it is saved); the renderer."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def labelled_ticks(ax, which: str) -> list[str]:
    """Texts of the labelled major ticks inside the view limits."""
    axis = ax.xaxis if which == "x" else ax.yaxis
    lo, hi = sorted(ax.get_xlim() if which == "x" else ax.get_ylim())
    fmt = axis.get_major_formatter()
    texts = [fmt(loc, i) for i, loc in enumerate(axis.get_majorticklocs()) if lo <= loc <= hi]
    return [t for t in texts if t.strip()]


def log_axes(fig) -> list[str]:
    ax = fig.axes[0]
    return [w for w, scale in (("x", ax.get_xscale()), ("y", ax.get_yscale())) if scale == "log"]


ALL_BUILDS = (throughput_figure, signature_figure, saturation_figure)


@pytest.mark.parametrize("build", ALL_BUILDS)
def test_nothing_is_clipped_with_seven_curves_and_a_collapse(seven, build):
    """Every drawn artist (tick and axis labels, title, legend, collapse labels) lies
    inside the figure: the saved image never cuts one off."""
    found, labels = seven
    fig = build([*found, stalled_run()], [*labels, "stalled"])
    renderer = drawn(fig)
    tight = fig.get_tightbbox(renderer)  # inches, as bbox_inches="tight" would crop
    width, height = fig.get_size_inches()
    assert tight.x0 >= -0.01 and tight.y0 >= -0.01
    assert tight.x1 <= width + 0.01 and tight.y1 <= height + 0.01
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent(renderer)
    assert legend.x0 >= ax.get_window_extent(renderer).x1  # beside the data, not over it
    inside = ax.get_window_extent(renderer)
    for text in ax.texts:
        box = text.get_window_extent(renderer)
        assert inside.x0 <= box.x0 and box.x1 <= inside.x1, text.get_text()


@pytest.mark.parametrize("build", ALL_BUILDS)
def test_log_axes_carry_enough_labelled_ticks(seven, build):
    narrow = synthetic_run(alpha_us=20.0, bandwidth_bps=1e9)
    narrow.sizes = [s for s in narrow.sizes if 2**14 <= s.size <= 2**16]  # 20..545 us
    tiny = synthetic_run()
    tiny.sizes = tiny.sizes[:3]  # 1..4 B, all about 20 us
    for case in (seven[0], [narrow], [tiny], [stalled_run()]):
        fig = build(case, [f"r{i}" for i in range(len(case))])
        drawn(fig)
        for which in log_axes(fig):
            assert len(labelled_ticks(fig.axes[0], which)) >= MIN_LOG_TICKS, (which, case)


def test_tick_choices():
    assert log10_ticks(20.0, 60.0) == [20.0, 30.0, 40.0, 50.0, 60.0]
    assert log10_ticks(8.0, 400.0) == [10.0, 20.0, 50.0, 100.0, 200.0]
    assert log10_ticks(0.5, 4000.0) == [1.0, 10.0, 100.0, 1000.0]
    assert 4 <= len(log10_ticks(1e-3, 1e12)) <= 12
    assert len(log10_ticks(40.0, 44.0)) >= 4  # narrower than 1..9 per decade
    assert log2_ticks(16384.0, 65536.0) == [16384.0, 24576.0, 32768.0, 49152.0, 65536.0]
    assert [size_text(t) for t in log2_ticks(16384.0, 65536.0)] == ["16K", "24K", "32K",
                                                                   "48K", "64K"]
    assert log2_ticks(0.7, 1.6e7)[:4] == [1.0, 4.0, 16.0, 64.0]  # 24 powers: every other
    assert all(t == int(t) for t in log2_ticks(1.0, 3.5))
    assert (time_text(0.5), time_text(20.0), time_text(1500.0), time_text(2e6)) == \
        ("500 ns", "20 µs", "1.5 ms", "2 s")


def test_each_saturation_marker_has_its_curves_colour_and_its_own_shape(seven):
    from matplotlib.colors import to_rgba

    found, labels = seven
    fig = saturation_figure(found, labels)
    lines = fig.axes[0].get_lines()
    marked = [i for i, run in enumerate(found) if analyze_run(run).saturation_size is not None]
    markers = by_gid(fig, SATURATION_GID)
    assert len(markers) == len(marked) >= 4
    for i, marker in zip(marked, markers, strict=True):
        assert np.allclose(marker.get_edgecolor()[0], to_rgba(lines[i].get_color()))
    shapes = {marker.get_paths()[0].vertices.tobytes() for marker in markers}
    assert len(shapes) == len(markers)  # coinciding points stay distinguishable


def test_throughput_unit_fits_the_values():
    slow = synthetic_run(bandwidth_bps=0.8e9)  # peak below 1000 Mbit/s
    fast = synthetic_run(bandwidth_bps=40e9)
    assert throughput_unit(GBIT_FROM_MBPS * 0.99) == ("Mbit/s", 1.0)
    assert throughput_unit(GBIT_FROM_MBPS) == ("Gbit/s", 1e3)
    for case, unit in (([slow], "Mbit/s"), ([slow, fast], "Gbit/s")):
        for build in (throughput_figure, signature_figure):
            ax = build(case, [f"r{i}" for i in range(len(case))]).axes[0]
            assert ax.get_ylabel() == throughput_label(unit)
            fmt = ax.yaxis.get_major_formatter()
            assert fmt(20000.0, 0) == ("20" if unit == "Gbit/s" else "20,000")
    assert throughput_label("Gbit/s") == "throughput (Gbit/s, 10^9 bit/s)"


def test_signature_band_is_a_polygon_between_the_min_and_p90_curves():
    run = synthetic_run()
    s = series(run)
    fig = signature_figure([run], ["x"])
    (band,) = by_gid(fig, BAND_GID)
    (path,) = band.get_paths()
    vertices = path.vertices[:2 * len(s.sizes)]
    fast = np.column_stack([s.band_us[0], s.mbps_at(s.band_us[0])])
    slow = np.column_stack([s.band_us[1], s.mbps_at(s.band_us[1])])
    assert np.allclose(vertices, np.concatenate([fast, slow[::-1]]))
    assert np.all(fast[:, 1] > s.mbps) and np.all(slow[:, 1] < s.mbps)  # around the curve


def test_collapse_is_shaded_and_labelled_in_its_curves_colour():
    from matplotlib.colors import to_rgba

    run = stalled_run()
    (collapse,) = analyze_run(run).collapses
    assert collapse.first_size == 65536
    for build in ALL_BUILDS:
        fig = build([synthetic_run(), run], ["healthy", "stalled"])
        ax = fig.axes[0]
        colour = to_rgba(ax.get_lines()[1].get_color())
        (span,) = [p for p in ax.patches if p.get_gid() == COLLAPSE_GID]
        assert np.allclose(span.get_facecolor()[:3], colour[:3])
        xs = span.get_path().transformed(span.get_patch_transform()).vertices[:, 0] \
            if hasattr(span, "get_patch_transform") else span.get_xy()[:, 0]
        s = series(run)
        lo, hi = (s.sizes, s.sizes) if build is not signature_figure else (s.time_us, s.time_us)
        inside = s.collapsed(collapse)
        assert xs.min() <= lo[inside].min() and hi[inside].max() <= xs.max()
        (label,) = [t for t in ax.texts if t.get_gid() == COLLAPSE_GID]
        assert label.get_text() == f"stalled: throughput collapse 1/{collapse.factor:.0f}"
        assert np.allclose(to_rgba(label.get_color()), colour)
        assert "throughput collapse" in legend_texts(fig)
    (band,) = by_gid(signature_figure([run], ["stalled"]), BAND_GID)
    assert len(band.get_paths()) == 2  # the band does not bridge the collapse
