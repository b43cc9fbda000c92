"""Value forms at the runner's and replay's edges, found by a scalar-forms hunt.

* Text or object flags from an env (``"False"``) are a ``ValueError`` naming the field; the
  host recorder read them by truthiness (every episode ended after one step).
* A list of observation rows from an env is refused at the reset: read as a nesting, sub-env 0
  was given every sub-env's values.
* Replay takes a Box observation recorded as a tuple in list mode as a row.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer
from episodes.runner import EnvRunner, RandomPolicy


class _Env(gym.vector.VectorEnv):  # type: ignore[type-arg]
    def __init__(self, flags: Any = None, listed: bool = False):
        self.num_envs, self.flags, self.listed, self.t = 2, flags, listed, 0
        self.metadata = {"autoreset_mode": "NextStep"}
        self.single_observation_space = gym.spaces.Box(-1e9, 1e9, (2,), np.float32)
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, 2)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, 2)

    def _obs(self) -> Any:
        obs = np.array([[self.t, k] for k in range(2)], np.float32)
        return list(obs) if self.listed else obs

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return self._obs(), {}

    def step(self, actions):
        self.t += 1
        done = np.zeros(2, bool) if self.flags is None else self.flags
        return self._obs(), np.ones(2, np.float32), done, np.zeros(2, bool), {}


@pytest.mark.parametrize("flags", [np.array(["False", "False"]), [None, True]])
def test_text_or_object_flags_are_refused(flags):
    env = _Env(flags=flags)
    with pytest.raises(ValueError, match="the env's terminated: got"):
        EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(2)


def test_number_flags_read_as_numpy_reads_them():
    env = _Env(flags=np.array([0, 0]))
    chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(3)
    assert [len(chunk) for chunk in chunks] == [3, 3]


def test_a_list_of_observation_rows_is_refused_at_the_reset():
    env = _Env(listed=True)
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    with pytest.raises(ValueError, match="got a list where a vector env gives one array"):
        runner.sample(2)


def test_replay_takes_box_items_recorded_as_tuples_as_rows():
    box = gym.spaces.Box(-5.0, 5.0, (2,), np.float32)
    episode = SingleAgentEpisode(
        "e",
        observations=[(0.0, 1.0), np.array([1.0, 2.0], np.float32), (2.0, 3.0)],
        actions=[0, 1],
        rewards=[1.0, 1.0],
        observation_space=box,
        len_lookback_buffer=0,
    )
    buffer = EpisodeReplayBuffer(10)
    buffer.add(episode)
    assert buffer.get_num_timesteps() == 2
    assert buffer.sample(2, n_step=1)["obs"].shape == (2, 2)
