"""Observations without a fixed layout (Sequence, Graph, OneOf) cannot form a training column.

Before, list-mode Sequence observations of equal lengths came out as one column per position
(swapping rows and columns) and ragged ones gave numpy's bare "Cannot batch items" error.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.converter import episodes_to_batch, episodes_to_rollout

SEQ = gym.spaces.Sequence(gym.spaces.Discrete(3))
GRAPH = gym.spaces.Graph(node_space=gym.spaces.Box(0, 1, (2,)), edge_space=None)


def _episode(space: gym.Space, obs: list) -> SingleAgentEpisode:
    n = len(obs) - 1
    return SingleAgentEpisode(
        observations=obs,
        observation_space=space,
        actions=[0] * n,
        action_space=gym.spaces.Discrete(2),
        rewards=[1.0] * n,
        extra_model_outputs={"vf_preds": [0.0] * n, "action_logp": [0.0] * n},
        len_lookback_buffer=0,
    )


def _graph(k: int) -> gym.spaces.GraphInstance:
    return gym.spaces.GraphInstance(
        nodes=np.full((k, 2), 0.5, np.float32), edges=None, edge_links=None
    )


CASES = {
    "sequence, equal lengths": (SEQ, [(1, 2), (2, 0), (0, 1), (1, 1)]),
    "sequence, ragged": (SEQ, [(1,), (2, 0), (), (1,)]),
    "graph": (GRAPH, [_graph(2), _graph(2), _graph(2)]),
}


@pytest.mark.parametrize(("space", "obs"), CASES.values(), ids=list(CASES))
def test_batch_refuses_observations_without_a_fixed_layout(space, obs) -> None:
    with pytest.raises(ValueError, match=r"observations: a (Sequence|Graph) space"):
        episodes_to_batch([_episode(space, obs)])


@pytest.mark.parametrize(("space", "obs"), CASES.values(), ids=list(CASES))
def test_rollout_refuses_observations_without_a_fixed_layout(space, obs) -> None:
    with pytest.raises(ValueError, match=r"observations: a (Sequence|Graph) space"):
        episodes_to_rollout([_episode(space, obs)], gamma=0.99, value_fn=lambda o: np.zeros(1))
