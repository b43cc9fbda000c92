"""An interrupt after the env stepped, while sample() builds its chunks, fails the runner."""

import gymnasium as gym
import pytest

import episodes.runner.env_runner as env_runner_module
from episodes.runner import EnvRunner, RandomPolicy


def _runner() -> EnvRunner:
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    return EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)


@pytest.mark.parametrize("where", ["SampledChunks", "add_time"])
def test_an_interrupt_while_the_call_ends_makes_later_calls_raise(monkeypatch, where):
    runner = _runner()
    runner.sample(5)

    def interrupt(*args, **kwargs):
        raise KeyboardInterrupt

    if where == "SampledChunks":
        monkeypatch.setattr(env_runner_module, "SampledChunks", interrupt)
    else:
        monkeypatch.setattr(runner.metrics, "add_time", interrupt)
    with pytest.raises(KeyboardInterrupt):
        runner.sample(5)
    monkeypatch.undo()
    with pytest.raises(RuntimeError, match="failed part-way"):
        runner.sample(5)
