"""The four widgets in a real browser: JupyterLab on localhost, Debian's Chromium driven
by Playwright.  A notebook shows the frame inspector, the filler inspector, the
calibration browser and szrank's new-best browser (a turnable 3-D view) on tiny data,
after `matplotlib.use("Agg")` (as the project's own notebooks call it); each widget must
draw its picture (a PNG, or the plotly view) with a caption, respond to its controls (the
picture changes and the caption names the new state), survive a burst of changes (one
picture, the caption at the last value), and leave no error in the browser console or
the kernel's output.  The 3-D view turns when dragged; the filler inspector's titles are
at least 12 px on screen; in an RGB the frame inspector's sliders name their channel.
Beside each widget the first picture is kept as a plain output, hidden while the widget
is live; saved and reopened in a new kernel (where the widgets' models are gone), the
notebook still shows the four pictures (the 3-D view still turns: plotly.js is inline).

Chromium comes from Debian (`apt-get install chromium`, done by .ci/run); Playwright
drives that executable (a browser downloaded by the driver cannot be installed here).
Without Chromium the test is skipped, except under CI, where it fails."""
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import sys
import time
import types
import urllib.request
from pathlib import Path

import pytest

from helpers import run, tool
from test_suvi_fillers import fill_corpus  # noqa: F401  (the tiny corpus fixture)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    if os.environ.get("CI"):
        raise RuntimeError("CI needs Debian's chromium for the browser test (.ci/run installs it)")
    pytest.skip("no chromium on PATH (apt-get install chromium)", allow_module_level=True)
sync_api = pytest.importorskip("playwright.sync_api")

CHROMIUM_FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-dev-shm-usage",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync"]
WAIT_MS = 120_000     # a redraw of the filler inspector takes seconds on a loaded 2-core machine
CELLS = {
    "frame": "from suvi_fill.widgets.corpus_inspector import inspector\ninspector(CORPUS)",
    "filler": "from suvi_fill.widgets.filler_inspector import filler_inspector\nfiller_inspector(CORPUS, gaps=(1, 4))",
    "calibration": "from szrank.widgets.plots import report_browser\nreport_browser(MODEL)",
    "view": "from szrank.widgets.view import NewBestBrowser\nNewBestBrowser(ARCHIVE, RUN).widget",
}
SCREEN_TITLE_PX = 12     # the least height of a title on screen that a person reads without leaning in


@pytest.fixture(scope="module")
def published_model(tmp_path_factory):
    "A published szrank model directory (a tiny forced-deploy training run)."
    from szrank.stream.snapshot import SPLIT_RUNS
    from szrank.stream.format import write_stream
    from szrank.stream.synthetic import synthesize_corpus
    base = tmp_path_factory.mktemp("szrank_model")
    write_stream(base / "tiny.sztx", synthesize_corpus(SPLIT_RUNS, seed=11,
                                                       records={"train": 512, "validation": 256, "test": 256, "stress": 256}))
    result = run([tool("szrank"), "train", "--snapshot", str(base / "tiny.sztx"), "--output-directory", str(base / "model"),
                  "--report-epochs", "1", "--batch-size", "128", "--shuffle-records", "512", "--threads", "1",
                  "--device", "cpu", "--force-deploy"])
    assert result.returncode == 0, result.stderr
    return base / "model"


@pytest.fixture(scope="module")
def search_run(tmp_path_factory):
    "An archive with one short annealed run (several new bests); `(archive, run id)`."
    from szrank.search.runs import run_search
    archive = tmp_path_factory.mktemp("szrank_archive")
    summary = run_search(archive, topology=42, steps=30, seed=3, replicas=2, iterations=3)
    return archive, str(summary.run_id)


