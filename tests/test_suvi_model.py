"""suvi_fill.model.net: the untrained net is the prior blend, padding/order/depth invariance,
the variants learn, channels_last and bf16 autocast, checkpoints and their refusal."""
import math

import numpy as np
import pytest
import torch

from suvi_fill.model import net as model
from suvi_fill.model.checkpoint import load_learned
from suvi_fill.physics.timebase import SLOT_SECONDS

pytestmark = pytest.mark.usefixtures("one_thread")


VARIANTS = [dict(), dict(relative=True), dict(corr_flow=True), dict(attention=True), dict(conditioned=True),
            dict(signed=True), dict(kept=True, residual_scale=model.RESIDUAL_SCALE),
            dict(relative=True, corr_flow=True, attention=True, conditioned=True, signed=True, kept=True,
                 residual_scale=model.RESIDUAL_SCALE)]
IDS = ["plain", "relative", "corr_flow", "attention", "conditioned", "signed", "kept", "all"]


def make_item(rng, depth, size=(20, 18), target_lost=(0, 3)):
    """One sample's tensors: a target frame (some bands lost) and `depth - 1` anchors of
    both satellites at assorted gaps, each holding a random subset of bands."""
    kinds, same, dts = ["target"], [True], [0.0]
    for _ in range(depth - 1):
        kinds.append("anchor")
        same.append(bool(rng.integers(2)))
        dts.append(float(rng.choice([-1, 1]) * rng.choice([1, 2, 4, 8, 16, 64]) * SLOT_SECONDS))
    present = rng.random((depth, model.BANDS)) < 0.7
    present[0] = True
    present[0, list(target_lost)] = False
    present[1:, 0] = True                       # band 0 is always recoverable
    stack = rng.random((depth, model.BANDS, *size), dtype=np.float32) * 0.8
    stack[~present] = 0.0
    return {"stack": torch.from_numpy(stack),
            "condition": torch.stack([model.frame_conditioning(k, s, d) for k, s, d in zip(kinds, same, dts)]),
            "dts": torch.tensor(dts, dtype=torch.float32),
            "present": torch.from_numpy(present.astype(np.float32)),
            "same": same}


def reference_blend(stack, present, dts, same):
    """The prior blend written out independently, in float64 numpy: per band, each side of
    the target (dt >= 0: at or before it) blends its frames by exp(-|dt| / tau) (times the
    cross-satellite weight); the sides share as linear interpolation between their nearest
    frames, at distances of at least SIDE_MIN_SLOTS slots, another satellite's frame
    CROSS_SATELLITE_SLOTS further."""
    stack = stack.double().numpy()
    slot = model.SLOT_SECONDS
    out = np.zeros(stack.shape[1:])
    for b in range(model.BANDS):
        sides = []
        for before in (True, False):
            frames = [t for t, dt in enumerate(dts) if present[t, b] and (dt >= 0) == before]
            if not frames:
                sides.append(None)
                continue
            weights = np.array([math.exp(-abs(dts[t]) / model.PRIOR_TAU_SECONDS)
                                * (1.0 if same[t] else model.CROSS_SATELLITE_PRIOR) for t in frames])
            blend = np.tensordot(weights / weights.sum(), stack[frames, b], axes=1)
            near = min(max(abs(dts[t]) / slot, model.SIDE_MIN_SLOTS)
                       + (0.0 if same[t] else model.CROSS_SATELLITE_SLOTS) for t in frames)
            sides.append((blend, near))
        if sides[0] and sides[1]:
            (first, a), (second, c) = sides
            out[b] = (c * first + a * second) / (a + c)
        elif sides[0] or sides[1]:
            out[b] = (sides[0] or sides[1])[0]
    return torch.from_numpy(out)


def randomise(net, seed=0, scale=0.05):
    "Give every parameter (the zero-initialised last layers included) random values."
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in net.parameters():
            p.add_(torch.randn(p.shape, generator=generator) * scale)
    return net


