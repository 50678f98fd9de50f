"""suvi_fill.physics.align against geometry written out independently here (float64 rays,
rotation matrices, the Howard constants typed in again), plus the pass-through,
calibration, coverage and batching contracts."""
import math

import numpy as np
import pytest
import torch

from suvi_fill.physics import align

#: Howard et al. (1990) sidereal rates, µrad/s, and Earth's mean orbital rate, deg/day.

from suvi_fill.corpus import shards as dataset
A, B, C = 2.894, -0.428, -0.370
EARTH = 0.9856
AU_IN_RADII = 1.495978707e11 / 6.96e8
DAY = 86_400.0


def synodic_deg_per_day(latitude_deg):
    s2 = math.sin(math.radians(latitude_deg)) ** 2
    return math.degrees((A + B * s2 + C * s2 * s2) * 1e-6 * DAY) - EARTH


def expected_source(size, radius, b0_deg, dt, distance):
    """Independent float64 model: where each target pixel's feature was `dt` s earlier.

    Returns (col, row, on_disk, visible, depth) with depth = source z - limb height.
    """
    centre = (size - 1) / 2
    rows, cols = np.mgrid[0:size, 0:size].astype(np.float64)
    px, py = (cols - centre) / radius, (rows - centre) / radius
    if math.isinf(distance):
        on_disk = px**2 + py**2 <= 1
        obs = np.stack([px, py, np.sqrt(np.clip(1 - px**2 - py**2, 0, None))])
        limb = 0.0
    else:
        tan_limb = 1 / math.sqrt(distance**2 - 1)
        d = np.stack([px * tan_limb, py * tan_limb, -np.ones_like(px)])
        a, b, c = (d**2).sum(0), -2 * distance, distance**2 - 1     # |O + s d|^2 = 1, O = (0, 0, D)
        disc = b * b - 4 * a * c
        on_disk = disc >= -1e-12
        s = (-b - np.sqrt(np.clip(disc, 0, None))) / (2 * a)
        obs = np.stack([s * d[0], s * d[1], distance + s * d[2]])
        limb = 1 / distance
    tilt = math.radians(b0_deg)
    rot = np.array([[1, 0, 0], [0, math.cos(tilt), -math.sin(tilt)], [0, math.sin(tilt), math.cos(tilt)]])
    sun = np.einsum("ji,jhw->ihw", rot, obs)                      # observer -> solar frame (R^T)
    lat = np.arcsin(np.clip(sun[1], -1, 1))
    lon = np.arctan2(sun[0], sun[2])
    s2 = np.sin(lat) ** 2
    omega = (A + B * s2 + C * s2 * s2) * 1e-6 - math.radians(EARTH) / DAY
    lon = lon - omega * dt
    sun = np.stack([np.cos(lat) * np.sin(lon), np.sin(lat), np.cos(lat) * np.cos(lon)])
    src = np.einsum("ij,jhw->ihw", rot, sun)
    if math.isinf(distance):
        p, q = src[0], src[1]
    else:
        p = src[0] / (distance - src[2]) * math.sqrt(distance**2 - 1)
        q = src[1] / (distance - src[2]) * math.sqrt(distance**2 - 1)
    return centre + radius * p, centre + radius * q, on_disk, src[2] >= limb, src[2] - limb


def ramp_stack(size, batch=1, depth=1):
    "Bands 0/1 linear in column/row: bilinear sampling of them returns the source position exactly."
    rows, cols = torch.meshgrid(torch.arange(size, dtype=torch.float32),
                                torch.arange(size, dtype=torch.float32), indexing="ij")
    frame = torch.stack([0.1 + 0.001 * cols, 0.1 + 0.001 * rows] + [0.2 + 0.001 * cols] * 4)
    return frame.expand(batch, depth, 6, size, size).contiguous()


def call(stack, dts, b0, radius, valid=None, gains=None, offsets=None, **kwargs):
    batch, depth = stack.shape[:2]
    valid = torch.ones(batch, depth, dtype=torch.bool) if valid is None else valid
    gains = torch.ones(batch, depth, 6) if gains is None else gains
    offsets = torch.zeros(batch, depth, 6) if offsets is None else offsets
    return align.align_stack(stack, torch.as_tensor(dts, dtype=torch.float32).reshape(batch, depth), valid,
                             gains, offsets, torch.as_tensor(b0, dtype=torch.float32).reshape(batch),
                             torch.as_tensor(radius, dtype=torch.float32).reshape(batch), **kwargs)


