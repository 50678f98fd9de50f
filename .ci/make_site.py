"""Build the documentation site from the notebooks: every notebook a page with its
outputs (figures, tables), the API of both packages, `nbs/index.ipynb` as the landing page.

Beside the notebooks: *Getting started* (`docs/getting_started.md`), a gallery of the
results the executed notebooks drew, the command-line reference of `suvi-fill` and
`szrank` (their argparse parsers, walked at build time), the changelog (`CHANGELOG.md`)
and how to cite (`CITATION.cff`) when the repository has them, and the API: one page per
module (Sphinx autodoc, napoleon, viewcode; intersphinx into numpy, torch, astropy and
sunpy when their inventories can be fetched), with the general index filled.  Backticked
names in the notebooks' prose that are API objects link to their entries (`.ci/site_ext.py`).
No page loads a script from a CDN: a widget shows its static PNG, and neither require.js
nor the widget manager is loaded.

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
  reports the error as its own.  Their kernels talk over IPC sockets, not TCP.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import io
import json
import multiprocessing
import os
import pkgutil
import shutil
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# nbformat warns of every staged cell without an id (older notebooks' cells); MyST-NB reads them all the same.
warnings.filterwarnings("ignore", message="Cell is missing an id field")
PACKAGES = ("suvi_fill", "szrank")
#: The console scripts and the modules whose `COMMANDS` / `DESCRIPTION` define them.
CLIS = (("suvi-fill", "suvi_fill.cli"), ("szrank", "szrank.cli"))
NOT_EXECUTED = ("#| slow", "#| gpu", "#| eval: false")   # nbdev_test skips these (settings.ini tst_flags)
HIDDEN = ("#| hide",)
KERNELSPEC = {"display_name": "Python 3", "language": "python", "name": "python3"}
#: Seconds a cell may run before its notebook fails (MyST-NB's `nb_execution_timeout` below).
CELL_TIMEOUT = 900
#: Notebooks executed at once by default: each is a kernel of its own, and two fill a 2-core machine.
MAX_JOBS = 4
#: Pages written by hand (`docs/`), staged as they are.
HAND_WRITTEN = ROOT / "docs"
#: The gallery: notebooks whose figures are results, with what they show.  Each notebook's figures are taken
#: from its executed outputs (at most `GALLERY_FIGURES` each).
GALLERY = (
    ("suvi_fill/evaluate/71_bench", "The fillers' display PSNR against the gap: suvi-fill bench on the tests' tiny corpus."),
    ("suvi_fill/sim/39_realism", "The synthetic Sun held against the real AIA 171 Å and EIT 195 Å disks."),
    ("szrank/widgets/62_view", "A record polyhedron: the public solver's configuration on topology 42 (the paper's #43), "
                       "C = 0, I = 4, crossing edges red, intersecting edges blue."),
    ("szrank/widgets/61_plots", "The ranker's calibration (reliability), precision-recall and gain."),
)
GALLERY_FIGURES = 3
#: Optional pages: made only when the repository has the file.
CHANGELOG, CITATION = ROOT / "CHANGELOG.md", ROOT / "CITATION.cff"

CONF = '''
import sys
from pathlib import Path
sys.path.insert(0, {ci!r})                       # .ci/site_ext.py: prose links, docstring escapes, offline intersphinx
project = "suvi-szrank"
author = "Research Tooling"
extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.autosummary", "sphinx.ext.napoleon",
              "sphinx.ext.intersphinx", "sphinx.ext.viewcode", "site_ext"]
root_doc = "index"
exclude_patterns = ["_build", ".jupyter_cache", "**/.ipynb_checkpoints"]
html_theme = "sphinx_book_theme"
html_title = "suvi-szrank"
# The API: one page per module (written by make_site.py), every name of its `__all__` with its parameters.
autodoc_default_options = {{"members": True, "undoc-members": True, "show-inheritance": True}}
autodoc_member_order = "bysource"
autosummary_generate = False
default_role = "py:obj"                        # `name` in a docstring links when it names an object
# Without a network the inventories cannot be fetched: site_ext says so in one line and the build goes on.
intersphinx_mapping = {{
    "python": ("https://docs.python.org/3", None),
    "numpy": ("https://numpy.org/doc/stable/", None),
    "torch": ("https://docs.pytorch.org/docs/stable/", None),
    "astropy": ("https://docs.astropy.org/en/stable/", None),
    "sunpy": ("https://docs.sunpy.org/en/stable/", None),
}}
intersphinx_timeout = 5
nb_execution_mode = "cache"
nb_execution_cache_path = str(Path(__file__).resolve().parent / ".jupyter_cache")   # beside this file, whatever the cwd
nb_execution_timeout = {timeout}
nb_execution_raise_on_error = False   # report every failing notebook (a warning, an error under -W)
nb_execution_show_tb = True
nb_merge_streams = True
nb_render_markdown_format = "myst"    # a notebook's markdown output (the bench's table) as MyST: tables render
# A widget keeps its first picture beside it as HTML (the PNG inline) and as the PNG: the site takes the
# PNG, an image file like every other figure (no widget model exists on a static page) ...
nb_mime_priority_overrides = [("*", "image/png", 25)]
# ... so no page needs require.js or the widget manager, which MyST-NB would load from public CDNs.
nb_ipywidgets_js = {{}}
# `name` in a docstring that more than one object has (`data`) stays text: not a warning.
suppress_warnings = ["mystnb.unknown_mime_type", "myst.header", "misc.highlighting_failure", "ref.python"]
'''.format(ci=str(ROOT / ".ci"), timeout=CELL_TIMEOUT)


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


def modules_of(package: str) -> list[str]:
    "The package and each of its modules, by name (only the package itself is imported)."
    import importlib
    module = importlib.import_module(package)
    return [package] + sorted(m.name for m in pkgutil.walk_packages(module.__path__, f"{package}."))


def undocumented_data(name: str) -> list[str]:
    """Names in module `name`'s `__all__` that are values (constants), not functions or classes, and have no
    `#:` comment: autodoc's `:members:` leaves those out, so they get an `autodata` entry of their own."""
    import importlib
    import inspect
    from sphinx.pycode import ModuleAnalyzer
    module = importlib.import_module(name)
    commented = {attribute for (_, attribute) in ModuleAnalyzer.for_module(name).find_attr_docs()}
    return [public for public in getattr(module, "__all__", [])
            if public not in commented and not (inspect.isclass(value := getattr(module, public, None))
                                                or callable(value) or inspect.ismodule(value))]


