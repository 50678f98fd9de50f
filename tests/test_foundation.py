"""The project's foundation: notebooks and packages in sync, clean notebooks,
two packages from one nbdev project, console scripts, import hygiene."""
import filecmp
import json
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import ROOT, copy_tracked, run, tool

PACKAGES = ("suvi_fill", "szrank")


def python_files(base: Path) -> dict:
    return {p.relative_to(base).as_posix(): p for package in PACKAGES
            for p in (base / package).rglob("*.py") if "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    "A copy of the checkout in which nbdev_export and nbdev_clean have been re-run."
    copy = copy_tracked(tmp_path_factory.mktemp("checkout"))
    for command in ("nbdev_export", "nbdev_clean"):
        result = run([tool(command)], cwd=copy)
        assert result.returncode == 0, f"{command} failed:\n{result.stdout}\n{result.stderr}"
    return copy


def test_exported_modules_match_the_notebooks(exported):
    committed, fresh = python_files(ROOT), python_files(exported)
    assert sorted(fresh) == sorted(committed), (
        "exported module set differs from the committed one; run nbdev_export and commit: "
        f"only in export {sorted(set(fresh) - set(committed))}, "
        f"only committed {sorted(set(committed) - set(fresh))}")
    stale = [name for name in committed if not filecmp.cmp(committed[name], fresh[name], shallow=False)]
    assert not stale, f"modules differ from what their notebooks export (edit the notebook, nbdev_export): {stale}"


def test_notebooks_are_clean(exported):
    notebooks = sorted(p.relative_to(ROOT) for p in (ROOT / "nbs").rglob("*.ipynb")
                       if ".ipynb_checkpoints" not in p.parts)
    assert notebooks, "no notebooks found"
    dirty = [str(n) for n in notebooks if (ROOT / n).read_bytes() != (exported / n).read_bytes()]
    assert not dirty, f"notebooks not nbdev_clean-clean (run nbdev_clean): {dirty}"


def test_no_stray_files_at_the_root(exported):
    for name in ("__init__.py", "_modidx.py"):
        assert not (ROOT / name).exists() and not (exported / name).exists(), name


def test_every_notebook_exports_into_its_own_package():
    for package in PACKAGES:
        for notebook in (ROOT / "nbs" / package).glob("*.ipynb"):
            cells = json.loads(notebook.read_text())["cells"]
            targets = ["".join(c["source"]).split("default_exp", 1)[1].split()[0]
                       for c in cells if c["cell_type"] == "code" and "#| default_exp" in "".join(c["source"])]
            assert len(targets) <= 1, notebook
            for target in targets:
                assert target.split(".")[0] == package, f"{notebook.name} exports to {target}"


def test_readme_is_generated_from_index(tmp_path):
    out = tmp_path / "README.md"
    result = run([sys.executable, str(ROOT / ".ci" / "make_readme.py"), str(out)])
    assert result.returncode == 0, result.stderr
    assert out.read_text() == (ROOT / "README.md").read_text(), \
        "README.md is stale: run python .ci/make_readme.py"
    assert (ROOT / "README.md").read_text().count("bash .ci/quickstart ") == 2


def test_imports_have_no_side_effects(tmp_path):
    code = ("import sys, suvi_fill, szrank; "
            "assert 'torch' not in sys.modules, 'importing a package imported torch'; "
            "print(suvi_fill.__version__, szrank.__version__)")
    result = run([sys.executable, "-c", code], cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert list(tmp_path.iterdir()) == [], "import wrote files"
    from configparser import ConfigParser
    config = ConfigParser(delimiters=["="]); config.read(ROOT / "settings.ini")
    version = config["DEFAULT"]["version"]
    assert result.stdout.split() == [version, version]


def test_the_packages_import_from_the_notebook_folder():
    "nbs/ holds folders named like the packages: a notebook opened there must still import the real ones."
    code = "import suvi_fill, szrank; print(suvi_fill.__version__, szrank.__version__)"
    result = run([sys.executable, "-c", code], cwd=ROOT / "nbs")
    assert result.returncode == 0, result.stderr


@pytest.mark.parametrize("script", ["suvi-fill", "szrank"])
def test_console_scripts(script):
    help_text = run([tool(script), "--help"])
    assert help_text.returncode == 0 and "version" in help_text.stdout and "demo" in help_text.stdout
    version = run([tool(script), "version"])
    assert version.returncode == 0
    own, other = ("suvi_fill", "szrank") if script == "suvi-fill" else ("szrank", "suvi_fill")
    assert f"{own} " in version.stdout and f"{other} " not in version.stdout
    unknown = run([tool(script), "no-such-command"])
    assert unknown.returncode == 2 and "invalid choice" in unknown.stderr
    missing = run([tool(script)])
    assert missing.returncode == 2


def test_every_registered_command_resolves():
    import suvi_fill.cli, szrank.cli
    for table in (suvi_fill.cli.COMMANDS, szrank.cli.COMMANDS):
        for command in table:
            assert callable(command.load()), command


@pytest.mark.parametrize("package", ["suvi_fill", "szrank"])
def test_every_command_prints_its_help(package, capsys):
    "argparse formats help lazily, so a stray '%' in a help text fails only here, at --help."
    import importlib
    cli = importlib.import_module(f"{package}.cli")
    for command in cli.COMMANDS:
        with pytest.raises(SystemExit) as stop:
            cli.main([command.name, "--help"])
        assert stop.value.code == 0, command.name
        assert capsys.readouterr().out.startswith("usage:"), command.name


def test_install_hooks_work_in_a_checkout(tmp_path):
    copy = copy_tracked(tmp_path / "repo")
    subprocess.run(["git", "init", "-q"], cwd=copy, check=True)
    result = run([tool("nbdev_install_hooks")], cwd=copy, env={"HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    assert "../.gitconfig" in (copy / ".git" / "config").read_text()
    assert "nbdev-merge" in (copy / ".gitconfig").read_text()
    assert "merge=nbdev-merge" in (copy / ".gitattributes").read_text()
    assert "nbdev_clean_jupyter" in (tmp_path / ".jupyter" / "jupyter_server_config.py").read_text()


SCRATCH_FIRST = 'tempfile.tempdir = tempfile.mkdtemp(prefix="nbs-")'
SCRATCH_LAST = "shutil.rmtree(_nbs_scratch)"


def makes_temporary_folders(cells) -> bool:
    text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
    return "mkdtemp(" in text.replace(SCRATCH_FIRST, "") or "= tempfile.TemporaryDirectory(" in text


def test_notebooks_that_make_temporary_folders_remove_them():
    "Each such notebook points tempfile at one scratch folder before its examples and removes it in its last cell."
    missing = []
    for notebook in sorted((ROOT / "nbs").rglob("*.ipynb")):
        cells = [c for c in json.loads(notebook.read_text())["cells"] if c["cell_type"] == "code"]
        if not makes_temporary_folders(cells):
            continue
        sources = ["".join(c["source"]) for c in cells]
        first = next(s for s in sources if "mkdtemp(" in s or "TemporaryDirectory(" in s)   # the scratch cell's own too
        if SCRATCH_FIRST not in first or SCRATCH_LAST not in sources[-1]:
            missing.append(str(notebook.relative_to(ROOT)))
    assert not missing, f"notebooks that leave temporary folders behind (see nbs/szrank/plumbing/07_lock.ipynb): {missing}"


def test_running_notebooks_leaves_the_temporary_folder_as_it_was(tmp_path):
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    notebooks = ["nbs/szrank/plumbing/07_lock.ipynb", "nbs/suvi_fill/corpus/40_shards.ipynb",
                 "nbs/suvi_fill/model/54_shipped.ipynb"]
    for notebook in notebooks:
        result = run([tool("nbdev_test"), "--path", notebook, "--n_workers", "0"], cwd=ROOT,
                     env={"TMPDIR": str(scratch)}, timeout=600)
        assert result.returncode == 0, result.stdout + result.stderr
    assert sorted(p.name for p in scratch.iterdir()) == []
