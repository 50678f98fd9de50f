"""The trainer (`suvi_fill.train.loop`) end to end on a tiny CPU model and a tiny synthetic
corpus: refusals, the untrained baseline, eval cadence and checkpoints, ABORT, plateau
decay to FROZEN, warmup, the loop cap, --max-steps, the LR range test, the overfit
gate, resume (including after SIGKILL), --evaluate, the iterative fallback, loader
settings, and two-process DistributedDataParallel under torchrun."""
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import test_suvi_fillers as fillers_tests
from helpers import ROOT, run, tool

#: The corpus is test_suvi_fillers' tiny archive (36 hours away from the equinox eclipse seasons,
#: at 32 px: train, val and test segments), built once per test run for both.
RESOLUTION = fillers_tests.RESOLUTION
#: The tiny model every run trains.
TINY = ["--base", "4", "--depth", "1", "--batch", "2", "--workers", "0", "--val-samples", "4",
        "--device", "cpu"]
ENV = {"OMP_NUM_THREADS": "1", "SUVI_FILL_POOL_WAIT": "2"}


@pytest.fixture(scope="session")
def corpus(tmp_path_factory):
    "A synthetic archive, built into shards with a manifest and an availability model (the pool tests import this fixture too)."
    if os.environ.get("SUVI_TEST_CORPUS"):          # a corpus built beforehand (test_suvi_fillers.build_fill_corpus)
        return Path(os.environ["SUVI_TEST_CORPUS"])
    shards = fillers_tests.tiny_corpus(tmp_path_factory)
    manifest = json.loads((shards / "manifest.json").read_text())
    assert manifest["segments"]["train"] and manifest["segments"]["val"], manifest["segments"].keys()
    return shards


def train(corpus, out, *extra, env=None, timeout=300):
    "Run `python -m suvi_fill.train.loop` on the corpus with the tiny model."
    command = [sys.executable, "-m", "suvi_fill.train.loop", "--shards", str(corpus),
               "--manifest", str(corpus / "manifest.json"), "--out", str(out), *TINY, *extra]
    return run(command, env={**ENV, **(env or {})}, cwd=ROOT, timeout=timeout)


def history(out):
    return [json.loads(line) for line in (Path(out) / "history.jsonl").read_text().splitlines()]


def state(path):
    import torch
    return torch.load(path, map_location="cpu", weights_only=True)


SEED_ROW_FIELDS = {"step", "epoch", "steps_per_epoch", "total_steps", "train_loss", "val_loss",
                   "val_psnr", "grad_mean", "grad_max", "lr", "seconds", "host_free_gb"}


# ------------------------------------------------------------------------- refusals

def test_refuses_a_manifest_without_segments(corpus, tmp_path):
    manifest = json.loads((corpus / "manifest.json").read_text())
    del manifest["segments"]
    old = tmp_path / "old_manifest.json"
    old.write_text(json.dumps(manifest))
    result = run([sys.executable, "-m", "suvi_fill.train.loop", "--shards", str(corpus), "--manifest", str(old),
                  "--out", str(tmp_path / "run"), *TINY], env=ENV)
    assert result.returncode == 2                   # a refusal to start (DataError), not ABORT
    assert "has no 'segments': it predates the pristine-segment corpus" in result.stderr
    assert not (tmp_path / "run").exists()


def refusal(corpus, tmp_path, *extra):
    "The trainer's refusal (OptionError message) for these flags, run in-process."
    from suvi_fill.train import loop as trainer
    from suvi_fill.plumbing.errors import OptionError
    with pytest.raises(OptionError) as refused:
        trainer.main(["--shards", str(corpus), "--manifest", str(corpus / "manifest.json"),
                      "--out", str(tmp_path / "run"), *TINY, *extra])
    assert not (tmp_path / "run").exists(), "a refused run wrote its output directory"
    return str(refused.value)


def test_refuses_without_the_availability_model(corpus, tmp_path):
    message = refusal(corpus, tmp_path, "--availability", str(tmp_path / "absent.npz"))
    assert "absent.npz not found" in message and "refusing to fall back" in message