def notebook(corpus: Path, model: Path, archive: Path, run_id: str) -> dict:
    setup = ("import matplotlib\nmatplotlib.use('Agg')   # as the project's notebooks do: the widgets must not depend on it\n"
             f"CORPUS, MODEL, ARCHIVE, RUN = {str(corpus)!r}, {str(model)!r}, {str(archive)!r}, {run_id!r}")
    cells = [setup] + list(CELLS.values())
    return {"cells": [{"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None, "source": c}
                      for c in cells],
            "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}},
            "nbformat": 4, "nbformat_minor": 5}


@pytest.fixture(scope="module")
def lab(fill_corpus, published_model, search_run, tmp_path_factory):
    "JupyterLab serving a folder with the widgets notebook; yields its URL."
    root = tmp_path_factory.mktemp("lab")
    (root / "widgets.ipynb").write_text(json.dumps(notebook(fill_corpus, published_model, *search_run)))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    token = secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(root / ".config"), JUPYTER_DATA_DIR=str(root / ".data"),
               JUPYTER_RUNTIME_DIR=str(root / ".runtime"), OMP_NUM_THREADS="1",
               PYTHONWARNINGS="ignore:pkg_resources is deprecated:UserWarning")
    log = (root / "server.log").open("w")
    server = subprocess.Popen([sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root", f"--port={port}",
                               "--ServerApp.ip=127.0.0.1", f"--IdentityProvider.token={token}",
                               f"--ServerApp.root_dir={root}", "--LabApp.news_url=",
                               "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate"],
                              stdout=log, stderr=subprocess.STDOUT, env=env)
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/api/status?token={token}", timeout=5)
                break
            except OSError:
                assert time.time() < deadline and server.poll() is None, (root / "server.log").read_text()[-3000:]
                time.sleep(0.5)
        yield types.SimpleNamespace(root=root, url=lambda name, workspace="default":
                                    f"http://127.0.0.1:{port}/lab/workspaces/{workspace}/tree/{name}?token={token}")
    finally:
        server.terminate()
        server.wait(timeout=30)


def run_all_cells(page) -> None:
    "Run > Run All Cells once the kernel is connected; again if no cell started (a request sent too early is lost)."
    page.wait_for_selector("text=Python 3 (ipykernel) | Idle", timeout=WAIT_MS)
    for _ in range(3):
        page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
        page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
        try:
            page.wait_for_function("[...document.querySelectorAll('.jp-InputPrompt')]"
                                   ".some(p => /\\[(\\*|\\d+)\\]/.test(p.textContent))", timeout=30_000)
            return
        except sync_api.Error:
            continue
    raise AssertionError("JupyterLab never started running the notebook's cells")


@pytest.fixture(scope="module")
def page(lab):
    "The notebook open in headless Chromium, every cell run; console errors collected in `page.errors`."
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_FLAGS)
        page = browser.new_page(viewport={"width": 1500, "height": 1100})
        page.errors = []
        page.on("console", lambda message: message.type == "error" and page.errors.append(message.text))
        page.on("pageerror", lambda error: page.errors.append(str(error)))
        page.goto(lab.url("widgets.ipynb"))
        run_all_cells(page)
        try:
            page.wait_for_function("[...document.querySelectorAll('.plot-caption')]"         # drawn and captioned
                                   f".filter(c => c.textContent.trim()).length >= {len(CELLS)}", timeout=WAIT_MS)
        except sync_api.Error:
            shot = Path(lab.root.name + ".png")
            page.screenshot(path=str(Path(os.environ.get("TMPDIR", "/tmp")) / shot.name), full_page=True)
            outputs = page.locator(".jp-OutputArea-output").all_inner_texts()
            raise AssertionError(f"the widgets did not draw; outputs: {[o[:300] for o in outputs]}; "
                                 f"console: {page.errors[:5]}; screenshot {shot.name} in the temp folder") from None
        yield page
        browser.close()


def cell(page, name: str):
    return page.locator(".jp-Notebook .jp-CodeCell").nth(1 + list(CELLS).index(name))


def caption(page, name: str) -> str:
    "The widget's caption as shown (scrolled into view: JupyterLab does not render cells far out of view)."
    shown = cell(page, name).locator(".plot-caption")
    shown.scroll_into_view_if_needed()
    return shown.inner_text()


def wait_for_caption(page, name: str, pattern: str) -> str:
    "Wait until the widget's caption matches `pattern` (a regular expression) and the kernel is idle."
    deadline = time.time() + WAIT_MS / 1000
    while not re.search(pattern, caption(page, name)):
        assert time.time() < deadline, f"{name}: caption {caption(page, name)!r} never matched {pattern!r}"
        time.sleep(0.2)
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=WAIT_MS)
    time.sleep(0.5)
    return caption(page, name)


def view(page, name: str = "view"):
    "The live 3-D view (plotly's graph div) inside a widget."
    return cell(page, name).locator(".plot-view .js-plotly-plot").first


