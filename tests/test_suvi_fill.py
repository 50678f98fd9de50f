"""suvi-fill fill: the lost bands of an archive as L2 FITS files (geometry, radiance, keys, the unfillable
listed, the source untouched), opened by sunpy as SUVI maps, and sunpy maps read as sources.

sunpy is the optional `sunpy` extra: its tests skip without it, except under CI (which installs it),
where its absence fails the run."""
import hashlib
import importlib
import os
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from helpers import run, tool
from suvi_fill.archive import fits
from suvi_fill.archive import ingest
from suvi_fill.physics import ephemeris, timebase
from suvi_fill.sim.outages import OutageRates
from suvi_fill.sim.scene import DEFAULT_START
from suvi_fill.sim.synth import archive_path, synthesize

FIRST = timebase.first_slot_of_day(DEFAULT_START)
LOST_171 = (171, 16, FIRST + 10)            # one band of a GOES-16 frame
LOST_FRAME = (18, FIRST + 20)               # every band of a GOES-18 frame


def need(module: str):
    "Import `module`: skip without it, except under CI (env CI set), where the sunpy extra must be installed."
    if os.environ.get("CI", "").strip().lower() in ("", "0", "false", "no"):
        return pytest.importorskip(module, reason="the sunpy extra is not installed")
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise RuntimeError(f"CI installs the sunpy extra (.ci/quickstart: .[dev,sunpy]), but {exc}") from None


