"""szrank.train.metrics: the streaming accumulator against scikit-learn, and the gate's rules."""
import math

import numpy as np
import pytest
from sklearn.calibration import calibration_curve
from sklearn.metrics import average_precision_score, brier_score_loss, log_loss

from szrank.train.metrics import MetricAccumulator, report_gate, scalar_metrics

N = 20_000


def accumulate(score, label, gain=None, batches=7):
    "Feed the accumulator in uneven batches, as evaluation does."
    n = len(score)
    gain = np.zeros(n) if gain is None else gain
    z = np.zeros(n, np.int64)
    accumulator = MetricAccumulator()
    edges = np.linspace(0, n, batches + 1).astype(int)
    for start, stop in zip(edges[:-1], edges[1:]):
        s = slice(start, stop)
        accumulator.add(score[s], gain[s], label[s], gain[s], np.zeros(stop - start, bool),
                        np.full((stop - start, 12), 1 / 12), np.full((stop - start, 5), 0.2),
                        np.full((stop - start, 3), 1 / 3), z[s], z[s], z[s])
    return accumulator.finalize()


@pytest.fixture(params=[0, 1, 2])
def scored(request):
    rng = np.random.default_rng(request.param)
    latent = rng.normal(size=N)
    score = 1 / (1 + np.exp(-(1.5 * latent - 0.8)))
    label = (rng.random(N) < 1 / (1 + np.exp(-(2.0 * latent - 1.0)))).astype(float)
    return score, label


def test_average_precision_matches_sklearn_within_binning(scored):
    score, label = scored
    metrics = accumulate(score, label)
    # Scores within one bin of width 1/4096 are ties for the accumulator; the
    # difference this makes is a small fraction of a percent here.
    assert metrics["average_precision"] == pytest.approx(average_precision_score(label, score), abs=2e-3)
    # On scores already on the 4096-bin grid, the two agree to rounding.
    on_grid = (np.floor(score * 4096) + 0.5) / 4096
    assert accumulate(on_grid, label)["average_precision"] == pytest.approx(
        average_precision_score(label, on_grid), abs=1e-9)


def test_brier_and_bce_match_sklearn(scored):
    score, label = scored
    metrics = accumulate(score, label)
    assert metrics["brier_score"] == pytest.approx(brier_score_loss(label, score), rel=1e-9)
    assert metrics["binary_cross_entropy"] == pytest.approx(log_loss(label, score), rel=1e-9)
    prevalence = label.mean()
    assert metrics["prevalence"] == pytest.approx(prevalence)
    assert metrics["null_brier_score"] == pytest.approx(brier_score_loss(label, np.full(N, prevalence)))


def test_calibration_bins_match_sklearn(scored):
    score, label = scored
    metrics = accumulate(score, label)
    bins = metrics["calibration_bins"]
    prob_true, prob_pred = calibration_curve(label, score, n_bins=20, strategy="uniform")
    present = [i for i, c in enumerate(bins["count"]) if c > 0]
    assert sum(bins["count"]) == N
    np.testing.assert_allclose([bins["positive_rate"][i] for i in present], prob_true, atol=1e-9)
    np.testing.assert_allclose([bins["mean_probability"][i] for i in present], prob_pred, atol=1e-9)
    counts = np.histogram(score, bins=np.linspace(0, 1, 21))[0]
    assert bins["count"] == counts.tolist()
    # ECE is the count-weighted gap of those bins.
    weights = counts[counts > 0] / N
    assert metrics["expected_calibration_error"] == pytest.approx(float((weights * abs(prob_true - prob_pred)).sum()))


