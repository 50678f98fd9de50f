"""Training throughput of the szrank ensemble: records/s at batch 1024 and peak memory.

One epoch of `train_ensemble` (3 members, decode + forward + backward + AdamW, the
trainer's real path over an SZTXP001 snapshot) on the CPU with one torch thread and
with torch's default thread count, and on CUDA (bf16 autocast, then float32) when
present, side by side.  The issue names no earlier figure: the seed could not run
on the CPU at all, so its CUDA path is the reference where a GPU exists.

    .venv/bin/python benchmarks/szrank_train.py [--records 4096] [--batch-size 1024]
"""
import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

import torch

from szrank.stream.synthetic import synthesize_corpus
from szrank.ranker.model import initialize_member
from szrank.stream.snapshot import SPLIT_RUNS, inspect_snapshot
from szrank.stream.format import write_stream
from szrank.train.loop import train_ensemble
from szrank.train.config import TrainConfig


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def measure(snapshot, device, amp: bool, batch_size: int, records: int) -> tuple[float, float]:
    "records/s of one epoch over `records` train records (after one warm-up batch), and peak device MiB."
    members = [initialize_member(index, device) for index in range(3)]
    settings = dict(batch_size=batch_size, shuffle_records=4096, learning_rate=3e-4, weight_decay=1e-4,
                    gain_clip=0.0, ips_clip=4.0, gradient_clip=1.0, progress=False)
    common = dict(snapshot=snapshot, members=members, splits={"train"}, epochs=1, seed=1, amp_enabled=amp,
                  device=device)
    train_ensemble(config=TrainConfig(max_records_per_split=batch_size, **settings), **common)  # warm-up
    if device.type == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    train_ensemble(config=TrainConfig(max_records_per_split=records, **settings), **common)
    if device.type == "cuda":
        torch.cuda.synchronize()
    elapsed = time.perf_counter() - start
    peak = torch.cuda.max_memory_allocated() / 2**20 if device.type == "cuda" else peak_rss_mib()
    return records / elapsed, peak


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=4096, help="train records per measured epoch")
    parser.add_argument("--batch-size", type=int, default=1024)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        path = Path(directory) / "bench.sztx"
        sizes = {"train": args.records, "validation": 64, "test": 64, "stress": 64}
        write_stream(path, synthesize_corpus(SPLIT_RUNS, records=sizes))
        snapshot = inspect_snapshot(path)
        default_threads = torch.get_num_threads()
        rows = []
        for threads in sorted({1, default_threads}):
            torch.set_num_threads(threads)
            rate, peak = measure(snapshot, torch.device("cpu"), False, args.batch_size, args.records)
            rows.append((f"CPU float32, {threads} thread(s)", rate, f"peak RSS {peak:,.0f} MiB"))
        torch.set_num_threads(default_threads)
        if torch.cuda.is_available():
            device = torch.device("cuda")
            for amp, label in ((True, "bf16 autocast"), (False, "float32")):
                rate, peak = measure(snapshot, device, amp, args.batch_size, max(args.records, 16384))
                rows.append((f"CUDA {label} ({torch.cuda.get_device_name()})", rate, f"peak allocated {peak:,.0f} MiB"))
        else:
            rows.append(("CUDA", float("nan"), "no CUDA device here"))
    print(f"szrank ensemble training, batch {args.batch_size}, 3 members, torch {torch.__version__}")
    print(f"{'path':48s} {'records/s':>12s}  memory")
    for label, rate, memory in rows:
        print(f"{label:48s} {rate:12,.0f}  {memory}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
