"""Faults of `suvi-fill fill`, `train`, `bench` and `render` found by a hostile tester (second round), each
reproduced through the real command line: a checkpoint whose net config contradicts its weights, filled
files that carry the wrong time, two fills mixing in one --out and a killed fill's leftovers, --resume onto
another corpus, a checkpoint of another resolution, a --shards corpus whose archive lost files, a bench of
an empty split, non-finite or absurd numeric flags; and what users asked of the filled files (checksums,
no blank cards, only the window's files read)."""
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from helpers import ROOT, run, tool
from test_suvi_faults_train import SHORT, error_line, finished, train  # noqa: F401  (finished is a fixture)
from test_suvi_fill import need
from test_suvi_train import ENV, corpus, state  # noqa: F401  (corpus is a fixture)
from suvi_fill.archive import fits
from suvi_fill.physics import timebase
from suvi_fill.sim.outages import OutageRates
from suvi_fill.sim.scene import DEFAULT_START
from suvi_fill.sim.synth import archive_path, synthesize

FIRST = timebase.first_slot_of_day(DEFAULT_START)
LOST_171 = (171, 16, FIRST + 10)            # one band of a GOES-16 frame
LOST_FRAME = (18, FIRST + 20)               # every band of a GOES-18 frame


def fill(*extra, env=None, timeout=300):
    return run([tool("suvi-fill"), "fill", "--quiet", "--device", "cpu", *map(str, extra)], env=env, timeout=timeout)


