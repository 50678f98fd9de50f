"""`suvi-fill bench` on the tiny corpus: the gap definition holds for every sample and no
anchor comes from outside the test split, damage is pinned (same samples, same table, run
after run), gaps the archive cannot supply report n = 0, the three outputs are written,
the learned filler and the goal appear with a checkpoint, and bad input fails cleanly."""
import json

import numpy as np
import pytest

from helpers import run, tool
from suvi_fill.corpus.reader import Corpus
from test_suvi_fillers import ENV, fill_corpus, bench_samples, tiny_checkpoint  # noqa: F401 (fixtures)


def bench_cli(corpus, out, *extra):
    return run([tool("suvi-fill"), "bench", "--shards", str(corpus), "--out", str(out), "--device", "cpu",
                "--quiet", *extra], env=ENV, timeout=600)


def test_gap_definition_and_split_isolation(fill_corpus):
    from suvi_fill.corpus import availability
    from suvi_fill.evaluate import bench
    from suvi_fill.corpus import sampler as samples
    from suvi_fill.corpus import segments
    corpus = Corpus.open(fill_corpus)
    trace = availability.Availability.load(fill_corpus / "availability.npz")
    test = bench.split_segments(corpus, "test")
    inside = lambda sat, slot: any(s == sat and a <= slot < e for s, a, e in test)
    with bench.BenchSet(fill_corpus, corpus, trace) as chosen:
        for gap in (1, 4, 16):
            made = list(chosen.samples(gap, 4))
            assert made, gap
            for sample in made:
                assert inside(sample.satellite, sample.when)
                assert all(inside(sat, slot) for sat, slot in sample.frames), "anchor outside the test split"
                assert set(samples.measured_gaps(sample).values()) == {gap}
                slots = np.array([abs(slot - sample.when) for _, slot in sample.frames])
                for b in np.flatnonzero(sample.lost):
                    assert not sample.present[1:, b][slots[1:] < gap].any()
        assert chosen.eligible(10_000) == [] and list(chosen.samples(10_000, 4)) == []


def test_pinned_damage_same_samples(fill_corpus):
    from suvi_fill.corpus import availability
    from suvi_fill.evaluate import bench
    from suvi_fill.corpus import sampler as samples
    from suvi_fill.corpus import segments
    corpus = Corpus.open(fill_corpus)
    trace = availability.Availability.load(fill_corpus / "availability.npz")
    runs = []
    for _ in range(2):
        with bench.BenchSet(fill_corpus, corpus, trace) as chosen:
            runs.append(list(chosen.samples(4, 3)))
    for a, b in zip(*runs):
        assert a.when == b.when and np.array_equal(a.lost, b.lost)
        assert np.array_equal(a.present, b.present) and np.array_equal(a.stack, b.stack)
    with bench.BenchSet(fill_corpus, corpus, trace, seed=1) as other:
        third = list(other.samples(4, 3))
    assert any(not np.array_equal(a.present, c.present) for a, c in zip(runs[0], third))


