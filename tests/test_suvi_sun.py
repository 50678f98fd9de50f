"""The synthetic Sun: determinism, differential rotation, band physics, the outage process,
the archive's files against its recorded truth, and `suvi-fill synth` end to end."""
import json
import math
from pathlib import Path

import numpy as np
import pytest

from helpers import run, tool
from suvi_fill.physics import ephemeris, timebase
from suvi_fill.physics import rotation
from suvi_fill.physics.coding import SATURATION
from suvi_fill.sim.emission import QUIET_RADIANCE
from suvi_fill.sim.instrument import FIELD_OF_VIEW_ARCSEC, Instrument
from suvi_fill.sim.outages import (DROP_BAND, DROP_FRAME, DUAL_FAILURE, ECLIPSE, EMPTY_FILE, FILE_PRESENT, OK,
                                   SCALED_RATES, SENTINEL_RUN, OutageRates, outage_plan)
from suvi_fill.sim.scene import Geometry, SunModel, dipole_line, flare_emission
from suvi_fill.sim.synth import OUTAGES_NAME, TRUTH_NAME, archive_path, synthesize
from suvi_fill.archive.fits import SENTINEL_VALUE, read_l2, sentinel_fraction

START = "2024-03-18"


def digest_tree(root: Path) -> dict:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    "Six hours, both satellites, 48 px, with sentinel runs and dual failures made frequent."
    out = tmp_path_factory.mktemp("synth") / "archive"
    rates = OutageRates(sentinel_runs_per_day=4.0, dual_failures_per_day=2.0, empty_fraction=0.01)
    summary = synthesize(out, hours=6, resolution=48, seed=4, start="2024-03-21", rates=rates,
                         progress=False)
    return out, summary


# ---------------------------------------------------------------- determinism


def test_same_seed_same_bytes_other_seed_other_bytes(tmp_path):
    a = synthesize(tmp_path / "a", hours=0.5, resolution=32, seed=11, progress=False)
    b = synthesize(tmp_path / "b", hours=0.5, resolution=32, seed=11, progress=False)
    c = synthesize(tmp_path / "c", hours=0.5, resolution=32, seed=12, progress=False)
    tree_a, tree_b, tree_c = (digest_tree(tmp_path / n) for n in "abc")
    truth = TRUTH_NAME
    assert tree_a.keys() == tree_b.keys() and len(tree_a) > 20
    # Everything identical but the recorded run time.
    assert all(tree_a[k] == tree_b[k] for k in tree_a if k != truth)
    a.pop("seconds"), b.pop("seconds")
    assert a == b
    fits_names = [k for k in tree_a if k.endswith(".fits") and k in tree_c]
    assert fits_names and any(tree_a[k] != tree_c[k] for k in fits_names)


def test_frames_do_not_depend_on_what_was_rendered_before():
    model, instrument = SunModel(3, START, 2), Instrument(3)
    slot = timebase.first_slot_of_day(START) + 200
    geometry = instrument.geometry(slot, 18, 40)
    first = instrument.observe(instrument.radiance(model, (slot + 0.5) * timebase.SLOT_SECONDS, geometry, (40, 40)),
                               slot, 18, geometry)
    instrument.radiance(model, (slot + 9.5) * timebase.SLOT_SECONDS, geometry, (40, 40))
    again = instrument.observe(instrument.radiance(model, (slot + 0.5) * timebase.SLOT_SECONDS, geometry, (40, 40)),
                               slot, 18, geometry)
    assert np.array_equal(first, again)


# ---------------------------------------------------------------- rotation


def _single_plage_model(latitude, lon0):
    model = SunModel(0, START, 3)
    model.flares = []
    model.regions = [dict(lat=latitude, lon0=lon0, peak_day=1.0, life_days=1e6, envelope_em=0.0, core_em=0.0,
                          size=0.04, tilt=0.0, envelope_logt=6.3, core_logt=6.5)]
    return model


