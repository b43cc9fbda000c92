from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes.rollout import (
    RLBatch,
    RolloutStorage,
    Transition,
    split_and_pad_trajectories,
    unpad_trajectories,
)
from tests.rollout._helpers import random_steps, stack_steps


def filled(
    device, t, n, *, obs_dict=False, hidden=None, training_type="rl", done_p=0.2, seed=0, **kw
):
    steps = random_steps(t, n, device, obs_dict=obs_dict, hidden=hidden, done_p=done_p, seed=seed)
    s = RolloutStorage(training_type, n, t, steps[0]["observations"], (2,), device=device, **kw)
    for x in steps:
        s.add_transition(Transition(**x))
    if training_type == "rl":
        s.compute_returns(torch.randn(n, 1, device=device), 0.99, 0.95)
    return s, steps


def all_tensors(x):
    if isinstance(x, dict):
        for v in x.values():
            yield from all_tensors(v)
    elif isinstance(x, (tuple, list)):
        for v in x:
            yield from all_tensors(v)
    elif isinstance(x, torch.Tensor):
        yield x


# ------------------------------------------------------------------ flat generator
SIZES = {
    "divisible": (4, 6, 3),
    "remainder": (5, 3, 4),
    "one_batch": (3, 2, 1),
    "one_sample_per_batch": (2, 3, 6),
    "prime": (7, 3, 5),
}


@pytest.mark.parametrize("t,n,m", SIZES.values(), ids=SIZES.keys())
def test_every_sample_once_per_epoch(device, t, n, m):
    s, _ = filled(device, t, n)
    # Tag each sample: value = its flat index, so batches reveal which samples they hold.
    s.values.copy_(torch.arange(t * n, device=device, dtype=torch.float32).view(t, n, 1))
    epochs = 3
    batches = list(s.mini_batch_generator(m, epochs))
    assert len(batches) == m * epochs
    sizes = [b.values.shape[0] for b in batches[:m]]
    assert max(sizes) - min(sizes) <= 1 and sum(sizes) == t * n
    orders = []
    for e in range(epochs):
        ids = torch.cat([b.values.view(-1) for b in batches[e * m : (e + 1) * m]])
        assert sorted(ids.long().tolist()) == list(range(t * n))
        orders.append(ids)
    if t * n > 4:
        assert any(not torch.equal(orders[0], o) for o in orders[1:])  # fresh permutation


def test_flat_batch_fields_consistent(device):
    t, n = 4, 3
    s, steps = filled(device, t, n, obs_dict=True)
    s.values.copy_(torch.arange(t * n, device=device, dtype=torch.float32).view(t, n, 1))
    flat_obs = stack_steps(steps, "observations")
    for b in s.mini_batch_generator(2, 1):
        assert isinstance(b, RLBatch) and b.hidden_states == (None, None) and b.masks is None
        idx = b.values.view(-1).long()
        ti, ni = idx // n, idx % n
        assert torch.equal(b.observations["policy"], flat_obs["policy"][ti, ni])
        assert torch.equal(b.observations["extra"]["ids"], flat_obs["extra"]["ids"][ti, ni])
        assert b.observations["extra"]["ids"].dtype == torch.int64
        assert torch.equal(b.actions, s.actions[ti, ni])
        assert torch.equal(b.advantages, s.advantages[ti, ni])
        assert torch.equal(b.returns, s.returns[ti, ni])
        assert torch.equal(b.old_actions_log_prob, s.actions_log_prob[ti, ni])
        for got, want in zip(b.old_distribution_params, s.distribution_params, strict=True):
            assert torch.equal(got, want[ti, ni])
        for x in all_tensors(b.__dict__):
            assert x.device.type == device.type


def test_flat_generator_seeded(device):
    s, _ = filled(device, 4, 3)
    runs = []
    for _ in range(2):
        g = torch.Generator(device=device).manual_seed(123)
        runs.append([b.values for b in s.mini_batch_generator(2, 2, generator=g)])
    for a, b in zip(*runs, strict=True):
        assert torch.equal(a, b)


def test_per_mini_batch_normalisation(device):
    s, _ = filled(device, 6, 4, normalize_advantage_per_mini_batch=True)
    for b in s.mini_batch_generator(2, 1):
        assert abs(float(b.advantages.mean())) < 1e-5
        assert abs(float(b.advantages.std()) - 1) < 1e-4
    flat = s.advantages.view(-1)
    for b in s.mini_batch_generator(2, 1, normalize_advantage_per_mini_batch=False):
        assert all(bool((flat == a).any()) for a in b.advantages.view(-1))  # unchanged values


def test_generator_errors(device):
    s, _ = filled(device, 2, 2)
    with pytest.raises(ValueError):
        next(s.mini_batch_generator(5, 1))
    with pytest.raises(ValueError):
        next(s.recurrent_mini_batch_generator(3, 1))
    with pytest.raises(ValueError):
        next(s.generator())
    d, _ = filled(device, 2, 2, training_type="distillation")
    with pytest.raises(ValueError):
        next(d.mini_batch_generator(1, 1))


