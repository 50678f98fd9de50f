"""The filler inspector's plotting functions, headless (Agg), on bench samples of the tiny
corpus: one truth/output row and one error row per lost band, titles with the bench's
per-band PSNR, error maps on one symmetric scale; and the widget builds, with a static copy
of its first picture."""
import html

import matplotlib
matplotlib.use("Agg")
import numpy as np

from test_suvi_fillers import fill_corpus, bench_samples  # noqa: F401 (fixtures)


def test_comparison_content(bench_samples):
    from suvi_fill.physics import timebase
    from suvi_fill.evaluate.bench import band_psnr
    from suvi_fill.widgets.filler_inspector import (FIGURE_WIDTH, TITLE_POINTS, comparison, plot_comparison, predictions_for,
                                             sample_title)
    from suvi_fill.evaluate.fillers import make_filler
    fillers = {n: make_filler(n) for n in ("nearest", "optical_flow", "blend")}
    for sample in bench_samples[:3]:
        predictions = predictions_for(sample, fillers)
        rows = comparison(sample, predictions)
        lost = [timebase.WAVELENGTHS[b] for b in np.flatnonzero(sample.lost)]
        assert [r["band"] for r in rows] == lost
        for row in rows:
            b = timebase.BAND_INDEX[row["band"]]
            for name, prediction in predictions.items():
                assert row["psnr"][name] == band_psnr(prediction, sample.target)[b]
                assert np.allclose(row["errors"][name], row["outputs"][name] - row["truth"])
            # the error maps' scale is the 99.5th percentile of |error| over the fillers, not one outlier pixel
            everything = np.concatenate([np.abs(e).ravel() for e in row["errors"].values()])
            assert row["limit"] == max(float(np.percentile(everything, 99.5)), 1e-3)
        figure = plot_comparison(sample, predictions, title=sample_title(sample))
        assert len(figure.axes) == 2 * len(rows) * 4
        titles = [ax.get_title() for ax in figure.axes]
        assert titles[0] == f"truth {rows[0]['band']} Å"
        assert titles[1] == f"nearest\n{rows[0]['psnr']['nearest']:.2f} dB"
        assert titles[4 + 2] == "optical_flow\nerror"
        assert {ax.title.get_fontsize() for ax in figure.axes if ax.get_title()} == {TITLE_POINTS} and figure.get_figwidth() <= FIGURE_WIDTH
        image = figure.axes[4 + 1].images[0]
        assert image.get_cmap().name == "RdBu_r" and image.get_clim() == (-rows[0]["limit"], rows[0]["limit"])
        assert f"g{sample['satellite']}" in figure._suptitle.get_text()


def test_widget_builds(fill_corpus):
    from suvi_fill.widgets.filler_inspector import filler_inspector
    widget = filler_inspector(fill_corpus, gaps=(1, 10000))
    controls = widget.children[0].children
    assert [c.description for c in controls] == ["split", "gap", "sample"]
    assert "samples" in widget.children[1].value
    first = widget.panel.caption.value
    draws = widget.panel.draws
    other = next(o for o in controls[0].options if o != controls[0].value)
    controls[0].value = other                             # a split change redraws once, the slider reset included
    assert widget.panel.draws == draws + 1 and widget.panel.caption.value.startswith(f"{other} · gap 1 · sample 0")
    controls[1].value = 10000
    assert "too short" in widget.children[1].value
    shown, static = widget.panel.outputs(widget)          # the widget, and its first picture as plain data
    assert "application/vnd.jupyter.widget-view+json" in shown
    assert static["text/plain"] == f"[picture: {html.unescape(first)}]" and static["image/png"]
    assert f"plot-static-{widget.panel.key}" in static["text/html"]
