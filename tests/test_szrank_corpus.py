"""The szrank training corpus end to end: the SZTXP001 writer and reader, `szrank inspect`
on every kind of bad file, snapshot creation against real exporter processes and their
failure modes, and shuffled epochs."""
import hashlib
import json
import os
import signal
import struct
import sys
import textwrap
import threading
import time
import tracemalloc
import uuid
from pathlib import Path

import numpy as np
import pytest

from helpers import run, tool
from szrank.stream.format import (EXPECTED_RECORD_SIZE, EXPORT_HEADER, EXPORT_MAGIC, RECORD_DTYPE, StreamWriter,
                           empty_records, example_records, stream_header, write_stream)
from szrank.stream import snapshot as snapshot_module
from szrank.stream.snapshot import (DEPLOYMENT_EXTRA, SPLIT_RUNS, ExporterError, ExportInterrupted, HeaderError,
                             MissingSplitError, PartialRecordError, UnknownRunError, create_training_snapshot,
                             inspect_snapshot, load_split_runs)

RUNS = list(SPLIT_RUNS.values())
pytestmark = pytest.mark.timeout(120)    # a hang (reader, exporter, Ctrl-C path) fails the test
STRANGER = "0b7c4a36-5f21-4c55-9d1e-7a3c2f9e8b10"
PER_RUN = 40


def corpus_parts(per_run=PER_RUN):
    "Four runs in export order, the train run in two pieces."
    return [example_records(per_run, RUNS[0], seed=1), example_records(per_run, RUNS[1], seed=2),
            example_records(per_run, RUNS[2], seed=3), example_records(per_run, RUNS[3], seed=4),
            example_records(7, RUNS[0], seed=5, first_sequence=per_run)]


@pytest.fixture
def corpus(tmp_path):
    path = tmp_path / "corpus.sztx"
    write_stream(path, corpus_parts())
    return path


def inspect_cli(*args):
    return run([tool("szrank"), "inspect", *map(str, args)], timeout=120)


# --------------------------------------------------------------------------- format round trip

def test_writer_inspect_round_trip(corpus):
    raw = corpus.read_bytes()
    assert raw[:16] == struct.pack("<8sII", b"SZTXP001", 1, 1824)
    assert len(raw) == 16 + (4 * PER_RUN + 7) * 1824
    info = inspect_snapshot(corpus)
    assert info.corpus_digest == hashlib.sha256(raw[16:]).digest()
    assert info.record_count == 4 * PER_RUN + 7 and info.record_size == 1824
    assert info.split_counts == {"train": PER_RUN + 7, "validation": PER_RUN, "test": PER_RUN, "stress": PER_RUN}
    assert info.split_segments == {"train": ((0, PER_RUN), (4 * PER_RUN, 7)), "validation": ((PER_RUN, PER_RUN),),
                                   "test": ((2 * PER_RUN, PER_RUN),), "stress": ((3 * PER_RUN, PER_RUN),)}
    assert not info.created_by_trainer and not info.includes_additional_runs
    records = np.frombuffer(raw, dtype=RECORD_DTYPE, offset=16)
    assert (records == np.concatenate(corpus_parts())).all()
    assert inspect_snapshot(corpus, compute_digest=False).split_segments == info.split_segments


def test_writer_to_an_open_file_matches_the_path_writer(corpus, tmp_path):
    with (tmp_path / "streamed.sztx").open("wb") as out:
        with StreamWriter(out) as writer:
            for part in corpus_parts():
                writer.write(part.tobytes())
        assert writer.records_written == 4 * PER_RUN + 7
    assert (tmp_path / "streamed.sztx").read_bytes() == corpus.read_bytes()


def test_writer_refuses_foreign_arrays(tmp_path):
    with pytest.raises(TypeError, match="RECORD_DTYPE"):
        write_stream(tmp_path / "x.sztx", np.zeros(3, dtype=np.float32))
    with pytest.raises(ValueError, match="whole number"):
        write_stream(tmp_path / "x.sztx", b"\0" * 1000)
    assert list(tmp_path.iterdir()) == []


