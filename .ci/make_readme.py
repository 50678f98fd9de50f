"""Write README.md from nbs/index.ipynb (markdown cells as they are, code cells as python blocks).

nbdev_readme needs Quarto, which these machines do not have; this is the same
idea in a few lines.  tests/test_foundation.py fails when README.md is stale.
Usage: python .ci/make_readme.py [OUT]   (default README.md)
"""
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def render(notebook: Path) -> str:
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    parts = ["<!-- Generated from nbs/index.ipynb by .ci/make_readme.py: edit the notebook, not this file. -->"]
    for cell in cells:
        source = "".join(cell["source"]).strip()
        if not source or source.startswith("#| hide"):
            continue
        parts.append(source if cell["cell_type"] == "markdown" else f"```python\n{source}\n```")
    return "\n\n".join(parts) + "\n"


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "README.md"
    out.write_text(render(ROOT / "nbs" / "index.ipynb"), encoding="utf-8")
