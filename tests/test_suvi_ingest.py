"""suvi_fill.archive.ingest: SUVI L2 FITS (from the real GOES-16 header and synthetic) to shards,
vetting reasons, unreadable files listed and not fatal, the build command end to end."""
import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest
from astropy.io import fits as afits

from helpers import ROOT, run, tool
from suvi_fill.corpus import shards as dataset
from suvi_fill.archive import fits
from suvi_fill.archive import ingest
from suvi_fill.physics import ephemeris, timebase
from suvi_fill.corpus import segments
from suvi_fill.sim.synth import simulator_digest

FIXTURE = (ROOT / "tests/data/suvi" /
           "dr_suvi-l2-ci195_g16_s20190403T093200Z_e20190403T093600Z_v1-0-0_rebinned.header")
DAY = "2024-03-01"


def sun_image(n, cdelt, crpix1, crpix2, crota, when, band, gain=1.0, offset=0.0, rng=None, noise=0.002,
              spot_width=0.1):
    "A limb-brightened disk with a bright spot due solar north and a faint corona, in the frame of the header values."
    rows, cols = np.mgrid[:n, :n].astype(np.float64)
    dx, dy = cols + 1.0 - crpix1, rows + 1.0 - crpix2
    rho = math.radians(crota)
    tx = cdelt * (math.cos(rho) * dx - math.sin(rho) * dy)
    ty = cdelt * (math.sin(rho) * dx + math.cos(rho) * dy)
    radius = ephemeris.solar_radius_arcsec(when)
    r = np.hypot(tx, ty) / radius
    disk = np.where(r < 1, 1.0 + 0.5 * (1 - np.sqrt(np.clip(1 - r ** 2, 0, 1))), 0.05 * np.exp(-(r - 1) * 4))
    spot = 20.0 * np.exp(-0.5 * (np.hypot(tx, ty - 0.5 * radius) / (spot_width * radius)) ** 2)
    image = (disk + spot) * band / 100.0
    image = gain * image + offset
    if rng is not None:
        image = image + rng.normal(0, noise, image.shape)
    return image.astype(np.float32)


def write_archive(directory, slots, satellites=(16, 18), n=48, gains=None, seed=0, roll=True, skip=(),
                  spot_width=0.1):
    "Real-format L2 files for `slots` x `satellites` x six bands; returns the list of paths."
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    cdelt = 3200.0 / n
    written = []
    for s_index, satellite in enumerate(satellites):
        for slot in slots:
            for b, band in enumerate(timebase.WAVELENGTHS):
                if (satellite, slot, band) in skip:
                    continue
                when = timebase.time_of(slot).timestamp() + 33.0
                crpix1, crpix2 = n / 2 + 0.5 + 0.8 * s_index, n / 2 + 0.5 - 0.6 * s_index
                crota = 1.5 * s_index if roll else 0.0
                gain, offset = (gains or {}).get(satellite, (1.0, 0.0))
                image = sun_image(n, cdelt, crpix1, crpix2, crota, when, band, gain, offset, rng, spot_width=spot_width)
                values = fits.l2_header_values(band, satellite, when, (n, n), cdelt=cdelt, crpix1=crpix1,
                                               crpix2=crpix2, crota=crota)
                path = directory / fits.l2_name(band, satellite, slot)
                fits.write_l2(path, image, values, durable=False)
                written.append(path)
    return written


def fixture_fits(path, data=None, **changes):
    "A FITS file with the real GOES-16 195 Å header (40x40 at 80 arcsec) and `data`."
    header = afits.Header.fromtextfile(FIXTURE)
    for key, value in changes.items():
        header[key.replace("_", "-") if key.startswith("DATE") else key] = value
    if data is None:
        data = sun_image(40, 80.0, 20.5, 20.5, 0.0, "2019-04-03T09:32:33", 195, rng=np.random.default_rng(3))
    for key in ("CHECKSUM", "DATASUM"):
        header.remove(key, ignore_missing=True)
    hdu = afits.PrimaryHDU(data=np.asarray(data, dtype=np.float64), header=header)
    hdu.writeto(path, overwrite=True)
    return path


@pytest.fixture(scope="module")
def real_header_corpus(tmp_path_factory):
    source = tmp_path_factory.mktemp("real")
    name = "dr_suvi-l2-ci195_g16_s20190403T093200Z_e20190403T093600Z_v1-0-0.fits"
    fixture_fits(source / name)
    out = tmp_path_factory.mktemp("real_shards")
    report = ingest.build(source, out, resolution=64, progress=False, span_min=1)
    return source / name, out, report


