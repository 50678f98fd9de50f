"""Sample building, alignment and model throughput, each beside its baseline.

    python benchmarks/suvi_samples.py [--resolution 640] [--builds 40] [--model-size 128]

* `Sampler.build` samples/s at 640x640 on one core, against the memory-copy bound of
  the same bytes (a float32 `np.copyto` of every sample's stack and target, and the
  float16 -> float32 conversion the shards' storage implies).
* `align.align_stack` frames/s at 640x640 (CPU; CUDA when present).
* Model forward+backward samples/s on CPU at 128x128, the seed's defaults (base 32,
  depth 3), every variant, at the default ladder's clean depth.

Torch runs on `--threads` intra-op threads (default 1) so figures are per core.
"""
import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from suvi_fill.corpus import availability  # noqa: E402
from suvi_fill.corpus import shards as dataset
from suvi_fill.model import net as model
from suvi_fill.physics import timebase
from suvi_fill.corpus import sampler as samples

DAY = "2024-03-01"
#: Slots stored per satellite: the default ladder's window (2 * 16 + 1) plus a few targets.
STORED_SLOTS = 40
#: Per-(slot, satellite, band) drop rate of the benchmark's availability trace.
DROP_RATE = 0.05


def write_corpus(directory: Path, resolution: int) -> dict:
    "Two shards (g16, g18) holding STORED_SLOTS slots of smooth random frames."
    rng = np.random.default_rng(0)
    first = timebase.first_slot_of_day(DAY)
    base = rng.random((6, resolution // 16, resolution // 16)).astype(np.float32)
    base = np.kron(base, np.ones((16, 16), np.float32)) * 0.5 + 0.1
    for satellite in (16, 18):
        with dataset.ShardWriter(directory / dataset.shard_name(DAY, satellite), DAY, satellite,
                                 resolution) as writer:
            for k in range(STORED_SLOTS):
                frame = base + 0.01 * k
                for b in range(6):
                    writer.add(first + k, b, frame[b])
    return {key: dataset.Shard(directory / dataset.shard_name(DAY, key[1]))
            for key in ((DAY, 16), (DAY, 18))}


def trace_model() -> availability.Availability:
    "A real Availability over a week-long synthetic trace with independent drops and some frame gaps."
    rng = np.random.default_rng(1)
    slots = np.arange(7 * timebase.SLOTS_PER_DAY)
    present = rng.random((len(slots), 2, 6)) > DROP_RATE
    present[rng.random((len(slots), 2)) < 0.02] = False
    return availability.Availability(slots, (16, 18), present)


def identity_calibration() -> dict:
    return {"reference": 16, "bands": {str(w): {"16": {"gain": 1.0, "offset": 0.0},
                                                 "18": {"gain": 1.0, "offset": 0.0}}
                                       for w in timebase.WAVELENGTHS}}


def bench_sampler(resolution: int, builds: int) -> None:
    import torch                    # imported, so Shard widens float16 with torch's F16C path
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    with tempfile.TemporaryDirectory() as tmp:
        shards = write_corpus(Path(tmp), resolution)
        sampler = samples.Sampler(shards, (16, 18), trace_model(), seed=0,
                                  calibration=identity_calibration())
        targets = sampler.targets()
        targets = [t for t in targets if timebase.first_slot_of_day(DAY) + 16 <= t[1]
                   < timebase.first_slot_of_day(DAY) + STORED_SLOTS - 16]
        sampler.build(*targets[0], sampler.rng)                   # map the shards, warm caches
        # The bound, measured interleaved with the builds so load drift hits both alike.
        # Build reads only the planes a sample holds (the rest of its stack stays
        # untouched zero pages), so the bound is on those bytes: the held planes plus the
        # target copied float32 -> float32 into fresh memory, and converted float16 ->
        # float32 (the shards' storage) plane by plane into fresh planes.
        plane = resolution * resolution
        limit = 40 * 6 * plane
        source32 = 0.1 + 0.5 * np.random.default_rng(2).random(limit, dtype=np.float32)   # coded-frame values
        source16 = source32.astype(np.float16)
        held_bytes, stack_bytes, depths, built = 0, 0, [], 0
        elapsed = copy32 = copy16 = 0.0
        for k in range(builds):
            t0 = time.perf_counter()
            sample = sampler.build(*targets[k % len(targets)], sampler.rng)
            t1 = time.perf_counter()
            if sample is None:
                continue
            held = int(sample.present.sum()) + 6
            depths.append(sample.depth)
            t2 = time.perf_counter()
            copied = source32[:held * plane].copy()
            t3 = time.perf_counter()
            planes = torch.from_numpy(source16[:held * plane].reshape(held, resolution, resolution))
            converted = [torch.empty(resolution, resolution).copy_(p) for p in planes]   # F16C, as Shard does
            t4 = time.perf_counter()
            elapsed += t1 - t0
            copy32 += t3 - t2
            copy16 += t4 - t3
            built += 1
            held_bytes += 4 * held * plane
            stack_bytes += sample.stack.nbytes + sample.target.nbytes
            del copied, converted, sample
        copy32, copy16 = copy32 / built, copy16 / built
        for shard in shards.values():
            shard.close()
    rate = built / elapsed
    per_sample = held_bytes / built
    print(f"Sampler.build at {resolution}x{resolution}, one core: {built} samples, depth "
          f"{np.mean(depths):.1f} frames on average ({min(depths)}..{max(depths)}), "
          f"{per_sample / 4 / plane:.1f} planes held ({per_sample / 1e6:.1f} MB; stack "
          f"{stack_bytes / built / 1e6:.1f} MB)")
    print(f"  {'Sampler.build':<40} {rate:8.2f} samples/s  {rate * per_sample / 1e9:6.2f} GB/s of held planes")
    print(f"  {'bound: memory copy, float32':<40} {1 / copy32:8.2f} samples/s  {per_sample / copy32 / 1e9:6.2f} GB/s"
          f"   (build at {rate * copy32:.0%} of it)")
    print(f"  {'bound: float16 -> float32 planes':<40} {1 / copy16:8.2f} samples/s  "
          f"{per_sample / copy16 / 1e9:6.2f} GB/s   (build at {rate * copy16:.0%} of it)")


def bench_align(resolution: int) -> None:
    import torch
    try:
        from suvi_fill.physics import align
    except ImportError:
        print("align_stack: suvi_fill.physics.align not present, skipped")
        return
    depth = 12
    rng = np.random.default_rng(3)
    stack = torch.from_numpy(rng.random((1, depth, 6, resolution, resolution), dtype=np.float32) * 0.6)
    dts = torch.linspace(-16, 16, depth)[None] * timebase.SLOT_SECONDS
    valid = torch.ones(1, depth)
    gains, offsets = torch.ones(1, depth, 6) * 1.02, torch.zeros(1, depth, 6)
    b0 = torch.tensor([-7.0])
    radius = torch.tensor([dataset.solar_radius_pixels(timebase.time_of(0), resolution)])
    devices = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])
    for device in devices:
        args = [t.to(device) for t in (stack, dts, valid, gains, offsets, b0, radius)]
        align.align_stack(*args)
        repeats = 3
        if device == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(repeats):
            align.align_stack(*args)
        if device == "cuda":
            torch.cuda.synchronize()
        elapsed = (time.perf_counter() - t0) / repeats
        print(f"  {'align_stack ' + device + f' {resolution}x{resolution}':<40} {depth / elapsed:8.1f} frames/s"
              f"  ({torch.get_num_threads()} threads)" if device == "cpu" else
              f"  {'align_stack ' + device + f' {resolution}x{resolution}':<40} {depth / elapsed:8.1f} frames/s")


