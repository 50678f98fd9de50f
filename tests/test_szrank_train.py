"""szrank train end to end on the CPU: options, exit codes, the gate, --force-deploy,
publishing, interruption."""
import json
import signal
import subprocess
import sys
import time

import pytest

from helpers import run, tool
from szrank.stream.synthetic import synthesize_corpus
from szrank.ranker.modelfile import load_model
from szrank.widgets.plots import load_report
from szrank.stream.snapshot import SPLIT_RUNS
from szrank.stream.format import write_stream
from szrank.train.config import parse_args

# Every flag of the seed's parse_args with its default (--repository aside: the seed took its own checkout).
SEED_DEFAULTS = {
    "archive_root": "results/search", "exporter": None, "snapshot": None,
    "snapshot_directory": "runtime/transformer_training", "keep_snapshot": False, "deployment_all_runs": False,
    "output_directory": "results/search/neural/transformer", "seed": 0x5A17A551, "report_epochs": 5,
    "deployment_epochs": 0, "batch_size": 1024, "shuffle_records": 32768, "learning_rate": 3.0e-4,
    "weight_decay": 1.0e-4, "gradient_clip": 1.0, "gain_clip": 0.0, "ips_clip": 4.0, "max_records_per_split": 0,
    "minimum_gate_records": 1000, "no_bf16": False, "force_deploy": False, "nondeterministic": False,
}
TINY = {"train": 512, "validation": 256, "test": 256, "stress": 256}
FAST = ["--report-epochs", "1", "--batch-size", "128", "--shuffle-records", "512", "--threads", "1",
        "--device", "cpu", "--learning-rate", "2e-3"]


def test_every_seed_flag_with_its_default():
    args = vars(parse_args([]))
    for name, default in SEED_DEFAULTS.items():
        assert args[name] == default, name
    assert args["device"] == "auto" and args["split_runs"] is None and "repository" in args


@pytest.mark.parametrize("flags, message", [
    (["--batch-size", "0"], "--batch-size must be positive"),
    (["--report-epochs", "-1"], "--report-epochs must be positive"),
    (["--max-records-per-split", "-5"], "epoch/record bounds cannot be negative"),
    (["--ips-clip", "inf"], "--ips-clip must be positive and finite"),
    (["--gain-clip", "-0.5"], "--gain-clip must be finite and non-negative"),
    (["--threads", "0"], "--threads 0: needs at least 1"),
])
def test_bad_options_exit_2_with_the_seeds_message(flags, message):
    result = run([tool("szrank"), "train", *flags])
    assert result.returncode == 2, result.stderr
    assert message in result.stderr and len(result.stderr.strip().splitlines()) == 1


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "tiny.sztx"
    write_stream(path, synthesize_corpus(SPLIT_RUNS, seed=11, records=TINY))
    return path


def test_missing_snapshot_and_missing_exporter_exit_2(tmp_path):
    result = run([tool("szrank"), "train", "--snapshot", str(tmp_path / "nope.sztx"), *FAST], cwd=tmp_path)
    assert result.returncode == 2 and "Transformer training failed:" in result.stderr and "nope.sztx" in result.stderr
    failing = tmp_path / "failing exporter"          # --exporter is a path, spaces and all
    failing.write_text(f"#!{sys.executable}\nimport sys\nsys.exit(3)\n")
    failing.chmod(0o755)
    result = run([tool("szrank"), "train", "--exporter", str(failing),
                  "--archive-root", str(tmp_path), "--snapshot-directory", str(tmp_path / "snap"), *FAST],
                 cwd=tmp_path)
    assert result.returncode == 2 and "exited with status 3" in result.stderr
    assert not list((tmp_path / "snap").glob("*")), "a failed export left a file"


def test_gate_failure_exits_4_and_force_deploy_publishes(snapshot, tmp_path):
    out = tmp_path / "model"
    out.mkdir()
    previous = b"the previous model"
    (out / "current.sztf").write_bytes(previous)
    common = [tool("szrank"), "train", "--snapshot", str(snapshot), "--output-directory", str(out), *FAST,
              "--minimum-gate-records", "100000"]
    refused = run(common)
    assert refused.returncode == 4, refused.stderr
    assert "Deployment gate failed; current.sztf was not replaced" in refused.stderr
    assert "validation: fewer than 100000 records" in refused.stderr
    assert (out / "current.sztf").read_bytes() == previous
    rejected = list(out.glob("rejected_report_*_*.json"))
    assert len(rejected) == 1
    report = json.loads(rejected[0].read_text())
    digest = report["corpus_digest_sha256"]
    assert rejected[0].name.startswith(f"rejected_report_{digest}_")
    assert report["approved"] is False and "validation: fewer than 100000 records" in report["gate_reasons"]
    assert report["gate_overridden"] is False and len(report["report_training_history"]) == 1
    assert not list(out.glob("model_*.sztf"))

    forced = run(common + ["--force-deploy"])
    assert forced.returncode == 0, forced.stderr
    assert "WARNING: statistical deployment gate was overridden." in forced.stderr
    model = load_model(out / "current.sztf")
    assert model.header.gate_overridden and model.header.corpus_digest.hex() == digest
    assert model.header.validation_records == TINY["validation"] and model.header.training_seed == 0x5A17A551
    published = json.loads((out / "report.json").read_text())
    assert published["approved"] is True and published["gate_overridden"] is True and published["gate_reasons"]
    assert published["model_generation"] == f"model_{model.digest_sha256}.sztf"
    assert (out / published["model_generation"]).read_bytes() == (out / "current.sztf").read_bytes()
    assert published["deployment_epochs"] == 1 and set(published["split_records"]) == set(SPLIT_RUNS)
    validation = load_report(out)["reporting_metrics"]["validation"]   # the report with its curves file
    assert validation["records"] == TINY["validation"] and len(validation["calibration_bins"]["count"]) == 20
    assert published["training"]["device"] == "cpu" and published["training"]["bf16_autocast"] is False


