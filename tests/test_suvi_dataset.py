"""suvi_fill.corpus.shards: the asinh coding, shard random access, read after delete, fork
safety (plain fork and DataLoader workers), atomic writing, bad shards, inspect."""
import multiprocessing
import os
import pickle
import struct

import numpy as np
import pytest

from suvi_fill.corpus import shards as dataset
from suvi_fill.physics import timebase

DAY = "2024-03-01"
N = 24


def make_shard(path, seed=0, n_slots=40, resolution=N):
    "A shard whose plane (slot i, band b) is a known random image; returns the planes written."
    rng = np.random.default_rng(seed)
    written = {}
    with dataset.ShardWriter(path, DAY, 16, resolution) as writer:
        first = int(writer.slots[0])
        for i in range(n_slots):
            for b in range(6):
                if (i + b) % 7 == 3:
                    writer.mark(first + i, b, dataset.SENTINEL)
                    continue
                plane = dataset.encode(rng.gamma(0.5, 2.0, (resolution, resolution)).astype(np.float32))
                writer.add(first + i, b, plane, b0=-7.0 + 0.01 * i, radius=10.0 + 0.001 * i)
                written[(i, b)] = plane.astype(np.float16).astype(np.float32)
    return written


def test_coding_constants_cover_saturation_and_corona():
    assert dataset.decode(np.float32(1.0)) > 1.3 * dataset.SATURATION
    corona = np.array([0.01, 0.03, 0.1], np.float32)
    coded = dataset.encode(corona)
    step = dataset.decode(coded + np.spacing(coded.astype(np.float16)).astype(np.float32)) - dataset.decode(coded)
    assert (step / corona < 0.002).all()
    r = np.array([-2.0, 0.0, 1e-3, 5.0, 11999.0], np.float32)
    assert np.allclose(dataset.decode(dataset.encode(r)), r, rtol=1e-5, atol=1e-8)
    assert dataset.encode(np.float32(1e7)) == 1.0


def test_random_access_matches_what_was_written(tmp_path):
    path = tmp_path / dataset.shard_name(DAY, 16)
    written = make_shard(path)
    shard = dataset.Shard(path)
    assert (shard.day, shard.satellite, shard.resolution) == (DAY, 16, N)
    assert shard.slots.dtype == np.int64 and len(shard.slots) == timebase.SLOTS_PER_DAY
    assert shard.slots[0] == timebase.first_slot_of_day(DAY) and np.all(np.diff(shard.slots) == 1)
    assert shard.present.shape == (360, 6) and shard.present.dtype == bool
    assert shard.quality.dtype == np.uint8 and shard.b0.dtype == np.float32 and shard.radius.dtype == np.float32
    assert shard.present.sum() == len(written) and (shard.quality[shard.present] == dataset.CLEAN).all()
    assert shard.quality[3, 0] == dataset.SENTINEL and shard.quality[200, 2] == dataset.MISSING
    assert shard.b0[5] == pytest.approx(-6.95) and shard.radius[5] == pytest.approx(10.005)
    rng = np.random.default_rng(1)
    for i in rng.integers(0, 40, 25):
        frame = shard.frame(int(i))
        assert frame.shape == (6, N, N) and frame.dtype == np.float32
        for b in range(6):
            expected = written.get((int(i), b))
            if expected is None:
                assert not frame[b].any() and not shard.band(int(i), b).any()
            else:
                assert np.array_equal(frame[b], expected) and np.array_equal(shard.band(int(i), b), expected)
    assert not shard.frame(300).any()
    assert shard.index_of(shard.slots[17]) == 17 and shard.index_of(shard.slots[-1] + 1) == -1
    shard.close()
    shard.close()                                                    # idempotent
    with pytest.raises(ValueError, match="closed"):
        shard.frame(0)


def test_readable_after_the_file_is_deleted(tmp_path):
    path = tmp_path / dataset.shard_name(DAY, 16)
    written = make_shard(path)
    shard = dataset.Shard(path)                                      # opened, nothing mapped yet
    os.unlink(path)
    assert not path.exists()
    assert np.array_equal(shard.band(0, 0), written[(0, 0)])
    assert np.array_equal(shard.frame(39)[5], written[(39, 5)])
    shard.close()


