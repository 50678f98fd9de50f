"""Search strength and speed: best C+I against evaluations for each strategy, and evaluations per second per core.

For each topology (0-based, the paper's numbering: 42 is the paper's #43, the public solver's
"topology 42") and seed, runs the annealed, the population and the symmetric strategy on the same
evaluation budget and prints the best C+I reached by each checkpoint and the evaluations each run
needed to reach C+I <= 8, 6 and 4, then the median over seeds against the issue's goals: on #43,
median best C+I <= 8 within 3 million evaluations over 5 seeds; C+I <= 6 within 10 million in at
least 3 of 5 seeds; the record C+I <= 4 within 100 million in at least one; and >= 16,000
evaluations per second per core.  Per core means per CPU-second of the worker (the machine may be
shared: wall-clock rates are printed beside).  `--stop-at T` ends population and symmetric runs
once their best is <= T (the record is 4: a run that reaches it stops using CPU; its best is then
"<= T" for the checkpoints after).  Long runs are benchmarks, not tests:

    nice python benchmarks/szrank_search.py                                  # short: 3 topologies x 3 seeds
    nice python benchmarks/szrank_search.py --topologies 37,42,58 --seeds 5 --evaluations 10000000 \
        --strategies symmetric --stop-at 4 --workers 1
    nice python benchmarks/szrank_search.py --topologies 42 --seeds 5 --evaluations 3000000 --strategies population
    nice python benchmarks/szrank_search.py --topologies all --seeds 1 --evaluations 1000000 --strategies symmetric

Beside the public C++ solver (`--public-solver PATH`: its binary, built from its source with the patch
that takes seed, topology and budget from the command line): both run the same budget on the same
topology and seed, one after the other, pinned to the same core, and the rate of each (evaluations per
CPU-second of its own process) and their ratio are printed in one run.  Without the option that
comparison is skipped.

    nice python benchmarks/szrank_search.py --public-solver ~/szilassi/szilassi --topologies 4,42 --seeds 2 \
        --evaluations 300000 --strategies population
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")          # one core per worker
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np

GOAL_MEDIAN_BEST = 8          # on #43 (index 42), median over 5 seeds, within 3 million evaluations
GOAL_RATE = 16_000            # evaluations per second per core
GOAL_SIX = (6, 10_000_000, 3)      # C+I <= 6 within 10 million evaluations in at least 3 of 5 seeds
GOAL_RECORD = (4, 100_000_000, 1)  # the record C+I <= 4 within 100 million in at least one seed
REACH = (8, 6, 4)
CHECKPOINTS = (10_000, 30_000, 100_000, 300_000, 1_000_000, 3_000_000, 10_000_000, 30_000_000, 100_000_000)


def best_at(history, checkpoints):
    "Best C+I reached by each checkpoint from (evaluations, best) pairs; None before the first."
    return [min((b for e, b in history if e <= c), default=None) for c in checkpoints]


def anneal(topology: int, seed: int, budget: int):
    "History (evaluations, best C+I) of an annealed run, from its logged events."
    from szrank.search.archive import read_run
    from szrank.search.runs import DEFAULT_ITERATIONS, DEFAULT_REPLICAS, run_search
    import uuid
    per_step = 1 + DEFAULT_REPLICAS * DEFAULT_ITERATIONS
    steps = -(-max(budget - 1, 1) // per_step)          # the temperature schedule spans the whole budget
    with tempfile.TemporaryDirectory() as folder:
        summary = run_search(Path(folder), topology, steps, seed, 0, budget=budget)
        _, events = read_run(Path(folder), uuid.UUID(summary.run_id))
    totals = events["result_defects"].astype(np.int64).sum(axis=1)
    history, best = [(1, summary.start_total)], summary.start_total
    for k, total in enumerate(totals):
        if total < best:
            best = int(total)
            history.append((1 + (k + 1) * per_step, best))
    return history, summary.evaluations


def population(topology: int, seed: int, budget: int, stop_at: int = 0, symmetric: bool = False):
    from szrank.search.population import population_search
    from szrank.geometry.symmetry import symmetry_of
    result = population_search(topology, budget, seed, symmetry=symmetry_of(topology) if symmetric else None,
                               target=stop_at)
    return result.history, result.evaluations


def reached(history, target: int):
    "Evaluations when the best first was <= target (None if never)."
    return next((e for e, b in history if b <= target), None)


def one(task):
    strategy, topology, seed, budget, stop_at = task
    cpu, wall = time.process_time(), time.perf_counter()
    if strategy == "anneal":
        history, used = anneal(topology, seed, budget)
    else:
        history, used = population(topology, seed, budget, stop_at, strategy == "symmetric")
    return strategy, topology, seed, history, used, time.process_time() - cpu, time.perf_counter() - wall


def counting_rates(seconds: float = 2.0) -> list[tuple[str, float, float]]:
    "Configurations counted per CPU-second and per wall second, batch of 32, by each counter."
    from szrank.geometry.fastcount import FAST_BACKEND, count_totals
    from szrank.geometry.defects import evaluate, evaluate_exact, layout, random_planes
    L = layout(42)
    normals, offsets = random_planes(np.random.default_rng(0), 32)
    rows = []
    for name, function in ((f"fastcount.count_totals ({FAST_BACKEND})", count_totals),
                           ("geometry.evaluate (numpy, public rule)", evaluate),
                           ("geometry.evaluate_exact (numpy, strict rule)", evaluate_exact)):
        function(normals, offsets, L)
        count, cpu, wall = 0, time.process_time(), time.perf_counter()
        while time.perf_counter() - wall < seconds:
            function(normals, offsets, L)
            count += 32
        rows.append((name, count / max(time.process_time() - cpu, 1e-9), count / (time.perf_counter() - wall)))
    return rows


PUBLIC_TOPOLOGIES = Path(__file__).resolve().parents[1] / "tests" / "data" / "szilassi" / "public_solver" / "topologies.txt"
SUMMARY = re.compile(r"SUMMARY seed (\d+) topology (\d+) elapsed_s (\S+) cpu_s (\S+) evals (\d+) .* best (\d+)")


def public_run(binary: Path, topology: int, seed: int, budget: int) -> tuple[int, float, int]:
    """(evaluations, CPU seconds, best C+I) of one run of the public solver's binary, in a scratch folder
    holding its `topologies.txt` (it reads the file from its working directory)."""
    with tempfile.TemporaryDirectory() as folder:
        shutil.copy(PUBLIC_TOPOLOGIES, Path(folder) / "topologies.txt")
        out = subprocess.run([str(binary), str(seed), str(topology), str(budget), "0"], cwd=folder,
                             capture_output=True, text=True, check=True).stdout
    match = SUMMARY.search(out)
    if match is None:
        raise SystemExit(f"{binary}: no SUMMARY line in its output (is it built with linux_bench.patch?)")
    return int(match[5]), float(match[4]), int(match[6])


def beside_public(binary: Path, topologies, seeds: int, budget: int) -> None:
    "Our population search (the public solver's optimiser) and the C++ solver, same core, same budget, one after the other."
    core = sorted(os.sched_getaffinity(0))[-1]
    os.sched_setaffinity(0, {core})          # this process and the binary it starts share one core
    print(f"\nbeside the public C++ solver ({binary}), core {core}, {budget:,} evaluations a run")
    print(f"{'topo':>5}{'seed':>5}{'ours evals/CPU-s':>18}{'C++ evals/CPU-s':>17}{'ratio':>7}{'ours best':>10}{'C++ best':>9}")
    ratios = []
    for topology in topologies:
        for seed in range(1, seeds + 1):
            _, _, _, history, used, cpu, _ = one(("population", topology, seed, budget, 0))
            public_evals, public_cpu, public_best = public_run(binary, topology, seed, budget)
            ours, theirs = used / cpu, public_evals / public_cpu
            ratios.append(ours / theirs)
            print(f"{topology:>5}{seed:>5}{ours:>18,.0f}{theirs:>17,.0f}{ours / theirs:>7.2f}{history[-1][1]:>10}{public_best:>9}",
                  flush=True)
    print(f"  median ratio ours / C++: {np.median(ratios):.2f} over {len(ratios)} runs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topologies", default="37,42,58", help="comma-separated 0-based indices, or 'all'")
    parser.add_argument("--seeds", type=int, default=3, help="seeds 1..N per topology and strategy")
    parser.add_argument("--evaluations", type=int, default=100_000, help="budget per run")
    parser.add_argument("--anneal-evaluations", type=int, help="budget of annealed runs (default: --evaluations)")
    parser.add_argument("--strategies", default="anneal,population,symmetric")
    parser.add_argument("--stop-at", type=int, default=0, help="end population/symmetric runs at this best C+I")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--public-solver", type=Path, help="the public C++ solver's binary (see the docstring): "
                        "run it beside our population search on the same core and print the ratio of rates")
    parser.add_argument("--plan", choices=("issue",), help="issue: the issue's figures in one pool (population on #43, "
                        "5 seeds x 3M; population on all 59 at 1M; anneal on 37, 42, 58, 3 seeds x --anneal-evaluations)")
    args = parser.parse_args()
    topologies = list(range(59)) if args.topologies == "all" else [int(t) for t in args.topologies.split(",")]
    strategies = args.strategies.split(",")
    tasks = [(s, t, seed, (args.anneal_evaluations or args.evaluations) if s == "anneal" else args.evaluations,
              args.stop_at) for t in topologies for s in strategies for seed in range(1, args.seeds + 1)]
    if args.plan == "issue":
        tasks = ([("population", 42, seed, 3_000_000, 0) for seed in range(1, 6)]
                 + [("anneal", t, seed, args.anneal_evaluations or 200_000, 0) for t in (37, 42, 58) for seed in (1, 2, 3)]
                 + [("population", t, 101, 1_000_000, 0) for t in range(59)])
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {len(tasks)} runs, {args.workers} workers")
    for name, cpu, wall in counting_rates():
        print(f"  counting: {name:<46} {cpu:>9,.0f} /CPU-s {wall:>9,.0f} /wall-s  (goal {GOAL_RATE:,}/core)")
    from concurrent.futures import as_completed
    results = []
    with ProcessPoolExecutor(args.workers) as pool:
        for future in as_completed([pool.submit(one, task) for task in tasks]):
            strategy, topology, seed, history, used, cpu, wall = result = future.result()
            results.append(result)
            print(f"  done: {strategy} topology {topology} seed {seed}: best C+I {history[-1][1]} after "
                  f"{history[-1][0]} evaluations (of {used}), {used / cpu:,.0f} evaluations/CPU-s", flush=True)
    results.sort(key=lambda r: (r[0], r[1], r[2], r[4]))
    report(results, args)
    if args.public_solver:
        beside_public(args.public_solver, topologies, args.seeds, args.evaluations)


def report(results, args) -> None:
    budget = max(r[4] for r in results)
    checkpoints = sorted({c for c in CHECKPOINTS if c <= budget} | {budget})
    head = "".join(f"{c:>9,}"[-9:] if c < 10 ** 6 else f"{c / 1e6:>8g}M" for c in checkpoints)
    reach_head = "".join(f"{'to <=' + str(t):>11}" for t in REACH)
    print(f"\nbest C+I by evaluations (topology 0-based = paper's # - 1; '<=' once a run stopped at --stop-at)\n"
          f"{'strategy':<11}{'topo':>5}{'seed':>5}{head}{reach_head}{'evals/CPU-s':>13}{'evals/s':>9}")
    for strategy, topology, seed, history, used, cpu, wall in results:
        stopped = args.stop_at and history[-1][1] <= args.stop_at
        cells = "".join(f"{'-' if b is None else ('<=' if stopped and c > used else '') + str(b):>9}"
                        for b, c in zip(best_at(history, checkpoints), checkpoints))
        reach = "".join(f"{'-' if reached(history, t) is None else format(reached(history, t), ','):>11}" for t in REACH)
        print(f"{strategy:<11}{topology:>5}{seed:>5}{cells}{reach}{used / cpu:>13,.0f}{used / wall:>9,.0f}")
    print("\nmedian best C+I over seeds at the budget")
    for strategy in sorted({r[0] for r in results}):
        rows = [r for r in results if r[0] == strategy]
        budget = max(max(r[4] for r in rows), args.evaluations if strategy != "anneal" and args.stop_at else 0)
        print(f"  {strategy} at {budget:,} evaluations, {len(rows)} runs:")
        by_topology = {}
        for _, topology, _, history, _, _, _ in rows:
            by_topology.setdefault(topology, []).append(history[-1][1])
        finals = [b for values in by_topology.values() for b in values]
        rate = sum(r[4] for r in rows) / sum(r[5] for r in rows)
        print(f"  {strategy:<11} " + ", ".join(f"#{t + 1}: {np.median(v):g}" for t, v in sorted(by_topology.items()))
              + f"; all runs median {np.median(finals):g}; {rate:,.0f} evaluations/CPU-s")
        if 42 in by_topology:
            median = float(np.median(by_topology[42]))
            print(f"  {'':<11} goal on #43: median <= {GOAL_MEDIAN_BEST} within 3M evaluations over 5 seeds -> "
                  f"{median:g} over {len(by_topology[42])} seeds at {budget:,} evaluations "
                  f"({'fewer than 5 seeds' if len(by_topology[42]) < 5 else 'met' if median <= GOAL_MEDIAN_BEST else 'not met'})")
            goals(strategy, [r for r in rows if r[1] == 42])


def goals(strategy: str, rows) -> None:
    "The issue's goals on #43 from the runs' curves (a run that stopped early counts its best from then on)."
    three = [min((b for e, b in r[3] if e <= 3_000_000), default=None) for r in rows]
    if None not in three and len(rows) >= 5:
        print(f"  {'':<11} median best C+I within 3M evaluations over {len(rows)} seeds: {np.median(three):g} "
              f"(goal <= {GOAL_MEDIAN_BEST}: {'met' if np.median(three) <= GOAL_MEDIAN_BEST else 'not met'})")
    for target, budget, needed in (GOAL_SIX, GOAL_RECORD):
        hits = [reached(r[3], target) for r in rows]
        within = sum(h is not None and h <= budget for h in hits)
        longest = max(r[4] for r in rows)
        print(f"  {'':<11} C+I <= {target} within {budget / 1e6:g}M evaluations: {within} of {len(rows)} seeds "
              f"(evaluations {', '.join('-' if h is None else format(h, ',') for h in hits)}; runs up to "
              f"{longest:,}) (goal >= {needed} of 5: {'fewer than 5 seeds' if len(rows) < 5 else 'met' if within >= needed else 'not met' if longest >= budget else 'open'})")


if __name__ == "__main__":
    main()
