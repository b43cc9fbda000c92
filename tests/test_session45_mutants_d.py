"""Behaviour that hand-made mutants of ``episodes.runner.recorder`` showed no test pinned
(session 45, fourth batch).

Each test fails with a mutant (named beside it) applied, and passes on the code as it is.
Episode ids are read from ``EnvRunner.sample``'s chunks and its episode count from
``get_metrics``: a runner's ids are its prefix plus the episode's number (docs/api.md), and the
numbers of the episodes it started run 0, 1, 2, ... without gaps.
"""

from __future__ import annotations

import gymnasium as gym
import pytest

from episodes.runner import EnvRunner
from tests.runner._random_env import EnvSpec, Policy, RandomEnv


# mutant: `numbers = self.next_number + 1 + np.arange(...)` (a number skipped at every call)
@pytest.mark.parametrize("mode", ["NextStep", "SameStep", "Disabled"])
@pytest.mark.parametrize("window", ["transitions", "vector_steps"])
def test_episode_ids_number_the_runners_episodes_without_gaps(mode, window):
    """Ids are the runner's prefix plus the episode's number: the episodes a runner started are
    numbered 0, 1, 2, ... with none left out, whatever the calls (the first reset starts one a
    sub-env, each ending the next). Next-step windows hold back episodes whose reset step or
    first transitions a later call records; the other modes hand out every episode started
    before the call's last step."""
    specs = [EnvSpec("box", "discrete", rate, 0.0, 0.0) for rate in [0.5, 0.2, 0.9]]
    env = gym.vector.SyncVectorEnv([lambda s=s: RandomEnv(s) for s in specs], autoreset_mode=mode)
    runner = EnvRunner(env, Policy(env.single_action_space, False), seed=3, window=window)
    ids = {chunk.id_ for size in [3, 5, 2, 4] for chunk in runner.sample(size)}
    started = 3 + runner.get_metrics()["num_episodes"]
    assert len({id_[:24] for id_ in ids}) == 1
    numbers = {int(id_[24:], 16) for id_ in ids}
    assert len(numbers) > 6 and numbers <= set(range(started))
    if mode != "NextStep":
        assert numbers == set(range(max(numbers) + 1))
