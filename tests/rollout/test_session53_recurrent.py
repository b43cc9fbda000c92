"""Recurrent PPO end to end: EnvRunner -> episodes_to_rollout -> recurrent mini-batches.

A tiny GRU or LSTM actor-critic collects on a numpy vector env with random terminations and
truncations, in every autoreset mode (and the vector-step window), over two ``sample`` calls.
The properties a recurrent PPO update rests on:

* replaying each padded mini-batch from its stored initial states gives back the recorded
  log-probabilities and values (PPO's ratio is 1 before the first update);
* the recorded states are the right ones: replaying every whole episode (its chunks of both
  calls joined) from a fresh state gives the recorded log-probabilities too, so an episode that
  goes on across calls starts the second rollout from the carried state, not from zeros, and
  every episode start holds ``initial_state`` (also a non-zero one);
* the bootstrap value of a truncated or still-running chunk, computed from the state recorded
  at its last step, equals the critic replayed over the whole episode;
* returns are per-chunk GAE with those bootstrap values.
"""

from __future__ import annotations

from collections import defaultdict
from functools import cache

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from episodes.converter import ColumnKeys, episodes_to_rollout
from episodes.rollout import unpad_trajectories
from episodes.runner import EnvRunner

OBS, ACTIONS, HIDDEN, LAYERS = 3, 3, 5, 2


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    # Tiny RNN calls: on a busy machine torch's thread pool costs more than the work.
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


GAMMA, LAM = 0.9, 0.8


class RandomEndsEnv(gym.Env):
    """Random observations and rewards; ends by termination or truncation at random."""

    def __init__(self, p_term: float = 0.08, p_trunc: float = 0.06):
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (OBS,), np.float32)
        self.action_space = gym.spaces.Discrete(ACTIONS)
        self.p_term, self.p_trunc = p_term, p_trunc

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.np_random.normal(size=OBS).astype(np.float32), {}

    def step(self, action):
        # The action shows in the next observation, so a wrong replayed action would show.
        obs = self.np_random.normal(size=OBS).astype(np.float32) + 0.1 * float(action)
        reward = float(self.np_random.normal())
        term = bool(self.np_random.random() < self.p_term)
        trunc = not term and bool(self.np_random.random() < self.p_trunc)
        return obs, reward, term, trunc, {}


def make_env(n, mode, p_term=0.08, p_trunc=0.06):
    return SyncVectorEnv(
        [lambda: RandomEndsEnv(p_term, p_trunc) for _ in range(n)], autoreset_mode=mode
    )


def leaves(state):
    return (state,) if isinstance(state, torch.Tensor) else tuple(state)


class ActorCritic(nn.Module):
    """A GRU or LSTM actor (logits) and critic (value), ``[T, B, ...]`` in and out."""

    def __init__(self, kind: str, fill: float = 0.0):
        super().__init__()
        cell = nn.GRU if kind == "gru" else nn.LSTM
        self.kind, self.fill = kind, fill
        self.actor, self.critic = cell(OBS, HIDDEN, LAYERS), cell(OBS, HIDDEN, LAYERS)
        self.actor_head, self.critic_head = nn.Linear(HIDDEN, ACTIONS), nn.Linear(HIDDEN, 1)

    def fresh(self, n):
        def one():
            return torch.full((LAYERS, n, HIDDEN), self.fill)

        return one() if self.kind == "gru" else (one(), one())

    def logits(self, obs, state):
        out, state = self.actor(obs, state)
        return self.actor_head(out), state

    def value(self, obs, state):
        out, state = self.critic(obs, state)
        return self.critic_head(out).squeeze(-1), state


