"""Session 17 fixes: connectors.

1. A Tuple space's items recorded as lists (gymnasium's Tuple takes them) gave a list of leaves
   of the recorded dtype where no row needed padding and a tuple of the space's dtype where one
   did: chunks of one episode did not join, and episodes of tuple and list items neither.
2. A fill that cannot fill a Text leaf was refused only where a row needed padding.
3. Flattening Text observations raised numpy's bare "could not convert string to float".
4. A ConnectorPipeline call refused by a later connector left the earlier ones' columns in the
   caller's batch (contract §8.1).
"""

from __future__ import annotations

import re

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors import (
    AddLearnerColumns,
    ConnectorPipeline,
    FlattenObservations,
    FrameStack,
    PrevActionsPrevRewards,
)
from episodes.connectors.base import filler_for
from episodes.testing import check_lookback_across_cuts

PAIR = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(-1, 1, (2,), np.float32)))


def _list_items(n: int) -> list[list[object]]:
    return [[np.int32(i % 3), np.full(2, i / 10, np.float32)] for i in range(n)]


def _tuple_episode(numpy: bool, items: list[object]) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(
        "w",
        observations=items,
        actions=items[:-1],
        rewards=[1.0] * (len(items) - 1),
        observation_space=PAIR,
        action_space=PAIR,
        len_lookback_buffer=0,
    )
    return ep.to_numpy() if numpy else ep


# ------------------------------------------------------------- 1. Tuple items given as lists

TUPLE_CONNECTORS = {
    "frame_stack": (lambda: FrameStack(2), "obs"),
    "prev_actions": (
        lambda: PrevActionsPrevRewards(2, 0, one_hot_discrete=False),
        "prev_n_actions",
    ),
    "prev_actions_one_hot": (lambda: PrevActionsPrevRewards(2, 0), "prev_n_actions"),
    "frame_stack_flat": (lambda: FrameStack(2, flatten=True), "obs"),
}


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("case", sorted(TUPLE_CONNECTORS))
def test_tuple_list_items_give_one_structure_and_dtype_whatever_the_cut(case, numpy):
    make, key = TUPLE_CONNECTORS[case]
    whole = _tuple_episode(numpy, _list_items(6))
    chunk = whole.slice(slice(2, 5), len_lookback_buffer=2)  # no row needs padding
    a, b = make()([whole], {})[key], make()([chunk], {})[key]
    assert type(a) is type(b)
    if isinstance(a, tuple):
        for leaf_a, leaf_b in zip(a, b):
            assert leaf_a.dtype == leaf_b.dtype
            np.testing.assert_array_equal(leaf_b, leaf_a[2:5])
    else:
        np.testing.assert_array_equal(b, a[2:5])
    check_lookback_across_cuts(make(), whole, 2, 5, lookback=2)


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
def test_tuple_list_items_follow_the_space(numpy):
    whole = _tuple_episode(numpy, _list_items(6))
    chunk = whole.slice(slice(2, 5), len_lookback_buffer=2)
    out = FrameStack(2)([chunk], {})["obs"]
    assert isinstance(out, tuple)
    assert out[0].dtype == np.int64  # the space's dtype, as where a row is padded
    joined = FrameStack(2)([whole, chunk], {})["obs"]  # two chunks of one episode join
    assert joined[0].shape == (8, 2) and joined[1].shape == (8, 2, 2)


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
def test_episodes_of_tuple_and_list_items_join(numpy):
    as_lists = _tuple_episode(numpy, _list_items(3))
    as_tuples = _tuple_episode(numpy, [tuple(item) for item in _list_items(3)])
    out = AddLearnerColumns(columns=("obs", "actions"))([as_lists, as_tuples], {})
    for key in ("obs", "actions"):
        assert isinstance(out[key], tuple)
        assert out[key][0].shape == (4,) and out[key][1].shape == (4, 2)
    stacked = FrameStack(2)([as_lists, as_tuples], {})["obs"]
    assert isinstance(stacked, tuple) and stacked[1].shape == (4, 2, 2)


# --------------------------------------------------- 2. a Text fill checked before the read


def _text_obs(numpy: bool, nested: bool) -> SingleAgentEpisode:
    space: gym.Space = gym.spaces.Text(5)
    items: list[object] = ["ab", "cd", "ef", "gh"]
    if nested:
        space = gym.spaces.Dict({"t": space, "b": gym.spaces.Box(-1, 1, (1,))})
        items = [{"t": s, "b": np.zeros(1, np.float32)} for s in items]
    ep = SingleAgentEpisode(
        "x",
        observations=items,
        actions=[0] * 3,
        rewards=[1.0] * 3,
        observation_space=space,
        len_lookback_buffer=0,
    )
    return (ep.to_numpy() if numpy else ep).slice(slice(1, 3), len_lookback_buffer=1)


def _text_actions() -> SingleAgentEpisode:
    return SingleAgentEpisode(
        "y",
        observations=[0, 0, 0, 0],
        actions=["a", "b", "c"],
        rewards=[1.0] * 3,
        action_space=gym.spaces.Text(3),
        len_lookback_buffer=1,
    )


