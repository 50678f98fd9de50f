"""Corpus read and ingest speed.

    .venv/bin/python benchmarks/suvi_corpus.py [--resolution 640] [--slots 40] [--reads 400] [--files 24]

1. Frames/s of random-access `Shard.frame(i)` (float32 (6, H, W), asinh-coded) from a
   shard at 640x640, one worker, against the baseline: the same frames taken from a
   plain numpy array in memory (float16 as stored, and float32), in one run.  The
   shard is read warm (its pages in the OS cache, as after the first epoch) and,
   separately, with a fresh `Shard` per read (open + map + read: the worst case of a
   worker that opens a slice for a single target).
2. Ingest files/s: `ingest.build` over real-size L2 files (1280x1280 float32, 2.5"/px,
   rolled and off-centre, as the NCEI composites) resampled to the corpus resolution,
   and over small 64 px synthetic files (where header parsing dominates).
"""
import argparse
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from suvi_fill.physics import coding
from suvi_fill.corpus import shards as dataset
from suvi_fill.archive import fits
from suvi_fill.archive import ingest
from suvi_fill.physics import timebase


def make_shard(path, slots, resolution, rng):
    planes = np.empty((slots, 6, resolution, resolution), np.float16)
    with dataset.ShardWriter(path, "2024-03-18", 16, resolution) as writer:
        first = int(writer.slots[0])
        for i in range(slots):
            for b in range(6):
                plane = coding.encode(rng.gamma(0.6, 1.0, (resolution, resolution)).astype(np.float32))
                writer.add(first + i, b, plane)
                planes[i, b] = plane
    return planes


def rate(fn, count):
    started = time.perf_counter()
    for k in range(count):
        fn(k)
    return count / (time.perf_counter() - started)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--resolution", type=int, default=640)
    parser.add_argument("--slots", type=int, default=40, help="frames in the benchmark shard")
    parser.add_argument("--reads", type=int, default=400, help="random frame reads per method")
    parser.add_argument("--files", type=int, default=24, help="1280 px L2 files for the ingest rate")
    args = parser.parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="suvi_corpus_bench_"))
    rng = np.random.default_rng(0)
    try:
        n = args.resolution
        path = work / dataset.shard_name("2024-03-18", 16)
        started = time.perf_counter()
        planes16 = make_shard(path, args.slots, n, rng)
        write_s = time.perf_counter() - started
        planes32 = planes16.astype(np.float32)
        order = rng.integers(0, args.slots, args.reads)
        shard = dataset.Shard(path)
        assert np.array_equal(shard.frame(int(order[0])), planes32[order[0]])
        for i in range(args.slots):                                # warm: pages cached, map made
            shard.frame(i)
        frame_mb = 6 * n * n * 4 / 1e6
        shard_rate = rate(lambda k: shard.frame(int(order[k])), args.reads)
        mem16_rate = rate(lambda k: planes16[order[k]].astype(np.float32), args.reads)
        mem32_rate = rate(lambda k: planes32[order[k]].copy(), args.reads)
        fresh_rate = rate(lambda k: dataset.Shard(path).frame(int(order[k])), min(args.reads, 100))
        import torch                                   # as in every trainer: Shard widens float16 with it
        torch.set_num_threads(1)                       # one worker = one thread (DataLoader workers run so)
        assert np.array_equal(shard.frame(int(order[1])), planes32[order[1]])
        torch_rate = rate(lambda k: shard.frame(int(order[k])), args.reads)
        torch_fresh = rate(lambda k: dataset.Shard(path).frame(int(order[k])), min(args.reads, 100))
        shard.close()
        print(f"random frame reads at {n}x{n} (6 bands, float32 out = {frame_mb:.1f} MB/frame), one worker, "
              f"{args.slots}-frame shard ({path.stat().st_size / 1e6:.0f} MB, written in {write_s:.1f} s):")
        for label, value in (("Shard.frame, torch loaded (memory map, warm)", torch_rate),
                             ("Shard(path).frame, torch loaded (open+map+read)", torch_fresh),
                             ("Shard.frame, numpy only (memory map, warm)", shard_rate),
                             ("Shard(path).frame, numpy only (open+map+read)", fresh_rate)):
            print(f"  {label:<48} {value:8.1f} frames/s  {value * frame_mb:7.0f} MB/s")
        print(f"  {'baseline: in-memory float32 array, copy':<48} {mem32_rate:8.1f} frames/s  {mem32_rate * frame_mb:7.0f} MB/s")
        print(f"  {'baseline: in-memory float16 array, numpy astype':<48} {mem16_rate:8.1f} frames/s  {mem16_rate * frame_mb:7.0f} MB/s")
        print(f"  shard (torch) / in-memory float32: {torch_rate / mem32_rate:.2f}x;  "
              f"shard (numpy) / in-memory float16 numpy: {shard_rate / mem16_rate:.2f}x")
        del planes16, planes32
        path.unlink()

        # Ingest: real-size files.
        source = work / "l2"
        source.mkdir()
        first = timebase.first_slot_of_day("2024-03-18")
        image = (rng.gamma(0.6, 1.0, (1280, 1280)) + 0.01).astype(np.float32)
        made = 0
        for slot in range(first, first + 1000):
            for satellite in (16, 18):
                for band in timebase.WAVELENGTHS:
                    if made >= args.files:
                        break
                    when = timebase.time_of(slot).timestamp() + 33
                    values = fits.l2_header_values(band, satellite, when, (1280, 1280), cdelt=2.5,
                                                   crpix1=641.3, crpix2=639.2, crota=0.4)
                    fits.write_l2(source / fits.l2_name(band, satellite, slot), image, values, durable=False)
                    made += 1
            if made >= args.files:
                break
        report = ingest.build(source, work / "shards_full", resolution=n, progress=False, span_min=0)
        per_file = report["seconds"] / report["files"]
        print(f"ingest of {report['files']} L2 files 1280x1280 -> {n}x{n}: {report['files_per_second']:.1f} files/s "
              f"({per_file * 1000:.0f} ms/file, manifest and calibration included)")
        shutil.rmtree(source)
        small = work / "l2_small"
        small.mkdir()
        image = (rng.gamma(0.6, 1.0, (64, 64)) + 0.01).astype(np.float32)
        for slot in range(first, first + 50):
            for satellite in (16, 18):
                for band in timebase.WAVELENGTHS:
                    when = timebase.time_of(slot).timestamp() + 33
                    values = fits.l2_header_values(band, satellite, when, (64, 64), cdelt=50.0)
                    fits.write_l2(small / fits.l2_name(band, satellite, slot), image, values, durable=False)
        report = ingest.build(small, work / "shards_small", resolution=64, progress=False, span_min=0)
        print(f"ingest of {report['files']} L2 files 64x64 -> 64x64: {report['files_per_second']:.1f} files/s "
              f"({report['seconds'] / report['files'] * 1000:.1f} ms/file; astropy header parsing dominates)")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
