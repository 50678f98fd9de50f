"""suvi_fill.physics.rotation: one Howard model, its rad/s and deg/day forms agreeing, on floats, arrays and tensors."""
import math

import numpy as np
import pytest
import torch

from suvi_fill.physics import rotation


@pytest.mark.parametrize("latitude", [0.0, 17.0, -35.0, 60.0, 90.0])
def test_the_two_units_are_one_model(latitude):
    sin_lat = math.sin(math.radians(latitude))
    per_day = rotation.rotation_rate(latitude)
    assert rotation.synodic_rate(sin_lat) / rotation.RAD_PER_S * rotation.DEG_PER_DAY == pytest.approx(per_day)
    assert rotation.rotation_rate(latitude, synodic=False) == pytest.approx(
        rotation.sidereal_rate(sin_lat) / rotation.RAD_PER_S * rotation.DEG_PER_DAY)


def test_published_values_and_sunpy_defaults():
    a, b, c = rotation.HOWARD_COEFFICIENTS
    assert (a, b, c) == (2.894, -0.428, -0.370)
    assert rotation.sidereal_rate(0.0) == pytest.approx(2.894e-6, rel=1e-12)
    assert rotation.EARTH_ORBITAL_RATE == pytest.approx(math.radians(0.9856) / 86_400.0, rel=1e-15)
    assert rotation.rotation_rate(0.0, synodic=False) == pytest.approx(14.3263, abs=1e-4)      # 25.13 days
    assert rotation.rotation_rate(0.0) == pytest.approx(14.3263 - 0.9856, abs=1e-4)


def test_arrays_and_tensors():
    sin_lat = np.linspace(-1, 1, 9)
    assert np.allclose(torch.as_tensor(rotation.synodic_rate(torch.from_numpy(sin_lat))).numpy(),
                       rotation.synodic_rate(sin_lat), rtol=0, atol=1e-20)
    assert rotation.rotation_rate(np.array([0.0, 30.0, 60.0])).shape == (3,)
