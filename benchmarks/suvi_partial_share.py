"""The partial-loss weighting sweep: what share of partial losses in training serves both bench tables.

The availability model's band-loss patterns decide what a training sample loses: on the demo corpus about a
fifth of its draws keep some band (a partial loss), the rest lose the whole frame.  `suvi-fill train
--partial-share P` reweights them (`Availability.with_partial_share`): a share P of the training samples are
partial losses, within each kind in the trace's own proportions.  Validation keeps the model's own mix.

For every share in --shares, the shipped filler (or --start) is trained --steps more steps at that share
(`suvi-fill train --resume START --partial-share P`, the demo's settings otherwise); "own" trains at the
model's own mix, the control for what the extra steps alone give.  Each result's last.pt is benched on the
demo bench's pinned test sets (bracketed, --samples a gap, whole frames and partial losses apart) beside the
blend, crossband and the start.  Prints both tables with standard errors, the margins over crossband, and
writes a plot (PSNR against gap, whole and partial) to --work/partial_share.png.  No assertions: a benchmark.

--pretrained LABEL=PATH,... benches whole runs trained elsewhere beside them (`suvi-fill pretrain --partial-share
P --to DIR` trains one from scratch at a share; DIR/filler.pt is its checkpoint); `--shares ''` trains nothing.
--classical names the classical rows (default blend and crossband); the margins are printed over crossband and
over the best classical row of each gap.

    suvi-fill demo --out /tmp/demo1          # the corpus
    python benchmarks/suvi_partial_share.py --shards /tmp/demo1/shards --work /tmp/ps --shares own,0.5,0.8 --steps 400
    python benchmarks/suvi_partial_share.py --shards /tmp/demo1/shards --work /tmp/pre --shares '' \
        --classical linear,optical_flow,blend,crossband --pretrained 0.5=/tmp/ship05/filler.pt,0.8=/tmp/ship08/filler.pt
"""
from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from suvi_fill import demo
from suvi_fill.corpus import availability
from suvi_fill.corpus.reader import Corpus
from suvi_fill.evaluate import bench
from suvi_fill.model import checkpoint, shipped
from suvi_fill.train.config import TrainConfig, command_line
from suvi_fill.train.loop import train
from suvi_fill.plumbing.errors import TrainingAborted


