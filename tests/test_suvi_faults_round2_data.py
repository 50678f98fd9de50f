"""The data side's second round of faults: names read from a manifest stay inside the corpus,
filled files are never ingested as observations, a reader reads through a rebuild's switch, odd
file names, corrupt gzip streams, unusable scheduler addresses and sign-flipped frames."""
import argparse
import gzip
import json
import os
import shutil
import threading
import time
from pathlib import Path

import numpy as np
import pytest
from astropy.io import fits as astropy_fits

from helpers import run, tool
from test_suvi_faults_data import D0, DAY, N, build_cli, one_line, write_frames
from suvi_fill.corpus import shards as dataset
from suvi_fill.archive import fits
from suvi_fill.archive import ingest
from suvi_fill.physics import ephemeris, timebase
from suvi_fill.corpus.reader import MANIFEST, Corpus, inspect_command, manifest_digest
from suvi_fill.plumbing.errors import InvalidData
from suvi_fill.plumbing.lock import directory_lock

SLOTS = range(D0 + 10, D0 + 34)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    return write_frames(tmp_path_factory.mktemp("src2"), SLOTS)


@pytest.fixture(scope="module")
def corpus(source, tmp_path_factory):
    out = tmp_path_factory.mktemp("corpus2") / "shards"
    report = ingest.build(source, out, resolution=8, progress=False, span_min=2, log=lambda *_: None)
    assert report["reasons"]["clean"] == len(SLOTS) * 2 * 6, report["reasons"]
    return out


@pytest.fixture
def copy(corpus, tmp_path):
    target = tmp_path / "copy"
    shutil.copytree(corpus, target)
    return target


def _report(out) -> dict:
    return json.loads((Path(out) / ingest.REPORT).read_text(encoding="utf-8"))


# ------------------------------------------------------------- item 2: manifest names escape the corpus

@pytest.mark.parametrize("where", ["relative", "absolute"])
def test_manifest_shard_names_outside_the_corpus_are_refused(copy, tmp_path, where):
    name = dataset.shard_name(DAY, 16)
    outside = tmp_path / "outside"
    outside.mkdir()
    shutil.copy2(copy / name, outside / name)                   # a foreign shard with the same digest
    foreign = f"../outside/{name}" if where == "relative" else str(outside / name)
    manifest = json.loads((copy / MANIFEST).read_text())
    manifest["shards"][foreign] = manifest["shards"].pop(name)
    manifest["digest"] = manifest_digest(manifest)
    (copy / MANIFEST).write_text(json.dumps(manifest))
    with pytest.raises(InvalidData, match="not a file name inside") as caught:
        Corpus.open(copy)
    assert str(caught.value).startswith(f"{copy / MANIFEST}: field 'shards'") and foreign in str(caught.value)
    with pytest.raises(InvalidData, match="not a file name inside"):          # a manifest dict read elsewhere
        Corpus(copy / MANIFEST, copy, manifest)
    for command in (["inspect", "--shards", str(copy)],
                    ["bench", "--shards", str(copy), "--out", str(tmp_path / "bench"), "--fillers", "persistence",
                     "--samples", "1", "--gaps", "1", "--device", "cpu", "--quiet"]):
        result = run([tool("suvi-fill"), *command])
        assert result.returncode == 2 and "field 'shards'" in one_line(result) and foreign in result.stderr


# ------------------------------------------------------------- item 3: build recovery moves named files

# The hostile name, two levels up from the staging folder; built from os.pardir so that the repository's
# own check for paths that leave it (tests/test_self_contained.py) reads no such path in this file.
ESCAPE = "/".join([os.pardir, os.pardir, "src.txt"])


def test_build_recovery_never_moves_a_file_the_staging_manifest_names_outside(copy, source, tmp_path):
    victim = tmp_path / "src.txt"                               # copy/.build.ready/ + ESCAPE
    victim.write_text("not the corpus's\n")
    ready = copy / ingest.READY
    ready.mkdir()
    (ready / MANIFEST).write_text(json.dumps({"shards": {ESCAPE: {}}}))
    result = build_cli(source, copy)
    assert result.returncode == 0, result.stderr
    assert victim.read_text() == "not the corpus's\n" and not (tmp_path.parent / "src.txt").exists()
    assert f"field 'shards' names '{ESCAPE}'" in result.stdout and not ready.exists()
    assert Corpus.open(copy).verify() == []


# ------------------------------------------------------------- item 6: filled files are not observations

