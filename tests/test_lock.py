"""The directory lock both packages own (the twins `plumbing/lockfile` and `plumbing/lock`), checked in each
package: whatever one package's copy does, the other's must do too."""
import importlib
import json
import os
import socket

import pytest

PACKAGES = ("suvi_fill", "szrank")


def plumbing(package: str, module: str):
    return importlib.import_module(f"{package}.plumbing.{module}")


@pytest.mark.parametrize("package", PACKAGES)
def test_a_holder_without_a_pid_is_stale(package, tmp_path):
    "A holder on this host that names no pid is nobody: stale (not `os.kill(-1, 0)`, which every process answers)."
    lockfile = plumbing(package, "lockfile")
    lock = tmp_path / plumbing(package, "lock").LOCK_NAME
    lock.write_text(json.dumps({"host": socket.gethostname(), "command": "written by hand"}))
    assert lockfile.is_stale(lock, lockfile.read_holder(lock))
    assert not lockfile.process_alive(0) and not lockfile.process_alive(-1)


@pytest.mark.parametrize("package", PACKAGES)
def test_a_live_holder_is_not_stale_and_a_dead_one_is(package, tmp_path):
    lockfile = plumbing(package, "lockfile")
    lock = tmp_path / plumbing(package, "lock").LOCK_NAME
    for pid, stale in ((os.getpid(), False), (2**22 + 12345, True)):    # above Linux's largest pid: never running
        lock.write_text(json.dumps({"pid": pid, "host": socket.gethostname()}))
        assert lockfile.is_stale(lock, lockfile.read_holder(lock)) is stale, pid


@pytest.mark.parametrize("package", PACKAGES)
def test_a_pidless_lock_is_taken_over_and_released(package, tmp_path):
    lock_module = plumbing(package, "lock")
    (tmp_path / lock_module.LOCK_NAME).write_text(json.dumps({"host": socket.gethostname()}))
    said = []
    held = lock_module.acquire(tmp_path, "test", log=said.append)
    assert held.previous == {"host": socket.gethostname()} and "pid None" in said[0]
    assert json.loads(held.path.read_text())["pid"] == os.getpid()
    held.release()
    assert list(tmp_path.iterdir()) == []
