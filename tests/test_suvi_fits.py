"""SUVI L2 FITS: the real GOES-16 header parsed value by value, round trips, and unreadable files."""
import datetime as dt
import math
from pathlib import Path

import numpy as np
import pytest
from astropy.io import fits

from suvi_fill.archive import fits as l2
from suvi_fill.physics import ephemeris, timebase

#: The real GOES-16 header (sunpy test data, BSD-2-Clause), kept in the repository.
FIXTURE = (Path(__file__).resolve().parent / "data" / "suvi"
           / "dr_suvi-l2-ci195_g16_s20190403T093200Z_e20190403T093600Z_v1-0-0_rebinned.header")
REAL_NAME = "dr_suvi-l2-ci195_g16_s20190403T093200Z_e20190403T093600Z_v1-0-0.fits"
UTC = dt.timezone.utc


@pytest.fixture()
def real_file(tmp_path):
    "A FITS file written by astropy from the real header, with plausible 40x40 data."
    header = fits.Header.fromtextfile(FIXTURE)
    data = np.random.default_rng(5).gamma(0.3, 0.7, (40, 40))
    path = tmp_path / REAL_NAME
    fits.PrimaryHDU(data=data, header=header).writeto(path)
    return path, data


def test_every_value_of_the_real_header(real_file):
    path, written = real_file
    data, h = l2.read_l2(path)
    assert data.dtype == np.float32 and data.shape == (40, 40)
    assert np.allclose(data, written, rtol=1e-6)
    assert h.path == str(path)
    assert (h.band, h.satellite, h.version) == (195, 16, "1-0-0")
    assert h.time == dt.datetime(2019, 4, 3, 9, 32, 33, 340000, tzinfo=UTC)
    assert h.start == dt.datetime(2019, 4, 3, 9, 32, 33, 340000, tzinfo=UTC)
    assert h.end == dt.datetime(2019, 4, 3, 9, 35, 43, 348000, tzinfo=UTC)
    assert h.slot == timebase.slot_of("2019-04-03T09:32:00Z")
    assert h.shape == (40, 40)
    assert (h.crpix1, h.crpix2, h.cdelt1, h.cdelt2) == (20.5, 20.5, 80.0, 80.0)
    assert h.centre == (19.5, 19.5)
    assert h.diam_sun == 767.8878999999999
    assert h.solar_b0 == 6.438351961004259
    assert h.hglt_obs == -6.438351961004259 and h.b0 == h.hglt_obs
    assert h.crota == 0.0
    assert h.dsun_obs == 149564385444.2639
    assert h.exptime == 1.0
    assert h.bunit == "W m-2 sr-1"
    assert h.empty is False and h.degraded is True and h.eclipse is False
    assert h.img_min == -1.534929135325052 and h.img_max == 245.9738473718426
    assert h.img_mean == 0.2201410841614308 and h.img_sdev == 0.5465047098786959
    assert h.sat_thr == 12000.0
    assert h.defaulted == ()
    # Derived: the rebinned file's DIAM_SUN is still in native pixels; radius_px is right for 80"/px.
    assert abs(h.radius_arcsec - h.diam_sun * 2.5 / 2) < 0.05
    assert abs(h.radius_px - h.radius_arcsec / 80.0) < 1e-12 and 11.9 < h.radius_px < 12.1
    assert abs(h.b0 - ephemeris.solar_b0(h.time)) < 0.1


def test_name_parse_matches_the_header():
    header = fits.Header.fromtextfile(FIXTURE)
    named = l2.parse_l2_name(header["FILENAME"])
    assert (named.band, named.satellite, named.version) == (195, 16, "1-0-0")
    assert named.start == dt.datetime(2019, 4, 3, 9, 32, tzinfo=UTC)
    assert named.end == dt.datetime(2019, 4, 3, 9, 36, tzinfo=UTC)
    assert named.slot == timebase.slot_of(header["DATE-OBS"])
    assert l2.l2_name(195, 16, named.slot) == header["FILENAME"]
    assert l2.parse_l2_name(FIXTURE.name).band == 195


@pytest.mark.parametrize("band", timebase.WAVELENGTHS)
@pytest.mark.parametrize("satellite", timebase.SATELLITES)
def test_round_trip_every_band_and_satellite(tmp_path, band, satellite):
    rng = np.random.default_rng(band * satellite)
    image = rng.normal(1.0, 0.5, (32, 24)).astype(np.float32)
    when = timebase.time_of(timebase.slot_of("2024-03-20T23:58:10")) + dt.timedelta(seconds=17.25)
    values = l2.l2_header_values(band, satellite, when, image.shape, crpix1=12.9, crpix2=16.1,
                                 cdelt=100.0, crota=-0.45, exptime=0.25, eclipse=True)
    path = l2.write_l2(tmp_path / values["FILENAME"], image, values, durable=satellite == 16)
    data, h = l2.read_l2(path)
    assert np.array_equal(data, image)
    assert (h.band, h.satellite, h.slot, h.time) == (band, satellite, timebase.slot_of(when), when)
    assert (h.crpix1, h.crpix2, h.cdelt1, h.crota, h.exptime) == (12.9, 16.1, 100.0, -0.45, 0.25)
    assert h.eclipse and not h.empty and not h.degraded and h.defaulted == ()
    assert h.img_min == float(image.min()) and abs(h.img_sdev - float(image.std())) < 1e-5
    assert [p.name for p in tmp_path.iterdir()] == [values["FILENAME"]]     # no temporary left
    with fits.open(path) as hdus:
        hdus.verify("exception")
        assert hdus[0].header["PC1_2"] == pytest.approx(-math.sin(math.radians(-0.45)))