def _measured_longitude(model, day, resolution=256):
    "Central-meridian longitude of the plage measured from a rendered 304 image (centroid)."
    cdelt = FIELD_OF_VIEW_ARCSEC / resolution
    geometry = Geometry((resolution + 1) / 2, (resolution + 1) / 2, cdelt, cdelt, 0.0)
    when = model.t0 + day * 86_400.0
    image = model.render(when, geometry, (resolution, resolution), components=("regions",))
    plage = image[timebase.WAVELENGTHS.index(304)]
    rows, cols = np.mgrid[0:resolution, 0:resolution]
    weight = plage / plage.sum()
    col, row = (weight * cols).sum(), (weight * rows).sum()
    radius = ephemeris.solar_radius_arcsec(when) / cdelt
    x = (col + 1 - geometry.crpix1) / radius
    y = (row + 1 - geometry.crpix2) / radius
    z = math.sqrt(1 - x * x - y * y)
    b0 = math.radians(ephemeris.solar_b0(when))
    latitude = math.degrees(math.asin(y * math.cos(b0) + z * math.sin(b0)))
    longitude = math.degrees(math.atan2(x, z * math.cos(b0) - y * math.sin(b0)))
    return latitude, longitude


@pytest.mark.parametrize("latitude", [5.0, 25.0, -35.0])
def test_tracked_feature_rotates_at_the_howard_synodic_rate(latitude):
    model = _single_plage_model(latitude, -40.0)
    lat0, lon_a = _measured_longitude(model, 0.0)
    lat1, lon_b = _measured_longitude(model, 4.0)     # 4 days: -40 deg to about +13 deg
    rate = (lon_b - lon_a) / 4.0
    expected = float(rotation.rotation_rate(latitude))
    assert abs(lat0 - latitude) < 0.3 and abs(lat1 - latitude) < 0.3
    assert abs(rate - expected) < 0.05, (rate, expected)
    # ... and not the rigid (equatorial) rate, nor the sidereal one.
    if abs(latitude) > 20:
        assert abs(rate - float(rotation.rotation_rate(0.0))) > 0.3
    assert abs(rate - float(rotation.rotation_rate(latitude, synodic=False))) > 0.9


def test_howard_coefficients():
    assert rotation.rotation_rate(0.0, synodic=False) == pytest.approx(2.894e-6 * 86400 * 180 / math.pi)
    assert rotation.rotation_rate(0.0) == pytest.approx(rotation.rotation_rate(0.0, synodic=False) - 0.9856)
    s2 = math.sin(math.radians(40.0)) ** 2
    assert rotation.rotation_rate(40.0, synodic=False) == pytest.approx(
        (2.894 - 0.428 * s2 - 0.370 * s2 * s2) * 1e-6 * 86400 * 180 / math.pi)


# ---------------------------------------------------------------- band physics


def test_bands_are_correlated_but_not_copies_and_levels_are_realistic():
    model, instrument = SunModel(0, START, 2), Instrument(0)
    slot = timebase.first_slot_of_day(START) + 90
    geometry = instrument.geometry(slot, 16, 128)
    truth = instrument.radiance(model, (slot + 0.5) * timebase.SLOT_SECONDS, geometry, (128, 128))
    index = timebase.BAND_INDEX
    radius = ephemeris.solar_radius_arcsec((slot + 0.5) * timebase.SLOT_SECONDS) / geometry.cdelt1
    rows, cols = np.mgrid[0:128, 0:128]
    rho = np.hypot(cols + 1 - geometry.crpix1, rows + 1 - geometry.crpix2) / radius
    # On the disk (away from the limb, where every band brightens together), in log radiance.
    corr = np.corrcoef(np.log(truth[:, rho < 0.85]))
    assert 0.2 < corr[index[171], index[195]] < 0.98
    assert corr[index[94], index[304]] < corr[index[171], index[195]]
    assert np.abs(corr - np.eye(6)).max() < 0.98, corr.round(3)
    assert corr.min() > 0.0
    # The real 195 A frame: IMG_MEAN 0.22 over the 3200" field, SAT_THR 12000.
    mean_195 = truth[index[195]].mean()
    assert 0.1 < mean_195 < 0.6
    assert truth.max() < SATURATION
    # Limb brightening in the optically thin bands, not in 304; corona beyond the limb.
    quiet = SunModel(0, START, 2).render((slot + 0.5) * timebase.SLOT_SECONDS, geometry, (128, 128),
                                         components=("disk", "corona"))
    centre, limb, above = rho < 0.5, (rho > 0.88) & (rho < 0.96), (rho > 1.05) & (rho < 1.15)
    brightening = {b: quiet[index[b]][limb].mean() / quiet[index[b]][centre].mean() for b in timebase.WAVELENGTHS}
    for band in (171, 195, 284):
        i = index[band]
        assert brightening[band] > 1.25, brightening
        assert 0.0 < np.median(quiet[i][above]) < quiet[i][limb].mean()
    assert brightening[304] < 1.2 and brightening[304] < min(brightening[b] for b in (171, 195, 284)) - 0.2
    assert np.median(quiet[index[304]][above]) < 0.2 * quiet[index[304]][centre].mean()