def snapshot(directory: Path) -> dict:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(Path(directory).rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    "A 2-hour 32 px archive with one band of a GOES-16 frame and every band of a GOES-18 frame removed."
    work = tmp_path_factory.mktemp("round2")
    archive = work / "archive"
    synthesize(archive, hours=2, resolution=32, progress=False, rates=OutageRates().scaled(0))
    (work / "removed").mkdir()
    lost = [archive_path(archive, *LOST_171)]
    lost += [archive_path(archive, band, *LOST_FRAME) for band in timebase.WAVELENGTHS]
    for path in lost:
        os.replace(path, work / "removed" / path.name)
    return archive


@pytest.fixture(scope="module")
def filled(archive):
    "`fill --filler linear` of the whole archive."
    out = archive.parent / "out"
    result = fill("--source", archive, "--out", out, "--filler", "linear")
    assert result.returncode == 0, result.stderr
    return out, result


def tiny_checkpoint(path: Path, resolution=None, **net_changes) -> Path:
    "A checkpoint of a tiny untrained net (its config changed by `net_changes`, recording `resolution`)."
    import torch
    from suvi_fill.model import checkpoint
    from suvi_fill.corpus import conditioning
    from suvi_fill.model import net as model
    from suvi_fill.corpus import sampler as samples
    torch.manual_seed(0)
    net = model.build(base=4, depth=1)
    checkpoint.save(path, checkpoint.Checkpoint(model=net.state_dict(), net=net.config | net_changes,
                                                ladder=samples.LADDER, cond_layout=conditioning.COND_LAYOUT,
                                                resolution=resolution))
    return path


def one_line(result) -> str:
    assert "Traceback" not in result.stderr, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


# ------------------------------------------------- 4. a net config the weights contradict

@pytest.mark.parametrize("field, value, named", [("base", 10**6, "net config base=1000000 does not match the "
                                                                 "weights (base 4 by their shapes)"),
                                                 ("depth", 5, "net config depth=5 does not match the weights "
                                                              "(depth 1 by their shapes)"),
                                                 ("base", "4", "net config base='4' is not a positive integer")])
def test_a_checkpoint_whose_net_config_contradicts_its_weights_is_refused_before_building(archive, tmp_path, field,
                                                                                           value, named):
    path = tiny_checkpoint(tmp_path / "edited.pt", **{field: value})
    result = fill("--source", archive, "--out", tmp_path / "out", "--checkpoint", path)
    assert result.returncode == 2, result.stderr
    line = one_line(result)
    assert f"{path}: {named}" in line, line
    assert not (tmp_path / "out").exists()


# ------------------------------------------------- 5. the time of a frame that lost every band

def test_every_band_of_a_frame_that_lost_all_six_keeps_the_frames_own_time(filled):
    out, _ = filled
    satellite, slot = LOST_FRAME
    headers = [fits.read_l2_raw(out / fits.l2_name(band, satellite, slot))[1] for band in timebase.WAVELENGTHS]
    for key in ("DATE-OBS", "DATE-BEG", "DATE-END", "DSUN_OBS", "SOLAR_B0", "DIAM_SUN"):
        assert len({header[key] for header in headers}) == 1, [header[key] for header in headers]
    assert all(timebase.slot_of(header["DATE-OBS"]) == slot and timebase.slot_of(header["DATE-BEG"]) == slot
               for header in headers)


def test_filled_header_never_changes_the_reference_header(archive):
    from suvi_fill.evaluate import fill_archive as fill_module
    index = fill_module.ArchiveIndex(archive)
    raw, parsed = index.reference(LOST_FRAME[0], LOST_FRAME[1])
    before = raw.tostring()
    for band in timebase.WAVELENGTHS:
        fill_module.filled_header(raw, parsed, band, LOST_FRAME[0], LOST_FRAME[1], "linear", None, 1)
    assert raw.tostring() == before


# ------------------------------------------------- B. checksums, no blank cards, only the window read

def test_filled_files_carry_a_checksum_astropy_verifies(filled, tmp_path):
    from astropy.io import fits as astropy_fits
    out, _ = filled
    path = out / fits.l2_name(*LOST_171)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with astropy_fits.open(path, checksum=True) as hdus:
            assert hdus[0].header["CHECKSUM"] and hdus[0].header["DATASUM"] != "0"
            assert hdus[0].verify_checksum() == 1 and hdus[0].verify_datasum() == 1
    damaged = tmp_path / path.name
    payload = bytearray(path.read_bytes())
    payload[-100] ^= 0x40                                  # one bit of the image
    damaged.write_bytes(bytes(payload))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with astropy_fits.open(damaged, checksum=True) as hdus:
            hdus[0].data.sum()
    assert any("sum verification failed" in str(w.message) for w in caught), [str(w.message) for w in caught]


def test_a_filled_file_has_no_blank_cards_and_sunpy_saves_it_without_warnings(filled, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sunpy_map = need("sunpy.map")
    out, _ = filled
    for band in timebase.WAVELENGTHS:
        header = fits.read_l2_raw(out / fits.l2_name(band, *LOST_FRAME))[1]
        assert all(card.keyword.strip() for card in header.cards)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        made = sunpy_map.Map(out / fits.l2_name(*LOST_171))
        made.save(tmp_path / "saved.fits")
    assert (tmp_path / "saved.fits").stat().st_size > 0


def test_a_window_reads_only_the_files_named_within_its_reach(archive, tmp_path, monkeypatch):
    from suvi_fill import cli
    read = []
    for name in ("read_l2", "read_l2_raw"):
        original = getattr(fits, name)
        monkeypatch.setattr(fits, name, lambda item, *a, _original=original, **k: read.append(Path(str(item)).name)
                            or _original(item, *a, **k))
    satellite, slot = LOST_FRAME
    start, end = timebase.time_of(slot), timebase.time_of(slot + 1)
    status = cli.main(["fill", "--source", str(archive), "--out", str(tmp_path / "out"), "--filler", "linear",
                       "--span", "2", "--start", start.isoformat(), "--end", end.isoformat(), "--quiet"])
    assert status == 0
    slots = {fits.parse_l2_name(name).slot for name in read}
    assert slots and min(slots) >= slot - 2 and max(slots) <= slot + 2, sorted(slots)
    assert len(set(read)) < len(list(archive.rglob("*.fits"))) / 4
    written = sorted(p.name for p in (tmp_path / "out").glob("*.fits"))
    assert written == sorted(fits.l2_name(band, satellite, slot) for band in timebase.WAVELENGTHS)
    report = json.loads((tmp_path / "out" / "fill_report.json").read_text())
    assert report["source_files_read"] == len(set(read))
    assert report["source_files"] == len(list(archive.rglob("*.fits")))


# ------------------------------------------------- 7. one fill run per --out; a stopped run leaves nothing

def test_a_second_fill_into_the_same_out_is_refused_and_the_first_kept(filled):
    out, _ = filled
    before = snapshot(out)
    result = fill("--source", out.parent / "archive", "--out", out, "--filler", "nearest")
    assert result.returncode == 2, result.stderr
    line = one_line(result)
    assert f"--out {out}: holds another fill run's output (fill_report.json and " in line, line
    assert "one fill run per directory" in line
    assert snapshot(out) == before


def _block_signals():
    "In the child before exec: the mask a thread that blocks SIGTERM and SIGINT would hand on."
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM, signal.SIGINT})


def _fill_stopped_by(archive, out, sent, blocked) -> tuple[int, str]:
    "Start a fill into `out`, hold it (SIGSTOP) once its corpus directory appears, send `sent`, let it go on."
    command = [tool("suvi-fill"), "fill", "--quiet", "--source", str(archive), "--out", str(out), "--filler", "linear"]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env=dict(os.environ, PYTHONWARNINGS="ignore"),
                               preexec_fn=_block_signals if blocked else None)
    deadline = time.monotonic() + 120
    while not (out / ".fill-corpus").exists() and process.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    # Stopping it first (SIGSTOP cannot be caught) holds it at this point; the signal is then pending when it
    # continues, whatever the machine's load.
    os.kill(process.pid, signal.SIGSTOP)
    assert process.poll() is None, "the fill ended before it could be stopped"
    os.kill(process.pid, sent)
    os.kill(process.pid, signal.SIGCONT)
    _, stderr = process.communicate(timeout=120)
    return process.returncode, stderr


