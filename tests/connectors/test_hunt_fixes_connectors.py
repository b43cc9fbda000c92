"""Connector bugs a hunt found, pinned: list items read as rows, dtypes that follow the cut."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors import (
    AddLearnerColumns,
    FlattenObservations,
    FrameStack,
    PrevActionsPrevRewards,
)
from episodes.runner import EnvRunner

BOX = gym.spaces.Box(-50, 50, (2,), np.float32)


# ----------------------------------------------------------------- list items are rows
def list_episode(space: gym.Space, observations: list) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        "ep",
        observations=copy.deepcopy(observations),
        actions=[[0.5, -0.5], [0.25, -0.25], [0.0, 0.0]],
        rewards=[1.0, 1.0, 1.0],
        observation_space=space,
        action_space=gym.spaces.Box(-1, 1, (2,), np.float32),
        len_lookback_buffer=0,
        extra_model_outputs={"vf_preds": [0.0, 0.0, 0.0]},
    )


OBSERVATIONS = {
    "box": (BOX, [[0.0, 10.0], [1.0, 11.0], [2.0, 12.0], [3.0, 13.0]]),
    "dict of a box": (
        gym.spaces.Dict({"pos": BOX}),
        [{"pos": [float(t), 10.0 + t]} for t in range(4)],
    ),
}
CONNECTORS = {
    "AddLearnerColumns": AddLearnerColumns,
    "FrameStack": lambda: FrameStack(2),
    "FrameStack(flatten)": lambda: FrameStack(2, flatten=True),
    "FlattenObservations": FlattenObservations,
    "PrevActionsPrevRewards": lambda: PrevActionsPrevRewards(2, 1),
    "FrameStack(inference)": lambda: FrameStack(3, inference=True),
}


def _equal(a, b) -> None:
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys()
        for key in a:
            _equal(a[key], b[key])
        return
    assert isinstance(a, np.ndarray), type(a)
    assert a.shape == b.shape and a.dtype == b.dtype
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("connector", CONNECTORS)
@pytest.mark.parametrize("case", OBSERVATIONS)
def test_list_mode_box_items_give_the_numpyd_episodes_rows(case: str, connector: str) -> None:
    space, observations = OBSERVATIONS[case]
    listed = list_episode(space, observations)
    numpyd = list_episode(space, observations).to_numpy()
    want = CONNECTORS[connector]()([numpyd], {})
    got = CONNECTORS[connector]()([listed], {})
    assert got.keys() == want.keys()
    for key in want:
        _equal(got[key], want[key])


# ----------------------------------------------------------- dtypes that follow the cut
def int32_policy(obs):  # e.g. torch's argmax(...).int(): int32 for an int64 Discrete space
    return np.zeros(len(obs), np.int32), {}


@pytest.mark.parametrize("numpy_mode", [True, False], ids=["numpyd", "list-mode"])
@pytest.mark.parametrize("one_hot", [False, True])
def test_prev_actions_dtype_does_not_depend_on_the_cut(numpy_mode: bool, one_hot: bool) -> None:
    env = gym.make_vec("CartPole-v1", 1, vectorization_mode="sync")
    runner = EnvRunner(env, int32_policy, seed=0, len_lookback_buffer=2)
    first, second = runner.sample(3)[0], runner.sample(3)[0]
    assert first.id_ == second.id_ and second.actions.lookback == 2
    if not numpy_mode:  # the same chunks rebuilt in list mode
        first, second = (_as_lists(c) for c in (first, second))
    prev = PrevActionsPrevRewards(2, 0, one_hot_discrete=one_hot)
    padded = prev([first], {})["prev_n_actions"]
    through_lookback = prev([second], {})["prev_n_actions"]
    assert padded.dtype == through_lookback.dtype
    assert padded.dtype == (np.float32 if one_hot else np.int64)


def _as_lists(chunk: SingleAgentEpisode) -> SingleAgentEpisode:
    lookback = chunk.actions.lookback
    observations = chunk.get_observations(slice(-lookback, None), neg_index_as_lookback=True)
    actions = chunk.get_actions(slice(-lookback, None), neg_index_as_lookback=True)
    rewards = chunk.get_rewards(slice(-lookback, None), neg_index_as_lookback=True)
    return SingleAgentEpisode(
        chunk.id_,
        observations=list(observations),
        actions=list(actions),
        rewards=list(rewards),
        observation_space=chunk.observation_space,
        action_space=chunk.action_space,
        len_lookback_buffer=lookback,
        t_started=chunk.t_started,
    )


def float32_frames_in_a_float64_box(numpy_mode: bool) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(
        observation_space=gym.spaces.Box(-1, 1, (2,), np.float64),
        action_space=gym.spaces.Discrete(2),
    )
    ep.add_env_reset(np.zeros(2, np.float32))
    for t in range(5):
        ep.add_env_step(np.full(2, t / 10, np.float32), 0, 1.0)
    return ep.to_numpy() if numpy_mode else ep


@pytest.mark.parametrize("numpy_mode", [True, False], ids=["numpyd", "list-mode"])
@pytest.mark.parametrize("fill", [0.0, np.float32(0), 0], ids=repr)
def test_frame_stack_dtype_does_not_depend_on_the_cut(numpy_mode: bool, fill) -> None:
    ep = float32_frames_in_a_float64_box(numpy_mode)
    late = ep.slice(slice(3, 5), len_lookback_buffer=3)  # reads its frames through the lookback
    stack = FrameStack(2, fill=fill)
    whole, cut = stack([ep], {})["obs"], stack([late], {})["obs"]
    assert whole.dtype == cut.dtype == np.float64
    np.testing.assert_array_equal(whole[3:], cut)