def snapshot(directory: Path) -> dict:
    return {str(p.relative_to(directory)): (p.stat().st_size, p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(directory.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    "A 2-hour 32 px archive with a band, a frame and all of 94 A removed, filled by `linear` through the CLI."
    work = tmp_path_factory.mktemp("fill")
    archive, removed = work / "archive", work / "removed"
    synthesize(archive, hours=2, resolution=32, progress=False, rates=OutageRates().scaled(0))
    removed.mkdir()
    lost = [archive_path(archive, *LOST_171)]
    lost += [archive_path(archive, band, LOST_FRAME[0], LOST_FRAME[1]) for band in timebase.WAVELENGTHS]
    lost += list(archive.rglob("dr_suvi-l2-ci094_*.fits"))
    for path in lost:
        if path.exists():
            os.replace(path, removed / path.name)
    before = snapshot(archive)
    result = run([tool("suvi-fill"), "fill", "--source", str(archive), "--out", str(work / "out"),
                  "--filler", "linear", "--quiet"])
    assert result.returncode == 0, result.stderr
    return work, archive, removed, before, result


def test_fill_writes_each_lost_band_with_the_frames_geometry_and_radiance(filled):
    work, archive, removed, before, result = filled
    band, satellite, slot = LOST_171
    name = fits.l2_name(band, satellite, slot)
    data, header = fits.read_l2(work / "out" / name)
    _, cards = fits.read_l2_raw(work / "out" / name)
    observed, original = fits.read_l2(removed / name)
    sibling = fits.read_l2(archive_path(archive, 195, satellite, slot))[1]
    for key in ("crpix1", "crpix2", "cdelt1", "cdelt2", "crota", "shape", "time", "dsun_obs", "hglt_obs"):
        assert getattr(header, key) == getattr(sibling, key) == getattr(original, key), key
    assert (header.band, header.satellite, header.slot, header.bunit) == (171, 16, slot, "W m-2 sr-1")
    assert cards["FILLED"] is True and cards["FILLER"] == "linear" and cards["FILLCKPT"] == "none"
    assert fits.parse_l2_name(cards["FILLREF"]).slot == slot and list(archive.rglob(cards["FILLREF"]))  # an observed band
    assert cards["NUM_IMGS"] == 0 and cards["FILLGAP"] == 0          # GOES-18 held 171 in the same slot
    rows, cols = np.mgrid[:32, :32]
    tx, ty = fits.world_from_pixel(header, rows, cols)
    disk = np.hypot(tx, ty) < 0.9 * header.radius_arcsec
    relative = np.abs(data - observed)[disk] / np.abs(observed)[disk]
    assert np.median(relative) < 0.25, np.median(relative)            # physical radiance, not the coded value
    assert abs(np.log(data[disk].mean() / observed[disk].mean())) < 0.25


def test_a_frame_that_lost_every_band_borrows_its_neighbours_geometry(filled):
    work, archive, _, _, _ = filled
    satellite, slot = LOST_FRAME
    written = sorted(p.name for p in (work / "out").glob(f"*_g{satellite}_s{timebase.format_stamp(timebase.time_of(slot))}*"))
    assert written == sorted(fits.l2_name(b, satellite, slot) for b in timebase.WAVELENGTHS if b != 94)
    header = fits.read_l2(work / "out" / written[0])[1]
    _, cards = fits.read_l2_raw(work / "out" / written[0])
    neighbour = fits.read_l2(archive.rglob(cards["FILLREF"]).__next__())[1]
    assert abs(neighbour.slot - slot) == 1 and header.slot == slot
    assert (header.crpix1, header.cdelt1, header.crota) == (neighbour.crpix1, neighbour.cdelt1, neighbour.crota)
    assert "OBSGEO-X" not in cards and abs(header.b0 - ephemeris.solar_b0(header.time)) < 1e-9


def test_unfillable_bands_are_listed_and_counted_and_the_source_is_untouched(filled):
    work, archive, _, before, result = filled
    import json
    report = json.loads((work / "out" / "fill_report.json").read_text())
    frames = {(e["satellite"], e["slot"]) for e in report["unfilled"] if 94 in e["bands"]}
    assert len(frames) == 2 * 30 and all("no frame within" in e["reason"] for e in report["unfilled"])
    assert f"{len(report['unfilled'])} frames" in result.stdout and "could not be filled" in result.stdout
    assert not list((work / "out").glob("dr_suvi-l2-ci094_*")) and not (work / "out" / ".fill-corpus").exists()
    assert snapshot(archive) == before


def test_refusals_are_one_line(tmp_path, filled):
    work, archive, _, _, _ = filled
    cases = [(["--filler", "linear", "--out", str(archive / "filled")], "inside --source"),
             (["--checkpoint", str(tmp_path / "none.pt")], "no such file")]
    for extra, message in cases:
        command = [tool("suvi-fill"), "fill", "--source", str(archive), "--out", str(tmp_path / "out"), "--quiet"]
        result = run(command + extra)
        assert result.returncode == 2 and message in result.stderr, (extra, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (archive / "filled").exists()


def test_the_learned_filler_records_its_checkpoint_digest(filled, tmp_path):
    import torch
    from suvi_fill.model import checkpoint
    from suvi_fill.corpus import conditioning
    from suvi_fill.model import net as model
    from suvi_fill.corpus import sampler as samples
    work, archive, _, _, _ = filled
    torch.manual_seed(0)
    net = model.build(base=4, depth=1)
    path = tmp_path / "best.pt"
    checkpoint.save(path, checkpoint.Checkpoint(model=net.state_dict(), net=net.config, ladder=samples.LADDER,
                                                cond_layout=conditioning.COND_LAYOUT))
    start = timebase.time_of(LOST_171[2]).isoformat()
    end = timebase.time_of(LOST_171[2] + 1).isoformat()
    result = run([tool("suvi-fill"), "fill", "--source", str(archive), "--out", str(tmp_path / "out"),
                  "--checkpoint", str(path), "--satellite", "16", "--start", start, "--end", end, "--quiet",
                  "--device", "cpu"])
    assert result.returncode == 0, result.stderr
    _, cards = fits.read_l2_raw(tmp_path / "out" / fits.l2_name(*LOST_171))
    assert cards["FILLER"] == "learned" and cards["FILLCKPT"] == hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    assert "filled 1 bands of 1 frames" in result.stdout          # the 171; no frame holds a 94


def test_without_flags_the_shipped_filler_fills(filled, tmp_path):
    "No --filler and no --checkpoint: the learned filler the package ships, recorded by its digest."
    from suvi_fill.model.shipped import shipped_checkpoint
    work, archive, _, _, _ = filled
    shipped = shipped_checkpoint()
    assert shipped is not None, "the package ships no filler: make one with suvi-fill pretrain"
    start = timebase.time_of(LOST_171[2]).isoformat()
    end = timebase.time_of(LOST_171[2] + 1).isoformat()
    result = run([tool("suvi-fill"), "fill", "--source", str(archive), "--out", str(tmp_path / "out"),
                  "--satellite", "16", "--start", start, "--end", end, "--quiet", "--device", "cpu"])
    assert result.returncode == 0, result.stderr
    _, cards = fits.read_l2_raw(tmp_path / "out" / fits.l2_name(*LOST_171))
    assert cards["FILLER"] == "learned" and cards["FILLCKPT"] == hashlib.sha256(shipped.read_bytes()).hexdigest()[:16]


def test_sunpy_opens_a_filled_file_as_a_suvi_map_with_the_frames_coordinates(filled):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sunpy_map = need("sunpy.map")
    import astropy.units as u
    work, archive, _, _, _ = filled
    band, satellite, slot = LOST_171
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        made = sunpy_map.Map(work / "out" / fits.l2_name(band, satellite, slot))
        observed = sunpy_map.Map(archive_path(archive, 195, satellite, slot))
    header = fits.read_l2(archive_path(archive, 195, satellite, slot))[1]
    assert type(made).__name__ == "SUVIMap" and made.observatory == "GOES-R"
    assert made.instrument.startswith("GOES-R Series Solar Ultraviolet Imager") and made.detector == "SUVI"
    assert made.wavelength == 171 * u.AA and made.unit == u.Unit("W m-2 sr-1")
    assert np.allclose(u.Quantity(made.reference_pixel).value, [header.crpix1 - 1, header.crpix2 - 1])
    for row, col in ((5, 7), (20, 3), (16, 16)):
        ours, theirs = made.pixel_to_world(col * u.pix, row * u.pix), observed.pixel_to_world(col * u.pix, row * u.pix)
        tx, ty = fits.world_from_pixel(header, row, col)
        # sunpy projects gnomonically (HPLN-TAN); world_from_pixel is its small-angle form: 0.005" at 1300".
        assert abs(ours.Tx.to_value(u.arcsec) - tx) < 0.05 and abs(ours.Ty.to_value(u.arcsec) - ty) < 0.05
        assert ours.separation(theirs).to_value(u.arcsec) < 1e-6
    assert abs(made.observer_coordinate.radius.to_value(u.m) - observed.observer_coordinate.radius.to_value(u.m)) < 1


def test_sunpy_maps_are_read_as_sources(filled, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sunpy_map = need("sunpy.map")
    _, archive, _, _, _ = filled
    files = sorted(archive.rglob("*_g16_s20240318T00*.fits"))[:40]
    (tmp_path / "files").mkdir()
    for path in files:
        shutil.copy(path, tmp_path / "files" / path.name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        maps = [sunpy_map.Map(path) for path in files]
    data, header = fits.read_l2(maps[0])
    expected, reference = fits.read_l2(files[0])
    assert np.array_equal(data, expected) and header.path == files[0].name and header.crpix1 == reference.crpix1
    from_files = ingest.build(tmp_path / "files", tmp_path / "a", progress=False, span_min=2, log=lambda *_: None)
    from_maps = ingest.build(maps, tmp_path / "b", progress=False, span_min=2, log=lambda *_: None)
    assert from_maps["manifest_digest"] == from_files["manifest_digest"] and from_maps["files"] == len(files)
    assert from_maps["source"].startswith(f"{len(files)} maps and files: ")
