"""Evaluations per second of the reference defect evaluator (szrank.geometry), one core.

Prints, side by side with the issue's goal (>= 5,000 evaluations/s on one core):
full evaluation of one configuration, incremental evaluation of a single-plane
move, and full evaluation of a batch of replicas (per configuration).  No
assertions on time."""
from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")          # one core, as the goal says
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")

import numpy as np

from szrank.geometry import Evaluator, evaluate, layout, random_planes

GOAL = 5_000      # evaluations/s on one core (issue: reference search speed)


def rate(function, seconds: float) -> tuple[float, float]:
    "Calls per wall-clock second and per CPU second of this process (the machine may be shared)."
    count, started, cpu = 0, time.perf_counter(), time.process_time()
    while (elapsed := time.perf_counter() - started) < seconds:
        function()
        count += 1
    return count / elapsed, count / max(time.process_time() - cpu, 1e-9)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=3.0, help="time per measurement")
    parser.add_argument("--topology", type=int, default=47)
    parser.add_argument("--batch", type=int, default=64, help="replicas per batched evaluation")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    L = layout(args.topology)
    normals, offsets = random_planes(rng)
    full = rate(lambda: evaluate(normals, offsets, L), args.seconds)

    evaluator = Evaluator(normals, offsets, L)
    moves = [(int(rng.integers(12)), normals[p] + 0.1 * rng.standard_normal(3), 1.0 + 0.05 * rng.standard_normal())
             for p in rng.integers(0, 12, 256)]
    position = [0]

    def incremental():
        plane, normal, offset = moves[position[0] % len(moves)]
        position[0] += 1
        evaluator.propose(plane, normal, offset)

    incremental_rate = rate(incremental, args.seconds)
    batch_normals, batch_offsets = random_planes(rng, args.batch)
    batched = tuple(r * args.batch for r in rate(lambda: evaluate(batch_normals, batch_offsets, L), args.seconds))

    print(f"szrank reference evaluator, topology {args.topology}, one core (numpy {np.__version__})")
    print(f"load average {os.getloadavg()[0]:.1f} over {os.cpu_count()} cores: per CPU-second is the one-core figure")
    print(f"{'mode':<34}{'eval/s (wall)':>15}{'eval/CPU-s':>12}{'goal':>8}{'vs goal':>9}")
    for name, (wall, cpu) in (("full, one configuration", full), ("incremental single-plane move", incremental_rate),
                              (f"full, batch of {args.batch} replicas", batched)):
        print(f"{name:<34}{wall:>15,.0f}{cpu:>12,.0f}{GOAL:>8,}{cpu / GOAL:>8.2f}x")


if __name__ == "__main__":
    main()