def test_refuses_flag_combinations(corpus, tmp_path):
    assert "--lr-range needs --max-steps" in refusal(corpus, tmp_path, "--lr-range", "1e-5,1e-1")
    assert "expected LO,HI" in refusal(corpus, tmp_path, "--lr-range", "1e-5", "--max-steps", "4")
    assert "--pool needs --steps-per-epoch" in refusal(corpus, tmp_path, "--pool", str(tmp_path))


def test_cli_subcommand_refuses_cuda_without_a_device(corpus, tmp_path):
    import torch
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present")
    result = run([tool("suvi-fill"), "train", "--shards", str(corpus), "--manifest",
                  str(corpus / "manifest.json"), "--out", str(tmp_path / "run"),
                  *TINY[:-2], "--device", "cuda"], env=ENV)
    assert result.returncode == 2 and "no CUDA" in result.stderr


# ------------------------------------------- baseline, cadence, checkpoints, resume

@pytest.fixture(scope="module")
def short_run(corpus, tmp_path_factory):
    "Six steps, an eval every three: the run several tests read."
    out = tmp_path_factory.mktemp("short") / "run"
    # A small LR: these tests read cadence and bookkeeping, not learning, and must
    # not trip the ABORT rule on any corpus.
    result = train(corpus, out, "--max-steps", "6", "--eval-every", "3", "--warmup", "4",
                   "--lr", "1e-5", "--steps-per-epoch", "100")
    assert result.returncode == 0, result.stdout + result.stderr
    return out, result


def test_untrained_baseline_then_evals_on_the_cadence(short_run):
    out, result = short_run
    lines = [line for line in result.stdout.splitlines() if line.startswith("step ")]
    assert lines[0].startswith("step      0  val ") and lines[0].endswith("[untrained]")
    assert result.stdout.splitlines()[0] == "device: cpu"
    assert "availability model: " in result.stdout and "parameters" in result.stdout
    rows = history(out)
    assert rows[0]["untrained"] is True and rows[0]["step"] == 0
    assert [row["step"] for row in rows[1:]] == [3, 6]
    for row in rows[1:]:
        assert SEED_ROW_FIELDS <= set(row), SEED_ROW_FIELDS - set(row)
        assert row["host_free_gb"] > 0 and row["total_steps"] == 6 and row["steps_per_epoch"] == 100
    assert "best validation display PSNR" in result.stdout.splitlines()[-1]


def test_warmup_ramps_the_lr(short_run):
    out, _ = short_run
    from suvi_fill.train.policies import learning_rate
    rows = history(out)[1:]
    # The row's lr is the one the last optimiser step used (step - 1).
    assert rows[0]["lr"] == pytest.approx(learning_rate(2, 1e-5, warmup=4))
    assert rows[0]["lr"] == pytest.approx(0.75e-5)
    assert rows[1]["lr"] == pytest.approx(1e-5)


def test_checkpoints_are_written_and_loadable(short_run):
    out, _ = short_run
    from suvi_fill.model import net as model
    from suvi_fill.model.checkpoint import load_learned
    last = state(out / "last.pt")
    assert last["step"] == 6 and last["args"]["cond_layout"] == list(model.COND_LAYOUT)
    assert {"model", "optimiser", "epoch", "lr_scale", "manifest", "best"} <= set(last)
    net = load_learned(out / "best.pt")
    assert net.offsets
    assert not [p for p in out.iterdir() if p.name.startswith(".")], "temporary files left behind"


def test_validation_is_pinned_and_evaluate_scores_a_checkpoint(short_run, corpus):
    out, result = short_run
    scored = [train(corpus, out.parent / f"eval{i}", "--evaluate", str(out / "last.pt")) for i in range(2)]
    for item in scored:
        assert item.returncode == 0, item.stderr
        assert "evaluated" in item.stdout and "(step 6): val " in item.stdout
    line = lambda r: [l for l in r.stdout.splitlines() if l.startswith("evaluated")][0].split(": ", 1)[1]
    assert line(scored[0]) == line(scored[1]), "the same checkpoint scored differently: damage not pinned"
    final = history(out)[-1]
    assert f"({final['val_psnr']:.2f} dB)" in line(scored[0])
    assert not (out.parent / "eval0" / "history.jsonl").exists()