def batched(items):
    return (torch.stack([i["stack"] for i in items]), torch.stack([i["condition"] for i in items]),
            torch.stack([i["present"] for i in items]))


@pytest.mark.parametrize("flags", VARIANTS, ids=IDS)
def test_untrained_net_is_exactly_the_prior_blend(flags):
    rng = np.random.default_rng(1)
    items = [make_item(rng, 5), make_item(rng, 5, target_lost=(0, 1, 2, 3, 4, 5))]
    items[1]["present"][:, 5] = 0            # band 5 held by no frame: the blend says 0
    items[1]["stack"][:, 5] = 0
    torch.manual_seed(3)
    net = model.build(base=8, depth=3, **flags)
    with torch.no_grad():
        prediction = net(*batched(items))
    for k, item in enumerate(items):
        expected = reference_blend(item["stack"], item["present"].bool().numpy(), item["dts"].tolist(),
                                   item["same"])
        torch.testing.assert_close(prediction[k].double(), expected, atol=2e-6, rtol=0)
    assert torch.all(prediction[1, 5] == 0)
    torch.testing.assert_close(prediction, model.prior_blend(*batched(items)), atol=0, rtol=0)


def test_frame_conditioning_rows():
    pad = model.frame_conditioning("missing", True, 0.0)
    assert pad.dtype == torch.float32 and pad.shape == (len(model.COND_LAYOUT),)
    assert pad[model.AVAILABLE] == 0
    for kind in ("target", "anchor"):
        assert model.frame_conditioning(kind, False, 60.0)[model.AVAILABLE] == 1
    row = model.frame_conditioning("anchor", False, -2 * SLOT_SECONDS)
    values = dict(zip(model.COND_LAYOUT, row.tolist()))
    assert values["kind_anchor"] == 1 and values["kind_target"] == 0 and values["same_satellite"] == 0
    assert values["dt"] == pytest.approx(-2 / 256) and values["abs_dt"] == pytest.approx(2 / 256)
    assert 0 < values["log_abs_dt"] < 1
    with pytest.raises(ValueError, match="frame kind"):
        model.frame_conditioning("pad", True, 0.0)
    with pytest.raises(ValueError, match="finite"):
        model.frame_conditioning("anchor", True, float("nan"))


def pad_to(item, depth):
    "The trainer's collate padding, spelled out: missing rows, no band, identity transfer."
    short = depth - item["stack"].shape[0]
    out = dict(item)
    out["stack"] = torch.cat([item["stack"], torch.zeros(short, *item["stack"].shape[1:])])
    out["condition"] = torch.cat([item["condition"],
                                  model.frame_conditioning("missing", True, 0.0).repeat(short, 1)])
    out["present"] = torch.cat([item["present"], torch.zeros(short, model.BANDS)])
    return out


