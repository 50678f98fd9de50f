"""Search runs, the .sztd archive and `szrank export`: determinism, exact propensities, sealed shards,
damaged-shard errors, the exported stream, and search -> export -> train end to end."""
import json
import re
import uuid
from pathlib import Path

import numpy as np
import pytest

from helpers import run, tool
from szrank.search.archive import (EVENT_DTYPE, SHARD_HEADER, ArchiveError, RunWriter, export_records, list_runs,
                            read_run, read_shard)
from szrank.plumbing.errors import OptionError
from szrank.ranker.features import features
from szrank.geometry.defects import evaluate, layout
from szrank.search.moves import (FACE_COUNT, MOVE_COUNT, SCALE_COUNT, UNIFORM_FLOOR, RankerPolicy, UniformPolicy,
                                 apply_move)
from szrank.search.runs import run_search, temperature_at
from szrank.stream.format import EXPORT_HEADER, RECORD_DTYPE, validate_stream_header


def small_run(archive, seed, index=0, topology=None, policy=None, steps=10):
    return run_search(archive, topology=topology, steps=steps, seed=seed, run_index=index, policy=policy,
                      replicas=2, iterations=2, shard_events=4)


def test_runs_are_deterministic_for_a_seed(tmp_path):
    a = small_run(tmp_path / "a", seed=3)
    b = small_run(tmp_path / "b", seed=3)
    c = small_run(tmp_path / "c", seed=4)
    assert a.run_id == b.run_id != c.run_id
    ea = read_run(tmp_path / "a", uuid.UUID(a.run_id))[1]
    eb = read_run(tmp_path / "b", uuid.UUID(b.run_id))[1]
    assert ea.tobytes() == eb.tobytes()
    with pytest.raises(ArchiveError, match="already in the archive"):
        small_run(tmp_path / "a", seed=3)


def test_events_record_what_happened(tmp_path):
    summary = small_run(tmp_path, seed=8, topology=12, steps=16)
    _, events = read_run(tmp_path, uuid.UUID(summary.run_id))
    L = layout(12)
    assert len(events) == 16 and (events["topology"] == 12).all()
    np.testing.assert_allclose(events["propensity"], np.broadcast_to([1 / 12, 1 / 5, 1 / 3], (16, 3)), rtol=1e-6)
    for event in events:
        for name in ("anchor", "proposal", "result"):
            d = evaluate(event[f"{name}_normals"], event[f"{name}_offsets"], L)
            assert tuple(event[f"{name}_defects"]) == (d.crossings[0], d.intersections[0]), name
        anchor_total, result_total = event["anchor_defects"].sum(), event["result_defects"].sum()
        assert bool(event["outcome"][0]) == (result_total < anchor_total)
        assert bool(event["outcome"][1]) == (result_total < event["best_before"])
        assert result_total <= event["proposal_defects"].sum()           # the rollout keeps the best it saw
        plane, move, scale = event["action"]
        assert 0 <= plane < FACE_COUNT and 0 <= move < MOVE_COUNT and 0 <= scale < SCALE_COUNT
        changed = np.flatnonzero(~np.isclose(event["proposal_offsets"], event["anchor_offsets"])
                                 | ~np.isclose(event["proposal_normals"], event["anchor_normals"]).all(axis=1))
        assert set(changed) <= {plane}
    # the next anchor is the accepted result, or the old anchor
    for before, after in zip(events[:-1], events[1:]):
        expected = before["result_normals"] if before["outcome"][2] else before["anchor_normals"]
        np.testing.assert_array_equal(after["anchor_normals"], expected)
    assert summary.best_total == min(summary.start_total, int(events["result_defects"].sum(axis=1).min()))
    assert temperature_at(0, 16) > temperature_at(15, 16)


def make_model(path: Path) -> Path:
    import torch
    from szrank.ranker.model import initialize_member
    from szrank.ranker.modelfile import HEADER_METRICS, serialize_model
    members = [initialize_member(11 + k, torch.device("cpu")) for k in range(3)]
    metrics = {name: 0.0 for name in HEADER_METRICS}
    metrics["records"] = 0
    path.write_bytes(serialize_model(members, 11, bytes(32), metrics))
    return path