def test_resume_continues_and_never_clobbers_best(short_run, corpus, tmp_path):
    out, _ = short_run
    copy = tmp_path / "run"
    shutil.copytree(out, copy)
    best_before = (copy / "best.pt").read_bytes()
    # No step left to take: the resumed run evaluates, keeps best.pt and writes last.pt.
    result = train(corpus, copy, "--resume", str(copy / "last.pt"), "--max-steps", "6",
                   "--eval-every", "3", "--steps-per-epoch", "100")
    assert result.returncode == 0, result.stderr
    assert "resumed from" in result.stdout and "step 6" in result.stdout
    assert "[resumed]" in result.stdout
    assert (copy / "best.pt").read_bytes() == best_before
    # Two more steps: the step count carries on from 6.
    result = train(corpus, copy, "--resume", str(copy / "last.pt"), "--max-steps", "8",
                   "--eval-every", "2", "--steps-per-epoch", "100", "--warmup", "4", "--lr", "1e-5")
    assert result.returncode == 0, result.stderr
    assert history(copy)[-1]["step"] == 8 and state(copy / "last.pt")["step"] == 8
    assert state(copy / "last.pt")["epoch"] == 0, "a mid-epoch checkpoint resumes in its epoch"


def test_steps_per_epoch_caps_the_loop(corpus, tmp_path):
    out = tmp_path / "run"
    result = train(corpus, out, "--steps-per-epoch", "2", "--epochs", "3", "--eval-every", "1000")
    assert result.returncode == 0, result.stderr
    last = state(out / "last.pt")
    assert last["step"] == 6 and last["epoch"] == 2


def test_max_steps_stops_the_run(corpus, tmp_path):
    out = tmp_path / "run"
    result = train(corpus, out, "--max-steps", "3", "--eval-every", "1000")
    assert result.returncode == 0, result.stderr
    assert state(out / "last.pt")["step"] == 3


def test_balanced_loss_trains_and_is_recorded(corpus, tmp_path):
    "--balance trains on the inverse-loss-weighted criterion; the checkpoint says so, and losses stay finite."
    out = tmp_path / "run"
    result = train(corpus, out, "--max-steps", "4", "--eval-every", "2", "--balance")
    assert result.returncode == 0, result.stderr
    assert "loss: balanced" in result.stdout
    assert state(out / "last.pt")["args"]["balance"] is True
    rows = [r for r in history(out) if "train_loss" in r]
    assert rows and all(math.isfinite(r["train_loss"]) for r in rows)


def test_a_fixed_thread_count_repeats_a_cpu_run_bit_for_bit(corpus, tmp_path):
    """--threads 2 twice gives the same weights, whatever OMP_NUM_THREADS says (without the
    flag these two runs, on one and two threads, end with different weights); --threads 0
    is refused."""
    import torch
    runs = []
    for name, omp in (("a", "1"), ("b", "2")):
        out = tmp_path / name
        result = train(corpus, out, "--max-steps", "6", "--eval-every", "3", "--threads", "2",
                       env={"OMP_NUM_THREADS": omp})
        assert result.returncode == 0, result.stderr
        assert "cpu threads: 2 (--threads)" in result.stdout
        runs.append(state(out / "last.pt")["model"])
    assert runs[0].keys() == runs[1].keys()
    assert all(torch.equal(runs[0][k], runs[1][k]) for k in runs[0])
    assert "--threads 0: needs at least 1" in refusal(corpus, tmp_path, "--threads", "0")


# --------------------------------------------------------------- stopping rules

