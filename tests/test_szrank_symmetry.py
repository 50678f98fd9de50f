"""Symmetries of the topologies, symmetric configurations, and the symmetric search strategy."""
import re
import uuid
from pathlib import Path

import numpy as np
import pytest

from helpers import run, tool
from szrank.search.archive import list_runs, read_run
from szrank.plumbing.errors import OptionError
from szrank.geometry.defects import dual_vertices, evaluate, layout
from szrank.search.obj import read_configuration
from szrank.search.population import planes_from_x, population_search
from szrank.geometry.symmetry import automorphisms, make_symmetry, permutation_order, symmetry_of
from szrank.geometry.topology import TOPOLOGIES, TOPOLOGY_COUNT

FIXTURES = Path(__file__).resolve().parent / "data" / "szilassi" / "public_solver"   # copies, with their licence (README there)


def test_automorphisms_map_the_triangles_onto_themselves():
    for t in range(TOPOLOGY_COUNT):
        triangles = {tuple(sorted(f)) for f in np.asarray(TOPOLOGIES[t]) - 1}
        group = automorphisms(t)
        assert any((a == np.arange(12)).all() for a in group)
        for a in group:
            assert {tuple(sorted(a[list(f)])) for f in triangles} == triangles
        # closed under composition: a group
        codes = {tuple(a) for a in group}
        assert all(tuple(a[b]) in codes for a in group for b in group)
    assert [len(automorphisms(t)) for t in (37, 42, 58)] == [4, 4, 4]


def test_symmetric_configurations_are_symmetric():
    for t in (42, 46, 4):                        # S4, C3, C2
        symmetry = symmetry_of(t)
        x = symmetry.expand(np.random.default_rng(t).standard_normal((3, symmetry.dimension))).reshape(3, 12, 3)
        assert np.allclose(x[:, list(symmetry.permutation)], x @ symmetry.matrix.T)
        assert symmetry.dimension == sum(3 if len(o) == symmetry.order else 1 for o in _orbits(symmetry))
        assert np.allclose(np.linalg.matrix_power(symmetry.matrix, symmetry.order), np.eye(3))
    assert (symmetry_of(42).name, symmetry_of(46).name, symmetry_of(0).name) == ("S4", "C3", "C1")
    assert symmetry_of(0).dimension == 36
    with pytest.raises(OptionError, match="no symmetry of order 3"):
        symmetry_of(42, order=3)
    with pytest.raises(OptionError, match="not an automorphism of topology 42"):
        make_symmetry(42, np.roll(np.arange(12), 1))


def _orbits(symmetry):
    from szrank.geometry.symmetry import _orbits
    return _orbits(symmetry.permutation)


def test_the_public_records_lie_in_the_symmetric_space():
    "Each C+I = 4 record's S4 permutation of its triangles is an isometry of its vertices (det -1, trace -1)."
    for t, name in ((42, "shape_c0_i4_optimalsymmetric.obj"), (42, "shape_c4_i0_4.obj"), (58, "shape_c4_i0_2.obj")):
        symmetry, L = symmetry_of(t), layout(t)
        vertices = dual_vertices(*read_configuration(FIXTURES / f"topology_{t}" / name, t), L.triangles)[0]
        index = {tuple(sorted(f)): k for k, f in enumerate(L.triangles.tolist())}
        image = [index[tuple(sorted(np.array(symmetry.permutation)[f]))] for f in L.triangles.tolist()]
        a, b = vertices - vertices.mean(0), vertices[image] - vertices[image].mean(0)
        u, _, vt = np.linalg.svd(b.T @ a)
        m = u @ vt
        assert np.abs(a @ m.T - b).max() < 1e-5 * np.abs(a).max(), name
        assert np.isclose(np.linalg.det(m), -1) and np.isclose(np.trace(m), -1, atol=1e-4), name


def test_symmetric_search_reaches_the_record_on_43_quickly():
    result = population_search(42, 30_000, seed=1, symmetry=symmetry_of(42), target=4)
    assert result.best_total <= 4 and result.evaluations < 30_000
    x = np.concatenate([result.normals * result.offsets[:, None]]).ravel()
    assert evaluate(*planes_from_x(x), layout(42)).total[0] == result.best_total


def test_symmetric_strategy_from_the_command_line(tmp_path):
    result = run([tool("szrank"), "search", "--archive", str(tmp_path), "--topology", "42", "--evaluations", "20000",
                  "--strategy", "symmetric", "--seed", "1", "--workers", "1"], timeout=300)
    assert result.returncode == 0, result.stderr
    best, at = map(int, re.fullmatch(r"best C\+I (\d+) after (\d+) evaluations",
                                     result.stdout.strip().splitlines()[-1]).groups())
    (run_id,) = list_runs(tmp_path)
    metadata, events = read_run(tmp_path, run_id)
    assert metadata["strategy"] == "symmetric" and metadata["symmetry"] == "S4" and len(events) == 0
    assert best <= 4 and at <= 20_000 and metadata["best_total"] == best
    planes = read_configuration(tmp_path / str(run_id) / "best.obj", 42)
    assert evaluate(*planes, layout(42)).total[0] == best


def test_the_c2_symmetric_shape_of_5_goes_below_the_public_record():
    """A C2-symmetric configuration of the paper's #5 with C+I = 2 (the public solver's best anywhere is 4),
    found by `population_search(4, 10_000, 1, symmetry=symmetry_of(4))` under the previous counter: 2 by the
    public rule (its file recount, at the frame scale and as given; the public solver's own counter gave C 2
    I 0 to this file and to its planes), by the strict rule, and its planes are C2-symmetric."""
    from szrank.geometry.defects import evaluate_exact, public_recount
    from szrank.search.obj import read_obj
    path = Path(__file__).resolve().parent / "data" / "szilassi" / "c2_symmetric_p5.obj"
    normals, offsets = read_configuration(path, 4)
    L, symmetry = layout(4), symmetry_of(4)
    assert symmetry.name == "C2" and public_recount(*read_obj(path)) == (2, 0)
    for defects in (evaluate(normals, offsets, L), evaluate(normals, offsets, L, absolute=True), evaluate_exact(normals, offsets, L)):
        assert (int(defects.crossings[0]), int(defects.intersections[0]), int(defects.degenerate[0])) == (2, 0, 0)
    vertices = dual_vertices(normals, offsets, L.triangles)[0]
    index = {tuple(sorted(f)): k for k, f in enumerate(L.triangles.tolist())}
    image = [index[tuple(sorted(np.array(symmetry.permutation)[f]))] for f in L.triangles.tolist()]
    a, b = vertices - vertices.mean(0), vertices[image] - vertices[image].mean(0)
    u, _, vt = np.linalg.svd(b.T @ a)
    assert np.abs(a @ (u @ vt).T - b).max() < 1e-6 * np.abs(a).max()