def test_ranker_guided_propensities_are_exact(tmp_path):
    model = make_model(tmp_path / "current.sztf")
    policy = RankerPolicy(model)
    summary = small_run(tmp_path / "archive", seed=5, topology=47, policy=policy, steps=8)
    _, events = read_run(tmp_path / "archive", uuid.UUID(summary.run_id))
    assert (events["flags"][:, 0] & 4).all()                  # TRAJECTORY_GUIDED
    for event in events:
        context = (event["progress"], event["best_before"], event["temperature"])
        planes, moves, scales = policy.distributions(event["anchor_normals"], event["anchor_offsets"], 47, context)
        for probabilities in (planes, moves, scales):
            assert np.isclose(probabilities.sum(), 1) and (probabilities >= UNIFORM_FLOOR / len(probabilities) - 1e-12).all()
        plane, move, scale = event["action"]
        np.testing.assert_allclose(event["propensity"], [planes[plane], moves[move], scales[scale]], rtol=1e-6)
    assert not np.allclose(events["propensity"][:, 0], 1 / 12)   # not the uniform policy


def test_moves_touch_one_plane_and_keep_unit_normals():
    rng = np.random.default_rng(2)
    from szrank.geometry.defects import random_planes
    n, d = random_planes(rng)
    for move in range(MOVE_COUNT):
        for scale in range(SCALE_COUNT):
            n2, d2 = apply_move(n, d, 7, move, scale, rng)
            assert np.allclose(np.linalg.norm(n2, axis=1), 1)
            assert np.array_equal(np.delete(n2, 7, 0), np.delete(n, 7, 0)) and np.array_equal(np.delete(d2, 7), np.delete(d, 7))
    with pytest.raises(ValueError, match="move must be"):
        apply_move(n, d, 0, 5, 0, rng)


def test_shards_are_sealed_and_damage_is_named(tmp_path):
    run_id = uuid.uuid4()
    with RunWriter(tmp_path, run_id, {"topology": 0}, shard_events=3) as writer:
        for _ in range(7):
            writer.append(np.zeros((), EVENT_DTYPE))
    shards = sorted((tmp_path / str(run_id)).glob("shard_*.sztd"))
    assert [len(read_shard(p)[2]) for p in shards] == [3, 3, 1]
    (tmp_path / str(run_id) / ".shard_000003.sztd.tmp.1.x").write_bytes(b"partial")   # an unfinished write
    assert len(read_run(tmp_path, run_id)[1]) == 7
    header = shards[0].read_bytes()[:SHARD_HEADER.size]
    assert header[:8] == b"SZTD0001"
    shards[1].write_bytes(shards[1].read_bytes()[:-5])
    with pytest.raises(ArchiveError, match=r"damaged shard .*shard_000001\.sztd"):
        read_run(tmp_path, run_id)
    shards[1].unlink()
    with pytest.raises(ArchiveError, match=r"shard_000002\.sztd: starts at sequence 6, expected 3"):
        read_run(tmp_path, run_id)


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    root = tmp_path_factory.mktemp("archive")
    result = run([tool("szrank"), "search", "--archive", str(root), "--runs", "4", "--steps", "12", "--seed", "21",
                  "--replicas", "2", "--iterations", "2", "--workers", "2", "--split-runs-out",
                  str(root / "splits.json")], timeout=300)
    assert result.returncode == 0, result.stderr
    return root, result


def test_search_command_summary_and_split_file(archive):
    root, result = archive
    runs = list_runs(root)
    assert len(runs) == 4
    lines = result.stdout.strip().splitlines()
    assert lines[0].startswith("run") and "best C+I" in lines[0] and lines[-5].startswith("4 runs; best C+I per run")
    assert all(re.fullmatch(BEST_LINE, line) for line in lines[-4:])           # one closing line per run
    assert {line.split()[0] for line in lines[1:5]} == {str(r) for r in runs}
    splits = json.loads((root / "splits.json").read_text())
    assert set(splits) == {"train", "validation", "test", "stress"} and set(splits.values()) == {str(r) for r in runs}