def test_abort_on_two_evals_well_below_best(corpus, tmp_path):
    out = tmp_path / "run"
    # An absurd LR wrecks the net at once; validation then sits far below the
    # untrained baseline on the next two evals.
    result = train(corpus, out, "--lr", "3", "--warmup", "1", "--eval-every", "2",
                   "--max-steps", "40", "--steps-per-epoch", "100", "--plateau-evals", "0")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "ABORT: validation" in result.stdout and "on two consecutive evals." in result.stdout
    rows = history(out)
    assert len(rows) == 3, rows                # the baseline and the two failing evals
    assert state(out / "last.pt")["step"] == 4


def test_plateau_halves_to_the_floor_then_freezes(corpus, tmp_path):
    out = tmp_path / "run"
    # LR 0: validation never moves, so every eval is a plateau of length one.
    result = train(corpus, out, "--lr", "0", "--warmup", "1", "--eval-every", "1",
                   "--plateau-evals", "1", "--max-steps", "50", "--steps-per-epoch", "100")
    assert result.returncode == 0, result.stdout + result.stderr
    plateaus = [l for l in result.stdout.splitlines() if l.startswith("PLATEAU:")]
    assert len(plateaus) == 6, result.stdout
    assert "FROZEN: lr scale at its floor (0.0156)" in result.stdout
    last = state(out / "last.pt")
    assert last["step"] == 7 and last["lr_scale"] == pytest.approx(1 / 64)


def test_lr_range_records_every_20_steps_without_evals(corpus, tmp_path):
    out = tmp_path / "run"
    result = train(corpus, out, "--lr-range", "1e-5,1e-1", "--max-steps", "40", "--steps-per-epoch", "100")
    assert result.returncode == 0, result.stderr
    from suvi_fill.train.policies import sweep_rate
    rows = history(out)
    assert [r["step"] for r in rows] == [20, 40] and all(set(r) == {"step", "lr", "train_loss"} for r in rows)
    assert rows[0]["lr"] == pytest.approx(sweep_rate(19, 1e-5, 1e-1, 40))
    assert rows[1]["lr"] == pytest.approx(1e-1)
    assert "[untrained]" not in result.stdout and "step     20  lr " in result.stdout


#: The overfit gate: one frozen sample, 1,600 steps of a base-16 net (under a minute
#: on two cores), and the loss above its floor must fall tenfold.
OVERFIT_STEPS, OVERFIT_FACTOR = 1600, 10.0


