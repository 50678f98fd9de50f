"""Uniform against ranker-guided logging policy on the reference search, same budget.

Runs `--runs` uniform searches, exports them and trains the ranker on them
(`szrank train`, its four reporting splits = the first four uniform runs),
then repeats the searches with the published model guiding the policy: same
seeds, so the same topologies and the same starts, and the same evaluation
budget (steps x (1 + replicas x iterations)).  Prints, side by side, the median
best C+I per run and the evaluations each policy needed to reach the uniform
policy's median.  No assertions: the figures are reported whichever way they
come out.  Training uses the demo's search-stage settings
(`szrank.demo.SEARCH_TRAINING`) and the gate's 1000-record minimum (or the split
size, if smaller); `--force-deploy` is used only when the statistical gate
refuses the model, and the output says so."""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from szrank.archive import list_runs, read_run
from szrank.demo import GATE_MINIMUM_RECORDS, SEARCH_TRAINING
from szrank.search import run_searches


def trajectories(archive: Path) -> dict[str, np.ndarray]:
    "Per run: best C+I after each step (the start counts as the best before step 0)."
    out = {}
    for run_id in list_runs(archive):
        metadata, events = read_run(archive, run_id)
        feasible = (events["flags"][:, 3] & 1) == 0
        result = np.where(feasible, events["result_defects"].sum(axis=1), np.iinfo(np.int32).max)
        out[str(run_id)] = np.minimum.accumulate(np.minimum(result, events["best_before"]))
    return out


def evaluations_to_reach(best: np.ndarray, target: float, per_step: int) -> float:
    "Evaluations until the run's best C+I is <= target (inf if never)."
    hit = np.flatnonzero(best <= target)
    return float(1 + (hit[0] + 1) * per_step) if hit.size else float("inf")


def lower_median(values) -> float:
    "The lower median (an actual run's value; runs that never reach the target count as inf)."
    ordered = sorted(values)
    return float(ordered[(len(ordered) - 1) // 2])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=6, help="runs per policy (>= 4: the trainer's splits)")
    parser.add_argument("--steps", type=int, default=3000, help="steps per run = records per split")
    parser.add_argument("--replicas", type=int, default=2)
    parser.add_argument("--iterations", type=int, default=4)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workers", type=int, default=1, help="search processes (the cores are shared)")
    parser.add_argument("--workdir", type=Path, help="keep archives and model here (default: a temporary folder)")
    args = parser.parse_args()
    if args.runs < 4:
        parser.error("--runs must be at least 4")
    work = args.workdir or Path(tempfile.mkdtemp(prefix="szrank-guided-"))
    work.mkdir(parents=True, exist_ok=True)
    per_step = 1 + args.replicas * args.iterations
    szrank = str(Path(sys.executable).with_name("szrank"))

    started = time.perf_counter()
    uniform = run_searches(work / "uniform", args.runs, args.steps, args.seed, None, None, args.replicas,
                           args.iterations, args.workers, show_progress=False)
    uniform_seconds = time.perf_counter() - started
    names = ("train", "validation", "test", "stress")
    (work / "splits.json").write_text(json.dumps({n: s.run_id for n, s in zip(names, uniform)}))
    flags = [part for name, value in SEARCH_TRAINING.items() for part in (f"--{name.replace('_', '-')}", str(value))]
    # no --exporter: the trainer finds `szrank export` itself
    command = [szrank, "train", "--archive-root", str(work / "uniform"),
               "--split-runs", str(work / "splits.json"), "--output-directory", str(work / "model"),
               "--snapshot-directory", str(work / "snapshot"), "--device", "cpu",
               "--minimum-gate-records", str(min(GATE_MINIMUM_RECORDS, args.steps)), *flags]
    started = time.perf_counter()
    trained = subprocess.run(command, capture_output=True, text=True)
    forced = False
    if trained.returncode == 4:                      # the gate refused: publish anyway, and say so
        forced = True
        trained = subprocess.run(command + ["--force-deploy"], capture_output=True, text=True)
    train_seconds = time.perf_counter() - started
    if trained.returncode != 0:
        print(trained.stderr[-3000:], file=sys.stderr)
        return trained.returncode
    model = work / "model" / "current.sztf"
    started = time.perf_counter()
    guided = run_searches(work / "guided", args.runs, args.steps, args.seed, str(model), None, args.replicas,
                          args.iterations, args.workers, show_progress=False)
    guided_seconds = time.perf_counter() - started

    u_best = np.array([s.best_total for s in uniform])
    g_best = np.array([s.best_total for s in guided])
    target = float(np.median(u_best))
    u_traj, g_traj = trajectories(work / "uniform"), trajectories(work / "guided")
    u_reach = [evaluations_to_reach(u_traj[s.run_id], target, per_step) for s in uniform]
    g_reach = [evaluations_to_reach(g_traj[s.run_id], target, per_step) for s in guided]

    print(f"szrank reference search: {args.runs} runs x {args.steps} steps, replicas {args.replicas}, "
          f"iterations {args.iterations} ({1 + args.steps * per_step} evaluations per run), seed {args.seed}")
    print(f"model trained on the uniform runs in {train_seconds:.0f} s"
          + (" (statistical gate refused it; published with --force-deploy)" if forced else " (gate passed)"))
    print(f"{'':<38}{'uniform':>10}{'guided':>10}")
    print(f"{'median best C+I per run':<38}{np.median(u_best):>10g}{np.median(g_best):>10g}")
    print(f"{'mean best C+I per run':<38}{u_best.mean():>10.2f}{g_best.mean():>10.2f}")
    print(f"{'lower-median evaluations to reach ' + format(target, 'g'):<38}{lower_median(u_reach):>10g}{lower_median(g_reach):>10g}")
    print(f"{'runs reaching it':<38}{np.isfinite(u_reach).sum():>10}{np.isfinite(g_reach).sum():>10}")
    print(f"{'search wall time (s)':<38}{uniform_seconds:>10.1f}{guided_seconds:>10.1f}")
    print("per run (topology: uniform best / guided best):",
          ", ".join(f"{u.topology}: {u.best_total}/{g.best_total}" for u, g in zip(uniform, guided)))
    print(f"archives and model: {work}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
