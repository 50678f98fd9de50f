"""suvi_fill.model.losses: the original trainer's loss and PSNR, against the numpy bench reference."""
import math

import numpy as np
import pytest
import torch

from suvi_fill.physics import coding as metrics
from suvi_fill.corpus import shards as dataset
from suvi_fill.model import losses
from suvi_fill.physics import timebase


def vmin_code(wavelength):
    return math.asinh(metrics.DISPLAY_MAPPING[wavelength][0] / dataset.ASINH_SCALE) / dataset.ASINH_RANGE


#: The original trainer's loss: its two weights and two knees, as its source states them.
ORIGINAL_TRAINER = dict(gradient_weight=0.5, display_weight=0.25, charbonnier_eps=1e-3, display_eps=5e-3)


def test_the_criterion_is_the_original_trainers_sum():
    "The criterion rebuilt by hand from the original trainer's constants: a changed weight, knee or term changes it."
    generator = torch.Generator().manual_seed(0)
    target = 0.4 * torch.rand(2, 6, 8, 8, generator=generator, dtype=torch.float64)
    prediction = target + 2e-3 * torch.randn(2, 6, 8, 8, generator=generator, dtype=torch.float64)  # near the knee
    knee, soft = ORIGINAL_TRAINER["charbonnier_eps"], ORIGINAL_TRAINER["display_eps"]
    charbonnier = lambda a, b: torch.sqrt((a - b) ** 2 + knee**2).mean()
    gradient = sum(charbonnier(prediction.diff(dim=axis), target.diff(dim=axis)) for axis in (-1, -2)) / 2
    display = charbonnier(losses.display_map(prediction, eps=soft), losses.display_map(target, eps=soft))
    expected = (charbonnier(prediction, target) + ORIGINAL_TRAINER["gradient_weight"] * gradient
                + ORIGINAL_TRAINER["display_weight"] * display)
    assert float(losses.criterion(prediction, target, torch.ones(2, 6))) == pytest.approx(float(expected), rel=1e-9)


def test_hard_display_map_is_the_bench_mapping():
    rng = np.random.default_rng(0)
    coded = np.concatenate([np.linspace(-1, 1, 3000), rng.uniform(-0.2, 1, 3000),
                            [vmin_code(w) for w in timebase.WAVELENGTHS]]).astype(np.float32)
    coded = np.broadcast_to(coded, (2, 6, 1, coded.size)).copy()
    coded[1] = rng.uniform(-1, 1, coded[1].shape)
    reference = metrics.to_display(coded, coded=True)
    exact = losses.display_map(torch.from_numpy(coded).double(), eps=0.0).numpy()
    assert np.abs(exact - reference).max() < 1e-9                     # the same mapping
    ours = losses.display_map(torch.from_numpy(coded), eps=0.0).double().numpy()
    assert np.abs(ours - reference).max() < 5e-4                      # fp32: steep just above vmin
    assert np.abs(ours - reference).mean() < 1e-6
    for band, wavelength in enumerate(timebase.WAVELENGTHS):
        radiance = dataset.decode(coded[:, band]).astype(np.float64)
        assert np.abs(ours[:, band] - metrics.to_display(radiance, wavelength)).max() < 5e-4


def test_soft_display_map_keeps_zero_and_stays_close():
    soft = losses.display_map(torch.linspace(-1, 1, 5001).expand(1, 6, 1, -1).contiguous())
    hard = losses.display_map(torch.linspace(-1, 1, 5001).expand(1, 6, 1, -1).contiguous(), eps=0.0)
    assert float(soft[..., 0].abs().max()) < 1e-7                  # below vmin: 0, to an fp32 ulp
    assert float((soft - hard).abs().max()) < 0.15 and float(soft.max()) <= 1.0


def worst_gradient(prediction, target, lost, **kwargs):
    prediction = prediction.clone().requires_grad_(True)
    losses.criterion(prediction, target, lost, **kwargs).backward()
    supervised = prediction.shape[-2] * prediction.shape[-1] * float(lost.sum())
    return prediction.grad, prediction.grad.abs().amax(dim=(0, 2, 3)) * supervised


def sweep():
    "Predictions over the whole code range, each band's vmin and its neighbours; targets low, at vmin, high."
    vmins = torch.tensor([vmin_code(w) for w in timebase.WAVELENGTHS])
    near = vmins[:, None] + torch.tensor([-1e-6, 0.0, 1e-6])[None]
    codes = torch.cat([torch.linspace(-1, 1, 2001).expand(6, -1), near], 1)
    prediction = codes.reshape(1, 6, 1, -1).expand(4, 6, 2, -1).contiguous()
    n = prediction.shape[-1]
    target = torch.stack([torch.full((6, 2, n), -0.05), vmins[:, None, None].expand(6, 2, n),
                          torch.full((6, 2, n), 0.3), torch.full((6, 2, n), 1.0)])
    return prediction, target


