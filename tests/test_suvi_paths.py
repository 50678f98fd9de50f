"""Slot and time arithmetic round trips, and the solar ephemeris against the real SUVI header."""
import datetime as dt
from pathlib import Path

import numpy as np
import pytest
from astropy.io import fits
from hypothesis import given, settings, strategies as st

from suvi_fill.physics import ephemeris, timebase

#: The real GOES-16 header (sunpy test data, BSD-2-Clause), kept in the repository.
FIXTURE = (Path(__file__).resolve().parent / "data" / "suvi"
           / "dr_suvi-l2-ci195_g16_s20190403T093200Z_e20190403T093600Z_v1-0-0_rebinned.header")
UTC = dt.timezone.utc


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=-10_000_000, max_value=20_000_000))
def test_slot_time_round_trip(slot):
    start = timebase.time_of(slot)
    assert timebase.slot_of(start) == slot
    assert timebase.slot_of(start + dt.timedelta(seconds=timebase.SLOT_SECONDS - 1e-3)) == slot
    assert timebase.slot_of(start - dt.timedelta(microseconds=1)) == slot - 1
    day = timebase.day_of_slot(slot)
    assert slot in timebase.slots_of_day(day)
    assert timebase.slot_of(np.datetime64(start.replace(tzinfo=None), "us")) == slot
    assert timebase.slot_of(start.isoformat()) == slot
    assert timebase.datetime64_of(slot) == np.datetime64(start.replace(tzinfo=None), "s")


@settings(max_examples=200, deadline=None)
@given(st.dates(min_value=dt.date(1971, 1, 1), max_value=dt.date(2099, 12, 31)))
def test_days_tile_the_slots(day):
    slots = timebase.slots_of_day(day)
    assert len(slots) == timebase.SLOTS_PER_DAY == 360
    assert timebase.time_of(slots[0]) == dt.datetime(day.year, day.month, day.day, tzinfo=UTC)
    assert {timebase.day_of_slot(slots[0]), timebase.day_of_slot(slots[-1])} == {day.isoformat()}
    assert timebase.day_of_slot(slots[-1] + 1) == (day + dt.timedelta(days=1)).isoformat()
    assert timebase.slots_of_day(day.isoformat()) == slots


def test_inputs_agree_across_types():
    iso = "2019-04-03T09:32:33.340"
    expected = timebase.slot_of(dt.datetime(2019, 4, 3, 9, 32, 33, 340000, tzinfo=UTC))
    for value in (iso, iso + "Z", "2019-04-03T04:32:33.340-05:00", np.datetime64(iso),
                  dt.datetime(2019, 4, 3, 9, 32, 33, 340000)):
        assert timebase.slot_of(value) == expected, value
    array = np.array([iso, "2019-04-03T09:36:00"], dtype="datetime64[ms]")
    assert timebase.slot_of(array).tolist() == [expected, expected + 1]


def test_bad_times_say_what_is_wrong():
    with pytest.raises(ValueError, match="not an ISO time"):
        timebase.slot_of("yesterday")
    with pytest.raises(ValueError, match="NaT"):
        timebase.slot_of(np.datetime64("NaT"))
    with pytest.raises(ValueError, match="YYYYMMDDTHHMMSSZ"):
        timebase.parse_stamp("2019-04-03")


def test_fixture_file_name_stamps_are_one_slot():
    header = fits.Header.fromtextfile(FIXTURE)
    slot = timebase.slot_of(header["DATE-OBS"])
    name = header["FILENAME"]
    assert f"_s{timebase.format_stamp(timebase.time_of(slot))}_" in name
    assert f"_e{timebase.format_stamp(timebase.time_of(slot + 1))}_" in name


def test_b0_and_radius_match_the_real_header():
    header = fits.Header.fromtextfile(FIXTURE)
    b0 = ephemeris.solar_b0(header["DATE-OBS"])
    # SUVI writes B0 twice: HGLT_OBS is the standard B0, SOLAR_B0 has the opposite sign.
    assert abs(b0 - header["HGLT_OBS"]) < 0.1
    assert abs(abs(b0) - header["SOLAR_B0"]) < 0.1 and header["SOLAR_B0"] == -header["HGLT_OBS"]
    radius = ephemeris.solar_radius_arcsec(header["DATE-OBS"], header["DSUN_OBS"])
    assert abs(2 * radius / 2.5 - header["DIAM_SUN"]) < 0.05     # DIAM_SUN is in native 2.5" pixels
    assert abs(ephemeris.sun_distance_m(header["DATE-OBS"]) / header["DSUN_OBS"] - 1) < 5e-4


@pytest.mark.parametrize("day, expected", [
    # B0 from the Astronomical Almanac's tables (0h UT), to 0.01 deg.
    ("2019-03-06", -7.25), ("2019-06-07", 0.0), ("2019-09-08", 7.25), ("2019-12-08", 0.0),
    ("2024-01-01", -3.0),
])
def test_b0_through_the_year(day, expected):
    assert abs(ephemeris.solar_b0(day) - expected) < 0.15
