"""The fillers (`suvi_fill.evaluate.fillers`) on samples of a tiny synthetic corpus: the shared
contract (shape, own bands kept, NaN where nothing holds a lost band), both sample forms,
the blend filler as the prior blend, a trained checkpoint through the learned filler, and
the registry's errors.  The corpus and checkpoint fixtures are shared with the bench and
render tests."""
import dataclasses
import json
import os
import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

from helpers import ROOT, built_once, run, tool

#: 36 hours at 32 px away from the eclipse seasons: a test segment of ~65 slots, built in
#: well under a minute.
HOURS, START, RESOLUTION, SEED = "36", "2024-06-20", 32, "3"
ENV = {"OMP_NUM_THREADS": "1"}
_BUILT = {}


def build_fill_corpus(base: Path) -> None:
    "Shards, manifest and availability model of the tiny archive in `base / 'shards'`."
    raw, shards = base / "raw", base / "shards"
    for command in (
            [tool("suvi-fill"), "synth", "--out", str(raw), "--hours", HOURS, "--start", START,
             "--resolution", str(RESOLUTION), "--seed", SEED, "--quiet"],
            [tool("suvi-fill"), "build", "--source", str(raw), "--out", str(shards),
             "--resolution", str(RESOLUTION), "--no-progress"],
            [tool("suvi-fill"), "profile", "--shards", str(shards)]):
        result = run(command, env=ENV)
        assert result.returncode == 0, f"{command[1]} failed:\n{result.stdout}\n{result.stderr}"
    shutil.rmtree(raw)
    assert json.loads((shards / "manifest.json").read_text())["segments"]["test"]


