"""The cross-band filler (`fillers.CrossBand`, `bench.fit_crossband`) on the tiny corpus: its
coefficients are fit on the train split and their ridges chosen on the val split, never the test
split (changing the test split's data leaves them alone, changing the train split's moves the
weights, changing the val split's moves the choice's record); the choice is never worse than the
blend on the val samples; kept beside the manifest and reused, refused in one line when damaged; it
is a row of every bench table, with the partial-loss set and standard errors; and
`suvi-fill fill --filler crossband` takes its coefficients from the corpus."""
import json
import shutil

import numpy as np
import pytest

from helpers import run, tool
from suvi_fill.corpus.reader import Corpus
from test_suvi_fillers import ENV, fill_corpus  # noqa: F401 (fixture)

#: A fit small enough for a test: two gaps, a few samples each, every pattern kept.
FIT = {"gaps": (1, 4), "count": 24}


def slots_of(corpus, split) -> set:
    return {slot for _, start, end in corpus.split(split) for slot in range(start, end)}


def changed_reads(monkeypatch, slots: set):
    "Every stored frame read at one of `slots` comes back halved (its coded values), as if the data were other."
    from suvi_fill.corpus import sampler as samples
    read, target = samples.SlotIndex.read, samples.SlotIndex.target
    touched = set()

    def halved_read(self, slot, bands, out):
        when = read(self, slot, bands, out)
        touched.add(int(slot))
        if int(slot) in slots:
            out[np.asarray(bands, bool)] *= 0.5
        return when

    def halved_target(self, slot):
        found = target(self, slot)
        touched.add(int(slot))
        return found._replace(frame=found.frame * 0.5) if int(slot) in slots else found

    monkeypatch.setattr(samples.SlotIndex, "read", halved_read)
    monkeypatch.setattr(samples.SlotIndex, "target", halved_target)
    return touched


def fit(corpus_dir, **settings):
    from suvi_fill.corpus import availability
    from suvi_fill.evaluate import bench
    corpus = Corpus.open(corpus_dir)
    trace = availability.Availability.load(corpus_dir / "availability.npz")
    return bench.fit_crossband(corpus_dir, corpus, trace, **FIT, **settings)


def test_coefficients_are_fit_on_the_train_split_and_chosen_on_val(fill_corpus, monkeypatch):
    corpus = Corpus.open(fill_corpus)
    train, val, test = (slots_of(corpus, split) for split in ("train", "val", "test"))
    fixed = fit(fill_corpus, validation=None)               # weights alone: the train split's
    assert fixed["fits"] and fixed["source"]["split"] == "train" and fixed["source"]["manifest"] == corpus.digest
    assert fixed["source"]["validation"] is None and fixed["validation"] == {}
    base = fit(fill_corpus)
    assert base["source"]["validation"] == "val" and base["validation"]
    with monkeypatch.context() as patch:
        touched = changed_reads(patch, test - train - val)
        assert fit(fill_corpus) == base, "the test split's data moved the coefficients or their ridges"
    assert touched and touched <= train | val, "the fit read frames outside the train and val splits"
    with monkeypatch.context() as patch:
        changed_reads(patch, train)
        moved = fit(fill_corpus, validation=None)["fits"]
    assert moved.keys() == fixed["fits"].keys() and moved != fixed["fits"]
    with monkeypatch.context() as patch:
        changed_reads(patch, val - train)
        assert fit(fill_corpus)["validation"] != base["validation"], "the val split's data did not score the ridges"


def test_chosen_ridges_are_never_worse_than_the_blend_on_val(fill_corpus):
    from suvi_fill.evaluate.fillers import CROSSBAND_RIDGES
    chosen = fit(fill_corpus)
    assert chosen["ridges"] and set(chosen["ridges"].values()) <= set(CROSSBAND_RIDGES)
    for band, ridge in chosen["ridges"].items():
        record = chosen["validation"][band]
        assert record["ridge"] == ridge and record["gain_db"] >= 0
        fitted = [key for key in chosen["fits"] if key.startswith(f"{band}:")]
        assert bool(fitted) == (ridge is not None), f"{band}: fits kept against the choice"
        assert ridge is not None or record["gain_db"] == 0