def test_flares_brighten_the_hot_bands_first():
    flare = dict(start_day=0.0, em=300.0, rise_min=5.0, decay_min=30.0, cool_min=20.0)
    minutes = np.arange(0.0, 240.0, 0.5)
    curves = np.array([flare_emission(flare, m / 1440.0) for m in minutes])
    peak = dict(zip(timebase.WAVELENGTHS, minutes[curves.argmax(0)]))
    assert max(peak[94], peak[131]) < min(peak[171], peak[195], peak[284])
    quiet = np.array([QUIET_RADIANCE[b] for b in timebase.WAVELENGTHS])
    rise = curves[minutes == 6.0][0] / quiet
    assert rise[timebase.BAND_INDEX[131]] > 100 * rise[timebase.BAND_INDEX[171]]


# ---------------------------------------------------------------- outage process


def _only(**kwargs):
    quiet = dict(band_drops_per_day=0.0, frame_drops_per_day=0.0, empty_fraction=0.0, sentinel_runs_per_day=0.0,
                 dual_failures_per_day=0.0, gaps_per_day=0.0, eclipses=False)
    quiet.update(kwargs)
    return OutageRates(**quiet)


def _runs(mask):
    "(start, length) of the True runs of a 1-D mask."
    padded = np.concatenate([[False], mask, [False]]).astype(np.int8)
    edges = np.flatnonzero(np.diff(padded))
    return list(zip(edges[::2], edges[1::2] - edges[::2]))


DAYS = 150
FIRST = timebase.first_slot_of_day("2023-01-01")
N = DAYS * timebase.SLOTS_PER_DAY


def test_frame_and_band_drops_follow_their_rates():
    rates = _only(frame_drops_per_day=4.0, band_drops_per_day=3.0)
    status, _, _ = outage_plan(FIRST, N, rates=rates, seed=1)
    frame = (status == DROP_FRAME).all(axis=2)
    expected = 1 - math.exp(-4.0 * 1.5 / timebase.SLOTS_PER_DAY)
    assert frame.mean() == pytest.approx(expected, rel=0.12)
    band = (status == DROP_BAND)
    # A band drop hits one band: most band-dropped slots keep other bands.
    assert (band.sum(axis=2) == 1).sum() > 0.9 * (band.sum(axis=2) >= 1).sum()
    expected_band = (1 - math.exp(-3.0 * 2.0 / timebase.SLOTS_PER_DAY)) * (1 - expected)
    assert band.mean() == pytest.approx(expected_band, rel=0.12)


def test_sentinel_runs_are_hours_long_at_their_rate():
    status, _, events = outage_plan(FIRST, N, rates=_only(sentinel_runs_per_day=0.4), seed=2)
    runs = [e for e in events if e["kind"] == "sentinel run" and 0 < e["first_slot"] - FIRST
            and e["first_slot"] - FIRST + e["slots"] < N]
    assert len(runs) / (2 * DAYS) == pytest.approx(0.4, rel=0.2)
    hours = np.array([e["slots"] for e in runs]) * timebase.SLOT_SECONDS / 3600
    assert hours.min() >= 0.99 and hours.max() <= 6.0 and 3.0 < hours.mean() < 4.0
    assert all(e["bands"] == list(timebase.WAVELENGTHS) for e in runs)


