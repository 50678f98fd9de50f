"""Iterate + decode throughput of the SZTXP001 reader: szrank.stream.batches beside the seed's path.

Builds a stream of at least 200k records with szrank.stream.format's writer in a temporary
directory, then measures, each in a fresh subprocess pinned to one core, records/s of
`iterate + decode` at batch 1024 for

* szrank:  szrank.stream.batches.iter_record_batches (structured arrays) + decode_batch;
* seed:    a faithful copy of the seed trainer's iter_record_batches (lists of per-record
           bytes) + decode_batch (b"".join + one strided_array copy per field), with the
           dtypes the damaged seed lost restored from the corpus issue's table;

* floor:   the data movement alone (map each chunk, fill the shuffle buffer and gather when
           shuffling, copy each record's feature and label bytes once), no decoding: no
           reader handing out tensors that own their memory can be faster than this;

for a shuffled training epoch (shuffle_records 32768, the seed's default) and for file
order (evaluation), plus each subprocess's peak RSS.  No assertions on time.

    .venv/bin/python benchmarks/szrank_decode.py [--records 200000] [--repeat 3]
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Iterator, Sequence

ONE_CORE_ENV = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
BATCH_SIZE = 1024                   # the trainer's default batch
SHUFFLE_RECORDS = 32768             # the trainer's default shuffle buffer
WRITE_CHUNK = 8192                  # records generated and written per call while building the stream


# --------------------------------------------------------------------------- the seed's path, verbatim

def seed_path():
    "The seed trainer's batch iterator and decoder (dtypes restored from the issue's table)."
    import numpy as np
    import torch
    from szrank.plumbing.common import read_exact
    from szrank.stream.format import (ACTION_OFFSET, ANCHOR_FEATURE_OFFSET, EXPECTED_RECORD_SIZE, EXPORT_HEADER,
                               FACE_COUNT, FACE_FEATURES, FEATURE_FLOATS, GAIN_OFFSET, OUTCOME_OFFSET,
                               PROPENSITY_OFFSET, PROPOSAL_FEATURE_OFFSET, REPLICA_COUNT_OFFSET,
                               ROLLOUT_ITERATIONS_OFFSET, TOPOLOGY_COUNT, TOPOLOGY_OFFSET, validate_stream_header)

    def iter_record_batches(snapshot, splits, batch_size, shuffle_records, seed, max_records_per_split
                            ) -> Iterator[list[bytes]]:
        if batch_size <= 0:
            raise ValueError("batch_size must be positive")
        rng = random.Random(seed)
        io_chunk_records = max(batch_size, min(4096, max(batch_size, shuffle_records)))
        descriptors: list[tuple[int, int]] = []
        for split in splits:
            remaining = max_records_per_split if max_records_per_split else snapshot.split_counts.get(split, 0)
            for segment_start, segment_count in snapshot.split_segments.get(split, ()):
                take = min(segment_count, remaining)
                for local_start in range(0, take, io_chunk_records):
                    descriptors.append((segment_start + local_start, min(io_chunk_records, take - local_start)))
                remaining -= take
                if remaining <= 0:
                    break
        if shuffle_records > 1:
            rng.shuffle(descriptors)
        else:
            descriptors.sort(key=lambda value: value[0])
        capacity = max(batch_size, shuffle_records)
        buffer: list[bytes] = []
        with snapshot.path.open("rb") as stream:
            record_size = validate_stream_header(read_exact(stream, EXPORT_HEADER.size))
            for record_index, record_count in descriptors:
                stream.seek(EXPORT_HEADER.size + record_index * record_size)
                block = read_exact(stream, record_count * record_size)
                buffer.extend(block[offset: offset + record_size] for offset in range(0, len(block), record_size))
                if len(buffer) < capacity:
                    continue
                if shuffle_records > 1:
                    rng.shuffle(buffer)
                complete = len(buffer) - len(buffer) % batch_size
                for start in range(0, complete, batch_size):
                    yield buffer[start: start + batch_size]
                buffer = buffer[complete:]
            if buffer:
                if shuffle_records > 1:
                    rng.shuffle(buffer)
                yield buffer

    def strided_array(blob, batch_size, record_size, offset, dtype, width=1):
        item_size = np.dtype(dtype).itemsize
        if width == 1:
            shape, strides = (batch_size,), (record_size,)
        else:
            shape, strides = (batch_size, width), (record_size, item_size)
        return np.ndarray(shape=shape, dtype=np.dtype(dtype), buffer=blob, offset=offset, strides=strides).copy()

    @dataclasses.dataclass
    class TrainingBatch:
        proposal_face: torch.Tensor
        proposal_global: torch.Tensor
        anchor_face: torch.Tensor
        anchor_global: torch.Tensor
        topology: torch.Tensor
        improved: torch.Tensor
        better: torch.Tensor
        signed_gain: torch.Tensor
        plane_action: torch.Tensor
        move_action: torch.Tensor
        scale_action: torch.Tensor
        plane_propensity: torch.Tensor
        move_propensity: torch.Tensor
        scale_propensity: torch.Tensor
        sample_weight: torch.Tensor

        @property
        def size(self) -> int:
            return int(self.topology.shape[0])

    def decode_batch(records: Sequence[bytes]) -> TrainingBatch:
        if not records:
            raise ValueError("cannot decode an empty batch")
        count = len(records)
        blob = b"".join(records)
        record_size = len(records[0])
        if record_size != EXPECTED_RECORD_SIZE or any(len(record) != record_size for record in records):
            raise ValueError("inconsistent fixed training record size")
        # The reads below lost their dtype strings in the damaged seed; restored from the table.
        proposal = strided_array(blob, count, record_size, PROPOSAL_FEATURE_OFFSET, "<f4", FEATURE_FLOATS)
        anchor = strided_array(blob, count, record_size, ANCHOR_FEATURE_OFFSET, "<f4", FEATURE_FLOATS)
        gains = strided_array(blob, count, record_size, GAIN_OFFSET, "<f4", 3)
        outcomes = strided_array(blob, count, record_size, OUTCOME_OFFSET, "u1", 4)
        actions = strided_array(blob, count, record_size, ACTION_OFFSET, "<i4", 3)
        propensities = strided_array(blob, count, record_size, PROPENSITY_OFFSET, "<f4", 3)
        replicas = strided_array(blob, count, record_size, REPLICA_COUNT_OFFSET, "<u4")
        iterations = strided_array(blob, count, record_size, ROLLOUT_ITERATIONS_OFFSET, "<u8")
        topology = strided_array(blob, count, record_size, TOPOLOGY_OFFSET, "<i4").astype(np.int64)
        if ((topology < 0) | (topology >= TOPOLOGY_COUNT)).any():
            raise ValueError("exporter emitted an invalid topology index")
        replica_weight = 1.0 + 0.12 * np.log2(np.maximum(1.0, replicas))
        effort = 0.80 + 0.40 * np.clip(np.log1p(iterations) / math.log(1_000_001.0), 0.0, 1.0)
        sample_weight = np.clip(replica_weight * effort, 0.60, 2.0).astype(np.float32)
        proposal_face = proposal[:, : FACE_COUNT * FACE_FEATURES].reshape(count, FACE_COUNT, FACE_FEATURES)
        proposal_global = proposal[:, FACE_COUNT * FACE_FEATURES:]
        anchor_face = anchor[:, : FACE_COUNT * FACE_FEATURES].reshape(count, FACE_COUNT, FACE_FEATURES)
        anchor_global = anchor[:, FACE_COUNT * FACE_FEATURES:]
        return TrainingBatch(
            proposal_face=torch.from_numpy(proposal_face), proposal_global=torch.from_numpy(proposal_global),
            anchor_face=torch.from_numpy(anchor_face), anchor_global=torch.from_numpy(anchor_global),
            topology=torch.from_numpy(topology),
            improved=torch.from_numpy(outcomes[:, 0].astype(np.float32)),
            better=torch.from_numpy(outcomes[:, 1].astype(np.bool_)),
            signed_gain=torch.from_numpy(gains[:, 2].astype(np.float32)),
            plane_action=torch.from_numpy(actions[:, 0].astype(np.int64)),
            move_action=torch.from_numpy(actions[:, 1].astype(np.int64)),
            scale_action=torch.from_numpy(actions[:, 2].astype(np.int64)),
            plane_propensity=torch.from_numpy(propensities[:, 0]),
            move_propensity=torch.from_numpy(propensities[:, 1]),
            scale_propensity=torch.from_numpy(propensities[:, 2]),
            sample_weight=torch.from_numpy(sample_weight),
        )

    return iter_record_batches, decode_batch


def floor_path():
    """The data movement alone, as a floor for any reader that hands out tensors owning their memory.

    Per record: map its chunk (MAP_POPULATE) and, when shuffling, copy it into a
    bounded shuffle buffer and gather it into the batch (`take`); then copy its
    feature and label bytes once into fresh arrays.  No validation, no fields,
    no tensors.  Written independently of szrank.stream.batches, with the same chunking."""
    import mmap
    import numpy as np
    from szrank.stream.format import EXPECTED_RECORD_SIZE as R, EXPORT_HEADER, GAIN_OFFSET, PROPOSAL_FEATURE_OFFSET
    raw_record = np.dtype((np.void, R))
    flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)

    def iterate(snapshot, splits, batch_size, shuffle_records, seed, max_records_per_split):
        rng = np.random.default_rng(seed)
        (start, count), = snapshot.split_segments["train"]
        chunk = max(batch_size, min(4096, max(batch_size, shuffle_records)))
        firsts = list(range(start, start + count, chunk))
        if shuffle_records > 1:
            firsts = [firsts[i] for i in rng.permutation(len(firsts))]
        capacity = max(batch_size, shuffle_records)
        buffer = np.empty((capacity + chunk) * R, np.uint8)
        fill = 0
        with snapshot.path.open("rb", buffering=0) as stream:
            for first in firsts:
                n = min(chunk, start + count - first)
                offset = EXPORT_HEADER.size + first * R
                aligned = offset - offset % mmap.ALLOCATIONGRANULARITY
                mapping = mmap.mmap(stream.fileno(), offset + n * R - aligned, flags=flags, prot=mmap.PROT_READ,
                                    offset=aligned)
                block = np.frombuffer(mapping, np.uint8, n * R, offset - aligned)
                if shuffle_records <= 1:
                    for s in range(0, n, batch_size):
                        yield block[s * R:(s + batch_size) * R].reshape(-1, R)
                    continue
                buffer[fill * R:(fill + n) * R] = block
                fill += n
                if fill < capacity:
                    continue
                records = buffer[:fill * R].view(raw_record)
                order = rng.permutation(fill)
                for s in range(0, fill, batch_size):
                    yield records.take(order[s:s + batch_size]).view(np.uint8).reshape(-1, R)
                fill = 0
            if fill:
                records = buffer[:fill * R].view(raw_record)
                order = rng.permutation(fill)
                for s in range(0, fill, batch_size):
                    yield records.take(order[s:s + batch_size]).view(np.uint8).reshape(-1, R)

    class Copied:
        def __init__(self, rows):
            self.features = rows[:, PROPOSAL_FEATURE_OFFSET:GAIN_OFFSET].copy()
            self.labels = rows[:, GAIN_OFFSET:].copy()
            self.size = len(rows)

    return iterate, Copied


def szrank_path():
    from szrank.stream.batches import decode_batch, iter_record_batches
    return iter_record_batches, decode_batch


# --------------------------------------------------------------------------- one measurement (a subprocess)

def measure(which: str, path: Path, shuffle_records: int, repeat: int) -> dict:
    import psutil
    import torch
    with __import__("contextlib").suppress(AttributeError, OSError):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})
    torch.set_num_threads(1)
    from szrank.stream.snapshot import inspect_snapshot
    snapshot = inspect_snapshot(path, compute_digest=False)
    iterate, decode = {"seed": seed_path, "szrank": szrank_path, "floor": floor_path}[which]()
    rss_before = psutil.Process().memory_info().rss
    best = math.inf
    records = 0
    for attempt in range(repeat):
        started = time.perf_counter()
        records = 0
        for raw in iterate(snapshot, {"train"}, BATCH_SIZE, shuffle_records, attempt, 0):
            records += decode(raw).size
        best = min(best, time.perf_counter() - started)
    if records != snapshot.split_counts["train"]:
        raise AssertionError(f"{which}: {records} records decoded, snapshot has {snapshot.split_counts['train']}")
    return {"records": records, "seconds": best, "records_per_s": records / best,
            "rss_before_mb": rss_before / 2**20,
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def same_batches(path: Path) -> bool:
    "Both paths decode the first file-order batch to identical tensors."
    import torch
    from szrank.stream.snapshot import inspect_snapshot
    snapshot = inspect_snapshot(path, compute_digest=False)
    (seed_iterate, seed_decode), (iterate, decode) = seed_path(), szrank_path()
    ours = decode(next(iterate(snapshot, {"train"}, BATCH_SIZE, 0, 0, 0)))
    theirs = seed_decode(next(seed_iterate(snapshot, {"train"}, BATCH_SIZE, 0, 0, 0)))
    return all(torch.equal(getattr(ours, f.name), getattr(theirs, f.name)) for f in dataclasses.fields(theirs))


# --------------------------------------------------------------------------- driver

def build_stream(path: Path, records: int) -> None:
    from szrank.stream.snapshot import SPLIT_RUNS
    from szrank.stream.format import StreamWriter, example_records
    train = records - 3 * 1000
    with StreamWriter(path) as writer:
        for start in range(0, train, WRITE_CHUNK):
            writer.write(example_records(min(WRITE_CHUNK, train - start), SPLIT_RUNS["train"], seed=start,
                                         first_sequence=start))
        for index, split in enumerate(("validation", "test", "stress")):
            writer.write(example_records(1000, SPLIT_RUNS[split], seed=10**9 + index))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=200_000, help="records in the stream (at least 200000)")
    parser.add_argument("--repeat", type=int, default=3, help="epochs per measurement; the best is reported")
    parser.add_argument("--measure", nargs=3, metavar=("PATH", "WHICH", "SHUFFLE"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.measure:
        path, which, shuffle = args.measure
        print(json.dumps(measure(which, Path(path), int(shuffle), args.repeat)))
        return 0
    with tempfile.TemporaryDirectory(prefix="szrank_decode_") as directory:
        path = Path(directory) / "bench.sztx"
        started = time.perf_counter()
        build_stream(path, args.records)
        size = path.stat().st_size
        print(f"stream: {args.records:,} records, {size / 2**20:.0f} MiB, written in "
              f"{time.perf_counter() - started:.1f} s ({path})")
        with path.open("rb") as warm:                   # both paths read from the page cache
            while warm.read(1 << 24):
                pass
        print(f"identical tensors from both paths on the first batch: {same_batches(path)}")
        print(f"iterate + decode, batch {BATCH_SIZE}, train split, one core, best of {args.repeat} epochs:")
        print(f"{'mode':24s} {'path':7s} {'records/s':>12s} {'epoch s':>8s} {'RSS before MiB':>15s} "
              f"{'peak RSS MiB':>13s}")
        for mode, shuffle in ((f"shuffled ({SHUFFLE_RECORDS})", SHUFFLE_RECORDS), ("file order", 0)):
            rates = {}
            for which in ("seed", "szrank", "floor"):
                result = subprocess.run([sys.executable, __file__, "--repeat", str(args.repeat), "--measure",
                                         str(path), which, str(shuffle)], capture_output=True, text=True,
                                        env=dict(os.environ, **ONE_CORE_ENV))
                if result.returncode:
                    print(result.stderr, file=sys.stderr)
                    return result.returncode
                figures = json.loads(result.stdout.strip().splitlines()[-1])
                rates[which] = figures["records_per_s"]
                print(f"{mode:24s} {which:7s} {figures['records_per_s']:12,.0f} {figures['seconds']:8.2f} "
                      f"{figures['rss_before_mb']:15.0f} {figures['peak_rss_mb']:13.0f}")
            print(f"{mode:24s} speed-up {rates['szrank'] / rates['seed']:.1f}x; 10x the seed would be "
                  f"{10 * rates['seed']:,.0f} records/s ({1e9 / (10 * rates['seed']):.0f} ns/record), the floor "
                  f"is {rates['floor']:,.0f} ({1e9 / rates['floor']:.0f} ns/record)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
