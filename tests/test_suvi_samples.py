"""suvi_fill.corpus.sampler on a small real corpus (shards written by dataset.ShardWriter, the
manifest by segments.write_manifest, the availability model by availability.profile):
targets and their margin, damage fresh per call and pinned per seed, anchors from both
satellites, edges and outages, sentinel targets, tensors, collate padding through
align_stack and the model."""
import numpy as np
import pytest
import torch

from suvi_fill.physics import align
from suvi_fill.corpus import availability
from suvi_fill.corpus import conditioning
from suvi_fill.corpus import shards as dataset
from suvi_fill.model import net as model
from suvi_fill.physics import timebase
from suvi_fill.corpus import sampler as samples
from suvi_fill.corpus import segments
from suvi_fill.plumbing.errors import DataError

pytestmark = pytest.mark.usefixtures("one_thread")


DAYS = ("2024-03-01", "2024-03-02")
RESOLUTION = 32
#: The true cross-calibration of the fixture: r16 = GAIN * r18 + OFFSET per band.
GAIN = np.array([1.10, 0.95, 1.05, 0.90, 1.20, 1.00])
OFFSET = np.array([0.2, 0.0, 0.5, 0.1, 0.0, 0.3])
FIRST = timebase.first_slot_of_day(DAYS[0])
#: Outages of the fixture, in slots from FIRST: a sentinel run on g16, a 94 Å drop on g16,
#: a multi-hour whole-frame gap on g18.
SENTINEL_RUN = range(100, 140)
BAND_DROP = range(200, 210)
G18_GAP = range(400, 470)


def radiance(slot, satellite):
    "A smooth, slowly evolving 6-band radiance field; g18 on its own calibration."
    yy, xx = np.mgrid[:RESOLUTION, :RESOLUTION] / RESOLUTION
    t = (slot - FIRST) / 40.0
    bands = []
    for b in range(6):
        field = 50.0 * (b + 1) * (1.2 + np.sin(6 * xx + t + b) * np.cos(5 * yy - 0.5 * t))
        bands.append(field + 5.0)
    r16 = np.stack(bands)
    if satellite == 16:
        return r16
    return (r16 - OFFSET[:, None, None]) / GAIN[:, None, None]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    directory = tmp_path_factory.mktemp("corpus")
    for day in DAYS:
        for satellite in (16, 18):
            with dataset.ShardWriter(directory / dataset.shard_name(day, satellite), day, satellite,
                                     RESOLUTION) as writer:
                for slot in timebase.slots_of_day(day):
                    rel = slot - FIRST
                    coded = dataset.encode(radiance(slot, satellite))
                    for b in range(6):
                        if satellite == 16 and rel in SENTINEL_RUN:
                            writer.mark(slot, b, dataset.SENTINEL)
                        elif satellite == 16 and rel in BAND_DROP and b == 0:
                            writer.mark(slot, b, dataset.MISSING)
                        elif satellite == 18 and rel in G18_GAP:
                            writer.mark(slot, b, dataset.MISSING)
                        else:
                            writer.add(slot, b, coded[b])
    manifest = segments.write_manifest(directory, span_min=16)
    trace = availability.profile(directory)
    shards = segments.open_shards(directory)
    yield {"directory": directory, "manifest": manifest, "availability": trace, "shards": shards}
    for shard in shards.values():
        shard.close()


def sampler(corpus, **kwargs):
    kwargs.setdefault("satellites", (16, 18))
    kwargs.setdefault("availability", corpus["availability"])
    kwargs.setdefault("offsets", samples.OFFSETS)
    kwargs.setdefault("calibration", corpus["manifest"]["calibration"])
    return samples.Sampler(corpus["shards"], **kwargs)


def clean_window(s, satellites=2):
    return np.ones((2 * s.span + 1, satellites, 6), bool)


def lost_band(*bands):
    lost = np.zeros(6, bool)
    lost[list(bands)] = True
    return lost


