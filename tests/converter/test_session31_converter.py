"""Converter bugs session 31's hunt found, pinned (one test per finding).

- ``layout="per_chunk"`` split each env's chunks into one-chunk columns before the time-order
  check, so the same chunk given twice, a chunk after its episode ended and chunks out of time
  order were accepted there (a duplicated chunk trained twice), where ``"per_env"`` refuses.
- With ``window="vector_steps"`` in next-step mode, a masked reset cell kept the policy's
  outputs for the terminal observation: a NaN log-prob, distribution parameter, float action
  or hidden state there made a recurrent PPO loss weighted with ``batch.valid`` NaN.
- Text actions reached torch's raw ``TypeError`` (``can't convert np.ndarray of type
  numpy.str_``), where Text observations get a message naming the column.
"""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv

from episodes import SingleAgentEpisode
from episodes.converter import ColumnKeys, episodes_to_rollout
from episodes.runner import EnvRunner

GAMMA = 0.9


def zeros(obs):
    return np.zeros(len(obs))


def snapshot(storage):
    return {name: tensor.clone() for name, tensor in storage.tensors.items()}


def assert_unchanged(storage, before):
    for name, tensor in before.items():
        assert torch.equal(storage.tensors[name], tensor), name


# ------------------------------------------------------------------ 1. per_chunk time order
def chunk(t0, *, done=False, id_="A"):
    return SingleAgentEpisode(
        id_,
        observations=[np.float32([t0 + i]) for i in range(3)],
        actions=[0, 0],
        rewards=[1.0, 1.0],
        terminated=done,
        t_started=t0,
        len_lookback_buffer=0,
        extra_model_outputs={"vf_preds": [0.0, 0.0], "action_logp": [0.0, 0.0]},
    )


def with_env(episodes, env):
    for ep in episodes:
        ep.custom_data["env_index"] = env
    return episodes


A = chunk(0)
ORDER_CASES = {
    "same chunk twice": [[A, A]],
    "a chunk after its episode terminated": [[chunk(0, done=True), chunk(2)]],
    "out of time order": [[chunk(2), chunk(0)]],
    "same chunk twice (env_index)": [
        *with_env([A, A], 0),
        *with_env([chunk(0, id_="B"), chunk(2, id_="B")], 1),
    ],
}


@pytest.mark.parametrize("episodes", list(ORDER_CASES.values()), ids=list(ORDER_CASES))
@pytest.mark.parametrize("layout", ["per_env", "per_chunk"])
def test_chunks_out_of_time_order_are_refused_with_either_layout(episodes, layout):
    given = episodes_to_rollout([[chunk(0)], [chunk(0)]], gamma=GAMMA, value_fn=zeros)
    storage = given.storage
    before = snapshot(storage)
    with pytest.raises(ValueError, match=r"env 0: a chunk of episode 'A' .* time order"):
        episodes_to_rollout(
            copy.deepcopy(episodes), gamma=GAMMA, value_fn=zeros, layout=layout, storage=storage
        )
    assert_unchanged(storage, before)  # refused before the storage was touched


# ------------------------------------------------------------------ 2. masked cells' outputs
class DivergingEnv(VectorEnv):
    """Next-step autoreset; a terminal observation is marked with 1000 (a diverged state)."""

    def __init__(self, n: int = 4) -> None:
        self.num_envs = n
        self.rng = np.random.default_rng(3)
        self.single_observation_space = spaces.Box(-1e4, 1e4, (3,), np.float32)
        self.single_action_space = spaces.Box(-1, 1, (2,), np.float32)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, n)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, n)
        self.metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}
        self.pending = np.zeros(n, bool)

    def reset(self, *, seed=None, options=None):
        self.pending[:] = False
        return self.rng.normal(size=(self.num_envs, 3)).astype(np.float32), {}

    def step(self, actions):
        n = self.num_envs
        obs = self.rng.normal(size=(n, 3)).astype(np.float32)
        term = (self.rng.random(n) < 0.3) & ~self.pending
        obs[term, 0] = 1000.0
        rewards = np.where(self.pending, 0.0, 1.0)
        self.pending = term
        return obs, rewards, term, np.zeros(n, bool), {}


def diverging_policy(obs):
    """NaN outputs (but finite values) on the diverged state, as a diverged network gives."""
    n = len(obs)
    nan = np.where(obs[:, 0] == 1000.0, np.nan, 0.0)[:, None]
    rng = np.random.default_rng(int(abs(obs).sum() * 1000) % 2**32)
    extras = {
        "vf_preds": rng.normal(size=n).astype(np.float32),
        "action_logp": (nan[:, 0] + rng.normal(size=n)).astype(np.float32),
        "logits": (nan + rng.normal(size=(n, 2))).astype(np.float32),
        "h": (nan[:, :, None] + rng.normal(size=(n, 1, 3))).astype(np.float32),
    }
    return (nan + rng.uniform(-1, 1, size=(n, 2))).astype(np.float32), extras


KEYS = ColumnKeys(distribution=("logits",), actor_hidden=("h",))


