"""A rollout's recording and conversion without temporaries they do not need (issue #12).

Two places of the converter's fast path held several ``[T, N]`` arrays at once where one
does: the gather positions of a next-step window (a transposed copy of the window, its
product and their sum, all int64: the converter's peak at 4096 CartPole sub-envs) and the
truncation bootstrap (final values, bonus and sum, all float64); and the chunk table of a
next-step call held a dense ``[rows, N]`` int64 array of episode numbers. The bounds below
are traced (``tracemalloc``), deterministic (seeded envs) and wide: about halfway between
what the new code needs and what the old needed. The results are pinned to what the earlier
formulas give, bit for bit.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes.converter import ColumnKeys, episodes_to_rollout
from episodes.converter.bootstrap import bootstrap_truncated_rewards
from episodes.converter.from_blocks import block_bootstrap, host_block_columns
from episodes.runner import EnvRunner

N, T = 2048, 24


class _TruncatingEnv(gym.vector.VectorEnv):
    """Next-step autoreset, 4-dim float32 observations, each sub-env truncated at random."""

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int, truncate_p: float = 0.05, reward: float = 1.0):
        self.num_envs = num_envs
        self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.truncate_p, self.reward = truncate_p, reward
        self._rng = np.random.default_rng(0)
        self._ending = np.zeros(num_envs, bool)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        self._rng = np.random.default_rng(seed)
        self._ending[:] = False
        return self._rng.normal(size=(self.num_envs, 4)).astype(np.float32), {}

    def step(self, actions: np.ndarray) -> tuple:
        n = self.num_envs
        obs = self._rng.normal(size=(n, 4)).astype(np.float32)
        rewards = np.where(self._rng.random(n) < 0.5, self.reward, -0.0)
        truncated = (self._rng.random(n) < self.truncate_p) & ~self._ending
        rewards[self._ending] = 0.0
        self._ending = truncated.copy()
        return obs, rewards, np.zeros(n, bool), truncated, {}


def _policy(obs: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    extras = {"vf_preds": obs[:, 0].copy(), "action_logp": obs[:, 1].copy()}
    return (obs[:, 2] > 0).astype(np.int64), extras


def _value_fn(obs: Any) -> np.ndarray:
    return np.asarray(obs)[:, 3].astype(np.float64) * 3.0


def _sampled(num_envs: int = N, calls: int = 3, **env_kwargs: Any) -> Any:
    runner = EnvRunner(_TruncatingEnv(num_envs, **env_kwargs), _policy, seed=0)
    for _ in range(calls - 1):
        runner.sample(T)
    return runner.sample(T)


def _traced_peak(fn: Callable[[], Any]) -> tuple[Any, int]:
    """``fn()`` and the peak of what it allocated and kept alive at once (tracemalloc)."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        out = fn()
        return out, tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()


def test_window_positions_need_one_array_at_a_time() -> None:
    assert _sampled().gather_plan("rewards") is not None  # next-step: windows not aligned
    chunks = _sampled()  # another sample: gather_plan keeps the positions it computed
    window = chunks.recording.window
    (_, positions), peak = _traced_peak(lambda: chunks.gather_plan("rewards"))
    cell = T * N * 8
    assert positions.nbytes == cell
    # One new [T, N] int64 array, about 1.2 here (before: a transposed copy, a product and a
    # sum, about 3.2).
    assert peak < 2.0 * cell, peak / cell
    # The same positions as the formula they stand for, C-ordered.
    expected = np.ascontiguousarray(window.T) * N + np.arange(N)
    assert positions.dtype == expected.dtype and positions.flags.c_contiguous
    np.testing.assert_array_equal(positions, expected)
    assert not np.shares_memory(positions, window)


def test_bootstrap_needs_one_array_at_a_time() -> None:
    chunks = _sampled()
    cols, rewards = host_block_columns(chunks, ColumnKeys(), "rl", None)
    steps = chunks.bootstrap_observations()[0]
    assert len(steps) > 100  # truncated endings to bootstrap
    (boot, _), peak = _traced_peak(
        lambda: block_bootstrap(chunks, cols, rewards, _value_fn, 0.9, "rl", None)
    )
    cell = T * N * 8
    assert boot.shape == (T, N) and boot.dtype == np.float64
    # The bootstrapped rewards, one new [T, N] float64 array, and what grows with the
    # ~2,300 truncated endings (the value call's input, its values, their cells): about 1.7
    # here; before, final values, bonus and sum at once: about 3.5.
    assert peak < 2.5 * cell, peak / cell


