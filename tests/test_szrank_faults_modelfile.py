"""SZTRNK01 faults (issue 19 item 5): non-finite weights and metrics are refused at load and never
written, the header's metadata is checksummed, and `szrank search --model` refuses an all-NaN model."""
import hashlib
import struct
import zlib

import numpy as np
import pytest

from helpers import run, tool
from szrank.ranker.architecture import expected_payload_float_count
from szrank.ranker.model import initialize_member
from szrank.ranker.modelfile import (HEADER_CRC_OFFSET, HEADER_METRICS, ModelFileError, header_crc32, load_model,
                              serialize_model)

VALIDATION = dict(zip(HEADER_METRICS, (0.6, 0.2, 0.03, 0.5, 1.6, 0.4, 0.6, 0.3)), records=5000)
DIGEST = hashlib.sha256(b"corpus").digest()


@pytest.fixture(scope="module")
def model_bytes():
    return serialize_model([initialize_member(seed, "cpu") for seed in range(3)], 7, DIGEST, VALIDATION)


def consistent(data: bytearray) -> bytes:
    "Recompute both checksums, as a writer that trusted its NaNs would."
    struct.pack_into("<I", data, 72, zlib.crc32(bytes(data[160:])))
    struct.pack_into("<I", data, HEADER_CRC_OFFSET, header_crc32(data))
    return bytes(data)


def all_nan(model_bytes: bytes) -> bytes:
    return consistent(bytearray(model_bytes[:160] + np.full(expected_payload_float_count(), np.nan, "<f4").tobytes()))


def test_all_nan_weights_are_refused_naming_member_tensor_and_element(model_bytes, tmp_path):
    path = tmp_path / "nan.sztf"
    path.write_bytes(all_nan(model_bytes))
    with pytest.raises(ModelFileError, match=rf"{path}: member 0 tensor face_proj.weight element 0 is nan"):
        load_model(path)


def test_one_infinite_weight_in_the_last_member_is_refused(model_bytes):
    data = bytearray(model_bytes)
    struct.pack_into("<f", data, len(data) - 4, float("inf"))
    with pytest.raises(ModelFileError, match=r"member 2 tensor scale_head.bias element 2 is inf"):
        load_model(consistent(data))


@pytest.mark.parametrize("index", range(8))
def test_a_non_finite_header_metric_is_refused(model_bytes, index):
    data = bytearray(model_bytes)
    struct.pack_into("<f", data, 120 + 4 * index, float("nan"))
    with pytest.raises(ModelFileError, match=rf"header field validation {HEADER_METRICS[index]} = nan is not finite"):
        load_model(consistent(data))


@pytest.mark.parametrize("offset", [76, 81, 100, 125, 152])
def test_a_flipped_metadata_bit_is_caught_by_the_header_checksum(model_bytes, offset):
    "Seed, corpus digest, metrics, record count and flags lie outside the payload CRC."
    data = bytearray(model_bytes)
    data[offset] ^= 0x10
    with pytest.raises(ModelFileError, match=r"header CRC32 is [0-9a-f]{8}, field header_crc32 says"):
        load_model(bytes(data))


def test_a_file_written_before_the_header_checksum_still_loads(model_bytes):
    data = bytearray(model_bytes)
    struct.pack_into("<I", data, HEADER_CRC_OFFSET, 0)
    assert load_model(bytes(data)).header.header_crc32 == 0


def test_serialize_refuses_non_finite_weights_and_metrics():
    members = [initialize_member(seed, "cpu") for seed in range(3)]
    with pytest.raises(ModelFileError, match="validation metric gain_mae = nan is not finite"):
        serialize_model(members, 7, DIGEST, dict(VALIDATION, gain_mae=float("nan")))
    members[1].value_head.bias.data[0] = float("nan")
    with pytest.raises(ModelFileError, match="member 1 tensor value_head.bias has non-finite weights"):
        serialize_model(members, 7, DIGEST, VALIDATION)


def test_search_refuses_an_all_nan_model(model_bytes, tmp_path):
    model = tmp_path / "current.sztf"
    model.write_bytes(all_nan(model_bytes))
    result = run([tool("szrank"), "search", "--archive", str(tmp_path / "archive"), "--runs", "1", "--steps", "2",
                  "--model", str(model)])
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{model}: member 0 tensor face_proj.weight element 0 is nan" in lines[0], lines
    assert not (tmp_path / "archive").exists() or not any((tmp_path / "archive").rglob("*.sztd*"))
