"""One writer per directory, with real processes: a live holder refuses a second
writer; after kill -9 the lock is stale and the next writer takes it over; the
temporaries a killed writer left are removed by the next one, a live writer's never."""
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from suvi_fill.plumbing.lock import LOCK_NAME, directory_lock, remove_leftovers
from suvi_fill.plumbing.lockfile import DirectoryBusy, read_holder

HOLD = ("import sys, time\nfrom suvi_fill.plumbing.lock import directory_lock\n"
        "with directory_lock(sys.argv[1], 'suvi-fill train'):\n"
        "    print('held', flush=True); time.sleep(60)\n")


@pytest.fixture
def holder(tmp_path):
    process = subprocess.Popen([sys.executable, "-c", HOLD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "held"
    yield process
    process.kill(); process.wait()


def test_a_second_writer_is_refused_and_told_who_holds_it(tmp_path, holder):
    with pytest.raises(DirectoryBusy, match=rf"another writer holds it: pid {holder.pid} .*suvi-fill train"):
        with directory_lock(tmp_path, "suvi-fill build"):
            pass
    assert read_holder(tmp_path / LOCK_NAME)["pid"] == holder.pid     # the holder's lock is untouched


def test_the_lock_of_a_killed_writer_is_taken_over(tmp_path, holder):
    holder.send_signal(signal.SIGKILL); holder.wait()
    assert (tmp_path / LOCK_NAME).exists()                            # kill -9 left it behind
    said = []
    with directory_lock(tmp_path, "suvi-fill train", log=said.append):
        assert read_holder(tmp_path / LOCK_NAME)["pid"] == os.getpid()
    assert len(said) == 1 and f"pid {holder.pid}" in said[0] and "no longer running" in said[0]
    assert list(tmp_path.iterdir()) == []


def test_an_empty_lock_is_stale_only_when_old(tmp_path):
    lock = tmp_path / LOCK_NAME
    lock.write_text("")
    with pytest.raises(DirectoryBusy, match="unknown writer"):
        with directory_lock(tmp_path): pass
    old = time.time() - 3600
    os.utime(lock, (old, old))
    with directory_lock(tmp_path, log=lambda m: None): pass


def test_a_lock_without_a_pid_is_taken_over(tmp_path):
    "A holder on this host that names no pid is nobody: its lock is stale (not `os.kill(-1, 0)`, which every process answers)."
    import socket
    (tmp_path / LOCK_NAME).write_text(json.dumps({"host": socket.gethostname(), "command": "written by hand"}))
    said = []
    with directory_lock(tmp_path, "suvi-fill train", log=said.append):
        assert read_holder(tmp_path / LOCK_NAME)["pid"] == os.getpid()
    assert len(said) == 1 and "pid None" in said[0] and "no longer running" in said[0]


def test_leftovers_of_a_killed_writer_are_removed_and_a_live_writers_kept(tmp_path):
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
        gone = tmp_path / f".last.pt.tmp.{int(dead.stdout)}.0f0f"
        alive = tmp_path / f".best.pt.tmp.{child.pid}.0e0e"
        kept = tmp_path / "last.pt"
        for path in (gone, alive, kept): path.write_bytes(b"x")
        said = []
        assert remove_leftovers(tmp_path, log=said.append) == [gone]
        assert alive.exists() and kept.exists() and "removed 1 temporary file" in said[0]
    finally:
        child.kill(); child.wait()
