"""Differential tests: episodes.rollout against rsl_rl 5.5.1.

Same transitions / dones go through both libraries; results are compared tensor by tensor.
Run with the reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_rsl_rl_rollout.py
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

rsl_rl = pytest.importorskip("rsl_rl")

import torch  # noqa: E402
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from rsl_rl.algorithms.ppo import PPO  # noqa: E402
from rsl_rl.storage import RolloutStorage as RslStorage  # noqa: E402
from rsl_rl.utils import split_and_pad_trajectories as rsl_split  # noqa: E402
from rsl_rl.utils import unpad_trajectories as rsl_unpad  # noqa: E402
from tensordict import TensorDict  # noqa: E402

from episodes.rollout import (  # noqa: E402
    RolloutStorage,
    Transition,
    bootstrap_time_outs,
    split_and_pad_trajectories,
    unpad_trajectories,
)

pytestmark = pytest.mark.differential
OBS, ACT = 3, 2


class _Critic:
    def __init__(self, last_values: torch.Tensor) -> None:
        self.last_values = last_values

    def __call__(self, obs: object) -> torch.Tensor:
        return self.last_values

    def get_hidden_state(self) -> None:
        return None

    def reset(self, dones: object = None, hidden_state: object = None) -> None:
        return None


def rsl_compute_returns(storage, last_values, gamma, lam, per_mini_batch=False) -> None:
    """Run rsl_rl's own PPO.compute_returns code on a minimal stand-in algorithm."""
    alg = SimpleNamespace(
        storage=storage,
        gamma=gamma,
        lam=lam,
        critic=_Critic(last_values),
        normalize_advantage_per_mini_batch=per_mini_batch,
    )
    PPO.compute_returns(alg, None)  # type: ignore[arg-type]


def build_pair(t, n, seed, done_p, hidden=None, layers=2, hid=4):
    g = torch.Generator().manual_seed(seed)
    obs_example = TensorDict(
        {"policy": torch.zeros(n, OBS), "critic": torch.zeros(n, OBS + 1)}, batch_size=[n]
    )
    theirs = RslStorage("rl", n, t, obs_example, [ACT])
    ours = RolloutStorage("rl", n, t, {"policy": (OBS,), "critic": (OBS + 1,)}, (ACT,))
    for _ in range(t):
        obs = {
            "policy": torch.randn(n, OBS, generator=g),
            "critic": torch.randn(n, OBS + 1, generator=g),
        }
        fields = dict(
            actions=torch.randn(n, ACT, generator=g),
            rewards=torch.randn(n, generator=g),
            dones=(torch.rand(n, generator=g) < done_p).float(),
            values=torch.randn(n, 1, generator=g),
            actions_log_prob=torch.randn(n, generator=g),
            distribution_params=(torch.randn(n, ACT, generator=g), torch.rand(n, ACT, generator=g)),
        )
        if hidden is not None:

            def h():
                return torch.randn(layers, n, hid, generator=g)

            fields["hidden_states"] = (h(), h()) if hidden == "gru" else ((h(), h()), (h(), h()))
        tr = RslStorage.Transition()
        tr.observations = TensorDict(obs, batch_size=[n])
        for k, v in fields.items():
            setattr(tr, k, v)
        theirs.add_transition(tr)
        ours.add_transition(Transition(observations=obs, **fields))
    return ours, theirs, torch.randn(n, 1, generator=g)


def close(a, b, atol=1e-5):
    torch.testing.assert_close(a, b, atol=atol, rtol=1e-5)


@settings(max_examples=20, deadline=None)
@given(
    t=st.integers(1, 40),
    n=st.integers(2, 8),
    seed=st.integers(0, 10**6),
    done_p=st.sampled_from([0.0, 0.1, 0.5, 1.0]),
    gamma=st.sampled_from([0.0, 0.9, 0.99, 1.0]),
    lam=st.sampled_from([0.0, 0.95, 1.0]),
    per_mb=st.booleans(),
)
def test_returns_and_advantages(t, n, seed, done_p, gamma, lam, per_mb):
    ours, theirs, last = build_pair(t, n, seed, done_p)
    rsl_compute_returns(theirs, last, gamma, lam, per_mini_batch=per_mb)
    ours.compute_returns(last, gamma, lam, normalize_advantage=not per_mb)
    close(ours.returns, theirs.returns)
    close(ours.advantages, theirs.advantages, atol=1e-4 if not per_mb else 1e-5)


