"""A hung or lingering exporter (issue 19 items 9 and 10): bounded waits, the whole process group stopped,
SIGTERM handled like Ctrl-C with exit 143, nothing left behind."""
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from helpers import run, tool
from szrank.stream import snapshot as snapshot_module
from szrank.stream.snapshot import SPLIT_RUNS, ExporterError, create_training_snapshot

# An exporter in Python: writes the four runs (or part of them), then misbehaves as asked; it records its own
# pid and, where it starts one, its helper's pid.
EXPORTER = textwrap.dedent('''
    import os, subprocess, sys, time
    from szrank.stream.format import example_records, stream_header
    runs = RUNS
    mode, piddir = sys.argv[1], sys.argv[2]
    open(os.path.join(piddir, "exporter.pid"), "w").write(str(os.getpid()))
    out = os.fdopen(1, "wb", buffering=0)
    if mode == "silent":
        time.sleep(300)
    out.write(stream_header())
    for index, run in enumerate(runs):
        out.write(example_records(40, run, seed=index).tobytes())
        if mode == "stall" and index == 1:
            time.sleep(300)
    if mode == "closed":                  # the whole stream, stdout closed, and no exit
        out.close(); time.sleep(300)
    if mode == "helper":                  # a helper inherits stdout and outlives the exporter
        helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
        open(os.path.join(piddir, "helper.pid"), "w").write(str(helper.pid))
        sys.exit(0)
''').replace("RUNS", repr(list(SPLIT_RUNS.values())))


@pytest.fixture
def exporter(tmp_path):
    script = tmp_path / "exporter.py"
    script.write_text(EXPORTER)
    return lambda mode: [sys.executable, str(script), mode, str(tmp_path)]


def gone(pid_file: Path, timeout: float = 10.0) -> bool:
    "The process whose pid `pid_file` holds has exited (and is no zombie of ours)."
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:   # a zombie that init has not reaped yet counts as gone
            if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.parametrize("mode, after", [("silent", "after 0 bytes"), ("stall", "after 145,936 bytes")])
def test_a_silent_or_stalled_exporter_times_out_and_its_group_is_stopped(tmp_path, exporter, mode, after):
    snapshots = tmp_path / "snapshots"
    with pytest.raises(ExporterError, match=rf"exporter wrote nothing for 1 s {after} \(--exporter-timeout\); "
                                            r"stopped it and its process group, no snapshot was written"):
        create_training_snapshot(tmp_path / "archive", exporter(mode), snapshots, False, progress=False,
                                 exporter_timeout=1.0)
    assert list(snapshots.iterdir()) == []
    assert gone(tmp_path / "exporter.pid")


def test_an_exporter_that_closes_its_output_but_never_exits(tmp_path, exporter, monkeypatch):
    monkeypatch.setattr(snapshot_module, "EXPORTER_EXIT_SECONDS", 1.0)
    snapshots = tmp_path / "snapshots"
    with pytest.raises(ExporterError, match=r"exporter closed its output after 160 records but had not exited 1 s "
                                            r"later; stopped its process group"):
        create_training_snapshot(tmp_path / "archive", exporter("closed"), snapshots, False, progress=False)
    assert list(snapshots.iterdir()) == [] and gone(tmp_path / "exporter.pid")


def test_a_helper_that_keeps_the_stream_open_is_stopped_with_the_group(tmp_path, exporter, monkeypatch):
    monkeypatch.setattr(snapshot_module, "EXPORTER_EXIT_SECONDS", 1.0)
    snapshots = tmp_path / "snapshots"
    with pytest.raises(ExporterError, match=r"exporter exited with status 0 after 291,856 bytes but its output is "
                                            r"still held open \(by a process it started\?\)"):
        create_training_snapshot(tmp_path / "archive", exporter("helper"), snapshots, False, progress=False)
    assert list(snapshots.iterdir()) == []
    assert gone(tmp_path / "helper.pid"), "the helper outlived the exporter's process group"


def test_exporter_timeout_flag(tmp_path, exporter):
    bad = run([tool("szrank"), "train", "--exporter-timeout", "0", "--output-directory", str(tmp_path / "o")])
    assert bad.returncode == 2 and "--exporter-timeout 0.0: must be a positive" in bad.stderr
    script = tmp_path / "silent-exporter"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} {tmp_path / 'exporter.py'} silent {tmp_path}\n")
    script.chmod(0o755)
    (tmp_path / "exporter.py").write_text(EXPORTER)
    result = run([tool("szrank"), "train", "--exporter", str(script), "--exporter-timeout", "1",
                  "--repository", str(tmp_path), "--device", "cpu"], timeout=120)
    assert result.returncode == 2, result.stderr
    assert "Transformer training failed: " in result.stderr and "exporter wrote nothing for 1 s" in result.stderr
    assert gone(tmp_path / "exporter.pid")
    assert not list((tmp_path / "runtime" / "transformer_training").iterdir())


def test_sigterm_during_an_export_cleans_up_and_exits_143(tmp_path, exporter):
    script = tmp_path / "stalling-exporter"
    (tmp_path / "exporter.py").write_text(EXPORTER)
    script.write_text(f"#!/bin/sh\nexec {sys.executable} {tmp_path / 'exporter.py'} stall {tmp_path}\n")
    script.chmod(0o755)
    snapshots = tmp_path / "runtime" / "transformer_training"
    process = subprocess.Popen([tool("szrank"), "train", "--exporter", str(script), "--repository", str(tmp_path),
                                "--device", "cpu"], stderr=subprocess.PIPE, text=True,
                               env=dict(os.environ, PYTHONWARNINGS="ignore"))
    try:
        deadline = time.monotonic() + 120
        while not [p for p in snapshots.glob("*.partial") if p.stat().st_size > 16]:
            assert time.monotonic() < deadline, "the export never started"
            time.sleep(0.05)
        process.send_signal(signal.SIGTERM)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 143, stderr
    lines = [line for line in stderr.strip().splitlines() if not line.startswith(("Device:", "PyTorch:", "Exporting", "export: "))]
    assert len(lines) == 1 and lines[0].startswith("Training terminated (SIGTERM): ") \
        and "exporter stopped, no snapshot was written" in lines[0] and "current.sztf was not changed" in lines[0], stderr
    assert list(snapshots.iterdir()) == [] and gone(tmp_path / "exporter.pid")
    assert not (tmp_path / "results" / "search" / "neural" / "transformer" / ".szrank.lock").exists()
