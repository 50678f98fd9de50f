"""suvi_fill.corpus.availability: the profiled presence trace, block draws that keep the
archive's correlations (dual-satellite outages at the trace's rate), band-loss patterns."""
import numpy as np
import pytest

from helpers import run, tool
from suvi_fill.corpus import availability
from suvi_fill.corpus import shards as dataset
from suvi_fill.physics import timebase
from suvi_fill.corpus import segments
from suvi_fill.sim.outages import OK, OutageRates, outage_plan
from test_suvi_ingest import DAY, write_archive

D0 = timebase.first_slot_of_day(DAY)


@pytest.fixture(scope="module")
def archive_trace():
    "A 20-day presence trace from the simulator's outage process (eclipses, dual failures, gaps...)."
    first = timebase.first_slot_of_day("2024-03-10")
    status, _, _ = outage_plan(first, 20 * timebase.SLOTS_PER_DAY, (16, 18), OutageRates(), 7)
    present = status == OK
    return availability.Availability(np.arange(first, first + len(present)), (16, 18), present)


def test_drawn_windows_keep_the_dual_outage_rate(archive_trace):
    trace_rate = availability.dual_outage_rate(archive_trace.present)
    assert trace_rate > 0.002                                   # the process has dual failures to preserve
    rng = np.random.default_rng(0)
    drawn = np.concatenate([archive_trace.draw_window(rng, 16) for _ in range(3000)])
    assert drawn.shape == (3000 * 33, 2, 6) and drawn.dtype == bool
    assert availability.dual_outage_rate(drawn) == pytest.approx(trace_rate, rel=0.15)
    # The same per-satellite marginals drawn independently (what synthetic damage does)
    # miss most of them: the test can tell the two apart.
    independent = np.stack([archive_trace.present[rng.integers(archive_trace.slots, size=len(drawn)), s]
                            for s in range(2)], axis=1)
    assert availability.dual_outage_rate(independent) < 0.6 * trace_rate
    # Whole-frame outages of each satellite, and their time correlation, come through too.
    for s in range(2):
        lost = ~archive_trace.present[:, s].any(axis=1)
        drawn_lost = ~drawn[:, s].any(axis=1)
        assert drawn_lost.mean() == pytest.approx(lost.mean(), rel=0.15)


def test_drawn_lost_bands_follow_the_trace_patterns(archive_trace):
    rng = np.random.default_rng(1)
    lost = np.array([archive_trace.draw_lost(rng) for _ in range(4000)])
    assert lost.shape == (4000, 6) and lost.any(axis=1).all()
    patterns, counts = archive_trace.patterns, archive_trace.pattern_counts
    assert patterns.any(axis=1).all() and counts.sum() > 0
    expected_single = counts[patterns.sum(axis=1) == 1].sum() / counts.sum()
    assert (lost.sum(axis=1) == 1).mean() == pytest.approx(expected_single, abs=0.03)
    # A trace with no losses at all falls back to one band.
    perfect = availability.Availability(np.arange(50), (16, 18), np.ones((50, 2, 6), bool))
    assert all(perfect.draw_lost(rng).sum() == 1 for _ in range(20))
    # The same seed draws the same damage.
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    assert np.array_equal(archive_trace.draw_window(a, 8), archive_trace.draw_window(b, 8))
    assert np.array_equal(archive_trace.draw_lost(a), archive_trace.draw_lost(b))


def test_profile_command_writes_the_real_trace(tmp_path):
    skip = {(18, D0 + 12, 171), *((s, D0 + 20, w) for s in (16, 18) for w in (94, 131))}
    write_archive(tmp_path / "src", range(D0 + 5, D0 + 30), n=16, skip=skip)
    out = tmp_path / "corpus"
    assert run([tool("suvi-fill"), "build", "--source", str(tmp_path / "src"), "--out", str(out),
                "--no-progress", "--span-min", "2"]).returncode == 0
    result = run([tool("suvi-fill"), "profile", "--shards", str(out)])
    assert result.returncode == 0, result.stderr
    assert "availability model: 360 slots, satellites (16, 18)" in result.stdout
    model = availability.Availability.load(out / availability.AVAILABILITY)
    assert model.slots == 360 and model.satellites == (16, 18)
    assert f"{model.slots:,} slots" == "360 slots"               # the trainer prints it so
    shards = segments.corpus_shards(out)
    for s, satellite in enumerate((16, 18)):
        assert np.array_equal(model.present[:, s], shards[(DAY, satellite)].present)
        assert np.array_equal(model.quality[:, s], shards[(DAY, satellite)].quality)
    assert not model.present[20, :, 0].any() and model.present[20, :, 2].all()    # the dual outage
    assert availability.dual_outage_rate(model.present) == pytest.approx(
        (~model.present.any(axis=1)).mean())
    # Errors: a missing corpus, a foreign file.
    missing = run([tool("suvi-fill"), "profile", "--shards", str(tmp_path / "nope")])
    assert missing.returncode == 2 and "not a directory" in missing.stderr
    (tmp_path / "bad.npz").write_bytes(b"not an npz")
    with pytest.raises(ValueError, match="not an availability model"):
        availability.Availability.load(tmp_path / "bad.npz")
    with pytest.raises(FileNotFoundError, match="suvi-fill profile"):
        availability.Availability.load(tmp_path / "none.npz")