def test_stream_and_snapshot_do_not_import_torch():
    result = run([sys.executable, "-c", "import sys, szrank.stream.format, szrank.stream.snapshot; "
                  "assert 'torch' not in sys.modules, 'torch imported'"])
    assert result.returncode == 0, result.stderr


# --------------------------------------------------------------------------- szrank inspect

def test_inspect_cli_prints_counts_segments_and_digest(corpus):
    result = inspect_cli(corpus)
    assert result.returncode == 0, result.stderr
    assert hashlib.sha256(corpus.read_bytes()[16:]).hexdigest() in result.stdout
    assert f"{4 * PER_RUN + 7:,} records" in result.stdout and RUNS[3] in result.stdout
    as_json = inspect_cli(corpus, "--json")
    assert as_json.returncode == 0, as_json.stderr
    report = json.loads(as_json.stdout)
    assert report["corpus_digest_sha256"] == hashlib.sha256(corpus.read_bytes()[16:]).hexdigest()
    assert report["split_segments"]["train"] == [[0, PER_RUN], [4 * PER_RUN, 7]]
    assert report["split_counts"]["stress"] == PER_RUN and report["split_runs"] == SPLIT_RUNS


def _bad(corpus: Path, kind: str) -> tuple[bytes, str]:
    raw = corpus.read_bytes()
    if kind == "magic":
        return b"SZTXQ001" + raw[8:], "bad magic b'SZTXQ001'"
    if kind == "version":
        return EXPORT_HEADER.pack(EXPORT_MAGIC, 2, 1824) + raw[16:], "unsupported stream version 2"
    if kind == "record size":
        return EXPORT_HEADER.pack(EXPORT_MAGIC, 1, 1820) + raw[16:], "record size mismatch: stream says 1820"
    if kind == "truncated header":
        return raw[:11], "header is truncated: 11 of 16 bytes"
    if kind == "partial record":
        return raw[:16 + 10 * 1824 + 999], f"partial record at byte {16 + 10 * 1824}"
    if kind == "unknown run":
        records = np.frombuffer(raw, RECORD_DTYPE, offset=16).copy()
        records["run_id"][17] = np.frombuffer(uuid.UUID(STRANGER).bytes, np.uint8)
        return raw[:16] + records.tobytes(), f"record 17: unknown run {STRANGER}"
    raise AssertionError(kind)


@pytest.mark.parametrize("kind", ["magic", "version", "record size", "truncated header", "partial record",
                                  "unknown run"])
def test_inspect_cli_rejects_bad_files_with_one_line(corpus, tmp_path, kind):
    payload, message = _bad(corpus, kind)
    bad = tmp_path / "bad.sztx"
    bad.write_bytes(payload)
    result = inspect_cli(bad)
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert str(bad) in lines[0] and message in lines[0], lines[0]
    assert result.stdout == ""


def test_inspect_cli_missing_file_and_bad_split_runs(tmp_path, corpus):
    result = inspect_cli(tmp_path / "absent.sztx")
    assert result.returncode == 2 and str(tmp_path / "absent.sztx") in result.stderr
    assert "No such file" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    runs_file = tmp_path / "runs.json"
    runs_file.write_text(json.dumps({"train": RUNS[0], "validation": RUNS[1], "test": "not-a-uuid"}))
    result = inspect_cli(corpus, "--split-runs", runs_file)
    assert result.returncode == 2 and str(runs_file) in result.stderr and "missing split(s) stress" in result.stderr


