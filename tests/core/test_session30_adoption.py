"""Columns whose first item chose their layout, found by an adoption hunt.

A refused ``concat_episode`` leaves ``self`` unchanged even where the join had emptied a
column: the head's one observation, taken out and put back, chose a narrower layout anew.
"""

from __future__ import annotations

import pickle

import pytest

from episodes import SingleAgentEpisode


def _head():
    episode = SingleAgentEpisode("a")
    episode.to_numpy()
    episode.add_env_reset("ab")
    episode.concat_episode(
        SingleAgentEpisode(
            "a",
            observations=["ab", "abcd", "ab"],
            actions=[0, 1],
            rewards=[1.0, 1.0],
            len_lookback_buffer=0,
        )
    )
    return episode.cut()  # one observation, "ab", in a column of four characters


def test_a_refused_concat_leaves_a_one_observation_head_as_it_was():
    head = _head()
    before = pickle.loads(pickle.dumps(head))
    bad = SingleAgentEpisode(
        "a",
        observations=["ab", "x", "y"],
        actions=[1, [1, 2]],
        rewards=[1.0, 1.0],
        t_started=head.t,
        len_lookback_buffer=0,
    )
    with pytest.raises(ValueError, match="nothing was changed"):
        head.concat_episode(bad)
    assert head == before
    assert head.observations.data.dtype == before.observations.data.dtype
    for episode in (head, before):
        episode.add_env_step("abcd", 0, 1.0)  # fits the column as it was
    assert head == before


def test_a_space_set_after_numpying_an_empty_column_gives_its_layout():
    import gymnasium as gym
    import numpy as np

    box = gym.spaces.Box(-9, 9, (2,), np.float32)
    late = SingleAgentEpisode("a")
    late.to_numpy()
    late.observation_space = box  # set after to_numpy
    early = SingleAgentEpisode("a", observation_space=box).to_numpy()
    after = SingleAgentEpisode("a", observation_space=box)
    for episode in (late, early, after):
        episode.add_env_reset([0.0, 1.0])
        episode.add_env_step([1.0, 2.0], 0, 1.0)
    after.to_numpy()
    assert late.observations.data.shape == after.observations.data.shape == (2, 2)
    assert late == early == after


def test_an_extra_output_first_given_at_a_step_chooses_its_layout_as_a_declared_one():
    import numpy as np

    declared = SingleAgentEpisode("a", extra_model_outputs={"vf": []})
    undeclared = SingleAgentEpisode("a")
    for episode in (declared, undeclared):
        episode.to_numpy()
        episode.add_env_reset(np.zeros(2, np.float32))
        episode.add_env_step(
            np.ones(2, np.float32), 0, 1.0, extra_model_outputs={"vf": np.float16(0.5)}
        )
    assert declared == undeclared
    successors = [episode.cut() for episode in (declared, undeclared)]
    assert successors[0] == successors[1]
    for successor in successors:  # emptied, the column takes the next first item anew
        successor.add_env_step(
            np.ones(2, np.float32), 0, 1.0, extra_model_outputs={"vf": np.float32(0.1)}
        )
    assert successors[0] == successors[1]
    assert successors[1].get_extra_model_outputs("vf").dtype == np.float32


def test_tuple_items_recorded_as_lists_nest_alike_numpyd_before_or_after():
    import gymnasium as gym

    space = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Discrete(4)))

    def recorded(numpy_first):
        episode = SingleAgentEpisode(
            "a", observation_space=space, action_space=gym.spaces.Discrete(2)
        )
        if numpy_first:
            episode.to_numpy()
        episode.add_env_reset([1, 2])
        episode.add_env_step([2, 3], 1, 1.0)
        return episode if numpy_first else episode.to_numpy()

    before, after = recorded(True), recorded(False)
    assert type(before.observations.data) is type(after.observations.data) is list
    assert before == after
    before.concat_episode(after.cut())  # and either joins the other