def test_validation_error_is_the_squared_display_error(fill_corpus):
    "`CrossBandFit.error` from the normal equations equals the squared error computed on the pixels."
    from suvi_fill.corpus import availability
    from suvi_fill.evaluate import bench
    from suvi_fill.evaluate.fillers import CrossBandFit, crossband_terms, fillable, prepare, _pattern_key, band_gap
    from suvi_fill.physics import coding, timebase
    trace = availability.Availability.load(fill_corpus / "availability.npz")
    with bench.BenchSet(fill_corpus, Corpus.open(fill_corpus), trace, "val") as chosen:
        prep = prepare(next(iter(chosen.partial_samples(1, 1))))
    one = CrossBandFit()
    one.add(prep)
    kept, shown, residuals = crossband_terms(prep)
    rng = np.random.default_rng(0)
    for b in np.flatnonzero(fillable(prep)):
        key = f"{_pattern_key(b, kept)}@{band_gap(prep, b)}"
        weights = rng.normal(0, 0.5, len(kept) + 1)
        truth = coding.to_display(prep["target"][b].numpy(), timebase.WAVELENGTHS[b], coded=True)
        direct = np.sum((truth - shown[b] - weights[0] - np.tensordot(weights[1:], residuals, axes=1)) ** 2)
        assert one.error(key, weights) == pytest.approx(float(direct), rel=1e-6, abs=1e-9)
    assert one.error("171:94@999", np.zeros(2)) is None


def test_crossband_corrects_kept_patterns_and_falls_back_to_the_blend(fill_corpus):
    import torch
    torch.set_num_threads(1)
    from suvi_fill.corpus import availability
    from suvi_fill.evaluate import bench
    from suvi_fill.physics import coding
    from suvi_fill.evaluate.fillers import CrossBand, blend_filler, prepare
    coefficients = fit(fill_corpus, validation=None)       # every pattern corrected, none declined on val
    crossband, blend = CrossBand(coefficients), blend_filler()
    unfit = CrossBand({**coefficients, "fits": {}})
    trace = availability.Availability.load(fill_corpus / "availability.npz")
    corrected = 0
    with bench.BenchSet(fill_corpus, Corpus.open(fill_corpus), trace) as chosen:
        made = list(chosen.partial_samples(1, 6)) + list(chosen.samples(4, 4))
    for sample in made:
        prep = prepare(sample)
        ours, theirs = crossband(prep), blend(prep)
        assert np.allclose(unfit(prep), theirs, atol=1e-5), "a pattern never fit is not the plain blend"
        assert np.array_equal(ours[~sample.lost], sample.target[~sample.lost]) and np.isfinite(ours).all()
        if sample.lost.all():
            assert np.allclose(ours, theirs, atol=1e-5), "a frame that kept nothing is not the plain blend"
        elif not np.allclose(ours, theirs, atol=1e-5):
            corrected += 1
            psnr = coding.band_psnr(ours, sample.target)[sample.lost]
            assert (15 < psnr).all() and (psnr <= 120).all()
    assert corrected >= 1


def test_cached_fit_reused_refit_when_stale_and_damage_refused(fill_corpus, tmp_path):
    from suvi_fill.evaluate import bench
    from suvi_fill.plumbing.errors import InvalidData
    from suvi_fill.evaluate.fillers import CROSSBAND_FILE, load_crossband, make_filler
    corpus = tmp_path / "shards"
    shutil.copytree(fill_corpus, corpus)
    (corpus / CROSSBAND_FILE).unlink(missing_ok=True)
    first = bench.crossband_coefficients(corpus, **FIT)
    path = corpus / CROSSBAND_FILE
    assert load_crossband(path) == first and not [p for p in corpus.iterdir() if ".tmp." in p.name]
    stamp = path.stat().st_mtime_ns
    assert bench.crossband_coefficients(corpus, **FIT) == first and path.stat().st_mtime_ns == stamp
    # Other settings (another seed): fit again and kept.
    other = bench.crossband_coefficients(corpus, seed=7, **FIT)
    assert other["source"]["seed"] == 7 and load_crossband(path)["source"]["seed"] == 7
    # A damaged file is refused naming it and the field, and a bench refits over it.
    broken = json.loads(path.read_text())
    first_key = next(iter(broken["fits"]))
    broken["fits"][first_key]["weights"] = ["x"]
    path.write_text(json.dumps(broken))
    with pytest.raises(InvalidData, match=rf"{CROSSBAND_FILE}: field 'fits.{first_key}.weights'"):
        make_filler("crossband", checkpoint=path)
    assert bench.crossband_coefficients(corpus, **FIT)["fits"] == first["fits"]