def test_ladder():
    assert samples.LADDER == (16, 64, 256) and samples.OFFSETS == (1, 2, 4, 8, 16)
    assert samples.ladder_for(64) == (1, 2, 4, 8, 16, 32, 64)
    assert samples.ladder_for(300)[-2:] == (256, 300)
    assert samples.timebase.WAVELENGTHS == (94, 131, 171, 195, 284, 304)
    with pytest.raises(ValueError, match="at least 1"):
        samples.ladder_for(0)


def test_targets_keep_the_span_margin_inside_segments(corpus):
    chosen = [tuple(s) for split in corpus["manifest"]["segments"].values() for s in split]
    for offsets in (samples.OFFSETS, samples.ladder_for(64)):
        s = sampler(corpus, segments=chosen, offsets=offsets)
        span = max(offsets)
        targets = s.targets()
        assert targets == sorted(targets, key=lambda item: (item[1], item[0]))
        assert len(targets) == segments.targets_in(chosen, span) > 0
        for satellite, when in targets:
            assert any(sat == satellite and start + span <= when <= end - 1 - span
                       for sat, start, end in chosen)
        assert {sat for sat, _ in targets} == {16, 18}
    # A satellite's targets never come from the other satellite's segments.
    only16 = [seg for seg in chosen if seg[0] == 16]
    assert {sat for sat, _ in sampler(corpus, segments=only16).targets()} == {16}
    # Without segments: every clean slot of every satellite.
    everything = sampler(corpus).targets()
    clean = sum(int(sh.present.all(axis=1).sum()) for sh in corpus["shards"].values())
    assert len(everything) == clean
    assert (16, FIRST + SENTINEL_RUN[0]) not in everything and (16, FIRST + BAND_DROP[0]) not in everything


def test_sentinel_or_absent_target_gives_none(corpus):
    s = sampler(corpus)
    rng = np.random.default_rng(0)
    assert s.build(16, FIRST + SENTINEL_RUN[5], rng) is None          # stored as SENTINEL: not clean
    assert s.build(16, FIRST + BAND_DROP[3], rng) is None             # a band missing: not a clean target
    assert s.build(18, FIRST + G18_GAP[10], rng) is None              # whole frame gone
    assert s.build(16, FIRST - 50, rng) is None                       # not resident


def test_damage_is_fresh_per_call_and_pinned_per_seed(corpus):
    s = sampler(corpus, seed=3)
    when = FIRST + 300
    drawn = [s.build(16, when, s.rng) for _ in range(12)]
    assert all(d is not None and d.lost.any() for d in drawn)
    signatures = {(d.lost.tobytes(), d.present.tobytes(), tuple(d.frames)) for d in drawn}
    assert len(signatures) > 1, "twelve draws of the same target saw the same damage"
    first = s.build(16, when, np.random.default_rng(42))
    again = sampler(corpus, seed=99).build(16, when, np.random.default_rng(42))
    for key in ("stack", "present", "lost", "dts", "gains", "offsets", "target"):
        assert np.array_equal(first[key], again[key]), key
    assert first.frames == again.frames


def test_lost_bands_are_answers_and_the_rest_are_inputs(corpus):
    s = sampler(corpus)
    rng = np.random.default_rng(5)
    for _ in range(20):
        sample = s.build(16, FIRST + 300, rng)
        lost = sample.lost
        assert 1 <= lost.sum() <= 6
        assert sample.kinds[0] == "target" and sample.frames[0] == (16, FIRST + 300)
        assert np.array_equal(sample.present[0], ~lost)
        assert np.all(sample.stack[0][lost] == 0)
        assert np.array_equal(sample.stack[0][~lost], sample.target[~lost])
        truth = dataset.encode(radiance(FIRST + 300, 16))
        assert np.allclose(sample.target, truth, atol=2e-3)        # float16 storage
        # Every absent band of every frame is zero in the stack: nothing leaks.
        assert np.all(sample.stack[~sample.present] == 0)