def bench_model(size: int, batch: int, steps: int) -> None:
    import torch
    depth = 2 * len(samples.OFFSETS) + 2                 # a clean neighbourhood at the default ladder
    rng = np.random.default_rng(4)
    aligned = torch.from_numpy(rng.random((batch, depth, 6, size, size), dtype=np.float32))
    rows = [model.frame_conditioning("target", True, 0.0)] + [
        model.frame_conditioning("anchor", k % 2 == 0, (k - depth / 2) * timebase.SLOT_SECONDS)
        for k in range(1, depth)]
    condition = torch.stack(rows)[None].repeat(batch, 1, 1)
    present = torch.ones(batch, depth, 6)
    present[:, 0, 0] = 0
    target = torch.rand(batch, 6, size, size)
    print(f"model forward+backward, CPU {size}x{size}, batch {batch}, depth {depth}, base 32, depth-levels 3, "
          f"{torch.get_num_threads()} threads:")
    for name, flags in (("plain", {}), ("relative", {"relative": True}), ("corr_flow", {"corr_flow": True}),
                        ("attention", {"attention": True})):
        torch.manual_seed(0)
        net = model.build(base=32, depth=3, **flags).to(memory_format=torch.channels_last)
        optimiser = torch.optim.AdamW(net.parameters(), lr=1e-4)

        def step():
            optimiser.zero_grad(set_to_none=True)
            loss = (net(aligned, condition, present) - target).abs().mean()
            loss.backward()
            optimiser.step()

        step()
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        elapsed = (time.perf_counter() - t0) / steps
        params = sum(p.numel() for p in net.parameters()) / 1e6
        print(f"  {name:<40} {batch / elapsed:8.2f} samples/s  ({elapsed:.2f} s/step, {params:.2f}M parameters)")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--resolution", type=int, default=640)
    parser.add_argument("--builds", type=int, default=40)
    parser.add_argument("--model-size", type=int, default=128)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads for the model and align_stack (default 1: on a "
                             "shared 2-core machine more threads only contend)")
    args = parser.parse_args(argv)
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    bench_model(args.model_size, args.batch, args.steps)
    print("align_stack:")
    bench_align(args.resolution)
    bench_sampler(args.resolution, args.builds)       # pins this process to one core: last
    torch.set_num_threads(threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
