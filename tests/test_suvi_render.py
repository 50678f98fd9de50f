"""`suvi-fill render` on the tiny corpus: one PNG and sidecar per slot (none skipped), filled
frames marked and recorded with their filler and anchors, frames nothing can fill rendered
as missing, RGB composites, the MP4, and bad input."""
import json

import numpy as np
import pytest

from helpers import run, tool
from test_suvi_fillers import ENV, fill_corpus  # noqa: F401 (fixture)


def render_cli(corpus, out, *extra):
    return run([tool("suvi-fill"), "render", "--shards", str(corpus), "--out", str(out), "--device", "cpu",
                "--quiet", *extra], env=ENV, timeout=600)


def _shard(corpus, satellite):
    from suvi_fill.corpus import shards as dataset
    return dataset.Shard(sorted(corpus.glob(f"*_g{satellite}.shard"))[0])


def _range(corpus, satellite, band_index, span):
    "Slots [a, b) around a slot of `satellite` lacking the band, and whether any slot in it is unfillable."
    from suvi_fill.physics import timebase
    shards = [_shard(corpus, s) for s in (16, 18)]
    own = shards[(16, 18).index(satellite)]
    lacking = np.flatnonzero(~own.present[:, band_index])
    assert len(lacking), "the corpus lost no frame of the band"
    slot = int(own.slots[lacking[len(lacking) // 2]])
    return slot - 3, slot + 3


def _iso(slot):
    from suvi_fill.physics import timebase
    return timebase.time_of(slot).strftime("%Y-%m-%dT%H:%MZ")


def test_band_render_with_movie(fill_corpus, tmp_path):
    import imageio.v2 as imageio
    from suvi_fill.physics import timebase
    start, end = _range(fill_corpus, 16, timebase.BAND_INDEX[171], 64)
    out = tmp_path / "frames"
    result = render_cli(fill_corpus, out, "--satellite", "16", "--start", _iso(start), "--end", _iso(end),
                        "--band", "171", "--fill", "linear", "--movie", str(tmp_path / "movie.mp4"))
    assert result.returncode == 0, result.stdout + result.stderr
    index = json.loads((out / "render.json").read_text())
    assert [f["slot"] for f in index["frames"]] == list(range(start, end))
    assert sum(index["counts"].values()) == end - start and index["counts"]["filled"] >= 1
    for entry in index["frames"]:
        png = out / entry["file"]
        assert png.read_bytes()[:4] == b"\x89PNG"
        side = json.loads(png.with_suffix(".json").read_text())
        assert side["status"] == entry["status"] and side["filler"] == "linear"
        if entry["status"] == "filled":
            assert side["filled"] == {"171": "linear"} and side["anchors"]["171"]
            image = imageio.imread(png)
            assert (image[0, :, :3] == (255, 210, 0)).all()           # the filled marker's border
        if entry["status"] == "stored":
            assert side["filled"] == {} and side["stored"] == [171]
    reader = imageio.get_reader(tmp_path / "movie.mp4")
    assert reader.count_frames() == end - start
    assert "filled by linear" in result.stdout


def test_unfillable_frames_are_rendered_missing(fill_corpus, tmp_path):
    import imageio.v2 as imageio
    from suvi_fill.physics import timebase
    # A whole day with no shard: the range lies before the corpus, nothing holds any band.
    shard = _shard(fill_corpus, 16)
    first = int(shard.slots[0]) - 10
    out = tmp_path / "frames"
    result = render_cli(fill_corpus, out, "--satellite", "16", "--start", _iso(first), "--end", _iso(first + 4),
                        "--rgb", "304,171,195", "--fill", "optical_flow", "--span", "2")
    assert result.returncode == 0, result.stdout + result.stderr
    index = json.loads((out / "render.json").read_text())
    assert index["counts"] == {"stored": 0, "filled": 0, "missing": 4}
    for entry in index["frames"]:
        assert entry["missing"] == [304, 171, 195]
        image = imageio.imread(out / entry["file"])
        centre = image[image.shape[0] // 2 - 2: image.shape[0] // 2 + 3, image.shape[1] // 2 - 2: image.shape[1] // 2 + 3]
        assert (centre[..., 0] > 150).any()                      # the red cross


def test_rgb_composite_stored_frames(fill_corpus, tmp_path):
    import imageio.v2 as imageio
    shard = _shard(fill_corpus, 18)
    complete = np.flatnonzero(shard.present.all(axis=1))
    slot = int(shard.slots[complete[len(complete) // 2]])
    out = tmp_path / "frames"
    result = render_cli(fill_corpus, out, "--satellite", "18", "--start", _iso(slot), "--end", _iso(slot + 1),
                        "--rgb", "304,171,195", "--fill", "nearest", "--size", "100")
    assert result.returncode == 0, result.stdout + result.stderr
    index = json.loads((out / "render.json").read_text())
    assert index["counts"]["stored"] == 1 and index["size"] == 112
    image = imageio.imread(out / index["frames"][0]["file"])
    assert image.shape[:2] == (112, 112)
    disk = image[40:72, 40:72].reshape(-1, image.shape[-1])[:, :3].astype(int)
    assert (disk[:, 0] != disk[:, 1]).any()                      # three different bands, not grey


@pytest.mark.parametrize("extra, message", [
    (["--band", "999"], "SUVI bands"),
    (["--band", "171", "--rgb", "304,171,195"], "exactly one"),
    (["--rgb", "304,171"], "three"),
    (["--band", "171", "--fill", "learned"], "--checkpoint"),
])
def test_bad_input_fails_cleanly(fill_corpus, tmp_path, extra, message):
    base = ["--satellite", "16", "--start", "2024-06-20T00:00Z", "--end", "2024-06-20T00:20Z"]
    if "--fill" not in extra:
        extra = [*extra, "--fill", "nearest"]
    result = render_cli(fill_corpus, tmp_path / "frames", *base, *extra)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert not (tmp_path / "frames").exists()


def test_end_before_start(fill_corpus, tmp_path):
    result = render_cli(fill_corpus, tmp_path / "frames", "--satellite", "16", "--start", "2024-06-20T01:00Z",
                        "--end", "2024-06-20T00:00Z", "--band", "171", "--fill", "nearest")
    assert result.returncode == 2 and "not after" in result.stderr
