"""szrank.ranker.model and the training loop: the seed's initialisation, loss, schedule,
bootstrap and best-epoch restoration."""
import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from szrank.ranker.architecture import FACE_COUNT, MOVE_COUNT, SCALE_COUNT
from szrank.ranker.model import RankerMember, autocast_context, initialize_member
from szrank.ranker.objective import member_loss, weighted_mean
from szrank.train.loop import learning_rate_factor


def batch(n=200, seed=0, **changes):
    g = torch.Generator().manual_seed(seed)
    fields = dict(
        size=n, proposal_face=torch.randn(n, 12, 16, generator=g), proposal_global=torch.randn(n, 24, generator=g),
        anchor_face=torch.randn(n, 12, 16, generator=g), anchor_global=torch.randn(n, 24, generator=g),
        topology=torch.randint(0, 59, (n,), generator=g), improved=(torch.rand(n, generator=g) < 0.4).float(),
        better=torch.rand(n, generator=g) < 0.1, signed_gain=3 * torch.randn(n, generator=g),
        plane_action=torch.randint(0, 12, (n,), generator=g), move_action=torch.randint(0, 5, (n,), generator=g),
        scale_action=torch.randint(0, 3, (n,), generator=g), plane_propensity=torch.full((n,), 1 / 12),
        move_propensity=torch.full((n,), 1 / 5), scale_propensity=torch.full((n,), 1 / 3),
        sample_weight=torch.ones(n))
    fields.update(changes)
    return SimpleNamespace(**fields)


def test_initialisation_is_the_seeds():
    member = initialize_member(5, "cpu")
    assert member.face_pos.std().item() == pytest.approx(0.02, rel=0.15)
    assert member.topology_embedding.weight.std().item() == pytest.approx(0.02, rel=0.1)
    for name, module in member.named_modules():
        if isinstance(module, torch.nn.Linear):
            bound = math.sqrt(6 / (module.in_features + module.out_features))
            assert module.weight.abs().max() <= bound and module.weight.abs().max() > 0.8 * bound, name
            assert torch.count_nonzero(module.bias) == 0, name
        if isinstance(module, torch.nn.LayerNorm):
            assert torch.all(module.weight == 1) and torch.count_nonzero(module.bias) == 0, name
    for layer in member.layers:
        assert torch.count_nonzero(layer.self_attn.in_proj_bias) == 0
        bound = math.sqrt(6 / (64 + 192))
        assert layer.self_attn.in_proj_weight.abs().max() <= bound
    again = initialize_member(5, "cpu")
    assert all(torch.equal(a, b) for a, b in zip(member.parameters(), again.parameters()))
    assert not torch.equal(initialize_member(6, "cpu").face_pos, member.face_pos)


def test_value_loss_parts_and_gain_clip():
    member = initialize_member(0, "cpu")
    b = batch()
    parts = member_loss(member, b, torch.ones(b.size), 0.0, 4.0, False)
    value = member(b.proposal_face, b.proposal_global, b.topology)[0]
    assert parts.bce.item() == pytest.approx(F.binary_cross_entropy_with_logits(value[:, 0], b.improved).item(), rel=1e-5)
    assert parts.gain.item() == pytest.approx(F.smooth_l1_loss(value[:, 1], b.signed_gain).item(), rel=1e-5)
    clipped = member_loss(member, b, torch.ones(b.size), 1.0, 4.0, False)
    assert clipped.gain.item() == pytest.approx(F.smooth_l1_loss(value[:, 1], b.signed_gain.clamp(-1, 1)).item(), rel=1e-5)
    assert parts.total.item() == pytest.approx((parts.bce + 0.25 * parts.gain + parts.policy).item(), rel=1e-6)