def test_bench_rows_partial_set_and_standard_errors(fill_corpus, tmp_path):
    corpus = tmp_path / "shards"
    shutil.copytree(fill_corpus, corpus)
    out = tmp_path / "bench"
    result = run([tool("suvi-fill"), "bench", "--shards", str(corpus), "--out", str(out), "--device", "cpu",
                  "--quiet", "--gaps", "1,4", "--samples", "4", "--partial-samples", "32",
                  "--fillers", "linear,blend,crossband"], env=ENV, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((out / "bench.json").read_text())
    assert report["fillers"] == ["linear", "blend", "crossband"] and (corpus / "crossband.json").exists()
    partial = report["by_loss"]["partial"]
    for gap in ("1", "4"):
        assert partial["samples"][gap] == 32 and len(partial["targets"][gap]) == 32
        for name in report["fillers"]:
            assert partial["table"][name][gap] is not None and partial["stderr"][name][gap] > 0
            assert report["stderr"][name][gap] > 0
    md = (out / "bench.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| crossband |"))
    assert row.count("±") == 2 and "| samples | 32 | 32 |" in md
    assert "| crossband |" in result.stdout
    # The partial set is pinned: the same samples and table again.
    again = tmp_path / "again"
    rerun = run([tool("suvi-fill"), "bench", "--shards", str(corpus), "--out", str(again), "--device", "cpu",
                 "--quiet", "--gaps", "1,4", "--samples", "4", "--partial-samples", "32",
                 "--fillers", "linear,blend,crossband"], env=ENV, timeout=600)
    assert rerun.returncode == 0
    second = json.loads((again / "bench.json").read_text())
    assert second["by_loss"] == report["by_loss"] and second["table"] == report["table"]


def test_partial_samples_keep_some_bands(fill_corpus):
    from suvi_fill.corpus import availability
    from suvi_fill.evaluate import bench
    from suvi_fill.corpus import sampler as samples
    corpus = Corpus.open(fill_corpus)
    trace = availability.Availability.load(fill_corpus / "availability.npz")
    with bench.BenchSet(fill_corpus, corpus, trace) as chosen:
        made = list(chosen.partial_samples(4, 12))
    assert len(made) == 12
    test = slots_of(corpus, "test")
    for sample in made:
        assert sample.lost.any() and not sample.lost.all()
        assert set(samples.measured_gaps(sample).values()) == {4}
        assert all(slot in test for _, slot in sample.frames)


def test_fill_with_crossband(fill_corpus, tmp_path):
    import hashlib
    from astropy.io import fits as astropy_fits
    from suvi_fill.sim.synth import synthesize
    from suvi_fill.evaluate.fillers import save_crossband
    archive = tmp_path / "archive"
    synthesize(archive, hours=2, resolution=32, progress=False)
    out = tmp_path / "out"
    refused = run([tool("suvi-fill"), "fill", "--source", str(archive), "--out", str(out), "--filler", "crossband",
                   "--quiet"], env=ENV)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1
    assert "--filler crossband needs its coefficients" in refused.stderr and not out.exists()
    coefficients = tmp_path / "crossband.json"
    save_crossband(coefficients, fit(fill_corpus))
    result = run([tool("suvi-fill"), "fill", "--source", str(archive), "--out", str(out), "--filler", "crossband",
                  "--checkpoint", str(coefficients), "--quiet"], env=ENV, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    report = json.loads((out / "fill_report.json").read_text())
    assert report["filler"] == "crossband" and report["files"]
    digest = hashlib.sha256(coefficients.read_bytes()).hexdigest()
    assert report["checkpoint_sha256"] == digest
    header = astropy_fits.getheader(out / report["files"][0])
    assert header["FILLER"] == "crossband" and header["FILLCKPT"] == digest[:16]
