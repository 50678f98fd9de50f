"""Ranker-guided against unguided symmetric population search: evaluations to reach a target on held-out topologies.

The split is fixed: topologies with index % 3 == 2 (19 of them: 2, 5, ..., 56) are held out; the other 40 train.

1. Records: one unguided symmetric run of `--train-evaluations` evaluations on each of the 40 training topologies
   (seed 7 + position), every counted proposal logged as an SZTPP001 record (`szrank.ranker.proposals`):
   features known before counting, and its gain (the member's C+I minus the proposal's).  40 x 25,600 evaluations
   give 1,011,200 records.  Kept in --workdir and reused.
2. Model: `train_ranker` on those records (label gain > 0), saved as SZTPR001 (or --model).
3. On each --eval-topologies topology (held out), --seeds seeds of each mode at the same --evaluations budget:
     unguided  `population_search(..., symmetry=symmetry_of(t))`, the `szrank search --strategy symmetric` engine;
     guided    the same with `ranker=`: each member draws CANDIDATES proposals, the best-ranked one is counted.
   Both count 32 evaluations an iteration, so the budgets compare evaluation for evaluation.

The target per topology is the unguided runs' median final best C+I.  Per mode the table gives the median best
C+I at the budget and the lower median over seeds of the evaluations until the best first reached the target
(never: inf); the saving is 1 - guided / unguided (goal >= 30 %).  No assertions: the figures are reported as they
come out.

    nice -n 10 python benchmarks/szrank_guided_symmetric.py --workdir /tmp/gs --eval-topologies 11,14,44,53,56
"""
from __future__ import annotations

import argparse
import math
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

from szrank.geometry.symmetry import symmetry_of
from szrank.geometry.topology import TOPOLOGY_COUNT
from szrank.ranker.proposals import RECORD_DTYPE, load_ranker, read_records, train_ranker, write_records
from szrank.search.population import CANDIDATES, population_search

GOAL_SAVING = 0.30
HELD_OUT = tuple(t for t in range(TOPOLOGY_COUNT) if t % 3 == 2)
TRAINING = tuple(t for t in range(TOPOLOGY_COUNT) if t % 3 != 2)


def log_topology(topology: int, evaluations: int, seed: int) -> np.ndarray:
    "The SZTPP001 records of one unguided symmetric run."
    parts = []

    def log(features, gain, accepted):
        rows = np.zeros(len(gain), RECORD_DTYPE)
        rows["topology"], rows["features"], rows["gain"], rows["accepted"] = topology, features, gain, accepted
        parts.append(rows)
    population_search(topology, evaluations, seed=seed, symmetry=symmetry_of(topology), log=log)
    return np.concatenate(parts)


def records(work: Path, args) -> np.ndarray:
    path = work / "proposals.sztp"
    if path.exists():
        found = read_records(path)
        print(f"records: {len(found):,} from {path}", flush=True)
        return found
    started = time.perf_counter()
    jobs = [(t, args.train_evaluations, 7 + k) for k, t in enumerate(TRAINING)]
    with ProcessPoolExecutor(args.workers) as pool:
        found = np.concatenate(list(pool.map(log_topology, *zip(*jobs))))
    write_records(path, found)
    print(f"records: {len(found):,} from {len(TRAINING)} training topologies in {time.perf_counter() - started:.0f} s; "
          f"improving share {(found['gain'] > 0).mean():.4f}; {path}", flush=True)
    return found


def one_run(topology: int, evaluations: int, seed: int, model: str | None, candidates: int = CANDIDATES) -> list:
    ranker = load_ranker(model) if model else None
    return population_search(topology, evaluations, seed=seed, symmetry=symmetry_of(topology), ranker=ranker,
                             candidates=candidates).history


def reach(history, target: float) -> float:
    return next((float(used) for used, best in history if best <= target), math.inf)


def lower_median(values) -> float:
    return float(sorted(values)[(len(values) - 1) // 2])


def evaluate(model: Path, args) -> None:
    topologies = [int(t) for t in args.eval_topologies.split(",")]
    trained = [t for t in topologies if t not in HELD_OUT]
    if trained:
        raise SystemExit(f"topologies {trained} are training topologies; held out are {HELD_OUT}")
    print(f"\n{'topology':>8} {'sym':>4} {'target':>6} | {'unguided evals':>14} {'reached':>7} {'best':>5} | "
          f"{'guided evals':>12} {'reached':>7} {'best':>5} | saving   (budget {args.evaluations:,}, {args.seeds} seeds, "
          f"{args.candidates} candidates)")
    savings = []
    with ProcessPoolExecutor(args.workers) as pool:
        for t in topologies:
            seeds = [1000 + k for k in range(args.seeds)]
            runs = {mode: list(pool.map(one_run, [t] * len(seeds), [args.evaluations] * len(seeds), seeds,
                                        [m] * len(seeds), [args.candidates] * len(seeds)))
                    for mode, m in (("unguided", None), ("guided", str(model)))}
            target = float(np.median([h[-1][1] for h in runs["unguided"]]))
            cols = {}
            for mode, histories in runs.items():
                hits = [reach(h, target) for h in histories]
                cols[mode] = (lower_median(hits), int(np.isfinite(hits).sum()), float(np.median([h[-1][1] for h in histories])))
            u, g = cols["unguided"][0], cols["guided"][0]
            saving = 1 - g / u if np.isfinite(u) and u > 0 else float("nan")
            savings.append(saving)
            print(f"{t:>8} {symmetry_of(t).name:>4} {target:>6g} | {u:>14,.0f} {cols['unguided'][1]:>4}/{args.seeds:<2} "
                  f"{cols['unguided'][2]:>5g} | {g:>12,.0f} {cols['guided'][1]:>4}/{args.seeds:<2} {cols['guided'][2]:>5g} | "
                  f"{saving:+.0%}", flush=True)
    median = float(np.nanmedian(savings))
    print(f"median saving over {len(topologies)} held-out topologies: {median:+.0%} (goal >= {GOAL_SAVING:.0%}: "
          f"{'met' if median >= GOAL_SAVING else 'not met'})")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True, help="records and model are kept (and reused) here")
    parser.add_argument("--train-evaluations", type=int, default=25_600, help="per training topology")
    parser.add_argument("--model", type=Path, help="an SZTPR001 ranker to evaluate (default: train one in --workdir)")
    parser.add_argument("--eval-topologies", default="11,14,44,53,56", help=f"comma-separated, from {HELD_OUT}")
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--evaluations", type=int, default=100_000, help="budget per run")
    parser.add_argument("--candidates", type=int, default=CANDIDATES, help="drawn per member in a guided step")
    parser.add_argument("--workers", type=int, default=1, help="processes (the cores are shared)")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    model = args.model or args.workdir / "ranker.sztpr"
    if not model.exists():
        started = time.perf_counter()
        train_ranker(records(args.workdir, args)).save(model)
        print(f"model {model} trained in {time.perf_counter() - started:.0f} s", flush=True)
    evaluate(model, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