@pytest.mark.parametrize(
    ("t", "n"), [(24, 4096), (2, 3000), (64, 1024)], ids=["T24_N4096", "T2_N3000", "T64_N1024"]
)
@pytest.mark.parametrize("per_mb", [False, True])
def test_returns_at_rsl_rl_scale(t, n, per_mb):
    """Many envs over few steps: the shapes rsl_rl trains with (and for which compute_gae loops
    over T instead of scanning in log depth; the property above stays below them)."""
    ours, theirs, last = build_pair(t, n, 7, 0.05)
    rsl_compute_returns(theirs, last, 0.99, 0.95, per_mini_batch=per_mb)
    ours.compute_returns(last, 0.99, 0.95, normalize_advantage=not per_mb)
    close(ours.returns, theirs.returns)
    close(ours.advantages, theirs.advantages, atol=1e-4)


def test_time_out_bootstrap_matches_process_env_step():
    n = 5
    g = torch.Generator().manual_seed(3)
    values = torch.randn(n, 1, generator=g)
    rewards = torch.randn(n, generator=g)
    time_outs = torch.tensor([1, 0, 1, 0, 0])
    captured = {}
    alg = SimpleNamespace(
        transition=RslStorage.Transition(),
        rnd=None,
        gamma=0.97,
        device="cpu",
        storage=SimpleNamespace(add_transition=lambda tr: captured.update(r=tr.rewards.clone())),
        actor=_Critic(values),
        critic=_Critic(values),
    )
    alg.transition.values = values
    PPO.process_env_step(alg, None, rewards, torch.zeros(n), {"time_outs": time_outs})
    ours = bootstrap_time_outs(rewards, values, time_outs, 0.97)
    assert torch.equal(ours, captured["r"])


@settings(max_examples=30, deadline=None)
@given(
    t=st.integers(1, 12),
    n=st.integers(1, 6),
    seed=st.integers(0, 10**6),
    p=st.sampled_from([0.0, 0.2, 0.6, 1.0]),
)
def test_split_and_pad_and_unpad(t, n, seed, p):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(t, n, 3, generator=g)
    dones = (torch.rand(t, n, 1, generator=g) < p).to(torch.uint8)
    want_p, want_m = rsl_split(x, dones)
    got_p, got_m = split_and_pad_trajectories(x, dones)
    assert torch.equal(got_p, want_p) and torch.equal(got_m, want_m)
    assert torch.equal(unpad_trajectories(got_p, got_m), rsl_unpad(want_p, want_m))
    td = TensorDict({"a": x, "b": x[..., :1] * 2}, batch_size=[t, n])
    want_td, want_m2 = rsl_split(td, dones)
    got_d, got_m2 = split_and_pad_trajectories({"a": x, "b": x[..., :1] * 2}, dones)
    assert torch.equal(got_m2, want_m2)
    for k in ("a", "b"):
        assert torch.equal(got_d[k], want_td[k])


def _cmp_hidden(ours, theirs):
    if theirs is None:
        assert ours is None
        return
    if isinstance(theirs, tuple):
        assert isinstance(ours, tuple) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs, strict=True):
            assert torch.equal(a, b)
    else:
        assert torch.equal(ours, theirs)


