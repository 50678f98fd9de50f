"""`suvi-fill train` under faults: NaN planes in a shard, NaN / garbage / empty checkpoints on
--resume and --evaluate, a second writer into one --out, a killed run's lock and temporaries, the
pool's first-slice wait and a missing pool directory, and a full disk under the history and the
checkpoints.  Each runs the real command line on the tiny corpus of `test_suvi_train`."""
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from helpers import ROOT, run, tool
from test_suvi_train import ENV, TINY, corpus, history, state  # noqa: F401  (corpus is a fixture)

#: A run short enough to repeat: two steps, an eval after each.
SHORT = ["--max-steps", "2", "--eval-every", "1", "--warmup", "1", "--lr", "1e-5", "--steps-per-epoch", "100"]


def train(shards, out, *extra, timeout=300):
    "`suvi-fill train` on the corpus in `shards` with the tiny model."
    command = [tool("suvi-fill"), "train", "--shards", str(shards), "--manifest", str(shards / "manifest.json"),
               "--out", str(out), *TINY, *extra]
    return run(command, env=ENV, cwd=ROOT, timeout=timeout)


def error_line(result) -> str:
    "The single error line of a refused command (and that it is the only line of stderr about it)."
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(lines) == 1, result.stderr
    return lines[0]


def snapshot(out) -> dict:
    "The bytes of best.pt and last.pt in `out`."
    return {name: (Path(out) / name).read_bytes() for name in ("best.pt", "last.pt")}


@pytest.fixture(scope="module")
def finished(corpus, tmp_path_factory):  # noqa: F811
    "A finished short run on a private copy of the corpus (which tests may damage)."
    base = tmp_path_factory.mktemp("faults")
    shards = base / "shards"
    shutil.copytree(corpus, shards)
    result = train(shards, base / "run", *SHORT)
    assert result.returncode == 0, result.stdout + result.stderr
    return shards, base / "run"


# ------------------------------------------------------------- 1. NaN data and checkpoints

def fill_planes(shard_path, byte=0xFF):
    "Overwrite every plane byte of the shard at `shard_path` with `byte` (0xFF: float16 NaN)."
    from suvi_fill.corpus import shards as dataset
    shard = dataset.Shard(shard_path)
    start, length = shard._plane_offset, shard.n_planes * shard.resolution ** 2 * dataset.STORE_DTYPE.itemsize
    shard.close()
    with open(shard_path, "r+b") as handle:
        handle.seek(start)
        handle.write(bytes([byte]) * length)


def test_nan_planes_stop_training_naming_the_step_and_shard(finished, tmp_path):
    shards, done = finished
    damaged = tmp_path / "shards"
    shutil.copytree(shards, damaged)
    for name in sorted(os.listdir(damaged)):
        if name.endswith(".shard"):
            fill_planes(damaged / name)            # every shard: each batch meets NaN
    out = tmp_path / "run"
    shutil.copytree(done, out)
    before = snapshot(out)
    result = train(damaged, out, "--resume", str(out / "last.pt"), "--max-steps", "6", "--eval-every", "1",
                   "--warmup", "1", "--steps-per-epoch", "100")
    assert result.returncode == 2, result.stdout + result.stderr        # a DataError, not ABORT (1)
    line = error_line(result)
    assert "step 2: non-finite validation loss (nan) from the sample of shard 2024-06-2" in line, line
    assert "_g1" in line and "slot" in line and "best.pt and last.pt are as they were" in line
    assert snapshot(out) == before


def test_nan_planes_in_the_train_split_stop_at_the_first_step(finished, tmp_path):
    "The validation set stays clean (--val-slices of the clean corpus); the train split is NaN."
    shards, _ = finished
    fixed = tmp_path / "fixed"
    assert run([tool("suvi-fill"), "pool-produce", "--shards", str(shards), "--out", str(fixed), "--fixed",
                "--days", "1"], env=ENV).returncode == 0
    damaged = tmp_path / "shards"
    shutil.copytree(shards, damaged)
    for name in sorted(os.listdir(damaged)):
        if name.endswith(".shard"):
            fill_planes(damaged / name)
    out = tmp_path / "run"
    result = train(damaged, out, "--val-slices", str(fixed), *SHORT)
    assert result.returncode == 2, result.stdout + result.stderr
    line = error_line(result)
    assert "step 1: non-finite training loss (nan) from the sample of shard 2024-06-2" in line, line
    assert not (out / "last.pt").exists()
    assert state(out / "best.pt")["step"] == 0             # the untrained net, finite, as before


def nan_checkpoint(source, destination):
    import torch
    saved = torch.load(source, map_location="cpu", weights_only=True)
    name = next(iter(saved["model"]))
    saved["model"][name] = saved["model"][name].clone().fill_(float("nan"))
    torch.save(saved, destination)
    return name