def test_loss_gradient_is_finite_and_bounded_over_the_whole_code_range():
    prediction, target = sweep()
    grad, worst = worst_gradient(prediction, target, torch.ones(4, 6))
    assert torch.isfinite(grad).all()
    assert float(worst.max()) <= 10.0, worst
    # And the display term alone never exceeds the original trainer's ~10 slope either.
    codes = prediction.clone().requires_grad_(True)
    losses.display_map(codes).sum().backward()
    assert torch.isfinite(codes.grad).all() and float(codes.grad.abs().max()) <= 10.0


def test_the_hard_mapping_would_not_be_bounded():
    # What the original trainer replaced: at eps ~ 0 the display slope at vmin explodes.
    codes = torch.tensor([vmin_code(w) for w in timebase.WAVELENGTHS]).reshape(1, 6, 1, 1)
    codes = (codes + 1e-5).requires_grad_(True)
    losses.display_map(codes, eps=1e-8).sum().backward()
    assert float(codes.grad.abs().max()) > 100


def test_only_lost_bands_are_supervised():
    target = 0.4 * torch.rand(2, 6, 16, 16)
    prediction = target + 0.05 * torch.randn(2, 6, 16, 16)
    lost = torch.tensor([[1.0, 0, 0, 1, 0, 0], [0, 0, 1, 0, 0, 0]])
    base = losses.criterion(prediction, target, lost)
    changed = prediction.clone()
    changed[lost == 0] += 0.3
    assert torch.equal(losses.criterion(changed, target, lost), base)
    grad, _ = worst_gradient(prediction, target, lost)
    assert float(grad[lost == 0].abs().max()) == 0.0 and float(grad[lost == 1].abs().max()) > 0
    perfect = losses.criterion(target, target, lost)
    knee = losses.CHARBONNIER_EPS * (1 + losses.GRADIENT_WEIGHT + losses.DISPLAY_WEIGHT)
    assert abs(float(perfect) - knee) < 1e-7


def test_gradient_term_penalises_blur():
    target = torch.zeros(1, 6, 32, 32)
    target[..., 16:, :] = 0.5                                    # a sharp edge
    blurred = torch.nn.functional.avg_pool2d(target, 5, 1, 2, count_include_pad=False)
    shifted_mean = target + float((blurred - target).abs().mean())   # same mean error, sharp
    lost = torch.ones(1, 6)
    assert losses.gradient_loss(blurred, target, lost) > 3 * losses.gradient_loss(shifted_mean, target, lost)


def test_psnr_is_per_band_then_averaged():
    truth = 0.5 * torch.rand(3, 6, 20, 20)
    noise = torch.tensor([0.001, 0.003, 0.01, 0.03, 0.1, 0.3]).reshape(1, 6, 1, 1)
    prediction = (truth + noise * torch.randn(3, 6, 20, 20)).clamp(-1, 1)
    lost = torch.tensor([[1.0, 1, 0, 0, 1, 1], [0, 1, 1, 1, 0, 0], [1, 0, 0, 0, 0, 1]])
    ours = losses.display_psnr(prediction, truth, lost)
    shown = metrics.to_display(prediction.numpy(), coded=True)
    wanted = metrics.to_display(truth.numpy(), coded=True)
    mse = ((shown - wanted) ** 2).mean(axis=(-2, -1))
    per_band = 10 * np.log10(1 / mse)
    mask = lost.numpy() > 0
    assert abs(ours - per_band[mask].mean()) < 1e-3
    assert abs(ours - metrics.display_psnr(prediction.numpy(), truth.numpy(), lost.numpy())) < 1e-3
    pooled = 10 * np.log10(1 / mse[mask].mean())
    assert ours - pooled > 1.0                                 # Jensen: pooled reads lower
    assert losses.display_psnr(truth, truth, lost) == pytest.approx(120.0)


def test_display_slope_is_bounded_at_the_original_trainers_softening_only():
    "Per band: the slope in s is the analytic gamma * eps**(gamma - 1); the slope in c, measured, stays under 10 at 5e-3 and explodes at 1e-8."
    soft, hard = losses.display_slope(), losses.display_slope(eps=1e-8)
    assert list(soft) == list(hard) == list(timebase.WAVELENGTHS)
    for wavelength, (in_s, in_c) in soft.items():
        gamma = metrics.DISPLAY_MAPPING[wavelength][2]
        assert in_s == pytest.approx(gamma * ORIGINAL_TRAINER["display_eps"] ** (gamma - 1))
        assert 1.0 < in_c <= 10.0, (wavelength, in_c)
    assert max(in_c for _, in_c in hard.values()) > 100                # what the softening is for
