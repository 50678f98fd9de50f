"""The rotating pool (`suvi_fill.corpus.pool`, `suvi-fill pool-produce`) with the trainer:
atomic publication, oldest-first retirement, fixed validation slices, a slice retired
mid-visit, producer and trainer running together, and the trainer's give-up message."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import ROOT, run, tool
from test_suvi_train import ENV, TINY, corpus, history  # noqa: F401  (the session corpus)


def produce(corpus, out, *extra):
    return run([tool("suvi-fill"), "pool-produce", "--shards", str(corpus), "--out", str(out), *extra], env=ENV)


def test_produce_publishes_and_retires_oldest_first(corpus, tmp_path):
    from suvi_fill.corpus import pool
    out = tmp_path / "pool"
    result = produce(corpus, out, "--slices", "4", "--capacity", "2", "--days", "1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("published ") == 4 and result.stdout.count("retired ") == 2
    ready = pool.ready_slices(out)
    assert [Path(p).name for p, _ in ready] == ["slice-000003", "slice-000004"]
    assert sorted(os.listdir(out)) == ["slice-000003", "slice-000004"], "temporaries or retirees left"
    manifest = json.loads((corpus / "manifest.json").read_text())
    for path, meta in ready:
        assert meta["split"] == "train" and meta["manifest"] == manifest["digest"]
        opened = pool.open_slice(path)
        shards, segments = opened.shards, opened.segments
        assert shards and all(key[0] in meta["days"] for key in shards)
        train = {tuple(s) for s in manifest["segments"]["train"]}
        assert all(any(t[0] == s[0] and t[1] <= s[1] and s[2] <= t[2] for t in train) for s in segments)
        for shard in shards.values():
            shard.close()


def test_fixed_slices_are_written_once_and_validate(corpus, tmp_path):
    from suvi_fill.corpus import pool
    fixed = tmp_path / "val"
    first = produce(corpus, fixed, "--fixed")
    assert first.returncode == 0, first.stderr
    names = sorted(os.listdir(fixed))
    assert names and all(meta["split"] == "val" for _, meta in pool.ready_slices(fixed))
    again = produce(corpus, fixed, "--fixed")
    assert again.returncode == 0 and "already written" in again.stdout and sorted(os.listdir(fixed)) == names
    out = tmp_path / "run"
    result = run([sys.executable, "-m", "suvi_fill.train.loop", "--shards", str(corpus), "--manifest",
                  str(corpus / "manifest.json"), "--out", str(out), *TINY, "--val-slices", str(fixed),
                  "--max-steps", "2", "--eval-every", "2"], env=ENV, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"from {fixed}" in result.stdout and history(out)[-1]["step"] == 2


def test_producer_refuses_a_manifest_without_segments(corpus, tmp_path):
    manifest = json.loads((corpus / "manifest.json").read_text())
    del manifest["segments"]
    old = tmp_path / "manifest.json"
    old.write_text(json.dumps(manifest))
    result = produce(corpus, tmp_path / "pool", "--manifest", str(old), "--slices", "1")
    assert result.returncode == 2 and "has no 'segments'" in result.stderr
    assert not (tmp_path / "pool").exists()


def test_a_slice_retired_mid_visit_stays_readable(corpus, tmp_path):
    import numpy as np
    from suvi_fill.corpus import pool
    out = tmp_path / "pool"
    assert produce(corpus, out, "--slices", "1", "--days", "1").returncode == 0
    (path, _), = pool.ready_slices(out)
    opened = pool.open_slice(path)
    shards = opened.shards
    before = {key: shard.frame(0).copy() for key, shard in shards.items()}
    assert pool.retire(out, 0) == [path] and not Path(path).exists()
    with pytest.raises(FileNotFoundError):
        pool.open_slice(path)
    for key, shard in shards.items():
        assert np.array_equal(shard.frame(0), before[key])
        shard.close()


def test_trainer_gives_up_without_a_slice(corpus, tmp_path):
    empty = tmp_path / "pool"
    empty.mkdir()
    command = [sys.executable, "-m", "suvi_fill.train.loop", "--shards", str(corpus), "--manifest",
               str(corpus / "manifest.json"), "--out", str(tmp_path / "run"), *TINY,
               "--pool", str(empty), "--steps-per-epoch", "4", "--max-steps", "4"]
    result = run(command, env={**ENV, "SUVI_FILL_POOL_WAIT": "1"}, cwd=ROOT)
    assert result.returncode == 2, result.stderr
    assert f"no slice in {empty} after 1 s: is the producer running?" in result.stderr
    assert "suvi-fill train: error: no slice in" in result.stderr and "Traceback" not in result.stderr


def test_producer_and_trainer_together(corpus, tmp_path):
    from suvi_fill.corpus import pool
    out = tmp_path / "pool"
    # A capacity of one and no pause: slices are retired while the trainer reads them.
    producer = subprocess.Popen([tool("suvi-fill"), "pool-produce", "--shards", str(corpus), "--out", str(out),
                                 "--capacity", "1", "--days", "1", "--interval", "0.3"],
                                env={**os.environ, **ENV}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
    try:
        run_dir = tmp_path / "run"
        result = run([sys.executable, "-m", "suvi_fill.train.loop", "--shards", str(corpus), "--manifest",
                      str(corpus / "manifest.json"), "--out", str(run_dir), *TINY[:-4], "--workers", "1",
                      "--val-samples", "2", "--pool", str(out), "--steps-per-epoch", "6", "--epochs", "2",
                      "--eval-every", "6"], env={**ENV, "SUVI_FILL_POOL_WAIT": "60"}, cwd=ROOT, timeout=300)
    finally:
        producer.terminate()
        stdout, stderr = producer.communicate(timeout=30)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"train pool {out}" in result.stdout
    assert [r["step"] for r in history(run_dir)] == [0, 6, 12]
    assert stdout.count("retired ") >= 2, stdout + stderr
    assert len(pool.ready_slices(out)) == 1


def test_a_slice_retired_between_opening_and_sampling_keeps_its_calibration(corpus, tmp_path):
    import numpy as np
    from suvi_fill.corpus import pool
    from suvi_fill.corpus import segments
    out = tmp_path / "pool"
    assert produce(corpus, out, "--slices", "1", "--days", "1").returncode == 0
    (path, meta), = pool.ready_slices(out)
    manifest = json.loads((corpus / "manifest.json").read_text())
    assert meta["calibration"] == manifest["calibration"]
    opened = pool.open_slice(path)
    try:
        assert pool.retire(out, 0) == [path] and not Path(path).exists()
        sampler = opened.sampler(satellites=(16, 18))
        assert sampler.calibration == manifest["calibration"]
        gains, offsets = sampler.transfer(18, 16)
        assert np.array_equal(gains, segments.transfer(manifest["calibration"], 18, 16)[0])
        (sat, when), *_ = [t for t in sampler.targets() if t[0] == 16]
        lost = np.eye(6, dtype=bool)[2]
        sample = sampler.build(sat, when, None, lost=lost, window=np.ones((2 * sampler.span + 1, 2, 6), bool))
        assert sample is not None and (18, when) in sample.frames      # a cross-satellite anchor, calibrated
    finally:
        opened.close()