def test_precision_recall_curve_and_deciles(scored):
    score, label = scored
    gain = 2 * label - 1 + np.random.default_rng(5).normal(0, 0.1, N)
    metrics = accumulate(score, label, gain)
    curve = metrics["precision_recall"]
    assert curve["recall"][-1] == pytest.approx(1.0)
    assert curve["precision"][-1] == pytest.approx(label.mean())
    assert np.all(np.diff(curve["recall"]) >= 0)
    order = np.argsort(-score, kind="stable")
    deciles = [gain[order[i * N // 10:(i + 1) * N // 10]].mean() for i in range(10)]
    np.testing.assert_allclose(metrics["gain_by_decile"], deciles, atol=0.02)
    assert metrics["gain_by_decile"][0] - metrics["mean_signed_gain"] == pytest.approx(metrics["top_k_gain"], abs=1e-9)
    assert metrics["top_k_gain"] == pytest.approx(gain[order[: N // 10]].mean() - gain.mean(), abs=0.02)


def test_policy_metrics():
    n = 1000
    rng = np.random.default_rng(3)
    plane = rng.integers(0, 12, n); move = rng.integers(0, 5, n); scale = rng.integers(0, 3, n)
    useful = rng.random(n) < 0.5
    probs = [np.full((n, k), 0.5 / (k - 1)) for k in (12, 5, 3)]
    for p, a in zip(probs, (plane, move, scale)):
        p[np.arange(n), a] = 0.5
    accumulator = MetricAccumulator()
    accumulator.add(np.full(n, 0.5), np.zeros(n), useful.astype(float), np.zeros(n), useful, *probs,
                    plane, move, scale)
    metrics = accumulator.finalize()
    assert metrics["useful_policy_records"] == useful.sum()
    assert metrics["plane_top1_accuracy"] == metrics["move_top1_accuracy"] == metrics["scale_top1_accuracy"] == 1.0
    assert metrics["policy_cross_entropy"] == pytest.approx(math.log(2))
    assert metrics["policy_uniform_cross_entropy"] == pytest.approx((math.log(12) + math.log(5) + math.log(3)) / 3)


def test_empty_split_is_an_error():
    with pytest.raises(ValueError, match="empty split"):
        MetricAccumulator().finalize()


def good_metrics(**changes):
    rng = np.random.default_rng(9)
    latent = rng.normal(size=5000)
    label = (rng.random(5000) < 1 / (1 + np.exp(-2 * latent))).astype(float)
    metrics = accumulate(1 / (1 + np.exp(-2 * latent)), label, 2 * label - 1)
    metrics.update(changes)
    return metrics


def test_gate_passes_a_good_model_and_ignores_the_curves():
    good = good_metrics()
    assert not isinstance(good["calibration_bins"], (int, float))
    assert set(scalar_metrics(good)) == {k for k, v in good.items() if not isinstance(v, (dict, list))}
    assert report_gate(good, good, good, 1000) == (True, [])


@pytest.mark.parametrize("split, changes, reason", [
    ("validation", {"records": 10}, "validation: fewer than 1000 records"),
    ("test", {"prevalence": 0.0}, "test: split needs both positive and negative outcomes"),
    ("stress", {"brier_score": float("nan")}, "stress: non-finite metric"),
    ("validation", {"average_precision": 0.1, "prevalence": 0.1}, "validation: AP does not beat prevalence"),
    ("test", {"top_k_gain": 0.0}, "test: top-decile rank has no signed-gain uplift"),
    ("validation", {"brier_score": 0.3, "null_brier_score": 0.25}, "validation: Brier score is worse than the null model by >5%"),
    ("test", {"policy_cross_entropy": 1.03 * 1.7}, "test: policy CE is worse than uniform by >2%"),
    ("stress", {"average_precision": 0.2, "prevalence": 0.25}, "stress: AP falls materially below prevalence"),
    ("stress", {"top_k_gain": -0.06}, "stress: top-decile signed-gain uplift is materially negative"),
])
def test_gate_rules(split, changes, reason):
    if "policy_cross_entropy" in changes:
        changes = dict(changes, policy_uniform_cross_entropy=1.7)
    splits = {"validation": good_metrics(), "test": good_metrics(), "stress": good_metrics()}
    splits[split] = good_metrics(**changes)
    approved, reasons = report_gate(splits["validation"], splits["test"], splits["stress"], 1000)
    assert not approved and reason in reasons


def test_gate_margins_are_the_seeds():
    good = good_metrics()
    # Stress tolerates AP down to 0.95 x prevalence and an uplift down to -0.05; validation does not.
    stress = good_metrics(average_precision=0.96 * good["prevalence"], top_k_gain=-0.04)
    assert report_gate(good, good, stress, 1000) == (True, [])
    brier_ok = good_metrics(brier_score=1.049 * good["null_brier_score"])
    assert report_gate(brier_ok, good, good, 1000)[0]