def test_roll_convention_round_trip():
    values = l2.l2_header_values(304, 16, "2020-01-01T00:00:00", (64, 64), crpix1=30.2, crpix2=34.7,
                                 cdelt=50.0, crota=2.0)
    header = l2.parse_l2_header(fits.Header(list(values.items())), values["FILENAME"], (64, 64))
    rows, cols = np.mgrid[0:64, 0:64]
    tx, ty = l2.world_from_pixel(header, rows, cols)
    back = l2.pixel_from_world(header, tx, ty)
    assert np.allclose(back[0], rows) and np.allclose(back[1], cols)
    # The same numbers as astropy's WCS of the header (TAN projection: linear to < 0.2" within 2200").
    from astropy.wcs import WCS
    wcs = WCS(fits.Header(list(values.items())))
    lon, lat = wcs.pixel_to_world_values(cols.ravel(), rows.ravel())
    lon = (np.asarray(lon) + 180.0) % 360.0 - 180.0
    assert np.allclose(lon * 3600.0, tx.ravel(), atol=0.2) and np.allclose(np.asarray(lat) * 3600.0, ty.ravel(), atol=0.2)


def test_missing_defaults_are_listed(tmp_path):
    values = l2.l2_header_values(94, 18, "2022-08-01T12:00:30", (8, 8), cdelt=400.0)   # the disk fits: a SUVI frame
    for key in ("CROTA", "HGLT_OBS", "EXPTIME", "EMPTY"):
        del values[key]
    path = l2.write_l2(tmp_path / values["FILENAME"], np.ones((8, 8)), values)
    _, h = l2.read_l2(path)
    assert set(h.defaulted) == {"CROTA", "HGLT_OBS", "EXPTIME", "EMPTY"}
    assert h.crota == 0.0 and h.b0 == -h.solar_b0 and math.isnan(h.exptime) and h.empty is False


def test_unusable_files_name_file_and_key(tmp_path):
    good = l2.l2_header_values(171, 16, "2022-08-01T12:00:30", (8, 8))
    name = good["FILENAME"]
    # Missing required key.
    broken = dict(good); del broken["CRPIX1"]
    path = l2.write_l2(tmp_path / name, np.ones((8, 8)), broken)
    with pytest.raises(l2.L2FormatError, match=rf"{name}: missing header key\(s\) CRPIX1"):
        l2.read_l2(path)
    # Band in the name disagrees with WAVELNTH.
    other = tmp_path / name.replace("ci171", "ci195")
    l2.write_l2(other, np.ones((8, 8)), good)
    with pytest.raises(l2.L2FormatError, match="WAVELNTH = 171 but the file name says band 195"):
        l2.read_l2(other)
    # Truncated file.
    whole = l2.encode_l2(np.ones((64, 64)), good)
    cut = tmp_path / "cut" / name
    cut.parent.mkdir()
    cut.write_bytes(whole[: len(whole) // 2 + 100])
    with pytest.raises(l2.L2FormatError, match=name):
        l2.read_l2(cut)
    # Not FITS at all.
    junk = tmp_path / "junk" / name
    junk.parent.mkdir()
    junk.write_bytes(b"not a fits file\n" * 300)
    with pytest.raises(l2.L2FormatError, match=rf"{name}: unreadable FITS"):
        l2.read_l2(junk)
    # A header-only file (no image).
    empty = tmp_path / "empty" / name
    empty.parent.mkdir()
    fits.PrimaryHDU(header=fits.Header(list(good.items()))).writeto(empty)
    with pytest.raises(l2.L2FormatError, match="no 2-D image"):
        l2.read_l2(empty)
    # A file name that is not an L2 name, and no FILENAME to fall back on.
    anonymous = dict(good); del anonymous["FILENAME"]
    odd = l2.write_l2(tmp_path / "frame.fits", np.ones((8, 8)), anonymous)
    with pytest.raises(l2.L2FormatError, match="satellite is unknown"):
        l2.read_l2(odd)
    with pytest.raises(ValueError, match="not a SUVI L2 file name"):
        l2.parse_l2_name("OR_SUVI-L1b-Fe195_G16_s20190930932333_e20190930932343_c20190930932575.fits")
