"""The shipped records hold (every recount equals the table and the file name), and `szrank records`
refuses a tampered name, a degenerate shape and a worse one with the right line and exit status."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from helpers import run, tool
from szrank.plumbing.errors import REFUSED
from szrank.search.obj import PUBLIC_RECORD, read_configuration
from szrank.search.records import (MISMATCH, NAME, RECORDS_DIR, TABLE_NAME, RecordsError, consider, measure,
                                   read_table, verify, write_table)

FIXTURES = Path(__file__).resolve().parent / "data" / "szilassi" / "public_solver"   # the public solver's (MIT)
DEGENERATE = FIXTURES / "topology_0" / "shape_c0_i13_1552.obj"     # its quality dist 0.99993: degenerate
SHIPPED = sorted(RECORDS_DIR.glob("*.obj"))


def records(*argv):
    return run([tool("szrank"), "records", *map(str, argv)])


def worse_planes():
    "The public record of topology 42 (C+I 4) with its offsets shaken: C+I 8, not degenerate."
    normals, offsets = read_configuration(PUBLIC_RECORD, 42)
    return normals, offsets + 0.5 * np.random.default_rng(2).standard_normal(12)


@pytest.fixture
def shipped_copy(tmp_path):
    "A copy of the shipped records folder to tamper with."
    return Path(shutil.copytree(RECORDS_DIR, tmp_path / "records"))


def test_the_shipped_table_verifies():
    assert SHIPPED, "szrank/records holds no OBJ file"
    assert verify(RECORDS_DIR) == []
    result = records("verify")
    assert result.returncode == 0 and result.stdout.strip() == f"{len(SHIPPED)} records verified", result.stderr


@pytest.mark.parametrize("path", SHIPPED, ids=lambda p: p.name)
def test_every_record_recounts_to_its_name_and_is_not_degenerate(path):
    paper, c, i = map(int, NAME.fullmatch(path.name).groups())
    measured = measure(path, paper - 1)
    assert (measured["C"], measured["I"]) == (c, i)
    assert max(measured["quality"].values()) < 0.9999 and measured["ours"]["degenerate"] == 0
    record = read_table(RECORDS_DIR)[paper - 1]
    assert record["file"] == path.name and record["found"]["seed"] is not None and record["found"]["command"]


def test_a_tampered_file_name_is_a_mismatch(shipped_copy):
    table = read_table(shipped_copy)
    topology, record = next(iter(table.items()))
    tampered = f"p{topology + 1:02d}_c{record['C'] + 1}_i{record['I']}.obj"
    (shipped_copy / record["file"]).rename(shipped_copy / tampered)
    table[topology] = {**record, "file": tampered, "C": record["C"] + 1, "total": record["total"] + 1}
    write_table(shipped_copy, table)
    result = records("verify", "--records", shipped_copy)
    assert result.returncode == MISMATCH
    assert (f"{tampered}: file: the name says C {record['C'] + 1}, I {record['I']}; the recount C {record['C']}, "
            f"I {record['I']}") in result.stdout.splitlines()
    assert f"{tampered}: C: the table says {record['C'] + 1}, the recount {record['C']}" in result.stdout


def test_a_renamed_file_alone_is_missing_and_unlisted(shipped_copy):
    record = next(iter(read_table(shipped_copy).values()))
    (shipped_copy / record["file"]).rename(shipped_copy / "p99_c0_i0.obj")
    assert verify(shipped_copy) == [f"{record['file']}: file: missing from {shipped_copy}",
                                    f"p99_c0_i0.obj: file: not in {TABLE_NAME}"]


def test_a_malformed_table_is_refused_naming_the_field(shipped_copy):
    table = json.loads((shipped_copy / TABLE_NAME).read_text())
    del table["records"][0]["quality"]
    (shipped_copy / TABLE_NAME).write_text(json.dumps(table))
    result = records("verify", "--records", shipped_copy)
    assert result.returncode == REFUSED and len(result.stderr.strip().splitlines()) == 1
    assert "records.json: record 0: field 'quality' missing" in result.stderr
    with pytest.raises(RecordsError, match="no records table there"):
        verify(shipped_copy / "nowhere")


def test_a_degenerate_shape_is_refused(tmp_path):
    result = records("update", "--records", tmp_path, "--obj", DEGENERATE, "--topology", 0)
    assert result.returncode == REFUSED and result.stderr.strip() == (
        f"szrank records: error: {DEGENERATE}: refused: quality.dist 0.9999313 >= 0.9999: degenerate, never a record")
    assert not (tmp_path / TABLE_NAME).exists() and not list(tmp_path.glob("*.obj"))


def test_update_keeps_the_better_shape_and_refuses_a_worse_one(tmp_path):
    folder = tmp_path / "records"
    assert consider(folder, *worse_planes(), 42, {"by": "test", "seed": 2}, "worse") == (
        True, "worse: recorded p43_c2_i6.obj (C+I 8)")
    result = records("update", "--records", folder, "--obj", PUBLIC_RECORD, "--topology", 42, "--seed", 7)
    assert result.returncode == 0 and result.stdout.strip() == f"{PUBLIC_RECORD}: recorded p43_c0_i4.obj (C+I 4, was 8)"
    assert sorted(p.name for p in folder.glob("*.obj")) == ["p43_c0_i4.obj"] and verify(folder) == []
    assert read_table(folder)[42]["found"]["seed"] == 7
    worse = tmp_path / "worse.obj"
    shutil.copy(folder / "p43_c0_i4.obj", tmp_path / "keep.obj")
    consider(tmp_path / "other", *worse_planes(), 42, {"by": "test"}, "worse")
    shutil.copy(tmp_path / "other" / "p43_c2_i6.obj", worse)
    result = records("update", "--records", folder, "--obj", worse, "--topology", 42)
    assert result.returncode == REFUSED and result.stderr.strip() == (
        f"szrank records: error: {worse}: refused: total: C+I 8 is not better than the record p43_c0_i4.obj's 4")
    assert (folder / "p43_c0_i4.obj").read_bytes() == (tmp_path / "keep.obj").read_bytes()


def test_an_update_while_another_writer_holds_the_folder_is_refused(tmp_path):
    "Two updates at once would each read the table and the later write would drop the other's record."
    import os
    from szrank.plumbing.lock import LOCK_NAME
    folder = tmp_path / "records"
    consider(folder, *worse_planes(), 42, {"by": "test"}, "worse")
    before = {p.name: p.read_bytes() for p in folder.iterdir()}
    (folder / LOCK_NAME).write_text(json.dumps({"pid": os.getppid(), "host": __import__("socket").gethostname(),
                                                "command": "szrank records update"}))
    result = records("update", "--records", folder, "--obj", PUBLIC_RECORD, "--topology", 42)
    line = result.stderr.strip()
    assert result.returncode == REFUSED and "another writer holds it" in line and len(line.splitlines()) == 1, line
    (folder / LOCK_NAME).unlink()
    assert {p.name: p.read_bytes() for p in folder.iterdir()} == before
    assert records("update", "--records", folder, "--obj", PUBLIC_RECORD, "--topology", 42).returncode == 0
    assert not (folder / LOCK_NAME).exists()


def test_table_shows_the_public_best_beside(tmp_path):
    result = records("table", "--public", FIXTURES / "public_counts.tsv")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0].split()[:4] == ["paper", "record", "C+I", "max"]
    assert lines[-1].startswith(f"{len(SHIPPED)} of 59 topologies have a record; median C+I ")