def test_overfit_gate_drives_the_loss_down_tenfold(corpus, tmp_path):
    out = tmp_path / "run"
    from suvi_fill.model import losses
    result = train(corpus, out, "--overfit", "1", "--batch", "1", "--epochs", str(OVERFIT_STEPS),
                   "--lr", "1e-3", "--warmup", "10", "--eval-every", str(OVERFIT_STEPS // 4), "--base", "16",
                   "--plateau-evals", "0", timeout=1200)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "train 1 targets, val 1" in result.stdout
    rows = history(out)
    # A perfect answer still scores the Charbonnier knee on each term: the loss's floor.
    floor = losses.CHARBONNIER_EPS * (1 + losses.GRADIENT_WEIGHT + losses.DISPLAY_WEIGHT)
    first, last = rows[0]["val_loss"], rows[-1]["val_loss"]
    assert last - floor <= (first - floor) / OVERFIT_FACTOR, \
        f"overfit gate: val loss {first:.5f} -> {last:.5f} (floor {floor:.5f}), not {OVERFIT_FACTOR}x"
    losses_seen = [r["val_loss"] for r in rows]
    assert losses_seen == sorted(losses_seen, reverse=True), "the held-in loss did not fall steadily"


# ----------------------------------------------------------------- kill and resume

def test_sigkill_mid_run_resumes_losing_at_most_eval_every(corpus, tmp_path):
    out = tmp_path / "run"
    command = [sys.executable, "-m", "suvi_fill.train.loop", "--shards", str(corpus), "--manifest",
               str(corpus / "manifest.json"), "--out", str(out), *TINY, "--eval-every", "2",
               "--max-steps", "100000", "--steps-per-epoch", "100000", "--val-samples", "2"]
    process = subprocess.Popen(command, cwd=ROOT, env={**os.environ, **ENV},
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            if (out / "history.jsonl").exists() and len(history(out)) >= 4 and (out / "last.pt").exists():
                break
            assert process.poll() is None, process.stderr.read().decode()
            time.sleep(0.2)
        else:
            pytest.fail("the training process produced no history in time")
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == -signal.SIGKILL
    reached = history(out)[-1]["step"]
    saved = state(out / "last.pt")["step"]           # loads: the write was atomic
    assert reached - saved <= 2
    result = train(corpus, out, "--eval-every", "2", "--resume", str(out / "last.pt"),
                   "--max-steps", str(saved + 2), "--steps-per-epoch", "100000", "--val-samples", "2")
    assert result.returncode == 0, result.stderr
    assert f"step {saved}" in result.stdout.split("resumed from", 1)[1].splitlines()[0]
    assert state(out / "last.pt")["step"] == saved + 2


# ------------------------------------------------------------ in-process behaviours

def _args(corpus, **overrides):
    from suvi_fill.train.config import TrainConfig
    return TrainConfig(**{"shards": str(corpus), "manifest": str(corpus / "manifest.json"), "out": "unused",
                          **overrides})


def _split(corpus, name):
    from suvi_fill.train import data as trainer
    opened = trainer.read_corpus(_args(corpus))
    trace = trainer.load_availability(str(corpus))
    return trainer.ShardSet(str(corpus), opened.splits[name], opened.satellites, availability=trace,
                            offsets=opened.offsets, segments=opened.seg_splits[name],
                            deterministic=name != "train", calibration=opened.calibration), trace


def test_fallback_over_thousands_of_unbuildable_targets_is_iterative(corpus):
    from suvi_fill.corpus import shards as dataset
    data, _ = _split(corpus, "train")
    satellite, when = data.items[0]
    # A slot no shard holds: the sampler cannot build it, just as a sentinel frame.
    unbuildable = (satellite, when - 30 * 86_400) if not isinstance(when, int) else (satellite, when - 360 * 30)
    assert data.sampler.build(*unbuildable, data.sampler.rng) is None
    data.items = [unbuildable] * 5000 + list(data.items)
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)
    try:
        sample = data[0]
    finally:
        sys.setrecursionlimit(limit)
    assert sample["target"].shape[-1] == RESOLUTION
    data.items = [unbuildable] * 3000
    with pytest.raises(RuntimeError, match="no slot in the entire set yields a buildable sample"):
        data[0]


def test_validation_is_deterministic_per_slot(corpus):
    import torch
    data, _ = _split(corpus, "val")
    a, b = data[1], data[1]
    assert torch.equal(a["lost"], b["lost"]) and torch.equal(a["present"], b["present"])


def test_loader_settings(corpus):
    import torch
    from suvi_fill.train import data as trainer
    data, _ = _split(corpus, "val")
    args = _args(corpus, workers=8, batch=2)
    val = trainer.make_val_loader(data, args, torch.device("cpu"))
    assert val.num_workers == 2 and not val.persistent_workers and val.batch_size == 2
    assert isinstance(val.sampler, torch.utils.data.SequentialSampler)
    fit = trainer.make_train_loader(data, args, torch.device("cpu"))
    assert fit.num_workers == 8 and fit.persistent_workers and fit.drop_last
    # Under torchrun each rank draws its own, disjoint, share of the split.
    shares = [list(trainer.make_train_loader(data, args, torch.device("cpu"), rank, 2).sampler)
              for rank in (0, 1)]
    assert shares[0] and not set(shares[0]) & set(shares[1])


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs CUDA")
def test_cuda_cache_emptied_each_eval(corpus, tmp_path, monkeypatch):
    import torch
    from suvi_fill.train import loop as trainer
    calls = []
    original = torch.cuda.empty_cache
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: (calls.append(1), original()))
    code = trainer.main(["--shards", str(corpus), "--manifest", str(corpus / "manifest.json"),
                         "--out", str(tmp_path / "run"), *TINY[:-2], "--device", "cuda",
                         "--max-steps", "4", "--eval-every", "2"])
    assert code == 0 and len(calls) >= 3          # the baseline and two evals