@settings(max_examples=25, deadline=None)
@given(t=st.integers(1, 6), n=st.integers(2, 6), data=st.data())
def test_property_flat_partition(t, n, data):
    m = data.draw(st.integers(1, t * n))
    s, _ = filled(torch.device("cpu"), t, n)
    s.values.copy_(torch.arange(t * n, dtype=torch.float32).view(t, n, 1))
    ids = torch.cat([b.values.view(-1) for b in s.mini_batch_generator(m, 1)])
    assert sorted(ids.long().tolist()) == list(range(t * n))


# ------------------------------------------------------------------ recurrent generator
@pytest.mark.parametrize("hidden", ["gru", "lstm"])
@pytest.mark.parametrize("n,m", [(6, 3), (7, 3), (5, 5), (4, 1)], ids=["div", "rem", "1env", "1mb"])
def test_recurrent(device, hidden, n, m):
    t = 6
    s, steps = filled(device, t, n, hidden=hidden, obs_dict=True, done_p=0.3)
    padded_all, masks_all = split_and_pad_trajectories(s.observations, s.dones)
    epochs = 2
    batches = list(s.recurrent_mini_batch_generator(m, epochs))
    assert len(batches) == m * epochs
    base, rem = divmod(n, m)
    sizes = [base + (i < rem) for i in range(m)]
    e0, j0 = 0, 0
    dones = s.dones.squeeze(-1)
    for i, b in enumerate(batches[:m]):
        e1 = e0 + sizes[i]
        assert torch.equal(b.actions, s.actions[:, e0:e1])
        assert torch.equal(b.advantages, s.advantages[:, e0:e1])
        # the envs' trajectories, padded; masks; unpad gives the envs' data back
        padded, masks = split_and_pad_trajectories(
            {"policy": s.observations["policy"][:, e0:e1]}, s.dones[:, e0:e1]
        )
        assert torch.equal(b.masks, masks)
        assert torch.equal(b.observations["policy"], padded["policy"])
        j1 = j0 + masks.shape[1]
        assert torch.equal(b.observations["policy"], padded_all["policy"][:, j0:j1])
        assert torch.equal(
            unpad_trajectories(b.observations["policy"], b.masks),
            s.observations["policy"][:, e0:e1],
        )
        # hidden states at trajectory starts
        starts = [
            (tt, e) for e in range(e0, e1) for tt in range(t) if tt == 0 or bool(dones[tt - 1, e])
        ]
        for which, saved in zip(
            b.hidden_states,
            (s.saved_hidden_states_actor, s.saved_hidden_states_critic),
            strict=True,
        ):
            comps = which if isinstance(which, tuple) else (which,)
            assert isinstance(which, tuple) == (hidden == "lstm")
            for comp, sv in zip(comps, saved, strict=True):
                assert comp.shape == (2, len(starts), 4) and comp.is_contiguous()
                want = torch.stack([sv[tt, :, e] for tt, e in starts], dim=1)
                assert torch.equal(comp, want)
        for x in all_tensors(b.__dict__):
            assert x.device.type == device.type
        e0, j0 = e1, j1
    assert e0 == n and j0 == masks_all.shape[1]  # no env dropped
    for a, b in zip(batches[:m], batches[m:], strict=True):  # same grouping every epoch
        assert torch.equal(a.masks, b.masks)


def test_recurrent_without_hidden(device):
    s, _ = filled(device, 4, 4)
    b = next(s.recurrent_mini_batch_generator(2, 1))
    assert b.hidden_states == (None, None) and b.masks is not None


# ------------------------------------------------------------------ distillation
def test_distillation_generator(device):
    t, n = 4, 3
    s, steps = filled(device, t, n, training_type="distillation", obs_dict=True)
    batches = list(s.generator())
    assert len(batches) == t
    for i, b in enumerate(batches):
        assert torch.equal(b.observations["policy"], steps[i]["observations"]["policy"])
        assert torch.equal(b.actions, steps[i]["actions"])
        assert torch.equal(b.privileged_actions, steps[i]["privileged_actions"])
        assert torch.equal(b.dones.squeeze(-1), steps[i]["dones"].bool())
        for x in all_tensors(b.__dict__):
            assert x.device.type == device.type


def test_mini_batches_and_returns_never_wait_for_the_device():
    """On a GPU a wait per mini-batch would serialise training: none may happen after the
    first batch (counted on the CPU at the aten level: scalar reads, data-sized outputs)."""
    from tests.runner.test_device_recording import SyncCounter

    s, _ = filled("cpu", 8, 6, hidden="gru", done_p=0.3)
    flat = s.mini_batch_generator(3, 2)
    recurrent = s.recurrent_mini_batch_generator(3, 2)
    next(flat), next(recurrent)  # the recurrent layout is planned at the first batch
    counter = SyncCounter()
    with counter:
        s.compute_returns(torch.zeros(6, 1), 0.99, 0.95)
        rest = list(flat) + list(recurrent)
    assert len(rest) == 10
    assert counter.calls == []