def test_dual_failures_hit_both_satellites_together():
    status, _, events = outage_plan(FIRST, N, rates=_only(dual_failures_per_day=0.5), seed=3)
    dual = status == DUAL_FAILURE
    assert np.array_equal(dual[:, 0], dual[:, 1])
    duals = [e for e in events if e["kind"] == "dual-satellite failure"]
    assert all(e["satellites"] == [16, 18] for e in duals)
    assert len(duals) / DAYS == pytest.approx(0.5, rel=0.25)
    lengths = np.array([e["slots"] for e in duals])
    assert lengths.min() >= 2 and lengths.max() <= 90
    # Independent per-satellite causes almost never coincide the same way.
    frames, _, _ = outage_plan(FIRST, N, rates=_only(frame_drops_per_day=4.0), seed=3)
    both = ((frames[:, 0] == DROP_FRAME).all(1) & (frames[:, 1] == DROP_FRAME).all(1)).mean()
    assert both < 0.1 * (frames[:, 0] == DROP_FRAME).all(1).mean()


def test_multi_day_gaps():
    status, _, events = outage_plan(FIRST, 400 * timebase.SLOTS_PER_DAY, rates=_only(gaps_per_day=1 / 40), seed=4)
    gaps = [e for e in events if e["kind"] == "multi-day gap"]
    assert 5 <= len(gaps) <= 40
    inner = [e for e in gaps if e["first_slot"] > FIRST]
    days = np.array([e["slots"] for e in inner]) / timebase.SLOTS_PER_DAY
    assert days.min() >= 0.99 and days.max() <= 4.0
    assert all(len(e["satellites"]) == 1 for e in gaps)


def test_geo_eclipse_seasons():
    year = timebase.first_slot_of_day("2023-01-01")
    status, degraded, events = outage_plan(year, 365 * timebase.SLOTS_PER_DAY, rates=_only(eclipses=True), seed=5)
    eclipses = [e for e in events if e["kind"] == "eclipse"]
    equinoxes = [timebase.unix_seconds("2023-03-20T21:24"), timebase.unix_seconds("2023-09-23T06:50")]
    midnight = {16: 5 + 1 / 60, 18: 9 + 8 / 60}
    for e in eclipses:
        start = e["first_slot"] * timebase.SLOT_SECONDS
        days_off = min(abs(start - q) for q in equinoxes) / 86_400
        assert days_off < 24.5, e                             # seasons of about +-23 days
        assert e["minutes"] <= 72.5
        centre_hour = ((start + e["slots"] * timebase.SLOT_SECONDS / 2) % 86_400) / 3600
        assert abs(centre_hour - midnight[e["satellites"][0]]) < 0.25
        if days_off < 3:
            assert e["minutes"] > 69
    per_satellite = {s: sum(e["satellites"] == [s] for e in eclipses) for s in (16, 18)}
    assert all(80 <= n <= 96 for n in per_satellite.values()), per_satellite
    assert degraded.sum() == 2 * sum(per_satellite.values())
    assert not (status == ECLIPSE).any(axis=(1, 2))[timebase.SLOTS_PER_DAY * 140:timebase.SLOTS_PER_DAY * 220].any()


# ---------------------------------------------------------------- the archive


def test_files_match_the_outage_plan(archive):
    out, summary = archive
    plan = np.load(out / OUTAGES_NAME)
    status, degraded = plan["status"], plan["degraded"]
    first = int(plan["first_slot"])
    assert status.shape == (summary["slots"], 2, 6) and list(plan["satellites"]) == [16, 18]
    present = 0
    for k in range(status.shape[0]):
        for s, sat in enumerate((16, 18)):
            for i, band in enumerate(timebase.WAVELENGTHS):
                path = archive_path(out, band, sat, first + k)
                assert path.exists() == FILE_PRESENT[status[k, s, i]], (k, sat, band, status[k, s, i])
                present += path.exists()
    assert present == summary["files"] == len(list(out.rglob("*.fits")))
    assert sum(summary["band_frames"].values()) == status.size


