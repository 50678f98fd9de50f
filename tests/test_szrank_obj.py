"""OBJ in and out: the public records read to their counts, our configurations round-trip, `obj` from an archive."""
import argparse
import re
from pathlib import Path

import numpy as np
import pytest

from szrank.search.archive import read_run
from szrank.geometry.defects import evaluate, layout, random_planes
from szrank.search.obj import ObjError, archive_configuration, obj_command, read_configuration, read_obj, write_obj
from szrank.search.runs import run_search

FIXTURES = Path(__file__).resolve().parent / "data" / "szilassi" / "public_solver"   # the public solver's (MIT)
SHAPES = sorted(FIXTURES.glob("topology_*/shape_c*_i*_*.obj"))


SEARCH_COUNTS = {tuple(line.split("\t")[:2]): tuple(map(int, line.split("\t")[4:6]))       # its `solver` count
                 for line in (FIXTURES / "public_counts.tsv").read_text().splitlines() if not line.startswith("#")}


@pytest.mark.parametrize("path", SHAPES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_public_records_read_to_their_counts_and_write_back(path, tmp_path):
    "Read: the planes get the count its search gives them (absolute, as it counts); written back face by face."
    topology = int(re.search(r"topology_(\d+)/", path.as_posix()).group(1))
    planes = read_configuration(path, topology)
    defects = evaluate(*planes, layout(topology), absolute=True)
    assert (defects.crossings[0], defects.intersections[0]) == SEARCH_COUNTS[str(topology), path.name]
    again = read_configuration(write_obj(tmp_path / "again.obj", *planes, topology), topology)
    assert np.array_equal(evaluate(*again, layout(topology), absolute=True).cross, defects.cross)
    # written face i is the public file's face i: same corner coordinates, as a set, face by face
    ours, public = read_obj(tmp_path / "again.obj"), read_obj(path)
    for face_ours, face_public in zip(ours[1], public[1]):
        a, b = ours[0][face_ours], public[0][face_public]
        assert np.allclose(np.sort(a, axis=0), np.sort(b, axis=0), rtol=1e-4, atol=1e-4 * np.abs(b).max())


def test_random_configuration_round_trips(tmp_path):
    normals, offsets = random_planes(np.random.default_rng(4))
    back_n, back_d = read_configuration(write_obj(tmp_path / "r.obj", normals, offsets, 7), 7)
    sign = np.sign(np.einsum("fi,fi->f", back_n, normals))
    assert np.allclose(back_n * sign[:, None], normals, atol=1e-8) and np.allclose(back_d * sign, offsets, atol=1e-8)
    assert not list(tmp_path.glob("*.tmp*"))


def test_bad_files_are_named(tmp_path):
    bad = tmp_path / "bad.obj"
    bad.write_text("v 0 0 0\nv 1 x 0\n")
    with pytest.raises(ObjError, match=r"bad.obj:2: not a number"):
        read_obj(bad)
    bad.write_text("v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n")
    with pytest.raises(ObjError, match=r"bad.obj: expected 12 faces of 11 corners"):
        read_configuration(bad, 0)
    bad.write_text("v 0 0 0\nf 1 2 3\n")
    with pytest.raises(ObjError, match=r"face 1 refers to a vertex outside 1..1"):
        read_obj(bad)


def test_obj_command_writes_a_runs_best_and_any_event(tmp_path, capsys):
    summary = run_search(tmp_path / "archive", topology=42, steps=6, seed=3, replicas=2, iterations=2)
    parser = argparse.ArgumentParser()
    run = obj_command(parser)
    assert run(parser.parse_args(["--archive", str(tmp_path / "archive"), "--run", summary.run_id,
                                  "--out", str(tmp_path / "best.obj")])) == 0
    assert f"C+I {summary.best_total}" in capsys.readouterr().out
    planes = read_configuration(tmp_path / "best.obj", 42)
    assert evaluate(*planes, layout(42)).total[0] == summary.best_total
    _, events = read_run(tmp_path / "archive", __import__("uuid").UUID(summary.run_id))
    normals, offsets, topology, sequence, total = archive_configuration(tmp_path / "archive", summary.run_id, 2)
    assert (topology, sequence) == (42, 2) and np.array_equal(normals, events[2]["result_normals"].astype(float))
    with pytest.raises(ValueError, match=r"--event 99: run .* has events 0..5"):
        archive_configuration(tmp_path / "archive", summary.run_id, 99)
    with pytest.raises(ValueError, match="not a run id"):
        archive_configuration(tmp_path / "archive", "nope")