def test_masked_reset_cells_hold_zeros_in_the_policy_outputs():
    runner = EnvRunner(DivergingEnv(), diverging_policy, seed=0, window="vector_steps")
    chunks = runner.sample(12)
    raw = copy.deepcopy(chunks.time_major(["action_logp", "logits", "h"]))
    rollout = episodes_to_rollout(chunks, gamma=GAMMA, value_fn=zeros, keys=KEYS)
    st, valid = rollout.storage, rollout.mask
    assert valid is not None and not bool(valid.all())
    assert np.isnan(raw["extras"]["action_logp"][~valid.numpy()]).all()  # the poison
    # The storage views the blocks: their unheld cells (no chunk holds them) now hold 0 too.
    assert "actions_log_prob" in st.shared
    after = chunks.time_major(["action_logp"])["extras"]["action_logp"]
    assert (after[~valid.numpy()] == 0).all()
    hidden = st.saved_hidden_states_actor[0].permute(0, 2, 1, 3)  # [T, N, layers, hidden]
    stored = {
        "actions": (st.actions, raw["actions"]),
        "actions_log_prob": (st.actions_log_prob[..., 0], raw["extras"]["action_logp"]),
        "distribution_params": (st.distribution_params[0], raw["extras"]["logits"]),
        "hidden": (hidden, raw["extras"]["h"]),
    }
    for name, (tensor, recorded) in stored.items():
        assert bool((tensor[~valid] == 0).all()), name  # 0, not the policy's NaN
        assert torch.equal(tensor[valid], torch.from_numpy(recorded)[valid]), name  # bit for bit
    # The same on the fast path with copies, and for a storage given again.
    again = episodes_to_rollout(chunks, gamma=GAMMA, value_fn=zeros, keys=KEYS, copy=True)
    for name, tensor in again.storage.tensors.items():
        assert torch.equal(tensor, st.tensors[name]), name
    assert torch.equal(again.storage.saved_hidden_states_actor[0], st.saved_hidden_states_actor[0])
    # A recurrent PPO surrogate weighted with the batch's valid cells stays finite.
    st.compute_returns(rollout.last_values, GAMMA, 0.95)
    for batch in st.recurrent_mini_batch_generator(1, 1):
        ratio = torch.exp(-batch.old_actions_log_prob)
        weight = batch.valid.unsqueeze(-1).to(ratio.dtype)
        surrogate = -batch.advantages * ratio + batch.old_distribution_params[0].sum(-1, True)
        assert bool(torch.isfinite((surrogate * weight).sum() / weight.sum()))
        assert all(bool(torch.isfinite(h).all()) for h in batch.hidden_states[0])
    # A window without reset steps: nothing cleared, fast and general paths agree bit for bit.
    steady = EnvRunner(DivergingEnv(), diverging_policy, seed=0, window="transitions")
    sample = steady.sample(12)
    fast = episodes_to_rollout(sample, gamma=GAMMA, value_fn=zeros, keys=KEYS)
    rebuilt = [SingleAgentEpisode.from_state(c.get_state()) for c in sample]
    general = episodes_to_rollout(rebuilt, gamma=GAMMA, value_fn=zeros, keys=KEYS)
    assert fast.mask is None and general.mask is None
    for name, tensor in general.storage.tensors.items():
        assert torch.equal(fast.storage.tensors[name], tensor), name


# ------------------------------------------------------------------ 3. Text actions
def text_actions_chunk():
    return SingleAgentEpisode(
        "e",
        observations=[np.zeros(2, np.float32)] * 3,
        actions=["a", "bb"],
        rewards=[1.0, 1.0],
        observation_space=spaces.Box(-1, 1, (2,), np.float32),
        action_space=spaces.Text(3),
        len_lookback_buffer=0,
        truncated=True,
        extra_model_outputs={"vf_preds": [0.0, 0.0], "action_logp": [0.0, 0.0]},
    )


def object_actions_chunk():
    return SingleAgentEpisode(
        "e",
        observations=[np.zeros(2, np.float32)] * 3,
        actions=[0, None],
        rewards=[1.0, 1.0],
        len_lookback_buffer=0,
        truncated=True,
        extra_model_outputs={"vf_preds": [0.0, 0.0], "action_logp": [0.0, 0.0]},
    )


@pytest.mark.parametrize("make", [text_actions_chunk, object_actions_chunk], ids=["Text", "None"])
def test_actions_holding_no_numbers_are_refused_by_name(make):
    numbers = chunk(0)
    storage = episodes_to_rollout([numbers], gamma=GAMMA, value_fn=zeros).storage
    before = snapshot(storage)
    ep = make()
    with pytest.raises(TypeError, match=r"RolloutStorage holds numbers, but these chunks' actions"):
        episodes_to_rollout([ep], gamma=GAMMA, value_fn=zeros, storage=storage)
    assert_unchanged(storage, before)
    assert list(ep.get_actions()) == list(make().get_actions())


# ------------------------------------------------------------------ per_chunk without padding
def equal_chunk(name: str, steps: int) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        name,
        observations=[np.full(2, i, np.float32) for i in range(steps + 1)],
        actions=[0] * steps,
        rewards=[1.0] * steps,
        len_lookback_buffer=0,
        terminated=True,
        extra_model_outputs={"vf_preds": [0.0] * steps, "action_logp": [0.0] * steps},
    )


@pytest.mark.parametrize(
    ("lengths", "masked"),
    [pytest.param((3, 3), False, id="one-length"), pytest.param((3, 2), True, id="padded")],
)
def test_per_chunk_masks_only_padding(lengths, masked):
    # api.md: the mask (and storage.valid) is None when every cell holds a transition.
    chunks = [equal_chunk(f"e{i}", n) for i, n in enumerate(lengths)]
    rollout = episodes_to_rollout(chunks, gamma=GAMMA, layout="per_chunk")
    assert (rollout.mask is not None) is masked
    assert (rollout.storage.valid is not None) is masked
