"""`szrank search --strategy symmetric --order K`: the topology's cyclic symmetry of order K instead of its largest (the
C2 inside an S4, a C2 of a C3 topology).  The run's shape has that symmetry, its run.json and its record say which, and
an order the topology lacks is one line before any work."""
import json

import numpy as np

from helpers import run, tool
from szrank.geometry.symmetry import symmetry_of
from szrank.search.obj import read_configuration
from szrank.search.population import start_parameters
from szrank.search.records import read_table, update_from_archive


def search(*argv):
    return run([tool("szrank"), "search", *map(str, argv)])


def symmetric_under(normals, offsets, symmetry) -> bool:
    "Whether the planes are a configuration of `symmetry`: their parameters lie in its span."
    x = start_parameters(normals, offsets)
    return np.allclose(symmetry.expand(start_parameters(normals, offsets, symmetry)), x, atol=1e-9)


def test_order_2_searches_the_c2_inside_the_s4(tmp_path):
    archive = tmp_path / "archive"
    result = search("--archive", archive, "--strategy", "symmetric", "--order", 2, "--topology", 58,
                    "--evaluations", 2000, "--seed", 5, "--workers", 1, "--quiet")
    assert result.returncode == 0, result.stderr
    (meta_path,) = archive.glob("*/run.json")
    meta = json.loads(meta_path.read_text())
    c2, s4 = symmetry_of(58, 2), symmetry_of(58)
    assert (meta["order"], meta["symmetry"], meta["symmetry_permutation"]) == (2, "C2", list(c2.permutation))
    assert (c2.dimension, s4.dimension, s4.name) == (18, 9, "S4")
    normals, offsets = read_configuration(meta_path.with_name("best.obj"), 58)
    assert symmetric_under(normals, offsets, c2)
    assert not symmetric_under(normals, offsets, s4)          # random C2 draws are not S4 ones
    records = tmp_path / "records"
    (outcome,) = update_from_archive(records, archive)
    assert outcome[0], outcome[1]
    (record,) = read_table(records).values()
    assert record["found"]["symmetry"] == "C2" and "--seed 5 --order 2" in record["found"]["command"]


def test_the_default_is_the_largest_symmetry(tmp_path):
    archive = tmp_path / "archive"
    result = search("--archive", archive, "--strategy", "symmetric", "--topology", 58,
                    "--evaluations", 640, "--seed", 5, "--workers", 1, "--quiet")
    assert result.returncode == 0, result.stderr
    (meta_path,) = archive.glob("*/run.json")
    meta = json.loads(meta_path.read_text())
    assert meta["symmetry"] == "S4" and "order" not in meta


def test_bad_orders_are_one_line_before_any_work(tmp_path):
    for argv, words in (
            (["--strategy", "symmetric", "--topology", 4, "--order", 3], "topology 4 has no symmetry of order 3"),
            (["--strategy", "population", "--topology", 58, "--order", 2], "give --strategy symmetric and --topology"),
            (["--strategy", "symmetric", "--order", 2], "give --strategy symmetric and --topology")):
        result = search("--archive", tmp_path / "archive", "--evaluations", 1000, *argv)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1 and words in lines[0], result.stderr
        assert "Traceback" not in result.stderr
    assert not (tmp_path / "archive").exists()
