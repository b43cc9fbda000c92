"""Refusals of nested actions that name their cause (a hunt of the nested-actions feature).

List-mode items that agree with each other but not with the declared space were said to
"differ in structure" among themselves; dict items under a flat declared space got the words
for non-numeric values ("may nest them in dicts", which they did); and a crafted state whose
records repeat a Dict part was called a leaf that is not numeric. Each is refused, the buffer
unchanged, with words that say what is wrong.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer

S = gym.spaces


def chunk(actions: list[Any], space: Any, id_: str = "a") -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[np.zeros(2, np.float32)] * (len(actions) + 1),
        actions=actions,
        rewards=[0.0] * len(actions),
        action_space=space,
        len_lookback_buffer=0,
    )


# (name, actions, space, words in list mode, words numpy'd: None where to_numpy refuses them)
CASES = [
    (
        "Dict keys unlike the space",
        [{"a": 1}, {"a": 2}],
        S.Dict({"b": S.Discrete(3)}),
        r"actions: the items differ in structure from the declared space \(Dict keys\)$",
        r"actions: values nested unlike the Dict space$",
    ),
    (
        "Tuple size unlike the space",
        [np.array([1, 0, 1])] * 2,
        S.Tuple((S.Discrete(3), S.Discrete(3))),
        r"actions: the items differ in structure from the declared space \(Tuple size\)$",
        r"actions: values nested unlike the Tuple space$",
    ),
    (
        "dicts under a Box space",
        [{"x": 1}, {"x": 2}],
        S.Box(-1, 1, (2,), np.float32),
        r"actions: items nested unlike the declared space$",
        r"actions: items nested unlike the declared space$",
    ),
    (
        "Dict keys differing among the items, no space",
        [{"a": 1}, {"b": 2}],
        None,
        r"actions: the items differ in structure \(Dict keys\)$",
        None,
    ),
]


# Each case in list mode, and numpy'd where to_numpy takes its items.
FORMS = [(False, *c[1:4]) for c in CASES] + [(True, *c[1:3], c[4]) for c in CASES if c[4]]
FORM_IDS = [f"list-{c[0]}" for c in CASES] + [f"numpy-{c[0]}" for c in CASES if c[4]]


@pytest.mark.parametrize(("numpy", "actions", "space", "words"), FORMS, ids=FORM_IDS)
def test_nested_actions_unlike_their_space_are_refused_naming_it(
    numpy: bool, actions: list[Any], space: Any, words: str
) -> None:
    buf = EpisodeReplayBuffer(10, seed=0)
    buf.add(chunk([{"a": 0}, {"a": 1}], None, "kept"))  # the refusal must not touch it
    before = buf.get_state()
    ep = chunk(actions, space)
    if numpy:
        ep.to_numpy()
    with pytest.raises(TypeError, match=words):
        buf.add(ep)
    after = buf.get_state()
    assert after["num_timesteps"] == before["num_timesteps"] == 2
    assert buf.get_episode_ids() == ["kept"]


def test_a_state_whose_records_repeat_a_dict_part_is_refused_so() -> None:
    src = EpisodeReplayBuffer(10)
    src.add(chunk([{"x": 1}, {"x": 2}], None))
    state = src.get_state()
    state["steps"]["actions"] = np.zeros(2, [("'x'", [("0", "i8")], (2,))])
    target = EpisodeReplayBuffer(10)
    with pytest.raises(ValueError, match=r"a Dict or Tuple part holds several items \(\(2,\)\)"):
        target.set_state(state)
    assert len(target) == 0
