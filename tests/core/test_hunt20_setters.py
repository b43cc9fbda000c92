"""Setters found by hunt 20: tuples of items, and values of object columns.

- a tuple (or dict) given for a slice or list of indices is a batch only where it nests like
  one item of the column; otherwise it is a ``TypeError`` with nothing changed (contract §3.7:
  a tuple is structure, never a list of items), instead of being split across the items
  (``(row_a, row_b)`` writing ``[a0, b0]``, ``[a1, b1]``);
- a numpy'd column of Python objects stores a list, tuple or array value itself, as list mode
  does (contract §3.7), for ``set``, ``extend`` and ``add_env_step`` alike.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer as Buf
from episodes import SingleAgentEpisode as Episode

BOX = gym.spaces.Box(-9.0, 9.0, (2,), np.float32)
PAIR = gym.spaces.Tuple((BOX, BOX))


def _f32(*values: float) -> np.ndarray:
    return np.array(values, np.float32)


def _episode(space: gym.Space[Any], numpy_: bool) -> Episode:
    ep = Episode(observation_space=space, action_space=gym.spaces.Discrete(2))
    zero = (_f32(0, 0), _f32(0, 0)) if space is PAIR else _f32(0, 0)
    ep.add_env_reset(zero)
    for _ in range(3):
        ep.add_env_step(zero, 0, 0.0)
    return ep.to_numpy() if numpy_ else ep


ROW_A, ROW_B, ROW_C = _f32(1, 2), _f32(3, 4), _f32(5, 6)
ITEM_1 = (_f32(1, 2), _f32(3, 4))
ITEM_2 = (_f32(5, 6), _f32(7, 8))

# ------------------------------------------------------------------- 1. tuples of items refused
REFUSED_TUPLES = {
    "two Box rows": (BOX, (ROW_A, ROW_B), slice(0, 2)),
    "three Box rows (not square)": (BOX, (ROW_A, ROW_B, ROW_C), slice(0, 3)),
    "two Box rows at a list of indices": (BOX, (ROW_A, ROW_B), [2, 0]),
    "two Tuple items": (PAIR, (ITEM_1, ITEM_2), slice(0, 2)),
}


@pytest.mark.parametrize("numpy_", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("name", REFUSED_TUPLES)
def test_a_tuple_of_items_is_refused_not_scrambled(name: str, numpy_: bool) -> None:
    space, new_data, where = REFUSED_TUPLES[name]
    ep = _episode(space, numpy_)
    before = copy.deepcopy(ep)
    with pytest.raises(TypeError, match="where the column's items hold one value"):
        ep.set_observations(new_data=new_data, at_indices=where)
    assert ep == before


@pytest.mark.parametrize("numpy_", [False, True], ids=["list", "numpy"])
def test_a_dict_batch_holding_a_tuple_of_rows_is_refused(numpy_: bool) -> None:
    space = gym.spaces.Dict({"a": BOX})
    ep = Episode(observation_space=space, action_space=gym.spaces.Discrete(2))
    ep.add_env_reset({"a": _f32(0, 0)})
    for _ in range(3):
        ep.add_env_step({"a": _f32(0, 0)}, 0, 0.0)
    if numpy_:
        ep.to_numpy()
    before = copy.deepcopy(ep)
    with pytest.raises(TypeError, match="where the column's items hold one value"):
        ep.set_observations(new_data={"a": (ROW_A, ROW_B)}, at_indices=slice(0, 2))
    assert ep == before


@pytest.mark.parametrize("numpy_", [False, True], ids=["list", "numpy"])
def test_the_same_rows_as_a_list_or_an_array_are_written_in_order(numpy_: bool) -> None:
    for new_data in ([ROW_A, ROW_B], np.stack([ROW_A, ROW_B])):
        ep = _episode(BOX, numpy_)
        ep.set_observations(new_data=new_data, at_indices=slice(0, 2))
        assert np.asarray(ep.get_observations(0)).tolist() == [1.0, 2.0]
        assert np.asarray(ep.get_observations(1)).tolist() == [3.0, 4.0]


@pytest.mark.parametrize("numpy_", [False, True], ids=["list", "numpy"])
def test_a_tuple_batch_of_a_tuple_column_is_still_a_batch(numpy_: bool) -> None:
    ep = _episode(PAIR, numpy_)
    batch = (np.stack([ITEM_1[0], ITEM_2[0]]), np.stack([ITEM_1[1], ITEM_2[1]]))
    ep.set_observations(new_data=batch, at_indices=slice(0, 2))
    assert [np.asarray(p).tolist() for p in ep.get_observations(0)] == [[1, 2], [3, 4]]
    assert [np.asarray(p).tolist() for p in ep.get_observations(1)] == [[5, 6], [7, 8]]


@pytest.mark.parametrize("numpy_", [False, True], ids=["list", "numpy"])
def test_a_tuple_item_at_an_int_index_is_one_item(numpy_: bool) -> None:
    ep = _episode(PAIR, numpy_)
    ep.set_observations(new_data=ITEM_2, at_indices=1)
    assert [np.asarray(p).tolist() for p in ep.get_observations(1)] == [[5, 6], [7, 8]]
    ep.set_observations(new_data=[ITEM_1, ITEM_2], at_indices=slice(0, 2))  # a list of items
    assert [np.asarray(p).tolist() for p in ep.get_observations(0)] == [[1, 2], [3, 4]]


def test_a_list_buffer_of_tuple_items_without_a_space_takes_a_tuple_batch() -> None:
    buf = Buf([(0, 0.0), (0, 0.0), (0, 0.0)])
    buf.set((np.array([1, 2]), np.array([0.5, 1.5])), at_indices=slice(0, 2))
    assert buf.get(0) == (1, 0.5) and buf.get(1) == (2, 1.5)
    scalars = Buf([0.0, 0.0, 0.0])
    with pytest.raises(TypeError, match="where the column's items hold one value"):
        scalars.set((np.array([1.0, 2.0]), np.array([3.0, 4.0])), at_indices=slice(0, 2))
    assert scalars.get() == [0.0, 0.0, 0.0]


# ----------------------------------------------------------- 2. object columns keep the value
def _object_episode(numpy_: bool) -> Episode:
    ep = Episode()
    ep.add_env_reset(0)
    for i, extra in enumerate([None, 1.5, "note"]):  # mixed values: an object column
        ep.add_env_step(i + 1, 0, 0.0, extra_model_outputs={"x": extra})
    return ep.to_numpy() if numpy_ else ep


OBJECT_VALUES = {
    "list": [1, 2],
    "tuple": (1, 2),
    "array": np.array([1, 2]),
    "ragged list": [[1, 2], [3]],
    "2-d array": np.zeros((2, 2)),
    "dict": {"k": 1},
}


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.shape == b.shape and bool((a == b).all())
    return type(a) is type(b) and a == b


@pytest.mark.parametrize("numpy_", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("name", OBJECT_VALUES)
def test_an_object_column_stores_the_value_itself(name: str, numpy_: bool) -> None:
    value = OBJECT_VALUES[name]
    ep = _object_episode(numpy_)
    ep.set_extra_model_outputs(key="x", new_data=value, at_indices=0)
    assert _same(ep.get_extra_model_outputs("x", 0), value)
    ep.set_extra_model_outputs(key="x", new_data=[value, "z"], at_indices=slice(1, 3))
    assert _same(ep.get_extra_model_outputs("x", 1), value)
    assert ep.get_extra_model_outputs("x", 2) == "z"
    ep.add_env_step(9, 0, 0.0, extra_model_outputs={"x": value})
    assert _same(ep.get_extra_model_outputs("x", -1), value)
    column = ep.extra_model_outputs["x"]
    column.extend([value, None])
    assert _same(column.get(-2), value) and column.get(-1) is None
    assert len(column) == 6


def test_an_object_leaf_of_a_nested_column_is_all_or_nothing() -> None:
    buf = Buf([{"a": None, "b": 0.0}, {"a": "s", "b": 1.0}])
    buf.finalize()
    before = copy.deepcopy(buf)
    with pytest.raises(ValueError, match="float64"):  # the second item's "b" is no number
        buf.set([{"a": [1, 2], "b": 2.0}, {"a": 3, "b": "x"}], at_indices=slice(0, 2))
    assert buf == before
    buf.set([{"a": [1, 2], "b": 2.0}, {"a": (3,), "b": 3.0}], at_indices=slice(0, 2))
    assert buf.get(0)["a"] == [1, 2] and buf.get(1)["a"] == (3,)


def test_a_getters_batch_with_list_laid_leaves_writes_back_into_a_dict_column() -> None:
    # A numpy'd column lays out a leaf recorded as lists as one array per position; that batch,
    # read with a getter, is written into another episode's Dict column as the rows it holds.
    space = gym.spaces.Dict(
        {"a": gym.spaces.MultiBinary(3), "b": gym.spaces.Box(-5, 5, (2,), np.float64)}
    )
    src = Episode(
        observations=[0, 1, 2], rewards=[0.0, 0.0], len_lookback_buffer=0,
        actions=[{"a": [0, 1, 1], "b": [1.0, 2.0]}, {"a": [1, 1, 0], "b": [3.0, 4.0]}],
    ).to_numpy()  # fmt: skip
    batch = src.get_actions(slice(0, 2))
    assert isinstance(batch["a"], list)  # the layout this test is about
    dst = Episode(
        observations=[0, 1, 2, 3], action_space=space, rewards=[0.0] * 3, len_lookback_buffer=0,
        actions=[{"a": np.array([1, 0, 1], np.int8), "b": np.array([0.5, 1.5])}] * 3,
    ).to_numpy()  # fmt: skip
    dst.set_actions(new_data=batch, at_indices=slice(0, 2))
    written = dst.get_actions()
    assert written["a"].tolist() == [[0, 1, 1], [1, 1, 0], [1, 0, 1]]
    assert written["b"].tolist() == [[1.0, 2.0], [3.0, 4.0], [0.5, 1.5]]