def test_export_writes_whole_runs_in_order(archive, tmp_path):
    root, _ = archive
    out = tmp_path / "stream.sztx"
    result = run_export(root, out)
    assert result.returncode == 0, result.stderr
    data = out.read_bytes()
    assert validate_stream_header(data[:EXPORT_HEADER.size]) == RECORD_DTYPE.itemsize
    records = np.frombuffer(data[EXPORT_HEADER.size:], dtype=RECORD_DTYPE)
    runs = list_runs(root)
    assert len(records) == 4 * 12
    ids = [uuid.UUID(bytes=bytes(r)) for r in records["run_id"]]
    assert [ids[k * 12] for k in range(4)] == runs and all(ids[k] == ids[k - k % 12] for k in range(48))
    first_meta, first_events = read_run(root, runs[0])
    mine = records[:12]
    np.testing.assert_array_equal(mine["sequence"], np.arange(12))
    np.testing.assert_array_equal(mine["gains"][:, 2], mine["gains"][:, 0] + mine["gains"][:, 1])
    np.testing.assert_array_equal(mine["outcome"][:, 0], (mine["gains"][:, 2] > 0))
    context = np.stack([first_events["progress"], first_events["best_before"], first_events["temperature"]], axis=1)
    L = layout(first_meta["topology"])
    np.testing.assert_array_equal(mine["anchor"], features(first_events["anchor_normals"], first_events["anchor_offsets"],
                                                           L, context=context))
    # the proposal block is measured against its anchor (the labels are anchor-relative)
    np.testing.assert_array_equal(mine["proposal"], features(first_events["proposal_normals"],
                                                             first_events["proposal_offsets"], L, context=context,
                                                             reference=first_events["anchor_defects"]))
    np.testing.assert_array_equal(records[:12], export_records(runs[0], first_events))
    # --include-run keeps only the named runs, still whole and in archive order
    picked = run_export(root, tmp_path / "two.sztx", [runs[2], runs[0]])
    two = np.frombuffer((tmp_path / "two.sztx").read_bytes()[EXPORT_HEADER.size:], dtype=RECORD_DTYPE)
    assert picked.returncode == 0 and len(two) == 24
    assert uuid.UUID(bytes=bytes(two["run_id"][0])) == runs[0] and uuid.UUID(bytes=bytes(two["run_id"][12])) == runs[2]


def run_export(root, out: Path, include=()):
    "Run `szrank export` with stdout to a file (the stream is binary)."
    import os
    import subprocess
    command = [tool("szrank"), "export", "--root", str(root)]
    for r in include:
        command += ["--include-run", str(r)]
    with out.open("wb") as stdout:
        return subprocess.run(command, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=300,
                              env=dict(os.environ, PYTHONWARNINGS="ignore"))


def test_export_errors_name_the_problem(archive, tmp_path):
    root, _ = archive
    import shutil
    broken = tmp_path / "broken"
    shutil.copytree(root, broken)
    victim = sorted(next(p for p in broken.iterdir() if p.is_dir()).glob("shard_*.sztd"))[0]
    blob = bytearray(victim.read_bytes()); blob[SHARD_HEADER.size + 100] ^= 0xFF; victim.write_bytes(bytes(blob))
    result = run_export(broken, tmp_path / "out.sztx")
    assert result.returncode != 0
    assert str(victim) in result.stderr and "CRC32" in result.stderr
    assert (tmp_path / "out.sztx").read_bytes() == b""                 # nothing half-written
    missing = run_export(root, tmp_path / "none.sztx", [uuid.UUID(int=1)])
    assert missing.returncode != 0 and "00000000-0000-0000-0000-000000000001" in missing.stderr
    nowhere = run_export(tmp_path / "no-such-archive", tmp_path / "x.sztx")
    assert nowhere.returncode != 0 and "no such archive" in nowhere.stderr


def test_search_command_rejects_bad_arguments(tmp_path):
    result = run([tool("szrank"), "search", "--archive", str(tmp_path), "--runs", "1", "--steps", "2",
                  "--model", str(tmp_path / "missing.sztf")])
    assert result.returncode == 2 and "no such file" in result.stderr
    bad = tmp_path / "bad.sztf"
    bad.write_bytes(b"not a model" * 40)
    result = run([tool("szrank"), "search", "--archive", str(tmp_path), "--runs", "1", "--steps", "2", "--model", str(bad)])
    assert result.returncode == 2 and "SZTRNK01" in result.stderr
    assert not list(tmp_path.glob("*-*-*-*-*"))                       # no run folder was started