def picture(page, name: str) -> bytes:
    if name == "view":
        return view(page).screenshot()
    return cell(page, name).locator(".jp-OutputArea-output img").first.screenshot()


def camera(page) -> dict:
    "Where the live 3-D view's camera is now (eye, centre, up), read from the scene's WebGL camera itself."
    return view(page).evaluate("g => JSON.parse(JSON.stringify(g._fullLayout.scene._scene.getCamera()))")


def assert_clean(page, name: str) -> None:
    """The widget shown once, with its picture in it, and its static copy hidden; no '<Figure ...>' text, no error
    anywhere."""
    cell(page, name).locator(".plot-caption").scroll_into_view_if_needed()
    outputs = cell(page, name).locator(".jp-Cell-outputArea > .jp-OutputArea-child > .jp-OutputArea-output")
    static = cell(page, name).locator(".plot-static")
    assert outputs.count() == 2 and cell(page, name).locator(".plot-caption").count() == 1, \
        f"{name}: {outputs.count()} outputs, {cell(page, name).locator('.plot-caption').count()} widgets (shown twice?)"
    assert static.count() == 1 and static.is_hidden(), f"{name}: the static copy of the picture is not hidden"
    text = outputs.first.inner_text()
    assert "<Figure size" not in text and "Traceback" not in text and "Error" not in text, f"{name}: {text[:300]}"
    assert cell(page, name).locator(".plot-error").count() == 0
    if name == "view":
        assert view(page).locator(".gl-container canvas").count() >= 1, f"{name}: no WebGL scene"
    else:
        assert cell(page, name).locator(".jp-OutputArea-output img").count() >= 1, f"{name}: no picture"


def test_each_widget_draws_a_picture_with_a_caption(page):
    for name in CELLS:
        assert_clean(page, name)
        assert caption(page, name).strip(), name
    assert page.errors == []


def test_the_frame_inspector_follows_its_slot_slider_through_a_burst(page):
    before_picture, before = picture(page, "frame"), caption(page, "frame")
    slot = int(re.search(r"slot (\d+)", before).group(1))
    slider = cell(page, "frame").locator(".widget-slider", has_text="slot").locator(".noUi-handle")
    slider.focus()
    for _ in range(5):                                  # a burst of changes, faster than a redraw
        page.keyboard.press("ArrowRight")
    after = wait_for_caption(page, "frame", rf"slot {slot + 5}\b")
    readout = cell(page, "frame").locator(".widget-slider", has_text="slot").locator(".widget-readout").inner_text()
    assert f"slot {readout.strip()}" in after                     # the picture is of the slot the slider shows
    assert picture(page, "frame") != before_picture
    assert_clean(page, "frame")
    assert page.errors == []


def test_the_filler_inspector_follows_its_sample_slider(page):
    before_picture = picture(page, "filler")
    slider = cell(page, "filler").locator(".widget-slider", has_text="sample").locator(".noUi-handle")
    slider.focus()
    page.keyboard.press("ArrowRight")
    wait_for_caption(page, "filler", r"sample 1\b")
    assert picture(page, "filler") != before_picture
    assert_clean(page, "filler")
    assert page.errors == []


def test_the_calibration_browser_follows_its_split(page):
    before_picture = picture(page, "calibration")
    cell(page, "calibration").locator("select").nth(1).select_option("test")
    wait_for_caption(page, "calibration", r"\btest\b")
    assert picture(page, "calibration") != before_picture
    assert_clean(page, "calibration")
    assert page.errors == []


def test_the_filler_inspector_titles_are_readable(page):
    "A title's height on screen: its size in the PNG times the scale the picture is shown at."
    from suvi_fill.widgets.filler_inspector import TITLE_POINTS
    from suvi_fill.widgets.panel import PNG_DPI
    image = cell(page, "filler").locator(".jp-OutputArea-output img").first
    shown, natural = image.evaluate("img => [img.getBoundingClientRect().width, img.naturalWidth]")
    on_screen = TITLE_POINTS * PNG_DPI / 72 * shown / natural
    assert on_screen >= SCREEN_TITLE_PX, f"titles {on_screen:.1f} px on screen (the picture at {shown / natural:.0%})"