def _read_in_child(shard, indices, queue):
    queue.put([float(shard.frame(i).astype(np.float64).sum()) for i in indices] + [os.getpid()])


def test_fork_safety_and_pickling(tmp_path):
    path = tmp_path / dataset.shard_name(DAY, 16)
    make_shard(path)
    shard = dataset.Shard(path)
    expected = [float(shard.frame(i).astype(np.float64).sum()) for i in range(40)]   # parent maps first
    os.unlink(path)                                                  # workers must use the inherited descriptor
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    workers = [context.Process(target=_read_in_child, args=(shard, list(range(k, 40, 3)), queue)) for k in range(3)]
    for w in workers: w.start()
    results = [queue.get(timeout=60) for _ in workers]
    for w in workers: w.join(timeout=60)
    assert all(w.exitcode == 0 for w in workers)
    assert all(row[-1] != os.getpid() for row in results)
    sums = sorted(v for row in results for v in row[:-1])
    assert sums == sorted(expected)
    assert np.array_equal(shard.frame(7), shard.frame(7))            # the parent still reads after its children
    shard.close()
    make_shard(path)
    reopened = pickle.loads(pickle.dumps(dataset.Shard(path)))       # spawn-style workers reopen by path
    assert np.array_equal(reopened.frame(2), dataset.Shard(path).frame(2))


def test_dataloader_workers(tmp_path):
    torch = pytest.importorskip("torch")
    path = tmp_path / dataset.shard_name(DAY, 16)
    written = make_shard(path)
    shard = dataset.Shard(path)
    for (i, b), plane in written.items():              # torch's float16 path equals numpy's
        assert np.array_equal(shard.band(i, b), plane)

    class Frames(torch.utils.data.Dataset):
        def __len__(self): return 40
        def __getitem__(self, i): return torch.from_numpy(shard.frame(i))

    loader = torch.utils.data.DataLoader(Frames(), batch_size=5, num_workers=2,
                                         multiprocessing_context="fork")
    got = torch.cat(list(loader)).numpy()
    assert np.array_equal(got, np.stack([shard.frame(i) for i in range(40)]))
    shard.close()


def test_writing_is_atomic_and_bad_shards_are_refused(tmp_path):
    path = tmp_path / dataset.shard_name(DAY, 18)
    with pytest.raises(RuntimeError):
        with dataset.ShardWriter(path, DAY, 18, 8) as writer:
            writer.add(writer.slots[0], 0, np.zeros((8, 8), np.float32))
            raise RuntimeError("disk full")
    assert list(tmp_path.iterdir()) == []                           # nothing half-written
    with pytest.raises(ValueError, match="not on 2024-03-01"):
        with dataset.ShardWriter(path, DAY, 18, 8) as writer:
            writer.add(writer.slots[0] - 1, 0, np.zeros((8, 8), np.float32))
    assert list(tmp_path.iterdir()) == []
    make_shard(path, resolution=8)
    data = path.read_bytes()
    (tmp_path / "truncated.shard").write_bytes(data[:-100])
    with pytest.raises(ValueError, match="truncated"):
        dataset.Shard(tmp_path / "truncated.shard")
    (tmp_path / "foreign.shard").write_bytes(b"NOTASHRD" + data[8:])
    with pytest.raises(ValueError, match="not a corpus shard"):
        dataset.Shard(tmp_path / "foreign.shard")
    with pytest.raises(FileNotFoundError, match="no such shard"):
        dataset.Shard(tmp_path / "missing.shard")
    # The content digest follows the content.
    other = tmp_path / "other" / dataset.shard_name(DAY, 18)
    make_shard(other, seed=1, resolution=8)
    assert dataset.Shard(other).digest != dataset.Shard(path).digest
    make_shard(other, seed=0, resolution=8)
    assert dataset.Shard(other).digest == dataset.Shard(path).digest
