"""Shared pytest fixtures: the repository root and the virtual environment's tools."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def tool(name: str) -> str:
    "Path of a console script installed beside the running interpreter."
    path = BIN / name
    return str(path) if path.exists() else (shutil.which(name) or name)


def run(command, cwd=None, env=None, timeout=600, **kwargs):
    "Run a command, capture text output, never raise on a non-zero exit."
    merged = dict(os.environ, PYTHONWARNINGS="ignore:pkg_resources is deprecated:UserWarning")
    merged.update(env or {})
    return subprocess.run(command, cwd=cwd, env=merged, capture_output=True, text=True,
                          timeout=timeout, **kwargs)


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT


def copy_tracked(destination: Path) -> Path:
    "Copy the files git tracks (symlinks as symlinks) into `destination`."
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=ROOT, capture_output=True, check=True).stdout
    for name in filter(None, listed.decode().split("\0")):
        source = ROOT / name
        if not source.exists() and not source.is_symlink():
            continue                      # deleted in the work tree, not yet committed
        target = destination / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if source.is_symlink():
            target.symlink_to(os.readlink(source))
        else:
            shutil.copy2(source, target)
    return destination


@pytest.fixture(scope="module")
def one_thread():
    "One intra-op torch thread for a module: on a shared 2-core machine more threads only contend (measured 8x slower)."
    import torch
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