def test_training_is_deterministic_on_cpu(snapshot, tmp_path):
    digests = []
    for name in ("a", "b"):
        result = run([tool("szrank"), "train", "--snapshot", str(snapshot), "--output-directory",
                      str(tmp_path / name), *FAST, "--minimum-gate-records", "1", "--force-deploy",
                      "--max-records-per-split", "256"])
        assert result.returncode == 0, result.stderr
        digests.append(load_model(tmp_path / name / "current.sztf").digest_sha256)
    assert digests[0] == digests[1]


def test_a_run_in_process_puts_the_thread_count_back(snapshot, tmp_path):
    """`--threads 1` holds for the run only: a notebook or test that trains keeps its own count after."""
    import torch
    from szrank.cli import train_main as main
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        status = main(["--snapshot", str(snapshot), "--output-directory", str(tmp_path / "model"), *FAST,
                       "--minimum-gate-records", "1", "--force-deploy", "--max-records-per-split", "256"])
        assert status == 0 and (tmp_path / "model" / "current.sztf").exists()
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


def test_interrupt_exits_130_and_leaves_current(snapshot, tmp_path):
    out = tmp_path / "model"
    out.mkdir()
    (out / "current.sztf").write_bytes(b"previous")
    process = subprocess.Popen([tool("szrank"), "train", "--snapshot", str(snapshot), "--output-directory", str(out),
                                *FAST, "--report-epochs", "50"], stderr=subprocess.PIPE, text=True)
    lines = []
    for line in process.stderr:
        lines.append(line)
        if line.startswith("Snapshot:"):
            time.sleep(1.0)
            process.send_signal(signal.SIGINT)
            break
    rest = process.communicate(timeout=120)[1]
    assert process.returncode == 130, "".join(lines) + rest
    assert "Training interrupted; current.sztf was not changed." in rest
    assert (out / "current.sztf").read_bytes() == b"previous"


def test_split_runs_file_and_deployment_all_runs(tmp_path):
    "Other run ids through --split-runs; an extra run joins only the deployment retrain."
    runs = {"train": "00000000-0000-4000-8000-000000000001", "validation": "00000000-0000-4000-8000-000000000002",
            "test": "00000000-0000-4000-8000-000000000003", "stress": "00000000-0000-4000-8000-000000000004"}
    extra = {"extra": "00000000-0000-4000-8000-000000000005"}
    import numpy as np
    from szrank.stream.synthetic import synthesize_run
    corpus = np.concatenate([synthesize_corpus(runs, seed=3, records=TINY),
                             synthesize_run(np.random.default_rng(4), extra["extra"], 128)])
    snapshot = tmp_path / "other.sztx"
    write_stream(snapshot, corpus)
    split_file = tmp_path / "splits.json"
    split_file.write_text(json.dumps(runs))
    common = [tool("szrank"), "train", "--snapshot", str(snapshot), *FAST, "--minimum-gate-records", "1",
              "--force-deploy", "--max-records-per-split", "128"]
    unknown = run(common + ["--output-directory", str(tmp_path / "a")])
    assert unknown.returncode == 2 and "Transformer training failed:" in unknown.stderr
    refused_extra = run(common + ["--output-directory", str(tmp_path / "b"), "--split-runs", str(split_file)])
    assert refused_extra.returncode == 2 and extra["extra"] in refused_extra.stderr
    result = run(common + ["--output-directory", str(tmp_path / "c"), "--split-runs", str(split_file),
                           "--deployment-all-runs"])
    assert result.returncode == 0, result.stderr
    report = json.loads((tmp_path / "c" / "report.json").read_text())
    assert report["split_runs"] == runs and report["deployment_all_runs"] is True
    assert report["split_records"]["deployment_extra"] == 128
    assert report["deployment_training_history"][0]["training"]["records"] == 4 * 128 + 128
    assert report["report_training_history"][0]["training"]["records"] == 128


def test_report_keeps_the_seeds_size_and_says_deterministic_truthfully(snapshot, tmp_path):
    "The plot curves go to curves.json; `deterministic` is what torch ran with (false with --nondeterministic)."
    for name, flags, deterministic in (("a", [], True), ("b", ["--nondeterministic"], False)):
        out = tmp_path / name
        result = run([tool("szrank"), "train", "--snapshot", str(snapshot), "--output-directory", str(out), *FAST,
                      "--minimum-gate-records", "1", "--force-deploy", "--max-records-per-split", "128", *flags])
        assert result.returncode == 0, result.stderr
        report = json.loads((out / "report.json").read_text())
        assert report["training"]["deterministic"] is deterministic
        assert all("calibration_bins" not in metrics for metrics in report["reporting_metrics"].values())
        curves = json.loads((out / "curves.json").read_text())["reporting_metrics"]
        assert set(curves["validation"]) == {"calibration_bins", "precision_recall", "gain_by_decile"}
        assert (out / f"curves_{report['model_digest_sha256']}.json").exists()