@pytest.mark.parametrize("hidden", ["gru", "lstm", None])
@pytest.mark.parametrize("seed", range(4))
def test_recurrent_generator(hidden, seed):
    t, n, m, epochs = 7, 6, 3, 2  # n divisible by m: same grouping as rsl_rl
    ours, theirs, last = build_pair(t, n, seed, 0.25, hidden=hidden)
    rsl_compute_returns(theirs, last, 0.99, 0.95)
    ours.compute_returns(last, 0.99, 0.95)
    gen_o = list(ours.recurrent_mini_batch_generator(m, epochs))
    gen_t = list(theirs.recurrent_mini_batch_generator(m, epochs))
    assert len(gen_o) == len(gen_t) == m * epochs
    for bo, bt in zip(gen_o, gen_t, strict=True):
        for k in ("policy", "critic"):
            assert torch.equal(bo.observations[k], bt.observations[k])
        assert torch.equal(bo.masks, bt.masks)
        assert torch.equal(bo.actions, bt.actions)
        assert torch.equal(bo.values, bt.values)
        assert torch.equal(bo.old_actions_log_prob, bt.old_actions_log_prob)
        close(bo.returns, bt.returns)
        close(bo.advantages, bt.advantages, atol=1e-4)
        for a, b in zip(bo.old_distribution_params, bt.old_distribution_params, strict=True):
            assert torch.equal(a, b)
        _cmp_hidden(bo.hidden_states[0], bt.hidden_states[0])
        _cmp_hidden(bo.hidden_states[1], bt.hidden_states[1])


@pytest.mark.parametrize("seed", range(3))
def test_flat_generator_same_permutation(seed):
    t, n, m = 6, 4, 3  # divisible, one epoch: both draw torch.randperm(T * N) once
    ours, theirs, last = build_pair(t, n, seed, 0.2)
    rsl_compute_returns(theirs, last, 0.99, 0.95)
    ours.compute_returns(last, 0.99, 0.95)
    torch.manual_seed(seed)
    gen_t = list(theirs.mini_batch_generator(m, 1))
    torch.manual_seed(seed)
    gen_o = list(ours.mini_batch_generator(m, 1))
    for bo, bt in zip(gen_o, gen_t, strict=True):
        for k in ("policy", "critic"):
            assert torch.equal(bo.observations[k], bt.observations[k])
        assert torch.equal(bo.actions, bt.actions)
        assert torch.equal(bo.values, bt.values)
        assert torch.equal(bo.old_actions_log_prob, bt.old_actions_log_prob)
        close(bo.returns, bt.returns)
        close(bo.advantages, bt.advantages, atol=1e-4)
        for a, b in zip(bo.old_distribution_params, bt.old_distribution_params, strict=True):
            assert torch.equal(a, b)


def test_flat_generator_multiset_over_epochs():
    t, n, m, epochs = 5, 4, 4, 3
    ours, theirs, last = build_pair(t, n, 7, 0.2)
    rsl_compute_returns(theirs, last, 0.99, 0.95)
    ours.compute_returns(last, 0.99, 0.95)
    for e in range(epochs):
        bo = list(ours.mini_batch_generator(m, epochs))[e * m : (e + 1) * m]
        bt = list(theirs.mini_batch_generator(m, epochs))[e * m : (e + 1) * m]
        vo = torch.cat([b.values.view(-1) for b in bo]).sort().values
        vt = torch.cat([b.values.view(-1) for b in bt]).sort().values
        assert torch.equal(vo, vt)


@pytest.mark.parametrize("per_mb", [False, True])
@pytest.mark.parametrize("hidden", [None, "gru"])
def test_rsl_rl_compute_returns_into_our_storage_reaches_every_generator(per_mb, hidden):
    # rsl_rl's PPO.compute_returns assigns storage.advantages (twice with whole-batch
    # normalisation): the assigned tensor must be what our generators hand out.
    ours, theirs, last = build_pair(6, 4, 7, 0.3, hidden=hidden)
    rsl_compute_returns(ours, last, 0.99, 0.95, per_mb)
    rsl_compute_returns(theirs, last, 0.99, 0.95, per_mb)
    close(ours.tensors["advantages"], theirs.advantages)
    torch.manual_seed(0)
    flat = torch.cat([b.advantages for b in ours.mini_batch_generator(2, 1)])
    close(torch.sort(flat.flatten()).values, torch.sort(theirs.advantages.flatten()).values)
    if hidden is not None:
        ours_rec = next(ours.recurrent_mini_batch_generator(1, 1)).advantages
        theirs_rec = next(theirs.recurrent_mini_batch_generator(1, 1)).advantages
        close(ours_rec, theirs_rec)