def _reference(chunks: Any, cols: Any, rewards: np.ndarray, gamma: float) -> np.ndarray:
    """The bootstrap as it was written before: ``bootstrap_truncated_rewards`` over a
    ``[T, N]`` array of final values."""
    steps, envs, _, needs_value = chunks.bootstrap_observations()
    if not len(steps):
        return rewards  # nothing truncated: left as it is (both before and now)
    values = _value_fn(needs_value)[: len(steps)]
    final_values = np.zeros_like(rewards)
    final_values[steps, envs] = values
    return bootstrap_truncated_rewards(rewards, cols.truncated, final_values, gamma)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # 1e308 returns
@settings(max_examples=15, deadline=None)
@given(
    num_envs=st.integers(1, 12),
    calls=st.integers(1, 4),
    truncate_p=st.sampled_from([0.0, 0.2, 0.6]),
    reward=st.sampled_from([1.0, -0.0, 1e308, float("inf"), float("nan")]),
    gamma=st.sampled_from([0.0, 0.5, 0.99, 1.0]),
)
def test_bootstrap_is_bit_identical_to_the_final_values_formula(
    num_envs: int, calls: int, truncate_p: float, reward: float, gamma: float
) -> None:
    chunks = _sampled(num_envs, calls, truncate_p=truncate_p, reward=reward)
    cols, rewards = host_block_columns(chunks, ColumnKeys(), "rl", None)
    got, _ = block_bootstrap(chunks, cols, rewards, _value_fn, gamma, "rl", None)
    want = _reference(chunks, cols, rewards, gamma)
    assert got.dtype == want.dtype and got.shape == want.shape
    # Bits, not values: -0.0 rewards come out as 0.0 and NaNs stay NaNs, as before.
    np.testing.assert_array_equal(got.view(np.uint64), want.view(np.uint64))


@pytest.mark.parametrize("gamma", [-0.1, 1.5, float("nan")], ids=["negative", "above-1", "nan"])
def test_bootstrap_still_refuses_a_bad_gamma(gamma: float) -> None:
    chunks = _sampled(64, 2, truncate_p=0.5)
    cols, rewards = host_block_columns(chunks, ColumnKeys(), "rl", None)
    before = rewards.copy()
    with pytest.raises(ValueError, match="gamma"):
        block_bootstrap(chunks, cols, rewards, _value_fn, gamma, "rl", None)
    np.testing.assert_array_equal(rewards, before)


def test_rollout_is_what_it_was() -> None:
    """The whole conversion, against the positions and bootstrap formulas it replaces."""
    chunks = _sampled(256, 3, truncate_p=0.2)
    rollout = episodes_to_rollout(chunks, gamma=0.9, value_fn=_value_fn)
    cols, rewards = host_block_columns(chunks, ColumnKeys(), "rl", None)
    want = _reference(chunks, cols, rewards, 0.9)
    np.testing.assert_array_equal(rollout.storage.rewards[..., 0].numpy(), want.astype(np.float32))
    window = chunks.recording.window
    flat = np.ascontiguousarray(window.T) * 256 + np.arange(256)
    obs = chunks.recording.blocks.obs.leaves[0].reshape(-1, 4)[flat]
    np.testing.assert_array_equal(rollout.storage.observations.numpy(), obs)


# -------------------------------------------------------------------------- the chunk table
def test_chunk_table_needs_no_dense_array_of_episode_numbers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The chunk table of a next-step call looks up the numbers of the episodes that follow
    its endings among the endings themselves: a dense ``[rows, N]`` int64 array of them was
    its largest temporary (the rows span the carried ones too), and the window's rows are
    found in place in the positions they come from. The chunks are pinned elsewhere
    (``test_batched_equals_per_step.py``: ids, numbers, every field)."""
    from episodes.runner import recorder, table

    peaks: list[float] = []

    def traced(blocks: Any, rows: int, *args: Any) -> Any:
        start = tracemalloc.get_traced_memory()[0]
        tracemalloc.reset_peak()
        out = table.chunk_table(blocks, rows, *args)
        state = args[2]
        span = rows - int(state[0].min())
        peaks.append((tracemalloc.get_traced_memory()[1] - start) / (span * N * 8))
        return out

    monkeypatch.setattr(recorder, "chunk_table", traced)
    runner = EnvRunner(_TruncatingEnv(N, truncate_p=0.02), _policy, seed=0)
    tracemalloc.start()
    try:
        for _ in range(5):
            runner.sample(T)
    finally:
        tracemalloc.stop()
    # In units of a [rows, N] int64 array over the rows the table looks at: the returned
    # window and table, flags, counts and other temporaries (2.2-2.5 here; 3.8-4.3 before).
    assert max(peaks) < 3.2, peaks
