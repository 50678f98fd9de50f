"""Regenerate oracle_planes.tsv: the public solver's own counts (its `hpcount` command, built from its
util.cpp; see README.md) of random, scaled and near-degenerate plane configurations.

    python make_oracle.py HPCOUNT TOPOLOGIES_TXT > oracle_planes.tsv

Not run by the tests (they read the committed table); kept to show where the numbers come from."""
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from szrank.geometry.defects import random_planes
from szrank.search.obj import obj_text, read_configuration
from szrank.geometry.topology import PAPER_RELABELLINGS

HERE = Path(__file__).resolve().parent
TOPOLOGIES = (0, 4, 21, 42, 58)


def solver_counts(hpcount, table, topology, normals, offsets):
    "(C, I) of the `solver` line for float32 planes in our face order."
    order = np.array(PAPER_RELABELLINGS[topology]) - 1          # its label i is our face order[i]
    with tempfile.TemporaryDirectory() as folder:
        obj, planes = Path(folder) / "c.obj", Path(folder) / "p.txt"
        obj.write_text(obj_text(normals.astype(np.float64), offsets.astype(np.float64), topology))
        planes.write_text("".join(" ".join(f"{v:.9g}" for v in (*normals[f], offsets[f])) + "\n" for f in order))
        out = subprocess.run([hpcount, table, str(topology), str(obj), str(planes)], capture_output=True, text=True).stdout
    return tuple(map(int, re.search(r"solver C (\d+) I (\d+)", out).groups()))


def main(hpcount, table):
    rng = np.random.default_rng(2024)
    cases = []
    for topology in TOPOLOGIES:
        normals, offsets = random_planes(rng, 8)
        for k in range(8):
            for case, scale in (("random", 1.0), ("random_x0.1", 0.1), ("random_x10", 10.0), ("random_x100", 100.0)):
                cases.append((topology, case, normals[k], offsets[k] * scale + 0.05 * rng.standard_normal(12)))
    for path in sorted(HERE.glob("topology_*/shape_*.obj"))[::7]:
        topology = int(path.parent.name.split("_")[1])
        normals, offsets = read_configuration(path, topology)
        cases.append((topology, "saved:" + path.name, normals, offsets))
        for k in range(3):                                    # near-degenerate: the saved shape nudged by 1e-6
            cases.append((topology, f"nudged:{path.name}", normals + 1e-6 * rng.standard_normal(normals.shape),
                          offsets + 1e-5 * rng.standard_normal(12)))
    print("# topology\tcase\tC\tI\t12 planes nx ny nz d (our face order, float32)")
    for topology, case, normals, offsets in cases:
        n, d = normals.astype(np.float32), offsets.astype(np.float32)
        c, i = solver_counts(hpcount, table, topology, n, d)
        planes = " ".join(f"{v:.9g}" for f in range(12) for v in (*n[f], d[f]))
        print(f"{topology}\t{case}\t{c}\t{i}\t{planes}")


if __name__ == "__main__":
    main(*sys.argv[1:3])
