"""load_learned on the checkpoints the real trainer writes: the session's tiny synthetic corpus
(`suvi-fill synth | build | profile`, shared with the filler and trainer tests), `suvi-fill train`
on it, then load, predict, and refuse a layout change."""
import numpy as np
import pytest
import torch

from helpers import run, tool
from test_suvi_fillers import tiny_corpus
from suvi_fill.physics import align
from suvi_fill.corpus import availability
from suvi_fill.corpus import conditioning
from suvi_fill.model import net as model
from suvi_fill.model.checkpoint import load_learned
from suvi_fill.corpus import sampler as samples
from suvi_fill.corpus import segments
from suvi_fill.corpus.reader import Corpus


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    "The session's tiny corpus (built by synth, build and profile) as `shards`, and a run of the trainer on it in `run`."
    base = tmp_path_factory.mktemp("trained")
    (base / "shards").symlink_to(tiny_corpus(tmp_path_factory))
    arguments = ["train", "--shards", str(base / "shards"), "--manifest", str(base / "shards" / "manifest.json"),
                 "--out", str(base / "run"), "--max-steps", "2", "--batch", "2", "--workers", "0", "--base", "8",
                 "--depth", "2", "--relative", "--attention", "--val-samples", "2", "--eval-every", "1",
                 "--epochs", "1", "--warmup", "1", "--device", "cpu"]
    result = run([tool("suvi-fill"), *arguments], timeout=300)
    assert result.returncode == 0, f"suvi-fill train failed:\n{result.stdout[-2000:]}\n{result.stderr[-2000:]}"
    return base


def test_load_learned_reads_the_trainer_checkpoints(trained):
    net = load_learned(trained / "run" / "last.pt")
    assert net.config == dict(base=8, depth=2, relative=True, corr_flow=False, attention=True, conditioned=True, signed=True,
                              kept=True, residual_scale=model.RESIDUAL_SCALE)
    assert net.offsets == samples.OFFSETS and not net.training
    state = torch.load(trained / "run" / "last.pt", weights_only=True)
    assert all(torch.equal(net.state_dict()[k], v) for k, v in state["model"].items())
    # It predicts on a real sample, through alignment.
    shards = segments.corpus_shards(trained / "shards")
    try:
        trace = availability.Availability.load(trained / "shards" / "availability.npz")
        sampler = samples.Sampler(shards, (16, 18), trace, seed=0, offsets=net.offsets,
                                  calibration=Corpus.open(trained / "shards").calibration)
        targets = sampler.targets()
        items = [conditioning.to_tensors(sample) for sample in
                 (sampler.build(*targets[k], np.random.default_rng(k)) for k in range(0, len(targets), 97))
                 if sample is not None][:3]
    finally:
        for shard in shards.values():
            shard.close()
    batch = conditioning.collate(items)
    aligned = align.align_stack(batch["stack"], batch["dts"], batch["condition"][..., model.AVAILABLE],
                                batch["gains"], batch["offsets"], batch["b0"], batch["radius"])
    with torch.no_grad():
        prediction = net(aligned, batch["condition"], batch["present"])
    assert prediction.shape == batch["target"].shape and torch.isfinite(prediction).all()


def test_load_learned_refuses_a_trainer_checkpoint_of_another_layout(trained, tmp_path):
    state = torch.load(trained / "run" / "best.pt", weights_only=True)
    state["args"]["cond_layout"] = list(model.COND_LAYOUT[:-1])        # trained before log_abs_dt existed
    torch.save(state, tmp_path / "older.pt")
    with pytest.raises(ValueError, match="older.pt: trained under conditioning layout"):
        load_learned(tmp_path / "older.pt")


def test_load_learned_reads_a_checkpoint_written_the_old_way(trained, tmp_path):
    "A file as the seed's trainer wrote it: no 'net' or 'version', the architecture only in the flags."
    state = torch.load(trained / "run" / "last.pt", weights_only=True)
    del state["net"], state["version"]
    # The weights of a net of then: its heads read no kept residuals (the trainer's now do, so its own weights
    # would not be a file the seed's trainer could have written).
    then = dict(base=8, depth=2, relative=True, corr_flow=False, attention=True, conditioned=True, signed=True)
    state["model"] = model.build(**then).state_dict()
    torch.save(state, tmp_path / "seed_way.pt")
    net = load_learned(tmp_path / "seed_way.pt")
    assert net.config == then | dict(kept=False, residual_scale=1.0)
    assert net.offsets == samples.OFFSETS


def test_load_learned_reads_a_checkpoint_from_before_the_kept_residuals(trained, tmp_path):
    "A current-version file whose net config predates `kept` and `residual_scale` loads as the net it was."
    state = torch.load(trained / "run" / "last.pt", weights_only=True)
    then = dict(base=8, depth=2, relative=True, corr_flow=False, attention=True, conditioned=True, signed=True)
    torch.manual_seed(0)
    old = model.build(**then)
    torch.nn.init.normal_(old.residual_head[-1].weight, std=0.01)      # a trained head: its scale matters
    state["net"], state["model"] = dict(then), old.state_dict()
    torch.save(state, tmp_path / "before_kept.pt")
    net = load_learned(tmp_path / "before_kept.pt")
    assert net.config == then | dict(kept=False, residual_scale=1.0)
    x = (torch.rand(1, 3, model.BANDS, 8, 8), torch.stack([model.frame_conditioning("target", True, 0.0),
         model.frame_conditioning("anchor", True, 240.0), model.frame_conditioning("anchor", True, -240.0)])[None],
         torch.ones(1, 3, model.BANDS))
    x[2][0, 0, :2] = 0
    with torch.no_grad():
        assert torch.equal(net(*x), old.eval()(*x))