#: Longest value shown beside a constant (a table of 59 triangulations is not).
SHOWN_VALUE = 200


def shown(value) -> bool:
    "Whether an API page shows a constant's value: short, and not naming this checkout's files (a path)."
    text = repr(value)
    return len(text) <= SHOWN_VALUE and str(ROOT) not in text


def module_page(name: str) -> str:
    "A MyST page of one module: autodoc of its docstring and every name of its `__all__`, constants included."
    import importlib
    module = importlib.import_module(name)
    data = "".join(f".. autodata:: {name}.{public}\n" + ("" if shown(getattr(module, public)) else "   :no-value:\n")
                   for public in undocumented_data(name))
    return f"# `{name}`\n\n```{{eval-rst}}\n.. automodule:: {name}\n\n{data}```\n"


def api_index(package: str, modules: list[str]) -> str:
    "The API page of `package`: the package's own names, a summary table of its modules (autosummary), their pages."
    submodules = [name for name in modules if name != package]
    listing = "\n".join(f"   {name.removeprefix(package + '.')}" for name in submodules)   # relative to the package
    return (f"# API: `{package}`\n\nOne page per module: its docstring, and each name it exports with its "
            "signature, its documentation and a link to its source.  Every name is in the "
            "{ref}`general index <genindex>`.\n\n"
            + module_page(package).split("\n", 2)[2]
            + f"\n## Modules\n\n```{{eval-rst}}\n.. autosummary::\n\n{listing}\n```\n\n"
            + "```{toctree}\n:hidden:\n:maxdepth: 1\n\n" + "\n".join(submodules) + "\n```\n")


