"""Mutation testing found these unpinned: stale infos, truncated chunks as done, state copies."""

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer


def _long(id_, infos=None):
    return SingleAgentEpisode(
        id_, observations=[0.0] * 33, actions=[0] * 32, rewards=[1.0] * 32, infos=infos,
        terminated=True, len_lookback_buffer=0,
    )  # fmt: skip


def test_infos_of_compacted_rows_do_not_reach_a_later_episode():
    buffer = EpisodeReplayBuffer(64)
    buffer.add([_long("a"), _long("b")])
    buffer.add(_long("c", [{"k": 1}] * 33))
    buffer.add(_long("d"))  # evicts and compacts: "c"'s infos move, their old rows are cleared
    got = buffer.get_transitions(buffer.get_episode_indices("d"), include_infos=True)["infos"]
    assert all(info == {} for info in got)
    kept = buffer.get_transitions(buffer.get_episode_indices("c"), include_infos=True)["infos"]
    assert all(info == {"k": 1} for info in kept)


def _chunk(t0, observations, truncated=False):
    return SingleAgentEpisode(
        "a", observations=observations, actions=[0] * (len(observations) - 1),
        rewards=[1.0] * (len(observations) - 1), t_started=t0, truncated=truncated,
        len_lookback_buffer=0,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("adds", "stored"),
    [
        ([[_chunk(0, [0.0, 1.0], True)], [_chunk(1, [1.0, 2.0])]], [(1, True)]),
        ([[_chunk(0, [0.0, 1.0], True), _chunk(1, [1.0, 2.0])]], []),
        (
            [[_chunk(0, [0.0, 1.0])], [_chunk(1, [1.0, 2.0], True), _chunk(2, [2.0, 3.0])]],
            [(1, False)],
        ),
    ],
    ids=["stored truncated, then continued", "one add", "continued truncated, then continued"],
)
def test_a_truncated_episode_is_done_and_takes_no_continuation(adds, stored):
    buffer = EpisodeReplayBuffer(10)
    for add in adds[:-1]:
        buffer.add(add)
    assert [(len(e), e.is_truncated) for e in buffer.get_episodes()] == stored
    with pytest.raises(ValueError, match="done"):
        buffer.add(adds[-1])
    assert [(len(e), e.is_truncated) for e in buffer.get_episodes()] == stored


def test_a_state_shares_no_final_info_with_the_buffer():
    buffer = EpisodeReplayBuffer(10)
    buffer.add(
        SingleAgentEpisode(
            "a",
            observations=[0.0, 1.0],
            actions=[0],
            rewards=[1.0],
            infos=[{}, {"k": [1]}],
            len_lookback_buffer=0,
        )  # fmt: skip
    )
    buffer.get_state()["episodes"]["final_info"][0]["k"].append(2)
    assert buffer.get_episodes()[0].get_infos(-1) == {"k": [1]}


def test_the_first_chunk_of_an_add_gives_the_spaces_a_buffer_adopts():
    first, second = gym.spaces.Box(0, 1, (1,)), gym.spaces.Box(0, 2, (1,))

    def chunk(id_, observation_space, action_space):
        return SingleAgentEpisode(
            id_, observations=[[0.5], [0.5]], actions=[0], rewards=[1.0],
            observation_space=observation_space, action_space=action_space,
            len_lookback_buffer=0,
        )  # fmt: skip

    buffer = EpisodeReplayBuffer(10)
    buffer.add([chunk("a", first, None), chunk("b", second, gym.spaces.Discrete(2))])
    assert buffer.get_episodes()[1].observation_space == first


def test_a_state_with_masked_observations_is_refused():
    buffer = EpisodeReplayBuffer(10)
    buffer.add(
        SingleAgentEpisode(
            "a", observations=[0.0, 1.0], actions=[0], rewards=[1.0], len_lookback_buffer=0
        )
    )
    state = buffer.get_state()
    state["steps"]["obs"] = np.ma.array(
        state["steps"]["obs"], mask=np.ones(state["steps"]["obs"].shape, bool)
    )
    fresh = EpisodeReplayBuffer(10)
    with pytest.raises(ValueError):
        fresh.set_state(state)
    assert fresh.get_num_episodes() == 0
