"""`szrank demo` end to end: the synthetic corpus passes the gate honestly through
the real exporter path; the same corpus with its labels shuffled fails it.  The
published report then feeds the calibration plots (headless, Agg).  The search
stage (uniform search -> `szrank export` -> train -> gate -> publish -> guided
search) runs at a tiny size in the same demo run, and reports the gate's
verdict whichever way it goes; so does the symmetric stage (proposal records
from training topologies -> proposal ranker -> guided against unguided on
held-out topologies)."""
import json

import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
import pytest

from helpers import run, tool
from szrank.ranker.modelfile import load_model
from szrank.ranker.reference import reference_forward
from szrank.widgets.plots import (list_generations, load_report, plot_gain_uplift, plot_precision_recall,
                          plot_reliability, plot_split)


TINY_SYMMETRIC = ("--ranker-evaluations", "640", "--guided-evaluations", "640", "--guided-seeds", "2")


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("demo") / "szrank"
    # Every stage; the search stage at a tiny size (4 runs x 40 steps), the symmetric one too.
    result = run([tool("szrank"), "demo", "--out", str(out), "--stages", "synthetic,symmetric,search",
                  "--search-runs", "4", "--search-steps", "40", *TINY_SYMMETRIC])
    return out, result


def test_demo_passes_the_gate_and_publishes(demo):
    out, result = demo
    assert result.returncode == 0, result.stdout + result.stderr
    assert "szrank demo [synthetic]: gate passed" in result.stdout
    for split in ("validation", "test", "stress"):
        assert f"  {split} " in result.stdout
    assert str((out / "model" / "current.sztf").resolve()) in result.stdout
    # It went through the exporter: the snapshot was made by the trainer (and removed afterwards).
    assert "Exporting an immutable training snapshot:" in result.stderr and "szrank.demo replay" in result.stderr
    assert not list((out / "snapshots").glob("*.sztx*"))
    model = load_model(out / "model" / "current.sztf")
    report = json.loads((out / "model" / "report.json").read_text())
    assert report["approved"] is True and report["gate_overridden"] is False and report["gate_reasons"] == []
    assert not model.header.gate_overridden
    assert model.header.corpus_digest.hex() == report["corpus_digest_sha256"]
    for split in ("validation", "test"):
        metrics = report["reporting_metrics"][split]
        assert metrics["average_precision"] > metrics["prevalence"] + 0.1        # a real margin, not luck
        assert metrics["brier_score"] < metrics["null_brier_score"]
        assert metrics["top_k_gain"] > 0.2
        assert metrics["policy_cross_entropy"] < metrics["policy_uniform_cross_entropy"]
    assert model.header.validation["average_precision"] == pytest.approx(
        report["reporting_metrics"]["validation"]["average_precision"], rel=1e-6)


def test_published_model_ranks_with_the_numpy_reference(demo):
    "The deployed file, run by the numpy reference alone, ranks fresh records of the hidden rule."
    out, _ = demo
    from szrank.stream.synthetic import synthesize_run
    from sklearn.metrics import roc_auc_score
    records = synthesize_run(np.random.default_rng(123), "00000000-0000-0000-0000-000000000001", 1500)
    proposal = records["proposal"]
    outputs = reference_forward(out / "model" / "current.sztf", proposal[:, :192].reshape(-1, 12, 16),
                                proposal[:, 192:], records["topology"])
    improved = records["outcome"][:, 0]
    assert roc_auc_score(improved, outputs["improvement_probability"]) > 0.7


def test_shuffled_labels_fail_the_gate(tmp_path):
    out = tmp_path / "shuffled"
    result = run([tool("szrank"), "demo", "--out", str(out), "--shuffle-labels", "--stages", "synthetic"])
    assert result.returncode == 4, result.stdout + result.stderr
    assert "gate failed" in result.stdout
    assert "AP does not beat prevalence" in result.stderr
    assert not (out / "model" / "current.sztf").exists()
    (rejected,) = (out / "model").glob("rejected_report_*.json")
    assert json.loads(rejected.read_text())["approved"] is False
    assert "[search]" not in result.stdout and not (out / "search").exists()     # only the stage asked for


