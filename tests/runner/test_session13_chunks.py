"""Copies of a runner sample: a shallow copy shares its chunks as a list's copy does, and
edited infos travel with a pickled or deep copy without sending the chunk off the fast path."""

from __future__ import annotations

import copy
import pickle

import gymnasium as gym
import numpy as np
import pytest

torch = pytest.importorskip("torch")

from episodes.converter import episodes_to_rollout  # noqa: E402
from episodes.runner import EnvRunner, RandomPolicy  # noqa: E402


def _sample(window: str = "transitions"):
    env = gym.make_vec("CartPole-v1", 3, vectorization_mode="sync")
    runner = EnvRunner(
        env, RandomPolicy(env.action_space, seed=0), seed=0, window=window, len_lookback_buffer=2
    )
    return runner, runner.sample(12)


def test_a_shallow_copy_shares_every_built_chunk_changed_or_not() -> None:
    _, chunks = _sample()
    chunks[0].set_rewards(new_data=5.0, at_indices=0)
    unchanged = chunks[1]
    copied = copy.copy(chunks)
    assert copied[0] is chunks[0]
    assert copied[1] is unchanged
    assert copied == chunks


def test_chunks_built_after_the_copy_are_each_copys_own() -> None:
    _, chunks = _sample()
    copied = copy.copy(chunks)
    mine = copied[2]
    mine.set_rewards(new_data=7.0, at_indices=0)
    assert chunks[2] is not mine
    assert chunks[2].get_rewards(0) != 7.0


@pytest.mark.parametrize("window", ["transitions", "vector_steps"])
def test_later_calls_leave_a_shallow_copy_as_it_was(window: str) -> None:
    runner, chunks = _sample(window)
    shallow, deep = copy.copy(chunks), copy.deepcopy(chunks)
    for _ in range(4):
        runner.sample(12)
    assert shallow == deep
    for a, b in zip(shallow, deep):
        np.testing.assert_array_equal(a.get_observations(), b.get_observations())


def _policy(obs):
    n = len(obs)
    zeros = np.zeros(n, np.float32)
    return np.zeros(n, np.int64), {"vf_preds": zeros, "action_logp": zeros}


def _vector_steps_sample():
    """Three sub-envs, next-step mode, a window that holds reset steps (only the fast path)."""
    env = gym.make_vec("CartPole-v1", 3, vectorization_mode="sync")
    runner = EnvRunner(env, _policy, seed=0, window="vector_steps")
    for _ in range(20):
        chunks = runner.sample(8)
        if any(c.is_done for c in chunks):
            return chunks
    raise AssertionError("no episode ended")


def _in_place(chunk) -> None:
    chunk.get_infos(0)["note"] = "seen"


def _replaced(chunk) -> None:
    chunk.infos.set({"note": "seen"}, at_indices=0)


@pytest.mark.parametrize("edit", [_in_place, _replaced], ids=["in place", "replaced"])
@pytest.mark.parametrize(
    "copier",
    [lambda s: pickle.loads(pickle.dumps(s)), copy.deepcopy],
    ids=["pickle", "deepcopy"],
)
def test_edited_infos_travel_and_the_copy_still_converts(edit, copier) -> None:
    chunks = _vector_steps_sample()
    edit(chunks[0])
    assert chunks.unchanged()  # infos play no part in the conversion
    copied = copier(chunks)
    assert copied.unchanged()
    assert copied[0].get_infos(0) == {"note": "seen"}
    assert copied == chunks
    want = episodes_to_rollout(chunks, gamma=0.9, value_fn=lambda obs: obs[:, 0])
    got = episodes_to_rollout(copied, gamma=0.9, value_fn=lambda obs: obs[:, 0])
    assert torch.equal(want.mask, got.mask)
    for name, tensor in want.storage.tensors.items():
        assert torch.equal(tensor, got.storage.tensors[name]), name
    # A copy of the copy, edited again, carries both edits.
    copied[1].get_infos(0)["more"] = 1
    again = copier(copied)
    assert again.unchanged()
    assert again[0].get_infos(0) == {"note": "seen"} and again[1].get_infos(0)["more"] == 1


def test_a_torch_cpu_window_without_reset_steps_has_no_mask() -> None:
    """As on the host: asking a CPU tensor whether any cell is dead waits for nothing."""
    from episodes.envs.torch_cartpole import TorchCartPole

    def policy(obs):
        zeros = torch.zeros(len(obs))
        return (obs[:, 2] > 0).long(), {"vf_preds": zeros, "action_logp": zeros}

    env = TorchCartPole(4, autoreset_mode="NextStep")
    chunks = EnvRunner(env, policy, seed=0, window="vector_steps").sample(5)
    assert chunks.recording.dead_cells() is None
    rollout = episodes_to_rollout(chunks, gamma=0.9, value_fn=lambda obs: obs[:, 0])
    assert rollout.mask is None and rollout.storage.valid is None
    again = episodes_to_rollout(
        pickle.loads(pickle.dumps(chunks)), gamma=0.9, value_fn=lambda obs: obs[:, 0]
    )
    assert again.mask is None
