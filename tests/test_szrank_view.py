"""The 3-D view of a configuration and the widget that steps through a run's new bests (tiny runs)."""
import numpy as np
import pytest

from szrank.errors import ConfigError
from szrank.geometry import evaluate, layout, random_planes
from szrank.search import run_population, run_search
from szrank.view import NewBestBrowser, configuration_figure, marked_edges, new_bests


def test_marked_edges_follow_the_counts():
    L = layout(42)
    for seed in range(3):
        n, d = random_planes(np.random.default_rng(seed))
        crossing, intersecting, C, I = marked_edges(n, d, 42)
        defects = evaluate(n, d, L)
        assert (C, I) == (defects.crossings[0], defects.intersections[0])
        assert (len(crossing) > 0) == (C > 0) and len(crossing) <= 2 * C
        assert (len(intersecting) > 0) == (I > 0) and len(intersecting) <= I
        assert set(intersecting) <= set(range(len(L.edge_ends)))


def test_figure_legend_names_c_and_i():
    n, d = random_planes(np.random.default_rng(5))
    _, _, C, I = marked_edges(n, d, 7)
    figure = configuration_figure(n, d, 7)
    texts = [t.get_text() for t in figure.axes[0].get_legend().get_texts()]
    assert texts == [f"crossing edges: C = {C}", f"intersecting edges: I = {I}"]
    assert f"C+I = {C + I}" in figure.axes[0].get_title()


def test_slider_changes_the_drawn_image_and_label(tmp_path):
    summary = run_search(tmp_path, topology=42, steps=20, seed=3, replicas=2, iterations=2)
    bests = new_bests(tmp_path, summary.run_id)
    assert len(bests["total"]) >= 2 and (np.diff(bests["total"]) < 0).all()
    assert bests["total"][-1] == summary.best_total
    browser = NewBestBrowser(tmp_path, summary.run_id, size=2.5)
    last_image, last_label = browser.panel.image.value, browser.label.value
    assert last_image[:4] == b"\x89PNG" and f"C+I {summary.best_total} after" in last_label
    browser.slider.value = 0
    assert browser.panel.image.value != last_image and browser.label.value != last_label
    assert browser.label.value.startswith(f"new best 1 of {len(bests['total'])}: C+I {bests['total'][0]} after "
                                          f"{bests['evaluations'][0]:,} evaluations")
    assert browser.panel.caption.value == browser.label.value


def test_a_run_without_events_is_refused_naming_it(tmp_path):
    summary = run_population(tmp_path, 42, 2000, seed=1)
    with pytest.raises(ConfigError, match=f"run {summary.run_id} .* no new-best events"):
        new_bests(tmp_path, summary.run_id)
    with pytest.raises(ConfigError, match="not a run id"):
        new_bests(tmp_path, "nonsense")