def test_sentinel_runs_are_present_as_files(archive):
    out, summary = archive
    plan = np.load(out / OUTAGES_NAME)
    status, first = plan["status"], int(plan["first_slot"])
    runs = [r for s in range(2) for r in _runs((status[:, s] == SENTINEL_RUN).all(axis=1))]
    assert runs, "no sentinel run drawn"
    assert max(length for _, length in runs) >= 15               # at least one hour-long run in the archive
    s, band = 0, 195
    k = next(k for k in range(status.shape[0]) if (status[k] == SENTINEL_RUN).any())
    s = int(np.flatnonzero((status[k] == SENTINEL_RUN).any(axis=1))[0])
    data, header = read_l2(archive_path(out, band, (16, 18)[s], first + k))
    assert sentinel_fraction(data) == 1.0 and (data == SENTINEL_VALUE).all()
    assert not header.empty and header.img_max == SENTINEL_VALUE


def test_clean_empty_and_degraded_frames(archive):
    out, summary = archive
    plan = np.load(out / OUTAGES_NAME)
    status, degraded, first = plan["status"], plan["degraded"], int(plan["first_slot"])
    k, s, i = map(int, np.argwhere(status == OK)[len(np.argwhere(status == OK)) // 2])
    data, header = read_l2(archive_path(out, timebase.WAVELENGTHS[i], (16, 18)[s], first + k))
    assert np.isfinite(data).all() and sentinel_fraction(data) == 0.0 and not header.empty
    assert header.slot == first + k and header.shape == (48, 48)
    assert header.cdelt1 == pytest.approx(3200.0 / 48)
    # Real L2 is Sun-centred and north-up: the header says so; the pointing residual is not in it.
    assert (header.crpix1, header.crpix2, header.crota) == (24.5, 24.5, 0.0)
    drawn = Instrument(4).geometry(first + k, (16, 18)[s], 48)
    assert 0 < abs(drawn.crpix1 - 24.5) < 0.1 and drawn.crota == 0.0
    assert header.degraded == bool(degraded[k, s])
    empties = np.argwhere(status == EMPTY_FILE)
    assert len(empties)
    k, s, i = map(int, empties[0])
    data, header = read_l2(archive_path(out, timebase.WAVELENGTHS[i], (16, 18)[s], first + k))
    assert header.empty and not data.any()


def test_recorded_calibration_is_what_the_data_show(archive):
    out, summary = archive
    truth = summary["calibration"]
    recorded = json.loads((out / TRUTH_NAME).read_text())["calibration"]
    assert recorded == truth and set(truth) == {"16", "18", "18/16"}
    plan = np.load(out / OUTAGES_NAME)
    status, first = plan["status"], int(plan["first_slot"])
    both = np.flatnonzero((status == OK).all(axis=(1, 2)))
    assert len(both) >= 10
    for i, band in enumerate(timebase.WAVELENGTHS):
        sums = {}
        for s, sat in enumerate((16, 18)):
            total = 0.0
            for k in both:
                data, _ = read_l2(archive_path(out, band, sat, first + int(k)))
                total += float(data.sum(dtype=np.float64)) - data.size * truth[str(sat)]["offset"][str(band)]
            sums[sat] = total
        assert sums[18] / sums[16] == pytest.approx(truth["18/16"]["gain"][str(band)], rel=0.01), band


def test_disk_centre_in_the_data_is_crpix():
    instrument = Instrument(8)
    model = SunModel(8, START, 1)
    slot = timebase.first_slot_of_day(START) + 33
    geometry = instrument.geometry(slot, 16, 128)
    image = model.render((slot + 0.5) * timebase.SLOT_SECONDS, geometry, (128, 128), components=("disk",))
    disk = image[timebase.BAND_INDEX[304]] > 0
    rows, cols = np.nonzero(disk)
    assert cols.mean() + 1 == pytest.approx(geometry.crpix1, abs=0.1)
    assert rows.mean() + 1 == pytest.approx(geometry.crpix2, abs=0.1)


@pytest.mark.parametrize("resolution", [640, 1280])
def test_full_resolutions_render(resolution):
    model, instrument = SunModel(0, START, 1), Instrument(0)
    slot = timebase.first_slot_of_day(START) + 10
    geometry = instrument.geometry(slot, 18, resolution)
    truth = instrument.radiance(model, (slot + 0.5) * timebase.SLOT_SECONDS, geometry, (resolution, resolution))
    assert truth.shape == (6, resolution, resolution) and np.isfinite(truth).all()
    assert 0.1 < truth[timebase.BAND_INDEX[195]].mean() < 0.6


# ---------------------------------------------------------------- the command


def test_synth_command_end_to_end(tmp_path):
    out = tmp_path / "cli"
    result = run([tool("suvi-fill"), "synth", "--out", str(out), "--hours", "6", "--resolution", "32",
                  "--seed", "5", "--start", "2024-09-20"],
                 env={"SUVI_FILL_PROGRESS_SECONDS": "0"})                  # a progress line at every step
    assert result.returncode == 0, result.stderr
    assert "wrote" in result.stdout and "synth 32px: " in result.stderr         # progress lines on stderr
    assert "\r" not in result.stderr                                            # not a bar: the output is a pipe
    summary = json.loads((out / TRUTH_NAME).read_text())
    assert summary["start"] == "2024-09-20" and summary["slots"] == 90 and summary["resolution"] == 32
    files = sorted(out.rglob("*.fits"))
    assert len(files) == summary["files"] > 0
    data, header = read_l2(files[-1])
    assert timebase.day_of_slot(header.slot) == "2024-09-20" and data.shape == (32, 32)
    eclipse = [e for e in summary["outages"] if e["kind"] == "eclipse"]
    assert {tuple(e["satellites"]) for e in eclipse} == {(16,)}      # 05:01 UTC is inside; 09:08 is not


def test_synth_command_refuses_bad_input(tmp_path):
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "keep.txt").write_text("mine")
    result = run([tool("suvi-fill"), "synth", "--out", str(taken), "--hours", "1"])
    assert result.returncode == 2 and "already exists" in result.stderr and len(result.stderr.splitlines()) == 1
    assert [p.name for p in taken.iterdir()] == ["keep.txt"]
    for args, message in ((["--start", "2024-13-40"], "--start"), (["--resolution", "8"], "--resolution"),
                          (["--satellites", "17"], "--satellites")):
        result = run([tool("suvi-fill"), "synth", "--out", str(tmp_path / "new"), "--hours", "1", *args])
        assert result.returncode == 2 and message in result.stderr, (args, result.stderr)
        assert not (tmp_path / "new").exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]          # no staging left


