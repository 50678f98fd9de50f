"""suvi_fill.corpus.reader: the one reader of manifest.json (refusals naming file and field, splits -> days ->
shards, the typed calibration, the digest checks, the inspect report and `inspect --verify`)."""
import json
from pathlib import Path

import numpy as np
import pytest

from helpers import run, tool
from suvi_fill.corpus import reader as corpus_module
from suvi_fill.corpus import shards as dataset
from suvi_fill.corpus import segments
from suvi_fill.physics.coding import encode
from suvi_fill.corpus.reader import MANIFEST, Calibration, Corpus
from suvi_fill.plumbing.errors import DataError, InvalidData, MissingData

DAYS = ("2024-03-01", "2024-03-02")


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    "Two days of both satellites at 16 px, a six-slot outage every six hours, and their manifest."
    directory = tmp_path_factory.mktemp("corpus")
    planes = encode(np.random.default_rng(0).random((4, 16, 16)) + 0.5)
    for day in DAYS:
        for satellite in (16, 18):
            with dataset.ShardWriter(directory / dataset.shard_name(day, satellite), day, satellite, 16) as writer:
                for k, slot in enumerate(writer.slots):
                    if k % 90 > 5:
                        for band in range(6):
                            writer.add(slot, band, planes[(k + band) % 4])
    segments.write_manifest(directory, span_min=2)
    return directory


def _edited(built, tmp_path, edit) -> Path:
    manifest = json.loads((built / MANIFEST).read_text())
    edit(manifest)
    manifest["digest"] = corpus_module.manifest_digest(manifest)   # a consistent edit: the fields are what is tested
    path = tmp_path / MANIFEST
    path.write_text(json.dumps(manifest))
    return path


def test_open_reads_the_fields_and_the_splits(built):
    corpus = Corpus.open(built)
    assert Corpus.open(built / MANIFEST).digest == corpus.digest
    assert corpus.satellites == (16, 18) and corpus.resolution == 16 and corpus.span_min == 2
    assert corpus.days == list(DAYS) and set(corpus.splits) == {"train", "val", "test"}
    for name in corpus.splits:
        chosen = corpus.split(name)
        assert chosen and all(isinstance(s, tuple) and len(s) == 3 for s in chosen)
        assert corpus.split_days(name) == corpus_module.days_touched(chosen)
        assert set(corpus.shards(name)) == {(d, s) for d in corpus.split_days(name) for s in (16, 18)}
    assert corpus.resident_days("train") == corpus.split_days("train")
    assert len(corpus.shards()) == 4 and corpus.check() == 4


@pytest.mark.parametrize("text, expected", [
    ("", "not JSON"), ("null", "a JSON object expected, got null"), ("[1, 2]", "a JSON object expected"),
    ('{"digest": "x", "satellites": [16]}', "has no 'segments'"),
])
def test_malformed_manifests_are_refused_naming_the_file(tmp_path, text, expected):
    (tmp_path / MANIFEST).write_text(text)
    with pytest.raises(InvalidData, match=expected) as caught:
        Corpus.open(tmp_path)
    assert str(caught.value).startswith(str(tmp_path / MANIFEST)) and caught.value.status == 2


@pytest.mark.parametrize("edit, expected", [
    (lambda m: m.pop("span_min"), "manifest has no 'span_min'"),
    (lambda m: m.update(span_min="16"), "field 'span_min' is str, not int"),
    (lambda m: m.update(segments=[]), "field 'segments' is list, not dict"),
    (lambda m: m["segments"].update(train=[[16, 1]]), r"segments\['train'\] is not a list of"),
    (lambda m: m["segments"].update(train=3), r"segments\['train'\] is not a list of"),
])
def test_wrong_fields_are_refused_naming_the_field(built, tmp_path, edit, expected):
    with pytest.raises(InvalidData, match=expected):
        Corpus.open(_edited(built, tmp_path, edit), shards_dir=built)


def test_missing_things(built, tmp_path):
    with pytest.raises(MissingData, match="no manifest"):
        Corpus.open(tmp_path)
    with pytest.raises(FileNotFoundError, match="not a directory"):
        Corpus.open(tmp_path / "nope")
    with pytest.raises(MissingData, match="old_manifest.json: no manifest"):
        Corpus.open(tmp_path / "old_manifest.json")
    corpus = Corpus.open(_edited(built, tmp_path, lambda m: m["segments"].pop("val")), shards_dir=built)
    with pytest.raises(InvalidData, match="'segments' has no 'val' split"):
        corpus.split("val")
    corpus = Corpus.open(_edited(built, tmp_path, lambda m: m.pop("calibration")), shards_dir=built)
    with pytest.raises(InvalidData, match="manifest has no 'calibration'"):
        corpus.calibration
    assert isinstance(MissingData("x"), DataError) and isinstance(InvalidData("x"), ValueError)


def test_the_calibration_is_typed_and_round_trips(built):
    corpus = Corpus.open(built)
    cal = corpus.calibration
    assert isinstance(cal, Calibration) and cal.reference == 16
    assert Calibration.from_dict(cal.to_dict()) == cal
    gains, offsets = cal.transfer(18, 16)
    assert np.array_equal(gains, segments.transfer(corpus.manifest["calibration"], 18, 16)[0])
    assert np.array_equal(gains, segments.transfer(cal, 18, 16)[0])
    with pytest.raises(InvalidData, match="malformed calibration"):
        Calibration.from_dict({"reference": 16, "bands": {"94": {}}}, "somewhere")


def test_verify_finds_damage_the_header_check_cannot(built, tmp_path):
    import shutil
    copy = tmp_path / "copy"
    shutil.copytree(built, copy)
    corpus = Corpus.open(copy)
    assert corpus.verify() == []
    victim = corpus.shard_path(DAYS[1], 16)
    data = bytearray(victim.read_bytes())
    data[dataset.PLANE_OFFSET + 100] ^= 0xFF
    victim.write_bytes(bytes(data))
    assert corpus.check() == 4
    problems = corpus.verify()
    assert len(problems) == 1 and str(victim) in problems[0] and "content hash" in problems[0]
    shown = run([tool("suvi-fill"), "inspect", "--shards", str(copy)])
    assert shown.returncode == 0 and "train:" in shown.stdout
    verified = run([tool("suvi-fill"), "inspect", "--shards", str(copy), "--verify"])
    assert verified.returncode == 2 and verified.stderr.count("\n") == 1 and "content hash" in verified.stderr
    victim.unlink()
    assert any("listed in the manifest but missing" in p for p in corpus.verify())
    with pytest.raises(MissingData, match="no such shard"):
        corpus.open_shards()
    assert len(corpus.open_shards(missing_ok=True)) == 3


def test_a_rebuilt_shard_is_stale(built, tmp_path):
    import shutil
    copy = tmp_path / "copy"
    shutil.copytree(built, copy)
    name = dataset.shard_name(DAYS[0], 18)
    with dataset.ShardWriter(copy / name, DAYS[0], 18, 16) as writer:
        writer.mark(writer.slots[0], 0, dataset.SENTINEL)
    with pytest.raises(InvalidData, match="changed since the manifest"):
        Corpus.open(copy).open_shards()
    ok = run([tool("suvi-fill"), "inspect", "--shards", str(built), "--verify"])
    assert ok.returncode == 0 and "verified: 4 shards" in ok.stdout