@pytest.mark.parametrize("flags", VARIANTS, ids=IDS)
def test_padding_changes_no_prediction(flags):
    rng = np.random.default_rng(2)
    short, long = make_item(rng, 3), make_item(rng, 7)
    net = randomise(model.build(base=8, depth=2, **flags), seed=4).eval()
    with torch.no_grad():
        alone = net(*batched([short]))
        together = net(*batched([pad_to(short, 7), long]))
        # Padding rows whose (ignored) pixels hold garbage change nothing either.
        noisy = pad_to(short, 7)
        noisy["stack"][3:] = torch.rand_like(noisy["stack"][3:]) * 5
        garbage = net(*batched([noisy]))
    torch.testing.assert_close(together[0], alone[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(garbage[0], alone[0], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("flags", VARIANTS, ids=IDS)
def test_invariant_to_the_order_of_frames(flags):
    rng = np.random.default_rng(3)
    item = make_item(rng, 6)
    net = randomise(model.build(base=8, depth=2, **flags), seed=5).eval()
    permutation = torch.tensor([3, 0, 5, 1, 4, 2])          # the target moves too
    shuffled = {k: v[permutation] if torch.is_tensor(v) and v.shape[:1] == (6,) else v
                for k, v in item.items()}
    with torch.no_grad():
        torch.testing.assert_close(net(*batched([shuffled])), net(*batched([item])), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("depth", [1, 2, 17])
def test_any_depth(depth):
    rng = np.random.default_rng(depth)
    item = make_item(rng, depth, size=(15, 17), target_lost=(2,))
    net = randomise(model.build(base=8, depth=3, corr_flow=True, attention=True), seed=depth)
    prediction = net(*batched([item]))
    assert prediction.shape == (1, model.BANDS, 15, 17) and prediction.dtype == torch.float32
    assert torch.isfinite(prediction).all()
    prediction.square().mean().backward()
    assert all(torch.isfinite(p.grad).all() for p in net.parameters() if p.grad is not None)


def test_missing_frames_get_zero_weight():
    "Changing the pixels of an unavailable frame, or of a band a frame does not hold, changes nothing."
    rng = np.random.default_rng(4)
    item = make_item(rng, 5)
    item["condition"][2] = model.frame_conditioning("missing", True, 0.0)
    net = randomise(model.build(base=8, depth=2, relative=True, corr_flow=True), seed=6).eval()
    with torch.no_grad():
        before = net(*batched([item]))
        item["stack"][2] = 7.0                                   # unavailable frame
        item["stack"][0, 0] = -3.0                               # a band the target lost
        after = net(*batched([item]))
    torch.testing.assert_close(after, before, atol=1e-6, rtol=0)


@pytest.mark.parametrize("flags", VARIANTS, ids=IDS)
def test_variants_train(flags):
    "Forward/backward through every learned part, and a few Adam steps beat the untrained blend."
    rng = np.random.default_rng(5)
    item = make_item(rng, 4, size=(16, 16))
    # A learnable answer: an affine function of one anchor's band.
    truth = (0.6 * item["stack"][1, 0] + 0.1)[None, None].expand(1, model.BANDS, 16, 16)
    torch.manual_seed(0)
    net = model.build(base=8, depth=2, **flags)
    inputs = batched([item])
    loss = (net(*inputs) - truth).abs().mean()
    loss.backward()
    zero_heads = [net.weight_head[-1].weight, net.residual_head[-1].weight]
    if flags.get("corr_flow"):
        zero_heads.append(net.flow_head[-1].weight)
    for weight in zero_heads:
        assert weight.grad is not None and weight.grad.abs().sum() > 0, "a zero-initialised head gets no gradient"
    optimiser = torch.optim.Adam(net.parameters(), lr=1e-2)
    first = float(loss.detach())
    for _ in range(30):
        optimiser.zero_grad()
        loss = (net(*inputs) - truth).abs().mean()
        loss.backward()
        optimiser.step()
    assert float(loss.detach()) < 0.92 * first


def test_relative_median_and_cost_volume_and_warp():
    values = torch.rand(2, 5, model.BANDS, 3, 4)
    mask = torch.rand(2, 5, model.BANDS) < 0.6
    median = model.masked_median(values, mask)
    for b in range(2):
        for band in range(model.BANDS):
            chosen = values[b, mask[b, :, band], band]
            if len(chosen):
                expected = chosen.sort(dim=0).values[(len(chosen) - 1) // 2]
                torch.testing.assert_close(median[b, band], expected)
            else:
                assert torch.all(median[b, band] == 0)
    features = torch.rand(1, 4, 12, 12)
    shifted = torch.roll(features, shifts=(2, -1), dims=(-2, -1))      # content moves down 2, left 1
    costs = model.cost_volume(features, shifted)[0, :, 5, 5]
    width = 2 * model.FLOW_RADIUS + 1
    assert divmod(int(costs.argmax()), width) == (model.FLOW_RADIUS + 2, model.FLOW_RADIUS - 1)
    image = torch.rand(1, 2, 8, 9)
    flow = torch.zeros(1, 2, 8, 9)
    flow[:, 0] = 1.5                                                    # half-way between columns
    torch.testing.assert_close(model.warp(image, flow)[..., :-2],
                               (image[..., 1:-1] + image[..., 2:]) / 2)


def test_attention_mixes_frames_but_ignores_masked_ones():
    torch.manual_seed(12)
    layer = model.FrameAttention(8)
    features = torch.rand(1, 3, 8, 2, 2)
    valid = torch.tensor([[True, True, False]])
    out = layer(features, valid)
    changed = features.clone()
    changed[0, 1] += torch.rand(8, 2, 2)         # not a constant: LayerNorm would remove that
    assert not torch.allclose(layer(changed, valid)[0, 0], out[0, 0])     # frame 1 reaches frame 0
    masked = features.clone()
    masked[0, 2] += torch.rand(8, 2, 2)
    torch.testing.assert_close(layer(masked, valid)[0, :2], out[0, :2])  # frame 2 does not


def test_channels_last_and_bf16_autocast():
    rng = np.random.default_rng(6)
    inputs = batched([make_item(rng, 4), make_item(rng, 4)])
    net = randomise(model.build(base=8, depth=3, relative=True, corr_flow=True, attention=True)).eval()
    with torch.no_grad():
        plain = net(*inputs)
        fast = net.to(memory_format=torch.channels_last)(*inputs)
        torch.testing.assert_close(fast, plain, atol=1e-5, rtol=1e-5)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = net(*inputs)
    assert low.dtype == torch.float32 and torch.isfinite(low).all()
    assert (low - plain).abs().max() < 0.05
    fresh = model.build(base=8, depth=2, corr_flow=True)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        torch.testing.assert_close(fresh(*inputs), model.prior_blend(*inputs), atol=1e-6, rtol=0)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_bf16_matches_fp32():
    rng = np.random.default_rng(7)
    inputs = [t.cuda() for t in batched([make_item(rng, 6, size=(64, 64)), make_item(rng, 3, size=(64, 64))])]
    for flags in VARIANTS:
        net = model.build(base=16, depth=3, **flags).cuda().to(memory_format=torch.channels_last)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            untrained = net(*inputs)
        torch.testing.assert_close(untrained, model.prior_blend(*inputs), atol=1e-5, rtol=0)
        randomise(net.cpu()).cuda()
        with torch.no_grad():
            full = net(*inputs)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                low = net(*inputs)
        assert low.dtype == torch.float32 and torch.isfinite(low).all()
        assert (low - full).abs().max() < 0.05, flags
        with torch.autocast("cuda", dtype=torch.bfloat16):
            net(*inputs).square().mean().backward()
        assert all(torch.isfinite(p.grad).all() for p in net.parameters() if p.grad is not None)


def seed_checkpoint(path, net, layout=model.COND_LAYOUT, **flags):
    "A checkpoint as the trainer's `checkpoint()` writes it."
    optimiser = torch.optim.AdamW(net.parameters(), lr=1e-4)
    args = {"shards": "/data/shards", "manifest": "/data/shards/manifest.json", "out": str(path.parent),
            "epochs": 20, "batch": 8, "lr": 1e-4, "base": net.config["base"], "depth": net.config["depth"],
            "relative": net.config["relative"], "corr_flow": net.config["corr_flow"],
            "attention": net.config["attention"], "span": None, "seed": 0, "resume": None}
    state = {"model": net.state_dict(), "optimiser": optimiser.state_dict(), "epoch": 3, "step": 1000,
             "lr_scale": 0.5, "args": args | {"cond_layout": list(layout), "offsets": [1, 2, 4, 8, 16]},
             "manifest": "0123abcd"}
    state["args"].update(flags)
    torch.save(state, path)
    return path


def test_load_learned_round_trip(tmp_path):
    rng = np.random.default_rng(8)
    inputs = batched([make_item(rng, 4)])
    net = randomise(model.build(base=8, depth=2, attention=True, relative=True), seed=9).eval()
    loaded = load_learned(seed_checkpoint(tmp_path / "best.pt", net))
    assert not loaded.training and loaded.offsets == (1, 2, 4, 8, 16)
    assert loaded.config == net.config
    with torch.no_grad():
        torch.testing.assert_close(loaded(*inputs), net(*inputs), atol=0, rtol=0)


def test_load_learned_refuses_another_layout(tmp_path):
    net = model.build(base=8, depth=2)
    old = ["kind_target", "kind_anchor", "kind_missing", "available", "dt"]
    path = seed_checkpoint(tmp_path / "old.pt", net, layout=old)
    with pytest.raises(ValueError, match="conditioning layout") as caught:
        load_learned(path)
    assert "old.pt" in str(caught.value) and "retrain" in str(caught.value)
    state = torch.load(path, weights_only=True)
    del state["args"]["cond_layout"]
    torch.save(state, tmp_path / "older.pt")
    with pytest.raises(ValueError, match="no 'cond_layout'"):
        load_learned(tmp_path / "older.pt")
    (tmp_path / "junk.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="junk.pt: not a readable filler checkpoint"):
        load_learned(tmp_path / "junk.pt")
    other = seed_checkpoint(tmp_path / "wide.pt", model.build(base=16, depth=2), base=8)
    # refused by checkpoint.check_net before a net is built, naming the field
    with pytest.raises(ValueError, match=r"wide.pt: net config base=8 does not match the weights \(base 16"):
        load_learned(other)
    other = seed_checkpoint(tmp_path / "attending.pt", model.build(base=8, depth=2), attention=True)
    with pytest.raises(ValueError, match="do not fit the recorded architecture"):
        load_learned(other)


def test_coverage_is_an_input_not_a_weight():
    "align_stack's coverage mask feeds the learned parts; the untrained blend ignores it."
    rng = np.random.default_rng(10)
    inputs = batched([make_item(rng, 4)])
    coverage = torch.ones(1, 4, 20, 18)
    coverage[:, 1:, :, :9] = 0
    fresh = model.build(base=8, depth=2)
    with torch.no_grad():
        torch.testing.assert_close(fresh(*inputs, coverage=coverage), model.prior_blend(*inputs), atol=1e-6, rtol=0)
        net = randomise(model.build(base=8, depth=2), seed=11).eval()
        torch.testing.assert_close(net(*inputs, coverage=torch.ones(1, 4, 20, 18)), net(*inputs))
        assert not torch.allclose(net(*inputs, coverage=coverage), net(*inputs))


def signed_only_net():
    "A net whose only non-zero output is its signed weights: random, with the softmax and residual heads zeroed."
    torch.manual_seed(5)
    net = randomise(model.build(base=8, depth=2, signed=True, conditioned=True), seed=2, scale=0.5)
    with torch.no_grad():
        net.residual_head[-1].weight.zero_(), net.residual_head[-1].bias.zero_()
        net.weight_head[-1].weight[:model.BANDS].zero_(), net.weight_head[-1].bias[:model.BANDS].zero_()
    return net


def test_signed_weights_leave_an_unchanging_scene_as_the_blend_has_it():
    "Whatever the signed weights, they sum to zero over the frames holding a band: frames that agree give no correction."
    rng = np.random.default_rng(7)
    items = [make_item(rng, 5), make_item(rng, 5, target_lost=(0, 1, 2, 3, 4, 5))]
    for item in items:                      # every frame shows the same scene
        item["stack"] = item["stack"][1:2].expand_as(item["stack"]).clone() * item["present"][..., None, None]
    net = signed_only_net()
    with torch.no_grad():
        signed = net(*batched(items))
        net.weight_head[-1].weight.zero_(), net.weight_head[-1].bias.zero_()
        plain = net(*batched(items))
    assert net.signed and signed.abs().max() > 0
    torch.testing.assert_close(signed, plain, atol=2e-6, rtol=0)
    # And on frames that differ, the same weights do move the output.
    moving = [make_item(np.random.default_rng(7), 5)]
    with torch.no_grad():
        moved = signed_only_net()(*batched(moving))
    assert (moved - model.prior_blend(*batched(moving))).abs().max() > 1e-3