def test_scaled_rates_keep_run_lengths_and_eclipses():
    calm = OutageRates().scaled(0.2)
    base = OutageRates()
    for name in SCALED_RATES:
        assert getattr(calm, name) == pytest.approx(0.2 * getattr(base, name)), name
    assert (calm.band_drop_mean_slots, calm.sentinel_hours, calm.dual_slots, calm.eclipses) == \
        (base.band_drop_mean_slots, base.sentinel_hours, base.dual_slots, base.eclipses)
    with pytest.raises(ValueError, match="outage scale"):
        base.scaled(-1)
    # Fewer random outages: much longer clean runs, the same eclipses.
    start = timebase.first_slot_of_day("2024-03-18")                  # eclipse season
    runs = {}
    for scale in (1.0, 0.2):
        status, _, events = outage_plan(start, 20 * timebase.SLOTS_PER_DAY, rates=base.scaled(scale), seed=0)
        lengths = []
        for s in range(status.shape[1]):
            clean = (status[:, s] == OK).all(axis=1)
            edges = np.flatnonzero(np.diff(np.r_[0, clean.astype(int), 0]))
            lengths.extend(edges[1::2] - edges[::2])
        runs[scale] = np.mean(lengths)
        runs[scale, "eclipse"] = [e["first_slot"] for e in events if e["kind"] == "eclipse"]
    assert runs[0.2] > 3 * runs[1.0]
    assert runs[1.0, "eclipse"] == runs[0.2, "eclipse"] and runs[1.0, "eclipse"]


