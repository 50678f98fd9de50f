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

from conftest import run, tool
from szrank.lock import LOCK_NAME
from szrank.snapshot import SPLIT_RUNS
from szrank.stream import write_stream
from szrank.synthetic import synthesize_corpus

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
    assert f"taking over the stale lock of pid {process.pid}" in result.stderr, result.stderr
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
    from szrank.model import initialize_member
    from szrank.modelfile import HEADER_METRICS, serialize_model
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