def test_search_export_train_end_to_end(archive, tmp_path):
    root, _ = archive
    # no --exporter: with no native build under --repository the trainer runs `szrank export`
    result = run([tool("szrank"), "train", "--repository", str(tmp_path), "--archive-root", str(root),
                  "--split-runs", str(root / "splits.json"), "--output-directory", str(tmp_path / "model"),
                  "--snapshot-directory", str(tmp_path / "snap"), "--report-epochs", "1",
                  "--minimum-gate-records", "5", "--batch-size", "16", "--force-deploy", "--device", "cpu"],
                 timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    model = tmp_path / "model" / "current.sztf"
    assert model.exists()
    guided = run([tool("szrank"), "search", "--archive", str(tmp_path / "guided"), "--runs", "1", "--steps", "4",
                  "--seed", "2", "--replicas", "1", "--iterations", "1", "--model", str(model)], timeout=300)
    assert guided.returncode == 0, guided.stderr
    _, events = read_run(tmp_path / "guided", list_runs(tmp_path / "guided")[0])
    assert (events["flags"][:, 0] & 4).all()


BEST_LINE = r"best C\+I (\d+) after (\d+) evaluations"


def test_population_strategy_from_the_command_line(tmp_path):
    "`--strategy population --evaluations N`: the budget ends the run, best.obj holds the best, the last line says it."
    from szrank.search.obj import read_configuration
    root = tmp_path / "archive"
    result = run([tool("szrank"), "search", "--archive", str(root), "--topology", "42", "--evaluations", "3000",
                  "--strategy", "population", "--seed", "4"], timeout=300)
    assert result.returncode == 0, result.stderr
    last = result.stdout.strip().splitlines()[-1]
    best, at = map(int, re.fullmatch(BEST_LINE, last).groups())
    (run_id,) = list_runs(root)
    metadata, events = read_run(root, run_id)
    assert len(events) == 0 and metadata["strategy"] == "population" and metadata["best_total"] == best
    assert 3000 <= metadata["evaluations"] < 3000 + 32 and at <= metadata["evaluations"]
    planes = read_configuration(root / str(run_id) / "best.obj", 42)
    assert evaluate(*planes, layout(42)).total[0] == best
    again = run([tool("szrank"), "search", "--archive", str(tmp_path / "again"), "--topology", "42", "--evaluations",
                 "3000", "--strategy", "population", "--seed", "4"], timeout=300)
    assert again.stdout.strip().splitlines()[-1] == last                  # deterministic for a seed


def test_anneal_budget_ends_the_run_and_each_run_ends_with_its_best_line(tmp_path):
    result = run([tool("szrank"), "search", "--archive", str(tmp_path), "--topology", "42", "--evaluations", "400",
                  "--runs", "2", "--seed", "5", "--replicas", "2", "--iterations", "2", "--workers", "1"], timeout=300)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.strip().splitlines()[-2:]
    assert all(re.fullmatch(BEST_LINE, line) for line in lines)
    for run_id in list_runs(tmp_path):
        metadata, events = read_run(tmp_path, run_id)
        used = 1 + len(events) * (1 + 2 * 2)
        assert 400 <= used < 400 + 5 and metadata["budget"] == 400


def test_search_settings_are_refused_naming_the_flag(tmp_path):
    for extra, message in ((["--strategy", "population", "--steps", "3"], "--strategy population needs --evaluations"),
                           ([], "give --steps or --evaluations"),
                           (["--evaluations", "0"], "--evaluations must be positive")):
        result = run([tool("szrank"), "search", "--archive", str(tmp_path), *extra], timeout=120)
        assert result.returncode == 2 and message in result.stderr, result.stderr


def test_value_gate_skips_rollouts_and_the_evaluations_add_up(tmp_path):
    "A guided run rolls out about half its proposals (the value head's upper half); a skipped one ends as proposed."
    model = make_model(tmp_path / "current.sztf")
    summary = small_run(tmp_path / "gated", seed=6, topology=42, policy=RankerPolicy(model, gate=0.5), steps=40)
    _, events = read_run(tmp_path / "gated", uuid.UUID(summary.run_id))
    rolled = events["rollout_iterations"] > 0
    assert 0 < (~rolled).sum() < len(events) and (events["replica_count"][~rolled] == 0).all()
    np.testing.assert_array_equal(events["result_normals"][~rolled], events["proposal_normals"][~rolled])
    np.testing.assert_array_equal(events["result_defects"][~rolled], events["proposal_defects"][~rolled])
    assert summary.evaluations == 1 + int((1 + events["replica_count"].astype(int) * events["rollout_iterations"]).sum())
    ungated = small_run(tmp_path / "ungated", seed=6, topology=42, policy=RankerPolicy(model, gate=0.0), steps=40)
    _, all_rolled = read_run(tmp_path / "ungated", uuid.UUID(ungated.run_id))
    assert (all_rolled["rollout_iterations"] == 2).all() and ungated.evaluations == 1 + 40 * (1 + 2 * 2)
    with pytest.raises(OptionError, match="gate in \\[0, 1\\)"):
        RankerPolicy(model, gate=1.0)