def train_tiny(shards: Path, out: Path) -> None:
    """best.pt of a two-step training run of a tiny model on `shards`, in `out`, at the trainer's own peak
    learning rate from the first step: on band-limited frames the untrained net (the blend) scores near
    59 dB on two validation samples, and the residual head works in units of the residual's own size
    (`model.RESIDUAL_SCALE`), so a full-rate step does not cost the 2 dB it did when the head's output was
    in code units (which the ABORT rule refused)."""
    result = run([sys.executable, "-m", "suvi_fill.train.loop", "--shards", str(shards),
                  "--manifest", str(shards / "manifest.json"), "--out", str(out),
                  "--base", "4", "--depth", "1", "--batch", "2", "--workers", "0", "--val-samples", "2",
                  "--max-steps", "2", "--eval-every", "1", "--warmup", "1", "--lr", "1e-4",
                  "--device", "cpu"],
                 env=ENV, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def tiny_corpus(tmp_path_factory) -> Path:
    "The shards of the tiny archive: built once per run (and process), whichever fixture asks first."
    if "shards" not in _BUILT:
        _BUILT["shards"] = built_once(tmp_path_factory, "suvi_fill_corpus", build_fill_corpus) / "shards"
    return _BUILT["shards"]


@pytest.fixture(scope="session")
def fill_corpus(tmp_path_factory):
    "Shards, manifest and availability model of a tiny synthetic archive (also the trainer tests' corpus)."
    return tiny_corpus(tmp_path_factory)


@pytest.fixture(scope="session")
def tiny_checkpoint(fill_corpus, tmp_path_factory):
    "best.pt of a two-step training run of a tiny model on the corpus (one per run, shared by xdist workers)."
    if "checkpoint" not in _BUILT:
        out = built_once(tmp_path_factory, "suvi_fill_run", lambda folder: train_tiny(fill_corpus, folder / "run"))
        _BUILT["checkpoint"] = out / "run" / "best.pt"
    return _BUILT["checkpoint"]


@pytest.fixture(scope="session")
def bench_samples(fill_corpus):
    "A few bench samples of the test split at gap 1 and 4 (`Sample`s)."
    import torch
    torch.set_num_threads(1)
    from suvi_fill.corpus import availability
    from suvi_fill.evaluate import bench
    from suvi_fill.corpus import segments
    manifest = segments.load_manifest(fill_corpus / "manifest.json")
    trace = availability.Availability.load(fill_corpus / "availability.npz")
    with bench.BenchSet(fill_corpus, manifest, trace) as chosen:
        out = list(chosen.samples(1, 3)) + list(chosen.samples(4, 3))
    assert len(out) == 6
    return out


CLASSICAL = ("nearest", "derotated", "linear", "optical_flow", "blend")


def test_contract_on_corpus_samples(bench_samples):
    from suvi_fill.physics import coding as metrics
    from suvi_fill.evaluate.fillers import make_filler
    for sample in bench_samples:
        own = ~sample.lost
        for name in CLASSICAL:
            out = make_filler(name)(sample)
            assert out.shape == sample.target.shape and out.dtype == np.float32
            assert np.isfinite(out).all(), name
            assert np.array_equal(out[own], sample.target[own]), f"{name} changed an input band"
            psnr = metrics.display_psnr(out, sample.target, sample.lost)
            assert 15.0 < psnr < 120.0, (name, psnr)


def test_both_sample_forms_agree(bench_samples):
    import torch
    from suvi_fill.corpus import conditioning
    from suvi_fill.evaluate.fillers import make_filler, prepare
    sample = bench_samples[-1]
    tensors = conditioning.to_tensors(sample)
    for name in CLASSICAL:
        filler = make_filler(name)
        a, b, c = filler(sample), filler(tensors), filler(prepare(sample))
        assert np.array_equal(a, b) and np.array_equal(a, c), name


def test_nearest_is_the_stored_frame_and_derotated_its_alignment(bench_samples):
    from suvi_fill.evaluate.fillers import make_filler, nearest_frame, prepare
    sample = bench_samples[3]                                  # gap 4
    prep = prepare(sample)
    near, rot = make_filler("nearest")(sample), make_filler("derotated")(sample)
    for b in np.flatnonzero(sample.lost):
        t = nearest_frame(prep, int(b))
        assert abs(int(sample.frames[t][1]) - sample.when) == 4
        assert np.array_equal(near[b], sample.stack[t, b])
        assert np.array_equal(rot[b], prep["aligned"][t, b].numpy())
        assert not np.array_equal(near[b], rot[b])             # 16 minutes of rotation moved something


def test_blend_is_the_prior_blend(bench_samples):
    from suvi_fill.model import net as model
    from suvi_fill.evaluate.fillers import make_filler, prepare
    for sample in bench_samples:
        prep = prepare(sample)
        expected = model.prior_blend(prep["aligned"][None], prep["condition"][None], prep["present"][None])[0]
        out = make_filler("blend")(sample)
        lost = sample.lost
        assert np.allclose(out[lost], expected.numpy()[lost], atol=1e-5)


def test_unfillable_band_is_nan(bench_samples):
    from suvi_fill.evaluate.fillers import fillable, make_filler
    sample = dataclasses.replace(bench_samples[0])       # a shallow copy
    sample.present = sample.present.copy()
    b = int(np.flatnonzero(sample.lost)[0])
    sample.present[:, b] = False
    assert not fillable(sample)[b]
    for name in CLASSICAL:
        out = make_filler(name)(sample)
        assert np.isnan(out[b]).all(), name
        others = [k for k in range(6) if k != b]
        assert np.isfinite(out[others]).all(), name


def test_learned_filler_from_a_checkpoint(bench_samples, tiny_checkpoint):
    import torch
    from suvi_fill.model.checkpoint import load_learned
    from suvi_fill.evaluate.fillers import make_filler, prepare
    filler = make_filler("learned", checkpoint=tiny_checkpoint)
    assert filler.offsets == (1, 2, 4, 8, 16)
    net = load_learned(tiny_checkpoint)
    for sample in bench_samples[:2]:
        prep = prepare(sample)
        with torch.no_grad():
            expected = net(prep["aligned"][None], prep["condition"][None], prep["present"][None],
                           prep["coverage"][None])[0].numpy()
        out = filler(sample)
        assert np.allclose(out[sample.lost], expected[sample.lost], atol=1e-6)


def test_registry_errors(tmp_path):
    from suvi_fill.evaluate.fillers import FILLERS, make_filler
    assert set(FILLERS) == {"nearest", "derotated", "linear", "optical_flow", "blend", "crossband", "learned"}
    with pytest.raises(ValueError, match="unknown filler"):
        make_filler("cubic")
    with pytest.raises(ValueError, match="checkpoint"):
        make_filler("learned")
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="junk.pt"):
        make_filler("learned", checkpoint=junk)
    with pytest.raises(ValueError, match="crossband filler needs its coefficients"):
        make_filler("crossband")
    with pytest.raises(ValueError, match="junk.pt: not JSON"):
        make_filler("crossband", checkpoint=junk)


def test_optical_flow_one_sided_with_simultaneous_frames(bench_samples):
    "Both satellites' frames at the same slot on one side: no motion to extrapolate, no crash."
    import torch
    from suvi_fill.evaluate.fillers import OpticalFlow, prepare
    prep = dict(prepare(bench_samples[0]))
    lost = np.flatnonzero(prep["lost"].numpy() > 0.5)
    band = int(lost[0])
    dts = prep["dts"].clone()
    present = prep["present"].clone()
    holding = [t for t in range(1, len(dts)) if present[t, band] > 0.5]
    assert len(holding) >= 2
    dts[holding] = dts[holding[0]].abs() + 240.0        # every holder at the same time, one side
    prep["dts"] = dts
    out = OpticalFlow()(prep)
    assert np.isfinite(out[band]).all()
    # No second time on that side: the answer is one holder's aligned plane, unextrapolated.
    assert any(np.allclose(out[band], prep["aligned"][t, band].numpy(), atol=1e-6) for t in holding)
