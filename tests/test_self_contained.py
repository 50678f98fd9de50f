"""The repository is self-contained: no notebook, test, package, benchmark or script reads a path
outside it, so a clone anywhere builds, tests and renders its site with every figure.

A reference outside is an absolute path under `/work`, a `../` chain that climbs above the
repository root from the file's own folder (notebooks run in their folder, so their relative
paths start there), or `Path(__file__)...parents[N]` / `.parent.parent...` that climbs above it.
`.ci/` (the machine set-up scripts) is left out: it names the machine's own paths on purpose."""
import os
import re
import subprocess
from pathlib import Path

import pytest

from helpers import ROOT

#: Files that run or are run: their paths are read at run time (documentation prose is not scanned).
CODE_SUFFIXES = {".py", ".ipynb", ".sh", ".ini", ".cfg", ".toml", ".yml", ".yaml", ".json"}
#: `.ci/` names the machine's paths on purpose; this file plants outside paths to check the scan finds them.
EXEMPT = (".ci/", "tests/test_self_contained.py")
ABSOLUTE = re.compile(r"(?<![\w.~-])/work(?:/|\b)")
CHAIN = re.compile(r"(?<![\w.])((?:\.\./)+)")
PARENTS = re.compile(r"__file__\)(?:\.resolve\(\)|\.absolute\(\))?\.parents\[(\d+)\]")
PARENT_CHAIN = re.compile(r"__file__\)(?:\.resolve\(\)|\.absolute\(\))?((?:\.parent)+)\b")


def is_code(path: Path, text: str) -> bool:
    return path.suffix in CODE_SUFFIXES or text.startswith("#!")


def outside_references(relative: Path, text: str) -> list[str]:
    """Each place in `text` (the file at `relative`, from the repository root) that names a path
    outside the repository, as `line N: what`; empty when it names none."""
    depth = len(relative.parent.parts)          # how many `../` the file's folder may climb and stay inside
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in ABSOLUTE.finditer(line):
            found.append(f"line {number}: absolute path {line[match.start():match.start() + 60]!r}")
        for match in CHAIN.finditer(line):
            if match.group(1).count("../") > depth:
                found.append(f"line {number}: {match.group(1)!r} climbs above the repository from {relative.parent}/")
        for match in PARENTS.finditer(line):
            if int(match.group(1)) > depth:
                found.append(f"line {number}: parents[{match.group(1)}] of {relative} is above the repository")
        for match in PARENT_CHAIN.finditer(line):
            if match.group(1).count(".parent") - 1 > depth:
                found.append(f"line {number}: {match.group(0)!r} of {relative} is above the repository")
    return found


def tracked_code(root: Path) -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=root, capture_output=True, check=True).stdout
    files = []
    for name in listed.decode().split("\0"):
        path = root / name
        if name and not name.startswith(EXEMPT) and path.is_file() and not path.is_symlink():
            files.append(Path(name))
    return files


def scan(root: Path) -> dict[str, list[str]]:
    "Every tracked code file under `root` (not `.ci/`) that names a path outside `root`, with the places."
    bad = {}
    for relative in tracked_code(root):
        try:
            text = (root / relative).read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue                              # binary data (FITS images) names no paths
        if is_code(relative, text) and (places := outside_references(relative, text)):
            bad[relative.as_posix()] = places
    return bad


def test_no_tracked_file_names_a_path_outside_the_repository():
    bad = scan(ROOT)
    assert not bad, "paths outside the repository:\n" + "\n".join(f"{f}: {p}" for f, ps in bad.items() for p in ps)


# The planted references, assembled from parts so that this file itself names no path outside the
# repository (the scan of the real tree, and any other reader, sees none here).
OUTSIDE_UP = "/".join([os.pardir] * 3 + ["shared"])
OUTSIDE_ABSOLUTE = "/" + "/".join(["work", "shared", "fixtures", "szilassi"])


def test_a_planted_reference_outside_is_found(tmp_path):
    "The scan really fails: a planted notebook, test and script that reach outside are each named."
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "nbs" / "szrank").mkdir(parents=True)
    (tmp_path / "tests").mkdir()
    (tmp_path / "nbs" / "szrank" / "bad.ipynb").write_text(
        '{"cells": [{"cell_type": "code", "source": ["p = Path(\\"' + OUTSIDE_UP + '/fixtures/x.obj\\")\\n",'
        ' "q = Path(\\"../../tests/data/ok.txt\\")"]}]}', encoding="utf-8")
    (tmp_path / "tests" / "test_bad.py").write_text(
        f'A = Path("{OUTSIDE_ABSOLUTE}")\nB = Path(__file__).resolve().parents[2] / "shared"\n'
        'C = Path(__file__).resolve().parent.parent / "tests"\n', encoding="utf-8")
    (tmp_path / "tests" / "test_good.py").write_text('D = Path(__file__).resolve().parents[1] / "nbs"\n', encoding="utf-8")
    (tmp_path / "README.md").write_text("Run from /work/main: prose is not scanned.\n", encoding="utf-8")
    subprocess.run(["git", "add", "."], cwd=tmp_path, check=True)
    bad = scan(tmp_path)
    assert set(bad) == {"nbs/szrank/bad.ipynb", "tests/test_bad.py"}
    assert len(bad["nbs/szrank/bad.ipynb"]) == 1 and "'../../../'" in bad["nbs/szrank/bad.ipynb"][0]
    assert len(bad["tests/test_bad.py"]) == 2 and "absolute path" in bad["tests/test_bad.py"][0]


@pytest.mark.parametrize("relative", ["szrank/data/topology_42_shape_c0_i4_optimalsymmetric.obj",
                                      "szrank/data/LICENSE.public_solver",
                                      "tests/data/szilassi/public_solver/topologies.txt",
                                      "tests/data/szilassi/public_solver/LICENSE",
                                      "suvi_fill/resources/aia_171_level1.fits"])
def test_the_data_the_notebooks_read_is_tracked(relative):
    listed = subprocess.run(["git", "ls-files", "--error-unmatch", relative], cwd=ROOT, capture_output=True)
    assert listed.returncode == 0, f"{relative} is not tracked: a clone would not have it"


def test_the_shipped_record_is_the_public_configuration():
    from szrank.geometry.defects import evaluate, layout
    from szrank.search.obj import PUBLIC_RECORD, read_configuration
    assert PUBLIC_RECORD.read_bytes() == (ROOT / "tests/data/szilassi/public_solver/topology_42"
                                          / "shape_c0_i4_optimalsymmetric.obj").read_bytes()
    defects = evaluate(*read_configuration(PUBLIC_RECORD, 42), layout(42))
    assert (defects.crossings[0], defects.intersections[0]) == (0, 4)
