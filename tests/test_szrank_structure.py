"""szrank's shape, read from its code with `ast` (nothing of it is run), and the
seed-contract rules that need no training: the package never imports suvi_fill, no
import cycles, no library function over 80 lines, no SystemExit outside `cli*`
modules; the objective's rules; the `--exporter` path contract; lowered priority."""
import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "szrank"
LONGEST_FUNCTION = 80


def modules():
    for path in sorted(PACKAGE.rglob("*.py")):
        name = ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        yield name, ast.parse(path.read_text())


def imports(tree):
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module


def test_szrank_never_imports_suvi_fill():
    for name, tree in modules():
        assert not [t for t in imports(tree) if t.split(".")[0] == "suvi_fill"], name
    code = "import sys, szrank.cli, szrank.train.loop, szrank.demo; assert not [m for m in sys.modules if m.startswith('suvi_fill')]"
    assert subprocess.run([sys.executable, "-c", code], cwd=ROOT).returncode == 0


def test_no_import_cycles():
    graph = {name: set() for name, _ in modules()}
    for name, tree in modules():
        for target in imports(tree):
            while target and target not in graph:
                target = target.rpartition(".")[0]
            if target and target != name and target != "szrank":
                graph[name].add(target)

    def reaches(start, goal, seen):
        for nxt in graph[start]:
            if nxt == goal or (nxt not in seen and (seen.add(nxt) or reaches(nxt, goal, seen))):
                return True
        return False
    assert [name for name in graph if reaches(name, name, set())] == []


def test_functions_are_short_and_only_cli_modules_exit():
    for name, tree in modules():
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                assert node.end_lineno - node.lineno + 1 <= LONGEST_FUNCTION, f"{name}:{node.name}"
            if isinstance(node, ast.Raise) and node.exc is not None and not name.split(".")[-1].startswith("cli"):
                exc = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                assert not (isinstance(exc, ast.Name) and exc.id == "SystemExit"), f"{name}:{node.lineno}"


def test_library_errors_are_szrank_errors_with_status_2():
    from szrank.plumbing.errors import OptionError, SzrankError
    from szrank.ranker.modelfile import ModelFileError, load_model
    from szrank.train.config import TrainConfig, validate_config
    with pytest.raises(OptionError) as error:
        validate_config(TrainConfig(batch_size=0))
    assert error.value.status == 2
    with pytest.raises(ModelFileError) as error:
        load_model(b"short")
    assert isinstance(error.value, SzrankError)


def test_one_useful_record_rule_for_loss_and_evaluation():
    "Training needs positive propensities; the evaluation scores every useful in-range record (the seed's two uses)."
    from types import SimpleNamespace
    from szrank.ranker.objective import clip_gain, policy_records, scored_policy_records, useful_records
    batch = SimpleNamespace(improved=torch.tensor([1.0, 0.0, 0.0, 0.4]), better=torch.tensor([False, True, False, False]),
                            plane_action=torch.tensor([0, 1, 2, 3]), move_action=torch.tensor([0, 1, 2, 3]),
                            scale_action=torch.tensor([0, 1, 2, 0]),
                            plane_propensity=torch.tensor([0.5, 0.0, 0.5, 0.5]),
                            move_propensity=torch.full((4,), 0.5), scale_propensity=torch.full((4,), 0.5))
    assert useful_records(batch).tolist() == [True, True, False, False]
    assert scored_policy_records(batch).tolist() == [True, True, False, False]
    assert policy_records(batch).tolist() == [True, False, False, False]
    assert clip_gain(torch.tensor([-5.0, 5.0]), 2.0).tolist() == [-2.0, 2.0]
    assert clip_gain(torch.tensor([-5.0, 5.0]), 0.0).tolist() == [-5.0, 5.0]


def test_metrics_and_loss_read_the_rules_from_the_objective():
    for module in ("train/metrics", "ranker/objective"):
        source = (PACKAGE / f"{module}.py").read_text()
        if module == "train/metrics":
            assert "scored_policy_records(batch)" in source and "clip_gain(" in source
            assert "improved > 0.5" not in source and ".clamp(-gain_clip" not in source


def test_report_architecture_comes_from_the_spec():
    from szrank.ranker import architecture
    report = architecture.architecture_report()
    assert (report["d_model"], report["layers"], report["heads"], report["feed_forward"], report["ensemble"]) == (
        architecture.MODEL_WIDTH, architecture.LAYER_COUNT, architecture.ATTENTION_HEADS,
        architecture.FEED_FORWARD_WIDTH, architecture.ENSEMBLE_SIZE)
    assert "MODEL_WIDTH" not in (PACKAGE / "train" / "loop.py").read_text()


@pytest.mark.skipif(os.name == "nt", reason="POSIX executable bits")
def test_exporter_is_a_path_with_spaces_user_and_relative_parts(tmp_path, monkeypatch):
    from szrank.plumbing.errors import OptionError
    from szrank.train.config import find_exporter
    folder = tmp_path / "home" / "build tools"
    folder.mkdir(parents=True)
    tool = folder / "Transformer Export"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(folder)
    assert find_exporter(tmp_path, "~/build tools/Transformer Export") == [str(tool.resolve())]
    assert find_exporter(tmp_path, "Transformer Export") == [str(tool.resolve())]        # relative to the cwd
    with pytest.raises(OptionError, match="training exporter not found") as error:   # a Windows path, never split
        find_exporter(tmp_path, r"C:\Program Files\TransformerTrainingExport.exe")
    assert r"C:\Program Files\TransformerTrainingExport.exe" in str(error.value)
    tool.chmod(0o644)
    with pytest.raises(OptionError, match="is not executable"):
        find_exporter(tmp_path, str(tool))


def test_exporter_is_searched_as_the_seed_does(tmp_path):
    from szrank.train.config import find_exporter
    release = tmp_path / "build" / "Release" / "TransformerTrainingExport.exe"
    debug = tmp_path / "build" / "x" / "Debug" / "TransformerTrainingExport.exe"
    for path in (debug, release):
        path.parent.mkdir(parents=True)
        path.write_text("")
    assert find_exporter(tmp_path, None) == [str(release.resolve())]
    release.unlink()
    assert find_exporter(tmp_path, None) == [str(debug.resolve())]


@pytest.mark.skipif(not hasattr(os, "getpriority"), reason="POSIX priorities")
def test_trainer_and_exporter_run_below_normal_priority(tmp_path):
    from szrank.stream.snapshot import create_training_snapshot
    report = tmp_path / "niceness"
    exporter = tmp_path / "exporter.py"
    exporter.write_text(f"import os, sys\nopen({str(report)!r}, 'w').write(str(os.nice(0)))\nsys.exit(1)\n")
    with pytest.raises(Exception):
        create_training_snapshot(tmp_path, [sys.executable, str(exporter)], tmp_path / "snap", False)
    assert int(report.read_text()) >= 5
    code = "import os; from szrank.plumbing.common import lower_priority; b = os.nice(0); lower_priority(); print(os.nice(0) - b)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout.strip() == "5"
