"""szrank.ranker.modelfile: the byte-exact SZTRNK01 file, every rejection, the numpy
reference forward pass against torch, and crash-safe publishing."""
import hashlib
import os
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest
import torch

from helpers import ROOT, run
from szrank.ranker import modelfile
from szrank.ranker.architecture import expected_payload_float_count
from szrank.ranker.model import RankerMember, ensemble_outputs, initialize_member, members_from_model
from szrank.ranker.modelfile import (FIXED_FIELDS, MODEL_HEADER, MODEL_HEADER_BYTES, ModelFileError, load_model,
                              publish_model, serialize_model)
from szrank.ranker.reference import reference_forward

VALIDATION = {"average_precision": 0.61, "brier_score": 0.19, "expected_calibration_error": 0.02,
              "top_k_gain": 0.7, "policy_cross_entropy": 1.5, "prevalence": 0.4,
              "binary_cross_entropy": 0.55, "gain_mae": 0.3, "records": 4321}
DIGEST = hashlib.sha256(b"corpus").digest()
FIELD_ORDER = list(FIXED_FIELDS)  # header order: 4 versions/sizes then 11 shape fields, from byte 8


def random_members(seed=0):
    "Members with every parameter random (not the init's zeros and ones), so every tensor matters."
    members = []
    generator = torch.Generator().manual_seed(seed)
    for index in range(3):
        member = initialize_member(seed + index, "cpu")
        with torch.no_grad():
            for name, parameter in member.named_parameters():
                offset = 1.0 if "norm" in name and name.endswith("weight") else 0.0  # LayerNorm gains near 1
                parameter.copy_(offset + 0.2 * torch.randn(parameter.shape, generator=generator))
        members.append(member.eval())
    return members


@pytest.fixture(scope="module")
def members():
    return random_members()


@pytest.fixture(scope="module")
def model_bytes(members):
    return serialize_model(members, 0x5A17A551, DIGEST, VALIDATION)


def test_header_layout_is_the_table(model_bytes):
    assert len(model_bytes) == MODEL_HEADER_BYTES + 4 * expected_payload_float_count()
    assert model_bytes[:8] == b"SZTRNK01"
    assert struct.unpack_from("<4I", model_bytes, 8) == (1, 1, 5, 160)
    assert struct.unpack_from("<11I", model_bytes, 24) == (3, 64, 4, 3, 256, 12, 16, 24, 59, 5, 3)
    count, crc, flags = struct.unpack_from("<3I", model_bytes, 68)
    assert count == expected_payload_float_count() and flags == 0
    assert crc == zlib.crc32(model_bytes[160:])
    assert struct.unpack_from("<Q", model_bytes, 80)[0] == 0x5A17A551
    assert model_bytes[88:120] == DIGEST
    floats = struct.unpack_from("<8f", model_bytes, 120)
    keys = ["average_precision", "brier_score", "expected_calibration_error", "top_k_gain",
            "policy_cross_entropy", "prevalence", "binary_cross_entropy", "gain_mae"]
    np.testing.assert_allclose(floats, [VALIDATION[k] for k in keys], rtol=1e-6)
    # The table's last (reserved) word holds the CRC32 of the 156 header bytes before it.
    assert struct.unpack_from("<2I", model_bytes, 152) == (4321, zlib.crc32(model_bytes[:156]))


def test_payload_is_member_tensors_in_seed_order(members, model_bytes):
    payload = np.frombuffer(model_bytes[160:], dtype="<f4")
    first = members[0]
    d = 64
    np.testing.assert_array_equal(payload[: d * 16], first.face_proj.weight.detach().numpy().ravel())
    offset = d * 16 + d + d * 24 + d
    np.testing.assert_array_equal(payload[offset: offset + 12 * d], first.face_pos.detach().numpy().ravel())
    per_member = expected_payload_float_count() // 3
    np.testing.assert_array_equal(payload[per_member - 3:per_member], first.scale_head.bias.detach().numpy())
    np.testing.assert_array_equal(payload[per_member: per_member + 16 * d],
                                  members[1].face_proj.weight.detach().numpy().ravel())


def test_round_trip(members, model_bytes, tmp_path):
    path = tmp_path / "model.sztf"
    path.write_bytes(model_bytes)
    loaded = load_model(path)
    assert loaded.header.training_seed == 0x5A17A551 and loaded.header.corpus_digest == DIGEST
    assert loaded.header.validation_records == 4321 and not loaded.header.gate_overridden
    assert loaded.digest_sha256 == hashlib.sha256(model_bytes).hexdigest()
    rebuilt = members_from_model(loaded)
    assert serialize_model(rebuilt, 0x5A17A551, DIGEST, VALIDATION) == model_bytes
    for a, b in zip(members, rebuilt):
        for (name, pa), (_, pb) in zip(a.state_dict().items(), b.state_dict().items()):
            assert torch.equal(pa, pb), name
    flagged = serialize_model(members, 1, DIGEST, VALIDATION, gate_overridden=True)
    assert load_model(flagged).header.gate_overridden


def test_serialize_rejects_bad_inputs(members):
    with pytest.raises(ValueError, match="expected 3 ensemble members"):
        serialize_model(members[:2], 0, DIGEST, VALIDATION)
    with pytest.raises(ValueError, match="SHA-256"):
        serialize_model(members, 0, b"short", VALIDATION)


def patched(data: bytes, offset: int, fmt: str, value) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, offset, value)
    return bytes(out)


def test_rejects_bad_magic(model_bytes):
    with pytest.raises(ModelFileError, match=r"bad magic b'SZTRNK02'.*not an SZTRNK01 model file"):
        load_model(b"SZTRNK02" + model_bytes[8:])