def test_inspect_cli_split_runs_file_and_deployment_runs(tmp_path):
    custom = {name: str(uuid.uuid5(uuid.NAMESPACE_URL, name)) for name in SPLIT_RUNS}
    runs_file = tmp_path / "runs.json"
    runs_file.write_text(json.dumps(custom))
    assert load_split_runs(runs_file) == custom
    path = tmp_path / "custom.sztx"
    write_stream(path, [example_records(5, run, seed=i) for i, run in enumerate(custom.values())]
                 + [example_records(3, STRANGER)])
    plain = inspect_cli(path)                         # default split runs: the first record is already unknown
    assert plain.returncode == 2 and f"record 0: unknown run {custom['train']}" in plain.stderr
    strict = inspect_cli(path, "--split-runs", runs_file)
    assert strict.returncode == 2 and f"record 20: unknown run {STRANGER}" in strict.stderr
    ok = inspect_cli(path, "--split-runs", runs_file, "--deployment-all-runs", "--json")
    assert ok.returncode == 0, ok.stderr
    report = json.loads(ok.stdout)
    assert report["split_counts"] == {"train": 5, "validation": 5, "test": 5, "stress": 5, DEPLOYMENT_EXTRA: 3}
    assert report["split_segments"][DEPLOYMENT_EXTRA] == [[20, 3]] and report["split_runs"] == custom


# --------------------------------------------------------------------------- exporter processes

EXPORTER = textwrap.dedent('''
    import os, signal, sys, time
    import numpy as np
    from szrank.stream.format import example_records, stream_header
    from szrank.stream.snapshot import SPLIT_RUNS
    argv = sys.argv[1:]
    mode = argv[argv.index("--mode") + 1]
    root = argv[argv.index("--root") + 1]
    runs = [argv[i + 1] for i, a in enumerate(argv) if a == "--include-run"] or list(SPLIT_RUNS.values())
    if os.environ.get("EXPORTER_PIDFILE"):
        with open(os.environ["EXPORTER_PIDFILE"], "w") as f: f.write(str(os.getpid()))
    if os.environ.get("EXPORTER_ARGV"):
        with open(os.environ["EXPORTER_ARGV"], "w") as f: f.write(repr(argv))
    if mode.endswith("-ignore-term"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    out = os.fdopen(sys.stdout.fileno(), "wb", closefd=False)
    def emit(data):
        out.write(data); out.flush()
    def run_records(index, count=PER_RUN):
        return example_records(count, runs[index], seed=index).tobytes()
    if mode == "silent-fail":
        sys.exit(5)
    if mode == "bad-header":
        emit(b"NOTSZTX!" + bytes(8)); sys.exit(0)
    emit(stream_header())
    if mode in ("ok", "ok-extra", "partial", "missing"):
        for index in range(3 if mode == "missing" else 4):
            emit(run_records(index))
        if mode == "ok-extra":
            emit(example_records(5, "STRANGER", seed=9).tobytes())
        if mode == "partial":
            emit(bytes(100))
        sys.exit(0)
    if mode == "fail-midway":
        emit(run_records(0)); emit(run_records(1)); sys.exit(3)
    if mode == "killed":
        emit(run_records(0)); os.kill(os.getpid(), signal.SIGKILL)
    if mode.startswith("unknown"):
        emit(run_records(0)); emit(example_records(3, "STRANGER", seed=9).tobytes())
        time.sleep(120); sys.exit(0)
    if mode == "slow":
        emit(run_records(0)); time.sleep(120); sys.exit(0)
    raise SystemExit(f"unknown mode {mode}")
''').replace("PER_RUN", str(PER_RUN)).replace("STRANGER", STRANGER)


@pytest.fixture
def exporter(tmp_path):
    script = tmp_path / "exporter.py"
    script.write_text(EXPORTER)
    return lambda mode: [sys.executable, str(script), "--mode", mode]