def test_anchors_follow_the_ladder_from_both_satellites(corpus):
    s = sampler(corpus)
    when = FIRST + 300
    sample = s.build(16, when, None, lost=lost_band(2), window=clean_window(s))
    deltas = sorted(slot - when for sat, slot in sample.frames[1:] if sat == 16)
    assert deltas == [-16, -8, -4, -2, -1, 1, 2, 4, 8, 16]
    assert [(sat, slot) for sat, slot in sample.frames if sat == 18] == [(18, when)]   # simultaneous view
    assert len(sample.frames) == 2 * len(samples.OFFSETS) + 2
    assert sample.present[1:].all()
    for (sat, slot), dt, same in zip(sample.frames, sample.dts, sample.same_satellite):
        assert same == (sat == 16)
        assert dt == pytest.approx((when - slot) * timebase.SLOT_SECONDS)  # target - frame: + before
    # The target's satellite out for the whole window: every rung from the other satellite.
    window = clean_window(s)
    window[:, 0] = False
    sample = s.build(16, when, None, lost=lost_band(0, 1), window=window)
    assert {sat for sat, _ in sample.frames[1:]} == {18}
    assert sorted(slot - when for _, slot in sample.frames[1:]) == [-16, -8, -4, -2, -1, 0, 1, 2, 4, 8, 16]


def test_the_nearest_usable_frame_per_band(corpus):
    s = sampler(corpus)
    when = FIRST + 300
    window = clean_window(s)
    window[s.span - 1, 0, 3] = False                     # g16 at -1 lost 195
    window[s.span, 1, 3] = False                         # and so did the simultaneous g18 frame
    sample = s.build(16, when, None, lost=lost_band(0), window=window)
    by_frame = {frame: present.tolist() for frame, present in zip(sample.frames, sample.present)}
    assert by_frame[(16, when - 1)] == [True, True, True, False, True, True]
    # 195 at rung -1 (and for the simultaneous view) comes from g18 at -1, distance 0 from the rung.
    assert by_frame[(18, when - 1)] == [False, False, False, True, False, False]
    assert by_frame[(18, when)] == [True, True, True, False, True, True]
    # Just after g16's 94 A drop, the other satellite steps in at every rung the drop
    # covers, and the rung beyond the drop is g16's own again.
    target = FIRST + BAND_DROP[-1] + 1
    sample = s.build(16, target, None, lost=lost_band(1), window=clean_window(s))
    holders = {frame for frame, present in zip(sample.frames, sample.present)
               if present[0] and frame[1] < target}
    assert holders == {(18, target - 1), (18, target - 2), (18, target - 4), (18, target - 8), (16, target - 16)}
    before = {frame for frame in sample.frames if frame[0] == 16 and frame[1] < target}
    assert before == {(16, target - o) for o in samples.OFFSETS}


def test_cross_calibration_onto_the_target_satellite(corpus, tmp_path):
    s = sampler(corpus)
    when = FIRST + 300
    sample = s.build(18, when, None, lost=lost_band(4), window=clean_window(s))
    gains, offsets = segments.transfer(corpus["manifest"]["calibration"], 16, 18)
    for (sat, _), g, o in zip(sample.frames, sample.gains, sample.offsets):
        if sat == 18:
            assert np.all(g == 1) and np.all(o == 0)
        else:
            assert np.allclose(g, gains) and np.allclose(o, offsets)
    assert np.allclose(gains, 1 / GAIN, rtol=0.01)       # the fit recovers the fixture's calibration
    # Shards with no calibration given: the sampler refuses to guess (and never looks for a manifest).
    elsewhere = tmp_path / "bare"
    elsewhere.mkdir()
    for satellite in (16, 18):
        name = dataset.shard_name(DAYS[0], satellite)
        (elsewhere / name).write_bytes((corpus["directory"] / name).read_bytes())
    bare = segments.open_shards(elsewhere)
    try:
        orphan = samples.Sampler(bare, satellites=(16, 18), availability=corpus["availability"])
        with pytest.raises(DataError, match="no calibration"):
            orphan.build(16, FIRST + 300, None, lost=lost_band(0), window=clean_window(orphan))
        given = samples.Sampler(bare, satellites=(16, 18), availability=corpus["availability"],
                                calibration=corpus["manifest"]["calibration"])
        assert given.build(16, FIRST + 300, None, lost=lost_band(0), window=clean_window(given)) is not None
    finally:
        for shard in bare.values():
            shard.close()