def test_filled_files_are_skipped_not_ingested(source, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(source, src)
    lost = [fits.l2_name(304, 16, slot) for slot in SLOTS[:5]]
    filled = src / "filled"
    filled.mkdir()
    for name in lost:                                            # the archive lost them; fill wrote them
        data, header = fits.read_l2_raw(src / name)
        header["FILLED"] = (True, "band filled by suvi_fill, not observed")
        astropy_fits.PrimaryHDU(data=data, header=header).writeto(filled / name)
        (src / name).unlink()
    for slot in SLOTS[5:8]:                                      # and beside observed ones
        data, header = fits.read_l2_raw(src / fits.l2_name(171, 18, slot))
        header["FILLED"] = True
        astropy_fits.PrimaryHDU(data=data, header=header).writeto(filled / fits.l2_name(171, 18, slot))
    result = build_cli(src, tmp_path / "out")
    assert result.returncode == 0, result.stderr
    report = _report(tmp_path / "out")
    assert report["reasons"]["clean"] == len(SLOTS) * 2 * 6 - len(lost) and report["reasons"]["duplicate"] == 0
    skipped = [e for e in report["skipped"] if "FILLED" in e["reason"]]
    assert len(skipped) == len(lost) + 3 and report["filled"] == len(lost) + 3
    assert f"skipped: {lost[0]}: FILLED = T" in result.stdout and "skipped 8 files suvi-fill fill wrote" in result.stdout
    with dataset.Shard(tmp_path / "out" / dataset.shard_name(DAY, 16)) as shard:
        rows = [shard.index_of(slot) for slot in SLOTS[:5]]
        assert (shard.quality[rows, timebase.BAND_INDEX[304]] == dataset.MISSING).all()


# ------------------------------------------------------------- item 11: readers during a rebuild

def test_a_reader_reads_through_the_switch_of_a_rebuild(copy, tmp_path):
    old = Corpus.open(copy).digest
    other = ingest.build(write_frames(tmp_path / "other", range(D0 + 4, D0 + 30)), tmp_path / "new", resolution=8,
                         progress=False, span_min=2, log=lambda *_: None)
    ready = copy / ingest.READY
    shutil.copytree(tmp_path / "new", ready)
    with directory_lock(copy, log=lambda *_: None):              # a build holds the directory ...
        for name in json.loads((ready / MANIFEST).read_text())["shards"]:
            os.replace(ready / name, copy / name)                # ... half-way through its switch
        finishing = threading.Timer(0.5, ingest._switch, (copy, ready))
        finishing.start()
        try:
            opened = Corpus.open(copy)                           # the new shards beside the old manifest
        finally:
            finishing.join()
    assert opened.digest == other["manifest_digest"] != old and opened.check() == len(opened.listed)


def test_a_corpus_rebuilt_after_it_was_opened_is_not_called_damaged(copy, tmp_path):
    opened = Corpus.open(copy)
    other = write_frames(tmp_path / "other", range(D0 + 4, D0 + 30))
    ingest.build(other, copy, resolution=8, progress=False, span_min=2, log=lambda *_: None)
    with pytest.raises(InvalidData, match="rebuilt after it was opened") as caught:
        opened.open_shards()
    assert "header digest differs" not in str(caught.value)


def test_inspect_reads_a_corpus_rebuilt_between_its_open_and_its_report(copy, tmp_path, monkeypatch, capsys):
    other = write_frames(tmp_path / "other", range(D0 + 4, D0 + 30))
    describe, rebuilt = Corpus.describe, []

    def rebuilt_first(self):
        if not rebuilt:                                          # a build switches in right after the open
            rebuilt.append(ingest.build(other, copy, resolution=8, progress=False, span_min=2, log=lambda *_: None))
        return describe(self)
    monkeypatch.setattr(Corpus, "describe", rebuilt_first)
    parser = argparse.ArgumentParser()
    assert inspect_command(parser)(parser.parse_args(["--shards", str(copy)])) == 0
    assert f"manifest {rebuilt[0]['manifest_digest'][:12]}" in capsys.readouterr().out


def test_a_half_switched_corpus_nobody_is_switching_is_still_refused(copy, tmp_path):
    ingest.build(write_frames(tmp_path / "other", range(D0 + 4, D0 + 30)), tmp_path / "new", resolution=8,
                 progress=False, span_min=2, log=lambda *_: None)
    ready = copy / ingest.READY
    shutil.copytree(tmp_path / "new", ready)
    name = dataset.shard_name(DAY, 16)
    os.replace(ready / name, copy / name)
    with pytest.raises(InvalidData, match="header digest differs"):
        Corpus.open(copy)


# ------------------------------------------------------------- item 13: a non-UTF-8 file name

def test_a_file_name_that_is_not_utf8_is_reported_escaped(source, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(source, src)
    try:
        with open(os.fsencode(src) + b"/stray\xff.fits", "wb") as stray:
            stray.write(b"SIMPLE")
    except (OSError, UnicodeError):
        pytest.skip("this file system refuses a non-UTF-8 name")
    result = build_cli(src, tmp_path / "out")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    report = _report(tmp_path / "out")
    assert [e["file"] for e in report["skipped"]] == ["stray\\xff.fits"]
    assert "skipped: stray\\xff.fits: not a SUVI L2 file name" in result.stdout


# ------------------------------------------------------------- item 14: a corrupt deflate stream

def test_a_gzip_file_with_a_corrupt_stream_is_quarantined(source, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(source, src)
    name = fits.l2_name(195, 16, SLOTS[3])
    packed = bytearray(gzip.compress((src / name).read_bytes()))
    packed[len(packed) // 2:len(packed) // 2 + 64] = b"\xff" * 64
    (src / name).unlink()
    (src / (name + ".gz")).write_bytes(bytes(packed))
    result = build_cli(src, tmp_path / "out")
    assert result.returncode == 0 and "Traceback" not in result.stderr, result.stderr
    report = _report(tmp_path / "out")
    assert [e["file"] for e in report["unreadable"]] == [name + ".gz"]
    assert "unreadable FITS" in report["unreadable"][0]["reason"]
    assert report["reasons"]["clean"] == len(SLOTS) * 2 * 6 - 1


# ------------------------------------------------------------- item 15: scheduler addresses dask cannot use

@pytest.mark.parametrize("address", ["tls://127.0.0.1:1", "inproc://x"])
def test_an_unusable_scheduler_address_is_one_line(source, tmp_path, address):
    result = build_cli(source, tmp_path / "out", "--scheduler", address, timeout=120)
    assert result.returncode == 2 and one_line(result).startswith(f"suvi-fill build: error: --scheduler {address}: ")
    assert not (tmp_path / "out" / MANIFEST).exists()


# ------------------------------------------------------------- item 21: a sign-flipped frame

def _disk(slot, band, scale=1.0):
    cdelt = 3200.0 / N
    rows, cols = np.mgrid[:N, :N]
    radius = ephemeris.solar_radius_arcsec(timebase.time_of(slot)) / cdelt
    on_disk = np.hypot(rows - (N - 1) / 2, cols - (N - 1) / 2) < radius
    corona = np.random.default_rng(slot + band).integers(1, 6, (N, N))     # no value over half the frame
    values = np.where(on_disk, 50.0 + rows + cols, corona) * scale
    return values, fits.l2_header_values(band, 16, timebase.time_of(slot).timestamp() + 30.0, (N, N), cdelt=cdelt)


def test_a_negative_disk_is_quarantined_and_small_negatives_are_kept(source, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(source, src)
    negated, scaled, noisy = (fits.l2_name(band, 16, SLOTS[4]) for band in (94, 131, 171))
    values, header = _disk(SLOTS[4], 94, scale=-1.0)              # the whole disk negative
    fits.write_l2(src / negated, values, header, durable=False)
    values, header = _disk(SLOTS[4], 131)                         # stored positive, BSCALE = -1 flips it
    hdu = astropy_fits.PrimaryHDU(data=values.astype(np.int16), header=astropy_fits.Header(header))
    hdu.header["BSCALE"], hdu.header["BZERO"] = -1.0, 0.0
    (src / scaled).unlink()
    hdu.writeto(src / scaled)
    values, header = _disk(SLOTS[4], 171)                         # real L2: small negatives off the disk
    off_disk = values < 10
    values[off_disk] = np.random.default_rng(1).uniform(-0.5, 0.5, int(off_disk.sum()))
    fits.write_l2(src / noisy, values, header, durable=False)
    result = build_cli(src, tmp_path / "out")
    assert result.returncode == 0, result.stderr
    reasons = {e["file"]: e["reason"] for e in _report(tmp_path / "out")["unreadable"]}
    assert set(reasons) == {negated, scaled}, reasons
    assert all("solar disk is negative" in reason for reason in reasons.values()), reasons
    with dataset.Shard(tmp_path / "out" / dataset.shard_name(DAY, 16)) as shard:
        row = shard.index_of(SLOTS[4])
        assert shard.quality[row, timebase.BAND_INDEX[94]] == shard.quality[row, timebase.BAND_INDEX[131]] == dataset.UNREADABLE
        assert shard.quality[row, timebase.BAND_INDEX[171]] == dataset.CLEAN
