"""The bench's display mapping and display PSNR (suvi_fill.metrics) against the trainer's definitions."""
import numpy as np
import pytest
import torch

from suvi_fill import dataset, metrics, paths


def seed_display_map(coded, eps=0.0):
    "The trainer seed's display_map, verbatim in torch."
    radiance = torch.sinh(coded.clamp(-1, 1) * dataset.ASINH_RANGE) * dataset.ASINH_SCALE
    out = []
    for index, wavelength in enumerate(paths.WAVELENGTHS):
        vmin, vmax, gamma = metrics.DISPLAY_MAPPING[wavelength]
        scaled = ((radiance[:, index] - vmin) / vmax).clamp(0.0, 1.0)
        out.append((scaled + eps) ** gamma - eps**gamma)
    return torch.stack(out, dim=1)


def seed_display_psnr(prediction, target, lost):
    "The trainer seed's display_psnr, verbatim in torch."
    with torch.no_grad():
        shown = seed_display_map(prediction.float(), eps=0.0)
        truth = seed_display_map(target.float(), eps=0.0)
        mse = ((shown - truth) ** 2).mean(dim=(-2, -1)).clamp(min=1e-12)
        psnr = 10.0 * torch.log10(1.0 / mse)
        return float((psnr * lost).sum() / lost.sum().clamp(min=1.0))


@pytest.fixture()
def batch():
    rng = np.random.default_rng(7)
    radiance = np.exp(rng.normal(-1.0, 2.0, (4, 6, 24, 24)))
    truth = dataset.encode(radiance)
    sigma = np.exp(rng.uniform(np.log(0.002), np.log(0.05), (4, 6, 1, 1)))      # errors differ by band
    prediction = np.clip(truth + sigma * rng.standard_normal(truth.shape), -1, 1).astype(np.float32)
    lost = (rng.random((4, 6)) < 0.4).astype(np.float32)
    lost[0, 3] = 1
    return prediction, truth, lost


def test_mapping_is_the_seed_formula():
    rng = np.random.default_rng(1)
    for band in paths.WAVELENGTHS:
        r = np.exp(rng.normal(-2, 3, 1000))
        vmin, vmax, gamma = metrics.DISPLAY_MAPPING[band]
        assert np.array_equal(metrics.to_display(r, band), ((r - vmin) / vmax).clip(0, 1) ** gamma)
        assert vmin > 0 and vmax > 0 and 0.375 <= gamma <= 0.5


def test_coded_input_matches_the_trainer_display_map(batch):
    prediction, _, _ = batch
    ours = metrics.to_display(prediction, coded=True)
    theirs = seed_display_map(torch.from_numpy(prediction).double()).numpy()
    assert np.allclose(ours, theirs, atol=1e-9)
    radiance = dataset.decode(prediction)
    assert np.allclose(metrics.to_display(radiance), ours, atol=2e-3)


def test_psnr_is_the_trainer_definition(batch):
    prediction, truth, lost = batch
    ours = metrics.display_psnr(prediction, truth, lost)
    theirs = seed_display_psnr(torch.from_numpy(prediction), torch.from_numpy(truth), torch.from_numpy(lost))
    assert ours == pytest.approx(theirs, abs=0.02)
    # Per band then averaged, which is not the pooled MSE.
    shown, target = metrics.to_display(prediction, coded=True), metrics.to_display(truth, coded=True)
    mse = ((shown - target) ** 2).mean(axis=(-2, -1))
    pooled = 10 * np.log10(1 / ((mse * lost).sum() / lost.sum()))
    assert ours > pooled + 1.0
    per_band = metrics.display_psnr_by_band(prediction, truth, lost)
    assert set(per_band) == {b for i, b in enumerate(paths.WAVELENGTHS) if lost[:, i].any()}


def test_single_sample_and_perfect_answer(batch):
    prediction, truth, lost = batch
    one = metrics.display_psnr(prediction[0], truth[0], lost[0])
    assert one == pytest.approx(metrics.display_psnr(prediction[:1], truth[:1], lost[:1]))
    assert metrics.display_psnr(truth, truth, lost) == pytest.approx(120.0)
    assert metrics.display_psnr(prediction, truth, np.zeros_like(lost)) == 0.0


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="no display mapping"):
        metrics.to_display(np.ones(3), 211)
    with pytest.raises(ValueError, match="axis -3"):
        metrics.to_display(np.ones((5, 4, 4)))
    with pytest.raises(ValueError, match="differ in shape"):
        metrics.display_psnr(np.ones((6, 4, 4)), np.ones((6, 4, 5)), np.ones(6))


def test_trainer_losses_agree_when_present(batch):
    losses = pytest.importorskip("suvi_fill.losses")
    prediction, truth, lost = batch
    if hasattr(losses, "display_map"):
        theirs = losses.display_map(torch.from_numpy(prediction), eps=0.0).double().numpy()
        assert np.allclose(metrics.to_display(prediction, coded=True), theirs, atol=1e-4)
    if hasattr(losses, "display_psnr"):
        theirs = losses.display_psnr(torch.from_numpy(prediction), torch.from_numpy(truth), torch.from_numpy(lost))
        assert metrics.display_psnr(prediction, truth, lost) == pytest.approx(theirs, abs=0.02)
