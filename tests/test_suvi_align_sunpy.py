"""align_stack against sunpy's differential_rotate (sunpy is an optional extra: skipped without it,
except under CI, which installs the extra: there its absence fails the run)."""
import importlib
import math
import os
import warnings

import numpy as np
import pytest
import torch

from suvi_fill.physics import align
from suvi_fill.corpus import shards as dataset
from suvi_fill.physics import timebase


def need(module: str, why: str):
    "Import `module`: skip without it, except under CI (env CI set), where it must be installed."
    if os.environ.get("CI", "").strip().lower() in ("", "0", "false", "no"):
        return pytest.importorskip(module, reason=why)
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise RuntimeError(f"CI installs the sunpy extra (.ci/quickstart: .[dev,sunpy]), but {exc}; {why}") from None


with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    need("skimage", "sunpy's differential_rotate needs scikit-image")
    need("reproject", "sunpy.map needs reproject")
    need("sunpy.physics.differential_rotation", "the reference rotation is sunpy's")

metrics = pytest.importorskip("suvi_fill.physics.coding")

SIZE, RADIUS, B0 = 160, 48.0, 5.0
FEATURES = [(lat, lon, 3.0, 0.5) for lat in (-50, -20, 0, 15, 40) for lon in (-70, -35, 0, 30, 65)]


@pytest.mark.parametrize("dt", [240.0, 6 * 3600.0, 86_400.0, -86_400.0])
def test_display_psnr_against_sunpy_is_above_40_db(dt):
    image = align.feature_disk(SIZE, SIZE, RADIUS, B0, FEATURES).numpy()
    coded = np.stack([dataset.encode(metrics.DISPLAY_MAPPING[w][0] + 0.6 * metrics.DISPLAY_MAPPING[w][1] * image)
                      for w in timebase.WAVELENGTHS])
    aligned, coverage = align.align_stack(
        torch.from_numpy(coded)[None, None], torch.tensor([[dt]]), torch.ones(1, 1, dtype=torch.bool),
        torch.ones(1, 1, 6), torch.zeros(1, 1, 6), torch.tensor([B0]), torch.tensor([RADIUS]),
        return_coverage=True)
    rows, cols = np.mgrid[0:SIZE, 0:SIZE]
    rho = np.hypot(rows - (SIZE - 1) / 2, cols - (SIZE - 1) / 2) / RADIUS
    covered = coverage[0, 0].numpy() > 0
    psnr = []
    for band, wavelength in enumerate(timebase.WAVELENGTHS[:3]):          # the geometry is band-blind
        reference = align.sunpy_rotate(coded[band], dt, B0, RADIUS)
        finite = np.isfinite(reference)
        mask = (rho <= 1) & covered & finite
        assert mask.sum() > 0.9 * (rho <= 1).sum() * (1 - abs(dt) / 86_400 * 0.1)
        # Where the two disagree on having a value, it is the limb's rim only.
        assert (rho[(rho <= 1) & (covered != finite)] > 0.95).all()
        ours = metrics.to_display(dataset.decode(aligned[0, 0, band].numpy()), wavelength)[mask]
        theirs = metrics.to_display(dataset.decode(reference), wavelength)[mask]
        psnr.append(10 * math.log10(1 / max(float(np.mean((ours - theirs) ** 2)), 1e-12)))
    assert min(psnr) >= 40.0, psnr
