"""Ranker-guided against unguided symmetric population search: evaluations to reach a target on held-out topologies.

The split is fixed (`szrank.search.guided`): topologies with index % 3 == 2 (19 of them: 2, 5, ..., 56) are held
out; the other 40 train.

1. Records: one unguided symmetric run of `--train-evaluations` evaluations on each of the 40 training topologies
   (seed 7 + position), every counted proposal logged as an SZTPP001 record (`szrank.ranker.proposals`):
   features known before counting, and its gain (the member's C+I minus the proposal's).  40 x 25,600 evaluations
   give 1,011,200 records.  Kept in --workdir and reused.
2. Model: `train_ranker` on those records (label gain > 0), saved as SZTPR001 (or --model).
3. On each --eval-topologies topology (held out), --seeds seeds of each mode at the same --evaluations budget
   (`szrank.search.guided.compare_guided`):
     unguided  `population_search(..., symmetry=symmetry_of(t))`, the `szrank search --strategy symmetric` engine;
     guided    the same with `ranker=`: each member draws CANDIDATES proposals, the best-ranked one is counted.
     control   the same with a ranker that picks one of the candidates at random (what chance shows).
   Both count 32 evaluations an iteration, so the budgets compare evaluation for evaluation.  The target is
   the median final best of reference unguided runs of other seeds.

The target per topology is the reference runs' median final best C+I.  Per mode the table gives the lower median
over seeds of the evaluations until the best first reached the target (never: inf), the runs reaching it and the
median best C+I at the budget; the saving is 1 - guided / unguided (goal >= 30 %).  No assertions: the figures
are reported as they come out.  `szrank demo` runs the same measurement at a fixed size (its symmetric stage).

    nice -n 10 python benchmarks/szrank_guided_symmetric.py --workdir /tmp/gs --eval-topologies 11,14,44,53,56
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from szrank.ranker.proposals import read_records, train_ranker, write_records
from szrank.search.guided import COMPARED, HELD_OUT, TRAINING, compare_guided, format_comparisons, proposal_corpus
from szrank.search.population import CANDIDATES

GOAL_SAVING = 0.30


def records(work: Path, args) -> np.ndarray:
    path = work / "proposals.sztp"
    if path.exists():
        found = read_records(path)
        print(f"records: {len(found):,} from {path}", flush=True)
        return found
    started = time.perf_counter()
    found = proposal_corpus(args.train_evaluations, 7, workers=args.workers)
    write_records(path, found)
    print(f"records: {len(found):,} from {len(TRAINING)} training topologies in {time.perf_counter() - started:.0f} s; "
          f"improving share {(found['gain'] > 0).mean():.4f}; {path}", flush=True)
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True, help="records and model are kept (and reused) here")
    parser.add_argument("--train-evaluations", type=int, default=25_600, help="per training topology")
    parser.add_argument("--model", type=Path, help="an SZTPR001 ranker to evaluate (default: train one in --workdir)")
    parser.add_argument("--eval-topologies", default=",".join(map(str, COMPARED)),
                        help=f"comma-separated, from {HELD_OUT}, or 'all'")
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
    topologies = HELD_OUT if args.eval_topologies == "all" else tuple(int(t) for t in args.eval_topologies.split(","))
    started = time.process_time()
    comparisons, auc = compare_guided(model, args.evaluations, args.seeds, topologies, args.workers, args.candidates)
    print(format_comparisons(comparisons, args.evaluations, args.candidates))
    savings, chance = [c.saving for c in comparisons], [c.control_saving for c in comparisons]
    median = float(np.nanmedian(savings))
    # pooled over every member's proposals: a listwise ranker's scores compare candidates of one member only,
    # which is the choice a guided step makes (benchmarks/szrank_ranker_within.py measures that one)
    print(f"held-out pooled AUC {auc:.3f}; median saving over {len(comparisons)} held-out topologies: {median:+.0%} "
          f"(goal >= {GOAL_SAVING:.0%}: {'met' if median >= GOAL_SAVING else 'not met'}); "
          f"{sum(s > 0 for s in savings)} of {len(savings)} saved; the random-pick control: "
          f"{float(np.nanmedian(chance)):+.0%}, {sum(s > 0 for s in chance)} of {len(chance)} saved")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
