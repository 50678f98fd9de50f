"""Property tests of the SZTXP001 reader: random bytes, random headers, truncations and
random record contents give either a valid result or one clear error, never a crash or a hang."""
import hashlib
import io
import uuid

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from szrank.stream.snapshot import (SPLIT_RUNS, HeaderError, PartialRecordError, SnapshotError, UnknownRunError,
                             inspect_snapshot)
from szrank.stream.format import (EXPORT_HEADER, EXPORT_MAGIC, RECORD_DTYPE, StreamFormatError, example_records,
                           stream_header, validate_stream_header, write_stream)

RUNS = list(SPLIT_RUNS.values())
pytestmark = pytest.mark.timeout(120)    # a hang (reader, exporter, Ctrl-C path) fails the test
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.fixture(scope="module")
def valid_stream() -> bytes:
    buffer = io.BytesIO()
    write_stream(buffer, [example_records(3, run, seed=i) for i, run in enumerate(RUNS)])
    return buffer.getvalue()


def _inspect(tmp_path, payload: bytes, **kwargs):
    path = tmp_path / "case.sztx"
    path.write_bytes(payload)
    return path, inspect_snapshot(path, **kwargs)


@PROPERTY
@given(payload=st.binary(max_size=6000))
def test_random_bytes_are_refused_clearly(tmp_path, payload):
    path = tmp_path / "case.sztx"
    path.write_bytes(payload)
    with pytest.raises(SnapshotError) as caught:
        inspect_snapshot(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: ") and "\n" not in message


@PROPERTY
@given(magic=st.one_of(st.just(EXPORT_MAGIC), st.binary(min_size=8, max_size=8)),
       version=st.one_of(st.just(1), st.integers(0, 2**32 - 1)),
       record_size=st.one_of(st.just(1824), st.integers(0, 2**32 - 1)),
       records=st.integers(0, 3))
def test_random_headers(tmp_path, valid_stream, magic, version, record_size, records):
    header = EXPORT_HEADER.pack(magic, version, record_size)
    payload = header + valid_stream[16:16 + records * 1824]
    valid = (magic, version, record_size) == (EXPORT_MAGIC, 1, 1824)
    if valid:
        assert validate_stream_header(header) == 1824
        _, info = _inspect(tmp_path, payload)
        assert info.record_count == records
    else:
        with pytest.raises(StreamFormatError):
            validate_stream_header(header)
        with pytest.raises(HeaderError, match="bad magic|unsupported stream version|record size mismatch"):
            _inspect(tmp_path, payload)


@PROPERTY
@given(cut=st.integers(0, 16 + 12 * 1824))
def test_truncated_streams(tmp_path, valid_stream, cut):
    payload = valid_stream[:cut]
    if cut < 16:
        with pytest.raises(HeaderError, match=f"header is truncated: {cut} of 16 bytes"):
            _inspect(tmp_path, payload)
    elif (cut - 16) % 1824:
        start = 16 + (cut - 16) // 1824 * 1824
        with pytest.raises(PartialRecordError, match=f"partial record at byte {start}: record {(cut - 16) // 1824} "
                                                     f"has {cut - start} of 1824 bytes"):
            _inspect(tmp_path, payload)
    else:
        _, info = _inspect(tmp_path, payload)
        assert info.record_count == (cut - 16) // 1824
        assert info.corpus_digest == hashlib.sha256(payload[16:]).digest()
        assert sum(info.split_counts.values()) == info.record_count


@PROPERTY
@given(body=st.binary(min_size=1824, max_size=3 * 1824).filter(lambda b: len(b) % 1824 == 0),
       deployment=st.booleans())
def test_random_records_after_a_valid_header(tmp_path, body, deployment):
    payload = stream_header() + body
    if deployment:                  # every run is acceptable: counts add up, or a bad value is named in place
        from szrank.stream.snapshot import RecordValueError
        try:
            _, info = _inspect(tmp_path, payload, includes_additional_runs=True)
        except RecordValueError as exc:
            assert re.search(r"case\.sztx: record \d+ \(byte \d+, run .* sequence \d+\): field "
                             r"(topology = -?\d+ is outside 0\.\.58|(proposal|anchor)\[\d+\] = \S+ is not finite)",
                             str(exc)), str(exc)
            return
        assert info.record_count == len(body) // 1824
        assert sum(count for _, count in sum(info.split_segments.values(), ())) == info.record_count
    else:
        with pytest.raises(UnknownRunError, match="record 0: unknown run"):
            _inspect(tmp_path, payload)


@PROPERTY
@given(data=st.data(), count=st.integers(1, 8))
def test_decode_of_random_record_bytes(data, count):
    from szrank.stream.batches import RecordError, decode_batch
    records = example_records(count, RUNS[0], seed=count)
    raw = bytearray(records.tobytes())
    # overwrite a few random spans of the valid records with random bytes
    for _ in range(data.draw(st.integers(0, 4))):
        start = data.draw(st.integers(0, len(raw) - 1))
        chunk = data.draw(st.binary(min_size=1, max_size=64))
        raw[start:start + len(chunk)] = chunk[:len(raw) - start]
    mutated = np.frombuffer(bytes(raw), dtype=RECORD_DTYPE)
    try:
        batch = decode_batch(mutated)
    except RecordError as exc:
        message = str(exc)
        assert "\n" not in message and message.startswith("run ") and " sequence " in message
        index = int(message.split("(record ")[1].split(" ")[0])
        assert str(uuid.UUID(bytes=mutated["run_id"][index].tobytes())) in message
        return
    assert batch.size == count
    assert bool(((batch.topology >= 0) & (batch.topology < 59)).all())
    for tensor in (batch.proposal_face, batch.proposal_global, batch.anchor_face, batch.anchor_global,
                   batch.signed_gain):
        assert bool(tensor.isfinite().all())
    for action, limit, propensity in ((batch.plane_action, 12, batch.plane_propensity),
                                      (batch.move_action, 5, batch.move_propensity),
                                      (batch.scale_action, 3, batch.scale_propensity)):
        assert bool(((action == -1) | ((action >= 0) & (action < limit))).all())
        assert bool((propensity[action >= 0] > 0).all())
    assert bool(((batch.sample_weight >= 0.6) & (batch.sample_weight <= 2.0)).all())