def test_plots_of_the_published_report(demo):
    out, _ = demo
    report = load_report(out / "model")
    assert list(list_generations(out / "model"))[0] == "current" and len(list_generations(out / "model")) == 2
    metrics = report["reporting_metrics"]["validation"]
    figure, axes = plt.subplots(1, 3)
    drawn = plot_reliability(metrics, axes[0])
    assert [bar.get_height() for bar in drawn["bars"]] == metrics["calibration_bins"]["count"]
    assert sum(bar.get_height() for bar in drawn["bars"]) == metrics["records"]
    present = [i for i, c in enumerate(metrics["calibration_bins"]["count"]) if c]
    np.testing.assert_allclose(drawn["line"].get_xdata(),
                               [metrics["calibration_bins"]["mean_probability"][i] for i in present])
    np.testing.assert_allclose(drawn["line"].get_ydata(),
                               [metrics["calibration_bins"]["positive_rate"][i] for i in present])
    drawn = plot_precision_recall(metrics, axes[1])
    assert drawn["baseline"].get_ydata()[0] == pytest.approx(metrics["prevalence"])
    assert drawn["line"].get_xdata()[-1] == pytest.approx(1.0)
    assert f"AP {metrics['average_precision']:.3f}" in drawn["line"].get_label()
    drawn = plot_gain_uplift(metrics, axes[2])
    heights = [bar.get_height() for bar in drawn["bars"]]
    np.testing.assert_allclose(heights, metrics["gain_by_decile"])
    assert heights[0] - metrics["mean_signed_gain"] == pytest.approx(metrics["top_k_gain"], abs=0.05)  # 10% vs ceil(10%)
    assert drawn["mean"].get_ydata()[0] == pytest.approx(metrics["mean_signed_gain"])
    plt.close(figure)
    figure = plot_split(report, "stress")
    assert "stress" in figure._suptitle.get_text() and len(figure.axes) == 4   # 3 plots + the count twin
    plt.close(figure)


def test_plots_refuse_a_missing_report(tmp_path):
    with pytest.raises(FileNotFoundError, match="no published report"):
        load_report(tmp_path)
    (tmp_path / "report.json").write_text("{}")
    with pytest.raises(ValueError, match="not a training report"):
        load_report(tmp_path)


def _uniform_table(stdout: str) -> list[str]:
    "The uniform search's summary lines (run id, topology, start, best, evaluations, realisations; no seconds)."
    lines = stdout.split("szrank demo [search]:", 2)[1].splitlines()
    return [line.rsplit(None, 1)[0] for line in lines[2:] if line[:8].strip() and line[8:9] == "-"]


def _search_verdict(out, stdout: str) -> bool:
    "Check the search stage's report against what it left on disk; True when it published."
    model = out / "search" / "model"
    published = "szrank demo [search]: gate passed" in stdout
    assert published != ("szrank demo [search]: gate failed" in stdout), stdout
    if published:
        assert (model / "current.sztf").is_file() and json.loads((model / "report.json").read_text())["approved"]
        assert not load_model(model / "current.sztf").header.gate_overridden
        assert "szrank demo [search]: uniform vs guided" in stdout and "median best C+I per run" in stdout
        assert len(list((out / "search" / "guided").iterdir())) == 4
    else:
        # Nothing published, the gate's reasons printed, the guided search skipped (and no model to run it with).
        assert not (model / "current.sztf").exists() and not (model / "report.json").exists()
        rejected = max(model.glob("rejected_report_*.json"), key=lambda p: p.stat().st_mtime_ns)
        report = json.loads(rejected.read_text())
        assert report["approved"] is False and report["gate_overridden"] is False and report["gate_reasons"]
        for reason in report["gate_reasons"]:
            assert f"  gate: {reason}" in stdout
        assert "guided search skipped" in stdout and "uniform vs guided" not in stdout
        assert not (out / "search" / "guided").exists()
    return published


def test_search_stage_runs_the_loop_and_reports_the_gate(demo):
    out, result = demo
    assert result.returncode == 0, result.stdout + result.stderr     # the synthetic stage published
    archive = out / "search" / "archive"
    splits = json.loads((archive / "splits.json").read_text())
    assert sorted(splits) == ["stress", "test", "train", "validation"]
    assert sorted(p.name for p in archive.iterdir() if p.is_dir()) == sorted(splits.values())
    assert len(_uniform_table(result.stdout)) == 4
    # The trainer ran the real `szrank export` on the four split runs, with the gate minimum matched to 40 records.
    export = next(line for line in result.stderr.splitlines()
                  if line.startswith("Exporting an immutable training snapshot:") and " export --root " in line)
    assert str(archive.resolve()) in export and all(f"--include-run {run}" in export for run in splits.values())
    assert "szrank export: 160 records" in result.stderr
    assert "40 records per split; gate minimum 40 records" in result.stdout
    assert not list((out / "search" / "snapshots").glob("*.sztx*"))
    published = _search_verdict(out, result.stdout)
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("szrank demo: synthetic stage: published; symmetric stage: guided and unguided compared; "
                           "search stage: ")
    assert last.endswith("published" if published else "gate refused, nothing published")


