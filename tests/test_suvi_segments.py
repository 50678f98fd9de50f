"""suvi_fill.corpus.segments: pristine segments, splits disjoint in time by whole block, the
manifest digest, and the cross-satellite calibration recovered within 1%."""
import json
import shutil

import numpy as np
import pytest

from suvi_fill.corpus import shards as dataset
from suvi_fill.archive import ingest
from suvi_fill.physics import timebase
from suvi_fill.corpus import segments
from test_suvi_ingest import DAY, write_archive

D0 = timebase.first_slot_of_day(DAY)
#: Five stretches of data; GOES-18 misses two bands in the middle of the second, and one
#: whole frame in the fourth; the last crosses midnight.
STRETCHES = [(D0 + 10, D0 + 40), (D0 + 60, D0 + 100), (D0 + 120, D0 + 140), (D0 + 170, D0 + 200),
             (D0 + 340, D0 + 380)]
SKIP = {(18, D0 + 80, 94), (18, D0 + 80, 304), *((18, D0 + 185, w) for w in timebase.WAVELENGTHS)}
GAINS = {16: (1.0, 0.0), 18: (0.93, 0.004)}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    base = tmp_path_factory.mktemp("seg")
    slots = [s for a, b in STRETCHES for s in range(a, b)]
    write_archive(base / "src", slots, n=32, gains=GAINS, skip=SKIP, seed=5, spot_width=0.3)
    ingest.build(base / "src", base / "out", resolution=32, progress=False, span_min=4)
    return base


def test_segments_are_maximal_clean_runs(corpus):
    manifest = segments.load_manifest(corpus / "out")
    every = sorted(tuple(s) for chosen in manifest["segments"].values() for s in chosen)
    expected = sorted([(16, a, b) for a, b in STRETCHES]
                      + [(18, a, b) for a, b in STRETCHES if a not in (D0 + 60, D0 + 170)]
                      + [(18, D0 + 60, D0 + 80), (18, D0 + 81, D0 + 100),
                         (18, D0 + 170, D0 + 185), (18, D0 + 186, D0 + 200)])
    assert every == expected
    assert manifest["segment_layout"].startswith("[satellite, start_slot, end_slot]")
    assert segments.days_touched([(16, D0 + 340, D0 + 380)]) == [DAY, "2024-03-02"]
    assert manifest["days"] == [DAY, "2024-03-02"] and manifest["span_min"] == 4
    assert (manifest["resolution"], manifest["cadence_seconds"], manifest["satellites"]) == (32, 240, [16, 18])
    shards = segments.corpus_shards(corpus / "out")
    for satellite, start, end in every:                               # clean inside, not clean just outside
        for slot in (start, end - 1):
            shard = shards[(timebase.day_of_slot(slot), satellite)]
            assert shard.present[shard.index_of(slot)].all()
        for slot in (start - 1, end):
            shard = shards.get((timebase.day_of_slot(slot), satellite))
            assert shard is None or not shard.present[shard.index_of(slot)].all()


def test_splits_are_disjoint_in_time_and_cover_every_segment(corpus):
    manifest = segments.load_manifest(corpus / "out")
    chosen = manifest["segments"]
    assert set(chosen) == {"train", "val", "test"} and all(chosen.values())
    intervals = [(s[1], s[2], name) for name, members in chosen.items() for s in members]
    for a_start, a_end, a_name in intervals:
        for b_start, b_end, b_name in intervals:
            if a_name != b_name:
                assert a_end <= b_start or b_end <= a_start, "segments of two splits overlap in time"
    # The two satellites' segments over one stretch always share a split.
    for a, b in STRETCHES:
        names = {name for name, members in chosen.items() for s in members if a <= s[1] < b}
        assert len(names) == 1
    again = segments.assign_splits(segments.find_segments(segments.corpus_shards(corpus / "out"), 4))
    assert {k: [list(s) for s in v] for k, v in again.items()} == chosen      # deterministic


def test_digest_changes_with_shards_segments_and_splits(corpus, tmp_path):
    first = segments.load_manifest(corpus / "out")
    assert first["digest"] == segments.manifest_digest(first)
    same = segments.write_manifest(corpus / "out", span_min=4)
    assert same["digest"] == first["digest"]
    wider = segments.write_manifest(corpus / "out", span_min=12)         # fewer segments
    assert wider["digest"] != first["digest"] and sum(map(len, wider["segments"].values())) < 14
    shards = segments.open_shards(corpus / "out")
    resplit = segments.make_manifest(shards, span_min=4, ratios={"train": 0.5, "val": 0.25, "test": 0.25})
    assert resplit["digest"] != first["digest"]
    segments.write_manifest(corpus / "out", span_min=4)
    # One changed file -> one changed shard -> another digest.
    src = tmp_path / "src"
    shutil.copytree(corpus / "src", src)
    victim = next(src.glob("dr_suvi-l2-ci171_g16_s20240301T0100*"))
    victim.unlink()
    report = ingest.build(src, tmp_path / "out", resolution=32, progress=False, span_min=4)
    assert report["manifest_digest"] != first["digest"]


