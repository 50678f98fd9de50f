"""`szrank search --scheduler`: runs as Dask futures on a local two-worker cluster give the archive a serial
run with the same seed gives (tiny budgets)."""
import json
import re
from pathlib import Path

import pytest

from helpers import run, tool
from szrank.search.execution import run_searches

pytest.importorskip("dask.distributed", reason="dask[distributed] is optional: pip install 'dask[distributed]'")

BEST_LINE = r"best C\+I (\d+) after (\d+) evaluations"


def archive_contents(root: Path) -> dict:
    "Every file of an archive by relative path: bytes, and run.json without its creation time."
    contents = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        data = path.read_bytes()
        if path.name == "run.json":
            data = {k: v for k, v in json.loads(data).items() if k != "created_unix_ns"}
        contents[str(path.relative_to(root))] = data
    return contents


def test_cluster_archive_equals_the_serial_archive(tmp_path):
    settings = dict(runs=3, steps=6, seed=11, replicas=2, iterations=2, shard_events=4, show_progress=False)
    serial = run_searches(tmp_path / "serial", workers=1, **settings)
    cluster = run_searches(tmp_path / "cluster", scheduler="local:2", **settings)
    assert [s.run_id for s in cluster] == [s.run_id for s in serial]
    assert [(s.best_total, s.evaluations) for s in cluster] == [(s.best_total, s.evaluations) for s in serial]
    expected = archive_contents(tmp_path / "serial")
    assert len(expected) == 3 * (1 + 2) and archive_contents(tmp_path / "cluster") == expected


def test_search_command_on_a_local_cluster(tmp_path):
    "The command line, population strategy: the same best lines and best.obj files as without a cluster."
    common = ["--topology", "42", "--evaluations", "1500", "--strategy", "population", "--seed", "2", "--runs", "2"]
    here = run([tool("szrank"), "search", "--archive", str(tmp_path / "here"), "--workers", "1", *common], timeout=300)
    there = run([tool("szrank"), "search", "--archive", str(tmp_path / "there"), "--scheduler", "local:2", *common],
                timeout=300)
    assert here.returncode == 0 and there.returncode == 0, there.stderr
    lines = there.stdout.strip().splitlines()[-2:]
    assert all(re.fullmatch(BEST_LINE, line) for line in lines) and lines == here.stdout.strip().splitlines()[-2:]
    assert archive_contents(tmp_path / "there") == archive_contents(tmp_path / "here")


def test_bad_scheduler_settings_are_one_line(tmp_path):
    for extra, message in ((["--scheduler", "local:0"], "local:N needs a positive number of workers"),
                           (["--scheduler", "local:2", "--workers", "2"], "--workers and --scheduler exclude each other"),
                           (["--scheduler", "tcp://127.0.0.1:9"], "cannot reach the Dask scheduler")):
        result = run([tool("szrank"), "search", "--archive", str(tmp_path), "--steps", "2", *extra], timeout=120)
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1 and message in result.stderr, result.stderr
