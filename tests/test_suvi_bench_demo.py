"""The demo's train, bench and render stages on the tiny corpus: a finished training run is
reused, the bench is reused only for the same corpus and the same checkpoint bytes, and the
rendered frames are redone cleanly.  (The whole `suvi-fill demo` runs in test_suvi_ingest.)"""
import json
import shutil

from test_suvi_fillers import fill_corpus, tiny_checkpoint  # noqa: F401 (fixtures)


def test_stages_reuse_and_redo(fill_corpus, tiny_checkpoint, tmp_path, capsys):
    import torch
    torch.set_num_threads(1)
    from suvi_fill import demo
    from suvi_fill.corpus import segments
    from suvi_fill.train.loop import net_config
    from suvi_fill.train.config import TrainConfig
    out = tmp_path / "demo"
    # A finished run on this corpus with the demo's settings is reused, not retrained.
    run_dir = out / "run"
    run_dir.mkdir(parents=True)
    shutil.copy(tiny_checkpoint, run_dir / "best.pt")
    digest = segments.load_manifest(fill_corpus / "manifest.json")["digest"]
    settings = demo.DEMO_TRAIN | {"device": "cpu"}
    net = net_config(TrainConfig(shards="s", manifest="m", out="o", **settings))
    (run_dir / "demo_train.json").write_text(json.dumps(
        {"manifest": digest, "settings": settings, "net": net, "status": 0}))
    checkpoint = demo.train_stage(out, fill_corpus)
    assert checkpoint == run_dir / "best.pt" and "reusing the finished run" in capsys.readouterr().out

    first = demo.bench_stage(out, fill_corpus, checkpoint, progress=False)
    assert first["fillers"] == ["nearest", "derotated", "linear", "optical_flow", "blend", "crossband", "learned"]
    assert first["gaps"] == list(demo.DEMO_GAPS) and first["samples"]["1"] == demo.DEMO_SAMPLES
    assert first["goal"]["margins"]["1"] is not None
    capsys.readouterr()
    again = demo.bench_stage(out, fill_corpus, checkpoint, progress=False)
    assert "reusing" in capsys.readouterr().out and again == first
    # Other checkpoint bytes: the bench is redone.
    state = torch.load(checkpoint, map_location="cpu", weights_only=True)
    state["step"] = 12345
    torch.save(state, checkpoint)
    demo.bench_stage(out, fill_corpus, checkpoint, progress=False)
    assert "reusing" not in capsys.readouterr().out

    index = demo.render_stage(out, fill_corpus, checkpoint, progress=False)
    assert len(index["frames"]) == demo.DEMO_FRAMES and index["counts"]["filled"] >= 1
    (out / "render" / "stale.png").write_bytes(b"old")
    demo.render_stage(out, fill_corpus, checkpoint, progress=False)
    assert not (out / "render" / "stale.png").exists()
    assert (out / "render" / "movie.mp4").stat().st_size > 0
