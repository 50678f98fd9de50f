"""What any proposal ranker could save: the symmetric search guided by an oracle that knows each candidate's gain.

The guided search (`szrank search --strategy symmetric --model`) draws CANDIDATES proposals per member and counts the
best-ranked one.  No ranker can pick better than the candidate that actually brings the largest gain, so a search
guided by that oracle bounds what a ranker could save.  Here every candidate is counted outside the budget
(`population_search(audit=...)`, as the audited runs do) and the oracle's pick is the one the run counts.

`--lifts` mixes the oracle with chance: at lift f each member takes the oracle's pick with probability f and its
first candidate otherwise, so the share of improving picks is f of the way from chance to the oracle (the listwise
ranker's pick reached about 0.17 of that way on held-out topologies, `szrank_ranker_within.py`).  The curve of
saving against lift says how good a ranker must be to save 30 %.

Same measure as `szrank_guided_symmetric.py` and the demo (`szrank.search.guided`): the held-out topologies, the
target the median final best of unguided reference runs (seeds 2000..), evaluations to it the lower median over
seeds 1000.., the saving 1 - guided / unguided per topology and its median over topologies.  No assertions.

    nice -n 10 python benchmarks/szrank_ranker_budget.py --seeds 10 --evaluations 30000 --workers 2
"""
from __future__ import annotations

import argparse
import math
import time

import numpy as np

from szrank.geometry.symmetry import symmetry_of
from szrank.plumbing.device import run_in_workers
from szrank.search.guided import COMPARE_SEED, HELD_OUT, REFERENCE_SEED, compare_runs
from szrank.search.population import CANDIDATES, population_search

GOAL_SAVING = 0.30


class OracleMix:
    "A ranker that takes, with probability `lift`, the candidate of largest true gain, and the first one otherwise."

    def __init__(self, lift: float, seed: int):
        self.lift, self.rng, self.gains = lift, np.random.default_rng([int(seed), 0x0AC1E]), None

    def audit(self, features, gains):          # called with every candidate's true gain before `score`
        self.gains = np.asarray(gains, dtype=np.float64)

    def score(self, features) -> np.ndarray:
        first = np.zeros_like(self.gains)
        first[0] = 1.0
        oracle = self.gains + 1e-9 * first        # ties go to the first candidate, as an unguided step takes
        return np.where(self.rng.random(self.gains.shape[1]) < self.lift, oracle, first)


def one_run(topology: int, evaluations: int, seed: int, lift: float | None, candidates: int) -> list:
    "The best-so-far history of one symmetric run: unguided (lift None) or guided by the oracle mixed at `lift`."
    oracle = None if lift is None else OracleMix(lift, seed)
    result = population_search(topology, evaluations, seed=seed, symmetry=symmetry_of(topology), candidates=candidates,
                               ranker=oracle, audit=None if oracle is None else oracle.audit)
    return result.history


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topologies", default="all", help=f"comma-separated, from {HELD_OUT}, or 'all'")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--evaluations", type=int, default=30_000, help="budget per run")
    parser.add_argument("--lifts", default="1,0.5,0.17,0", help="oracle shares to measure, comma-separated (0: the first candidate, chance; a control)")
    parser.add_argument("--candidates", type=int, default=CANDIDATES)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    topologies = HELD_OUT if args.topologies == "all" else tuple(int(t) for t in args.topologies.split(","))
    lifts = [float(f) for f in args.lifts.split(",")]
    modes = {"reference": (REFERENCE_SEED, None), "unguided": (COMPARE_SEED, None),
             **{f"lift {f:g}": (COMPARE_SEED, f) for f in lifts}}
    jobs = [(t, args.evaluations, first + k, lift, args.candidates)
            for t in topologies for first, lift in modes.values() for k in range(args.seeds)]
    started = time.perf_counter()
    histories = iter(run_in_workers(one_run, jobs, args.workers))
    rows, ratios = [], {f: [] for f in lifts}
    for t in topologies:
        runs = {mode: [next(histories) for _ in range(args.seeds)] for mode in modes}
        compared = [compare_runs(t, {"reference": runs["reference"], "unguided": runs["unguided"],
                                     "guided": runs[f"lift {f:g}"]}) for f in lifts]
        first = compared[0]
        row = f"  {t:>8} {first.symmetry:>4} {first.target:>6g} | " + \
            (f"{first.unguided:>9,.0f}" if math.isfinite(first.unguided) else f"{'never':>9}")
        for f, c in zip(lifts, compared):
            if not math.isnan(c.saving):                  # the unguided runs reached the target
                ratios[f].append(c.guided / c.unguided)
            row += f" | {('never' if math.isinf(c.saving) else '-' if math.isnan(c.saving) else f'{c.saving:+.0%}'):>9}"
        rows.append(row)
    print(f"the symmetric search guided by an oracle of the best of {args.candidates} candidates, mixed with chance; "
          f"{len(topologies)} held-out topologies, {args.seeds} seeds, {args.evaluations:,} evaluations a run; "
          f"{time.perf_counter() - started:.0f} s")
    print(f"  {'topology':>8} {'sym':>4} {'target':>6} | {'unguided':>9}" + "".join(f" | {f'lift {f:g}':>9}" for f in lifts))
    print("\n".join(rows))
    for f in lifts:
        median = 1 - float(np.median(ratios[f])) if ratios[f] else math.nan
        print(f"  lift {f:g}: median saving over {len(ratios[f])} topologies {median:+.0%} "
              f"(goal >= {GOAL_SAVING:.0%}: {'met' if median >= GOAL_SAVING else 'not met'})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