def test_synth_command_outage_scale(tmp_path):
    out = tmp_path / "calm"
    result = run([tool("suvi-fill"), "synth", "--out", str(out), "--hours", "2", "--resolution", "16",
                  "--outage-scale", "0.5", "--quiet"])
    assert result.returncode == 0, result.stderr
    recorded = json.loads((out / TRUTH_NAME).read_text())["rates"]
    assert recorded["band_drops_per_day"] == 1.5 and recorded["frame_drops_per_day"] == 2.0
    bad = run([tool("suvi-fill"), "synth", "--out", str(tmp_path / "bad"), "--hours", "1", "--outage-scale", "-2"])
    assert bad.returncode == 2 and "--outage-scale" in bad.stderr and not (tmp_path / "bad").exists()


# ---------------------------------------------------------------- realism and band coupling


def _demo_frames(band, count=4, resolution=64, seed=0):
    "`count` noisy frames of `band` over 8 days at `resolution`, as realism SolarImages (calibration undone)."
    from suvi_fill.sim import realism
    model, instrument = SunModel(seed, START, 8.0), Instrument(seed)
    first, i, frames = timebase.first_slot_of_day(START), timebase.BAND_INDEX[band], []
    for k in np.linspace(0, 8 * timebase.SLOTS_PER_DAY - 1, count).astype(int):
        slot = first + int(k)
        geometry = instrument.geometry(slot, 16, resolution)
        when = (slot + 0.5) * timebase.SLOT_SECONDS
        observed = instrument.observe(instrument.radiance(model, when, geometry, (resolution, resolution)),
                                      slot, 16, geometry)
        data = (observed[i] - instrument.offset[16][i]) / instrument.gain[16][i]
        frames.append(realism.SolarImage(data.astype(np.float64), (geometry.crpix1 - 1, geometry.crpix2 - 1),
                                         ephemeris.solar_radius_arcsec(when) / geometry.cdelt1, geometry.cdelt1))
    return frames


def test_realism_at_the_demo_resolution():
    "The radial profile through and above the limb and the on-disk spread within 25 % of AIA 171 at 64 px."
    from suvi_fill.sim import realism
    rows = {r["figure"]: r for r in realism.compare(_demo_frames(171), [])}
    met = [name for name in rows if "median" in name or "std" in name]
    assert len(met) == 5
    for name in met:
        assert rows[name]["ok"], rows[name]          # the old simulator: 0.54, 0.22, 0.38, 0.29, 0.65


def test_171_and_195_are_coupled_but_not_copies():
    model, instrument = SunModel(2, START, 2), Instrument(2)
    slot = timebase.first_slot_of_day(START) + 120
    geometry = instrument.geometry(slot, 16, 256)
    when = (slot + 0.5) * timebase.SLOT_SECONDS
    truth = instrument.radiance(model, when, geometry, (256, 256))
    radius = ephemeris.solar_radius_arcsec(when) / geometry.cdelt1
    rows, cols = np.mgrid[0:256, 0:256]
    disk = np.hypot(cols + 1 - geometry.crpix1, rows + 1 - geometry.crpix2) / radius < 0.9
    corr = np.corrcoef(truth[timebase.BAND_INDEX[171]][disk], truth[timebase.BAND_INDEX[195]][disk])[0, 1]
    assert 0.5 < corr < 0.99, corr


