"""Runner settings that can be read after construction: what they say is what sample() does."""

from __future__ import annotations

import gymnasium as gym
import pytest

from episodes.runner import EnvRunner, RandomPolicy


def _runner(**kwargs: object) -> EnvRunner:
    env = gym.make_vec("CartPole-v1", 3, vectorization_mode="sync")
    return EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0, **kwargs)


def test_len_lookback_buffer_is_read_only_and_what_chunks_get() -> None:
    runner = _runner(len_lookback_buffer=2)
    with pytest.raises(AttributeError):
        runner.len_lookback_buffer = 4  # type: ignore[misc]
    assert runner.len_lookback_buffer == 2
    runner.sample(5)
    second = runner.sample(5)
    # Continuing chunks carry the runner's lookback (a chunk starting its episode has none).
    continuing = [c for c in second if c.t_started > 0]
    assert continuing and {c.observations.lookback for c in continuing} == {2}


@pytest.mark.parametrize("value", ["no", 1, None], ids=["str", "int", "None"])
def test_numpy_episodes_set_later_is_checked_like_the_constructor_argument(value: object) -> None:
    runner = _runner()
    with pytest.raises(TypeError, match="numpy_episodes must be a bool"):
        runner.numpy_episodes = value  # type: ignore[assignment]
    assert runner.numpy_episodes is True


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
def test_numpy_episodes_set_later_takes_effect(numpy: bool) -> None:
    runner = _runner(numpy_episodes=not numpy)
    runner.sample(2)
    runner.numpy_episodes = numpy
    assert all(chunk.is_numpy == numpy for chunk in runner.sample(2))
