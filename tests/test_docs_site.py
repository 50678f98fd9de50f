"""The documentation site builds from the notebooks: every notebook has a page, with
at least the figures its executed cells produced; the API of both packages has one page per
module with signatures, and the general index lists it; the guide pages (getting started,
gallery, command-line reference, changelog and citation when the repository has them) are
there; backticked names in the prose link into the API; no page loads a script from a CDN;
the build log holds no kernel-transport or missing-cell-id warning.

Builds with .ci/make_site.py (Sphinx + MyST-NB), reusing its execution cache
(`_docs_src/.jupyter_cache`), so a second run executes only changed notebooks."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT

SITE = ROOT / "_docs" / "site"
EXECUTED = ROOT / "_docs" / "jupyter_execute"
NOTEBOOKS = sorted(p.relative_to(ROOT / "nbs").with_suffix("") for p in (ROOT / "nbs").rglob("*.ipynb")
                   if ".ipynb_checkpoints" not in p.parts)


BUILD_LOG = []


@pytest.fixture(scope="module")
def site():
    result = subprocess.run([sys.executable, str(ROOT / ".ci" / "make_site.py"), "--out", str(SITE)],
                            capture_output=True, text=True, cwd=ROOT)
    BUILD_LOG.append(result.stdout + result.stderr)
    failures = [line for line in (result.stdout + result.stderr).splitlines()
                if "WARNING" in line or "ERROR" in line]
    assert result.returncode == 0, "site build failed:\n" + "\n".join(failures[-20:])
    return SITE


def figures_in(executed: Path) -> int:
    "Image outputs of an executed notebook."
    cells = json.loads(executed.read_text(encoding="utf-8"))["cells"]
    return sum(1 for cell in cells for output in cell.get("outputs", [])
               if any(kind.startswith("image/") for kind in output.get("data", {})))


@pytest.mark.parametrize("page", NOTEBOOKS, ids=str)
def test_every_notebook_has_a_page_with_its_figures(site, page):
    html = site / page.with_suffix(".html")
    assert html.exists(), f"no page for nbs/{page}.ipynb"
    text = html.read_text(encoding="utf-8")
    executed = EXECUTED / page.with_suffix(".ipynb")
    expected = figures_in(executed) if executed.exists() else 0
    shown = len(re.findall(r'<img [^>]*src="[^"]*_images/', text))
    assert shown >= expected, f"{page}: {shown} figures on the page, {expected} in the executed notebook"


def test_the_site_has_figures_at_all(site):
    "The build executed the notebooks: the plots of the figure-making notebooks are on the site."
    assert sum(figures_in(p) for p in EXECUTED.rglob("*.ipynb")) >= 5
    assert len(list((site / "_images").glob("*.png"))) >= 5


def modules(package: str) -> list[str]:
    import importlib
    import pkgutil
    module = importlib.import_module(package)
    return [package] + sorted(m.name for m in pkgutil.walk_packages(module.__path__, f"{package}."))


@pytest.mark.parametrize("package,module,name", [("suvi_fill", "suvi_fill.plumbing.files", "suvi_fill.plumbing.files.atomic_write"),
                                                 ("szrank", "szrank.search.obj", "szrank.search.obj.read_configuration")])
def test_the_api_of_both_packages_is_listed(site, package, module, name):
    "The package page lists its modules; the module page has the function's entry with its parameters."
    assert f'href="{module}.html' in (site / "api" / f"{package}.html").read_text(encoding="utf-8")
    text = (site / "api" / f"{module}.html").read_text(encoding="utf-8")
    entry = text[text.index(f'id="{name}"'):]
    entry = entry[:entry.index("</dt>")]
    assert entry.count('class="sig-param"') >= 2, f"{name}: no parameters in its signature"


@pytest.mark.parametrize("package", ["suvi_fill", "szrank"])
def test_one_page_per_module(site, package):
    "Every module has its page; each exported function that takes parameters has its entry with them."
    import importlib
    import inspect
    for module in modules(package):
        page = site / "api" / (f"{module}.html" if module != package else f"{package}.html")
        assert page.exists(), f"no API page for {module}"
        text = page.read_text(encoding="utf-8")
        current = importlib.import_module(module)
        for public in getattr(current, "__all__", []):
            value = getattr(current, public)
            if not inspect.isfunction(value) or not inspect.signature(value).parameters:
                continue
            assert f'id="{module}.{public}"' in text, f"{module}.{public} has no entry on its page"
            entry = text[text.index(f'id="{module}.{public}"'):]
            assert 'class="sig-param"' in entry[:entry.index("</dt>")], f"{module}.{public}: no parameters shown"


def test_the_general_index_lists_the_api(site):
    text = (site / "genindex.html").read_text(encoding="utf-8")
    assert len(re.findall(r'href="api/[^"]+#', text)) >= 300, "genindex.html barely lists the API"
    assert "read_configuration()" in text and "atomic_write()" in text


def test_the_guide_pages_are_there(site):
    "Getting started, the gallery (with figures), and the CLI reference naming every subcommand of both scripts."
    assert "suvi-fill demo" in (site / "getting_started.html").read_text(encoding="utf-8")
    gallery = (site / "gallery.html").read_text(encoding="utf-8")
    assert len(re.findall(r'<img [^>]*src="_images/', gallery)) >= 3
    cli = (site / "cli.html").read_text(encoding="utf-8")
    import suvi_fill.cli
    import szrank.cli
    for prog, module in (("suvi-fill", suvi_fill.cli), ("szrank", szrank.cli)):
        for command in module.COMMANDS:
            assert f"{prog} {command.name}" in cli, f"{prog} {command.name} missing from the CLI reference"
    assert "--evaluations" in cli and "--checkpoint" in cli
    index = (site / "index.html").read_text(encoding="utf-8")
    assert 'href="getting_started.html"' in index and 'href="cli.html"' in index


@pytest.mark.parametrize("source,page,words", [("CHANGELOG.md", "changelog", None),
                                               ("CITATION.cff", "citation", "cite")])
def test_changelog_and_citation_pages_when_the_repository_has_them(site, source, page, words):
    if not (ROOT / source).exists():
        assert not (site / f"{page}.html").exists()
        pytest.skip(f"no {source} in this repository: no {page} page")
    text = (site / f"{page}.html").read_text(encoding="utf-8")
    first = next(line for line in (ROOT / source).read_text(encoding="utf-8").splitlines()
                 if line.strip() and not line.startswith(("#", "---")))
    assert (words or "") in text and first.split()[-1].strip("*_`") in text


def test_no_page_loads_a_script_from_a_cdn(site):
    remote = {page.relative_to(site).as_posix(): re.findall(r'<script[^>]*src="((?:https?:)?//[^"]+)"', text)
              for page in site.rglob("*.html") for text in [page.read_text(encoding="utf-8")]}
    assert not {page: srcs for page, srcs in remote.items() if srcs}


def test_the_prose_links_into_the_api(site):
    "Backticked API names in the notebooks' markdown are links to their API entries."
    linked = {}
    for page in NOTEBOOKS:
        text = (site / page.with_suffix(".html")).read_text(encoding="utf-8")
        linked[str(page)] = len(re.findall(r'<a class="reference internal" href="(?:\.\./)+api/[^"]+#[^"]+"', text))
    assert sum(linked.values()) >= 50 and sum(1 for n in linked.values() if n) >= 20, linked
    bench = (site / "suvi_fill" / "evaluate" / "71_bench.html").read_text(encoding="utf-8")
    assert re.search(r'href="(?:\.\./)+api/suvi_fill\.evaluate\.bench\.html#suvi_fill\.evaluate\.bench\.run_bench"', bench)


def test_the_build_log_is_clean(site):
    log = BUILD_LOG[-1]
    assert "Kernel is running over TCP" not in log
    assert "MissingIDFieldWarning" not in log


def test_every_notebook_cell_has_an_id():
    "nbformat 4.5 cells carry ids; a cell without one is a warning at every site build."
    for page in NOTEBOOKS:
        cells = json.loads((ROOT / "nbs" / page.with_suffix(".ipynb")).read_text(encoding="utf-8"))["cells"]
        assert all("id" in cell for cell in cells), f"nbs/{page}.ipynb: a cell without an id"


def test_the_landing_page_is_the_index_notebook(site):
    text = (site / "index.html").read_text(encoding="utf-8")
    assert "suvi-szrank" in text and "Quick start" in text


def test_the_bench_page_shows_its_measurement(site):
    "The bench notebook measures: its page shows the bench table and the PSNR-vs-gap plot."
    text = (site / "suvi_fill" / "evaluate" / "71_bench.html").read_text(encoding="utf-8")
    table = text[text.index("<table"):text.index("</table>")]
    assert "gap 16" in table and "blend" in table
    assert re.search(r'<img [^>]*src="[^"]*_images/', text)
