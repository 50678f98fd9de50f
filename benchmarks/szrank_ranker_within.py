"""Where a guided step needs the ranker: among one member's candidates, on held-out topologies.

A guided step (`population_search(ranker=...)`) draws CANDIDATES proposals for each member and counts the
best-ranked one.  The ranker's pooled AUC also rewards telling members apart (one far above the population's
best is easy to improve), a choice the step never makes.  This measures the choice it does make:

1. Audited runs (`szrank.search.guided.audit_run`: every candidate of every member counted off the budget) on
   the held-out --eval-topologies, --seeds seeds each, --evaluations each (unguided: the first candidate taken).
2. Scorers: the first candidate (chance), the smallest step, the pointwise ranker (--model, or trained as the
   demo trained it before it moved to the listwise one: one logged run of 25,600 evaluations on each of the 40
   training topologies, `train_ranker`),
   and a listwise ranker (`train_listwise`) trained on audited runs of the 40 training topologies
   (--train-evaluations each).  Both rankers are kept in --workdir and reused.
3. Per scorer: the pooled AUC, the within-member AUC (`within_auc`) and how often the taken candidate improves on
   its member (`pick_rates`; `any` is the best-of-CANDIDATES oracle's rate); then the same for the members near
   the population's best (where new bests come from) and the far ones apart.
4. With --compare N: guided against unguided (and the random-pick control) with the listwise ranker, N seeds a
   topology at --compare-evaluations, the measure of `szrank_guided_symmetric.py`.

No assertions: the figures are reported as they come out.

    nice -n 10 python benchmarks/szrank_ranker_within.py --workdir /tmp/within --compare 10
"""
from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np

from szrank.ranker.proposals import PROPOSAL_FEATURES, load_ranker, train_listwise, train_ranker, write_records
from szrank.search.guided import (COMPARE_SEED, COMPARED, TRAINING, audited_runs, compare_guided, format_comparisons,
                                  pick_rates, proposal_corpus, ranking_auc, within_auc)


NEAR = np.log(1.1)   #: a member's source cost within 10 % of the population's best (feature `relative_cost`)


def audited(topologies, evaluations: int, seeds, workers: int) -> tuple[np.ndarray, np.ndarray]:
    "Features (K, N, F) and gains (K, N) of audited runs, one per (topology, seed), concatenated."
    return audited_runs([(t, evaluations, s) for t in topologies for s in seeds], workers)


def rankers(work: Path, args) -> dict:
    "The pointwise and listwise rankers' files, trained into `work` where they are not there yet."
    pointwise, listwise = args.model or work / "pointwise.sztpr", work / "listwise.sztpr"
    if not Path(pointwise).exists():
        started = time.perf_counter()
        records = proposal_corpus(25_600, 7, workers=args.workers)
        write_records(work / "proposals.sztp", records)
        train_ranker(records).save(pointwise)
        print(f"pointwise ranker: {len(records):,} records, {time.perf_counter() - started:.0f} s -> {pointwise}",
              flush=True)
    if not listwise.exists():
        started = time.perf_counter()
        features, gains = audited(TRAINING, args.train_evaluations, [7], args.workers)
        train_listwise(features, gains).save(listwise)
        print(f"listwise ranker: {gains.shape[1]:,} members' {gains.shape[0]} candidates from {len(TRAINING)} "
              f"training topologies, {time.perf_counter() - started:.0f} s -> {listwise}", flush=True)
    return {"pointwise": Path(pointwise), "listwise": listwise}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, required=True, help="rankers are kept (and reused) here")
    parser.add_argument("--model", type=Path, help="the pointwise SZTPR001 ranker (default: train one in --workdir)")
    parser.add_argument("--train-evaluations", type=int, default=6_400, help="audited, per training topology")
    parser.add_argument("--eval-topologies", default=",".join(map(str, COMPARED)), help="held-out, comma-separated")
    parser.add_argument("--seeds", type=int, default=3, help="audited runs a held-out topology")
    parser.add_argument("--evaluations", type=int, default=6_400, help="per audited held-out run")
    parser.add_argument("--compare", type=int, default=0, help="seeds a topology of the guided comparison (0: none)")
    parser.add_argument("--compare-evaluations", type=int, default=30_000)
    parser.add_argument("--workers", type=int, default=1, help="processes (the cores are shared)")
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    files = rankers(args.workdir, args)
    topologies = tuple(int(t) for t in args.eval_topologies.split(","))
    features, gains = audited(topologies, args.evaluations, range(COMPARE_SEED, COMPARE_SEED + args.seeds),
                              args.workers)
    print(f"\nheld-out topologies {topologies}: {gains.shape[1]:,} members' proposals, {gains.shape[0]} candidates each")
    scorers = {"first candidate (chance)": np.zeros(gains.shape), "smallest step": -features[..., 0]}
    scorers |= {f"{name} ranker": load_ranker(path).score(features) for name, path in files.items()}
    print(f"{'pick':<26} {'pooled AUC':>10} {'within AUC':>10} {'improves':>9} {'of the oracle':>13}")
    for name, scores in scorers.items():
        rates = pick_rates(scores, gains)
        lift = (rates["ranked"] - rates["first"]) / (rates["any"] - rates["first"])
        print(f"{name:<26} {ranking_auc(scores.ravel(), gains.ravel() > 0):>10.3f} {within_auc(scores, gains):>10.3f} "
              f"{rates['ranked']:>9.2%} {lift:>13.0%}")
    print(f"{'best of the candidates':<26} {'':>10} {'':>10} {(gains > 0).any(axis=0).mean():>9.2%} {'(oracle)':>13}")
    # New bests come from members near the population's best; far members are easy to improve and count little.
    relative = features[0, :, PROPOSAL_FEATURES.index("relative_cost")]
    for label, near in (("near the best (within 10 %)", relative < NEAR), ("far from it", relative >= NEAR)):
        print(f"\nmembers {label}: {near.sum():,}, the first candidate improves {(gains[0, near] > 0).mean():.2%}, "
              f"the best of the candidates {(gains[:, near] > 0).any(axis=0).mean():.2%}")
        for name, scores in scorers.items():
            rates = pick_rates(scores[:, near], gains[:, near])
            print(f"  {name:<24} within AUC {within_auc(scores[:, near], gains[:, near]):.3f}, "
                  f"its pick improves {rates['ranked']:.2%}")
    if args.compare:
        started = time.process_time()
        comparisons, auc = compare_guided(files["listwise"], args.compare_evaluations, args.compare, topologies,
                                          args.workers)
        print(f"\nlistwise ranker guiding the search ({time.process_time() - started:.0f} CPU s here):")
        print(format_comparisons(comparisons, args.compare_evaluations))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