def test_loops_follow_dipole_field_lines_and_reach_above_the_limb():
    along, up, _ = dipole_line([0.03, 0.1], 0.02)
    lines = np.array([0.03, 0.1])[:, None]
    r2 = along ** 2 + (up + 0.02) ** 2                 # r = L sin^2(theta): r^3 = L^2 (r sin theta)^2... on the line
    sin2 = (up + 0.02) ** 2 / r2
    assert np.allclose(np.sqrt(r2), lines * sin2, rtol=1e-6)
    region = dict(lat=10.0, lon0=89.0, peak_day=0.0, life_days=1e6, envelope_em=0.0, core_em=0.0, size=0.06,
                  tilt=0.0, envelope_logt=6.3, core_logt=6.5)
    model = SunModel(0, START, 1)
    model.regions, model.flares = [region], []
    geometry = Geometry(128.5, 128.5, FIELD_OF_VIEW_ARCSEC / 256, FIELD_OF_VIEW_ARCSEC / 256)
    image = model.render(model.t0, geometry, (256, 256), components=("loops",))
    radius = ephemeris.solar_radius_arcsec(model.t0) / geometry.cdelt1
    rows, cols = np.mgrid[0:256, 0:256]
    rho = np.hypot(cols + 1 - 128.5, rows + 1 - 128.5) / radius
    assert image[timebase.BAND_INDEX[171]][rho > 1.01].sum() > 0.1 * image[timebase.BAND_INDEX[171]].sum()


@pytest.mark.parametrize("seed", [0, 3])
def test_no_global_daily_swing(seed):
    """The 171 median inside 0.5 R over one synthetic day (64 px, every two hours): each frame within 20 % of
    the day's mean.  The real quiet Sun does not brighten and dim as a whole within a day; an earlier Sun
    swung between 0.48 and 0.74 (its largest texture scales turned with its fastest keyframes)."""
    model, instrument = SunModel(seed, START, 1.0), Instrument(seed)
    first = timebase.first_slot_of_day(START)
    medians = []
    for slot in range(first, first + timebase.SLOTS_PER_DAY + 1, timebase.SLOTS_PER_DAY // 12):
        geometry = instrument.geometry(slot, 16, 64)
        when = (slot + 0.5) * timebase.SLOT_SECONDS
        truth = instrument.radiance(model, when, geometry, (64, 64))[timebase.BAND_INDEX[171]]
        radius = ephemeris.solar_radius_arcsec(when) / geometry.cdelt1
        rows, cols = np.mgrid[0:64, 0:64]
        medians.append(np.median(truth[np.hypot(cols + 1 - geometry.crpix1, rows + 1 - geometry.crpix2) < 0.5 * radius]))
    medians = np.array(medians)
    assert len(medians) == 13 and np.abs(medians / medians.mean() - 1).max() <= 0.2, medians / medians.mean()


def test_realism_at_640_px(tmp_path):
    """One 640-px slot of each of five Suns, as the realism notebook shows them (its 640-px cells are skipped in
    CI): every figure measurable at the references' scale, and the median over the five Suns of every figure
    within 25 % of the real one.  One Sun alone is not held to it: which regions and streamers stand at the
    limb moves a figure by up to a third either way (27 archives at 640 px in the realism notebook)."""
    from suvi_fill.sim import realism
    ratios = {}
    for seed in range(5):
        out = tmp_path / f"archive{seed}"
        result = run([tool("suvi-fill"), "synth", "--out", str(out), "--hours", "0.07", "--resolution", "640",
                      "--satellites", "16", "--outage-scale", "0", "--seed", str(seed), "--quiet"])
        assert result.returncode == 0, result.stderr
        rows = realism.compare(realism.archive_frames(out, 171, 1), realism.archive_frames(out, 195, 1))
        assert len(rows) == 9 and all(r["ok"] is not None and r["frames"] == 1 for r in rows)
        for row in rows:
            ratios.setdefault(row["figure"], []).append(row["ratio"])
    medians = {name: float(np.median(values)) for name, values in ratios.items()}
    assert all(abs(m - 1) <= realism.TOLERANCE for m in medians.values()), medians