@pytest.mark.parametrize("flag", ["--resume", "--evaluate"])
def test_a_nan_checkpoint_is_refused_naming_the_tensor(finished, tmp_path, flag):
    shards, done = finished
    name = nan_checkpoint(done / "last.pt", tmp_path / "nan.pt")
    result = train(shards, tmp_path / "run", flag, str(tmp_path / "nan.pt"), *SHORT)
    assert result.returncode == 2, result.stdout + result.stderr
    line = error_line(result)
    assert f"nan.pt: tensor model.{name} holds NaN or infinity" in line, line
    assert not (tmp_path / "run" / "last.pt").exists()


# ------------------------------------------------------ 12. garbage and empty checkpoints

@pytest.mark.parametrize("flag", ["--resume", "--evaluate"])
@pytest.mark.parametrize("content", [b"", b"\x80\x02garbage, not a pickle" * 40], ids=["empty", "garbage"])
def test_a_garbage_or_empty_checkpoint_is_one_line_naming_the_file(finished, tmp_path, flag, content):
    shards, _ = finished
    (tmp_path / "bad.pt").write_bytes(content)
    result = train(shards, tmp_path / "run", flag, str(tmp_path / "bad.pt"), *SHORT)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"bad.pt: not a readable filler checkpoint" in error_line(result)


# ------------------------------------------------- 7, 8. one writer; a killed run's leftovers

def test_a_second_writer_is_refused_and_a_killed_runs_lock_and_temporaries_are_taken_over(finished, tmp_path):
    shards, _ = finished
    out = tmp_path / "run"
    command = [tool("suvi-fill"), "train", "--shards", str(shards), "--manifest", str(shards / "manifest.json"),
               "--out", str(out), *TINY, "--eval-every", "2", "--max-steps", "100000", "--steps-per-epoch",
               "100000", "--val-samples", "2"]
    first = subprocess.Popen(command, cwd=ROOT, env={**os.environ, **ENV}, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 180
        while not ((out / "last.pt").exists() and len(history(out)) >= 2):
            assert first.poll() is None and time.monotonic() < deadline, first.stderr.read().decode()
            time.sleep(0.2)
        second = train(shards, out, *SHORT)
        assert second.returncode == 2, second.stdout + second.stderr
        line = error_line(second)
        assert f"another writer holds it: pid {first.pid} on " in line and "suvi-fill train" in line, line
        first.send_signal(signal.SIGKILL)
        first.wait(timeout=30)
    finally:
        if first.poll() is None:
            first.kill()
    # What kill -9 during a checkpoint or history write leaves behind.
    left = [out / f".{name}.tmp.{first.pid}.{'ab' * 16}" for name in ("last.pt", "best.pt", "history.jsonl")]
    for path in left:
        path.write_bytes(b"partial")
    saved = state(out / "last.pt")["step"]
    result = train(shards, out, "--resume", str(out / "last.pt"), "--eval-every", "1", "--max-steps",
                   str(saved + 1), "--steps-per-epoch", "100000", "--val-samples", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"took over the lock of pid {first.pid}" in result.stdout
    assert re.search(r"removed \d+ temporary file\(s\) an interrupted run left", result.stdout)   # the killed run may add its own
    assert not any(path.exists() for path in left)
    assert sorted(p.name for p in out.iterdir()) == ["best.pt", "history.jsonl", "last.pt"]


def test_evaluate_takes_no_lock_and_a_refused_run_leaves_no_directory(finished, tmp_path):
    shards, done = finished
    result = train(shards, tmp_path / "run", "--availability", str(tmp_path / "absent.npz"))
    assert result.returncode == 2 and not (tmp_path / "run").exists()
    (done / ".suvi-fill.lock").write_text('{"pid": 1, "host": "elsewhere"}')
    try:
        result = train(shards, done, "--evaluate", str(done / "best.pt"))
        assert result.returncode == 0, result.stdout + result.stderr
    finally:
        (done / ".suvi-fill.lock").unlink()


# ------------------------------------------------------------ 11. the pool's first-slice wait

def test_pool_wait_flag_and_a_missing_pool_directory(finished, tmp_path):
    shards, _ = finished
    empty = tmp_path / "pool"
    empty.mkdir()
    started = time.monotonic()
    result = run([tool("suvi-fill"), "train", "--shards", str(shards), "--manifest", str(shards / "manifest.json"),
                  "--out", str(tmp_path / "run"), *TINY, "--pool", str(empty), "--steps-per-epoch", "4",
                  "--max-steps", "4", "--pool-wait", "1"], env={**ENV, "SUVI_FILL_POOL_WAIT": "600"}, cwd=ROOT)
    assert result.returncode == 2, result.stderr
    assert f"no slice in {empty} after 1 s: is the producer running?" in error_line(result)
    assert time.monotonic() - started < 300
    result = train(shards, tmp_path / "run", "--pool", str(tmp_path / "absent"), "--steps-per-epoch", "4",
                   "--max-steps", "4")
    assert result.returncode == 2, result.stderr
    assert f"--pool {tmp_path / 'absent'}: no such directory" in error_line(result)
    result = train(shards, tmp_path / "run", "--pool", str(empty), "--steps-per-epoch", "4", "--pool-wait", "-1")
    assert result.returncode == 2 and "--pool-wait -1.0: must be at least 0" in error_line(result)


# ------------------------------------------------------------------ 12, 13. a full disk

@contextmanager
def tmpfs(directory: Path, size: str):
    "A small tmpfs at `directory` (root only); skips the test where mounting is not permitted."
    directory.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(directory)],
                             capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], capture_output=True)