@pytest.mark.parametrize("b0, dt, distance", [
    (0.0, DAY, math.inf), (7.25, DAY, math.inf), (-7.25, -6 * 3600.0, math.inf),
    (0.0, 240.0, align.OBSERVER_DISTANCE), (5.0, DAY, align.OBSERVER_DISTANCE),
    (-3.0, 2 * DAY, 20.0),
])
def test_every_source_position_matches_the_independent_geometry(b0, dt, distance):
    size, radius = 96, 40.0
    aligned, coverage = call(ramp_stack(size), dt, b0, radius, return_coverage=True, distance=distance,
                             sampling="bilinear")
    col, row, on_disk, visible, depth = expected_source(size, radius, b0, dt, distance)
    clear = np.abs(depth) > 1e-4                       # away from the limb's rounding
    check = on_disk & visible & clear
    got_col = (aligned[0, 0, 0].double().numpy() - 0.1) / 0.001
    got_row = (aligned[0, 0, 1].double().numpy() - 0.1) / 0.001
    assert check.sum() > 4000
    assert np.abs(got_col - col)[check].max() < 2e-3
    assert np.abs(got_row - row)[check].max() < 2e-3
    cover = coverage[0, 0].numpy()
    assert (cover[on_disk & clear] == visible[on_disk & clear]).all()
    assert (cover[~on_disk] == 1).all()