# Each call reads rows the lookback covers: no row needs padding, yet the fill is refused.
TEXT_FILLS = {
    "frame_stack_list": lambda fill: FrameStack(2, fill=fill)([_text_obs(False, False)], {}),
    "frame_stack_numpy": lambda fill: FrameStack(2, fill=fill)([_text_obs(True, False)], {}),
    "frame_stack_dict_numpy": lambda fill: FrameStack(2, fill=fill)([_text_obs(True, True)], {}),
    "prev_actions": lambda fill: PrevActionsPrevRewards(1, 0, fill=fill, one_hot_discrete=False)(
        [_text_actions()], {}
    ),
    "filler_for": lambda fill: filler_for(gym.spaces.Text(5), fill),
}


@pytest.mark.parametrize("case", sorted(TEXT_FILLS))
def test_a_fill_no_text_leaf_takes_is_refused_without_padding(case):
    if case == "frame_stack_dict_numpy":
        # Numbers beside the text: no one fill serves both, so it is refused only where a
        # read pads (a chunk that needs no padding stacks with the default fill).
        TEXT_FILLS[case](0.0)
        return
    with pytest.raises(ValueError, match=r"fill=0\.0 cannot fill a Text leaf"):
        TEXT_FILLS[case](0.0)
    TEXT_FILLS[case]("")  # a string fill is taken


# ------------------------------------------------------------ 3. Text observations flattened

FLATTENERS = {
    "flatten_observations": (FlattenObservations, "FlattenObservations' 'obs' column"),
    "frame_stack_flat": (lambda: FrameStack(1, fill="", flatten=True), "FrameStack's 'obs'"),
}


@pytest.mark.parametrize("nested", [False, True], ids=["text", "dict_with_text"])
@pytest.mark.parametrize("case", sorted(FLATTENERS))
def test_flattening_text_observations_is_refused_naming_column_and_space(case, nested):
    make, name = FLATTENERS[case]
    ep = _text_obs(False, nested)
    batch = {"given": 1}
    with pytest.raises(ValueError, match=rf"^{re.escape(name)}.*Text\(") as err:
        make()([ep], batch)
    assert "holds a Text space" in str(err.value)
    assert batch == {"given": 1}


@pytest.mark.parametrize("case", sorted(FLATTENERS))
def test_flattening_spaceless_strings_names_the_column(case):
    make, name = FLATTENERS[case]
    ep = SingleAgentEpisode(
        observations=["ab", "cd", "ef"], actions=[0, 0], rewards=[1.0, 1.0], len_lookback_buffer=0
    )
    with pytest.raises(ValueError, match=rf"^{re.escape(name)}.*strings"):
        make()([ep], {})


# ------------------------------------------------------ 4. a refused pipeline call changes nothing


def _box_episode() -> SingleAgentEpisode:
    return SingleAgentEpisode(
        "p",
        observations=[np.zeros(2, np.float32)] * 3,
        actions=[0, 1],
        rewards=[1.0, 1.0],
        observation_space=gym.spaces.Box(-1, 1, (2,), np.float32),
        len_lookback_buffer=0,
    )


def _refuse(episodes, batch):
    raise ValueError("refused")


REFUSING_PIPES = {
    # one-hot actions need an action space, which the episode lacks
    "shipped": lambda: [FrameStack(2), PrevActionsPrevRewards(1, 1)],
    "returns_new_dict": lambda: [lambda eps, b: {**b, "x": 1}, _refuse],
    "updates_in_place": lambda: [lambda eps, b: b.update(x=1) or b, _refuse],
    "removes_a_key": lambda: [lambda eps, b: b.pop("given") and b, _refuse],
}


@pytest.mark.parametrize("case", sorted(REFUSING_PIPES))
def test_a_refused_pipeline_call_leaves_the_batch_as_it_was(case):
    batch = {"given": np.zeros(1)}
    before = dict(batch)
    with pytest.raises(ValueError):
        ConnectorPipeline(REFUSING_PIPES[case]())([_box_episode()], batch)
    assert batch.keys() == before.keys()
    assert all(batch[key] is before[key] for key in before)


class _Tagged(dict):
    tag = 2


def _log_only(eps, batch):  # a hook that looks and returns nothing
    return None


def test_a_pipeline_call_that_succeeds_returns_what_its_last_connector_returned():
    batch = {"given": 1}
    out = ConnectorPipeline([FrameStack(2), PrevActionsPrevRewards(1, 1, one_hot_discrete=False)])(
        [_box_episode()], batch
    )
    assert out is batch  # the shipped connectors update the batch in place
    assert sorted(batch) == ["given", "obs", "prev_n_actions", "prev_n_rewards"]
    fresh = ConnectorPipeline([lambda eps, b: _Tagged(only=2)])([], batch)
    assert type(fresh) is _Tagged and fresh.tag == 2 and "obs" in batch  # the caller's kept
    # A last connector returning None is refused, naming it; the caller's batch is put back.
    other = {}
    with pytest.raises(TypeError, match=r"connector 1 \(_log_only\) returned None"):
        ConnectorPipeline([FrameStack(2), _log_only])([_box_episode()], other)
    assert other == {}
    assert ConnectorPipeline([FrameStack(2)])([_box_episode()])["obs"].shape == (2, 2, 2)
