"""Same-step final observations given as lists or tuples are recorded like every other mode.

gymnasium batches a sub-env's observations into the space's arrays, but hands its final one
on in ``infos["final_obs"]`` as the sub-env returned it: a Box row may be a list or a tuple.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

from episodes.runner import EnvRunner, RandomPolicy

BOX = spaces.Box(-1, 1, (2,), np.float32)
CASES: dict[str, tuple[gym.Space[Any], Any, Any]] = {
    # name: (observation space, reset observation, every step's observation)
    "Box row as a list": (BOX, [0.0, 0.0], [0.5, -0.5]),
    "Box row as a tuple": (BOX, (0.0, 0.0), (0.5, -0.5)),
    "MultiDiscrete as a list": (spaces.MultiDiscrete([3, 3]), [0, 0], [1, 2]),
    "Dict with a Box leaf as a list": (
        spaces.Dict({"pos": BOX, "n": spaces.Discrete(3)}),
        {"pos": [0.0, 0.0], "n": 0},
        {"pos": [0.5, -0.5], "n": 1},
    ),
}


def _record(case: str, mode: str) -> list[Any]:
    space, first, later = CASES[case]

    class Env(gym.Env):  # ends an episode every other step
        observation_space = space
        action_space = spaces.Discrete(2)

        def reset(self, *, seed: Any = None, options: Any = None) -> tuple[Any, dict]:
            super().reset(seed=seed)
            self.t = 0
            return first, {}

        def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
            self.t += 1
            return later, float(self.t), self.t == 2, False, {}

    env = gym.vector.SyncVectorEnv([Env] * 2, autoreset_mode=mode)
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    chunks = [chunk for _ in range(2) for chunk in runner.sample(3)]
    return [(c.get_observations(), c.get_rewards().tolist(), c.is_terminated) for c in chunks]


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: _plain(part) for key, part in value.items()}
    return np.asarray(value).tolist()


@pytest.mark.parametrize("case", list(CASES))
def test_same_step_records_what_next_step_records(case: str) -> None:
    same, nxt = _record(case, "SameStep"), _record(case, "NextStep")
    assert len(same) == len(nxt) > 2
    for (obs_a, rew_a, done_a), (obs_b, rew_b, done_b) in zip(same, nxt):
        assert _plain(obs_a) == _plain(obs_b)
        assert (rew_a, done_a) == (rew_b, done_b)
