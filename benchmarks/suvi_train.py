"""Trainer throughput: optimiser steps/s and samples/s, data-loader wait fraction and
peak host memory, on CPU at the demo size (and on CUDA when present), side by side.

    .venv/bin/python benchmarks/suvi_train.py [--resolution 64] [--hours 36] [--steps 20]

Builds a small synthetic corpus (suvi-fill synth + build + profile) in a temporary
directory, then runs the trainer's own step -- `train.make_train_loader`,
`train.aligned_batch`, the model, `losses.criterion`, AdamW -- for `--steps` steps
per configuration, timing the wait on the loader separately from the step.  The
first two steps of each configuration are warm-up and not counted.
"""
import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

from suvi_fill.model import losses
from suvi_fill.model import net as model
from suvi_fill.train import loop as trainer
from suvi_fill.train import data as train_data
from suvi_fill.train.config import TrainConfig, validate_config
from suvi_fill.plumbing.device import autocast_enabled

WARMUP = 2


def build_corpus(where, hours, resolution):
    suvi = str(Path(sys.executable).with_name("suvi-fill"))
    raw, shards = where / "raw", where / "shards"
    for command in ([suvi, "synth", "--out", str(raw), "--hours", str(hours), "--start", "2024-06-20",
                     "--resolution", str(resolution), "--quiet"],
                    [suvi, "build", "--source", str(raw), "--out", str(shards), "--resolution", str(resolution),
                     "--no-progress"],
                    [suvi, "profile", "--shards", str(shards)]):
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    shutil.rmtree(raw)
    return shards


def measure(shards, device, workers, steps, batch, base, depth):
    args = validate_config(TrainConfig(shards=str(shards), manifest=str(shards / "manifest.json"), out="unused",
                                       workers=workers, batch=batch, base=base, depth=depth))
    corpus = train_data.read_corpus(args)
    trace = train_data.load_availability(str(shards))
    data = train_data.ShardSet(str(shards), corpus.splits["train"], corpus.satellites, availability=trace,
                               offsets=corpus.offsets, segments=corpus.seg_splits["train"],
                               calibration=corpus.calibration)
    loader = train_data.make_train_loader(data, args, device)
    net = model.build(base=base, depth=depth).to(device).to(memory_format=torch.channels_last)
    optimiser = torch.optim.AdamW(net.parameters(), lr=1e-4)
    waited = busy = 0.0
    counted = 0
    frames = 0
    batches = iter(loader)
    for index in range(steps + WARMUP):
        tick = time.perf_counter()
        try:
            batch_ = next(batches)
        except StopIteration:
            batches = iter(loader)
            batch_ = next(batches)
        tock = time.perf_counter()
        aligned, condition, present, target, lost, coverage = trainer.aligned_batch(batch_, device)
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast_enabled(device)):
            prediction = net(aligned, condition, present, coverage)
        loss = losses.criterion(prediction.float(), target, lost)
        optimiser.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(net.parameters(), trainer.CLIP_NORM)
        optimiser.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
        done = time.perf_counter()
        if index >= WARMUP:
            waited += tock - tick
            busy += done - tock
            counted += 1
            frames += aligned.shape[1]
    del batches, loader
    total = waited + busy
    return {"steps/s": counted / total, "samples/s": counted * batch / total,
            "loader wait": waited / total, "frames/sample": frames / max(counted, 1)}


def peak_host_gb():
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024**2
    return own, children


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--resolution", type=int, default=64)
    parser.add_argument("--hours", type=float, default=36, help="corpus span (from 2024-06-20)")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--base", type=int, default=32, help="model width (the seed's default 32)")
    parser.add_argument("--depth", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2, help="torch CPU threads")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as scratch:
        started = time.perf_counter()
        shards = build_corpus(Path(scratch), args.hours, args.resolution)
        print(f"corpus: {args.hours:g} hours at {args.resolution} px in {time.perf_counter() - started:.1f} s; "
              f"model base={args.base} depth={args.depth}, batch {args.batch}, {args.steps} timed steps, "
              f"{args.threads} torch threads")
        configurations = [("cpu", 0), ("cpu", 2)]
        if torch.cuda.is_available():
            configurations += [("cuda", 0), ("cuda", 2)]
        print(f"{'device':<8}{'workers':>8}{'steps/s':>10}{'samples/s':>11}{'loader wait':>13}{'frames/sample':>15}")
        for name, workers in configurations:
            figures = measure(shards, torch.device(name), workers, args.steps, args.batch, args.base, args.depth)
            print(f"{name:<8}{workers:>8}{figures['steps/s']:>10.2f}{figures['samples/s']:>11.2f}"
                  f"{figures['loader wait']:>12.1%}{figures['frames/sample']:>15.1f}", flush=True)
        own, children = peak_host_gb()
        print(f"peak host memory (max RSS): trainer process {own:.2f} GiB, largest loader worker/child "
              f"{children:.2f} GiB; host free now {trainer.host_free_gb()} GiB")
        if torch.cuda.is_available():
            print(f"peak CUDA memory allocated {torch.cuda.max_memory_allocated() / 1024**3:.2f} GiB")


if __name__ == "__main__":
    main()
