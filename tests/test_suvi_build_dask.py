"""suvi-fill build --scheduler local:2: the shards built by two Dask worker processes are the serial build's,
byte for byte (same manifest digest, same report but for its timing), through the command line."""
import json

import pytest

from helpers import run, tool
from suvi_fill.archive import ingest
from suvi_fill.physics import timebase
from suvi_fill.sim.synth import synthesize
from suvi_fill.plumbing.errors import OptionError

pytest.importorskip("distributed", reason="dask.distributed is in the suvi_fill extra")


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    "A synthetic 16 px archive of two hours on 2024-03-18 and one on 2024-03-20 (2024-03-19: empty shards)."
    work = tmp_path_factory.mktemp("dask")
    synthesize(work / "archive", hours=2, resolution=16, progress=False)
    late = work / "late"                                      # and a few frames of the next days
    synthesize(late, hours=1, resolution=16, progress=False, start="2024-03-20", seed=1)
    for path in late.rglob("*.fits"):
        target = work / "archive" / "late" / path.name
        target.parent.mkdir(parents=True, exist_ok=True)
        path.rename(target)
    return work


def test_a_two_worker_build_is_the_serial_build(archive):
    serial = run([tool("suvi-fill"), "build", "--source", str(archive / "archive"), "--out", str(archive / "serial"),
                  "--span-min", "2", "--no-progress"])
    assert serial.returncode == 0, serial.stderr
    dask = run([tool("suvi-fill"), "build", "--source", str(archive / "archive"), "--out", str(archive / "dask"),
                "--span-min", "2", "--no-progress", "--scheduler", "local:2"])
    assert dask.returncode == 0, dask.stderr
    assert "local:2" in dask.stdout and "serial" in serial.stdout
    names = sorted(p.name for p in (archive / "serial").iterdir())
    assert names == sorted(p.name for p in (archive / "dask").iterdir())
    assert len([n for n in names if n.endswith(".shard")]) == 3 * 2           # 2024-03-18, -19 (empty), -20
    for name in names:
        if name != ingest.REPORT:
            assert (archive / "serial" / name).read_bytes() == (archive / "dask" / name).read_bytes(), name
    reports = [json.loads((archive / d / ingest.REPORT).read_text()) for d in ("serial", "dask")]
    for report in reports:
        for key in ("seconds", "files_per_second", "scheduler"):
            report.pop(key)
    assert reports[0] == reports[1] and reports[0]["reasons"]["clean"] > 0
    assert not (archive / "dask" / ingest.STAGING).exists() and not (archive / "dask" / ingest.READY).exists()


def test_a_bad_scheduler_is_refused_before_any_work(archive, tmp_path):
    for scheduler, message in (("local:0", "local:N needs N"), ("tcp://127.0.0.1:9", "no Dask scheduler answers")):
        result = run([tool("suvi-fill"), "build", "--source", str(archive / "archive"), "--out", str(tmp_path / "c"),
                      "--no-progress", "--scheduler", scheduler], timeout=120)
        assert result.returncode == 2 and message in result.stderr, result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    with pytest.raises(OptionError, match="local:N needs N"):
        ingest.parse_scheduler("local:-1")