@pytest.mark.parametrize("sent, status, blocked", [(signal.SIGTERM, 143, False), (signal.SIGINT, 130, False),
                                                   (signal.SIGTERM, 143, True), (signal.SIGINT, 130, True)],
                         ids=["SIGTERM", "SIGINT", "SIGTERM-inherited-blocked", "SIGINT-inherited-blocked"])
def test_a_fill_stopped_by_a_signal_leaves_no_output(archive, tmp_path, sent, status, blocked):
    # The fill ends about a second after its corpus directory appears.  On a loaded machine this test can be
    # descheduled for that second, and the fill has then written everything and is exiting when it is held:
    # a complete output and exit 0, which is right for a fill that finished.  Such a try says nothing about
    # the signal, so it is made again (a fill that ignored the signal would finish every time).
    for attempt in range(3):
        out = tmp_path / f"out{attempt}"
        returncode, stderr = _fill_stopped_by(archive, out, sent, blocked)
        if not (returncode == 0 and (out / "fill_report.json").exists()):
            break
    mask = sorted(signal.Signals(n).name for n in signal.pthread_sigmask(signal.SIG_BLOCK, []))
    assert returncode == status, f"{stderr!r}; this test's own blocked signals: {mask}; tries: {attempt + 1}"
    assert "Traceback" not in stderr
    assert not out.exists() or sorted(p.name for p in out.iterdir()) == [], sorted(p.name for p in out.iterdir())


# ------------------------------------------------- 9. a checkpoint of another resolution; a stale --shards

@pytest.fixture(scope="module")
def shards(archive):
    "The corpus of the archive, built at 32 px."
    out = archive.parent / "shards"
    result = run([tool("suvi-fill"), "build", "--source", str(archive), "--out", str(out), "--no-progress"])
    assert result.returncode == 0, result.stderr
    return out


def test_a_checkpoint_trained_at_another_resolution_is_refused_naming_both(archive, shards, tmp_path):
    path = tiny_checkpoint(tmp_path / "best64.pt", resolution=64)
    result = fill("--source", archive, "--out", tmp_path / "a", "--checkpoint", path, "--shards", shards)
    assert result.returncode == 2, result.stderr
    assert f"--checkpoint {path}: trained on 64 px corpora, but --shards {shards} is 32 px" in one_line(result)
    result = fill("--source", archive, "--out", tmp_path / "b", "--checkpoint", path, "--resolution", "32")
    assert result.returncode == 2, result.stderr
    assert f"--resolution 32: --checkpoint {path} was trained on 64 px corpora" in one_line(result)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_fill_with_shards_after_archive_files_were_deleted_is_refused(archive, shards, tmp_path):
    copy = tmp_path / "archive"
    shutil.copytree(archive, copy)
    for path in sorted(copy.rglob("*_g16_*.fits"))[40:50]:
        path.unlink()
    result = fill("--source", copy, "--out", tmp_path / "out", "--filler", "linear", "--shards", shards)
    assert result.returncode == 2, result.stderr
    line = one_line(result)
    assert f"--shards {shards}: " in line and "now holds" in line and "(10 fewer)" in line, line
    assert not (tmp_path / "out").exists()


def test_training_records_the_corpus_resolution_in_its_checkpoints(finished):
    _, done = finished
    assert state(done / "last.pt")["resolution"] == 32 and state(done / "best.pt")["resolution"] == 32


# ------------------------------------------------- 9. a bench of an empty split

def test_bench_of_a_split_without_targets_is_one_line(corpus, tmp_path):  # noqa: F811
    from suvi_fill.corpus.reader import manifest_digest
    manifest = json.loads((corpus / "manifest.json").read_text())
    manifest["segments"]["test"] = []
    manifest["digest"] = manifest_digest(manifest)
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    result = run([tool("suvi-fill"), "bench", "--shards", str(corpus), "--manifest", str(tmp_path / "manifest.json"),
                  "--out", str(tmp_path / "out"), "--device", "cpu", "--quiet", "--fillers", "nearest",
                  "--gaps", "1", "--samples", "1"], env=ENV, cwd=ROOT)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "the test split has no targets (0 segments); nothing to bench" in error_line(result)
    assert "|" not in result.stdout and not (tmp_path / "out").exists()


# ------------------------------------------------- 8. --resume onto another corpus

