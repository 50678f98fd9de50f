"""`szrank train`, `szrank search` and OBJ input under a hostile tester's faults (second round): a lock file
that names what to delete, a kept snapshot, a wrong --model file read whole, two searches with one run id,
flags out of range, unusable --scheduler addresses, and OBJ files that are not a configuration."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from helpers import run, tool
from szrank.plumbing.lock import LOCK_NAME
from szrank.stream.snapshot import SPLIT_RUNS
from szrank.stream.format import write_stream
from szrank.stream.synthetic import synthesize_corpus

TINY = {"train": 512, "validation": 256, "test": 256, "stress": 256}
DEAD_PID = 2**22 + 7   # above the default pid_max: never a live process
HOST = os.uname().nodename


def one_line(stderr: str, prefix: str) -> str:
    "The one error line (progress lines aside), and no traceback."
    lines = [line for line in stderr.strip().splitlines() if line.startswith(prefix)]
    assert len(lines) == 1 and "Traceback" not in stderr and stderr.strip().endswith(lines[0]), stderr
    return lines[0]


def stale_lock(out: Path, **fields) -> Path:
    "A lock left by a killed `szrank train` (a dead pid on this host) with extra `fields`."
    out.mkdir(parents=True, exist_ok=True)
    lock = out / LOCK_NAME
    lock.write_text(json.dumps({"pid": DEAD_PID, "host": HOST, "command": "szrank train", **fields}))
    return lock


def train_after(tmp_path: Path, out: Path, snapshots: Path):
    "A train that takes over the stale lock, then fails at once (no exporter): enough to see the clean-up."
    return run([tool("szrank"), "train", "--repository", str(tmp_path), "--exporter", str(tmp_path / "none"),
                "--output-directory", str(out), "--snapshot-directory", str(snapshots), "--device", "cpu"])


# ------------------------------------------------------------------ 1. a lock file names what gets deleted
def test_a_stale_locks_snapshot_field_never_deletes_a_file_outside_the_snapshot_pattern(tmp_path):
    out, snapshots, elsewhere = tmp_path / "out", tmp_path / "snapshots", tmp_path / "elsewhere"
    snapshots.mkdir()
    elsewhere.mkdir()
    victims = [tmp_path / "precious.txt", tmp_path / "precious.txt.partial",
               elsewhere / f"snapshot_{DEAD_PID}_1.sztx",           # the pattern, but not in the snapshot directory
               snapshots / "precious.sztx",                          # in the directory, but not the pattern
               snapshots / f"snapshot_{DEAD_PID + 1}_1.sztx"]        # not the lock holder's snapshot
    for path in victims:
        path.write_bytes(b"keep me")
    for field in [str(victims[0]), str(victims[2]), str(victims[3]), str(victims[4]),
                  str(snapshots / ".." / "precious.txt"), f"snapshot_{DEAD_PID}_1.sztx"]:
        lock = stale_lock(out, snapshot=field)
        result = train_after(tmp_path, out, snapshots)
        assert result.returncode == 2, result.stderr
        assert "the snapshot of a run that was killed" not in result.stderr, result.stderr
        warnings = [line for line in result.stderr.splitlines() if line.startswith("warning: ")]
        assert len(warnings) == 1 and "Traceback" not in result.stderr, result.stderr
        warning = warnings[0]
        assert warning.startswith(f"warning: {lock}: field 'snapshot' = {field!r} ") and "removed nothing" in warning
        for path in victims:
            assert path.read_bytes() == b"keep me", (field, path)


# ------------------------------------------------------------------ 10. a kept snapshot is deleted
@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "tiny.sztx"
    write_stream(path, synthesize_corpus(SPLIT_RUNS, seed=11, records=TINY))
    return path


def test_a_kept_snapshot_of_a_killed_run_is_not_removed_by_the_next_run(tmp_path, corpus):
    out, snapshots = tmp_path / "out", tmp_path / "snapshots"
    exporter = tmp_path / "exporter"
    exporter.write_text(f"#!/bin/sh\nexec cat {corpus}\n")
    exporter.chmod(0o755)
    process = subprocess.Popen([tool("szrank"), "train", "--repository", str(tmp_path), "--exporter", str(exporter),
                                "--snapshot-directory", str(snapshots), "--output-directory", str(out),
                                "--keep-snapshot", "--device", "cpu", "--threads", "1", "--report-epochs", "200",
                                "--batch-size", "64"],
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 300
        while not list(snapshots.glob("snapshot_*.sztx")) and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        kept = list(snapshots.glob("snapshot_*.sztx"))
        assert len(kept) == 1 and process.poll() is None, "the run ended before its snapshot was complete"
        holder = json.loads((out / LOCK_NAME).read_text())
        assert holder["snapshot"] == str(kept[0]) and holder["keep_snapshot"] == "True", holder
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait()
    size = kept[0].stat().st_size
    result = train_after(tmp_path, out, snapshots)
    assert result.returncode == 2, result.stderr
    assert f"took over the lock of pid {process.pid}" in result.stderr, result.stderr
    assert kept[0].stat().st_size == size and f"removed {kept[0]}," not in result.stderr, result.stderr
    assert f"kept {kept[0]}: the run that was killed made it with --keep-snapshot" in result.stderr
    # its .partial (a kept run killed while exporting) is still removed
    partial = kept[0].with_name(kept[0].name + ".partial")
    partial.write_bytes(b"x")
    stale_lock(out, pid=process.pid, snapshot=str(kept[0]), keep_snapshot="True")
    result = train_after(tmp_path, out, snapshots)
    assert not partial.exists() and f"removed {partial}," in result.stderr, result.stderr
    assert kept[0].stat().st_size == size


# ------------------------------------------------------------------ 4. a wrong --model file read whole
def limited_memory(limit: int):
    "A preexec_fn capping the child's address space at `limit` bytes."
    def apply():
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    return apply


def test_a_huge_wrong_model_file_is_refused_from_its_header_without_being_read(tmp_path):
    from szrank.ranker.model import initialize_member
    from szrank.ranker.modelfile import HEADER_METRICS, serialize_model
    validation = dict(zip(HEADER_METRICS, (0.6, 0.2, 0.03, 0.5, 1.6, 0.4, 0.6, 0.3)), records=5000)
    good = serialize_model([initialize_member(seed, "cpu") for seed in range(3)], 1, b"\1" * 32, validation)
    limit = 4 * 2**30                                       # the tester's 4 GB machine
    for name, header in (("corpus.sztx", b"SZTXP001" + bytes(152)), ("grown.sztf", good[:160])):
        big = tmp_path / name
        with open(big, "wb") as file:                       # sparse: 5 GiB that take no disk
            file.write(header)
            file.truncate(5 * 2**30)
        result = run([tool("szrank"), "search", "--archive", str(tmp_path / "archive"), "--steps", "1",
                      "--model", str(big)], preexec_fn=limited_memory(limit))
        assert result.returncode == 2, result.stderr
        line = one_line(result.stderr, "szrank search: error: ")
        assert line.startswith(f"szrank search: error: {big}: "), line
        assert ("bad magic b'SZTXP001'" in line if name == "corpus.sztx"
                else f"file size is {5 * 2**30} bytes, header and payload need exactly {len(good)}" in line), line
        assert not (tmp_path / "archive").exists()


# ------------------------------------------------------------------ 12. two searches, one run id
def test_a_run_folder_is_claimed_exclusively(tmp_path, monkeypatch):
    "The other process's folder appears between a look and a create: the second writer must still be refused."
    import uuid
    from szrank.search import archive
    from szrank.search.archive import ArchiveError, RunWriter, run_metadata
    run_id = uuid.UUID(int=12, version=4)
    first = RunWriter(tmp_path, run_id, {"who": "first"})

    class LooksTooEarly(type(Path())):
        def exists(self, *args, **kwargs):      # what a second process saw an instant before the first created it
            return False

    monkeypatch.setattr(archive, "Path", LooksTooEarly)
    with pytest.raises(ArchiveError, match=rf"{tmp_path / str(run_id)}: run already in the archive"):
        RunWriter(tmp_path, run_id, {"who": "second"})
    monkeypatch.undo()
    assert run_metadata(first.directory)["who"] == "first"


def test_two_searches_of_one_seed_at_the_same_instant_get_one_run_folder_each_or_a_refusal(tmp_path):
    import multiprocessing
    from szrank.search.archive import list_runs
    context = multiprocessing.get_context("spawn")
    for attempt in range(3):
        archive = tmp_path / f"a{attempt}"
        barrier = context.Barrier(2)
        outcomes = context.Queue()
        workers = [context.Process(target=_claim, args=(archive, barrier, outcomes)) for _ in range(2)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join(120)
        results = sorted(outcomes.get(timeout=10) for _ in workers)
        assert results[0] == "ok" and results[1].startswith("refused: "), results
        assert len(list_runs(archive)) == 1


def _claim(archive, barrier, outcomes):
    "One of two processes opening run 0 of seed 9 at the same instant."
    from szrank.search.archive import ArchiveError, RunWriter
    from szrank.search.runs import run_stream
    run_id = run_stream(9, 0)[1]
    barrier.wait()
    try:
        with RunWriter(archive, run_id, {"pid": os.getpid()}):
            pass
        outcomes.put("ok")
    except ArchiveError as exc:
        outcomes.put(f"refused: {exc}")


def test_a_population_seed_already_in_the_archive_is_refused_before_any_work(tmp_path, monkeypatch):
    from szrank.search import population
    from szrank.search.execution import run_searches
    common = dict(runs=1, steps=None, seed=4, topology=42, workers=1, show_progress=False, budget=300,
                  strategy="population")
    first = run_searches(tmp_path, **common)
    before = sorted(p.name for p in tmp_path.iterdir())

    def no_work(*args, **kwargs):
        raise AssertionError("the search ran before the seed was refused")

    monkeypatch.setattr(population, "population_search", no_work)
    with pytest.raises(Exception, match=rf"{tmp_path / first[0].run_id}: run 0 of --seed 4 \(population\) is "
                                        r"already in the archive; use another --seed"):
        run_searches(tmp_path, **common)
    from szrank.search.runs import run_population       # the run itself, called directly: its folder comes first too
    with pytest.raises(Exception, match="run already in the archive"):
        run_population(tmp_path, 42, 300, seed=4)
    assert sorted(p.name for p in tmp_path.iterdir()) == before


# ------------------------------------------------------------------ 15. unusable --scheduler addresses
@pytest.mark.parametrize("address, message", [
    ("tls://127.0.0.1:1", "cannot reach the Dask scheduler (TLS expects a `ssl_context` argument"),
    ("inproc://x", "inproc:// is not an address another process can serve; give tcp://HOST:PORT"),
    ("127.0.0.1", "cannot reach the Dask scheduler (missing port number in address '127.0.0.1')")])
def test_an_unusable_scheduler_address_is_one_line(tmp_path, address, message):
    pytest.importorskip("dask.distributed")
    result = run([tool("szrank"), "search", "--archive", str(tmp_path / "archive"), "--steps", "1",
                  "--scheduler", address], timeout=120)
    assert result.returncode == 2, result.stderr
    line = one_line(result.stderr, "szrank search: error: ")
    assert line.startswith(f"szrank search: error: --scheduler {address}: ") and message in line, line
    assert not (tmp_path / "archive").exists()


# ------------------------------------------------------------------ 16. flags out of range
@pytest.mark.parametrize("flags, message", [
    (["--replicas", "-5"], "--replicas must be 0..4096, not -5"),
    (["--iterations", "-3"], "--iterations must be 0..1000000, not -3"),
    (["--replicas", str(10**8)], f"--replicas must be 0..4096, not {10**8}"),
    (["--topology", "59"], "--topology must be 0..58, not 59"),
    (["--seed", "-1"], "--seed must be 0 or more, not -1"),
    (["--strategy", "population", "--evaluations", "50", "--topology", "-1"], "--topology must be 0..58, not -1")])
def test_search_flags_out_of_range_are_refused_before_anything_is_created(tmp_path, flags, message):
    archive = tmp_path / "archive"
    result = run([tool("szrank"), "search", "--archive", str(archive), "--steps", "2", "--seed", "3", *flags],
                 timeout=120)
    assert result.returncode == 2, result.stderr
    assert one_line(result.stderr, "szrank search: error: ") == f"szrank search: error: {message}"
    assert not archive.exists()
    if "-1" not in flags:                       # the seed is not blocked: the same command, corrected, runs
        good = run([tool("szrank"), "search", "--archive", str(archive), "--steps", "2", "--seed", "3",
                    "--replicas", "1", "--iterations", "1", "--workers", "1"], timeout=300)
        assert good.returncode == 0, good.stderr


@pytest.mark.parametrize("flag, most", [("--batch-size", "65,536"), ("--shuffle-records", "1,048,576")])
def test_train_buffer_sizes_out_of_range_are_refused_naming_the_flag(tmp_path, flag, most):
    out = tmp_path / "out"
    result = run([tool("szrank"), "train", "--snapshot", str(tmp_path / "none.sztx"), "--device", "cpu",
                  "--output-directory", str(out), flag, str(10**9)], timeout=120)
    assert result.returncode == 2, result.stderr
    line = one_line(result.stderr, "Transformer training failed: ")
    assert line == (f"Transformer training failed: {flag} {10**9}: must be 1..{most} (it sizes a buffer of whole "
                    "records held in memory)"), line
    assert not out.exists()


# ------------------------------------------------------------------ 20. OBJ input
@pytest.mark.parametrize("text, line, message", [
    (b"v 0 0 0\nv nan 0 0\n", 2, "coordinate 'nan' is not a finite number"),
    (b"v 0 0 0\nv 1 1e400 0\n", 2, "coordinate '1e400' is not a finite number"),
    (b"v 0 0 0\nv 1 2\n", 2, "a vertex needs x y z, 'v 1 2' has 2 number(s)"),
    (b"# made by\nv 0 0 0 \xff\n", 2, "byte 0xff at column 9 is not UTF-8 text"),
    (b"v 0 0 0\nv 0 0 0\nv 0 0 0\n\nf 1 2 3\n", 5, "face 1 has no plane: its corners coincide or lie on one line"),
    (b"v 0 0 0\nv 1 0 0\nv 0 1 0\nv 1 1 1\nv 2 2 2\nf 1 2 3\nf 1 4 5\n", 7,
     "face 2 has no plane: its corners coincide or lie on one line")])
def test_obj_input_faults_name_the_file_and_line(tmp_path, text, line, message):
    from szrank.search.obj import ObjError, read_configuration, read_obj
    path = tmp_path / "shape.obj"
    path.write_bytes(text)
    for read in (read_obj, lambda p: read_configuration(p, 42)):
        with pytest.raises(ObjError) as refused:
            read(path)
        assert str(refused.value).startswith(f"{path}:{line}: {message}"), refused.value


def test_obj_planes_of_huge_finite_coordinates_are_fitted(tmp_path):
    from szrank.search.obj import fit_planes
    square = np.array([[0, 0, 2.0], [1, 0, 2], [1, 1, 2], [0, 1, 2]])
    for scale in (1e-300, 1.0, 1e300, 5e307):     # 5e307: corners of 1e308, whose sum overflows
        normals, offsets = fit_planes(square * scale, [[0, 1, 2, 3]])
        assert np.allclose(np.abs(normals[0]), [0, 0, 1]) and np.isclose(offsets[0] * normals[0, 2], 2.0 * scale)


def test_a_run_file_naming_another_run_is_refused_naming_the_field(tmp_path):
    "A name read from run.json must be its own folder's: a renamed folder or an edited run_id is refused."
    import uuid
    from szrank.search.archive import ArchiveError, RunWriter, list_runs
    writer = RunWriter(tmp_path, uuid.UUID(int=1, version=4), {})
    renamed = tmp_path / str(uuid.UUID(int=2, version=4))
    writer.directory.rename(renamed)
    with pytest.raises(ArchiveError, match=rf"{renamed / 'run.json'}: field 'run_id' = '{uuid.UUID(int=1, version=4)}' "
                                           rf"is not its folder's name '{renamed.name}'"):
        list_runs(tmp_path)