def test_calibration_recovers_the_true_gains(corpus):
    manifest = segments.load_manifest(corpus / "out")
    cal = manifest["calibration"]
    assert cal["reference"] == 16
    true_gain = GAINS[16][0] / GAINS[18][0]                # r16 = (1 / 0.93) * (r18 - 0.004)
    true_offset = -GAINS[18][1] / GAINS[18][0]
    for wavelength in timebase.WAVELENGTHS:
        fit = cal["bands"][str(wavelength)]["18"]
        assert fit["frames"] == segments.CALIBRATION_FRAMES
        assert fit["gain"] == pytest.approx(true_gain, rel=0.01), wavelength
        assert fit["offset"] == pytest.approx(true_offset, abs=0.02 * wavelength / 100), wavelength
        assert cal["bands"][str(wavelength)]["16"] == {"gain": 1.0, "offset": 0.0, "frames": 0}
    gains, offsets = segments.transfer(cal, 18, 16)
    assert np.allclose(gains, true_gain, rtol=0.01)


def test_calibration_recovers_the_simulators_gains_within_one_percent(tmp_path):
    from suvi_fill.sim.emission import QUIET_RADIANCE
    from suvi_fill.sim.synth import synthesize
    summary = synthesize(tmp_path / "src", hours=6, resolution=64, seed=3, progress=False)
    ingest.build(tmp_path / "src", tmp_path / "out", progress=False, span_min=4)
    cal = segments.load_manifest(tmp_path / "out")["calibration"]
    truth = summary["calibration"]["18/16"]             # observed_18 = gain * observed_16 + offset
    for wavelength in timebase.WAVELENGTHS:
        fit = cal["bands"][str(wavelength)]["18"]        # observed_16 = gain * observed_18 + offset
        assert fit["frames"] > 10
        assert fit["gain"] * truth["gain"][str(wavelength)] == pytest.approx(1.0, abs=0.01), wavelength
        true_offset = -truth["offset"][str(wavelength)] / truth["gain"][str(wavelength)]
        assert fit["offset"] == pytest.approx(true_offset, abs=0.002 * QUIET_RADIANCE[wavelength] + 1e-4)


def test_a_changed_shard_is_caught_and_an_interrupted_build_keeps_the_old_manifest(corpus, tmp_path, monkeypatch):
    out = tmp_path / "out"
    shutil.copytree(corpus / "out", out)
    name = dataset.shard_name(DAY, 18)
    with dataset.ShardWriter(out / name, DAY, 18, 32) as writer:     # a shard from elsewhere
        writer.mark(writer.slots[0], 0, dataset.SENTINEL)
    with pytest.raises(ValueError, match="changed since the manifest"):
        segments.corpus_shards(out)
    # An interrupted rebuild (Ctrl-C while ingesting): the build stops, the old manifest
    # stays as it was (issue 19: the old corpus stays usable), and nothing staged is left behind.
    before = (out / segments.MANIFEST).read_bytes()
    def interrupted(*args):
        raise KeyboardInterrupt
    monkeypatch.setattr(ingest, "_ingest_one", interrupted)
    with pytest.raises(KeyboardInterrupt):
        ingest.build(corpus / "src", out, resolution=32, progress=False)
    assert (out / segments.MANIFEST).read_bytes() == before
    assert not [p for p in out.iterdir() if p.name.startswith(".")]


def test_split_windows_go_whole_to_one_split_and_are_recorded(corpus):
    "With a stretch, segments are cut at window edges and each window goes whole to one split."
    from suvi_fill.corpus import segments
    shards = segments.open_shards(corpus / "out")
    try:
        found = segments.find_segments(shards, 8)
        plain = segments.make_manifest(shards, 8)
        windowed = segments.make_manifest(shards, 8, stretch=97)
    finally:
        segments.close_shards(shards)
    assert plain["split_stretch"] == 0 and windowed["split_stretch"] == 97
    assert plain["digest"] != windowed["digest"]
    windows = segments.time_windows(found, 97, 2 * 8 + 1)
    assert len(windows) >= 3
    split_of = {tuple(s): name for name, segs in windowed["segments"].items() for s in segs}
    assert sorted(split_of) == sorted(p for w in windows for p in w[2])
    for start, end, pieces in windows:
        assert len({split_of[p] for p in pieces}) == 1, (start, end)
        assert all(start <= p[1] and p[2] <= end and p[2] - p[1] >= 17 for p in pieces)