class SamplingPolicy:
    """The runner's recurrent policy; records the states *entering* each step."""

    def __init__(self, net: ActorCritic):
        self.net = net

    def initial_state(self, n):
        return self.net.fresh(n), self.net.fresh(n)

    @torch.no_grad()
    def __call__(self, obs, state):
        x = torch.as_tensor(obs, dtype=torch.float32)[None]
        actor_state, critic_state = state
        logits, new_actor = self.net.logits(x, actor_state)
        values, new_critic = self.net.value(x, critic_state)
        dist = torch.distributions.Categorical(logits=logits[0])
        actions = dist.sample()
        extras = {
            "action_logp": dist.log_prob(actions).numpy(),
            "vf_preds": values[0].numpy(),
            "logits": logits[0].numpy(),
        }
        for who, states in (("a", actor_state), ("c", critic_state)):
            for part, leaf in zip("hc", leaves(states)):
                extras[f"{who}_{part}"] = leaf.transpose(0, 1).numpy().copy()  # env axis first
        return actions.numpy(), extras, (new_actor, new_critic)


def keys_for(kind):
    parts = "h" if kind == "gru" else "hc"
    return ColumnKeys(
        distribution=("logits",),
        actor_hidden=tuple(f"a_{p}" for p in parts),
        critic_hidden=tuple(f"c_{p}" for p in parts),
    )


@torch.no_grad()
def store_bootstrap_values(chunks, net, keys):
    """V of each unterminated chunk's last observation, from the state at its last step."""
    for chunk in chunks:
        if chunk.is_terminated:
            continue
        if len(chunk):
            obs = np.asarray(chunk.get_observations(slice(-2, None)))[:, None]
            parts = [
                torch.as_tensor(np.asarray(chunk.get_extra_model_outputs(k, -1)))[:, None]
                for k in keys.critic_hidden
            ]
            state = parts[0] if len(parts) == 1 else tuple(parts)
        else:  # just a reset: its one observation from a fresh state
            obs, state = np.asarray(chunk.get_observations(-1))[None, None], net.fresh(1)
        values, _ = net.value(torch.as_tensor(obs), state)
        chunk.custom_data["bootstrap_value"] = float(values[-1, 0])


@cache  # the tests only read what it returns
def collect(kind, mode, *, window="transitions", n=8, t=16, seed=0, fill=0.0, **ends):
    """Two rollouts: a tuple of (chunks, rollout) with GAE computed, and the net."""
    torch.manual_seed(seed)
    net = ActorCritic(kind, fill)
    env = make_env(n, mode, **ends)
    runner = EnvRunner(env, SamplingPolicy(net), state_batch_axis=1, seed=seed, window=window)
    keys, out = keys_for(kind), []
    for _ in range(2):
        chunks = runner.sample(t)
        store_bootstrap_values(chunks, net, keys)
        rollout = episodes_to_rollout(chunks, gamma=GAMMA, keys=keys)
        rollout.storage.compute_returns(rollout.last_values, GAMMA, LAM, normalize_advantage=False)
        out.append((chunks, rollout))
    env.close()
    return tuple(out), net


def replay_errors(net, storage, num_mini_batches):
    """Largest |replayed - recorded| log-prob and value over the cells holding transitions."""
    worst_logp = worst_value = 0.0
    for batch in storage.recurrent_mini_batch_generator(num_mini_batches, num_epochs=1):
        actor_state, critic_state = batch.hidden_states
        with torch.no_grad():
            logits, _ = net.logits(batch.observations, actor_state)
            values, _ = net.value(batch.observations, critic_state)
        logits = unpad_trajectories(logits, batch.masks)
        values = unpad_trajectories(values, batch.masks)
        logp = torch.distributions.Categorical(logits=logits).log_prob(batch.actions[..., 0].long())
        held = torch.ones_like(logp, dtype=torch.bool) if batch.valid is None else batch.valid
        err_logp = (logp - batch.old_actions_log_prob[..., 0]).abs()[held]
        err_value = (values - batch.values[..., 0]).abs()[held]
        worst_logp = max(worst_logp, float(err_logp.max()))
        worst_value = max(worst_value, float(err_value.max()))
    return worst_logp, worst_value


CASES = {
    "next_step": (AutoresetMode.NEXT_STEP, "transitions"),
    "same_step": (AutoresetMode.SAME_STEP, "transitions"),
    "disabled": (AutoresetMode.DISABLED, "transitions"),
    "next_step_vector_steps": (AutoresetMode.NEXT_STEP, "vector_steps"),
}


