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


def built_once(tmp_path_factory, name: str, build) -> Path:
    """A folder `build(folder)` fills once per test run, however many pytest-xdist workers ask for it.

    Alone, the folder is a fresh temporary one.  Under xdist the first worker to ask builds it in the
    run's shared temporary folder while holding a file lock; the others wait for the lock and reuse it
    (read only: the fixtures built this way are corpora and checkpoints the tests only read).  A build
    that failed leaves no `.built` mark, so the next worker to ask builds it again, from scratch."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        folder = tmp_path_factory.mktemp(name)
        build(folder)
        return folder
    from filelock import FileLock
    folder = tmp_path_factory.getbasetemp().parent / name
    with FileLock(str(folder) + ".lock"):
        if not (folder / ".built").exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            build(folder)
            (folder / ".built").touch()
    return folder


#: Test modules by the time they take, longest first: collected in this order, so that under
#: `-n 2 --dist loadscope --no-loadscope-reorder` the long modules start first and the short ones
#: fill in the end (the longest-first schedule).  Modules not named keep their order after these.
#: Measured serially (`pytest --durations=60`, a shared 2-core machine, so shares not seconds):
#: the site build 29% of the listed time, the demo's corpus stages 24%, the trainer's fault tests
#: 16%, the bench's corpus and checkpoint 11%, the load_learned run 7%, the corpus faults 6%.
LONGEST_FIRST = ("test_docs_site", "test_suvi_ingest", "test_widgets_browser", "test_suvi_faults_train",
                 "test_suvi_train", "test_szrank_demo", "test_suvi_bench", "test_suvi_faults_data",
                 "test_suvi_model_checkpoint", "test_szrank_search", "test_szrank_train", "test_szrank_faults_train",
                 "test_suvi_pool", "test_suvi_sun", "test_suvi_realism", "test_suvi_render", "test_szrank_corpus")


def pytest_collection_modifyitems(config, items):
    "Collect the longest modules first (see `LONGEST_FIRST`); the order of tests within a module is kept."
    rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(Path(str(item.fspath)).stem, len(rank)))
