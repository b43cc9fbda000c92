"""Runner chunks stay views of their blocks through refused and copied writes (hunt round 19).

* A refused ``concat_episode`` (a column widened between two calls) leaves every column a
  view of the block: ``SampledChunks.unchanged()`` stays True and a vector-steps window with
  a reset step still converts on the fast path.
* ``copy.copy`` of a chunk column's store shares the block views but still copies them before
  a change: a write through it never reaches the block (nor the next call's lookback).
* A complex value (Python's or numpy's) into a column of real numbers is refused, as other
  values the dtype would change are (contract §3.7): numpy would drop the imaginary part.
"""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer
from episodes.converter import episodes_to_rollout
from episodes.runner import EnvRunner, RandomPolicy


class _WideningPolicy:
    def __init__(self) -> None:
        self.floats = False

    def __call__(self, obs: np.ndarray):
        n = len(obs)
        extra = np.full(n, 0.5) if self.floats else np.full(n, 3, np.int8)
        zeros = np.zeros(n, np.float32)
        return np.zeros(n, np.int64), {"vf_preds": zeros, "action_logp": zeros, "x": extra}


def _zeros(obs: np.ndarray) -> np.ndarray:
    return np.zeros(len(obs))


def test_refused_concat_leaves_the_chunk_a_view_of_its_blocks():
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync", max_episode_steps=3)
    policy = _WideningPolicy()
    runner = EnvRunner(env, policy, seed=0, len_lookback_buffer=1, window="vector_steps")
    first = runner.sample(5)  # episodes of 3 steps: the window holds a reset step
    policy.floats = True  # the next call widens "x" from int8 to float64
    second = runner.sample(5)
    chunk = first[-1]
    successor = next(c for c in second if c.id_ == chunk.id_)
    before = copy.deepcopy(chunk)
    with pytest.raises(ValueError, match="cannot concat"):
        chunk.concat_episode(successor)
    assert chunk == before
    assert first.unchanged()
    stores = [c.store for c in chunk.named_columns().values() if hasattr(c.store, "detached")]
    assert stores and not any(store.detached for store in stores)
    episodes_to_rollout(first, gamma=0.9, value_fn=_zeros)  # the fast path still takes it


def test_shallow_copy_of_a_chunk_store_never_writes_into_the_block():
    env = gym.make_vec(
        "CartPole-v1", 1, vectorization_mode="sync", vector_kwargs={"autoreset_mode": "SameStep"}
    )
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0, len_lookback_buffer=2)
    calls = [runner.sample(1) for _ in range(4)]
    previous, following = calls[-2][-1], calls[-1][0]
    assert previous.id_ == following.id_
    lookback = following.get_rewards(slice(-2, 0), neg_index_as_lookback=True).tolist()
    store = copy.copy(previous.rewards.store)
    assert not store.detached
    store.set([len(store) - 1], [99.0])
    assert store.detached and store.items(len(store) - 1)[0] == 99.0
    assert following.get_rewards(slice(-2, 0), neg_index_as_lookback=True).tolist() == lookback
    assert calls[-2].unchanged() and calls[-1].unchanged()


COMPLEX = {
    "Python complex": 1 + 2j,
    "Python complex without imaginary part": 1 + 0j,
    "numpy complex64": np.complex64(1 + 2j),
    "0-d complex array": np.array(1 + 2j),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.bool_])
@pytest.mark.parametrize("name", list(COMPLEX))
def test_complex_values_into_real_columns_are_refused(name, dtype):
    buf = InfiniteLookbackBuffer(list(np.zeros(3, dtype)))
    buf.finalize()
    before = copy.deepcopy(buf)
    value = COMPLEX[name]
    for write in (lambda: buf.append(value), lambda: buf.set(value, at_indices=1)):
        with pytest.raises(ValueError, match="does not fit a numpy column"):
            write()
        assert buf == before
    with pytest.raises(ValueError, match="does not fit a numpy column"):
        buf.extend(np.full(2, value))
    assert buf == before


def test_complex_values_into_a_complex_column_are_kept():
    buf = InfiniteLookbackBuffer(list(np.zeros(2, np.complex128)))
    buf.finalize()
    buf.append(np.complex64(1 + 2j))
    assert buf[-1] == 1 + 2j