def assert_gone(pidfile: Path):
    pid = int(pidfile.read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_snapshot_from_a_good_exporter(tmp_path, exporter, monkeypatch):
    monkeypatch.setenv("EXPORTER_ARGV", str(tmp_path / "argv.txt"))
    snapshots = tmp_path / "snapshots"
    info = create_training_snapshot(tmp_path / "archive", exporter("ok"), snapshots, False, progress=False)
    argv = eval((tmp_path / "argv.txt").read_text())
    assert argv[argv.index("--root") + 1] == str(tmp_path / "archive")
    assert [argv[i + 1] for i, a in enumerate(argv) if a == "--include-run"] == RUNS
    assert [p.name for p in snapshots.iterdir()] == [info.path.name] and info.path.suffix == ".sztx"
    assert info.created_by_trainer and info.record_count == 4 * PER_RUN
    assert info.corpus_digest == hashlib.sha256(info.path.read_bytes()[16:]).digest()
    again = inspect_snapshot(info.path)
    assert (again.corpus_digest, again.split_counts, again.split_segments) == \
        (info.corpus_digest, info.split_counts, info.split_segments)


def test_snapshot_exporter_as_a_command_string_with_all_runs(tmp_path, exporter, monkeypatch):
    import shlex
    monkeypatch.setenv("EXPORTER_ARGV", str(tmp_path / "argv.txt"))
    info = create_training_snapshot(tmp_path / "archive", shlex.join(exporter("ok-extra")), tmp_path / "s", True,
                                    progress=False)
    assert "--include-run" not in eval((tmp_path / "argv.txt").read_text())
    assert info.split_counts[DEPLOYMENT_EXTRA] == 5 and info.includes_additional_runs
    assert info.split_segments[DEPLOYMENT_EXTRA] == ((4 * PER_RUN, 5),)


@pytest.mark.parametrize("mode, error, message", [
    ("fail-midway", ExporterError, f"exporter exited with status 3 after {2 * PER_RUN} records"),
    ("killed", ExporterError, f"exporter was killed by signal SIGKILL after {PER_RUN} records"),
    ("silent-fail", ExporterError, "exporter exited with status 5 before writing the stream header"),
    ("bad-header", HeaderError, "bad magic b'NOTSZTX!'"),
    ("partial", PartialRecordError, f"partial record at byte {16 + 4 * PER_RUN * 1824}"),
    ("missing", MissingSplitError, f"no records for split(s) stress (run {RUNS[3]})"),
    ("unknown", UnknownRunError, f"record {PER_RUN}: unknown run {STRANGER}"),
])
def test_exporter_failures_leave_nothing_behind(tmp_path, exporter, monkeypatch, mode, error, message):
    monkeypatch.setenv("EXPORTER_PIDFILE", str(tmp_path / "pid"))
    snapshots = tmp_path / "snapshots"
    started = time.monotonic()
    with pytest.raises(error) as caught:
        create_training_snapshot(tmp_path / "archive", exporter(mode), snapshots, False, progress=False)
    text = str(caught.value)
    assert message in text and "no snapshot was written" in text and str(snapshots) in text, text
    assert "\n" not in text
    assert list(snapshots.iterdir()) == []
    assert_gone(tmp_path / "pid")
    assert time.monotonic() - started < 60          # an unknown run stops the sleeping exporter at once


def test_an_exporter_ignoring_sigterm_is_killed(tmp_path, exporter, monkeypatch):
    monkeypatch.setenv("EXPORTER_PIDFILE", str(tmp_path / "pid"))
    monkeypatch.setattr(snapshot_module, "EXPORTER_STOP_SECONDS", 0.5)
    with pytest.raises(UnknownRunError):
        create_training_snapshot(tmp_path / "archive", exporter("unknown-ignore-term"), tmp_path / "s", False,
                                 progress=False)
    assert list((tmp_path / "s").iterdir()) == []
    assert_gone(tmp_path / "pid")


def test_a_missing_exporter_is_a_clear_error(tmp_path):
    with pytest.raises(ExporterError, match="cannot start exporter"):
        create_training_snapshot(tmp_path, [str(tmp_path / "no-such-exporter")], tmp_path / "s", False)
    assert list((tmp_path / "s").iterdir()) == []


def _wait_for_partial(directory: Path, timeout: float = 60.0) -> Path:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        partial = [p for p in directory.glob("*.partial") if p.stat().st_size > 16]
        if partial:
            return partial[0]
        time.sleep(0.05)
    raise AssertionError("the exporter never started streaming")


SNAPSHOT_SCRIPT = textwrap.dedent('''
    import sys
    from szrank.stream.snapshot import ExportInterrupted, create_training_snapshot
    root, snapshots, *command = sys.argv[1:]
    try:
        create_training_snapshot(root, command, snapshots, False, progress=False)
    except ExportInterrupted as exc:
        print(f"interrupted: {exc}", file=sys.stderr, flush=True)
        sys.exit(130)
    sys.exit(0)
''')


def test_ctrl_c_to_the_snapshot_process(tmp_path, exporter):
    import subprocess
    script = tmp_path / "snapshot.py"
    script.write_text(SNAPSHOT_SCRIPT)
    snapshots = tmp_path / "snapshots"
    snapshots.mkdir()
    env = dict(os.environ, EXPORTER_PIDFILE=str(tmp_path / "pid"))
    process = subprocess.Popen([sys.executable, str(script), str(tmp_path / "archive"), str(snapshots),
                                *exporter("slow")], env=env, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_partial(snapshots)
        process.send_signal(signal.SIGINT)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr
    assert "interrupted" in stderr and "exporter stopped, no snapshot was written" in stderr
    assert list(snapshots.iterdir()) == []
    assert_gone(tmp_path / "pid")


def test_keyboard_interrupt_while_streaming(tmp_path, exporter, monkeypatch):
    monkeypatch.setenv("EXPORTER_PIDFILE", str(tmp_path / "pid"))
    snapshots = tmp_path / "snapshots"
    snapshots.mkdir()
    main = threading.main_thread().ident

    def interrupt():
        _wait_for_partial(snapshots)
        signal.pthread_kill(main, signal.SIGINT)

    thread = threading.Thread(target=interrupt, daemon=True)
    thread.start()
    with pytest.raises(ExportInterrupted, match=r"interrupted after \d+ records; exporter stopped, no snapshot was written"):
        create_training_snapshot(tmp_path / "archive", exporter("slow"), snapshots, False, progress=False)
    thread.join(5)
    assert list(snapshots.iterdir()) == []
    assert_gone(tmp_path / "pid")


# --------------------------------------------------------------------------- shuffled epochs

@pytest.fixture(scope="module")
def epoch_snapshot(tmp_path_factory):
    path = tmp_path_factory.mktemp("epoch") / "epoch.sztx"
    parts = []
    for piece in range(3):                              # runs interleaved in pieces, as sealed shards arrive
        for index, run_id in enumerate(RUNS):
            parts.append(example_records(300 + 50 * index, run_id, seed=10 * piece + index,
                                         first_sequence=piece * 1000))
    write_stream(path, parts)
    return inspect_snapshot(path)


def _keys(batch):
    return list(zip(batch["run_id"][:, 0].tolist(), batch["sequence"].tolist()))


@pytest.mark.parametrize("batch_size, shuffle_records", [(64, 1000), (100, 0), (1, 1), (256, 4096), (97, 333)])
def test_each_selected_record_exactly_once(epoch_snapshot, batch_size, shuffle_records):
    from szrank.stream.batches import iter_record_batches
    for splits in ({"train"}, {"validation", "stress"}, set(SPLIT_RUNS)):
        batches = list(iter_record_batches(epoch_snapshot, splits, batch_size, shuffle_records, 5, 0))
        assert all(len(b) == batch_size for b in batches[:-1]) and 0 < len(batches[-1]) <= batch_size
        keys = [k for b in batches for k in _keys(b)]
        expected = sum(epoch_snapshot.split_counts[s] for s in splits)
        assert len(keys) == len(set(keys)) == expected
        if shuffle_records <= 1:                         # file order
            all_records = np.fromfile(epoch_snapshot.path, dtype=RECORD_DTYPE, offset=16)
            wanted = np.concatenate([np.arange(a, a + n) for s in splits for a, n in epoch_snapshot.split_segments[s]])
            assert keys == _keys(all_records[np.sort(wanted)])


def test_max_records_per_split(epoch_snapshot):
    from szrank.stream.batches import iter_record_batches
    batches = list(iter_record_batches(epoch_snapshot, {"train", "test"}, 64, 500, 3, 420))
    records = np.concatenate(batches)
    for name, run_id in (("train", RUNS[0]), ("test", RUNS[2])):
        mine = records[(records["run_id"] == np.frombuffer(uuid.UUID(run_id).bytes, np.uint8)).all(axis=1)]
        assert len(mine) == 420
        assert set(mine["sequence"].tolist()) == set(range(300)) | set(range(1000, 1120)) if name == "train" else True


def test_shuffle_is_deterministic_across_processes(epoch_snapshot):
    from szrank.stream.batches import iter_record_batches
    here = [k for b in iter_record_batches(epoch_snapshot, set(SPLIT_RUNS), 128, 2048, 42, 0) for k in _keys(b)]
    assert here == [k for b in iter_record_batches(epoch_snapshot, set(SPLIT_RUNS), 128, 2048, 42, 0) for k in _keys(b)]
    assert here != [k for b in iter_record_batches(epoch_snapshot, set(SPLIT_RUNS), 128, 2048, 43, 0) for k in _keys(b)]
    assert here != sorted(here)
    code = textwrap.dedent(f'''
        import hashlib
        from szrank.stream.snapshot import SPLIT_RUNS, inspect_snapshot
        from szrank.stream.batches import iter_record_batches
        info = inspect_snapshot({str(epoch_snapshot.path)!r})
        digest = hashlib.sha256()
        for batch in iter_record_batches(info, set(SPLIT_RUNS), 128, 2048, 42, 0):
            digest.update(batch.tobytes())
        print(digest.hexdigest())
    ''')
    expected = hashlib.sha256(b"".join(b.tobytes() for b in
                                       iter_record_batches(epoch_snapshot, set(SPLIT_RUNS), 128, 2048, 42, 0))).hexdigest()
    for hash_seed in ("1", "2"):                         # set iteration order differs between these
        result = run([sys.executable, "-c", code], env={"PYTHONHASHSEED": hash_seed})
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == expected


def test_memory_is_bounded_by_the_shuffle_buffer(tmp_path):
    from szrank.stream.batches import decode_batch, iter_record_batches
    path = tmp_path / "large.sztx"
    with StreamWriter(path) as writer:                  # 24k records: 44 MB on disk
        for i in range(6):
            writer.write(example_records(4000, RUNS[0], seed=i, first_sequence=4000 * i))
    info = inspect_snapshot(path)
    assert path.stat().st_size > 40e6
    tracemalloc.start()
    try:
        seen = 0
        for batch in iter_record_batches(info, {"train"}, 256, 1024, 0, 0):
            seen += decode_batch(batch).size
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seen == 24000
    assert peak < 12e6, f"peak {peak / 1e6:.1f} MB for a 44 MB snapshot"   # buffer: (1024 + 1024) x 1824 B


def _large_snapshot(path, chunks=6):
    "A train-only snapshot of `chunks` x 4000 records (7.3 MB each)."
    with StreamWriter(path) as writer:
        for i in range(chunks):
            writer.write(example_records(4000, RUNS[0], seed=i, first_sequence=4000 * i))
    return inspect_snapshot(path)


def test_file_order_batches_are_read_only_views_that_outlive_the_epoch(epoch_snapshot):
    "Each file-order batch views its chunk's map; the map lives as long as the batch, after the file is closed."
    from szrank.stream.batches import decode_batch, iter_record_batches
    epoch = iter_record_batches(epoch_snapshot, set(SPLIT_RUNS), 100, 0, 0, 0)
    batches = list(epoch)                               # the generator is done and its file closed
    epoch.close()
    on_disk = np.fromfile(epoch_snapshot.path, dtype=RECORD_DTYPE, offset=EXPORT_HEADER.size)
    assert np.concatenate(batches).tobytes() == on_disk.tobytes()
    assert not batches[0].flags.writeable
    decoded = decode_batch(batches[3])
    assert decoded.features.numpy().flags.writeable    # the decoded tensors own their memory
    assert np.array_equal(decoded.anchor_global.numpy(), on_disk["anchor"][300:400, 192:])


@pytest.mark.parametrize("shuffle_records", [0, 700])
def test_a_file_that_cannot_be_mapped_is_read_instead(epoch_snapshot, monkeypatch, shuffle_records):
    from szrank.stream import batches as batches_module
    expected = [b.tobytes() for b in batches_module.iter_record_batches(epoch_snapshot, set(SPLIT_RUNS), 64,
                                                                        shuffle_records, 9, 0)]
    def refuse(*args, **kwargs):
        raise OSError(19, "No such device")             # what mmap says on a file system without it
    monkeypatch.setattr(batches_module.mmap, "mmap", refuse)
    got = [b.tobytes() for b in batches_module.iter_record_batches(epoch_snapshot, set(SPLIT_RUNS), 64,
                                                                   shuffle_records, 9, 0)]
    assert got == expected


@pytest.mark.parametrize("shuffle_records", [0, 2048])
def test_a_snapshot_truncated_during_an_epoch_is_an_error(tmp_path, shuffle_records):
    from szrank.stream.batches import iter_record_batches
    from szrank.stream.snapshot import SnapshotError
    path = tmp_path / "shrinks.sztx"
    info = _large_snapshot(path, chunks=3)
    epoch = iter_record_batches(info, {"train"}, 512, shuffle_records, 0, 0)
    first = next(epoch)
    os.truncate(path, EXPORT_HEADER.size + 5000 * EXPECTED_RECORD_SIZE)   # keeps the first chunk whole
    with pytest.raises(SnapshotError, match=r"shrinks.sztx: record \d+: file ends early"):
        for _ in epoch:
            pass
    assert len(first) == 512


def test_file_order_memory_is_bounded_by_the_chunks_in_use(tmp_path):
    "Mapped chunks are released with their batches: resident memory stays near one chunk, not the file."
    import psutil
    from szrank.stream.batches import decode_batch, iter_record_batches
    path = tmp_path / "large.sztx"
    info = _large_snapshot(path, chunks=8)              # 32k records: 58 MB on disk
    process = psutil.Process()
    baseline = process.memory_info().rss
    peak = seen = 0
    for batch in iter_record_batches(info, {"train"}, 256, 0, 0, 0):
        seen += decode_batch(batch).size
        peak = max(peak, process.memory_info().rss - baseline)
    assert seen == 32000
    assert peak < 24e6, f"resident memory grew {peak / 1e6:.1f} MB reading a 58 MB snapshot"


def test_a_snapshot_changed_after_inspection_is_refused(epoch_snapshot, tmp_path):
    from szrank.stream.batches import iter_record_batches
    from szrank.stream.snapshot import SnapshotError
    copy = tmp_path / "copy.sztx"
    copy.write_bytes(epoch_snapshot.path.read_bytes()[:-1824])
    import dataclasses
    stale = dataclasses.replace(epoch_snapshot, path=copy)
    with pytest.raises(SnapshotError, match="changed since"):
        list(iter_record_batches(stale, {"train"}, 64, 0, 0, 0))
    with pytest.raises(ValueError, match="unknown split"):
        list(iter_record_batches(epoch_snapshot, {"training"}, 64, 0, 0, 0))


def test_decode_refuses_bad_records_from_a_file(tmp_path):
    "Inspection refuses a NaN feature (issue 19: it used to pass); a bad gain, left to decoding, is located in the file."
    from szrank.stream.batches import RecordError, decode_batch, iter_record_batches, locate_record_fault
    from szrank.stream.snapshot import RecordValueError
    records = example_records(300, RUNS[0], seed=3, first_sequence=5000)
    records["proposal"][123, 17] = np.nan
    path = tmp_path / "nan.sztx"
    write_stream(path, records)
    with pytest.raises(RecordValueError, match=rf"{path}: record 123 \(byte {16 + 123 * 1824}, run {RUNS[0]} "
                                               r"sequence 5123\): field proposal\[17\] = nan is not finite"):
        inspect_snapshot(path, split_runs=None)
    records["proposal"][123, 17] = 0.0
    records["gains"][211, 1] = np.inf
    write_stream(path, records)
    info = inspect_snapshot(path, split_runs=None)
    with pytest.raises(RecordError, match=f"run {RUNS[0]} sequence 5211 .*field gains\\[1\\] = inf") as fault:
        for batch in iter_record_batches(info, {"train"}, 100, 500, 1, 0):
            decode_batch(batch)
    assert str(locate_record_fault(path, fault.value)).startswith(f"{path}: record 211 (byte {16 + 211 * 1824}, run ")
