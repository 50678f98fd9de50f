"""The 3-D view of a configuration and the widget that steps through a run's new bests (tiny runs)."""
import numpy as np
import pytest

from szrank.plumbing.errors import OptionError
from szrank.geometry.defects import evaluate, layout, random_planes
from szrank.search.runs import run_population, run_search
from szrank.search.obj import configuration_vertices
from szrank.widgets.view import NewBestBrowser, configuration_figure, marked_edges, new_bests, polygon_triangles, view_html


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
    assert [t.name for t in figure.data if t.type == "scatter3d"] == \
        ["edges", f"crossing edges: C = {C}", f"intersecting edges: I = {I}"]
    assert f"C+I = {C + I}" in figure.layout.title.text


def test_the_box_holds_every_vertex_and_the_faces_are_tiled():
    "No face is cut by the box: every vertex lies inside the scene's ranges; each face is n - 2 triangles."
    L = layout(42)
    for seed in range(3):
        n, d = random_planes(np.random.default_rng(seed))
        vertices = configuration_vertices(n, d, 42, "draw")[3]
        figure = configuration_figure(n, d, 42)
        for k, axis in enumerate("xyz"):
            low, high = figure.layout.scene[f"{axis}axis"].range
            assert low < vertices[:, k].min() and vertices[:, k].max() < high
        for face, mesh in enumerate(figure.data[:12]):
            triangles = np.stack([mesh.i, mesh.j, mesh.k], axis=1)
            assert len(triangles) == len(L.corners[face]) - 2 and set(triangles.ravel()) == set(L.corners[face])


def test_a_non_convex_polygon_is_tiled_exactly():
    "Ear clipping: the triangles' areas add up to the polygon's (a fan from a reflex corner would not)."
    star = np.array([(np.cos(a) * r, np.sin(a) * r) for a, r in zip(np.linspace(0, 2 * np.pi, 10, endpoint=False),
                                                                     [3, 1] * 5)])
    for polygon in (star, star[::-1], np.roll(star, 1, axis=0)):
        triangles = polygon_triangles(polygon)
        a, b, c = (polygon[triangles[:, k]] for k in range(3))
        area = np.abs((b - a)[:, 0] * (c - a)[:, 1] - (b - a)[:, 1] * (c - a)[:, 0]).sum() / 2
        x, y = polygon.T
        assert len(triangles) == 8 and np.isclose(area, abs(np.dot(x, np.roll(y, -1)) - np.dot(y, np.roll(x, -1))) / 2)


def test_the_view_carries_plotly_js_inline():
    figure = configuration_figure(*random_planes(np.random.default_rng(1)), 42)
    page = view_html(figure)
    assert "plotly.js v" in page and "Plotly.newPlot(" in page and "<script src" not in page


def test_slider_changes_the_drawn_image_and_label(tmp_path):
    summary = run_search(tmp_path, topology=42, steps=20, seed=3, replicas=2, iterations=2)
    bests = new_bests(tmp_path, summary.run_id)
    assert len(bests["total"]) >= 2 and (np.diff(bests["total"]) < 0).all()
    assert bests["total"][-1] == summary.best_total
    browser = NewBestBrowser(tmp_path, summary.run_id, height=300)
    last_view, last_label = browser.panel.first[0], browser.label.value
    assert "Plotly.newPlot(" in last_view and f"C+I {summary.best_total} after" in last_label
    browser.slider.value = 0
    view = browser.panel.view.outputs[0]["data"]["text/html"]
    assert view != last_view and browser.label.value != last_label and browser.label.value in view     # its title
    assert browser.label.value.startswith(f"new best 1 of {len(bests['total'])}: C+I {bests['total'][0]} after "
                                          f"{bests['evaluations'][0]:,} evaluations")
    assert browser.panel.caption.value == browser.label.value
    shown, static = browser.panel.outputs(browser.widget)              # the widget, then the first view, plain
    assert static["text/html"].count(last_view) == 1 and f"plot-static-{browser.panel.key}" in static["text/html"]


def test_a_run_without_events_is_refused_naming_it(tmp_path):
    summary = run_population(tmp_path, 42, 2000, seed=1)
    with pytest.raises(OptionError, match=f"run {summary.run_id} .* no new-best events"):
        new_bests(tmp_path, summary.run_id)
    with pytest.raises(OptionError, match="not a run id"):
        new_bests(tmp_path, "nonsense")
