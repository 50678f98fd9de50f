"""`szrank search --start` (and `--sigma`): a population run that begins at a known shape reports that shape or a better,
sound one, keeps where it began in its run.json, and the records say so; bad starts are one line."""
import hashlib
import json
from pathlib import Path

import numpy as np

from helpers import run, tool
from szrank.geometry.defects import layout, public_quality
from szrank.search.obj import read_configuration
from szrank.search.population import costs, planes_from_x, population_search, start_parameters
from szrank.search.records import DEGENERATE_QUALITY, read_table, update_from_archive

FIXTURES = Path(__file__).resolve().parent / "data" / "szilassi" / "public_solver"   # the public solver's (MIT)
SAVED = FIXTURES / "topology_58" / "shape_c4_i0_15.obj"          # C+I 4 by its file recount, sound
DEGENERATE = FIXTURES / "topology_0" / "shape_c0_i13_1552.obj"   # its quality dist 0.99993: degenerate


def search(*argv):
    return run([tool("szrank"), "search", *map(str, argv)])


def test_a_run_from_a_saved_shape_never_ends_worse_than_it(tmp_path):
    archive = tmp_path / "archive"
    result = search("--archive", archive, "--strategy", "population", "--topology", 58, "--start", SAVED,
                    "--evaluations", 3000, "--seed", 4, "--workers", 1, "--sigma", 0.1)
    assert result.returncode == 0, result.stderr
    (meta_path,) = archive.glob("*/run.json")
    meta = json.loads(meta_path.read_text())
    assert meta["start"] == str(SAVED) and meta["start_sha256"] == hashlib.sha256(SAVED.read_bytes()).hexdigest()
    assert meta["sigma"] == 0.1 and meta["history"][0][0] == 320 and meta["best_total"] <= meta["history"][0][1] <= 4
    records = tmp_path / "records"
    (outcome,) = update_from_archive(records, archive)
    assert outcome[0], outcome[1]
    (record,) = read_table(records).values()
    assert record["found"]["start"] == SAVED.name and "--sigma 0.1 --start shape_c4_i0_15.obj" in record["found"]["command"]


def test_a_symmetric_run_begins_at_the_nearest_symmetric_shape():
    from szrank.geometry.symmetry import symmetry_of
    symmetry = symmetry_of(42)
    x = symmetry.expand(np.random.default_rng(1).standard_normal(symmetry.dimension))
    normals, offsets = planes_from_x(x)
    y = start_parameters(normals, offsets, symmetry)
    assert np.allclose(symmetry.expand(y), x / np.sqrt(np.mean(x ** 2)))          # a symmetric start is kept as is
    result = population_search(42, 640, seed=2, symmetry=symmetry, start=(normals, offsets))
    first, total = result.history[0]
    assert first == 320 and total <= costs(x[None], layout(42))[0]           # the start is one of the first draws


def test_the_result_is_never_degenerate_even_from_a_degenerate_start():
    start = read_configuration(DEGENERATE, 0)
    result = population_search(0, 6400, seed=3, start=start)
    assert (public_quality(result.normals, result.offsets, 0)[0] < DEGENERATE_QUALITY).all()


def test_bad_starts_are_one_line_before_any_work(tmp_path):
    bad = tmp_path / "bad.obj"
    bad.write_text("v 0 0 0\nf 1 1 1\n")
    for argv, words in (
            (["--strategy", "population", "--topology", 58, "--start", bad], str(bad)),
            (["--strategy", "population", "--topology", 58, "--start", tmp_path / "none.obj"], "none.obj"),
            (["--strategy", "population", "--start", SAVED], "give --topology"),
            (["--strategy", "anneal", "--topology", 58, "--start", SAVED], "only the population and symmetric"),
            (["--strategy", "population", "--topology", 58, "--sigma", -1], "--sigma -1.0: a positive step noise")):
        result = search("--archive", tmp_path / "archive", "--evaluations", 1000, *argv)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 2 and len(lines) == 1 and words in lines[0], result.stderr
        assert "Traceback" not in result.stderr
    assert not (tmp_path / "archive").exists()