def test_real_header_is_parsed_and_placed(real_header_corpus):
    path, out, report = real_header_corpus
    data, header = fits.read_l2(path)
    assert (header.band, header.satellite, header.crpix1, header.crpix2) == (195, 16, 20.5, 20.5)
    assert (header.cdelt1, header.cdelt2, header.crota, header.exptime) == (80.0, 80.0, 0.0, 1.0)
    assert header.diam_sun == pytest.approx(767.8879) and header.solar_b0 == pytest.approx(6.438351961004259)
    assert header.b0 == pytest.approx(-6.438351961004259) and header.degraded and not header.empty
    assert header.dsun_obs == pytest.approx(149564385444.2639) and header.sat_thr == 12000.0
    assert header.time.isoformat().startswith("2019-04-03T09:32:33.34")
    assert report["reasons"]["clean"] == 1 and report["degraded"] == 1 and report["unreadable"] == []
    shard = dataset.Shard(out / dataset.shard_name("2019-04-03", 16))
    i = shard.index_of(timebase.slot_of(header.time))
    assert i == (9 * 60 + 32) // 4
    assert shard.present[i].tolist() == [False, False, False, True, False, False]
    assert shard.quality[i, 3] == dataset.CLEAN and shard.quality[i, 0] == dataset.MISSING
    assert shard.b0[i] == pytest.approx(-6.43835, abs=1e-4)
    # DIAM_SUN is at the original 2.5" scale (767.9 px -> 959.9"); the radius comes from DSUN_OBS.
    assert shard.radius[i] == pytest.approx(header.radius_arcsec / 50.0, rel=1e-5)
    assert shard.radius[i] * 2 * 50.0 == pytest.approx(767.8879 * 2.5, rel=2e-3)
    assert shard.time[i] == pytest.approx(timebase.unix_seconds(header.time))
    frame = dataset.decode(shard.band(i, 3))
    # Upsampled 40 -> 64 px: the disk stays centred, its flux per unit area kept.
    rows, cols = np.mgrid[:64, :64]
    mask = frame > 0.5 * 195 / 100
    assert abs((rows * mask).sum() / mask.sum() - 31.5) < 0.6 and abs((cols * mask).sum() / mask.sum() - 31.5) < 0.6
    assert mask.sum() == pytest.approx(math.pi * shard.radius[i] ** 2, rel=0.06)
    shard.close()


def test_synthetic_frames_are_recentred_derotated_and_rescaled(tmp_path):
    d0 = timebase.first_slot_of_day(DAY)
    write_archive(tmp_path / "src", [d0 + 10], n=96)            # 96 px -> 48 px: block average then warp
    ingest.build(tmp_path / "src", tmp_path / "out", resolution=48, progress=False, span_min=0)
    truth = sun_image(48, 3200 / 48, 24.5, 24.5, 0.0, timebase.time_of(d0 + 10).timestamp() + 33, 171)
    for satellite in (16, 18):                                 # 18 is off-centre and rolled by 1.5 degrees
        shard = dataset.Shard(tmp_path / "out" / dataset.shard_name(DAY, satellite))
        got = dataset.decode(shard.band(10, timebase.BAND_INDEX[171]))
        rows, cols = np.mgrid[:48, :48]
        inner = np.hypot(rows - 23.5, cols - 23.5) < 0.8 * shard.radius[10]
        assert np.median(np.abs(got - truth)[inner] / truth[inner]) < 0.01, satellite
        spot = got > 5 * 171 / 100
        assert abs((rows * spot).sum() / spot.sum() - (23.5 + 0.5 * shard.radius[10])) < 0.5   # north is +rows
        assert abs((cols * spot).sum() / spot.sum() - 23.5) < 0.5
        shard.close()


def header_values(band=195, satellite=16, slot=None, n=32, **extra):
    slot = timebase.first_slot_of_day(DAY) + 5 if slot is None else slot
    return fits.l2_header_values(band, satellite, timebase.time_of(slot).timestamp() + 20, (n, n), cdelt=100.0, **extra)


