"""Defects C and I by the strict rule (evaluate_exact) against an independent brute force in exact rational arithmetic, plus hand-built cases."""
from fractions import Fraction

import numpy as np
import pytest

from szrank.geometry.defects import evaluate_exact, face_polygons, layout, random_planes, winding_numbers
from szrank.geometry.topology import TOPOLOGIES, link_orders


# ---- the exact reference: written from the definitions, sharing no code with szrank.geometry.defects ----

def sub(a, b): return tuple(x - y for x, y in zip(a, b))
def dot(a, b): return sum(x * y for x, y in zip(a, b))
def cross3(a, b): return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def exact_vertex(planes, triple):
    (n1, d1), (n2, d2), (n3, d3) = (planes[f] for f in triple)
    det = dot(n1, cross3(n2, n3))
    if det == 0:
        return None
    terms = [tuple(Fraction(d) * c for c in cross3(b, c_)) for d, b, c_ in ((d1, n2, n3), (d2, n3, n1), (d3, n1, n2))]
    return tuple(sum(t[i] for t in terms) / det for i in range(3))


def project(normal, point):
    "Drop the coordinate where the normal is largest: an affine chart of the plane (orientation may flip)."
    axis = max(range(3), key=lambda i: abs(normal[i]))
    return tuple(point[i] for i in range(3) if i != axis)


def orient2(p, q, r):
    return (q[0] - p[0]) * (r[1] - p[1]) - (q[1] - p[1]) * (r[0] - p[0])


def on_segment(p, a, b):
    return orient2(a, b, p) == 0 and min(a[0], b[0]) <= p[0] <= max(a[0], b[0]) and min(a[1], b[1]) <= p[1] <= max(a[1], b[1])


def quadrant_winding(p, polygon):
    "Winding number by summing quadrant changes (a different algorithm from the ray rule under test)."
    def quadrant(v):
        x, y = v[0] - p[0], v[1] - p[1]
        return 0 if x > 0 and y >= 0 else 1 if x <= 0 and y > 0 else 2 if x < 0 and y <= 0 else 3
    total = 0
    for a, b in zip(polygon, polygon[1:] + polygon[:1]):
        delta = (quadrant(b) - quadrant(a)) % 4
        if delta == 3:
            delta = -1
        elif delta == 2:
            delta = 2 if orient2(a, b, p) > 0 else -2
        total += delta
    return total // 4


def exact_defects(facets, normals, offsets):
    "(C, I) of integer planes by exact arithmetic; faces are vertices 1..12 of `facets`."
    planes = {f + 1: (tuple(int(x) for x in normals[f]), int(offsets[f])) for f in range(12)}
    orders = link_orders(facets)
    vertex = {frozenset(t): exact_vertex(planes, t) for t in facets}
    polygon = {f: [vertex[frozenset((f, o[k], o[(k + 1) % 11]))] for k in range(11)] for f, o in enumerate(orders, 1)}
    crossings = 0
    for f in range(1, 13):
        normal = planes[f][0]
        corners = [project(normal, c) for c in polygon[f]]
        for k in range(11):
            for l in range(k + 2, 11):
                if k == 0 and l == 10:
                    continue
                p, q, r, s = corners[k], corners[(k + 1) % 11], corners[l], corners[(l + 1) % 11]
                if orient2(p, q, r) * orient2(p, q, s) < 0 and orient2(r, s, p) * orient2(r, s, q) < 0:
                    crossings += 1
    intersections = 0
    triangles_of = {}
    for t in facets:
        for a, b in ((t[0], t[1]), (t[0], t[2]), (t[1], t[2])):
            triangles_of.setdefault(frozenset((a, b)), []).append(t)
    for edge, (t1, t2) in triangles_of.items():
        P, Q = vertex[frozenset(t1)], vertex[frozenset(t2)]
        for f in set(range(1, 13)) - set(t1) - set(t2):
            normal, offset = planes[f]
            sP, sQ = dot(normal, P) - offset, dot(normal, Q) - offset
            if not sP * sQ < 0:
                continue
            X = tuple((sP * q - sQ * p) / (sP - sQ) for p, q in zip(P, Q))
            corners = [project(normal, c) for c in polygon[f]]
            x = project(normal, X)
            if any(on_segment(x, a, b) for a, b in zip(corners, corners[1:] + corners[:1])):
                continue                                 # on the face's rim: not its interior
            if quadrant_winding(x, corners) != 0:
                intersections += 1
    return crossings, intersections


def random_integer_planes(rng, spread):
    "Integer planes roughly tangent to a sphere of radius `spread` (so the exact reference stays exact)."
    normals = rng.integers(-1000, 1001, (12, 3))
    normals[np.abs(normals).sum(axis=1) == 0] = (1, 2, 3)
    offsets = np.round(np.linalg.norm(normals, axis=1) * spread * rng.uniform(0.5, 1.5, 12)).astype(np.int64)
    return normals, offsets


@pytest.mark.parametrize("index", [0, 47, 58])
def test_defects_match_exact_arithmetic_on_random_configurations(index):
    rng = np.random.default_rng(100 + index)
    facets = TOPOLOGIES[index]
    L = layout(index)
    totals = []
    for _ in range(6):
        normals, offsets = random_integer_planes(rng, 1.0)
        result = evaluate_exact(normals.astype(float), offsets.astype(float), L)
        assert result.feasible[0]
        got = (int(result.crossings[0]), int(result.intersections[0]))
        assert got == exact_defects(facets, normals, offsets)
        totals.append(sum(got))
    assert max(totals) > 0          # the comparison saw real defects


