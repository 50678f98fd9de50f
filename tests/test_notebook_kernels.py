"""Every notebook names its kernel, so JupyterLab (and Voilà, and the docs site's executor) open
it in the project's Python without asking; a notebook saved without one is caught here."""
import json
from pathlib import Path

import pytest

NBS = Path(__file__).resolve().parent.parent / "nbs"
NOTEBOOKS = sorted(p for p in NBS.rglob("*.ipynb") if ".ipynb_checkpoints" not in p.parts)


def test_there_are_notebooks():
    assert len(NOTEBOOKS) > 40


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: str(p.relative_to(NBS)))
def test_notebook_has_the_python3_kernelspec(path):
    spec = json.loads(path.read_text()).get("metadata", {}).get("kernelspec")
    assert spec is not None, f"{path.relative_to(NBS)}: no kernelspec in its metadata"
    assert spec.get("name") == "python3" and spec.get("language") == "python", spec