def test_bicubic_sampling_is_exact_at_pixel_centres_and_close_on_ramps():
    "The default kernel: within 0.05 px of the exact source on a ramp, and sharper than bilinear."
    size, radius = 96, 40.0
    assert align.SAMPLING == "bicubic"
    cubic = call(ramp_stack(size), DAY, 5.0, radius, distance=align.OBSERVER_DISTANCE)
    linear = call(ramp_stack(size), DAY, 5.0, radius, distance=align.OBSERVER_DISTANCE, sampling="bilinear")
    on = (linear[0, 0, 0] != ramp_stack(size)[0, 0, 0])
    assert on.sum() > 4000
    shift = ((cubic - linear)[0, 0, 0][on] / 0.001).abs()
    assert 0 < float(shift.max()) < 0.05
    # A sharp feature (one bright pixel) keeps more of its peak through a sub-pixel move.
    spike = torch.full((1, 1, 6, size, size), 0.1)
    spike[..., size // 2, size // 2] = 0.5
    peak = {mode: float(call(spike, 240.0, 0.0, radius, sampling=mode)[0, 0, 2].max()) for mode in ("bilinear", "bicubic")}
    assert peak["bicubic"] > peak["bilinear"]
    with pytest.raises(ValueError, match="sampling"):
        call(ramp_stack(size), DAY, 5.0, radius, sampling="nearest")


def test_disk_centre_moves_at_the_equatorial_synodic_rate():
    size, radius = 129, 60.0                           # odd size: a pixel sits on disk centre
    aligned = call(ramp_stack(size), DAY, 0.0, radius, distance=math.inf, sampling="bilinear")
    source_col = (float(aligned[0, 0, 0, 64, 64]) - 0.1) / 0.001
    rate = synodic_deg_per_day(0.0)
    assert abs(rate - 13.341) < 1e-3
    # The feature now at disk centre sat rate degrees east a day earlier.
    assert abs(source_col - (64 - radius * math.sin(math.radians(rate)))) < 2e-3
    assert abs((float(aligned[0, 0, 1, 64, 64]) - 0.1) / 0.001 - 64) < 1e-3


def test_a_marked_feature_travels_at_the_rate_of_its_latitude():
    size, radius, b0 = 160, 64.0, 0.0
    centre = (size - 1) / 2
    rows, cols = np.mgrid[0:size, 0:size].astype(np.float64)
    for latitude, lon0 in ((0.0, -40.0), (30.0, -30.0), (-55.0, -20.0)):
        lat, lon = math.radians(latitude), math.radians(lon0)
        x0, y0 = centre + radius * math.cos(lat) * math.sin(lon), centre + radius * math.sin(lat)
        blob = 0.5 * np.exp(-((cols - x0) ** 2 + (rows - y0) ** 2) / (2 * 1.2**2))
        stack = torch.from_numpy(blob.astype(np.float32)).expand(1, 1, 6, size, size).contiguous()
        aligned = call(stack, DAY, b0, radius, distance=math.inf)[0, 0, 0].double().numpy()
        weight = aligned / aligned.sum()
        lon1 = lon + math.radians(synodic_deg_per_day(latitude))
        x1, y1 = centre + radius * math.cos(lat) * math.sin(lon1), centre + radius * math.sin(lat)
        assert abs((weight * cols).sum() - x1) < 0.1, latitude
        assert abs((weight * rows).sum() - y1) < 0.1, latitude
        assert x1 - x0 > 5                             # it really moved west


def test_b0_flips_with_the_north_south_mirror():
    size, radius = 80, 32.0
    rng = torch.Generator().manual_seed(3)
    stack = 0.3 * torch.rand(2, 3, 6, size, size, generator=rng)
    dts = torch.tensor([[DAY, -3600.0, 0.0], [7200.0, 2 * DAY, -DAY]])
    b0 = torch.tensor([7.0, -4.0])
    out = call(stack, dts, b0, [radius, radius - 3])
    mirrored = call(stack.flip(-2), dts, -b0, [radius, radius - 3])
    assert torch.allclose(out, mirrored.flip(-2), atol=1e-5)
    assert not torch.allclose(out, call(stack, dts, -b0, [radius, radius - 3]), atol=1e-3)


def test_zero_dt_with_identity_transfer_is_bitwise_identity():
    stack = 0.4 * torch.rand(2, 4, 6, 48, 48)
    out, coverage = call(stack, torch.zeros(2, 4), [3.0, -6.0], [18.0, 20.0], return_coverage=True)
    assert torch.equal(out, stack) and torch.equal(coverage, torch.ones(2, 4, 48, 48))


def test_gains_and_offsets_act_in_radiance_space():
    radiance = np.geomspace(1e-3, 5000.0, 48 * 48).reshape(48, 48).astype(np.float32)
    coded = torch.from_numpy(dataset.encode(radiance)).expand(1, 2, 6, 48, 48).contiguous()
    gains = torch.tensor([[[1.0, 2.0, 0.5, 1.0, 1.2, 0.9]] * 2])
    offsets = torch.tensor([[[0.0, 0.0, 0.0, 0.05, -0.001, 0.2]] * 2])
    out = call(coded, [[0.0, DAY]], 4.0, 18.0, gains=gains, offsets=offsets)
    for band in range(6):
        got = dataset.decode(out[0, 0, band].numpy())
        want = gains[0, 0, band].item() * radiance + offsets[0, 0, band].item()
        assert np.allclose(got, want, rtol=2e-4, atol=1e-5), band
    assert torch.equal(out[0, 0, 0], coded[0, 0, 0])   # identity transfer: not re-coded
    # The rotated frame: off-disk pixels (beyond the radius) are calibrated, not moved.
    rows, cols = torch.meshgrid(torch.arange(48) - 23.5, torch.arange(48) - 23.5, indexing="ij")
    off = (rows**2 + cols**2).sqrt() > 19.5
    got = dataset.decode(out[0, 1, 1].numpy())[off.numpy()]
    assert np.allclose(got, 2.0 * radiance[off.numpy()], rtol=2e-4, atol=1e-5)


def test_invalid_frames_and_padding_rows_pass_through_untouched():
    stack = 0.4 * torch.rand(2, 3, 6, 40, 40)
    valid = torch.tensor([[True, False, True], [False, False, True]])
    gains = torch.full((2, 3, 6), 1.7)
    offsets = torch.full((2, 3, 6), 0.3)
    out, coverage = call(stack, torch.full((2, 3), DAY), [0.0, 5.0], [16.0, 17.0], valid=valid,
                         gains=gains, offsets=offsets, return_coverage=True)
    for b, t in ((0, 1), (1, 0), (1, 1)):
        assert torch.equal(out[b, t], stack[b, t]) and torch.equal(coverage[b, t], torch.ones(40, 40))
    for b, t in ((0, 0), (0, 2), (1, 2)):
        assert not torch.equal(out[b, t], stack[b, t])


def test_coverage_marks_the_east_limb_crescent_and_keeps_those_pixels():
    size, radius = 96, 40.0
    stack = 0.3 * torch.rand(1, 2, 6, size, size)
    out, coverage = call(stack, [[DAY, -DAY]], 0.0, radius, return_coverage=True, distance=math.inf)
    centre = (size - 1) / 2
    cols = torch.arange(size) - centre
    hidden = coverage == 0
    assert hidden[0, 0].any() and hidden[0, 1].any()
    # dt > 0: what is now at the east limb (small columns) was behind it.  dt < 0: the west limb.
    assert (cols.expand(size, size)[hidden[0, 0]] < 0).all()
    assert (cols.expand(size, size)[hidden[0, 1]] > 0).all()
    # Width of the crescent on the equator: the hidden band spans 13.34 deg of longitude.
    row = int(round(centre))
    equator_hidden = hidden[0, 0, row].nonzero().squeeze(1)
    width = float(cols[equator_hidden].max()) / radius
    assert abs(width + math.cos(math.radians(synodic_deg_per_day(0.0)))) < 0.05
    mask = hidden[:, :, None].expand_as(stack)
    assert torch.equal(out[mask], stack[mask])          # hidden pixels keep their own value


def test_padding_batching_and_frame_order_change_nothing():
    stack = 0.4 * torch.rand(2, 3, 6, 48, 48)
    dts = torch.tensor([[DAY, -3600.0, 600.0], [0.0, 2 * DAY, -DAY]])
    gains = 1 + 0.2 * torch.rand(2, 3, 6)
    offsets = 0.01 * torch.rand(2, 3, 6)
    b0, radius = torch.tensor([6.0, -2.0]), torch.tensor([20.0, 17.5])
    valid = torch.ones(2, 3, dtype=torch.bool)
    full = align.align_stack(stack, dts, valid, gains, offsets, b0, radius)
    for b in range(2):
        alone = align.align_stack(stack[b:b + 1], dts[b:b + 1], valid[b:b + 1], gains[b:b + 1],
                                  offsets[b:b + 1], b0[b:b + 1], radius[b:b + 1])
        assert torch.equal(alone, full[b:b + 1])
    # The seed's collate padding: zero frames, dt 0, identity transfer, not valid.
    padded = align.align_stack(torch.cat([stack, torch.zeros(2, 2, 6, 48, 48)], 1),
                               torch.cat([dts, torch.zeros(2, 2)], 1),
                               torch.cat([valid, torch.zeros(2, 2, dtype=torch.bool)], 1),
                               torch.cat([gains, torch.ones(2, 2, 6)], 1),
                               torch.cat([offsets, torch.zeros(2, 2, 6)], 1), b0, radius)
    assert torch.equal(padded[:, :3], full) and not padded[:, 3:].any()
    order = torch.tensor([2, 0, 1])
    shuffled = align.align_stack(stack[:, order], dts[:, order], valid[:, order], gains[:, order],
                                 offsets[:, order], b0, radius)
    assert torch.equal(shuffled, full[:, order])


def test_fp32_inside_autocast_and_bad_shapes_are_refused():
    stack = 0.4 * torch.rand(1, 2, 6, 32, 32)
    plain = call(stack, [[3600.0, -3600.0]], 2.0, 12.0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        inside = call(stack, [[3600.0, -3600.0]], 2.0, 12.0)
    assert inside.dtype == torch.float32 and torch.equal(inside, plain)
    with pytest.raises(ValueError, match="dts must have shape"):
        align.align_stack(stack, torch.zeros(1, 3), torch.ones(1, 2, dtype=torch.bool),
                          torch.ones(1, 2, 6), torch.zeros(1, 2, 6), torch.zeros(1), torch.ones(1))
    with pytest.raises(ValueError, match=r"stack must be \(B, T, bands, H, W\)"):
        align.align_stack(stack[0], torch.zeros(1, 2), torch.ones(1, 2, dtype=torch.bool),
                          torch.ones(1, 2, 6), torch.zeros(1, 2, 6), torch.zeros(1), torch.ones(1))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cpu_and_gpu_agree():
    stack = 0.4 * torch.rand(2, 5, 6, 128, 128)
    dts = torch.tensor([[DAY, -3600.0, 600.0, 0.0, 2 * DAY], [0.0, 2 * DAY, -DAY, 240.0, -240.0]])
    valid = torch.tensor([[True, True, False, True, True], [True, True, True, True, False]])
    gains, offsets = 1 + 0.2 * torch.rand(2, 5, 6), 0.01 * torch.rand(2, 5, 6)
    b0, radius = torch.tensor([6.0, -2.0]), torch.tensor([50.0, 47.5])
    cpu, cpu_cov = align.align_stack(stack, dts, valid, gains, offsets, b0, radius, return_coverage=True)
    gpu, gpu_cov = align.align_stack(*(t.cuda() for t in (stack, dts, valid, gains, offsets, b0, radius)),
                                     return_coverage=True)
    assert gpu.is_cuda and torch.allclose(gpu.cpu(), cpu, atol=1e-4)
    assert (gpu_cov.cpu() != cpu_cov).sum() <= 8