# ---------------------------------------------------------------------- torchrun

def test_two_process_ddp_trains_logs_once_and_resumes(corpus, tmp_path):
    out = tmp_path / "run"
    torchrun = tool("torchrun")
    common = [torchrun, "--standalone", "--nproc_per_node=2", "-m", "suvi_fill.train.loop",
              "--shards", str(corpus), "--manifest", str(corpus / "manifest.json"), "--out", str(out),
              *TINY, "--eval-every", "2", "--steps-per-epoch", "100"]
    scratch = tmp_path / "tmp"                   # torchelastic's rendezvous folders, removed with the test's
    scratch.mkdir()
    env = {**ENV, "TMPDIR": str(scratch)}
    result = run(common + ["--max-steps", "4"], env=env, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "2 processes" in result.stdout
    assert [r["step"] for r in history(out)] == [0, 2, 4]        # rank 0 alone logs
    assert result.stdout.count("[untrained]") == 1
    result = run(common + ["--max-steps", "6", "--resume", str(out / "last.pt")], env=env, cwd=ROOT, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "resumed from" in result.stdout
    assert history(out)[-1]["step"] == 6 and state(out / "last.pt")["step"] == 6


# ------------------------------------------------------------- seed-contract fixes

def test_every_count_flag_is_refused_with_a_line_naming_it(corpus, tmp_path):
    for flags, named in ((("--eval-every", "0"), "--eval-every 0"), (("--batch", "0"), "--batch 0"),
                         (("--workers", "-1"), "--workers -1"), (("--max-steps", "-5"), "--max-steps -5"),
                         (("--epochs", "0"), "--epochs 0"), (("--steps-per-epoch", "0"), "--steps-per-epoch 0"),
                         (("--plateau-evals", "-1"), "--plateau-evals -1"), (("--gap-max", "-1"), "--gap-max -1"),
                         (("--span", "20"), "--span 20: not a rung")):
        message = refusal(corpus, tmp_path, *flags)
        assert message.startswith(named) and "\n" not in message, message


def test_a_missing_resume_checkpoint_is_refused_with_exit_2(corpus, tmp_path):
    result = train(corpus, tmp_path / "run", "--resume", str(tmp_path / "nope" / "last.pt"), "--max-steps", "2")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--resume" in result.stderr and "no such file" in result.stderr
    assert not (tmp_path / "run").exists(), "a refused resume started a fresh run"


def test_a_manifest_without_span_min_is_refused_unless_span_is_given(corpus, tmp_path):
    from suvi_fill.plumbing.errors import DataError
    from suvi_fill.train.data import read_corpus
    manifest = json.loads((corpus / "manifest.json").read_text())
    del manifest["span_min"]
    (tmp_path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(DataError, match="manifest.json: no 'span_min'; pass --span"):
        read_corpus(_args(corpus, manifest=str(tmp_path / "manifest.json")))
    assert max(read_corpus(_args(corpus, manifest=str(tmp_path / "manifest.json"), span=64)).offsets) == 64


def test_gap_max_defaults_to_the_seeds_damage_and_every_option_says_its_default():
    import argparse
    from suvi_fill.train.config import TrainConfig, add_arguments
    assert TrainConfig(shards="s", manifest="m", out="o").gap_max == 0
    parser = add_arguments(argparse.ArgumentParser())
    parser.format_help()                                # a stray '%' in a help text fails here
    for action in parser._actions:
        if action.dest != "help":
            assert action.required or "default" in (action.help or ""), action.dest


def test_resumed_baseline_is_marked_and_evaluate_builds_the_net_from_the_checkpoint(short_run, corpus, tmp_path):
    out, _ = short_run
    copy = tmp_path / "run"
    shutil.copytree(out, copy)
    result = train(corpus, copy, "--resume", str(copy / "last.pt"), "--max-steps", "8", "--eval-every", "2",
                   "--steps-per-epoch", "100", "--warmup", "4", "--lr", "1e-5")
    assert result.returncode == 0, result.stderr
    rows = history(copy)
    resumed = [r for r in rows if r.get("resumed")]
    assert len(resumed) == 1 and resumed[0]["step"] == 6 and resumed[0]["untrained"] is False
    for row in rows:
        if "untrained" in row:                    # a baseline: no step taken, no train fields
            assert SEED_ROW_FIELDS - {"train_loss", "grad_mean", "grad_max"} <= set(row)
        else:
            assert SEED_ROW_FIELDS <= set(row), SEED_ROW_FIELDS - set(row)
    # --base/--depth other than the checkpoint's: the net still comes from the checkpoint.
    scored = train(corpus, tmp_path / "eval", "--evaluate", str(out / "last.pt"), "--base", "8", "--depth", "2")
    assert scored.returncode == 0, scored.stderr
    assert "(step 6): val " in scored.stdout


# ------------------------------------------------------------------------- the mix of losses

def test_partial_share_reweights_the_training_draws_and_leaves_validation_alone(corpus):
    "--partial-share: the train split draws that share of partial losses; validation keeps the model's mix."
    import numpy as np
    from suvi_fill.train import data as trainer
    opened = trainer.read_corpus(_args(corpus))
    trace = trainer.load_availability(str(corpus))
    whole = trace.patterns.all(axis=1)
    if not (trace.pattern_counts[whole].sum() > 0 and trace.pattern_counts[~whole].sum() > 0):
        pytest.skip("the tiny corpus's trace lacks one kind of loss")
    for share in (0.0, 0.5, 1.0):
        config = _args(corpus, partial_share=share)
        train_set, val_set = trainer.train_set_of(config, opened, trace), trainer.val_set_of(config, opened, trace)
        drawn = train_set.sampler.availability
        assert drawn.partial_share == pytest.approx(share)
        rng = np.random.default_rng(0)
        kinds = np.array([not drawn.draw_lost(rng).all() for _ in range(2000)])
        assert abs(kinds.mean() - share) < 0.04
        validation = getattr(val_set, "dataset", val_set).sampler.availability
        assert validation.partial_share == pytest.approx(trace.partial_share)


def test_partial_share_out_of_range_or_of_a_missing_kind_is_refused_in_one_line(corpus, tmp_path):
    import numpy as np
    from suvi_fill.corpus.availability import Availability
    assert refusal(corpus, tmp_path, "--partial-share", "1.5") == "--partial-share 1.5: must be a share from 0 to 1"
    lossless = tmp_path / "lossless.npz"
    Availability(np.arange(50), (16, 18), np.ones((50, 2, 6), bool)).save(lossless)
    message = refusal(corpus, tmp_path, "--partial-share", "0.5", "--availability", str(lossless))
    assert message == "--partial-share 0.5: the trace holds no partial loss to draw", message


def test_a_run_resumes_from_a_checkpoint_slimmed_of_its_optimiser(short_run, corpus, tmp_path):
    "The shipped filler keeps no optimiser state: --resume takes its weights and step, the optimiser starts afresh."
    from suvi_fill.model.shipped import slim
    out, _ = short_run
    slimmed = slim(out / "last.pt", tmp_path / "slim.pt")
    assert state(slimmed)["optimiser"] is None
    copy = tmp_path / "run"
    result = train(corpus, copy, "--resume", str(slimmed), "--max-steps", "8", "--eval-every", "1000",
                   "--steps-per-epoch", "100", "--lr", "1e-5", "--partial-share", "0.5")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "it holds no optimiser state (slimmed): the optimiser starts afresh" in result.stdout
    assert "trained at 50% (--partial-share)" in result.stdout
    assert state(copy / "last.pt")["step"] == 8 and state(copy / "last.pt")["optimiser"] is not None
    assert state(copy / "last.pt")["args"]["partial_share"] == 0.5