def test_edges_and_outages(corpus):
    only_day1 = {k: v for k, v in corpus["shards"].items() if k[0] == DAYS[1]}
    s = samples.Sampler(only_day1, satellites=(16,), availability=corpus["availability"],
                        calibration=corpus["manifest"]["calibration"])
    first = FIRST + timebase.SLOTS_PER_DAY                  # the first resident slot
    sample = s.build(16, first, None, lost=lost_band(0), window=np.ones((33, 1, 6), bool))
    assert all(slot > first for _, slot in sample.frames[1:])       # nothing before the edge
    window = np.zeros((33, 1, 6), bool)
    window[s.span + 1, 0, 2] = True                      # one band of one frame survives
    sample = s.build(16, first, None, lost=lost_band(0), window=window)
    assert sample.frames == [(16, first), (16, first + 1)]
    assert sample.present[1].tolist() == [False, False, True, False, False, False]
    assert s.build(16, first, None, lost=lost_band(0), window=np.zeros((33, 1, 6), bool)) is None
    # Inside the g18 gap's reach the depth shrinks but the g16 view fills in.
    both = sampler(corpus)
    when = FIRST + G18_GAP[0] - 3
    sample = both.build(18, when, None, lost=lost_band(5), window=clean_window(both))
    after = [(sat, slot) for sat, slot in sample.frames[1:] if slot > when]
    assert {sat for sat, slot in after if slot > when + 2} == {16}
    with pytest.raises(ValueError, match="window"):
        both.build(16, FIRST + 300, None, lost=lost_band(0), window=np.ones((5, 2, 6), bool))
    with pytest.raises(ValueError, match="at least one"):
        both.build(16, FIRST + 300, None, lost=np.zeros(6, bool), window=clean_window(both))


def test_damage_needs_the_availability_model(corpus):
    s = sampler(corpus, availability=None)
    assert s.targets()
    with pytest.raises(DataError, match="availability model"):
        s.build(16, FIRST + 300, np.random.default_rng(0))


def test_to_tensors_keys_shapes_dtypes(corpus):
    s = sampler(corpus)
    sample = s.build(16, FIRST + 300, np.random.default_rng(1))
    tensors = conditioning.to_tensors(sample)
    depth = len(sample.frames)
    expected = {"stack": (depth, 6, RESOLUTION, RESOLUTION), "condition": (depth, len(conditioning.COND_LAYOUT)),
                "dts": (depth,), "gains": (depth, 6), "offsets": (depth, 6), "present": (depth, 6),
                "target": (6, RESOLUTION, RESOLUTION), "lost": (6,), "b0": (), "radius": ()}
    assert set(tensors) == set(expected)
    for key, shape in expected.items():
        assert tuple(tensors[key].shape) == shape, key
        assert tensors[key].dtype == torch.float32, key
    assert torch.all(tensors["condition"][:, conditioning.AVAILABLE] == 1)
    assert tensors["condition"][0, conditioning.COND_LAYOUT.index("kind_target")] == 1
    assert torch.all(tensors["condition"][1:, conditioning.COND_LAYOUT.index("kind_anchor")] == 1)
    assert float(tensors["radius"]) == pytest.approx(dataset.solar_radius_pixels(
        timebase.time_of(FIRST + 300), RESOLUTION), rel=0.01)


