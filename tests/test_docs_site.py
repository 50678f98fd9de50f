"""The documentation site builds from the notebooks: every notebook has a page, with
at least the figures its executed cells produced, and the API of both packages is listed.

Builds with .ci/make_site.py (Sphinx + MyST-NB), reusing its execution cache
(`_docs_src/.jupyter_cache`), so a second run executes only changed notebooks."""
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SITE = ROOT / "_docs" / "site"
EXECUTED = ROOT / "_docs" / "jupyter_execute"
NOTEBOOKS = sorted(p.relative_to(ROOT / "nbs").with_suffix("") for p in (ROOT / "nbs").rglob("*.ipynb")
                   if ".ipynb_checkpoints" not in p.parts)


@pytest.fixture(scope="module")
def site():
    result = subprocess.run([sys.executable, str(ROOT / ".ci" / "make_site.py"), "--out", str(SITE)],
                            capture_output=True, text=True, cwd=ROOT)
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


@pytest.mark.parametrize("package,name", [("suvi_fill", "suvi_fill.files.atomic_write"),
                                          ("szrank", "szrank.stream")])
def test_the_api_of_both_packages_is_listed(site, package, name):
    assert name in (site / "api" / f"{package}.html").read_text(encoding="utf-8")


def test_the_landing_page_is_the_index_notebook(site):
    text = (site / "index.html").read_text(encoding="utf-8")
    assert "suvi-szrank" in text and "Quick start" in text
