"""Converter bugs a hunt found around masked cells and given storages, pinned.

- A NaN value stored at a next-step reset step (a diverged state's) spread into valid cells'
  advantages (GAE's ``0 * NaN``, and the normalisation over valid cells).
- A chunk given twice, or an episode's chunks out of time order, passed unless the two chunks
  were adjacent in the env's list (the runner's chunks given twice doubled T).
- ``dtype=`` / ``device=`` other than a given storage's were neither honoured nor refused
  (``device="meta"`` cleared the storage, then failed).
- ``layout="per_chunk"`` marked every padding cell done, so the recurrent generator made each
  its own trajectory padded to T (31 chunks -> 5,941 trajectories).
"""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.converter import ColumnKeys, episodes_to_rollout
from episodes.runner import EnvRunner

GAMMA, LAM = 0.9, 0.95


class BlowUp(gym.Env):
    """Terminates at its 3rd step with a NaN final observation (a diverged state)."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        obs = np.full(2, np.nan if self.t == 3 else self.t, np.float32)
        return obs, 1.0, self.t == 3, False, {}


def blow_up_policy(obs):
    n = len(obs)
    values = obs.sum(1).astype(np.float32)  # NaN on the NaN observation
    return np.zeros(n, np.int64), {"vf_preds": values, "action_logp": np.zeros(n, np.float32)}


def obs_sum(obs):
    return np.asarray(obs).sum(1)


@pytest.mark.parametrize("normalize", [False, True], ids=["raw", "normalised"])
def test_a_nan_value_at_a_reset_step_reaches_no_valid_cell(normalize):
    env = gym.vector.SyncVectorEnv([BlowUp, BlowUp], autoreset_mode="NextStep")
    runner = EnvRunner(env, blow_up_policy, seed=0, window="vector_steps")
    rollout = episodes_to_rollout(runner.sample(6), gamma=GAMMA, value_fn=obs_sum)
    st, valid = rollout.storage, rollout.storage.valid
    assert valid is not None and bool(torch.isnan(st.values[~valid]).all())  # the poison
    # The same rollout with 0 at the reset steps: the valid cells see no difference.
    clean = copy.deepcopy(st)
    clean.values[~valid] = 0.0
    st.compute_returns(rollout.last_values, GAMMA, LAM, normalize_advantage=normalize)
    clean.compute_returns(rollout.last_values, GAMMA, LAM, normalize_advantage=normalize)
    assert bool(torch.isfinite(st.advantages[valid]).all())
    torch.testing.assert_close(st.advantages[valid], clean.advantages[valid])
    batch = next(st.mini_batch_generator(1, num_epochs=1))
    assert bool(torch.isfinite(batch.advantages).all())


# ------------------------------------------------------------------ time order of chunks
def chunk(id_, t0, n, *, done=False):
    return SingleAgentEpisode(
        id_,
        observations=[np.float32([i]) for i in range(t0, t0 + n + 1)],
        actions=[0] * n,
        rewards=[1.0] * n,
        len_lookback_buffer=0,
        t_started=t0,
        terminated=done,
        extra_model_outputs={"vf_preds": [0.0] * n, "action_logp": [0.0] * n},
    )


def first_obs(obs):
    return np.asarray(obs)[:, 0]


REFUSED = {
    "same_done_chunk_with_another_between": lambda: [
        chunk("A", 0, 3, done=True),
        chunk("B", 0, 2, done=True),
        chunk("A", 0, 3, done=True),
    ],
    "steps_after_the_episode_ended": lambda: [
        chunk("A", 0, 3, done=True),
        chunk("B", 0, 2),
        chunk("A", 3, 2),
    ],
    "earlier_chunk_after_a_later_one": lambda: [
        chunk("A", 3, 2),
        chunk("B", 0, 2, done=True),
        chunk("A", 0, 3),
    ],
    "same_running_chunk_twice": lambda: [chunk("A", 0, 3), chunk("B", 0, 2), chunk("A", 0, 3)],
    "a_gap": lambda: [chunk("A", 0, 3), chunk("B", 0, 2), chunk("A", 4, 1)],
    "adjacent_repeat": lambda: [chunk("A", 0, 3, done=True), chunk("A", 0, 3, done=True)],
}


@pytest.mark.parametrize("make", REFUSED.values(), ids=REFUSED.keys())
def test_an_episode_out_of_time_order_is_refused_with_others_between(make):
    chunks = make()
    steps = sum(len(c) for c in chunks)  # a storage that would fit them
    storage = episodes_to_rollout([[chunk("Z", 0, steps)]], gamma=GAMMA, value_fn=first_obs).storage
    rewards = storage.rewards.clone()
    with pytest.raises(ValueError, match="episode 'A'.*time order"):
        episodes_to_rollout([chunks], gamma=GAMMA, value_fn=first_obs, storage=storage)
    assert storage.step == steps and torch.equal(storage.rewards, rewards)  # untouched


ACCEPTED = {
    "continued_after_another_episode": lambda: [
        chunk("A", 0, 3),
        chunk("B", 0, 2, done=True),
        chunk("A", 3, 2),
    ],
    "continued_adjacent": lambda: [chunk("A", 0, 3), chunk("A", 3, 2)],
    "episodes_one_after_another": lambda: [chunk("A", 0, 3, done=True), chunk("B", 0, 2)],
}


@pytest.mark.parametrize("make", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_chunks_in_time_order_are_taken(make):
    chunks = make()
    rollout = episodes_to_rollout([chunks], gamma=GAMMA, value_fn=first_obs)
    assert rollout.storage.num_transitions_per_env == sum(len(c) for c in chunks)


def zero_policy(obs):
    n = len(obs)
    zeros = np.zeros(n, np.float32)
    return np.zeros(n, np.int64), {"vf_preds": zeros, "action_logp": zeros}


def test_runner_chunks_given_twice_are_refused():
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    chunks = EnvRunner(env, zero_policy, seed=0).sample(30)  # pushing left: episodes end
    assert max(np.bincount(chunks.env_indices)) > 1  # another episode lies between repeats
    episodes_to_rollout(list(chunks), gamma=GAMMA, value_fn=obs_sum)  # once: fine
    with pytest.raises(ValueError, match="time order"):
        episodes_to_rollout(list(chunks) + list(chunks), gamma=GAMMA, value_fn=obs_sum)


# ------------------------------------------------------------------ dtype / device vs storage
def small_episode():
    return SingleAgentEpisode(
        observations=[np.float32([0.1])] * 4,
        actions=[0, 1, 0],
        rewards=[0.1, 0.2, 0.3],
        len_lookback_buffer=0,
        extra_model_outputs={"vf_preds": [0.1] * 3, "action_logp": [0.1] * 3},
    )


def zeros(obs):
    return np.zeros(len(obs))


CONFLICTS = {
    "float64_into_float32": (torch.float32, {"dtype": torch.float64}, "dtype"),
    "float32_into_float64": (torch.float64, {"dtype": torch.float32}, "dtype"),
    "bfloat16_into_float32": (torch.float32, {"dtype": torch.bfloat16}, "dtype"),
    "meta_device": (torch.float32, {"device": "meta"}, "device"),
    "cuda_device": (torch.float32, {"device": "cuda"}, "device"),
    "cuda_1_device": (torch.float32, {"device": torch.device("cuda", 1)}, "device"),
}


@pytest.mark.parametrize("held, asked, what", CONFLICTS.values(), ids=CONFLICTS.keys())
def test_a_dtype_or_device_other_than_the_storages_is_refused_untouched(held, asked, what):
    rollout = episodes_to_rollout([small_episode()], gamma=GAMMA, value_fn=zeros, dtype=held)
    storage = rollout.storage
    storage.valid = torch.ones(3, 1, dtype=torch.bool)
    rewards = storage.rewards.clone()
    with pytest.raises(ValueError, match=f"{what}=.*given storage"):
        episodes_to_rollout(
            [small_episode()], gamma=GAMMA, value_fn=zeros, storage=storage, **asked
        )
    assert storage.step == 3 and storage.valid is not None
    assert torch.equal(storage.rewards, rewards) and storage.rewards.dtype == held


AGREEING = {
    "same_dtype": {"dtype": torch.float64},
    "cpu_string": {"device": "cpu"},
    "cpu_device": {"device": torch.device("cpu")},
    "both": {"dtype": torch.float64, "device": "cpu"},
}


@pytest.mark.parametrize("asked", AGREEING.values(), ids=AGREEING.keys())
def test_a_dtype_or_device_naming_the_storages_own_is_taken(asked):
    storage = episodes_to_rollout(
        [small_episode()], gamma=GAMMA, value_fn=zeros, dtype=torch.float64
    ).storage
    rollout = episodes_to_rollout(
        [small_episode()], gamma=GAMMA, value_fn=zeros, storage=storage, **asked
    )
    assert rollout.storage is storage
    assert rollout.last_values.dtype == storage.values.dtype == torch.float64


# ------------------------------------------------------------------ per-chunk padding
def hidden_episode(id_, n, terminated):
    return SingleAgentEpisode(
        id_,
        observations=[np.float32([i, i]) for i in range(n + 1)],
        actions=[0] * n,
        rewards=[1.0] * n,
        len_lookback_buffer=0,
        terminated=terminated,
        extra_model_outputs={
            "vf_preds": [0.5] * n,
            "action_logp": [0.0] * n,
            "h": [np.zeros((1, 4), np.float32)] * n,
        },
    )


def test_per_chunk_padding_is_one_trajectory_per_column():
    chunks = [hidden_episode("long", 200, False)]
    chunks += [hidden_episode(f"short{i}", 3, i % 2 == 0) for i in range(30)]
    rollout = episodes_to_rollout(
        chunks,
        gamma=GAMMA,
        value_fn=zeros,
        keys=ColumnKeys(actor_hidden=("h",)),
        layout="per_chunk",
    )
    st = rollout.storage
    padding = ~st.valid
    dones = st.dones[..., 0]
    # Done on the last real step and on the last padding cell, on no other padding cell.
    assert bool(dones[2, 1:].all()) and bool(dones[-1, 1:].all())
    assert int((dones & padding).sum()) == 30
    st.compute_returns(rollout.last_values, GAMMA, LAM, normalize_advantage=False)
    assert float(st.advantages[padding].abs().sum()) == 0.0
    (batch,) = st.recurrent_mini_batch_generator(1, num_epochs=1)
    # 31 real trajectories, and the padding of the 30 short columns: one each.
    assert batch.observations.shape[1] == 61
    assert batch.hidden_states[0].shape == (1, 61, 4)
    assert torch.equal(batch.valid, st.valid)
    flat = torch.cat([b.observations for b in st.mini_batch_generator(3, num_epochs=1)])
    assert len(flat) == int(st.valid.sum()) == 290


def test_per_chunk_advantages_equal_each_chunk_alone():
    chunks = [hidden_episode("a", 5, False), hidden_episode("b", 2, True)]
    chunks += [hidden_episode("c", 3, False)]
    together = episodes_to_rollout(chunks, gamma=GAMMA, value_fn=zeros, layout="per_chunk")
    together.storage.compute_returns(together.last_values, GAMMA, LAM, normalize_advantage=False)
    for k, c in enumerate(chunks):
        alone = episodes_to_rollout([c], gamma=GAMMA, value_fn=zeros, layout="per_chunk")
        alone.storage.compute_returns(alone.last_values, GAMMA, LAM, normalize_advantage=False)
        n = len(c)
        torch.testing.assert_close(
            together.storage.advantages[:n, k], alone.storage.advantages[:, 0]
        )


@pytest.mark.parametrize("shape", [(3,), (), (1, 2, 3)], ids=["rllib-hidden", "scalar", "3d"])
def test_a_hidden_state_column_not_layers_by_hidden_names_its_key(shape):
    # RLlib's recurrent modules record [hidden] per step; the storage wants [layers, hidden].
    ep = SingleAgentEpisode(
        observations=[0.0, 1.0, 2.0],
        actions=[0, 1],
        rewards=[1.0, 1.0],
        extra_model_outputs={
            "state_h": [np.zeros(shape, np.float32)] * 2,
            "vf_preds": [0.5, 0.5],
            "action_logp": [-0.1, -0.1],
        },
        len_lookback_buffer=0,
    )
    with pytest.raises(ValueError, match=r"'state_h'.*\[num_layers, hidden\]"):
        episodes_to_rollout(
            [ep],
            gamma=0.9,
            value_fn=lambda o: np.zeros(len(o)),
            keys=ColumnKeys(actor_hidden=("state_h",)),
        )
