"""Hunt fixes (episode 10): empty numpy'd columns keep the layout their space gives, dict
columns in the constructor, Tuple items recorded as lists in padded reads, huge list indices,
float episode-slice steps.

1. An empty numpy'd column (an episode numpy'd with no steps, or before its reset) extended by
   a list of items (``concat_episode`` of a list-mode successor) reads them as appending them
   would: a Box item given as a Python list is a row, not a column per component.
2. A constructor column given as a dict is a batched struct: its items, not its keys.
3. An empty numpy'd column extended by a batch of strings is as wide as the longest one.
4. A Text part of a Dict or Tuple space keeps its ``max_length`` width when the episode is
   numpy'd before its first item.
5. Tuple items recorded as lists: a numpy'd read with fillers stacks, nested as the list-mode
   read is stacked (tuples where padded, lists where not).
6. An index-list member beyond int64 is out of range (``IndexError`` or the filler), not an
   ``OverflowError``.
7. An episode slice with a float or bool step is a ``TypeError``, as in buffer reads.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.buffer import InfiniteLookbackBuffer
from episodes.spaces import batch_in_space
from episodes.structs import data_equal

BOX = gym.spaces.Box(-1, 1, (2,), np.float32)
ROWS = [[0.5, 0.25], [1.0, -1.0]]


def _empty_numpy_buffer(space: gym.Space[Any] | None) -> InfiniteLookbackBuffer:
    buffer = InfiniteLookbackBuffer([], space=space)
    buffer.finalize()
    return buffer


# ------------------------------------------------- 1. untyped extend reads lists as append does
NESTED_SPACE = gym.spaces.Dict({"b": BOX, "n": gym.spaces.Discrete(3)})
EXTEND_CASES = {
    "box_rows_as_lists": (BOX, ROWS),
    "dict_with_box_part_as_lists": (
        NESTED_SPACE,
        [{"b": [0.5, 0.25], "n": 1}, {"b": [1.0, -1.0], "n": 2}],
    ),
    "tuple_with_box_part_as_lists": (
        gym.spaces.Tuple((BOX, gym.spaces.Discrete(3))),
        [([0.5, 0.25], 1), ([1.0, -1.0], 2)],
    ),
}


@pytest.mark.parametrize("case", list(EXTEND_CASES))
def test_extend_into_an_empty_numpy_column_stores_what_appends_store(case: str) -> None:
    space, items = EXTEND_CASES[case]
    appended, extended = _empty_numpy_buffer(space), _empty_numpy_buffer(space)
    for item in items:
        appended.append(item)
    extended.extend(list(items))
    assert data_equal(extended.get(), appended.get())
    stacked = InfiniteLookbackBuffer(list(items), space=space)
    stacked.finalize()  # list mode, then numpy'd: the same again
    assert data_equal(extended.get(), stacked.get())
    extended.append(items[0])  # and the column takes the next item


def test_concat_of_list_actions_into_a_numpy_reset_only_episode_keeps_rows() -> None:
    ep = SingleAgentEpisode("E", action_space=BOX)
    ep.add_env_reset(0)
    successor = ep.cut()
    for i, row in enumerate(ROWS):
        successor.add_env_step(i + 1, row, 1.0)
    ep.to_numpy()
    ep.concat_episode(successor)
    assert ep.get_actions().shape == (2, 2)
    assert ep.get_actions(0).tolist() == ROWS[0]
    ep.add_env_step(3, np.zeros(2, np.float32), 1.0)  # a valid step is still taken
    assert ep.get_actions().shape == (3, 2)


def test_concat_into_an_episode_numpy_d_before_its_reset_keeps_observation_rows() -> None:
    ep = SingleAgentEpisode("F", observation_space=BOX).to_numpy()
    ep.add_env_reset(np.zeros(2, np.float32))
    successor = SingleAgentEpisode("F", observation_space=BOX, observations=[[0.0, 0.0]])
    successor.add_env_step([0.5, 0.25], 0, 1.0)
    ep.concat_episode(successor)
    assert ep.get_observations().tolist() == [[0.0, 0.0], [0.5, 0.25]]


# ----------------------------------------------------------- 2. a dict column is a batched struct
def test_constructor_takes_a_dict_column_as_a_batch_of_items() -> None:
    obs = {"pos": np.arange(8.0).reshape(4, 2), "vel": np.ones(4)}  # 4 items, 2 keys
    ep = SingleAgentEpisode(
        observations=obs,
        actions=[0, 1, 2],
        rewards=[1.0, 2.0, 3.0],
        extra_model_outputs={"dist": {"mean": np.zeros(3), "std": np.ones(3)}},
        len_lookback_buffer=0,
    )
    assert len(ep) == 3 and len(ep.get_infos()) == 4
    assert [o["pos"].tolist() for o in ep.get_observations()] == obs["pos"].tolist()
    assert [float(d["std"]) for d in ep.get_extra_model_outputs("dist")] == [1.0, 1.0, 1.0]
    auto = SingleAgentEpisode(observations=obs, actions=[0, 1, 2], rewards=[1.0, 2.0, 3.0])
    assert len(auto) == 0 and auto.observations.lookback == 3  # "auto" counts the rewards


@pytest.mark.parametrize(
    "observations",
    [{"pos": 1.0}, {"pos": np.zeros((3, 2)), "vel": np.ones(2)}],
    ids=["no_leading_axis", "different_lengths"],
)
def test_constructor_refuses_a_dict_column_that_is_no_batch(observations: Any) -> None:
    with pytest.raises(TypeError, match="batched struct"):
        SingleAgentEpisode(observations=observations)


# ------------------------------------------------------ 3. a batch of strings into an empty column
def test_extend_of_strings_into_an_untyped_column_takes_the_longest() -> None:
    buffer = _empty_numpy_buffer(None)
    buffer.extend(np.array(["a", "abcd"]))
    assert buffer.get().tolist() == ["a", "abcd"]
    listed = _empty_numpy_buffer(None)
    listed.extend(["a", "abcd"])
    assert listed.get().tolist() == ["a", "abcd"]


def test_concat_of_string_outputs_into_a_numpy_reset_only_episode() -> None:
    ep = SingleAgentEpisode("E")
    ep.add_env_reset(0)
    successor = ep.cut()
    successor.add_env_step(1, 0, 1.0, extra_model_outputs={"tag": "a"})
    successor.add_env_step(2, 0, 1.0, extra_model_outputs={"tag": "abc"})
    ep.to_numpy()
    ep.concat_episode(successor)
    assert ep.get_extra_model_outputs("tag").tolist() == ["a", "abc"]


# -------------------------------------------------------------- 4. a nested Text part's width
ZEROS = np.zeros(2, np.float32)
TEXT_SPACES = {
    "dict": (gym.spaces.Dict({"t": gym.spaces.Text(4), "b": BOX}), lambda s: {"t": s, "b": ZEROS}),
    "tuple": (gym.spaces.Tuple((gym.spaces.Text(4), BOX)), lambda s: (s, ZEROS)),
}


@pytest.mark.parametrize("case", list(TEXT_SPACES))
def test_nested_text_part_keeps_its_max_length_when_numpy_d_early(case: str) -> None:
    space, item = TEXT_SPACES[case]
    assert space.contains(item("a")) and space.contains(item("abcd"))
    ep = SingleAgentEpisode(action_space=space).to_numpy()
    ep.add_env_reset(0)
    ep.add_env_step(1, item("a"), 1.0)
    ep.add_env_step(2, item("abcd"), 1.0)  # valid, longer: taken
    actions = ep.get_actions()
    texts = actions["t"] if case == "dict" else actions[0]
    assert texts.tolist() == ["a", "abcd"]


def test_nested_text_part_keeps_its_max_length_through_concat() -> None:
    space, item = TEXT_SPACES["tuple"]
    ep = SingleAgentEpisode("E", action_space=space)
    ep.add_env_reset(0)
    successor = ep.cut()
    successor.add_env_step(1, item("a"), 1.0)
    ep.to_numpy()
    ep.concat_episode(successor)
    ep.add_env_step(2, item("abcd"), 1.0)
    assert ep.get_actions()[0].tolist() == ["a", "abcd"]


# ------------------------------------------------------- 5. Tuple items recorded as lists, padded
TUPLE = gym.spaces.Tuple((gym.spaces.Discrete(3), BOX))


def _tuple_episode() -> SingleAgentEpisode:
    item = [1, np.zeros(2, np.float32)]
    assert TUPLE.contains(item)
    ep = SingleAgentEpisode(observation_space=TUPLE, action_space=TUPLE)
    ep.add_env_reset(item)
    for _ in range(3):
        ep.add_env_step(item, item, 1.0)
    return ep


PADDED_READS = {
    "list_right": ([0, 5], {}),
    "list_left": ([-2, 0], {"neg_index_as_lookback": True}),
    "slice_right": (slice(2, 5), {}),
    "slice_left": (slice(-1, 2), {"neg_index_as_lookback": True}),
    "all_fillers": (slice(4, 6), {}),
    "unpadded_list": ([0, 2], {}),
    "unpadded_slice": (slice(0, 3), {}),
}


@pytest.mark.parametrize("case", list(PADDED_READS))
def test_padded_reads_of_tuple_items_recorded_as_lists(case: str) -> None:
    indices, kwargs = PADDED_READS[case]
    listed = _tuple_episode()
    numpyd = copy.deepcopy(listed).to_numpy()
    got = numpyd.get_actions(indices, fill=0, **kwargs)
    want = batch_in_space(listed.get_actions(indices, fill=0, **kwargs), TUPLE)
    assert type(got) is type(want)  # tuples where padded, lists where not: as list mode
    assert data_equal(got, want)


def test_an_out_of_range_int_read_of_tuple_items_recorded_as_lists_is_the_filler() -> None:
    numpyd = _tuple_episode().to_numpy()
    assert data_equal(numpyd.get_actions(5, fill=0), (np.array(0), np.zeros(2, np.float32)))


# ---------------------------------------------------------------- 6. list indices beyond int64
BIG = 10**20


@pytest.mark.parametrize(
    "indices", [[BIG], [0, BIG], [-BIG], [np.uint64(2**63)]], ids=["big", "mixed", "neg", "uint64"]
)
def test_an_index_list_member_beyond_int64_is_out_of_range(indices: list[Any]) -> None:
    ep = SingleAgentEpisode(
        observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 2.0], len_lookback_buffer=0
    )
    with pytest.raises(IndexError, match="out of range"):
        ep.get_observations(indices)
    filled = ep.get_observations(indices, fill=-1)
    assert filled == [0 if i == 0 else -1 for i in indices]
    before = copy.deepcopy(ep)
    with pytest.raises(IndexError, match="out of range"):
        ep.set_actions(new_data=[5] * len(indices), at_indices=indices)
    assert ep == before
    numpyd = copy.deepcopy(ep).to_numpy()
    assert numpyd.get_observations(indices, fill=-1).tolist() == filled


# --------------------------------------------------------------- 7. episode slice step types
@pytest.mark.parametrize(
    "step",
    [1.0, True, np.float64(1.0), np.bool_(True)],
    ids=["float", "bool", "np_float", "np_bool"],
)
def test_an_episode_slice_with_a_float_or_bool_step_is_a_type_error(step: Any) -> None:
    ep = SingleAgentEpisode(
        observations=[0, 1, 2, 3], actions=[1, 2, 3], rewards=[1.0, 2.0, 3.0], len_lookback_buffer=0
    )
    with pytest.raises(TypeError, match="slice step must be an int"):
        ep[0:2:step]
    with pytest.raises(TypeError, match="slice step must be an int"):
        ep.get_observations(slice(0, 2, step))  # as buffer reads refuse it
    assert ep[0 : 2 : np.int64(1)].get_observations() == [0, 1, 2]
    with pytest.raises(ValueError, match="step 1 or None"):
        ep[0:2:2]


def test_an_empty_dict_column_is_no_column_given():
    """``infos={}`` meant "the default infos" before dict columns were batches (RLlib: falsy)."""
    from episodes import SingleAgentEpisode

    given = {"observations": [0, 1], "actions": [1], "rewards": [1.0]}
    ep, default = SingleAgentEpisode(**given, infos={}), SingleAgentEpisode(**given)
    assert ep.get_state() | {"id_": None} == default.get_state() | {"id_": None}
    assert len(SingleAgentEpisode(infos={})) == 0
