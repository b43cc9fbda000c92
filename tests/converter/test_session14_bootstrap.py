"""The fast path bootstraps from ``custom_data[keys.bootstrap_value]`` when no value_fn is given.

A recurrent critic cannot be a batched ``value_fn`` (it needs each chunk's GRU state), so it
stores ``V(last observation)`` in the chunks (examples/ppo_recurrent.py). The fast path needed
``value_fn`` and stepped aside, and a next-step ``window="vector_steps"`` sample, which only the
fast path lays out, was refused. Now the fast path reads the stored values of the chunks that
need one (only those are built) and gives what ``value_fn`` with the same values gives, and
what the general path (``layout="per_chunk"``, copies of the chunks) gives; with neither
source the error stays.
"""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes.converter import ColumnKeys, episodes_to_rollout
from episodes.converter.from_blocks import bootstrap_chunks, stored_value_fn
from episodes.envs.torch_cartpole import TorchCartPole
from episodes.runner import EnvRunner

GAMMA = 0.9
KEYS = ColumnKeys(actor_hidden=("h",))


def value_fn(obs):
    """Distinct per observation, exact in float32 (numpy or torch alike)."""
    return obs[..., 0] * 4 + obs[..., 1]


class Recurrent:
    """A stateful policy recording its hidden state, as a recurrent one would."""

    def initial_state(self, n):
        return np.zeros((n, 2), np.float32)

    def __call__(self, obs, state):
        obs = np.asarray(obs)
        n = len(obs)
        extras = {
            "vf_preds": state[:, 0].copy(),
            "action_logp": np.zeros(n, np.float32),
            "h": state[:, None, :].copy(),  # [N, num_layers=1, hidden=2]
        }
        # Always left: some episodes fall (terminated), others reach the time limit.
        return np.zeros(n, np.int64), extras, np.tanh(state + obs[:, :2])


def sample(window: str, steps: int = 30, seed: int = 0):
    env = gym.make_vec("CartPole-v1", 3, vectorization_mode="sync", max_episode_steps=9)
    runner = EnvRunner(env, Recurrent(), seed=seed, window=window)
    runner.sample(steps)  # a second call: chunks that continue an episode
    return runner.sample(steps)


def store(chunks, indices=None) -> None:
    """``V(last observation)`` into the chunks that need one (or those of ``indices``)."""
    for k in bootstrap_chunks(chunks).tolist() if indices is None else indices:
        last = np.asarray(chunks[k].get_observations(-1))[None]
        chunks[k].custom_data[KEYS.bootstrap_value] = float(value_fn(last)[0])


def assert_same(got, want) -> None:
    assert torch.equal(got.last_values, want.last_values)
    assert (got.mask is None) == (want.mask is None)
    if want.mask is not None:
        assert torch.equal(got.mask, want.mask)
    for name, tensor in want.storage.tensors.items():
        assert torch.equal(got.storage.tensors[name], tensor), name


@pytest.mark.parametrize("window", ["vector_steps", "transitions"])
def test_stored_values_take_the_fast_path(window):
    chunks = sample(window)
    table = chunks.recording.table
    assert (table.truncated & ~table.terminated).any() and table.terminated.any()
    if window == "vector_steps":
        assert chunks.recording.dead_cells() is not None  # the window holds reset steps
    store(chunks)
    assert chunks.built() == sorted(bootstrap_chunks(chunks).tolist())
    got = episodes_to_rollout(chunks, gamma=GAMMA, keys=KEYS)
    assert chunks.built() == sorted(bootstrap_chunks(chunks).tolist())  # nothing else built
    want = episodes_to_rollout(chunks, gamma=GAMMA, keys=KEYS, value_fn=value_fn)
    assert_same(got, want)
    assert got.storage.shared  # the blocks' views: the fast path was taken


def test_stored_values_give_what_the_general_path_gives():
    chunks = sample("transitions")
    store(chunks)
    fast = episodes_to_rollout(chunks, gamma=GAMMA, keys=KEYS)
    general = episodes_to_rollout(copy.deepcopy(list(chunks)), gamma=GAMMA, keys=KEYS)
    assert_same(fast, general)


