"""Issue 19, the data side: a damaged corpus is refused by every reader with the file named, bad
geometry is quarantined, a failed rebuild keeps the previous corpus, one writer per corpus
directory, and one clean line instead of a traceback."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest

from helpers import ROOT, run, tool
from suvi_fill.corpus import availability
from suvi_fill.corpus import shards as dataset
from suvi_fill.archive import fits
from suvi_fill.archive import ingest
from suvi_fill.physics import timebase
from suvi_fill.corpus import segments
from suvi_fill.corpus.reader import MANIFEST, Corpus, manifest_digest
from suvi_fill.plumbing.errors import InvalidData, MissingData
from suvi_fill.plumbing.lock import LOCK_NAME

DAY = "2024-03-01"
D0 = timebase.first_slot_of_day(DAY)
N = 16                                       # source frames 16 px at 200 arcsec: the disk fits
ENV = {"PYTHONPATH": str(ROOT / "tests")}


def write_frames(directory, slots, satellites=(16, 18), n=N):
    "A disk image per (slot, satellite, band), in the real L2 format."
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    cdelt = 3200.0 / n
    rows, cols = np.mgrid[:n, :n]
    disk = (np.hypot(rows - (n - 1) / 2, cols - (n - 1) / 2) * cdelt < 960).astype(np.float32) + 0.1
    disk += np.random.default_rng(0).uniform(0, 0.05, disk.shape).astype(np.float32)    # no value repeats: no sentinel
    for satellite in satellites:
        for slot in slots:
            for band in timebase.WAVELENGTHS:
                when = timebase.time_of(slot).timestamp() + 30.0
                values = fits.l2_header_values(band, satellite, when, (n, n), cdelt=cdelt)
                fits.write_l2(directory / fits.l2_name(band, satellite, slot), disk * band / 100, values,
                              durable=False)
    return directory


def build_cli(source, out, *extra, **kwargs):
    return run([tool("suvi-fill"), "build", "--source", str(source), "--out", str(out), "--resolution", "8",
                "--span-min", "2", "--no-progress", *extra], **kwargs)


def one_line(result) -> str:
    "The stderr of a refused command: exactly one line, no traceback."
    assert "Traceback" not in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    return result.stderr


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    return write_frames(tmp_path_factory.mktemp("src"), range(D0 + 10, D0 + 50))


@pytest.fixture(scope="module")
def corpus(source, tmp_path_factory):
    out = tmp_path_factory.mktemp("corpus") / "shards"
    report = ingest.build(source, out, resolution=8, progress=False, span_min=2, log=lambda *_: None)
    assert report["reasons"]["clean"] == 40 * 2 * 6, report["reasons"]
    availability.profile(out)
    return out


@pytest.fixture
def copy(corpus, tmp_path):
    target = tmp_path / "copy"
    shutil.copytree(corpus, target)
    return target


# ------------------------------------------------------------- item 2: damaged corpus parts

def _rewrite_manifest(directory, edit, keep_digest=True):
    manifest = json.loads((directory / MANIFEST).read_text())
    edit(manifest)
    if not keep_digest:
        manifest["digest"] = manifest_digest(manifest)
    (directory / MANIFEST).write_text(json.dumps(manifest))


def _first_shard(directory) -> Path:
    return directory / dataset.shard_name(DAY, 16)


DAMAGE = {
    "shard deleted": (lambda d: _first_shard(d).unlink(), "no such shard, though", "shard"),
    "manifest digest edited": (lambda d: _rewrite_manifest(d, lambda m: m.update(digest="0" * 64)),
                               "field 'digest'", "manifest"),
    "shard digest edited in the manifest": (
        lambda d: _rewrite_manifest(d, lambda m: m["shards"][_first_shard(d).name].update(digest="f" * 32)),
        "field 'digest'", "manifest"),
    "shard digest and manifest digest edited": (
        lambda d: _rewrite_manifest(d, lambda m: m["shards"][_first_shard(d).name].update(digest="f" * 32),
                                    keep_digest=False),
        "header digest differs", "shard"),
    "shard truncated": (lambda d: _first_shard(d).write_bytes(_first_shard(d).read_bytes()[:-100]),
                        "truncated or written over", "shard"),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_every_reader_refuses_a_damaged_corpus_naming_the_file(copy, damage):
    apply, expected, named = DAMAGE[damage]
    apply(copy)
    path = str(_first_shard(copy) if named == "shard" else copy / MANIFEST)
    with pytest.raises((InvalidData, MissingData)) as caught:
        Corpus.open(copy)
    assert str(caught.value).startswith(path) and expected in str(caught.value)
    shown = run([tool("suvi-fill"), "inspect", "--shards", str(copy)])
    assert shown.returncode == 2 and path in one_line(shown) and expected in shown.stderr


def test_plane_bytes_overwritten_are_found_by_inspect_verify(copy):
    shard = _first_shard(copy)
    data = bytearray(shard.read_bytes())
    data[dataset.PLANE_OFFSET:dataset.PLANE_OFFSET + 256] = b"\xff" * 256       # NaN planes, same size
    shard.write_bytes(bytes(data))
    assert Corpus.open(copy).check() == 2                  # the cheap check cannot see it ...
    verified = run([tool("suvi-fill"), "inspect", "--shards", str(copy), "--verify"])
    assert verified.returncode == 2 and str(shard) in one_line(verified) and "content hash" in verified.stderr


def test_bench_refuses_a_deleted_shard_instead_of_printing_dashes(copy, tmp_path):
    _first_shard(copy).unlink()
    result = run([tool("suvi-fill"), "bench", "--shards", str(copy), "--out", str(tmp_path / "bench"),
                  "--fillers", "persistence", "--samples", "1", "--gaps", "1", "--device", "cpu", "--quiet"])
    assert result.returncode == 2 and str(_first_shard(copy)) in one_line(result)
    assert "---" not in result.stdout


# ------------------------------------------------------------- item 12: one clean line

@pytest.mark.parametrize("text, expected", [
    ("null", "not a corpus manifest"), ('{"segments": []}', "manifest has no 'digest'"),
])
def test_a_null_or_mistyped_manifest_is_one_line(copy, tmp_path, text, expected):
    (copy / MANIFEST).write_text(text)
    for command in (["inspect", "--shards", str(copy)],
                    ["bench", "--shards", str(copy), "--out", str(tmp_path / "b"), "--device", "cpu"]):
        result = run([tool("suvi-fill"), *command])
        assert result.returncode == 2 and str(copy / MANIFEST) in one_line(result) and expected in result.stderr


def test_segments_of_the_wrong_type_are_one_line(copy):
    _rewrite_manifest(copy, lambda m: m.update(segments=[1, 2]), keep_digest=False)
    result = run([tool("suvi-fill"), "inspect", "--shards", str(copy)])
    assert result.returncode == 2 and "field 'segments' is list, not dict" in one_line(result)


def test_a_truncated_availability_model_is_one_line(copy, tmp_path):
    model = copy / availability.AVAILABILITY
    model.write_bytes(model.read_bytes()[:300])
    with pytest.raises(InvalidData, match="not an availability model"):
        availability.Availability.load(model)
    result = run([tool("suvi-fill"), "bench", "--shards", str(copy), "--out", str(tmp_path / "b"),
                  "--device", "cpu"])
    assert result.returncode == 2 and str(model) in one_line(result)


# ------------------------------------------------------------- item 13: shard metadata named

def test_shard_metadata_faults_name_the_file_and_field(copy):
    shard = _first_shard(copy)
    data = shard.read_bytes()
    where = int.from_bytes(data[8:16], "little")
    text_length = int.from_bytes(data[where:where + 8], "little")
    text = data[where + 8:where + 8 + text_length]
    shard.write_bytes(data.replace(text, text.replace(b'"resolution": 8', b'"resolution":[]')))
    with pytest.raises(InvalidData, match="field 'resolution' is list, not int") as caught:
        dataset.Shard(shard)
    assert str(caught.value).startswith(str(shard))
    shard.write_bytes(data.replace(text, text.replace(b'"day": ', b'"day":[')))
    with pytest.raises(InvalidData, match="shard metadata is not JSON") as caught:
        dataset.Shard(shard)
    assert str(caught.value).startswith(str(shard))


# ------------------------------------------------------------- item 3: bad frames quarantined

BAD_FRAMES = {                       # file slot offset: (shape, header changes, key named in the reason)
    0: ((16, 48), {}, "NAXIS1 x NAXIS2 = 48 x 16"),
    1: ((4000, 2), {}, "NAXIS1 x NAXIS2 = 2 x 4000"),
    2: ((N, N), {"CRPIX1": 1e300}, "CRPIX1"),
    3: ((32, 32), {"CDELT1": 2.5, "CDELT2": 2.5}, "field of view"),
    4: ((N, N), {"CDELT1": 1e-300}, "CDELT1"),
}


def test_frames_that_cannot_be_suvi_frames_are_quarantined_and_the_build_goes_on(source, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(source, src)
    first = D0 + 60
    for offset, (shape, changes, _) in BAD_FRAMES.items():
        when = timebase.time_of(first + offset).timestamp() + 30.0
        cdelt = 3200.0 / shape[1]
        values = fits.l2_header_values(195, 16, when, shape, cdelt=cdelt, **changes)
        fits.write_l2(src / fits.l2_name(195, 16, first + offset), np.ones(shape, np.float32), values, durable=False)
    result = build_cli(src, tmp_path / "out")
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "out" / ingest.REPORT).read_text())
    reasons = {entry["file"]: entry["reason"] for entry in report["unreadable"]}
    assert len(reasons) == len(BAD_FRAMES) and report["reasons"]["clean"] == 40 * 2 * 6
    for offset, (_, _, key) in BAD_FRAMES.items():
        assert key in reasons[fits.l2_name(195, 16, first + offset)], (key, reasons)
    with dataset.Shard(tmp_path / "out" / dataset.shard_name(DAY, 16)) as shard:
        rows = [shard.index_of(first + offset) for offset in BAD_FRAMES]
        assert (shard.quality[rows, timebase.BAND_INDEX[195]] == dataset.UNREADABLE).all()
        assert not shard.present[rows, timebase.BAND_INDEX[195]].any()


# ------------------------------------------------------------- item 6: a failed rebuild keeps the old corpus

SLOW_BUILD = textwrap.dedent("""
    import sys, time
    from suvi_fill import cli
    from suvi_fill.archive import ingest
    original = ingest._ingest_one
    def slow(*args):
        time.sleep(0.05)
        return original(*args)
    ingest._ingest_one = slow
    sys.exit(cli.main(sys.argv[1:]))