@pytest.mark.parametrize("kind", ["gru", "lstm"])
@pytest.mark.parametrize("case", list(CASES))
def test_replaying_mini_batches_reproduces_recorded_outputs(kind, case):
    mode, window = CASES[case]
    rollouts, net = collect(kind, mode, window=window)
    for _, rollout in rollouts:
        storage = rollout.storage
        # 3 groups of 8 envs: the remainder is spread, every env is replayed.
        for num_mini_batches in (1, 3):
            logp_err, value_err = replay_errors(net, storage, num_mini_batches)
            assert logp_err < 1e-5 and value_err < 1e-5
    if window == "vector_steps":  # the reset steps are cells without a transition
        assert any(bool((~r.storage.valid).any()) for _, r in rollouts)


@pytest.mark.parametrize("kind", ["gru", "lstm"])
@pytest.mark.parametrize("case", list(CASES))
def test_states_at_trajectory_starts(kind, case):
    """After a done: the fresh state; at t=0 of the second rollout: the carried one."""
    mode, window = CASES[case]
    rollouts, _ = collect(kind, mode, window=window)
    carried = 0
    for call, (_, rollout) in enumerate(rollouts):
        storage = rollout.storage
        starts_after_done = 0
        for batch in storage.recurrent_mini_batch_generator(2, num_epochs=1):
            for leaf in leaves(batch.hidden_states[0]) + leaves(batch.hidden_states[1]):
                assert leaf.shape == (LAYERS, batch.masks.shape[1], HIDDEN)
        # The same from the storage directly: every cell right after a done holds zeros.
        dones = storage.dones[..., 0].bool()
        for leaf in storage.saved_hidden_states_actor + storage.saved_hidden_states_critic:
            after_done = leaf[1:].transpose(1, 2)[dones[:-1]]  # [k, layers, hidden]
            starts_after_done += len(after_done)
            assert torch.equal(after_done, torch.zeros_like(after_done))
            if call == 1:
                carried += int((leaf[0].abs().sum((0, 2)) > 0).sum())
        assert starts_after_done > 0
    assert carried > 0  # episodes going on across the calls start from their carried state


def _episodes(rollouts):
    """Chunks of both calls joined per episode id, for episodes started inside them."""
    by_id = defaultdict(list)
    for chunks, _ in rollouts:
        for chunk in chunks:
            by_id[chunk.id_].append(chunk)
    return [cs for cs in by_id.values() if cs[0].t_started == 0]


@pytest.mark.parametrize("kind", ["gru", "lstm"])
@pytest.mark.parametrize("case", list(CASES))
def test_whole_episode_replay_from_fresh_state(kind, case):
    mode, window = CASES[case]
    rollouts, net = collect(kind, mode, window=window)
    across = checked_boot = 0
    for chunks in _episodes(rollouts):
        stepped = [c for c in chunks if len(c)]
        if not stepped:
            continue
        across += len(stepped) > 1
        obs = np.concatenate([np.asarray(c.get_observations(slice(0, len(c)))) for c in stepped])
        actions = np.concatenate([np.asarray(c.get_actions(slice(0, len(c)))) for c in stepped])
        logps = np.concatenate(
            [
                np.asarray(c.get_extra_model_outputs("action_logp", slice(0, len(c))))
                for c in stepped
            ]
        )
        with torch.no_grad():
            logits, _ = net.logits(torch.as_tensor(obs)[:, None], net.fresh(1))
        logp = torch.distributions.Categorical(logits=logits[:, 0]).log_prob(
            torch.as_tensor(actions)
        )
        assert torch.allclose(logp, torch.as_tensor(logps), atol=1e-5)
        last = chunks[-1]
        if "bootstrap_value" in last.custom_data and len(last):
            every = np.concatenate([obs, np.asarray(last.get_observations(-1))[None]])
            with torch.no_grad():
                values, _ = net.value(torch.as_tensor(every)[:, None], net.fresh(1))
            assert abs(float(values[-1, 0]) - last.custom_data["bootstrap_value"]) < 1e-5
            checked_boot += 1
    assert across > 0 and checked_boot > 0