def test_batched_and_single_evaluation_agree():
    rng = np.random.default_rng(4)
    L = layout(12)
    normals, offsets = random_planes(rng, 9)
    batch = evaluate_exact(normals, offsets, L)
    for b in range(9):
        single = evaluate_exact(normals[b], offsets[b], L)
        assert np.array_equal(single.cross[0], batch.cross[b]) and np.array_equal(single.pierce[0], batch.pierce[b])
        assert single.face_piercing.sum() == 2 * single.intersections[0]


def test_defects_invariant_under_similarities_and_plane_sign():
    rng = np.random.default_rng(8)
    L = layout(47)
    normals, offsets = random_planes(rng)
    base = evaluate_exact(normals, offsets, L)
    q, _ = np.linalg.qr(rng.standard_normal((3, 3)))       # a rotation or a reflection
    shift = rng.standard_normal(3) * 5
    moved = evaluate_exact(normals @ q.T, 3.7 * (offsets + normals @ shift), L)
    signs = np.where(rng.random(12) < 0.5, -1.0, 1.0)
    flipped = evaluate_exact(normals * signs[:, None], offsets * signs, L)
    for other in (moved, flipped):
        assert np.array_equal(other.cross, base.cross) and np.array_equal(other.pierce, base.pierce)


def test_single_plane_moves_count_alike_batched_and_one_by_one():
    "A chain of single-plane moves (half of them kept), counted as one batch, row by row as counted alone."
    rng = np.random.default_rng(21)
    L = layout(33)
    normals, offsets = random_planes(rng)
    trials = []
    for step in range(150):
        plane = int(rng.integers(12))
        normal = normals[plane] + rng.choice([0.02, 0.2, 1.0]) * rng.standard_normal(3)
        offset = offsets[plane] + 0.3 * rng.standard_normal()
        trial_n, trial_d = normals.copy(), offsets.copy()
        trial_n[plane], trial_d[plane] = normal, offset
        trials.append((trial_n, trial_d))
        if rng.random() < 0.5:
            normals, offsets = trial_n, trial_d
    batch = evaluate_exact(np.stack([n for n, _ in trials]), np.stack([d for _, d in trials]), L)
    for step, (trial_n, trial_d) in enumerate(trials):
        want = evaluate_exact(trial_n, trial_d, L)
        for field in ("cross", "pierce", "face_crossings", "face_piercing", "face_pierced", "degenerate"):
            assert np.array_equal(getattr(batch, field)[step], getattr(want, field)[0]), (step, field)
    assert np.array_equal(evaluate_exact(normals, offsets, L).pierce[0],
                          batch.pierce[max(k for k, (n, _) in enumerate(trials) if n is normals)])


def test_hand_built_winding_cases():
    square = np.array([[0, 0], [1, 0], [1, 1], [0, 1]], float)
    assert winding_numbers([0.5, 0.5], square) == 1 and winding_numbers([0.5, 0.5], square[::-1]) == -1
    assert winding_numbers([2.0, 0.5], square) == 0
    twice = np.concatenate([square, square])                  # a square traversed twice winds twice
    assert winding_numbers([0.5, 0.5], twice) == 2
    bowtie = np.array([[0, 0], [2, 2], [2, 0], [0, 2]], float)
    assert sorted(winding_numbers([[0.5, 1.0], [1.5, 1.0]], np.stack([bowtie, bowtie])).tolist()) == [-1, 1]
    for p in ([0.5, 1.0], [1.5, 1.0], [1.0, 0.3]):
        assert winding_numbers(p, bowtie) == quadrant_winding(tuple(p), [tuple(v) for v in bowtie.tolist()])


def test_degenerate_configurations_are_reported_not_raised():
    rng = np.random.default_rng(2)
    L = layout(0)
    normals, offsets = random_planes(rng)
    same = normals.copy(), offsets.copy()
    same[0][5], same[1][5] = normals[4], offsets[4]           # plane 5 equals plane 4
    r = evaluate_exact(*same, L)
    assert r.near_parallel[0] == 2 and not r.feasible[0]
    polygons = face_polygons(*same, L)
    assert np.isnan(polygons).any() and np.isfinite(polygons[0, 0]).any()
    # three planes through a common line direction: a vertex at infinity or near-parallel, never an exception
    tilted = normals.copy()
    t = L.triangles[0]
    tilted[t[2]] = tilted[t[0]] + tilted[t[1]] + 1e-12
    r2 = evaluate_exact(tilted, offsets, L)
    assert r2.degenerate[0] >= 1
    with pytest.raises(ValueError, match="normal is zero"):
        evaluate_exact(np.zeros((12, 3)), offsets, L)
    with pytest.raises(ValueError, match="planes must be"):
        evaluate_exact(normals[:11], offsets[:11], L)


def test_hand_built_exact_reference_on_a_cube_like_start():
    # the exact reference itself, on a case small enough to reason about: a vertex of three axis planes
    planes = {1: ((1, 0, 0), 2), 2: ((0, 1, 0), 3), 3: ((0, 0, 1), 5)}
    assert exact_vertex(planes, (1, 2, 3)) == (2, 3, 5)
    assert quadrant_winding((0, 0), [(1, -1), (1, 1), (-1, 1), (-1, -1)]) == 1
    assert quadrant_winding((3, 0), [(1, -1), (1, 1), (-1, 1), (-1, -1)]) == 0