@pytest.mark.parametrize("index", range(len(FIELD_ORDER)))
def test_rejects_any_version_or_shape_field_that_differs(model_bytes, index):
    field = FIELD_ORDER[index]
    bad = patched(model_bytes, 8 + 4 * index, "<I", FIXED_FIELDS[field] + 1)
    with pytest.raises(ModelFileError, match=rf"header field {field} is {FIXED_FIELDS[field] + 1}, "
                                             rf"this build needs {FIXED_FIELDS[field]}"):
        load_model(bad)


def test_rejects_float_count_size_and_crc(model_bytes, tmp_path):
    with pytest.raises(ModelFileError, match="payload float count is 7"):
        load_model(patched(model_bytes, 68, "<I", 7))
    with pytest.raises(ModelFileError, match="file size is .* need exactly"):
        load_model(model_bytes[:-4])
    with pytest.raises(ModelFileError, match="file size is .* need exactly"):
        load_model(model_bytes + b"\0")
    with pytest.raises(ModelFileError, match="truncated: 100 bytes"):
        load_model(model_bytes[:100])
    corrupt = bytearray(model_bytes)
    corrupt[5000] ^= 0x01
    path = tmp_path / "corrupt.sztf"
    path.write_bytes(bytes(corrupt))
    with pytest.raises(ModelFileError, match=rf"{path}: payload CRC32 is [0-9a-f]{{8}}, the header says"):
        load_model(path)


def test_reference_forward_matches_torch_ensemble(members, model_bytes):
    rng = np.random.default_rng(4)
    n = 257
    face = rng.normal(size=(n, 12, 16)).astype(np.float32)
    glob = rng.normal(size=(n, 24)).astype(np.float32)
    topology = rng.integers(0, 59, n)
    reference = reference_forward(model_bytes, face, glob, topology)
    with torch.no_grad():
        torch_out = ensemble_outputs(members, torch.from_numpy(face), torch.from_numpy(glob),
                                     torch.from_numpy(topology))
    assert set(reference) == set(torch_out)
    for key, value in torch_out.items():
        np.testing.assert_allclose(reference[key], value.numpy(), atol=1e-4, rtol=0, err_msg=key)
    assert reference["plane_probability"].shape == (n, 12)
    np.testing.assert_allclose(reference["move_probability"].sum(axis=1), 1.0, atol=1e-9)


def test_reference_path_imports_no_torch(model_bytes, tmp_path):
    path = tmp_path / "model.sztf"
    path.write_bytes(model_bytes)
    code = ("import sys, numpy as np\n"
            "from szrank.ranker.modelfile import load_model\nfrom szrank.ranker.reference import reference_forward\n"
            f"model = load_model({str(path)!r})\n"
            "out = reference_forward(model, np.zeros((2, 12, 16)), np.zeros((2, 24)), np.array([0, 58]))\n"
            "assert 'torch' not in sys.modules, 'the reference imported torch'\n"
            "print(round(float(out['improvement_probability'][0]), 6))\n")
    result = run([sys.executable, "-c", code], cwd=ROOT)
    assert result.returncode == 0, result.stderr
    float(result.stdout)


def test_publish_is_immutable_and_idempotent(model_bytes, tmp_path):
    digest, generation = publish_model(tmp_path, model_bytes, {"approved": True})
    assert generation.name == f"model_{digest}.sztf" and generation.read_bytes() == model_bytes
    assert (tmp_path / "current.sztf").read_bytes() == model_bytes
    report = (tmp_path / f"report_{digest}.json").read_text()
    assert f'"model_digest_sha256": "{digest}"' in report
    assert (tmp_path / "report.json").read_text() == report
    assert publish_model(tmp_path, model_bytes, {"approved": True, "second": 1})[0] == digest
    assert (tmp_path / f"report_{digest}.json").read_text() == report      # the first report stays
    assert '"second": 1' in (tmp_path / "report.json").read_text()
    generation.write_bytes(model_bytes[:-1] + b"\x01")                      # a corrupt generation
    with pytest.raises(RuntimeError, match="immutable model generation holds different bytes"):
        publish_model(tmp_path, model_bytes, {})
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("failing_step", [1, 2, 3, 4])
def test_a_crash_at_any_step_leaves_the_previous_current_intact(members, model_bytes, tmp_path, monkeypatch,
                                                                failing_step):
    publish_model(tmp_path, model_bytes, {"generation": "old"})
    new_bytes = serialize_model(members, 7, DIGEST, VALIDATION)
    calls = []
    real_replace = os.replace

    def replace(source, target):
        calls.append(os.fspath(target))
        if len(calls) == failing_step:
            raise OSError(28, "No space left on device")
        return real_replace(source, target)

    monkeypatch.setattr(os, "replace", replace)
    with pytest.raises(OSError, match="No space left"):
        publish_model(tmp_path, new_bytes, {"generation": "new"})
    monkeypatch.setattr(os, "replace", real_replace)
    assert [os.path.basename(c).split("_")[0] for c in calls][-1] in {"model", "report", "current.sztf", "report.json"}
    current = (tmp_path / "current.sztf").read_bytes()
    # Steps 1-3 (generation, its report, current.sztf) leave the old model current; step 4 fails after
    # current.sztf was replaced, so the new one is current, whole.
    assert current == (new_bytes if failing_step == 4 else model_bytes)
    load_model(tmp_path / "current.sztf")
    assert not [p.name for p in tmp_path.iterdir() if ".tmp." in p.name], "a temporary file was left behind"
    # Publishing again after the failure completes the generation.
    digest, _ = publish_model(tmp_path, new_bytes, {"generation": "new"})
    assert (tmp_path / "current.sztf").read_bytes() == new_bytes
    assert (tmp_path / f"model_{digest}.sztf").read_bytes() == new_bytes
