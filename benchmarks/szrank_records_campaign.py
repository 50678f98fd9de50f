"""A records campaign: the searches that improve `szrank/records`, per topology, and what each one gave.

Two kinds of search, both through the `szrank` command line (so every record keeps the command that repeats it):

1. sweep   topologies with a symmetry (C2, C3, S4): `szrank search --strategy symmetric --runs R --evaluations E`
           (default 60 runs of 30,000 evaluations; --order 2: the C2 inside an S4 or beside a C3).  Many short runs: the restart ladder and the random first
           draws matter more than a long run (on #5, 1 run in 60 reached C+I 2 within 30,000 evaluations).
2. refine  every topology: `szrank search --strategy population --start OBJ --sigma 0.1 --evaluations 1e6`, OBJ being
           the topology's record or, where it counts fewer, the public solver's best sound saved configuration in
           `tests/data/szilassi/public_solver` (MIT).  A run from a shape reports that shape or a better sound one.

Every archive is offered to `szrank records update` on a copy of the records (--records-out; the shipped folder
is never touched unless you name it).  Prints one line per search (topology, kind, seed, best C+I, recorded or
not, CPU seconds) and the table's median before and after.  No assertions: it is a benchmark.

    nice -n 10 python benchmarks/szrank_records_campaign.py --work /tmp/campaign --records-out /tmp/records \\
        --topologies 4,52,55 --kinds sweep --seeds 100,200
"""
from __future__ import annotations

import argparse
import json
import resource
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

from szrank.geometry.symmetry import symmetry_of
from szrank.geometry.topology import TOPOLOGY_COUNT
from szrank.plumbing.errors import OptionError
from szrank.search.records import RECORDS_DIR, degeneracy, measure, read_table

REPO = Path(__file__).resolve().parents[1]
PUBLIC = REPO / "tests" / "data" / "szilassi" / "public_solver"       # the public solver's saved shapes (MIT)
SZRANK = [str(Path(sys.executable).parent / "szrank")]             # the console script of this environment


def szrank(*argv) -> subprocess.CompletedProcess:
    return subprocess.run([*SZRANK, *map(str, argv)], capture_output=True, text=True)


def public_start(topology: int) -> tuple[int, Path] | None:
    "The public solver's saved shape of `topology` with the fewest C+I that is not degenerate, or None."
    best = None
    for path in sorted((PUBLIC / f"topology_{topology}").glob("*.obj")):
        measured = measure(path, topology)
        if degeneracy(measured) is None and (best is None or measured["total"] < best[0]):
            best = (measured["total"], path)
    return best


def start_of(records: Path, topology: int) -> Path:
    "The shape a refinement of `topology` begins at: its record, or the public start where that counts fewer."
    record = read_table(records).get(topology)
    public = public_start(topology)
    if record is None or (public is not None and public[0] < record["total"]):
        return public[1]
    return records / record["file"]


def search(work: Path, records: Path, topology: int, kind: str, seed: int, args) -> str:
    "One search and its records update; the line that reports them."
    archive = work / f"{kind}_t{topology}_s{seed}"
    shutil.rmtree(archive, ignore_errors=True)
    if kind == "sweep":
        flags = ["--strategy", "symmetric", "--runs", args.runs, "--evaluations", args.sweep_evaluations]
        if args.order is not None:
            flags += ["--order", args.order]
    else:
        flags = ["--strategy", "population", "--start", start_of(records, topology), "--sigma", args.sigma,
                 "--evaluations", args.refine_evaluations]
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    result = szrank("search", "--archive", archive, "--topology", topology, "--seed", seed, "--workers", 1,
                    "--quiet", *flags)
    cpu = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before
    if result.returncode != 0:
        return f"t{topology:<3d} {kind:7s} seed {seed:<5d} failed: {result.stderr.strip()[-200:]}"
    bests = [json.loads(p.read_text())["best_total"] for p in archive.glob("*/run.json")]
    update = szrank("records", "update", "--records", records, "--archive", archive, "--cpu-seconds", f"{cpu:.0f}")
    said = [line for line in update.stdout.splitlines() if ": recorded " in line]
    return (f"t{topology:<3d} {kind:7s} seed {seed:<5d} runs {len(bests):3d}  best C+I {min(bests):3d}  "
            f"cpu {cpu:6.0f} s  " + ("; ".join(line.rsplit(": ", 1)[-1] for line in said) or "no record"))


def has_symmetry(topology: int, order: int | None) -> bool:
    "Whether `topology` has a cyclic symmetry other than the identity (of `order`, when given): what a sweep needs."
    try:
        return symmetry_of(topology, order).order > 1
    except OptionError:                                  # no symmetry of that order
        return False


def median_total(records: Path) -> float:
    return statistics.median(r["total"] for r in read_table(records).values())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, required=True, help="folder for the search archives")
    parser.add_argument("--records-out", type=Path, required=True,
                        help="the records folder to update (copied from the shipped one when it does not exist)")
    parser.add_argument("--topologies", default="all", help="comma-separated indices 0..58 (default all)")
    parser.add_argument("--kinds", default="sweep,refine", help="sweep, refine or both (default both)")
    parser.add_argument("--seeds", default="100", help="comma-separated seeds, one search per seed and kind")
    parser.add_argument("--runs", type=int, default=60, help="sweep: runs per search (default 60)")
    parser.add_argument("--order", type=int, help="sweep: the cyclic symmetry's order (default each topology's largest; "
                                                   "2: the C2 inside an S4 or beside a C3)")
    parser.add_argument("--sweep-evaluations", type=int, default=30_000, help="sweep: evaluations per run")
    parser.add_argument("--refine-evaluations", type=int, default=1_000_000, help="refine: evaluations")
    parser.add_argument("--sigma", type=float, default=0.1, help="refine: step noise (default 0.1)")
    args = parser.parse_args(argv)
    topologies = range(TOPOLOGY_COUNT) if args.topologies == "all" else [int(t) for t in args.topologies.split(",")]
    if not args.records_out.exists():
        shutil.copytree(RECORDS_DIR, args.records_out)
    args.work.mkdir(parents=True, exist_ok=True)
    before = median_total(args.records_out)
    for seed in (int(s) for s in args.seeds.split(",")):
        for kind in args.kinds.split(","):
            for topology in topologies:
                if kind == "sweep" and not has_symmetry(topology, args.order):
                    continue                                   # no (such) symmetry: the sweep is the plain search
                print(search(args.work, args.records_out, topology, kind, seed, args), flush=True)
    print(f"median best C+I over the table: {before} before, {median_total(args.records_out)} after "
          f"(goal <= 8; the public solver's saved bests: 8)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
