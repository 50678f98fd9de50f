"""`suvi-fill synth --workers N` and `suvi-fill build --workers N`: the archive and the corpus that two local
processes write are the ones one process writes, byte for byte; both options are refused where they cannot
work; and a parallel synthesis or build stopped by a signal leaves nothing behind: no output, no staging
directory, no worker process."""
import hashlib
import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from helpers import run, tool


def _digests(root: Path, pattern: str) -> dict:
    return {p.relative_to(root): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(root.rglob(pattern))}


def _synth(out: Path, workers: int, *extra: str):
    return run([tool("suvi-fill"), "synth", "--out", str(out), "--hours", "30", "--resolution", "16", "--seed", "4",
                "--workers", str(workers), "--quiet", *extra])


@pytest.fixture(scope="module")
def archives(tmp_path_factory):
    root = tmp_path_factory.mktemp("workers")
    for workers in (1, 2):
        result = _synth(root / f"archive{workers}", workers)
        assert result.returncode == 0, result.stderr
    # Eight shards for the stopped build: after the first is written, most of the build is still to come.
    result = run([tool("suvi-fill"), "synth", "--out", str(root / "long"), "--days", "4", "--resolution", "24",
                  "--seed", "5", "--workers", "2", "--quiet"])
    assert result.returncode == 0, result.stderr
    return root


def test_two_workers_draw_the_same_archive(archives):
    one, two = _digests(archives / "archive1", "*.fits"), _digests(archives / "archive2", "*.fits")
    assert one == two and len(one) > 6 * 400
    truth = [json.loads((archives / f"archive{w}" / "synth_truth.json").read_text()) for w in (1, 2)]
    assert [{k: v for k, v in t.items() if k != "seconds"} for t in truth][0] == \
           [{k: v for k, v in t.items() if k != "seconds"} for t in truth][1]


def test_two_workers_build_the_same_corpus(archives):
    reports = []
    for workers in (1, 2):
        out = archives / f"corpus{workers}"
        result = run([tool("suvi-fill"), "build", "--source", str(archives / "archive1"), "--out", str(out),
                      "--workers", str(workers), "--quiet"])
        assert result.returncode == 0, result.stderr
        reports.append(json.loads((out / "build_report.json").read_text()))
    assert reports[0]["manifest_digest"] == reports[1]["manifest_digest"]
    assert (reports[0]["scheduler"], reports[1]["scheduler"]) == ("serial", "processes:2")
    assert _digests(archives / "corpus1", "*.shard") == _digests(archives / "corpus2", "*.shard")
    assert "processes:2" in result.stdout


def test_bad_worker_counts_are_refused_before_any_work(archives, tmp_path):
    result = run([tool("suvi-fill"), "build", "--source", str(archives / "archive1"), "--out", str(tmp_path / "c"),
                  "--workers", "2", "--scheduler", "local:2"])
    assert result.returncode == 2 and "--workers 2" in result.stderr and not (tmp_path / "c").exists()
    result = _synth(tmp_path / "a", 0)
    assert result.returncode == 2 and "--workers 0" in result.stderr and not (tmp_path / "a").exists()


def _children(pid: int) -> list[int]:
    "The live child processes of `pid` (Linux /proc)."
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            found += [int(c) for c in (task / "children").read_text().split()]
        except OSError:
            pass
    return found


def _gone(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def _stop_after_first_file(command: list, watched, sent) -> tuple[subprocess.Popen, list, str]:
    "Start `command`, wait until `watched()` finds a written file, note the workers, send `sent`; (process, workers, stderr)."
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not watched():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    workers = _children(process.pid)
    process.send_signal(sent)                       # to the parent only, as a service manager or `kill` sends it
    _, err = process.communicate(timeout=120)
    return process, workers, err


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads the workers from Linux /proc")
@pytest.mark.parametrize("sent, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"])
def test_a_stopped_parallel_synth_leaves_nothing(tmp_path, sent, status):
    out = tmp_path / "archive"
    command = [tool("suvi-fill"), "synth", "--out", str(out), "--days", "3", "--resolution", "32", "--workers", "2",
               "--quiet"]
    process, workers, err = _stop_after_first_file(
        command, lambda: any(tmp_path.glob(".archive.partial.*/**/*.fits")), sent)
    assert process.returncode == status, err
    assert "Traceback" not in err and len(workers) == 2
    assert not out.exists() and not list(tmp_path.glob(".archive.partial.*"))
    assert all(_gone(pid) for pid in workers)


@pytest.mark.skipif(not Path("/proc/self/task").exists(), reason="reads the workers from Linux /proc")
@pytest.mark.parametrize("sent, status", [(signal.SIGTERM, 143), (signal.SIGINT, 130)], ids=["SIGTERM", "SIGINT"])
def test_a_stopped_parallel_build_leaves_nothing(archives, tmp_path, sent, status):
    out = tmp_path / "corpus"
    command = [tool("suvi-fill"), "build", "--source", str(archives / "long"), "--out", str(out), "--workers",
               "2", "--quiet"]
    process, workers, err = _stop_after_first_file(command, lambda: any(out.glob(".build/*.shard")), sent)
    assert process.returncode == status, err
    assert "Traceback" not in err and workers
    assert not (out / ".build").exists() and not (out / "manifest.json").exists()
    assert all(_gone(pid) for pid in workers)
