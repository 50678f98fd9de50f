"""`szrank train` and `szrank inspect` under faults (issue 19 items 4, 5, 7/8, 12, 13, 14): divergence, bad
records named by file position, an unwritable or full output directory, one writer per directory and the
leftovers of a killed run, an interrupt anywhere (even inside the torch import) as one true line."""
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from helpers import run, tool
from szrank.ranker import modelfile
from szrank.plumbing.errors import WriteError
from szrank.plumbing.lock import LOCK_NAME
from szrank.ranker.modelfile import PublishInterrupted, current_report, publish_model, reconcile_report, serialize_model
from szrank.stream.snapshot import SPLIT_RUNS
from szrank.stream.format import write_stream
from szrank.stream.synthetic import synthesize_corpus

TINY = {"train": 512, "validation": 256, "test": 256, "stress": 256}
FAST = ["--report-epochs", "1", "--batch-size", "128", "--shuffle-records", "512", "--threads", "1",
        "--device", "cpu", "--learning-rate", "2e-3"]
DEAD_PID = 2**22 + 7   # above the default pid_max: never a live process


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    path = tmp_path_factory.mktemp("corpus") / "tiny.sztx"
    write_stream(path, synthesize_corpus(SPLIT_RUNS, seed=11, records=TINY))
    return path


def one_line(stderr: str, prefix: str = "Transformer training failed: ") -> str:
    "The one error line (progress lines aside), and no traceback."
    lines = [line for line in stderr.strip().splitlines() if line.startswith(prefix)]
    assert len(lines) == 1 and "Traceback" not in stderr and stderr.strip().endswith(lines[0]), stderr
    return lines[0]


@contextlib.contextmanager
def tmpfs(directory: Path, options: str):
    "A small tmpfs at `directory` (root only); skips the test where mounting is not permitted."
    directory.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(directory)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield directory
    finally:
        subprocess.run(["umount", "-l", str(directory)], capture_output=True)


def test_divergence_is_one_line_naming_the_step(tmp_path, snapshot):
    result = run([tool("szrank"), "train", "--snapshot", str(snapshot), *FAST, "--learning-rate", "1e30",
                  "--output-directory", str(tmp_path / "out")])
    assert result.returncode == 2, result.stderr
    line = one_line(result.stderr)
    assert "epoch 1/1: training diverged at optimizer step " in line and "lower --learning-rate" in line, line
    assert not (tmp_path / "out" / "current.sztf").exists() and not (tmp_path / "out" / LOCK_NAME).exists()


def test_a_bad_record_is_named_by_the_stream_file_and_its_position(tmp_path):
    records = synthesize_corpus(SPLIT_RUNS, seed=11, records=TINY)
    records["gains"][300, 0] = np.inf      # gains are checked when training decodes them
    path = tmp_path / "bad.sztx"
    write_stream(path, records)
    result = run([tool("szrank"), "train", "--snapshot", str(path), *FAST, "--output-directory", str(tmp_path / "o")])
    assert result.returncode == 2, result.stderr
    line = one_line(result.stderr)
    assert f"{path}: record 300 (byte {16 + 300 * 1824}, run {SPLIT_RUNS['train']} sequence " in line, line
    assert "field gains[0] = inf is not finite" in line and "of the batch" not in line


@pytest.mark.parametrize("fault, message", [("topology", "field topology = 59 is outside 0..58"),
                                            ("nan", "field anchor[3] = nan is not finite")])
def test_inspect_refuses_nan_features_and_topologies_out_of_range(tmp_path, fault, message):
    records = synthesize_corpus(SPLIT_RUNS, seed=11, records=TINY)
    if fault == "topology":
        records["topology"][700] = 59
    else:
        records["anchor"][700, 3] = np.nan
    path = tmp_path / "bad.sztx"
    write_stream(path, records)
    result = run([tool("szrank"), "inspect", str(path)])
    assert result.returncode == 2, result.stderr
    line = one_line(result.stderr, "szrank inspect: error: ")
    assert f"{path}: record 700 (byte {16 + 700 * 1824}, run " in line and message in line, line
    records["topology"][700] = -1
    records["anchor"][700, 3] = 0.0
    write_stream(path, records)
    assert "field topology = -1 is outside 0..58" in run([tool("szrank"), "inspect", str(path)]).stderr


