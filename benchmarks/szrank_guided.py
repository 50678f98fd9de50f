"""Ranker-guided against uniform annealed search: evaluations to reach a target on held-out topologies.

Trains the ranker the way the demo does: `--runs` uniform searches (seed `--seed`, random topologies),
exported and trained on with `szrank train` (its four reporting splits = the first four runs; the
demo's search-stage settings `szrank.demo.SEARCH_TRAINING`; `--force-deploy` only when the statistical
gate refuses the model, and the output says so).  Then, on topologies none of those runs searched
(`--eval-topologies`, held out of training), runs `--eval-seeds` seeds of each mode at the same
settings (the same evaluation budget, replicas, iterations and seeds, so the same starts):

  uniform   the uniform policy, every proposal rolled out (the unguided search);
  policy    the ranker's policy heads choose the proposals, every proposal rolled out;
  guided    policy heads, and the value head gates the rollouts (`szrank.search.moves.RankerPolicy`, gate 0.5:
            only proposals it ranks in the upper half of the last 64 get their replicas x iterations).

The budget is 1 + --eval-steps x (1 + replicas x iterations) evaluations per run; a guided run takes the
steps that budget allows when half the rollouts are skipped (as `szrank search --evaluations` plans it),
so its temperature schedule spans the same budget.

The target per topology is the uniform runs' median final best C+I.  For every run the evaluations
until its best first reaches the target (never: inf) are read from its events
(1 + sum of 1 + replica_count x rollout_iterations); the figure is their lower median over seeds (an
actual run's figure), guided
against uniform (goal: at least 30 % fewer).  The median best C+I against evaluations (the curves)
is printed too.  No assertions: the figures are reported whichever way they come out.

    nice -n 10 python benchmarks/szrank_guided.py --workdir /tmp/guided              # train, then measure
    nice -n 10 python benchmarks/szrank_guided.py --workdir /tmp/guided --model /tmp/guided/model/current.sztf
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from szrank.demo import GATE_MINIMUM_RECORDS, SEARCH_TRAINING
from szrank.search.execution import _plan, run_searches
from szrank.search.moves import RankerPolicy, UniformPolicy
from szrank.search.runs import best_curve, evaluations_to_reach, run_search

GOAL_SAVING = 0.30
MODES = ("uniform", "policy", "guided")


def best_by(used: np.ndarray, best: np.ndarray, checkpoint: int) -> int:
    seen = np.flatnonzero(used <= checkpoint)
    return int(best[seen[-1]]) if seen.size else int(best[0])


def train(work: Path, args) -> tuple[Path, str, set]:
    "Uniform training runs, `szrank train` on them; the model, a note on the gate, the topologies searched."
    szrank = str(Path(sys.executable).with_name("szrank"))
    runs = run_searches(work / "train-archive", args.runs, args.steps, args.seed, None, None, args.replicas,
                        args.iterations, args.workers, show_progress=False)
    names = ("train", "validation", "test", "stress")
    (work / "splits.json").write_text(json.dumps({n: s.run_id for n, s in zip(names, runs)}))
    flags = [part for name, value in SEARCH_TRAINING.items() for part in (f"--{name.replace('_', '-')}", str(value))]
    command = [szrank, "train", "--archive-root", str(work / "train-archive"), "--split-runs", str(work / "splits.json"),
               "--output-directory", str(work / "model"), "--snapshot-directory", str(work / "snapshot"),
               "--device", "cpu", "--minimum-gate-records", str(min(GATE_MINIMUM_RECORDS, args.steps)), *flags]
    trained = subprocess.run(command, capture_output=True, text=True)
    note = "gate passed"
    if trained.returncode == 4:
        note = "statistical gate refused it; published with --force-deploy"
        trained = subprocess.run(command + ["--force-deploy"], capture_output=True, text=True)
    if trained.returncode != 0:
        sys.exit(f"szrank train failed ({trained.returncode}): {trained.stderr[-2000:]}")
    (work / "train-topologies.json").write_text(json.dumps(sorted({s.topology for s in runs})))
    return work / "model" / "current.sztf", note, {s.topology for s in runs}


def evaluate_modes(work: Path, model: Path, topologies, args) -> dict:
    "mode -> topology -> list of curves over the seeds."
    out = {mode: {t: [] for t in topologies} for mode in args.modes}
    budget = 1 + args.eval_steps * (1 + args.replicas * args.iterations)
    for mode in args.reuse:
        for topology in topologies:
            for seed in range(1, args.eval_seeds + 1):
                out[mode][topology].append(best_curve(work / f"eval-{mode}", reused_run(work / f"eval-{mode}", topology, seed)))
    for mode in [m for m in args.modes if m not in args.reuse]:
        gate = args.gate if mode == "guided" else 0.0
        steps = _plan("anneal", 1, None, budget, args.replicas, args.iterations, gate)
        archive = work / f"eval-{mode}"
        shutil.rmtree(archive, ignore_errors=True)              # the benchmark's own folder: a re-run starts afresh
        for topology in topologies:
            for seed in range(1, args.eval_seeds + 1):
                policy = UniformPolicy() if mode == "uniform" else RankerPolicy(model, gate=gate)
                summary = run_search(archive, topology, steps, 1000 + seed, topology, policy, args.replicas,
                                     args.iterations, budget=budget)
                out[mode][topology].append(best_curve(archive, summary.run_id))
                print(f"  {mode:<8} topology {topology} seed {seed}: best {summary.best_total}, "
                      f"{summary.evaluations:,} evaluations, {summary.seconds:.0f} s", flush=True)
    return out


def reused_run(archive: Path, topology: int, seed: int) -> str:
    "The run id of an earlier evaluation run (topology, seed) in `archive`."
    from szrank.search.archive import list_runs, run_metadata
    for run_id in list_runs(archive):
        metadata = run_metadata(archive / str(run_id))
        if metadata["topology"] == topology and metadata["seed"] == 1000 + seed:
            return str(run_id)
    sys.exit(f"--reuse: no run of topology {topology}, seed {seed} in {archive}")


def lower_median(values) -> float:
    ordered = sorted(values)
    return float(ordered[(len(ordered) - 1) // 2])


def report(curves: dict, topologies, args) -> None:
    for topology in topologies:
        target = float(np.median([c[1][-1] for c in curves["uniform"][topology]]))
        print(f"\ntopology {topology} (the paper's #{topology + 1}), held out of training; {args.eval_seeds} seeds x "
              f"{args.eval_steps} steps; target C+I <= {target:g} (the uniform runs' median final best)")
        reach = {mode: [evaluations_to_reach(c, target) for c in curves[mode][topology]] for mode in args.modes}
        last = max(int(c[0][-1]) for mode in args.modes for c in curves[mode][topology])
        checkpoints = [int(last * f) for f in (0.05, 0.1, 0.2, 0.4, 0.6, 0.8, 1.0)]
        print(f"{'mode':<9}{'median evals to target':>24}{'reached':>9}{'total evals (median)':>22}  "
              "median best C+I at " + ", ".join(f"{c:,}" for c in checkpoints))
        for mode in args.modes:
            medians = [np.median([best_by(*c, k) for c in curves[mode][topology]]) for k in checkpoints]
            total = np.median([c[0][-1] for c in curves[mode][topology]])
            print(f"{mode:<9}{lower_median(reach[mode]):>24,.0f}{np.isfinite(reach[mode]).sum():>6}/{args.eval_seeds:<2}"
                  f"{total:>22,.0f}  " + ", ".join(f"{m:g}" for m in medians))
        u, g = lower_median(reach["uniform"]), lower_median(reach["guided"])
        saving = 1 - g / u if np.isfinite(u) and u > 0 else float("nan")     # -inf: guided's median never reached it
        print(f"guided needs {saving:+.0%} fewer evaluations to the target than uniform (lower median over seeds; "
              f"goal >= {GOAL_SAVING:.0%}: {'met' if saving >= GOAL_SAVING else 'not met'})")
        print(f"per seed, evaluations to target ({' / '.join(args.modes)}): " + "; ".join(
            "/".join("-" if not np.isfinite(reach[m][k]) else f"{reach[m][k]:,.0f}" for m in args.modes)
            for k in range(args.eval_seeds)))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=6, help="uniform training runs (>= 4: the trainer's splits)")
    parser.add_argument("--steps", type=int, default=3000, help="steps per training run = records per split")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--seed", type=int, default=7, help="seed of the training runs")
    parser.add_argument("--workers", type=int, default=1, help="training search processes (the cores are shared)")
    parser.add_argument("--model", type=Path, help="use this model (its training topologies from --workdir) and skip training")
    parser.add_argument("--eval-topologies", default="42", help="comma-separated; any that a training run searched is skipped")
    parser.add_argument("--eval-seeds", type=int, default=10)
    parser.add_argument("--eval-steps", type=int, default=1500)
    parser.add_argument("--modes", default=",".join(MODES), type=lambda text: text.split(","),
                        help="comma-separated, from uniform, policy, guided (uniform and guided are needed)")
    parser.add_argument("--reuse", default=[], type=lambda text: text.split(","),
                        help="modes whose evaluation runs are read from --workdir, not run again (same settings)")
    parser.add_argument("--gate", type=float, default=0.5, help="the guided mode's value-gate quantile")
    parser.add_argument("--workdir", type=Path, help="keep archives and model here (default: a temporary folder)")
    args = parser.parse_args()
    if args.runs < 4:
        parser.error("--runs must be at least 4")
    if not {"uniform", "guided"} <= set(args.modes) <= set(MODES):
        parser.error(f"--modes must include uniform and guided, from {', '.join(MODES)}")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="szrank-guided-"))
    work.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    if args.model:
        model, note = args.model, "given"
        trained_on = set(json.loads((work / "train-topologies.json").read_text()))
    else:
        model, note, trained_on = train(work, args)
    print(f"model {model} ({note}); trained on topologies {sorted(trained_on)}; "
          f"{time.perf_counter() - started:.0f} s", flush=True)
    topologies = [t for t in map(int, args.eval_topologies.split(",")) if t not in trained_on]
    if not topologies:
        sys.exit("every --eval-topologies topology was searched by a training run: none is held out")
    curves = evaluate_modes(work, model, topologies, args)
    report(curves, topologies, args)
    print(f"archives and model: {work}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