def tuned(shards: Path, corpus: Corpus, start: Path, begun: int, share, steps: int, work: Path) -> tuple[Path, list]:
    "Train `start` (at step `begun`) `steps` more steps at partial share `share` (None: the model's own); (last.pt, val curve)."
    out = work / f"share_{'own' if share is None else share}"
    last = out / "last.pt"
    history = out / "history.jsonl"
    settings = demo.DEMO_TRAIN | dict(max_steps=begun + steps, eval_every=max(steps // 4, 1), plateau_evals=0,
                                      partial_share=share, resume=str(start))
    config = TrainConfig(shards=str(shards), manifest=str(corpus.path), out=str(out), **settings)
    if not (last.exists() and checkpoint.read(last).step >= begun + steps):
        print(f"suvi-fill train {command_line(config)}", flush=True)
        started = time.perf_counter()
        try:
            train(config)
        except TrainingAborted:
            print("  (the abort guard stopped it: last.pt is where it stopped)")
        print(f"  {time.perf_counter() - started:.0f} s", flush=True)
    curve = [(r["step"], r["val_psnr"]) for r in map(json.loads, history.read_text().splitlines())
             if r.get("val_psnr") is not None] if history.exists() else []
    return last, curve


KINDS = ("whole", "partial")   #: the bench's two tables (`result["by_loss"]`)


def table(result: dict, kind: str, name: str) -> tuple[dict, dict]:
    "PSNR by gap of filler `name` in table `kind`, and its standard errors."
    rows = result["by_loss"][kind]
    return rows["table"][name], rows["stderr"][name]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shards", type=Path, required=True, help="the demo corpus's shards (suvi-fill demo)")
    parser.add_argument("--work", type=Path, required=True, help="runs, bench results and the plot go here")
    parser.add_argument("--shares", default="own,0.5,0.8", help="comma-separated partial shares; own: the model's mix")
    parser.add_argument("--steps", type=int, default=400, help="training steps from the start per share")
    parser.add_argument("--start", type=Path, default=None, help="checkpoint to start from (default: the shipped filler)")
    parser.add_argument("--samples", type=int, default=demo.DEMO_SAMPLES, help="bench samples a gap, each kind")
    parser.add_argument("--pretrained", default="", help="LABEL=CHECKPOINT,...: whole runs benched beside the rest")
    parser.add_argument("--classical", default="blend,crossband", help="classical rows, comma-separated")
    args = parser.parse_args()
    if "crossband" not in args.classical.split(","):
        parser.error("--classical must include crossband: the margins and the plot are drawn against it")
    start = args.start or shipped.shipped_checkpoint()
    pretrained = [item.split("=", 1) for item in args.pretrained.split(",") if item]
    if any(len(item) != 2 for item in pretrained):
        parser.error(f"--pretrained {args.pretrained}: give LABEL=CHECKPOINT pairs, comma-separated")
    for name, path in [("--start", start)] + [(f"--pretrained {label}", path) for label, path in pretrained]:
        if path is None or not Path(path).is_file():
            parser.error(f"{name} {path}: no such checkpoint file")
    args.work.mkdir(parents=True, exist_ok=True)
    begun = checkpoint.read(start).step
    corpus = Corpus.open(args.shards)
    trace = availability.Availability.load(args.shards / availability.AVAILABILITY)
    print(f"start {start} (step {begun}); the availability model's partial share "
          f"{trace.partial_share:.3f}", flush=True)
    shares = [None if s == "own" else float(s) for s in args.shares.split(",") if s]
    runs = {}
    for share in shares:
        runs["own" if share is None else f"{share:g}"] = tuned(args.shards, corpus, start, begun, share, args.steps, args.work)
    classical = args.classical.split(",")
    fillers = {name: bench.bench_filler(name, shards=args.shards) for name in classical}
    fillers["start"] = bench.bench_filler("learned", checkpoint=start)
    for label, (last, _) in runs.items():
        fillers[f"share {label}"] = bench.bench_filler("learned", checkpoint=last)
    for label, path in pretrained:
        fillers[f"pretrained {label}"] = bench.bench_filler("learned", checkpoint=Path(path))
    result = bench.run_bench(args.shards, corpus, trace, fillers, demo.DEMO_GAPS, args.samples, progress=False,
                             partial_count=args.samples)
    (args.work / "bench.json").write_text(json.dumps(result, indent=1, sort_keys=True))
    gaps = [str(g) for g in demo.DEMO_GAPS]
    print(f"\nbench: test split, bracketed, {args.samples} samples a gap and kind; mean display PSNR (dB) +- SE")
    for kind in KINDS:
        print(f"\n{'whole frames' if kind == 'whole' else 'partial losses'}\n| filler | "
              + " | ".join(f"gap {g}" for g in gaps) + " |\n|---|" + "---:|" * len(gaps))
        for name in fillers:
            t, s = table(result, kind, name)
            print(f"| {name} | " + " | ".join(f"{t[g]:.2f} +- {s[g]:.2f}" for g in gaps) + " |")
        cross = table(result, kind, "crossband")[0]
        best = {g: max(table(result, kind, n)[0][g] for n in classical) for g in gaps}
        for against, row in (("crossband", cross), ("best classical", best)):
            for name in [n for n in fillers if n not in classical]:
                t = table(result, kind, name)[0]
                print(f"| {name} - {against} | " + " | ".join(f"{t[g] - row[g]:+.2f}" for g in gaps) + " |")
    print("\nvalidation (the model's own mix), dB by step:")
    for label, (_, curve) in runs.items():
        print(f"  share {label}: " + ", ".join(f"{s}: {p:.2f}" for s, p in curve))
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    figure, axes = plt.subplots(1, 2, figsize=(11, 4), sharey=False)
    for axis, kind, title in ((axes[0], "whole", "whole frames"), (axes[1], "partial", "partial losses")):
        cross = table(result, kind, "crossband")[0]
        for name in fillers:
            if name == "crossband":
                continue
            t = table(result, kind, name)[0]
            axis.plot([int(g) for g in gaps], [t[g] - cross[g] for g in gaps], marker="o", label=name)
        axis.axhline(0, color="grey", lw=0.8)
        axis.set_xscale("log")
        axis.set(title=title, xlabel="gap (slots)", ylabel="PSNR - crossband (dB)")
    axes[1].legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(args.work / "partial_share.png", dpi=110)
    print(f"plot: {args.work / 'partial_share.png'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
