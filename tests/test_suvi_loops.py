"""Loops that heat and cool (`suvi_fill.sim.loops` and the scene's strands): the 0-D cooling model, the lags of
an active region's light curves against 171 (Viall & Klimchuk 2012: hot bands lead by minutes to ~5,000 s),
and the loops' time-mean brightness, which the regions' contrast against the quiet Sun rests on."""
import numpy as np
import pytest

from suvi_fill.physics.timebase import SLOT_SECONDS, WAVELENGTHS
from suvi_fill.sim.emission import dem_radiance
from suvi_fill.sim.loops import (COOLED_LOGT, TRACK_HALF_MM, TRACK_HEATING, TRACK_SECONDS, band_lags,
                                 cooling_tracks, strand_table)
from suvi_fill.sim.scene import (LOOP_DEM_WIDTH, LOOP_POINTS, LOOP_WIDTH, SunModel, loop_points, region_light_curves,
                                 region_loops, region_strength)

BAND = {b: i for i, b in enumerate(WAVELENGTHS)}


def test_a_heated_strand_evaporates_then_cools_through_the_bands():
    seconds, temperature, density = cooling_tracks([15.0, 40.0, 90.0], [0.6, 0.08, 0.015])
    logt = np.log10(temperature)
    assert (logt.max(1) > 6.8).all()                                    # heated above 6 MK
    assert (density.argmax(1) > temperature.argmax(1)).all()            # the loop fills after the peak
    cooled = np.array([seconds[k + np.argmax(row[k:] < COOLED_LOGT)] for row, k in zip(logt, logt.argmax(1))])
    assert (np.diff(cooled) > 0).all() and cooled[0] > 300 and cooled[-1] < 3 * 3600, cooled   # longer, slower


def test_every_strand_of_the_table_peaks_in_the_hot_bands_before_171():
    table = strand_table(LOOP_DEM_WIDTH)
    flux = table["flux"]
    assert flux.shape[0] == len(TRACK_HALF_MM) * len(TRACK_HEATING)
    assert (table["cooled"] < TRACK_SECONDS).all()
    for row in flux:
        first = row[:int(np.argmax(table["seconds"] > 4 * 3600))]           # the event's own light curves
        peak = {b: table["seconds"][first[:, BAND[b]].argmax()] for b in WAVELENGTHS}
        assert peak[284] < peak[171] and peak[195] < peak[171], peak


def test_hot_bands_lead_171_in_an_active_region():
    "Six hours of the strongest region of seed 1's Sun at the archive's cadence: 94, 195 and 284 lead 171."
    sun = SunModel(seed=1, start="2024-03-18", days=1)
    index = int(np.argmax([region_strength(r, 0.25) for r in sun.regions]))
    days = np.arange(0, 6 * 3600, SLOT_SECONDS) / 86400.0
    curves = region_light_curves(sun, index, days)
    lags = band_lags(curves, SLOT_SECONDS)
    for band in (94, 195, 284):
        assert 60 < lags[band] < 7200, lags
    # Steady loops (no heating, no cooling) have no lag to measure: the lead is the model's.
    assert (curves.std(0) / curves.mean(0))[[BAND[94], BAND[171]]].min() > 0.02


def test_band_lags_recovers_known_shifts_and_their_sign():
    t = np.arange(0, 8 * 3600, 240.0)
    rng = np.random.default_rng(0)
    signal = np.convolve(rng.standard_normal(len(t) + 40), np.hanning(15), "same")
    shifted = lambda lead: np.interp(t + lead, np.arange(-20, len(t) + 20) * 240.0, signal)   # a band `lead` s early
    curves = np.stack([shifted(d) for d in (1500, 480, 0, -720, 240, 0)], axis=1) + 10.0
    lags = band_lags(curves, 240.0)
    for band, lead in zip(WAVELENGTHS, (1500, 480, 0, -720, 240, 0)):
        assert lags[band] == pytest.approx(lead, abs=40), lags


def test_the_loops_keep_their_time_mean_in_every_band():
    "Over two days at the archive's cadence each band's loop flux averages the former steady loops' (within 3 %)."
    sun = SunModel(seed=0, start="2024-03-18", days=1)
    index = int(np.argmax([region_strength(r, 0.25) for r in sun.regions]))
    region = sun.regions[index]
    loops = region_loops(sun.seed, index, region)
    days = np.arange(0, 2 * 86400, SLOT_SECONDS) / 86400.0
    mean = np.mean([loop_points(loops, region["lat"], 0.0, region["tilt"], 0.0, 1.0, d, LOOP_POINTS)[1].sum(0)
                    for d in days], axis=0)
    steady = (loops["em"][:, None] * dem_radiance(loops["logt"], LOOP_DEM_WIDTH)
              * (LOOP_WIDTH * loops["step"].sum(1))[:, None]).sum(0)
    assert np.allclose(mean / steady, 1.0, atol=0.03), mean / steady
