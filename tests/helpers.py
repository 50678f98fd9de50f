"""What the tests share that is not a fixture: the repository root, the virtual environment's tools, running a
command, copying the checkout, and a folder built once per test run.  Test modules import it (`from helpers
import ...`): pytest puts this folder on `sys.path` (its default `prepend` import mode, the folder has no
`__init__.py`), for one test file, the whole folder and every xdist worker alike."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

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