def test_a_vector_steps_window_matches_its_per_chunk_columns():
    chunks = sample("vector_steps")
    store(chunks)
    fast = episodes_to_rollout(chunks, gamma=GAMMA, keys=KEYS)
    per_chunk = episodes_to_rollout(chunks, gamma=GAMMA, keys=KEYS, layout="per_chunk")
    table, first = chunks.recording.table, chunks.recording.aligned_start
    columns = {id(group[0]): j for j, group in enumerate(per_chunk.groups)}
    rewards, their = fast.storage.rewards[..., 0], per_chunk.storage.rewards[..., 0]
    checked = 0
    for k in range(len(chunks)):
        j, env = columns.get(id(chunks[k])), int(table.env[k])
        length = int(table.stop[k] - table.first[k])
        if j is None or length == 0:
            continue
        rows = slice(int(table.first[k]) - first, int(table.stop[k]) - first)
        if table.terminated[k] or table.truncated[k]:
            assert torch.equal(rewards[rows, env], their[:length, j])
            continue
        # Still running: a per-chunk column shorter than T ends in a done step that takes
        # gamma * V(last obs), where the window's column leaves V to last_values.
        assert torch.equal(rewards[rows, env][:-1], their[: length - 1, j])
        stored = chunks[k].custom_data[KEYS.bootstrap_value]
        assert fast.last_values[env, 0].item() == np.float32(stored)
        bonus = np.float32(float(rewards[rows.stop - 1, env]) + GAMMA * stored)
        assert their[length - 1, j].item() == bonus
        checked += 1
    assert checked >= 1


def test_the_device_fast_path_reads_them_too():
    env = TorchCartPole(3, device="cpu", max_episode_steps=6)

    def policy(obs):
        zeros = torch.zeros(len(obs))
        return (obs[:, 2] > 0).long(), {"vf_preds": zeros, "action_logp": zeros}

    runner = EnvRunner(env, policy, seed=0, window="vector_steps")
    chunks = runner.sample(20)
    assert chunks.recording.device is not None
    store(chunks)
    got = episodes_to_rollout(chunks, gamma=GAMMA)
    want = episodes_to_rollout(chunks, gamma=GAMMA, value_fn=value_fn)
    assert_same(got, want)


MISSING = {
    "none stored (vector steps)": ("vector_steps", [], "bootstrap value"),
    "one missing (vector steps)": ("vector_steps", slice(1, None), "bootstrap value"),
    "none stored (transitions)": ("transitions", [], "need a bootstrap value"),
    "one missing (transitions)": ("transitions", slice(1, None), "need a bootstrap value"),
}


@pytest.mark.parametrize("window, which, message", MISSING.values(), ids=MISSING.keys())
def test_without_value_fn_or_stored_values_the_error_stays(window, which, message):
    chunks = sample(window)
    needed = bootstrap_chunks(chunks).tolist()
    store(chunks, needed[which] if isinstance(which, slice) else which)
    assert stored_value_fn(chunks, KEYS) is None
    with pytest.raises(ValueError, match=message):
        episodes_to_rollout(chunks, gamma=GAMMA, keys=KEYS)


@pytest.mark.parametrize("window", ["vector_steps", "transitions"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_bootstrap_chunks_are_those_bootstrap_observations_reads(window, seed):
    chunks = sample(window, steps=17, seed=seed)
    steps, envs, ongoing, observations = chunks.bootstrap_observations()
    table, indices = chunks.recording.table, bootstrap_chunks(chunks)
    cut, running = indices[: len(steps)], indices[len(steps) :]
    assert table.env[cut].tolist() == envs.tolist()
    assert table.last_step[cut].tolist() == steps.tolist()
    assert table.env[running].tolist() == ongoing.tolist()
    lasts = [np.asarray(chunks[k].get_observations(-1)) for k in indices.tolist()]
    np.testing.assert_array_equal(np.stack(lasts), observations)
