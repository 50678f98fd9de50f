"""The v1 feature block: layout, invariance under translation and scaling, finiteness."""
import numpy as np

from szrank.stream import format as stream
from szrank.ranker.features import (FACE_FEATURE_NAMES, FACE_FEATURES, FEATURE_FLOATS, GLOBAL_FEATURE_NAMES, GLOBAL_FEATURES,
                             features, split_features)
from szrank.geometry.defects import evaluate, layout, random_planes


def test_layout_matches_the_stream_format():
    assert (FACE_FEATURES, GLOBAL_FEATURES, FEATURE_FLOATS) == (16, 24, 216)
    assert (stream.FACE_FEATURES, stream.GLOBAL_FEATURES, stream.FEATURE_FLOATS) == (16, 24, 216)
    assert len(set(FACE_FEATURE_NAMES)) == 16 and len(set(GLOBAL_FEATURE_NAMES)) == 24


def test_features_are_invariant_to_translation_and_scaling():
    rng = np.random.default_rng(12)
    for index in (3, 47):
        L = layout(index)
        normals, offsets = random_planes(rng, 5)
        offsets = offsets * rng.uniform(0.5, 2.0, offsets.shape)
        base = features(normals, offsets, L, context=(0.5, 17, 0.2))
        for factor in (1e-3, 0.4, 250.0):
            shift = rng.standard_normal(3) * 10
            moved = features(normals, factor * (offsets + normals @ shift), L, context=(0.5, 17, 0.2))
            np.testing.assert_allclose(moved, base, rtol=2e-4, atol=2e-4)


def test_feature_values_follow_their_definitions():
    rng = np.random.default_rng(5)
    L = layout(10)
    normals, offsets = random_planes(rng, 4)
    block = features(normals, offsets, L, context=[(0.1 * b, b, 1.0) for b in range(4)])
    faces, globals_ = split_features(block)
    defects = evaluate(normals, offsets, L)
    g = dict(zip(GLOBAL_FEATURE_NAMES, globals_.T))
    np.testing.assert_array_equal(g["crossings"], defects.crossings)
    np.testing.assert_array_equal(g["intersections"], defects.intersections)
    np.testing.assert_array_equal(g["total"], defects.total)
    np.testing.assert_array_equal(faces[..., FACE_FEATURE_NAMES.index("crossings")].sum(-1), defects.crossings)
    np.testing.assert_array_equal(faces[..., FACE_FEATURE_NAMES.index("pierced")].sum(-1), defects.intersections)
    np.testing.assert_allclose(faces[..., :3], normals, atol=1e-6)
    np.testing.assert_allclose(g["progress"], [0, 0.1, 0.2, 0.3], atol=1e-6)
    np.testing.assert_allclose(g["log_best"], np.log1p([0, 1, 2, 3]), atol=1e-6)
    assert block.dtype == np.float32 and block.shape == (4, 216)
    # without a reference the configuration is its own: no gain
    np.testing.assert_array_equal(g["crossings_gain"], 0)
    np.testing.assert_array_equal(g["intersections_gain"], 0)


def test_a_proposal_carries_its_gain_over_the_anchor():
    "Features 7 and 8 are the reference's counts minus the configuration's, per row (labels are anchor-relative)."
    from szrank.search.moves import apply_move
    rng = np.random.default_rng(8)
    L = layout(21)
    normals, offsets = random_planes(rng)
    anchor = evaluate(normals, offsets, L)
    moved = [apply_move(normals, offsets, plane, 1, 2, rng) for plane in range(4)]
    n, d = np.stack([m[0] for m in moved]), np.stack([m[1] for m in moved])
    proposal = evaluate(n, d, L)
    reference = np.repeat([[anchor.crossings[0], anchor.intersections[0]]], 4, axis=0)
    _, globals_ = split_features(features(n, d, L, reference=reference))
    g = dict(zip(GLOBAL_FEATURE_NAMES, globals_.T))
    np.testing.assert_array_equal(g["crossings_gain"], anchor.crossings[0] - proposal.crossings)
    np.testing.assert_array_equal(g["intersections_gain"], anchor.intersections[0] - proposal.intersections)
    assert (g["crossings_gain"] + g["intersections_gain"] != 0).any()      # the moves changed something
    # one pair broadcasts to every row
    np.testing.assert_array_equal(features(n, d, L, reference=reference[0]), features(n, d, L, reference=reference))


def test_convex_and_self_crossing_faces():
    # Planes tangent to a sphere with small random tilts keep some faces convex-looking; whatever the
    # configuration, turning numbers of faces without degenerate corners are integers, simple faces have |turning| 1 and convexity 1,
    # and convexity (the majority share) lies in [1/2, 1].
    from szrank.ranker.features import slog
    rng = np.random.default_rng(1)
    L = layout(47)
    normals, offsets = random_planes(rng, 20)
    faces, globals_ = split_features(features(normals, offsets, L))
    turning = faces[..., FACE_FEATURE_NAMES.index("turning")]
    convexity = faces[..., FACE_FEATURE_NAMES.index("convexity")]
    whole = faces[..., FACE_FEATURE_NAMES.index("degenerate_corners")] == 0
    assert whole.mean() > 0.5
    np.testing.assert_allclose(turning[whole], np.round(turning[whole]))
    assert ((convexity >= 0.5 - 1e-6) & (convexity <= 1 + 1e-6)).all()
    simple = ((np.abs(turning) == 1) & (np.isclose(convexity, 1))).sum(-1)
    np.testing.assert_array_equal(globals_[:, GLOBAL_FEATURE_NAMES.index("simple_faces")], simple)
    assert slog(0.0) == 0.0 and np.isclose(slog(-(np.e - 1)), -1.0)


def test_degenerate_configurations_give_finite_features():
    rng = np.random.default_rng(9)
    L = layout(0)
    normals, offsets = random_planes(rng)
    normals[3], offsets[3] = normals[2], offsets[2]
    block = features(normals, offsets, L)
    assert np.isfinite(block).all()
    faces, globals_ = split_features(block)
    assert globals_[0, GLOBAL_FEATURE_NAMES.index("degenerate")] >= 2
    assert faces[0, :, FACE_FEATURE_NAMES.index("degenerate_corners")].sum() >= 2