def test_collate_padding_changes_no_prediction_through_alignment(corpus):
    s = sampler(corpus)
    when = FIRST + 300
    window = clean_window(s)
    window[: s.span - 1] = False                       # a shallow sample: only near frames survive
    window[s.span + 3:] = False
    shallow = conditioning.to_tensors(s.build(16, when, None, lost=lost_band(1, 3), window=window))
    deep = conditioning.to_tensors(s.build(18, when + 40, None, lost=lost_band(0), window=clean_window(s)))
    assert shallow["stack"].shape[0] < deep["stack"].shape[0]
    torch.manual_seed(0)
    net = model.build(base=8, depth=2, relative=True, corr_flow=True, attention=True)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(torch.randn_like(p) * 0.05)
    net.eval()

    def predict(batch):
        valid = batch["condition"][..., conditioning.AVAILABLE]
        aligned = align.align_stack(batch["stack"], batch["dts"], valid, batch["gains"], batch["offsets"],
                                    batch["b0"], batch["radius"])
        with torch.no_grad():
            return aligned, net(aligned, batch["condition"], batch["present"])

    alone_aligned, alone = predict(conditioning.collate([shallow]))
    padded = conditioning.collate([shallow, deep])
    assert padded["stack"].shape[1] == deep["stack"].shape[0]
    together_aligned, together = predict(padded)
    depth = shallow["stack"].shape[0]
    assert torch.equal(together_aligned[0, depth:], torch.zeros_like(together_aligned[0, depth:]))
    torch.testing.assert_close(together_aligned[0, :depth], alone_aligned[0], atol=1e-6, rtol=0)
    torch.testing.assert_close(together[0], alone[0], atol=1e-5, rtol=1e-5)
    # And the untrained model on real samples is the prior blend of the aligned candidates.
    fresh = model.build(base=8, depth=2)
    with torch.no_grad():
        torch.testing.assert_close(fresh(together_aligned, padded["condition"], padded["present"]),
                                   model.prior_blend(together_aligned, padded["condition"], padded["present"]),
                                   atol=1e-6, rtol=0)


def test_window_is_the_stored_presence_at_any_span(corpus):
    s = sampler(corpus)
    when = FIRST + BAND_DROP[0] - 2
    default = s.window(16, when)
    assert default.shape == (2 * s.span + 1, 6)
    wide = s.window(16, when, span=40)
    assert wide.shape == (81, 6) and np.array_equal(wide[40 - s.span:40 + s.span + 1], default)
    assert not wide[40 + 2, 0] and wide[40 + 2, 1:].all()              # the 94 Å drop, two slots on
    assert not s.window(16, FIRST - 500, span=3).any()                 # nothing stored there


@pytest.mark.parametrize("gap", [1, 5, 40, 150])
def test_build_gap_removes_the_lost_bands_nearer_than_the_gap(corpus, gap):
    s = sampler(corpus, offsets=samples.ladder_for(16))
    when = FIRST + 560
    made = 0
    for k in range(12):
        sample = s.build_gap(16, when, np.random.default_rng(k), gap)
        if sample is None:
            continue
        made += 1
        measured = samples.measured_gaps(sample)
        assert measured and all(g is not None and g >= gap for g in measured.values())
        slots = np.array([abs(slot - when) for _, slot in sample.frames])
        for b in np.flatnonzero(sample.lost):
            assert not sample.present[1:, b][slots[1:] < gap].any()
        # The anchors reach the gap: the ladder was extended to it.
        assert slots.max() >= gap
        exact = s.build_gap(16, when, np.random.default_rng(k), gap, exact=True)
        assert exact is None or set(samples.measured_gaps(exact).values()) == {gap}
    assert made >= 6, f"only {made} of 12 gap-{gap} samples could be built"


def test_build_gap_keeps_inside_the_sampler_segments(corpus):
    chosen = [tuple(seg) for seg in corpus["manifest"]["segments"]["train"]]
    s = sampler(corpus, segments=chosen)
    inside = lambda sat, slot: any(a == sat and lo <= slot < hi for a, lo, hi in chosen)
    targets = s.targets()
    for k, (satellite, when) in enumerate(targets[:: max(1, len(targets) // 8)]):
        sample = s.build_gap(satellite, when, np.random.default_rng(k), 24)
        if sample is not None:
            assert all(inside(sat, slot) for sat, slot in sample.frames)


def test_draw_gap_covers_every_factor_of_two_alike():
    rng = np.random.default_rng(0)
    drawn = [samples.draw_gap(rng, 256) for _ in range(4000)]
    natural = sum(g is None for g in drawn) / len(drawn)
    assert abs(natural - samples.NATURAL_SHARE) < 0.03
    gaps = np.array([g for g in drawn if g is not None])
    assert gaps.min() == 1 and gaps.max() == 256
    octaves = np.histogram(np.log2(gaps), bins=[0, 2, 4, 6, 8.01])[0] / len(gaps)
    assert np.all(np.abs(octaves - 0.25) < 0.04), octaves
    assert all(samples.draw_gap(rng, 0) is None for _ in range(20))