def test_policy_term_uses_useful_valid_records_and_clipped_ips():
    member = initialize_member(0, "cpu")
    b = batch()
    useful = (b.improved > 0.5) | b.better
    parts = member_loss(member, b, torch.ones(b.size), 0.0, 4.0, False)
    assert parts.useful == int(useful.sum())
    _, plane, move, scale = member(b.anchor_face, b.anchor_global, b.topology)
    plain = (F.cross_entropy(plane[useful], b.plane_action[useful]) + F.cross_entropy(move[useful], b.move_action[useful])
             + F.cross_entropy(scale[useful], b.scale_action[useful])) / 3
    assert parts.policy.item() == pytest.approx(plain.item(), rel=1e-5)   # uniform logging: IPS weight 1
    # No action (-1) or a zero propensity takes a record out of the policy term.
    plane_action = b.plane_action.clone(); plane_action[:50] = -1
    move_propensity = b.move_propensity.clone(); move_propensity[50:60] = 0.0
    masked = member_loss(member, batch(plane_action=plane_action, move_propensity=move_propensity),
                         torch.ones(b.size), 0.0, 4.0, False)
    assert masked.useful == int(useful[60:].sum())
    # A tiny propensity gets the IPS clip, not 1 / (K p).
    rare = b.plane_propensity.clone(); rare[:100] = 1e-5
    heavy = member_loss(member, batch(plane_propensity=rare), torch.ones(b.size), 0.0, 4.0, False)
    ips = torch.where(torch.arange(b.size) < 100, 4.0, 1.0)[useful]
    plane_ce = F.cross_entropy(plane[useful], b.plane_action[useful], reduction="none")
    expected = ((plane_ce * ips).sum() / ips.sum() + F.cross_entropy(move[useful], b.move_action[useful])
                + F.cross_entropy(scale[useful], b.scale_action[useful])) / 3
    assert heavy.policy.item() == pytest.approx(expected.item(), rel=1e-5)
    nothing = member_loss(member, batch(improved=torch.zeros(b.size), better=torch.zeros(b.size, dtype=torch.bool)),
                          torch.ones(b.size), 0.0, 4.0, False)
    assert nothing.useful == 0 and nothing.policy.item() == 0.0
    nothing.total.backward()   # the zero policy term still has a graph


def test_bootstrap_and_sample_weights_weight_the_loss():
    member = initialize_member(0, "cpu")
    b = batch()
    only_first = torch.zeros(b.size); only_first[0] = 1.0
    parts = member_loss(member, b, only_first, 0.0, 4.0, False)
    value = member(b.proposal_face[:1], b.proposal_global[:1], b.topology[:1])[0]
    assert parts.bce.item() == pytest.approx(F.binary_cross_entropy_with_logits(value[:, 0], b.improved[:1]).item(), rel=1e-4)
    assert weighted_mean(torch.ones(3), torch.zeros(3)).item() == 0.0


def test_autocast_only_on_cuda():
    with autocast_context(torch.device("cpu"), True):
        out = torch.nn.Linear(4, 4)(torch.randn(2, 4))
    assert out.dtype == torch.float32


def test_schedule_warmup_then_cosine_to_five_percent():
    total = 2000
    factors = np.array([learning_rate_factor(step, total) for step in range(total)])
    warmup = int(total * 0.05)
    assert factors[0] == pytest.approx(max(0.05, 1 / warmup))
    assert np.all(np.diff(factors[:warmup]) >= 0) and factors[warmup - 1] == pytest.approx(1.0)  # floor at 5%
    assert np.all(np.diff(factors[warmup:]) <= 1e-12)
    assert factors[-1] == pytest.approx(0.05, abs=1e-5) and factors.min() >= 0.05
    assert learning_rate_factor(0, 1) == 1.0


def test_best_epoch_weights_are_restored(tmp_path):
    from szrank.stream.synthetic import synthesize_corpus
    from szrank.stream.snapshot import SPLIT_RUNS, inspect_snapshot
    from szrank.stream.format import write_stream
    from szrank.train.loop import train_ensemble
    from szrank.train.config import TrainConfig
    write_stream(tmp_path / "s.sztx", synthesize_corpus(SPLIT_RUNS, records={"train": 256, "validation": 8,
                                                                             "test": 8, "stress": 8}))
    snapshot = inspect_snapshot(tmp_path / "s.sztx")
    members = [initialize_member(i, "cpu") for i in range(3)]
    states, scores = [], [0.3, 0.9, 0.5]

    def callback(trained, epoch):
        states.append([{k: v.clone() for k, v in m.state_dict().items()} for m in trained])
        return {"average_precision": scores[epoch - 1], "brier_score": 0.2, "top_k_gain": 0.0, "prevalence": 0.4}

    config = TrainConfig(batch_size=64, shuffle_records=256, max_records_per_split=0, learning_rate=1e-3,
                         weight_decay=1e-4, gain_clip=0.0, ips_clip=4.0, gradient_clip=1.0, progress=False)
    history, best = train_ensemble(snapshot, members, {"train"}, 3, config, 7, False, torch.device("cpu"), callback)
    assert best == 2 and [h["epoch"] for h in history] == [1, 2, 3]
    assert history[1]["selection_score"] == pytest.approx(0.9 - 0.02)
    for member, state in zip(members, states[1]):
        assert all(torch.equal(member.state_dict()[k], v) for k, v in state.items())
    assert not all(torch.equal(members[0].state_dict()[k], v) for k, v in states[2][0].items())
    assert history[0]["training"]["records"] == 256 and history[0]["training"]["batches"] == 4