def test_a_read_only_output_directory_is_refused_before_training(tmp_path, snapshot):
    with tmpfs(tmp_path / "ro", "ro,size=64k") as out:
        result = run([tool("szrank"), "train", "--snapshot", str(snapshot), *FAST, "--output-directory", str(out)])
    assert result.returncode == 2, result.stderr
    line = one_line(result.stderr)
    assert f"{out}: output directory is not writable" in line and "nothing was written" in line
    assert "Epoch" not in result.stderr and "Snapshot:" not in result.stderr


def test_a_full_disk_while_publishing_is_one_line_naming_the_file(tmp_path, snapshot):
    with tmpfs(tmp_path / "full", "size=64k") as out:
        result = run([tool("szrank"), "train", "--snapshot", str(snapshot), *FAST, "--minimum-gate-records", "1",
                      "--force-deploy", "--output-directory", str(out)])
        left = sorted(p.name for p in out.iterdir())
    assert result.returncode == 2, result.stderr
    lines = [l for l in result.stderr.splitlines() if l.startswith("Transformer training failed: ")]
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    assert f"{out}/model_" in lines[0] and ".sztf: cannot write: No space left on device" in lines[0], lines[0]
    assert not [name for name in left if ".tmp." in name] and LOCK_NAME not in left, left


def test_a_gate_refusal_prints_its_reasons_and_exits_4_even_if_the_report_cannot_be_written(tmp_path, monkeypatch,
                                                                                            capsys):
    from szrank.train import loop as train_module

    def full(path, value):
        raise WriteError(28, f"{path}: cannot write: No space left on device; free space on that file system")

    monkeypatch.setattr(train_module, "atomic_write_json", full)
    report = {"gate_reasons": ["validation: AP does not beat prevalence", "stress: AP falls materially below"]}
    assert train_module.reject(report, {}, tmp_path, b"\0" * 32) is None
    err = capsys.readouterr().err
    assert "validation: AP does not beat prevalence" in err and "stress: AP falls" in err
    assert "The rejected report was not written: " in err and "No space left on device" in err


def test_a_second_writer_is_refused_naming_the_holder(tmp_path, snapshot):
    out = tmp_path / "out"
    out.mkdir()
    holder = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        (out / LOCK_NAME).write_text(json.dumps({"pid": holder.pid, "host": os.uname().nodename,
                                                 "command": "szrank train", "started": "2026-01-01T00:00:00"}))
        result = run([tool("szrank"), "train", "--snapshot", str(snapshot), *FAST, "--output-directory", str(out)])
    finally:
        holder.kill()
        holder.wait()
    assert result.returncode == 2, result.stderr
    line = one_line(result.stderr)
    assert f"{out}: another writer holds it: pid {holder.pid} on {os.uname().nodename} (szrank train" in line, line
    assert (out / LOCK_NAME).exists(), "the holder's lock was removed"