def other_corpus_checkpoint(done: Path, destination: Path, name: str = "last.pt") -> str:
    "`name` of the finished run, as if trained on another corpus (its manifest digest changed)."
    import torch
    saved = torch.load(done / name, map_location="cpu", weights_only=True)
    saved["manifest"] = "0123456789abcdef" * 4
    torch.save(saved, destination)
    return saved["manifest"]


def test_resume_onto_another_corpus_is_refused_naming_both(finished, tmp_path):
    shards, done = finished
    other = other_corpus_checkpoint(done, tmp_path / "other.pt")
    digest = json.loads((shards / "manifest.json").read_text())["digest"]
    result = train(shards, tmp_path / "run", "--resume", str(tmp_path / "other.pt"), *SHORT)
    assert result.returncode == 2, result.stdout + result.stderr
    line = error_line(result)
    assert f"--resume {tmp_path / 'other.pt'}: trained on corpus {other[:16]}, but --manifest " in line, line
    assert f"is corpus {digest[:16]}" in line and "--fine-tune" in line
    assert not (tmp_path / "run" / "last.pt").exists() and not (tmp_path / "run" / "best.pt").exists()


def test_fine_tune_resumes_onto_another_corpus_with_a_fresh_best(finished, tmp_path):
    shards, done = finished
    out = tmp_path / "run"
    shutil.copytree(done, out)
    other_corpus_checkpoint(done, out / "last.pt")
    other_corpus_checkpoint(done, out / "best.pt", "best.pt")          # the other corpus's best
    digest = json.loads((shards / "manifest.json").read_text())["digest"]
    result = train(shards, out, "--resume", str(out / "last.pt"), "--fine-tune", *SHORT, "--max-steps", "4")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"fine-tuning on corpus {digest[:16]} (trained on 0123456789abcdef): the best starts afresh" in result.stdout
    best = state(out / "best.pt")
    assert best["manifest"] == digest                              # the other corpus's best.pt was replaced


# ------------------------------------------------- 17, 18. numeric train flags

@pytest.mark.parametrize("flag, value, message", [
    ("--lr", "inf", "--lr inf: must be a finite number from 0 to 10.0"),
    ("--lr", "1e30", "--lr 1e+30: must be a finite number from 0 to 10.0"),
    ("--lr", "nan", "--lr nan: must be a finite number"),
    ("--base", "1000000", "--base 1000000: must be at most 1024"),
    ("--pool-wait", "inf", "--pool-wait inf: must be a finite number of seconds")])
def test_absurd_numeric_train_flags_are_refused_naming_the_flag(corpus, tmp_path, flag, value, message):  # noqa: F811
    result = train(corpus, tmp_path / "run", *SHORT, flag, value)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in error_line(result)
    assert "rebuild the damaged shard" not in result.stderr and not (tmp_path / "run").exists()


def test_gap_max_beyond_the_corpus_is_bounded_by_it_in_one_line(finished, tmp_path):
    shards, _ = finished
    days = len(json.loads((shards / "manifest.json").read_text())["days"])
    result = train(shards, tmp_path / "run", "--gap-max", str(10**9), *SHORT)
    assert result.returncode == 0, result.stdout + result.stderr
    bounded = [line for line in result.stdout.splitlines() if "--gap-max" in line]
    assert bounded == [f"  --gap-max 1000000000: bounded to {days * timebase.SLOTS_PER_DAY} slots, the length of "
                       f"the corpus ({days} days)"], result.stdout
    assert state(tmp_path / "run" / "last.pt")["args"]["gap_max"] == days * timebase.SLOTS_PER_DAY


# ------------------------------------------------- 19. render's --size and --fps

@pytest.mark.parametrize("flag, value, message", [("--size", "-5", "--size -5: must be from 16 to 8192 px"),
                                                  ("--size", "60000", "--size 60000: must be from 16 to 8192 px"),
                                                  ("--fps", "-3", "--fps -3: must be from 1 to 120 frames/s"),
                                                  ("--fps", "0", "--fps 0: must be from 1 to 120 frames/s")])
def test_render_refuses_sizes_and_frame_rates_out_of_range(corpus, tmp_path, flag, value, message):  # noqa: F811
    start = timebase.time_of(timebase.first_slot_of_day("2024-06-20") + 180)
    result = run([tool("suvi-fill"), "render", "--shards", str(corpus), "--out", str(tmp_path / "out"),
                  "--device", "cpu", "--quiet", "--satellite", "16", "--start", start.isoformat(),
                  "--end", (start + (timebase.time_of(1) - timebase.time_of(0)) * 2).isoformat(), "--band", "171",
                  "--fill", "nearest", "--movie", str(tmp_path / "m.mp4"), flag, value], env=ENV, cwd=ROOT)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in error_line(result)
    assert not (tmp_path / "out").exists() and not (tmp_path / "m.mp4").exists()