def test_search_stage_rerun_is_idempotent(demo):
    "Again, alone: the same runs (same seed), the same verdict, and the stage's own exit status."
    out, first = demo
    result = run([tool("szrank"), "demo", "--out", str(out), "--stages", "search",
                  "--search-runs", "4", "--search-steps", "40"])
    published = _search_verdict(out, result.stdout)
    assert result.returncode == (0 if published else 4), result.stdout + result.stderr
    assert published == ("szrank demo [search]: gate passed" in first.stdout)
    assert _uniform_table(result.stdout) == _uniform_table(first.stdout)
    assert "[synthetic]" not in result.stdout
    assert len([p for p in (out / "search" / "archive").iterdir() if p.is_dir()]) == 4


def test_demo_refuses_bad_stage_options(tmp_path):
    result = run([tool("szrank"), "demo", "--out", str(tmp_path), "--stages", "synthetic,serch"])
    assert result.returncode == 2 and "serch" in result.stderr
    result = run([tool("szrank"), "demo", "--out", str(tmp_path), "--stages", "search", "--search-runs", "3"])
    assert result.returncode == 2 and "at least 4 runs" in result.stderr
    result = run([tool("szrank"), "demo", "--out", str(tmp_path), "--guided-seeds", "0"])
    assert result.returncode == 2 and "--guided-seeds 0" in result.stderr
    assert not list(tmp_path.iterdir())                                   # refused before any work


def test_symmetric_stage_trains_on_training_topologies_and_compares_on_held_out_ones(demo):
    from szrank.ranker.proposals import load_ranker, read_audit
    from szrank.search.guided import COMPARED, HELD_OUT, TRAINING
    from szrank.search.population import CANDIDATES
    out, result = demo
    folder = out / "symmetric"
    rows = read_audit(folder / "proposals.sztpa")
    assert rows.shape[1] == CANDIDATES and (rows["accepted"][:, 0] == 1).all()
    assert set(np.unique(rows["topology"])) == set(TRAINING) and not set(rows["topology"].ravel()) & set(HELD_OUT)
    assert f"szrank demo [symmetric]: {rows.size:,} records ({len(rows):,} members' {CANDIDATES} candidates)" \
        in result.stdout
    load_ranker(folder / "ranker.sztpr")
    saved = json.loads((folder / "comparison.json").read_text())
    assert [t["topology"] for t in saved["topologies"]] == list(COMPARED) and saved["evaluations_per_run"] == 640
    assert all(t["seeds"] == 2 for t in saved["topologies"]) and 0 <= saved["held_out_pooled_auc"] <= 1
    check = saved["held_out_check"]
    assert check["topologies"] == list(COMPARED) and check["members"] > 0 and 0 <= check["within_auc"] <= 1
    rates = check["pick_rates"]
    assert rates["first"] <= rates["any"] and rates["ranked"] <= rates["any"]
    assert f"within-member AUC {check['within_auc']:.3f} (0.5 is chance)" in result.stdout
    table = result.stdout.split("szrank demo [symmetric]: guided vs unguided\n", 1)[1]
    assert all(f"\n  {t:>8} " in table for t in COMPARED) and "median over " in table
    for stage in ("symmetric: proposal records", "symmetric: train the ranker", "symmetric: check the ranker",
                  "symmetric: guided vs unguided"):
        assert f"  {stage} " in result.stdout
    # The ranker it printed guides the command line's symmetric search.
    guided = run([tool("szrank"), "search", "--strategy", "symmetric", "--topology", str(COMPARED[0]),
                  "--model", str(folder / "ranker.sztpr"), "--evaluations", "640", "--seed", "1",
                  "--archive", str(out / "guided-cli"), "--workers", "1"])
    assert guided.returncode == 0, guided.stdout + guided.stderr
    assert f"--model {folder / 'ranker.sztpr'}" in result.stdout