def test_a_killed_runs_lock_and_leftovers_are_taken_over_and_removed(tmp_path):
    out, snapshots = tmp_path / "out", tmp_path / "runtime" / "transformer_training"
    out.mkdir()
    snapshots.mkdir(parents=True)
    stale_snapshot = snapshots / f"snapshot_{DEAD_PID}_1.sztx"
    leftovers = [out / f".current.sztf.tmp.{DEAD_PID}.ab", out / f".report.json.tmp.{DEAD_PID}.cd",
                 out / f".model_{'0' * 64}.sztf.tmp.{DEAD_PID}.ef", snapshots / f"snapshot_{DEAD_PID}_2.sztx.partial",
                 stale_snapshot]
    for path in leftovers:
        path.write_bytes(b"x")
    kept = out / f".current.sztf.tmp.{os.getpid()}.aa"      # a live pid's temporary stays
    kept.write_bytes(b"x")
    (out / LOCK_NAME).write_text(json.dumps({"pid": DEAD_PID, "host": os.uname().nodename,
                                             "command": "szrank train", "snapshot": str(stale_snapshot)}))
    # The run fails right after taking over (no exporter to be found), which is enough to see the clean-up.
    result = run([tool("szrank"), "train", "--repository", str(tmp_path), "--exporter", str(tmp_path / "none"),
                  "--output-directory", str(out), "--device", "cpu"])
    assert result.returncode == 2, result.stderr
    assert f"took over the lock of pid {DEAD_PID} on {os.uname().nodename}" in result.stderr
    for path in leftovers:
        assert not path.exists(), path
        assert f"removed {path}" in result.stderr
    assert kept.exists() and not (out / LOCK_NAME).exists()


@pytest.fixture(scope="module")
def two_models():
    from szrank.ranker.model import initialize_member
    from szrank.ranker.modelfile import HEADER_METRICS
    validation = dict(zip(HEADER_METRICS, (0.6, 0.2, 0.03, 0.5, 1.6, 0.4, 0.6, 0.3)), records=5000)
    members = [initialize_member(seed, "cpu") for seed in range(3)]
    return [serialize_model(members, seed, b"\1" * 32, validation) for seed in (1, 2)]


@pytest.mark.parametrize("interrupted_at, changed", [("current.sztf", False), ("report.json", True)])
def test_an_interrupt_while_publishing_says_what_is_current_and_the_pair_stays_consistent(
        tmp_path, two_models, monkeypatch, interrupted_at, changed):
    old, new = two_models
    old_digest, _ = publish_model(tmp_path, old, {"which": "old"})
    real = modelfile.atomic_write

    def write(path, payload, *args, **kwargs):
        if Path(path).name == interrupted_at:
            raise KeyboardInterrupt
        return real(path, payload, *args, **kwargs)

    monkeypatch.setattr(modelfile, "atomic_write", write)
    with pytest.raises(PublishInterrupted) as interrupted:
        publish_model(tmp_path, new, {"which": "new"})
    monkeypatch.setattr(modelfile, "atomic_write", real)
    assert interrupted.value.current_changed is changed
    assert ("current.sztf is now generation" if changed else "current.sztf was not changed") in str(interrupted.value)
    # report.json is stale exactly when current.sztf changed; the reader never pairs the model with the wrong report.
    assert current_report(tmp_path)["which"] == ("new" if changed else "old")
    assert reconcile_report(tmp_path) is changed
    assert json.loads((tmp_path / "report.json").read_text())["which"] == ("new" if changed else "old")


def test_ctrl_c_or_sigterm_inside_the_torch_import_is_one_line(tmp_path, snapshot):
    "A stand-in torch that blocks on import: the signal lands exactly inside the import."
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    flag = tmp_path / "importing"
    (fake / "__init__.py").write_text(f"import pathlib, time\npathlib.Path({str(flag)!r}).touch()\ntime.sleep(120)\n")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "fake"), PYTHONWARNINGS="ignore")
    for sig, status, word in ((signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated (SIGTERM)")):
        flag.unlink(missing_ok=True)
        process = subprocess.Popen([tool("szrank"), "train", "--snapshot", str(snapshot), "--output-directory",
                                    str(tmp_path / "o")], env=env, stderr=subprocess.PIPE, text=True)
        try:
            deadline = time.monotonic() + 60
            while not flag.exists():
                assert time.monotonic() < deadline and process.poll() is None, process.stderr.read()
                time.sleep(0.02)
            process.send_signal(sig)
            _, stderr = process.communicate(timeout=30)
        finally:
            if process.poll() is None:
                process.kill()
        assert process.returncode == status, stderr
        assert stderr.strip() == f"Training {word}; current.sztf was not changed.", stderr