def help_of(prog: str, module_name: str, argv: list[str]) -> str:
    "What `prog ARGV --help` prints (the real parsers, as a user sees them)."
    import importlib
    main = importlib.import_module(module_name).main
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main(argv + ["--help"])
    return out.getvalue().rstrip()


def options_table(parser: argparse.ArgumentParser) -> str:
    "A markdown table of a parser's arguments, walked from its actions: flags, default, help."
    rows = ["| argument | default | what it is |", "|---|---|---|"]
    for action in parser._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        flags = ", ".join(action.option_strings) or action.dest
        if action.choices:
            flags += " {" + ",".join(map(str, action.choices)) + "}"
        required = " (required)" if action.required and action.option_strings else ""
        default = "" if action.default in (None, False, argparse.SUPPRESS) or action.required else f"`{action.default}`"
        text = action.help or ""
        if "%(" in text:                                    # argparse's own expansion: %(default)s and the like
            text = text % dict(vars(action), prog=parser.prog)
        text = " ".join(text.split()).replace("|", "\\|")
        rows.append(f"| `{flags.replace('|', '/')}`{required} | {default} | {text} |")
    return "\n".join(rows)


def cli_page() -> str:
    "The command-line reference: each console script, each subcommand's parser walked (usage, arguments, help)."
    import importlib
    os.environ.setdefault("COLUMNS", "100")                 # argparse's help width: stable across terminals
    parts = ["# Command-line reference\n",
             "Generated at build time from the parsers themselves: `suvi-fill` and `szrank`, each "
             "subcommand with its usage and arguments.\n"]
    for prog, module_name in CLIS:
        module = importlib.import_module(module_name)
        parts += [f"## `{prog}`\n", f"{module.DESCRIPTION}\n", f"```text\n{help_of(prog, module_name, [])}\n```\n"]
        for command in module.COMMANDS:
            parser = argparse.ArgumentParser(prog=f"{prog} {command.name}", description=command.help)
            command.load()(parser)
            parts += [f"### `{prog} {command.name}`\n", f"{command.help}\n",
                      f"```text\n{parser.format_usage().strip()}\n```\n", options_table(parser) + "\n"]
    return "\n".join(parts)


def executed_outputs(src: Path, cache_path: Path, page: str) -> list[dict]:
    "The outputs of the staged notebook `page` as the cache holds them executed ([] when it is not)."
    import nbformat
    from jupyter_cache import get_cache
    path = src / f"{page}.ipynb"
    if not path.exists():
        return []
    try:
        _, merged = get_cache(str(cache_path)).merge_match_into_notebook(nbformat.read(path, as_version=4))
    except KeyError:
        return []
    return [output for cell in merged.cells for output in cell.get("outputs", [])]


def gallery_page(src: Path, cache_path: Path) -> str:
    "The gallery: the figures of the result notebooks (`GALLERY`), taken from their executed outputs."
    import base64
    parts = ["# Gallery\n", "Results the notebooks draw when the site is built, each linked to the page that "
             "explains it.\n"]
    for page, caption in GALLERY:
        figures = [output["data"]["image/png"] for output in executed_outputs(src, cache_path, page)
                   if "image/png" in output.get("data", {})][-GALLERY_FIGURES:]
        parts.append(f"## {caption}\n\nFrom {{doc}}`{page}`.\n")
        for k, data in enumerate(figures):
            name = f"gallery/{page.replace('/', '_')}_{k}.png"
            (src / name).parent.mkdir(parents=True, exist_ok=True)
            (src / name).write_bytes(base64.b64decode(data if isinstance(data, str) else "".join(data)))
            parts.append(f"![{caption}]({name})\n")
        if not figures:
            parts.append("*(not executed in this build)*\n")
    return "\n".join(parts)