def fill(directory: Path, leave: int):
    "Fill the filesystem of `directory` until about `leave` bytes are free."
    stats = os.statvfs(directory)
    free = stats.f_bavail * stats.f_frsize
    with open(directory / "filler", "wb") as handle:
        handle.write(b"\0" * max(free - leave, 0))


#: Room left on the disk: 32 KiB holds the lock and the history rows but not a checkpoint (61 KiB);
#: one page holds the lock alone, so the first history row (a fresh file) finds the disk full.
@pytest.mark.parametrize("leave, files, named", [
    (32 * 1024, ("best.pt", "last.pt", "history.jsonl"), "last.pt: could not write the checkpoint"),
    (4096, ("best.pt", "last.pt"), "history.jsonl: could not write the history")])
def test_a_full_disk_names_the_file_and_keeps_the_previous_checkpoint(finished, tmp_path, leave, files, named):
    shards, done = finished
    with tmpfs(tmp_path / "disk", "512k") as out:
        for name in files:
            shutil.copy2(done / name, out / name)
        before = snapshot(out)
        fill(out, leave)
        saved = state(out / "last.pt")["step"]
        result = train(shards, out, "--resume", str(out / "last.pt"), "--eval-every", "1", "--max-steps",
                       str(saved + 2), "--warmup", "1", "--steps-per-epoch", "100")
        assert result.returncode == 2, result.stdout + result.stderr
        line = error_line(result)
        assert f"{out}/{named} (No space left on device" in line or (
            f"{out}/{named} (" in line and "write" in line), line
        assert "its previous version is intact" in line
        assert snapshot(out) == before
        assert not [p.name for p in out.iterdir() if ".tmp." in p.name or p.name == ".suvi-fill.lock"]
        assert "Traceback" not in result.stderr


# ------------------------------------------ 7, 8. pool-produce, bench and render hold --out too

def dead_pid() -> int:
    "The pid of a process that has exited."
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def hold_lock(directory: Path, pid: int):
    "A lock file in `directory` as `suvi_fill.plumbing.lock` writes it, held by `pid` on this host."
    import json
    import socket
    directory.mkdir(parents=True, exist_ok=True)
    (directory / ".suvi-fill.lock").write_text(json.dumps(
        {"pid": pid, "host": socket.gethostname(), "command": "suvi-fill other", "started": "earlier"}))


def commands(shards, out):
    "The argv of pool-produce, bench and render writing into `out`, each as small as it runs."
    from suvi_fill.physics import timebase
    start = timebase.time_of(timebase.first_slot_of_day("2024-06-20") + 180)
    return {
        "pool-produce": ["pool-produce", "--shards", str(shards), "--out", str(out), "--slices", "1", "--days", "1"],
        "bench": ["bench", "--shards", str(shards), "--out", str(out), "--device", "cpu", "--quiet", "--fillers",
                  "nearest", "--gaps", "1", "--samples", "1"],
        "render": ["render", "--shards", str(shards), "--out", str(out), "--device", "cpu", "--quiet",
                   "--satellite", "16", "--start", start.strftime("%Y-%m-%dT%H:%MZ"),
                   "--end", timebase.time_of(timebase.first_slot_of_day("2024-06-20") + 182).strftime("%Y-%m-%dT%H:%MZ"),
                   "--band", "171", "--fill", "nearest"],
    }


@pytest.mark.parametrize("name", ["pool-produce", "bench", "render"])
def test_a_second_writer_of_pool_bench_or_render_is_refused(finished, tmp_path, name):
    shards, _ = finished
    out = tmp_path / "out"
    hold_lock(out, os.getpid())                       # a live writer: this test process
    result = run([tool("suvi-fill"), *commands(shards, out)[name]], env=ENV, cwd=ROOT)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"another writer holds it: pid {os.getpid()} on " in error_line(result)
    assert sorted(p.name for p in out.iterdir()) == [".suvi-fill.lock"]


@pytest.mark.parametrize("name, leftover", [("pool-produce", ".building-0123abcd"),
                                            ("bench", ".bench.json.tmp.{pid}.0123abcd"),
                                            ("render", ".render.json.tmp.{pid}.0123abcd")])
def test_pool_bench_and_render_take_over_a_killed_writers_lock_and_leftovers(finished, tmp_path, name, leftover):
    shards, _ = finished
    out, pid = tmp_path / "out", dead_pid()
    hold_lock(out, pid)
    left = out / leftover.format(pid=pid)
    if name == "pool-produce":
        left.mkdir()
        (left / "slice.json").write_text("{}")
    else:
        left.write_bytes(b"partial")
    result = run([tool("suvi-fill"), *commands(shards, out)[name]], env=ENV, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"took over the lock of pid {pid}" in result.stdout
    assert "removed 1 " in result.stdout and left.name in result.stdout
    assert not left.exists() and not (out / ".suvi-fill.lock").exists()