def test_vetting_reasons(tmp_path):
    base = sun_image(32, 100.0, 16.5, 16.5, 0.0, "2024-03-01T00:20:00", 195, rng=np.random.default_rng(0))
    h = fits.parse_l2_header(afits.Header(header_values()), fits.l2_name(195, 16, timebase.first_slot_of_day(DAY) + 5))
    assert ingest.vet(base, h) == dataset.CLEAN
    assert ingest.vet(base, dataclasses.replace(h, degraded=True)) == dataset.CLEAN
    assert ingest.vet(base, dataclasses.replace(h, empty=True)) == dataset.EMPTY
    assert ingest.vet(base, dataclasses.replace(h, exptime=0.0)) == dataset.EMPTY
    nan = base.copy(); nan[:4] = np.nan
    assert ingest.vet(nan, h) == dataset.NONFINITE
    one = base.copy(); one[3, 3] = np.inf                     # one bad pixel: kept (zeroed at ingest)
    assert ingest.vet(one, h) == dataset.CLEAN
    assert ingest.vet(np.full_like(base, -999.0), h) == dataset.SENTINEL
    half = base.copy(); half[:20] = 0.0
    assert ingest.vet(half, h) == dataset.SENTINEL
    hot = base.copy(); hot[:4] = 15000.0
    assert ingest.vet(hot, h) == dataset.SATURATED
    kernel = base.copy(); kernel[16, 16:19] = 15000.0          # a flare kernel: kept
    assert ingest.vet(kernel, h) == dataset.CLEAN


def test_build_lists_unreadable_files_and_counts_reasons(tmp_path):
    d0 = timebase.first_slot_of_day(DAY)
    src = tmp_path / "src"
    write_archive(src, range(d0 + 100, d0 + 104), n=32)
    n = 32
    image = sun_image(n, 100.0, 16.5, 16.5, 0.0, timebase.time_of(d0 + 110).timestamp(), 94)

    def put(band, satellite, slot, data, **extra):
        values = fits.l2_header_values(band, satellite, timebase.time_of(slot).timestamp() + 20, (n, n), cdelt=100.0,
                                       **extra)
        fits.write_l2(src / fits.l2_name(band, satellite, slot), data, values, durable=False)

    put(94, 16, d0 + 110, image, empty=True)
    put(131, 16, d0 + 110, np.where(np.arange(n * n).reshape(n, n) % 2, np.nan, image).astype(np.float32))
    put(171, 16, d0 + 110, np.full((n, n), -1.0, np.float32))
    put(195, 16, d0 + 110, np.full((n, n), 20000.0, np.float32) + image)
    put(284, 16, d0 + 110, image, degraded=True)
    (src / fits.l2_name(304, 16, d0 + 110)).write_bytes(b"SIMPLE  = not really a FITS file")
    good = src / fits.l2_name(94, 18, d0 + 110)
    put(94, 18, d0 + 110, image)
    good.write_bytes(good.read_bytes()[:3000])                 # truncated
    put(131, 18, d0 + 111, image, **{"DATE-OBS": "2024-03-01T12:00:00.000"})   # wrong slot for its name
    (src / "README.fits").write_text("not an L2 file")
    (src / "dr_suvi-l2-ci195_g17_s20240301T000000Z_e20240301T000400Z_v1-0-0.fits").write_bytes(b"")
    report = ingest.build(src, tmp_path / "out", resolution=32, progress=False, span_min=1)
    reasons = report["reasons"]
    assert reasons["clean"] == 4 * 12 + 1 and reasons["empty"] == 1 and reasons["nonfinite"] == 1
    assert reasons["sentinel"] == 1 and reasons["saturated"] == 1 and reasons["unreadable"] == 3
    assert report["degraded"] == 1
    unreadable = {e["file"]: e["reason"] for e in report["unreadable"]}
    assert set(unreadable) == {fits.l2_name(304, 16, d0 + 110), fits.l2_name(94, 18, d0 + 110),
                               fits.l2_name(131, 18, d0 + 111)}
    assert "slot" in unreadable[fits.l2_name(131, 18, d0 + 111)]
    assert {e["file"] for e in report["skipped"]} == {"README.fits", "dr_suvi-l2-ci195_g17_s20240301T000000Z"
                                                                     "_e20240301T000400Z_v1-0-0.fits"}
    on_disk = json.loads((tmp_path / "out" / ingest.REPORT).read_text())
    assert on_disk["unreadable"] == report["unreadable"]
    shard = dataset.Shard(tmp_path / "out" / dataset.shard_name(DAY, 16))
    assert shard.quality[110].tolist() == [dataset.EMPTY, dataset.NONFINITE, dataset.SENTINEL, dataset.SATURATED,
                                           dataset.CLEAN, dataset.UNREADABLE]
    assert shard.present[100:104].all() and not shard.present[:100].any()
    shard.close()


