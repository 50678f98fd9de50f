"""The corpus build on a local Dask cluster against the serial build, on one synthetic archive.

    .venv/bin/python benchmarks/suvi_build_dask.py [--hours 24] [--days 2] [--resolution 256] [--workers 2,N]

The baseline is the serial `suvi-fill build` (`ingest.build`, one process) on the same archive; each
local cluster (`--scheduler local:N`, N worker processes, one thread each) is timed over the same
build, cluster start-up included, and its speed-up printed beside the serial figure.  Every build
must give the serial manifest digest (checked).  The archive spans `--days` days of `--hours` hours
each (one (day, satellite) shard per task); N defaults to 2 and this machine's core count.
"""
import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path

from suvi_fill.archive import ingest
from suvi_fill.sim.synth import synthesize


def archive(work: Path, days: int, hours: float, resolution: int) -> Path:
    "`days` synthetic days of `hours` hours each, both satellites, moved into one archive directory."
    root = work / "archive"
    for day in range(days):
        part = work / f"part{day}"
        start = f"2024-03-{18 + day:02d}"
        synthesize(part, hours=hours, resolution=resolution, start=start, seed=day, progress=False)
        for path in part.rglob("*.fits"):
            target = root / start / path.name
            target.parent.mkdir(parents=True, exist_ok=True)
            path.rename(target)
        shutil.rmtree(part)
    return root


def timed_build(source: Path, out: Path, resolution: int, scheduler=None) -> tuple:
    started = time.perf_counter()
    report = ingest.build(source, out, resolution, progress=False, span_min=2, log=lambda *_: None,
                          scheduler=scheduler)
    return time.perf_counter() - started, report


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--days", type=int, default=2)
    parser.add_argument("--hours", type=float, default=6.0, help="hours of frames per day")
    parser.add_argument("--resolution", type=int, default=256, help="archive and corpus resolution, px")
    parser.add_argument("--workers", default=None, help="comma-separated worker counts (default 2 and the core count)")
    args = parser.parse_args(argv)
    cores = os.cpu_count() or 1
    counts = sorted({int(n) for n in args.workers.split(",")} if args.workers else {2, cores})
    work = Path(tempfile.mkdtemp(prefix="suvi_build_dask_bench_"))
    try:
        started = time.perf_counter()
        source = archive(work, args.days, args.hours, args.resolution)
        files = sum(1 for _ in source.rglob("*.fits"))
        print(f"archive: {files} files, {args.days} days x {args.hours:g} h x 2 satellites at {args.resolution} px "
              f"(written in {time.perf_counter() - started:.1f} s); {cores} cores")
        serial, report = timed_build(source, work / "serial", args.resolution)
        print(f"{'serial build (baseline)':<34} {serial:8.2f} s  {files / serial:8.1f} files/s  "
              f"{report['shards']} shards, digest {report['manifest_digest'][:12]}")
        for n in counts:
            seconds, dask = timed_build(source, work / f"local{n}", args.resolution, f"local:{n}")
            same = "same digest" if dask["manifest_digest"] == report["manifest_digest"] else "DIGEST DIFFERS"
            print(f"{f'--scheduler local:{n}':<34} {seconds:8.2f} s  {files / seconds:8.1f} files/s  "
                  f"speed-up {serial / seconds:4.2f}x over serial {serial:.2f} s ({same})")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
