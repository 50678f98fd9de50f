"""szrank's contracts with the original trainer that need no training: library errors are `SzrankError`s with
status 2; the objective's record rules, read by the metrics and the loss alike; the report's architecture from
the spec; the `--exporter` path contract; lowered priority.  (The package's shape, its imports, cycles and
function lengths, is `tests/test_structure.py`'s.)"""
import os
import subprocess
import sys

import pytest
import torch

from helpers import ROOT

PACKAGE = ROOT / "szrank"


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
    "Training needs positive propensities; the evaluation scores every useful in-range record (the original trainer's two uses)."
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


def test_exporter_is_searched_as_the_original_trainer_does(tmp_path):
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