def test_cli_end_to_end_and_bad_input(tmp_path):
    d0 = timebase.first_slot_of_day(DAY)
    write_archive(tmp_path / "src", range(d0 + 30, d0 + 70), n=32)
    out = tmp_path / "corpus"
    built = run([tool("suvi-fill"), "build", "--source", str(tmp_path / "src"), "--out", str(out),
                 "--resolution", "32", "--span-min", "4"], env={"SUVI_FILL_PROGRESS_SECONDS": "0"})
    assert built.returncode == 0, built.stderr
    assert "built 2 shards" in built.stdout and "clean 480" in built.stdout
    assert "ingest" in built.stderr and "\r" not in built.stderr       # progress lines (a pipe: no bar)
    profiled = run([tool("suvi-fill"), "profile", "--shards", str(out)])
    assert profiled.returncode == 0, profiled.stderr
    assert "360 slots, satellites (16, 18)" in profiled.stdout and (out / "availability.npz").exists()
    shown = run([tool("suvi-fill"), "inspect", "--shards", str(out)])
    assert shown.returncode == 0, shown.stderr
    assert "days: 1 (2024-03-01 .. 2024-03-01)" in shown.stdout and "satellites: g16, g18" in shown.stdout
    assert "targets at +-4" in shown.stdout and "train:" in shown.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["segments"]["train"][0] in ([16, d0 + 30, d0 + 70], [18, d0 + 30, d0 + 70])
    # Bad input: one line, non-zero, nothing written.
    missing = run([tool("suvi-fill"), "build", "--source", str(tmp_path / "nope"), "--out", str(tmp_path / "x")])
    assert missing.returncode == 2 and missing.stderr.count("\n") == 1 and "not a directory" in missing.stderr
    assert not (tmp_path / "x").exists()
    (tmp_path / "empty").mkdir()
    none = run([tool("suvi-fill"), "build", "--source", str(tmp_path / "empty"), "--out", str(tmp_path / "y")])
    assert none.returncode == 2 and "no SUVI L2 files" in none.stderr and not (tmp_path / "y").exists()
    bad = run([tool("suvi-fill"), "inspect", "--shards", str(tmp_path / "empty")])
    assert bad.returncode == 2 and "no manifest" in bad.stderr


def test_demo_runs_the_corpus_stages_idempotently(tmp_path):
    out = tmp_path / "demo"
    # The demo's 8-day archive is the longest single step of the suite: a hang guard under pytest's own
    # per-test --timeout 1200, not the helper's 600 s, which a loaded 2-core machine can exceed.
    first = run([tool("suvi-fill"), "demo", "--out", str(out), "--until", "corpus", "--quiet"], timeout=1100)
    assert first.returncode == 0, first.stderr
    from suvi_fill import demo
    from suvi_fill.physics import timebase
    shards, slots = 2 * int(demo.DEMO_DAYS), int(demo.DEMO_DAYS * timebase.SLOTS_PER_DAY)     # both satellites
    for stage in ("[synth] wrote", f"[build] {shards} shards", f"[profile] {slots:,} slots", "[inspect]", "train:"):
        assert stage in first.stdout, stage
    assert (out / "shards" / "manifest.json").exists() and (out / "shards" / "availability.npz").exists()
    second = run([tool("suvi-fill"), "demo", "--out", str(out), "--until", "corpus", "--quiet"])
    assert second.returncode == 0, second.stderr
    assert "[synth] reusing" in second.stdout and "is up to date" in second.stdout
    digest = [line for line in first.stdout.splitlines() if "manifest " in line]
    assert digest and digest == [line for line in second.stdout.splitlines() if "manifest " in line]
    # An archive drawn by other simulator code is drawn again, and its corpus built again.
    truth_path = out / "archive" / "synth_truth.json"
    truth = json.loads(truth_path.read_text())
    assert truth["simulator"] == simulator_digest()
    truth_path.write_text(json.dumps(dict(truth, simulator="0" * 16)))
    third = run([tool("suvi-fill"), "demo", "--out", str(out), "--until", "corpus", "--quiet"], timeout=1100)
    assert third.returncode == 0, third.stderr
    assert "[synth] wrote" in third.stdout and f"[build] {shards} shards" in third.stdout, third.stdout
    assert json.loads(truth_path.read_text())["simulator"] == truth["simulator"]
