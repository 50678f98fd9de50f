"""The asinh coding, display mapping and display PSNR (suvi_fill.physics.coding) against the trainer's definitions."""
import numpy as np
import pytest
import torch

from suvi_fill.physics import coding
from suvi_fill.physics import timebase


def seed_display_map(coded, eps=0.0):
    "The trainer seed's display_map, verbatim in torch."
    radiance = torch.sinh(coded.clamp(-1, 1) * coding.ASINH_RANGE) * coding.ASINH_SCALE
    out = []
    for index, wavelength in enumerate(timebase.WAVELENGTHS):
        vmin, vmax, gamma = coding.DISPLAY_MAPPING[wavelength]
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
    truth = coding.encode(radiance)
    sigma = np.exp(rng.uniform(np.log(0.002), np.log(0.05), (4, 6, 1, 1)))      # errors differ by band
    prediction = np.clip(truth + sigma * rng.standard_normal(truth.shape), -1, 1).astype(np.float32)
    lost = (rng.random((4, 6)) < 0.4).astype(np.float32)
    lost[0, 3] = 1
    return prediction, truth, lost


def test_mapping_is_the_seed_formula():
    rng = np.random.default_rng(1)
    for band in timebase.WAVELENGTHS:
        r = np.exp(rng.normal(-2, 3, 1000))
        vmin, vmax, gamma = coding.DISPLAY_MAPPING[band]
        assert np.array_equal(coding.to_display(r, band), ((r - vmin) / vmax).clip(0, 1) ** gamma)
        assert vmin > 0 and vmax > 0 and 0.375 <= gamma <= 0.5


def test_coded_input_matches_the_trainer_display_map(batch):
    prediction, _, _ = batch
    ours = coding.to_display(prediction, coded=True)
    theirs = seed_display_map(torch.from_numpy(prediction).double()).numpy()
    assert np.allclose(ours, theirs, atol=1e-9)
    radiance = coding.decode(prediction)
    assert np.allclose(coding.to_display(radiance), ours, atol=2e-3)


def test_psnr_is_the_trainer_definition(batch):
    prediction, truth, lost = batch
    ours = coding.display_psnr(prediction, truth, lost)
    theirs = seed_display_psnr(torch.from_numpy(prediction), torch.from_numpy(truth), torch.from_numpy(lost))
    assert ours == pytest.approx(theirs, abs=0.02)
    # Per band then averaged, which is not the pooled MSE.
    shown, target = coding.to_display(prediction, coded=True), coding.to_display(truth, coded=True)
    mse = ((shown - target) ** 2).mean(axis=(-2, -1))
    pooled = 10 * np.log10(1 / ((mse * lost).sum() / lost.sum()))
    assert ours > pooled + 1.0
    per_band = coding.display_psnr_by_band(prediction, truth, lost)
    assert set(per_band) == {b for i, b in enumerate(timebase.WAVELENGTHS) if lost[:, i].any()}


def test_single_sample_and_perfect_answer(batch):
    prediction, truth, lost = batch
    one = coding.display_psnr(prediction[0], truth[0], lost[0])
    assert one == pytest.approx(coding.display_psnr(prediction[:1], truth[:1], lost[:1]))
    assert coding.display_psnr(truth, truth, lost) == pytest.approx(120.0)
    assert coding.display_psnr(prediction, truth, np.zeros_like(lost)) == 0.0


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="no display mapping"):
        coding.to_display(np.ones(3), 211)
    with pytest.raises(ValueError, match="axis -3"):
        coding.to_display(np.ones((5, 4, 4)))
    with pytest.raises(ValueError, match="differ in shape"):
        coding.display_psnr(np.ones((6, 4, 4)), np.ones((6, 4, 5)), np.ones(6))


def test_trainer_losses_agree_when_present(batch):
    losses = pytest.importorskip("suvi_fill.model.losses")
    prediction, truth, lost = batch
    if hasattr(losses, "display_map"):
        theirs = losses.display_map(torch.from_numpy(prediction), eps=0.0).double().numpy()
        assert np.allclose(coding.to_display(prediction, coded=True), theirs, atol=1e-4)
    if hasattr(losses, "display_psnr"):
        theirs = losses.display_psnr(torch.from_numpy(prediction), torch.from_numpy(truth), torch.from_numpy(lost))
        assert coding.display_psnr(prediction, truth, lost) == pytest.approx(theirs, abs=0.02)


def test_band_psnr_is_the_bench_contract_and_the_old_names_remain(batch):
    prediction, truth, lost = batch
    per = coding.band_psnr(prediction, truth)
    assert per.shape == (4, 6) and coding.band_psnr(prediction[0], truth[0]).shape == (6,)
    shown, target = coding.to_display(prediction, coded=True), coding.to_display(truth, coded=True)
    expected = 10 * np.log10(1 / np.maximum(((shown - target) ** 2).mean(axis=(-2, -1)), coding.MSE_FLOOR))
    assert np.array_equal(per, expected)
    assert coding.display_psnr(prediction, truth, lost) == pytest.approx((per * lost).sum() / lost.sum())
    from suvi_fill.corpus import shards as dataset
    assert dataset.decode is coding.decode
    assert dataset.ASINH_RANGE == coding.ASINH_RANGE and dataset.SATURATION == coding.SATURATION


def test_torch_twins_agree_with_numpy():
    values = np.array([-1.5, 0.0, 0.01, 0.1, 245.97, 11999.0, 1e9], dtype=np.float32)
    assert np.allclose(coding.encode_torch(torch.from_numpy(values)).numpy(), coding.encode(values), atol=1e-6)
    coded = coding.encode(values)
    assert np.allclose(coding.decode_torch(torch.from_numpy(coded)).numpy(), coding.decode(coded), rtol=1e-5)


def test_importing_coding_does_not_import_torch():
    import subprocess
    import sys
    code = "import sys, suvi_fill.physics.coding; print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "False"