def test_the_frame_inspector_sliders_name_their_rgb_channel(page):
    "In an RGB the vmin/vmax/gamma sliders act on the channel whose button is pressed, and the caption says which."
    frame = cell(page, "frame")
    frame.locator(".widget-dropdown", has_text="band").locator("select").select_option(label="RGB 304/171/195")
    wait_for_caption(page, "frame", r"304/171/195 Å · vmin/vmax/gamma of R 304 Å")
    before = picture(page, "frame")
    frame.locator(".widget-toggle-button", has_text="G 171 Å").click()
    wait_for_caption(page, "frame", r"vmin/vmax/gamma of G 171 Å")
    assert picture(page, "frame") != before                    # the histogram shown is green's
    assert_clean(page, "frame")
    assert page.errors == []


def test_the_3d_view_turns_when_dragged(page):
    "A mouse drag across the view turns it: plotly's camera moves and the picture changes; no console error."
    assert_clean(page, "view")
    before_picture, before = picture(page, "view"), camera(page)
    view(page).scroll_into_view_if_needed()
    box = view(page).bounding_box()                      # the scene fills the view; its middle is in the scene
    x, y = box["x"] + box["width"] / 2, box["y"] + box["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    for step in range(1, 11):
        page.mouse.move(x + 15 * step, y + 4 * step)
    page.mouse.up()
    page.wait_for_timeout(500)
    after = camera(page)
    if after["eye"] == before["eye"]:
        shot = Path(os.environ.get("TMPDIR", "/tmp")) / "view-not-turned.png"
        page.screenshot(path=str(shot))
        raise AssertionError(f"the camera did not move from {before['eye']} (dragged at {x:.0f}, {y:.0f} in {box}; "
                             f"screenshot {shot})")
    assert picture(page, "view") != before_picture
    assert page.errors == []


def test_the_new_best_browser_follows_its_slider(page):
    "One step left on the slider: the caption and the view's title name the new best before the last."
    first = caption(page, "view")
    count = int(re.search(r"new best (\d+) of (\d+)", first).group(2))
    assert first.startswith(f"new best {count} of {count}:")
    slider = cell(page, "view").locator(".widget-slider", has_text="new best").locator(".noUi-handle")
    slider.focus()
    page.keyboard.press("ArrowLeft")
    now = wait_for_caption(page, "view", rf"new best {count - 1} of {count}:")
    title = cell(page, "view").locator(".plot-view .js-plotly-plot .gtitle")
    title.first.wait_for(timeout=WAIT_MS)
    assert title.first.text_content() == now.strip()
    assert_clean(page, "view")
    assert page.errors == []


def test_a_saved_notebook_reopened_in_a_new_kernel_still_shows_the_pictures(page, lab):
    "Saved, copied and opened in a new kernel: no widget model exists, each cell's static picture shows."
    cell(page, "frame").locator(".jp-InputPrompt").click()          # the notebook focused, in command mode
    page.keyboard.press("Control+s")
    saved = lab.root / "widgets.ipynb"
    deadline = time.time() + WAIT_MS / 1000
    while saved.read_text(encoding="utf-8").count("plot-static-caption") < len(CELLS):
        assert time.time() < deadline, "the notebook was not saved with the static pictures"
        time.sleep(0.5)
    shutil.copy(saved, lab.root / "reopened.ipynb")
    reopened = page.context.browser.new_page(viewport={"width": 1500, "height": 1100})
    try:
        reopened.goto(lab.url("reopened.ipynb", workspace="reopened"))
        reopened.wait_for_selector("text=Python 3 (ipykernel) | Idle", timeout=WAIT_MS)
        reopened.wait_for_function("document.querySelectorAll('.plot-static img').length >= 3", timeout=WAIT_MS)
        reopened.wait_for_function("document.querySelectorAll('.plot-static .js-plotly-plot .main-svg').length >= 1",
                                   timeout=WAIT_MS)                   # plotly.js (inline) drew the 3-D view
        for name in CELLS:
            static = cell(reopened, name).locator(".plot-static")
            assert static.is_visible(), f"{name}: no static picture in the reopened notebook"
            if name == "view":
                assert static.locator(".js-plotly-plot .gl-container canvas").count() >= 1, name
            else:
                assert static.locator("img").evaluate("img => img.complete && img.naturalWidth > 100"), name
            assert "the picture when the cell ran" in static.text_content(), name      # its caption
            assert cell(reopened, name).locator(".plot-caption").count() == 0      # no live widget there
    finally:
        reopened.close()
