"""A continuous tie-breaker for the population search: does steering members toward shallower defects help?

The search's cost is the count C+I (`szrank.search.population.costs`), flat over wide regions of the
parameters.  This runs the same symmetric runs (seeds `--seed` + run) twice: with that cost, and with
C+I + w * D / (1 + D), where D is the summed depth of the configuration's defects by the strict rule
(`szrank.geometry.defects`):

- a crossing's depth: the least distance of its four segment ends from the other segment's line;
- an intersection's depth: the nearer end of the piercing edge's distance from the pierced plane;

in units of the planes' RMS offset, so that D does not change with the configuration's scale.  It prints,
per mode, how often each best C+I came out, the mean best and the CPU seconds, and then the plain search
again with as many more evaluations as the tie-breaker's CPU time buys (the comparison at equal CPU).  The tie-breaker is
imposed by replacing the module's `costs` for the second mode (the search itself has no such option:
it was tried here and not adopted; see the population notebook).  No assertions: it is a benchmark.

    nice -n 10 python benchmarks/szrank_tiebreak.py --topology 11 --runs 32 --evaluations 30000 --weight 0.9
"""
from __future__ import annotations

import argparse
import collections
import time

import numpy as np

import szrank.search.population as population
from szrank.geometry import defects
from szrank.geometry.symmetry import symmetry_of

PLAIN_COSTS = population.costs


def defect_depth(x: np.ndarray, L) -> np.ndarray:
    "D (B,): the summed depth of the crossings and intersections of configurations x (B, 36), strict rule."
    normals, offsets = population.planes_from_x(x)
    offsets = offsets / np.sqrt(np.mean(offsets * offsets, axis=-1))[:, None]
    vertices, _, _ = defects.dual_vertices(normals, offsets, L.triangles)
    S = defects.signed_distances(vertices, normals, offsets, L)
    index, B = defects._flat_indices(L), S.shape[0]
    flat = S.reshape(B, -1)
    r, s, p, q = np.abs(np.take(flat, index["cross"], axis=1)).transpose(1, 0, 2, 3)
    cross, pierce, _ = defects._pair_tests(L, S)
    crossing_depth = np.minimum(np.minimum(r, s), np.minimum(p, q)).reshape(B, -1)
    piercing_depth = np.minimum(np.abs(np.take(flat, index["P"], axis=1)), np.abs(np.take(flat, index["Q"], axis=1)))
    total = np.where(cross, crossing_depth, 0).sum(1) + np.where(pierce, piercing_depth.reshape(B, -1), 0).sum(1)
    return np.nan_to_num(total, nan=1e3, posinf=1e3)


def tie_broken_costs(weight: float):
    "A `costs` replacement: C+I + weight * D / (1 + D), `INFEASIBLE` kept as it is."
    def costs(x, L):
        count = PLAIN_COSTS(x, L)
        depth = defect_depth(np.atleast_2d(x), L)
        return np.where(count >= population.INFEASIBLE, count, count + weight * depth / (1 + depth))
    return costs


def run_mode(name: str, args, evaluations: int) -> tuple[str, float]:
    "The `--runs` symmetric runs with `population.costs` as it is now: one line of results, the CPU seconds."
    symmetry = symmetry_of(args.topology, args.order) if args.order else symmetry_of(args.topology)
    bests, started = collections.Counter(), time.process_time()
    for run in range(args.runs):
        result = population.population_search(args.topology, evaluations, seed=args.seed + run, symmetry=symmetry)
        bests[int(result.best_total)] += 1            # the run keeps the fractional cost; its count is the floor
    mean = sum(total * count for total, count in bests.items()) / args.runs
    shown = ", ".join(f"{total}: {count}" for total, count in sorted(bests.items()))
    seconds = time.process_time() - started
    return f"  {name:<28} {symmetry.name:>2} | {shown} | mean {mean:.2f} | {seconds:.0f} CPU s", seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topology", type=int, default=11, help="0..58 (default 11, the paper's #12)")
    parser.add_argument("--order", type=int, help="the symmetry's order (default its largest)")
    parser.add_argument("--runs", type=int, default=32)
    parser.add_argument("--evaluations", type=int, default=30_000, help="budget per run")
    parser.add_argument("--weight", type=float, default=0.9, help="w, below 1 so that the count always decides")
    parser.add_argument("--seed", type=int, default=7000)
    args = parser.parse_args()
    if not 0 < args.weight < 1:
        parser.error("--weight must lie in (0, 1)")
    print(f"topology {args.topology} (#{args.topology + 1}): best C+I of {args.runs} symmetric runs of "
          f"{args.evaluations:,} evaluations (seeds {args.seed}..{args.seed + args.runs - 1})", flush=True)
    line, plain_seconds = run_mode("count", args, args.evaluations)
    print(line, flush=True)
    population.costs = tie_broken_costs(args.weight)
    try:
        line, tied_seconds = run_mode(f"count + {args.weight} D", args, args.evaluations)
        print(line, flush=True)
    finally:
        population.costs = PLAIN_COSTS
    same_cpu = int(round(args.evaluations * tied_seconds / plain_seconds, -3))
    line, _ = run_mode(f"count, {same_cpu:,} evaluations", args, same_cpu)   # the plain search in the same CPU time
    print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