""")


def _start_slow_build(source, out):
    return subprocess.Popen([sys.executable, "-c", SLOW_BUILD, "build", "--source", str(source), "--out", str(out),
                             "--resolution", "8", "--span-min", "2", "--no-progress"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONWARNINGS="ignore:pkg_resources is deprecated:UserWarning"))


def _wait_for_first_staged_shard(out, process, timeout=120.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if list((out / ingest.STAGING).glob("*" + dataset.SHARD_SUFFIX)):
            return
        assert process.poll() is None, process.communicate()
        time.sleep(0.02)
    raise AssertionError("no staged shard appeared")


def _assert_intact(out, digest):
    corpus = Corpus.open(out)
    assert corpus.digest == digest and corpus.verify() == []
    assert not [p.name for p in out.iterdir() if ".tmp." in p.name]


@pytest.mark.parametrize("signum, status", [(signal.SIGKILL, -9), (signal.SIGINT, 130)])
def test_a_killed_or_interrupted_rebuild_leaves_the_old_corpus_usable(copy, tmp_path, signum, status):
    digest = Corpus.open(copy).digest
    bigger = write_frames(tmp_path / "bigger", [D0 + 10 + k for k in range(30)] + [D0 + 400 + k for k in range(30)])
    process = _start_slow_build(bigger, copy)
    _wait_for_first_staged_shard(copy, process)
    process.send_signal(signum)
    out, err = process.communicate(timeout=60)
    assert process.returncode == status, err
    if signum == signal.SIGINT:
        assert "interrupted" in err and "Traceback" not in err and not (copy / ingest.STAGING).exists()
    _assert_intact(copy, digest)
    again = build_cli(bigger, copy)
    assert again.returncode == 0, again.stderr
    if signum == signal.SIGKILL:
        assert "removed .build, the unfinished build" in again.stdout and "took over the lock" in again.stdout
    assert Corpus.open(copy).digest != digest and not (copy / ingest.STAGING).exists()


def test_a_switch_killed_half_way_is_refused_then_finished(copy, tmp_path, monkeypatch):
    digest = Corpus.open(copy).digest
    bigger = write_frames(tmp_path / "bigger", range(D0 + 5, D0 + 55))
    real_replace, moved = os.replace, []

    def dies_after_one_shard(source, target):
        if Path(source).parent.name == ingest.READY:
            if moved:
                raise KeyboardInterrupt                 # the process dies here
            moved.append(source)
        return real_replace(source, target)
    monkeypatch.setattr(ingest.os, "replace", dies_after_one_shard)
    with pytest.raises(KeyboardInterrupt):
        ingest.build(bigger, copy, resolution=8, progress=False, span_min=2, log=lambda *_: None)
    monkeypatch.setattr(ingest.os, "replace", real_replace)
    assert json.loads((copy / MANIFEST).read_text())["digest"] == digest     # the old manifest, untouched
    with pytest.raises(InvalidData, match="header digest differs"):
        Corpus.open(copy)                                                    # never read as the old corpus
    said = []
    ingest.build(bigger, copy, resolution=8, progress=False, span_min=2, log=said.append)
    assert any("finishing the switch" in line for line in said)
    assert Corpus.open(copy).verify() == [] and not (copy / ingest.READY).exists()


def _tmpfs(directory: Path, size: str) -> bool:
    directory.mkdir(parents=True, exist_ok=True)
    if shutil.which("mount") is None:
        return False
    return subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)],
                          capture_output=True).returncode == 0


def test_a_full_disk_names_the_file_and_keeps_the_old_corpus(source, tmp_path):
    disk = tmp_path / "disk"
    if not _tmpfs(disk, "256k"):
        pytest.skip("mounting a small tmpfs is not permitted here (needs root)")
    try:
        small = write_frames(tmp_path / "small", range(D0 + 10, D0 + 20), satellites=(16,))
        assert build_cli(small, disk / "shards").returncode == 0
        digest = Corpus.open(disk / "shards").digest
        bigger = write_frames(tmp_path / "bigger", [D0 + k * timebase.SLOTS_PER_DAY + 10 for k in range(6)])
        result = build_cli(bigger, disk / "shards")
        assert result.returncode == 2 and "No space left on device" in one_line(result)
        assert "while writing " + str(disk / "shards" / ingest.STAGING) in result.stderr
        _assert_intact(disk / "shards", digest)
        assert not (disk / "shards" / ingest.STAGING).exists() and not (disk / "shards" / LOCK_NAME).exists()
    finally:
        subprocess.run(["umount", str(disk)], capture_output=True)


# ------------------------------------------------------------- items 7, 8: one writer, leftovers removed

def _dead_pid() -> int:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_second_build_is_refused_naming_the_holder(copy, source):
    holder = {"pid": os.getpid(), "host": socket.gethostname(), "command": "suvi-fill build", "started": "now"}
    (copy / LOCK_NAME).write_text(json.dumps(holder))
    digest = Corpus.open(copy).digest
    result = build_cli(source, copy)
    assert result.returncode == 2 and f"pid {os.getpid()} on {socket.gethostname()}" in one_line(result)
    assert Corpus.open(copy).digest == digest and (copy / LOCK_NAME).exists()


def test_a_stale_lock_is_taken_over_and_leftovers_are_removed(copy, source):
    dead = _dead_pid()
    (copy / LOCK_NAME).write_text(json.dumps({"pid": dead, "host": socket.gethostname()}))
    leftovers = [copy / f".{dataset.shard_name(DAY, 16)}.tmp.{dead}.abc", copy / f".{MANIFEST}.tmp.{dead}.def"]
    for path in leftovers:
        path.write_bytes(b"partial")
    (copy / ingest.STAGING).mkdir()
    result = build_cli(source, copy)
    assert result.returncode == 0, result.stderr
    assert f"took over the lock of pid {dead}" in result.stdout
    assert "removed 2 temporary file(s)" in result.stdout and "removed .build" in result.stdout
    assert not any(path.exists() for path in leftovers) and not (copy / LOCK_NAME).exists()
    assert not (copy / ingest.STAGING).exists() and Corpus.open(copy).verify() == []


def test_profile_refuses_a_damaged_corpus_naming_the_file(copy):
    _first_shard(copy).unlink()
    result = run([tool("suvi-fill"), "profile", "--shards", str(copy)])
    assert result.returncode == 2 and str(_first_shard(copy)) in one_line(result) and "no such shard" in result.stderr


def test_an_inconsistent_availability_model_is_one_line(copy):
    model = copy / availability.AVAILABILITY
    with np.load(model) as z:
        arrays = dict(z)
    arrays["present"] = arrays["present"][:-1]
    np.savez(model, **arrays)
    with pytest.raises(InvalidData, match="inconsistent availability model") as caught:
        availability.Availability.load(model)
    assert str(caught.value).startswith(str(model))


def test_a_shard_that_reads_back_wrong_stops_the_build_before_the_switch(copy, source, monkeypatch):
    digest = Corpus.open(copy).digest
    original = ingest._write_shards

    def lossy_disk(out, *args):
        written = original(out, *args)
        data = bytearray((out / written[0]).read_bytes())
        data[dataset.PLANE_OFFSET] ^= 0xFF                     # the disk flips a bit of the first plane
        (out / written[0]).write_bytes(bytes(data))
        return written
    monkeypatch.setattr(ingest, "_write_shards", lossy_disk)
    with pytest.raises(InvalidData, match="read back with content hash") as caught:
        ingest.build(source, copy, resolution=8, progress=False, span_min=2, log=lambda *_: None)
    assert f"{ingest.STAGING}/{dataset.shard_name(DAY, 16)}" in str(caught.value)
    _assert_intact(copy, digest)
    assert not (copy / ingest.STAGING).exists() and not (copy / LOCK_NAME).exists()
