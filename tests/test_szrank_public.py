"""szrank against the public NeighborlyPolyhedra solver: its saved configurations get its own C and I."""
import re
from pathlib import Path

import numpy as np
import pytest

from szrank.geometry import evaluate, evaluate_exact, layout, random_planes
from szrank.topology import PAPER_RELABELLINGS

FIXTURES = Path(__file__).resolve().parent / "data" / "szilassi" / "public_solver"   # copies, with their licence (README there)
SHAPES = sorted(FIXTURES.glob("topology_*/shape_c*_i*_*.obj"))
NAME = re.compile(r"topology_(\d+)/shape_c(\d+)_i(\d+)_")


def fitted_planes(path, topology):
    "Planes fitted (total least squares) to each OBJ face, in szrank's face order; independent of szrank.obj."
    vertices, faces = [], []
    for line in path.read_text().splitlines():
        words = line.split()
        if words and words[0] == "v":
            vertices.append([float(x) for x in words[1:4]])
        elif words and words[0] == "f":
            faces.append([int(w.split("/")[0]) - 1 for w in words[1:]])
    vertices = np.array(vertices)
    normals, offsets = np.zeros((12, 3)), np.zeros(12)
    for label, face in enumerate(faces):                      # face i: the public list's vertex i
        points = vertices[face]
        centre = points.mean(axis=0)
        normal = np.linalg.svd(points - centre)[2][-1]
        ours = PAPER_RELABELLINGS[topology][label] - 1
        normals[ours], offsets[ours] = normal, normal @ centre
    return normals, offsets


@pytest.mark.skipif(len(SHAPES) != 10, reason="the public solver's ten saved configurations are not here")
@pytest.mark.parametrize("path", SHAPES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_public_configurations_get_the_public_counts(path):
    "In the file's own coordinates (as the public counter) and in units of its frame scale (szrank's default)."
    topology, crossings, intersections = map(int, NAME.search(path.as_posix()).groups())
    for absolute in (True, False):
        defects = evaluate(*fitted_planes(path, topology), layout(topology), absolute=absolute)
        assert defects.degenerate[0] == 0
        assert (int(defects.crossings[0]), int(defects.intersections[0])) == (crossings, intersections), absolute


def test_public_rule_counts_near_misses_and_only_single_windings():
    "Tolerances only add crossings; the two rules stay within a defect or two on random configurations."
    normals, offsets = random_planes(np.random.default_rng(3), 100)
    L = layout(42)
    public, exact = evaluate(normals, offsets, L), evaluate_exact(normals, offsets, L)
    assert (public.crossings >= exact.crossings).all()
    assert np.abs(public.total - exact.total).mean() < 0.05 * np.median(exact.total)
    single = evaluate(normals[7], offsets[7], L)
    assert np.array_equal(single.cross[0], public.cross[7]) and np.array_equal(single.pierce[0], public.pierce[7])


def test_fast_counts_equal_evaluate_with_and_without_numba(monkeypatch):
    "count_totals (compiled when numba is there) gives evaluate's C, I and degenerate, configuration by configuration."
    from szrank import fastcount
    rng = np.random.default_rng(8)
    for topology in (0, 42, 58):
        L = layout(topology)
        normals, offsets = random_planes(rng, 60)
        normals[0, 1], offsets[0, 1] = normals[0, 0], offsets[0, 0]          # one degenerate configuration
        offsets = offsets * rng.uniform(0.5, 3.0, offsets.shape)
        want = evaluate(normals, offsets, L)
        expected = np.stack([want.crossings, want.intersections, want.degenerate], axis=1)
        assert np.array_equal(fastcount.count_totals(normals, offsets, L), expected)
        monkeypatch.setattr(fastcount, "numba", None)
        assert np.array_equal(fastcount.count_totals(normals, offsets, L), expected)
        monkeypatch.undo()
    for path in SHAPES:
        topology, crossings, intersections = map(int, NAME.search(path.as_posix()).groups())
        got = fastcount.count_totals(*fitted_planes(path, topology), layout(topology))
        assert got.tolist() == [[crossings, intersections, 0]]


def test_a_meet_on_a_rim_edge_near_its_corner_is_decided_by_the_planes_not_by_rounding():
    "The same configuration in two float spellings (moved, scaled) gets the same counts from both evaluators."
    from szrank.fastcount import count_totals
    rng = np.random.default_rng(0)
    normals, offsets = random_planes(rng, 300)
    L = layout(42)
    shift = np.array([0.3, -0.2, 0.1])
    moved = evaluate(normals, 1.7 * (offsets + normals @ shift), L)
    base = evaluate(normals, offsets, L)
    assert np.array_equal(base.intersections, moved.intersections)
    assert np.array_equal(count_totals(normals, offsets, L)[:, 1], base.intersections)
