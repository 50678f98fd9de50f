"""What a training run learns, gap by gap: the trainer's own steps, scored every `--every` steps on fixed
bracketed samples of one split at each bench gap, beside the classical fillers on the same samples.

The trainer's validation PSNR is one mean over a mix of gaps; a gain at one gap (the 1-slot weights)
is a fraction of a dB of it, and a loss at another can hide it.  This prints the whole table and the
partial-loss mean (samples that kept some bands) per gap, so a change to the net, the loss or the
schedule can be judged where it acts.

    .venv/bin/python benchmarks/suvi_train_gaps.py --shards demo-out/suvi_fill/shards \\
        [--steps 400] [--every 100] [--per-gap 24] [--split val] [--set batch=16 --set plain_heads=true]

`--set NAME=VALUE` overrides a `TrainConfig` field of the demo's run (`suvi_fill.demo.DEMO_TRAIN`);
values are read as JSON where they parse (16, 5e-4, true), else kept as text.
"""
from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time

import numpy as np
import torch

from suvi_fill.corpus import availability
from suvi_fill.evaluate import bench
from suvi_fill import demo
from suvi_fill.evaluate import fillers
from suvi_fill.train import loop as train
from suvi_fill.corpus.reader import Corpus
from suvi_fill.model.losses import balanced_criterion, criterion
from suvi_fill.physics.coding import band_psnr
from suvi_fill.train.config import TrainConfig, validate_config

GAPS = demo.DEMO_GAPS
CLASSICAL = ("linear", "optical_flow", "blend")


def fixed_samples(shards, split: str, per_gap: int) -> dict:
    "`{gap: [(prepared sample, truth, lost)]}`: the bench's pinned bracketed samples of `split`, aligned once."
    corpus = Corpus.open(shards)
    trace = availability.Availability.load(f"{shards}/availability.npz")
    out = {}
    with bench.BenchSet(shards, corpus, trace, split, bench.BENCH_SEED, None, "bracketed") as samples:
        for gap in GAPS:
            out[gap] = [(fillers.prepare(s), s.target, s.lost) for s in samples.samples(gap, per_gap)]
    return out


def score(filler, fixed: dict) -> dict:
    """`{gap: (mean dB over every sample, mean dB over the partial-loss ones or nan)}` of `filler`.

    Each sample counts once, with the mean over its lost bands: the bench (`bench.summarise`) weighs
    every (sample, lost band) alike instead (a sample that lost six bands counts six times there), so
    these figures are comparable with each other, not with the bench's table."""
    out = {}
    for gap, items in fixed.items():
        whole, partial = [], []
        for prep, truth, lost in items:
            value = float(band_psnr(filler(prep), truth)[lost].mean())
            whole.append(value)
            if bench.loss_kind(lost)[0] == "partial":
                partial.append(value)
        out[gap] = (np.mean(whole), np.mean(partial) if partial else float("nan"))
    return out


def row(name: str, scores: dict, extra: str = "") -> str:
    return f"{name:>13} " + " ".join(f"{scores[g][0]:6.2f}/{scores[g][1]:5.2f}" for g in GAPS) + extra


def parse_sets(pairs) -> dict:
    out = {}
    for pair in pairs:
        name, _, value = pair.partition("=")
        try:
            out[name] = json.loads(value)
        except ValueError:
            out[name] = value
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", default=str(demo.DEFAULT_OUT / "shards"), help="a corpus (the demo's by default)")
    parser.add_argument("--steps", type=int, default=demo.DEMO_TRAIN["max_steps"])
    parser.add_argument("--every", type=int, default=100, help="steps between scorings")
    parser.add_argument("--per-gap", type=int, default=24, help="fixed samples per gap")
    parser.add_argument("--split", default="val")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="override a TrainConfig field of the demo's run")
    args = parser.parse_args()
    torch.set_num_threads(demo.DEMO_TRAIN["threads"])
    fixed = fixed_samples(args.shards, args.split, args.per_gap)
    print(f"{args.split} split, {args.per_gap} bracketed samples a gap; each cell: all samples / partial losses (dB)")
    print(f"{'gap':>13} " + " ".join(f"{g:>12}" for g in GAPS))
    for name in CLASSICAL:
        print(row(name, score(fillers.make_filler(name), fixed)), flush=True)
    out = tempfile.mkdtemp(prefix="suvi_train_gaps_")
    settings = demo.DEMO_TRAIN | {"max_steps": args.steps, "eval_every": 10**9, "val_samples": 1} | parse_sets(args.set)
    config = validate_config(TrainConfig(shards=args.shards, manifest=f"{args.shards}/manifest.json", out=out, **settings))
    try:
        run = train.prepare(config, torch.device("cpu"), 0, 1)
        loss_of = balanced_criterion if config.balance else criterion
        started, losses = time.perf_counter(), []
        for batch in train.batches(run):
            losses.append(train.train_step(run, batch, loss_of, None)[0])
            if run.step % args.every == 0 or run.step == run.finish:
                scores = score(fillers.ModelFiller(run.net, "learned"), fixed)     # puts the net in eval mode
                run.net.train()
                print(row(f"step {run.step}", scores,
                          f"  train loss {np.mean(losses):.5f}  {time.perf_counter() - started:.0f} s"), flush=True)
                losses = []
    finally:
        shutil.rmtree(out, ignore_errors=True)


if __name__ == "__main__":
    main()
