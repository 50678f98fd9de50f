"""Build the documentation site from the notebooks: every notebook a page with its
outputs (figures, tables), the API of both packages, `nbs/index.ipynb` as the landing page.

nbdev's own `nbdev_docs` needs Quarto, which these machines cannot install; Sphinx
with MyST-NB installs from the package registry (the `docs` extra) and executes the
notebooks itself.  Cells flagged `#| slow` or `#| gpu` (nbdev's `tst_flags`), and
`#| eval: false`, are not executed for the site, as `nbdev_test` does not run them.

Usage: python .ci/make_site.py [--out _docs/site] [--fresh] [--jobs N]
  The notebooks are staged into `_docs_src/` (flags turned into MyST-NB cell tags)
  and executed through a jupyter-cache in `_docs_src/.jupyter_cache`: a notebook is
  executed again only when its code changed.  The executed notebooks land in
  `_docs/jupyter_execute/`.  Open `_docs/site/index.html` in a browser.

  Sphinx executes one notebook at a time; before it starts, the notebooks the cache
  does not hold are executed `--jobs` at a time (default: one per core, at most
  `MAX_JOBS`) exactly as MyST-NB would, and cached, so Sphinx finds every one
  executed.  A notebook that fails there is left to Sphinx, which runs it again and
  reports the error as its own.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import json
import multiprocessing
import os
import pkgutil
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# nbformat warns of every staged cell without an id (older notebooks' cells); MyST-NB reads them all the same.
warnings.filterwarnings("ignore", message="Cell is missing an id field")
PACKAGES = ("suvi_fill", "szrank")
NOT_EXECUTED = ("#| slow", "#| gpu", "#| eval: false")   # nbdev_test skips these (settings.ini tst_flags)
HIDDEN = ("#| hide",)
KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}
#: Seconds a cell may run before its notebook fails (MyST-NB's `nb_execution_timeout` below).
CELL_TIMEOUT = 900
#: Notebooks executed at once by default: each is a kernel of its own, and two fill a 2-core machine.
MAX_JOBS = 4

CONF = '''
from pathlib import Path
project = "suvi-szrank"
author = "Research Tooling"
extensions = ["myst_nb"]
root_doc = "index"
exclude_patterns = ["_build", ".jupyter_cache", "**/.ipynb_checkpoints"]
html_theme = "sphinx_book_theme"
html_title = "suvi-szrank"
nb_execution_mode = "cache"
nb_execution_cache_path = str(Path(__file__).resolve().parent / ".jupyter_cache")   # beside this file, whatever the cwd
nb_execution_timeout = {timeout}
nb_execution_raise_on_error = False   # report every failing notebook (a warning, an error under -W)
nb_execution_show_tb = True
nb_merge_streams = True
# A widget keeps its first picture beside it as HTML (the PNG inline) and as the PNG: the site takes the
# PNG, an image file like every other figure (no widget model exists on a static page).
nb_mime_priority_overrides = [("*", "image/png", 25)]
suppress_warnings = ["mystnb.unknown_mime_type", "myst.header", "misc.highlighting_failure"]
'''.replace("{timeout}", str(CELL_TIMEOUT))


def flag_of(source: str, flags) -> bool:
    return any(line.strip().startswith(flags) for line in source.splitlines())


def stage_notebook(source: Path, target: Path) -> None:
    "Copy a notebook, turning nbdev flags into MyST-NB tags and giving it a kernelspec."
    notebook = json.loads(source.read_text(encoding="utf-8"))
    for cell in notebook["cells"]:
        text = "".join(cell["source"])
        tags = cell.setdefault("metadata", {}).setdefault("tags", [])
        if cell["cell_type"] == "code" and flag_of(text, NOT_EXECUTED):
            tags.append("skip-execution")
        if flag_of(text, HIDDEN):
            tags.append("remove-cell")
    notebook["metadata"]["kernelspec"] = KERNELSPEC
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(notebook, indent=1), encoding="utf-8")


def api_entry(name: str, value) -> str:
    "One public name: its signature as a heading, its docstring verbatim (docstrings are prose, not reST)."
    import inspect
    try:
        signature = f"{name}{inspect.signature(value)}" if callable(value) else name
    except (TypeError, ValueError):
        signature = name
    kind = "class" if inspect.isclass(value) else "def" if callable(value) else "value"
    doc = inspect.getdoc(value) if kind != "value" else None
    shown = repr(value) if kind == "value" else ""
    text = f"### `{signature}`\n\n*{kind}*" + (f" `= {shown}`" if kind == "value" and len(shown) <= 80 else "") + "\n"
    return text + (f"\n```text\n{doc}\n```\n" if doc else "")


def api_page(package: str) -> str:
    "A MyST page listing every module of `package`: its docstring and each name in its `__all__`."
    import importlib
    import inspect
    module = importlib.import_module(package)
    names = [package] + sorted(m.name for m in pkgutil.walk_packages(module.__path__, f"{package}."))
    parts = [f"# API: `{package}`\n"]
    for name in names:
        current = importlib.import_module(name)
        parts.append(f"## `{name}`\n")
        if inspect.getdoc(current):
            parts.append(f"```text\n{inspect.getdoc(current)}\n```\n")
        for public in getattr(current, "__all__", []):
            parts.append(api_entry(f"{name}.{public}", getattr(current, public)))
    return "\n".join(parts)


def stage(src: Path) -> list[str]:
    "Stage every notebook and the API pages into `src`; returns the page names (no suffix)."
    pages = []
    for notebook in sorted((ROOT / "nbs").rglob("*.ipynb")):
        relative = notebook.relative_to(ROOT / "nbs")
        if ".ipynb_checkpoints" in relative.parts:
            continue
        stage_notebook(notebook, src / relative)
        pages.append(relative.with_suffix("").as_posix())
    for package in PACKAGES:
        (src / "api" / f"{package}.md").parent.mkdir(parents=True, exist_ok=True)
        (src / "api" / f"{package}.md").write_text(api_page(package), encoding="utf-8")
        pages.append(f"api/{package}")
    (src / "conf.py").write_text(CONF, encoding="utf-8")
    return pages


def add_toc(src: Path, pages: list[str]) -> None:
    "Append the table of contents (every page but the landing one) to the staged index notebook."
    index = src / "index.ipynb"
    notebook = json.loads(index.read_text(encoding="utf-8"))
    groups = {}
    for page in pages:
        if page != "index":
            groups.setdefault(page.split("/")[0], []).append(page)
    toc = "\n\n".join(f"```{{toctree}}\n:caption: {group}\n:maxdepth: 1\n\n" + "\n".join(entries) + "\n```"
                      for group, entries in groups.items())
    notebook["cells"].append({"cell_type": "markdown", "metadata": {}, "source": toc, "id": "site-toc"})
    index.write_text(json.dumps(notebook, indent=1), encoding="utf-8")


def staged_notebooks(src: Path) -> list[Path]:
    "The notebooks staged under `src` (not the cache's own copies, not checkpoints)."
    return [path for path in sorted(src.rglob("*.ipynb"))
            if ".jupyter_cache" not in path.parts and ".ipynb_checkpoints" not in path.parts]


def execute_one(path: str) -> tuple:
    "Execute the staged notebook `path` as MyST-NB's cache mode does: `(path, executed JSON or None, seconds, error)`."
    import nbformat
    from jupyter_cache.executors.utils import single_nb_execution
    notebook = nbformat.read(path, as_version=4)
    result = single_nb_execution(notebook, cwd=str(Path(path).parent), timeout=CELL_TIMEOUT, allow_errors=False,
                                 meta_override=True)
    if result.err is not None:
        return path, None, result.time, result.exc_string
    return path, nbformat.writes(result.nb), result.time, None


def pre_execute(src: Path, cache_path: Path, jobs: int) -> None:
    "Execute, `jobs` at a time, the staged notebooks the cache has no match for, and cache each that succeeds."
    import nbformat
    from jupyter_cache import get_cache
    from jupyter_cache.base import CacheBundleIn
    cache = get_cache(str(cache_path))
    todo = []
    for path in staged_notebooks(src):
        try:
            cache.match_cache_notebook(nbformat.read(path, as_version=4))
        except KeyError:
            todo.append(str(path))
    if not todo or jobs < 2:
        return
    print(f"make_site: executing {len(todo)} notebooks, {jobs} at a time", flush=True)
    context = multiprocessing.get_context("spawn")       # no forked copies of zmq or torch state
    with concurrent.futures.ProcessPoolExecutor(jobs, mp_context=context) as pool:
        for path, text, seconds, error in pool.map(execute_one, todo):
            name = Path(path).relative_to(src)
            if error is not None:
                print(f"make_site: {name} failed ({seconds:.0f} s); Sphinx runs it again and reports it", flush=True)
                continue
            cache.cache_notebook_bundle(CacheBundleIn(nbformat.reads(text, as_version=4), path,
                                                      data={"execution_seconds": seconds}),
                                        check_validity=False, overwrite=True)
            print(f"make_site: {name} executed in {seconds:.0f} s", flush=True)


def write_executed(src: Path, cache_path: Path, executed: Path) -> None:
    """Write every staged notebook, with the outputs the cache holds for it, under `executed`.

    MyST-NB writes its `jupyter_execute` copy from the notebook it read: with outputs when it executed it,
    without when the cache held it (it merges the cached outputs into a copy).  These are the executed
    notebooks a reader opens, and the figures the site test counts, so they are written from the cache."""
    import nbformat
    from jupyter_cache import get_cache
    cache = get_cache(str(cache_path))
    for path in staged_notebooks(src):
        try:
            _, merged = cache.merge_match_into_notebook(nbformat.read(path, as_version=4))
        except KeyError:
            continue                                   # not executed (it failed): Sphinx reported it
        target = executed / path.relative_to(src)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(nbformat.writes(merged), encoding="utf-8")


def build(out: Path, fresh: bool = False, jobs: int | None = None) -> int:
    src = ROOT / "_docs_src"
    cache = src / ".jupyter_cache"
    if fresh and src.exists():
        shutil.rmtree(src)
    kept = cache.exists()
    if kept:
        cache.rename(ROOT / ".jupyter_cache_kept")
    shutil.rmtree(src, ignore_errors=True)
    src.mkdir()
    if kept:
        (ROOT / ".jupyter_cache_kept").rename(cache)
    pages = stage(src)
    add_toc(src, pages)
    pre_execute(src, cache, jobs if jobs is not None else min(os.cpu_count() or 1, MAX_JOBS))
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", "--keep-going", str(src), str(out)]
    status = subprocess.run(command, cwd=ROOT).returncode
    if status == 0:
        write_executed(src, cache, out.parent / "jupyter_execute")
    return status


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "_docs" / "site", help="where the HTML goes (default: _docs/site)")
    parser.add_argument("--fresh", action="store_true", help="drop the execution cache and run every notebook")
    parser.add_argument("--jobs", type=int, default=None,
                        help=f"notebooks executed at once before Sphinx runs (default: one per core, at most {MAX_JOBS}; "
                             "1: Sphinx executes them one by one)")
    args = parser.parse_args()
    sys.exit(build(args.out.resolve(), args.fresh, args.jobs))