@pytest.mark.parametrize("case", list(CASES))
def test_every_episode_start_records_a_non_zero_initial_state(case):
    mode, window = CASES[case]
    rollouts, _ = collect("lstm", mode, window=window, n=5, t=10, fill=0.3)
    starts = 0
    for chunks, _ in rollouts:
        for chunk in chunks:
            if chunk.t_started == 0 and len(chunk):
                starts += 1
                for key in ("a_h", "a_c", "c_h", "c_c"):
                    state = np.asarray(chunk.get_extra_model_outputs(key, 0))
                    np.testing.assert_array_equal(state, np.full((LAYERS, HIDDEN), 0.3, np.float32))
    assert starts > 5


def _chunk_returns(chunk):
    rewards = np.asarray(chunk.get_rewards(slice(0, len(chunk))), float)
    values = np.asarray(chunk.get_extra_model_outputs("vf_preds", slice(0, len(chunk))), float)
    after = 0.0 if chunk.is_terminated else chunk.custom_data["bootstrap_value"]
    advantages, running = np.zeros(len(chunk)), 0.0
    for t in reversed(range(len(chunk))):
        following = after if t == len(chunk) - 1 else values[t + 1]
        running = rewards[t] + GAMMA * following - values[t] + GAMMA * LAM * running
        advantages[t] = running
    return advantages + values


@pytest.mark.parametrize("case", list(CASES))
def test_returns_are_per_chunk_gae_with_bootstrap_values(case):
    mode, window = CASES[case]
    rollouts, _ = collect("gru", mode, window=window)
    truncated = 0
    for chunks, rollout in rollouts:
        storage = rollout.storage
        for n, group in enumerate(chunks.by_env()):
            truncated += sum(c.is_truncated for c in group)
            want = np.concatenate([_chunk_returns(c) for c in group if len(c)])
            got = storage.returns[:, n, 0]
            if storage.valid is not None:
                got = got[storage.valid[:, n]]
            np.testing.assert_allclose(got.numpy(), want, atol=1e-5)
    assert truncated > 0


@settings(max_examples=8, deadline=None)
@given(
    kind=st.sampled_from(["gru", "lstm"]),
    case=st.sampled_from(list(CASES)),
    n=st.integers(1, 6),
    t=st.integers(1, 12),
    p_term=st.floats(0.0, 0.5),
    p_trunc=st.floats(0.0, 0.5),
    seed=st.integers(0, 2**16),
)
def test_replay_invariant_holds_for_any_ends(kind, case, n, t, p_term, p_trunc, seed):
    mode, window = CASES[case]
    if window == "vector_steps":
        t = max(t, 2)  # a next-step vector-step window takes at least two steps
    rollouts, net = collect(
        kind, mode, window=window, n=n, t=t, seed=seed, p_term=p_term, p_trunc=p_trunc
    )
    for chunks, rollout in rollouts:
        logp_err, value_err = replay_errors(net, rollout.storage, min(n, 2))
        assert logp_err < 1e-5 and value_err < 1e-5
        # One column per chunk: each starts from its chunk's first recorded state.
        per_chunk = episodes_to_rollout(
            chunks, gamma=GAMMA, keys=keys_for(kind), layout="per_chunk"
        )
        logp_err, value_err = replay_errors(net, per_chunk.storage, 1)
        assert logp_err < 1e-5 and value_err < 1e-5


@pytest.mark.parametrize("case", ["next_step", "same_step", "disabled"])
def test_runner_reset_starts_every_sub_env_from_the_initial_state(case):
    mode, window = CASES[case]
    torch.manual_seed(0)
    net = ActorCritic("lstm", fill=0.3)
    env = make_env(4, mode, p_term=0.0, p_trunc=0.0)  # episodes that never end by themselves
    runner = EnvRunner(env, SamplingPolicy(net), state_batch_axis=1, seed=0, window=window)
    runner.sample(5)
    runner.reset(seed=1)
    chunks = runner.sample(3)
    assert [c.t_started for c in chunks] == [0, 0, 0, 0]
    for chunk in chunks:
        for key in ("a_h", "a_c", "c_h", "c_c"):
            state = np.asarray(chunk.get_extra_model_outputs(key, 0))
            np.testing.assert_array_equal(state, np.full((LAYERS, HIDDEN), 0.3, np.float32))
    env.close()
