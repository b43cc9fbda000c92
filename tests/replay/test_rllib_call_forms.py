"""Calls RLlib 2.60's replay code makes, taken here as RLlib takes them.

RLlib's DQN samples with ``batch_length_T=0`` for a stateless module, passes ``module_id`` to
the counters and to ``update_priorities``, and its prioritized buffer's ``add`` takes a
``weight``: the new steps' starting priority.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer


def _episode(id_: str, steps: int = 3) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[float(i) for i in range(steps + 1)],
        actions=[0] * steps,
        rewards=[1.0] * steps,
        len_lookback_buffer=0,
    )


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_batch_length_zero_is_no_sequences(cls: Any) -> None:
    a, b = cls(20, seed=0), cls(20, seed=0)
    for buf in (a, b):
        buf.add(_episode("a"))
    zero, none = a.sample(4, batch_length_T=0), b.sample(4)
    assert zero.keys() == none.keys()
    assert zero["obs"].tolist() == none["obs"].tolist()
    chunks = a.sample(2, batch_length_T=0, sample_episodes=True)
    assert [len(c) for c in chunks] == [3, 3]  # whole episodes, as without batch_length_T


COUNTERS = [
    "get_num_episodes",
    "get_num_episodes_evicted",
    "get_num_timesteps",
    "get_added_timesteps",
    "get_sampled_timesteps",
]


@pytest.mark.parametrize("name", COUNTERS)
def test_counters_take_a_module_id(name: str) -> None:
    buf = EpisodeReplayBuffer(20, seed=0)
    buf.add(_episode("a"))
    buf.sample(2)
    counter = getattr(buf, name)
    assert counter(None) == counter(module_id="default_policy") == counter()


def test_update_priorities_takes_a_module_id_keyword() -> None:
    buf = PrioritizedEpisodeReplayBuffer(20, seed=0)
    buf.add(_episode("a"))
    batch = buf.sample(2)
    buf.update_priorities(np.array([4.0, 4.0]), module_id="default_policy")
    assert buf.get_priorities(batch["indices"]).tolist() == [4.0, 4.0]


WEIGHTS: dict[str, tuple[Any, Any]] = {
    # name: (weight, the new steps' priorities, or the refusal's words)
    "none: the max priority": (None, [2.0] * 3),
    "a weight": (9.0, [9.0] * 3),
    "a numpy weight": (np.float32(0.5), [0.5] * 3),
    "below the floor: floored as update_priorities floors": (1e-300, [1e-12] * 3),
    "zero": (0.0, "weight must be a finite priority > 0"),
    "NaN": (float("nan"), "weight must be a finite priority > 0"),
    "a string": ("1", "weight must be a finite priority > 0"),
}


@pytest.mark.parametrize("case", list(WEIGHTS))
def test_add_weight_is_the_starting_priority(case: str) -> None:
    weight, expected = WEIGHTS[case]
    buf = PrioritizedEpisodeReplayBuffer(20, seed=0)
    buf.max_priority = 2.0
    if isinstance(expected, str):
        with pytest.raises(ValueError, match=expected):
            buf.add(_episode("a"), weight=weight)
        assert buf.get_num_timesteps() == 0
        return
    buf.add(_episode("a"), weight=weight)
    assert buf.get_priorities(buf.get_episode_indices("a")).tolist() == expected
    assert buf.max_priority == 2.0
    buf.add(_episode("b"))  # the next add starts at the max priority again
    assert buf.get_priorities(buf.get_episode_indices("b")).tolist() == [2.0] * 3