def citation_page() -> str:
    "How to cite: the repository's CITATION.cff, its title, authors and version in a line, and the file itself."
    text = CITATION.read_text(encoding="utf-8")
    line = ""
    try:
        import yaml
        cff = yaml.safe_load(text)
        authors = ", ".join(" ".join(filter(None, (a.get("given-names"), a.get("family-names")))) or a.get("name", "")
                            for a in cff.get("authors", []))
        line = (f"> {authors}. *{cff.get('title', '')}*" + (f", version {cff['version']}" if cff.get("version") else "")
                + (f" ({cff['date-released']})" if cff.get("date-released") else "")
                + (f". {link}" if (link := cff.get("url") or cff.get("repository-code")) else "") + "\n")
    except Exception:                                  # no PyYAML, or a file it cannot read: the file alone
        pass
    return (f"# How to cite\n\nIf you use suvi-szrank in your work, please cite it as its `CITATION.cff` says"
            f" (GitHub's *Cite this repository* reads the same file):\n\n{line}\n```yaml\n{text.rstrip()}\n```\n")


def changelog_page() -> str:
    "The changelog: CHANGELOG.md included as it is (under a title of its own when it has none)."
    first = next((line for line in CHANGELOG.read_text(encoding="utf-8").splitlines() if line.strip()), "")
    title = "" if first.startswith("# ") else "# Changelog\n\n"
    return f"{title}```{{include}} ../CHANGELOG.md\n```\n"


def stage(src: Path) -> list[str]:
    "Stage every notebook, the hand-written pages, the CLI reference, the optional pages and the API; returns the page names."
    pages = []
    for notebook in sorted((ROOT / "nbs").rglob("*.ipynb")):
        relative = notebook.relative_to(ROOT / "nbs")
        if ".ipynb_checkpoints" in relative.parts:
            continue
        stage_notebook(notebook, src / relative)
        pages.append(relative.with_suffix("").as_posix())
    for page in sorted(HAND_WRITTEN.glob("*.md")):
        shutil.copyfile(page, src / page.name)
        pages.append(page.stem)
    (src / "cli.md").write_text(cli_page(), encoding="utf-8")
    pages += ["gallery", "cli"]
    for path, name, make in ((CHANGELOG, "changelog", changelog_page), (CITATION, "citation", citation_page)):
        if path.exists():
            (src / f"{name}.md").write_text(make(), encoding="utf-8")
            pages.append(name)
    (src / "api").mkdir(parents=True, exist_ok=True)
    for package in PACKAGES:
        modules = modules_of(package)
        for name in modules[1:]:                           # the package itself: on its index page
            (src / "api" / f"{name}.md").write_text(module_page(name), encoding="utf-8")
        (src / "api" / f"{package}.md").write_text(api_index(package, modules), encoding="utf-8")
        pages.append(f"api/{package}")
    (src / "conf.py").write_text(CONF, encoding="utf-8")
    return pages


#: The table of contents: the guide pages first (in this order), then the notebooks, then the API.
GUIDE = ("getting_started", "gallery", "cli", "changelog", "citation")


def add_toc(src: Path, pages: list[str]) -> None:
    "Append the table of contents (every page but the landing one) to the staged index notebook."
    index = src / "index.ipynb"
    notebook = json.loads(index.read_text(encoding="utf-8"))
    groups = {"guide": [page for page in GUIDE if page in pages]}
    for page in pages:
        if page != "index" and page not in GUIDE:
            groups.setdefault(page.split("/")[0], []).append(page)
    groups["api"] = groups.get("api", []) + ["genindex"]
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
    from traitlets.config import Config
    notebook = nbformat.read(path, as_version=4)
    # IPC sockets in a private folder: the kernel is local, and over TCP it warns that nothing is encrypted.
    with tempfile.TemporaryDirectory(prefix="kernel-") as sockets:
        config = Config({"KernelManager": {"transport": "ipc", "ip": str(Path(sockets) / "k")}})
        result = single_nb_execution(notebook, cwd=str(Path(path).parent), timeout=CELL_TIMEOUT, allow_errors=False,
                                     meta_override=True, config=config)
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
    (src / "gallery.md").write_text(gallery_page(src, cache), encoding="utf-8")
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