def test_bench_command_outputs(fill_corpus, tmp_path):
    out = tmp_path / "bench"
    result = bench_cli(fill_corpus, out, "--gaps", "1,4,10000", "--samples", "3", "--partial-samples", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((out / "bench.json").read_text())
    assert report["gaps"] == [1, 4, 10000] and report["samples"] == {"1": 3, "4": 3, "10000": 0}
    assert report["by_loss"]["partial"]["samples"] == {"1": 2, "4": 2, "10000": 0}
    assert report["fillers"] == ["nearest", "derotated", "linear", "optical_flow", "blend", "crossband"]
    for name in report["fillers"]:
        assert set(report["table"][name]) == {"1", "4", "10000"}
        assert report["table"][name]["10000"] is None and report["per_band"][name]["10000"] == {}
        for gap in ("1", "4"):
            value = report["table"][name][gap]
            assert 15 < value < 120
            bands = report["per_band"][name][gap]
            assert bands and min(bands.values()) <= value <= max(bands.values())
    assert report["goal"]["met"] is None                       # no learned filler without a checkpoint
    assert len(report["targets"]["1"]) == 3
    md = (out / "bench.md").read_text()
    assert "| optical_flow |" in md and "| samples | 3 | 3 | 0 |" in md
    assert (out / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "| linear |" in result.stdout and "bench.json" in result.stdout
    # The same command again: the same table (damage pinned by the seed).
    again = bench_cli(fill_corpus, tmp_path / "again", "--gaps", "1,4,10000", "--samples", "3", "--partial-samples", "2")
    assert again.returncode == 0
    assert json.loads((tmp_path / "again" / "bench.json").read_text())["table"] == report["table"]


def test_bench_with_learned_checkpoint(fill_corpus, tiny_checkpoint, tmp_path):
    out = tmp_path / "bench"
    result = bench_cli(fill_corpus, out, "--gaps", "1", "--samples", "2", "--checkpoint", str(tiny_checkpoint),
                       "--fillers", "optical_flow,learned")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((out / "bench.json").read_text())
    assert report["fillers"] == ["optical_flow", "learned"] and report["checkpoint"] == str(tiny_checkpoint)
    margin = report["goal"]["margins"]["1"]
    assert margin == pytest.approx(report["table"]["learned"]["1"] - report["table"]["optical_flow"]["1"], abs=1e-2)
    assert report["goal"]["met"] == (margin >= 1.0)


@pytest.mark.parametrize("extra, message", [
    (["--gaps", "0,4"], "positive"),
    (["--gaps", "one"], "comma-separated"),
    (["--fillers", "cubic"], "unknown cubic"),
    (["--checkpoint", "/nonexistent/best.pt"], "no such file"),
    (["--split", "test", "--samples", "0"], "at least 1"),
    (["--partial-samples", "-1"], "--partial-samples -1: must be at least 0"),
])
def test_bad_input_fails_cleanly(fill_corpus, tmp_path, extra, message):
    out = tmp_path / "bench"
    result = bench_cli(fill_corpus, out, *extra)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_missing_corpus_fails_cleanly(tmp_path):
    result = bench_cli(tmp_path / "nowhere", tmp_path / "bench")
    assert result.returncode == 2 and "manifest" in result.stderr and not (tmp_path / "bench").exists()


def test_a_gap_without_samples_fails_the_goal_and_is_named():
    from suvi_fill.evaluate import bench
    table = {"learned": {"1": 50.0, "300": None}, "optical_flow": {"1": 48.0, "300": None}}
    verdict = bench.goal(table, (1, 300))
    assert verdict["margins"] == {"1": 2.0, "300": None} and verdict["unmeasured"] == [300]
    assert verdict["met"] is False
    assert bench.goal({"learned": {"1": 50.0}, "optical_flow": {"1": 48.0}}, (1,))["met"] is True
    result = {"split": "test", "manifest": "0" * 64, "resolution": 16, "gaps": [1, 300],
              "samples": {"1": 4, "300": 0}, "fillers": ["optical_flow", "learned"], "table": table,
              "per_band": {n: {"1": {}, "300": {}} for n in table}, "goal": verdict}
    md = bench.format_tables(result)
    assert "NOT met" in md and "No samples at gap 300" in md and "| samples | 4 | 0 |" in md


def test_bracketed_samples_hold_each_lost_band_on_both_sides(fill_corpus):
    from suvi_fill.corpus import availability
    from suvi_fill.evaluate import bench
    from suvi_fill.corpus import segments
    corpus = Corpus.open(fill_corpus)
    trace = availability.Availability.load(fill_corpus / "availability.npz")
    with bench.BenchSet(fill_corpus, corpus, trace) as chosen:
        assert chosen.sides == "bracketed"
        made = list(chosen.samples(4, 4))
    assert made
    for sample in made:
        offsets = np.array([slot - sample.when for _, slot in sample.frames])
        for b in np.flatnonzero(sample.lost):
            holding = offsets[1:][sample.present[1:, b]]
            assert (holding == -4).any() and (holding == 4).any(), "lost band not held at -gap and +gap"


def test_one_sided_samples_use_no_frame_after_the_target(fill_corpus, tmp_path):
    from suvi_fill.corpus import availability
    from suvi_fill.evaluate import bench
    from suvi_fill.corpus import sampler as samples
    from suvi_fill.corpus import segments
    corpus = Corpus.open(fill_corpus)
    trace = availability.Availability.load(fill_corpus / "availability.npz")
    with bench.BenchSet(fill_corpus, corpus, trace, sides="one-sided") as chosen:
        made = list(chosen.samples(4, 4))
        one_sided_pool = len(chosen.eligible(4))
    with bench.BenchSet(fill_corpus, corpus, trace) as bracketed:
        assert len(bracketed.eligible(4)) <= one_sided_pool       # bracketing asks for more
    assert made
    for sample in made:
        assert all(slot <= sample.when for _, slot in sample.frames), "a frame after the target was used"
        assert set(samples.measured_gaps(sample).values()) == {4}
    with pytest.raises(ValueError, match="sides must be one of"):
        bench.BenchSet(fill_corpus, corpus, trace, sides="both")
    out = tmp_path / "one"
    result = bench_cli(fill_corpus, out, "--gaps", "1,4", "--samples", "2", "--sides", "one-sided",
                       "--fillers", "nearest,optical_flow")
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((out / "bench.json").read_text())
    assert report["sides"] == "one-sided" and "only before the target" in report["gap_definition"]
    assert "one-sided gaps" in (out / "bench.md").read_text()
