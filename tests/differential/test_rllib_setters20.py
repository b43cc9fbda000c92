"""Differential pins of hunt 20's setters: tuples of items, object columns, refused values.

Each test names its docs/deviations.md tag and asserts both sides: what RLlib 2.60 does and
what episodes does instead. Run with the reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_rllib_setters20.py
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

pytest.importorskip("ray.rllib")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

from tests.differential._rllib_ops import OSAE, RSAE  # noqa: E402

pytestmark = pytest.mark.differential

BOX = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
PAIR = gym.spaces.Tuple((BOX, BOX))


def _f32(*values: float) -> np.ndarray:
    return np.array(values, np.float32)


def _episode(cls: Any, numpy_: bool, space: gym.Space[Any] = BOX) -> Any:
    ep = cls("x", observation_space=space, action_space=gym.spaces.Discrete(3))
    zero = (_f32(0, 0), _f32(0, 0)) if space is PAIR else _f32(0, 0)
    ep.add_env_reset(zero)
    for _ in range(3):
        ep.add_env_step(zero, 1, 1.0)
    return ep.to_numpy() if numpy_ else ep


def _obs(ep: Any, t: int) -> Any:
    value = ep.get_observations(t)
    return [np.asarray(p).tolist() for p in value] if isinstance(value, tuple) else value.tolist()


# ------------------------------------------------------------------ tuples of items refused
ROWS = (_f32(0.1, 0.2), _f32(0.3, 0.4))
ITEMS = ((_f32(0.1, 0.2), _f32(0.3, 0.4)), (_f32(0.5, 0.6), _f32(0.7, 0.8)))


@pytest.mark.parametrize(
    "space, new_data, where",
    [(BOX, ROWS, slice(0, 2)), (PAIR, ITEMS, slice(0, 2)), (BOX, ROWS, [2, 0])],
    ids=["Box rows", "Tuple items", "Box rows at a list of indices"],
)
@pytest.mark.parametrize("numpy_", [False, True], ids=["list", "numpy"])
def test_a_tuple_of_items(space: Any, new_data: Any, where: Any, numpy_: bool) -> None:
    # "set-tuple-new-data"
    ours = _episode(OSAE, numpy_, space)
    before = copy.deepcopy(ours)
    with pytest.raises(TypeError, match="where the column's items hold one value"):
        ours.set_observations(new_data=new_data, at_indices=where)
    assert ours == before
    theirs = _episode(RSAE, numpy_, space)
    first = 1 if where == [2, 0] else 0  # the item written at ts=0
    if numpy_ and isinstance(where, slice):
        with pytest.raises(ValueError):  # dm-tree: the tuple is not the column's structure
            theirs.set_observations(new_data=new_data, at_indices=where)
    else:  # taken as a list of items, each written whole
        theirs.set_observations(new_data=new_data, at_indices=where)
        expected = new_data[first]
        assert _obs(theirs, 0) == (
            [p.tolist() for p in expected] if space is PAIR else expected.tolist()
        )


# -------------------------------------------------------------- object columns keep values
def _object_episode(cls: Any) -> Any:
    ep = cls("x")
    ep.add_env_reset(0)
    for i, extra in enumerate([None, 1.5, "note"]):
        ep.add_env_step(i + 1, 0, 0.0, extra_model_outputs={"x": extra})
    return ep.to_numpy()


@pytest.mark.parametrize("value", [[1, 2], (1, 2), np.array([1, 2]), {"k": 1}], ids=repr)
def test_an_object_column_stores_the_value_itself(value: Any) -> None:
    # "object-column-values"
    for how in ("set", "append"):
        ours = _object_episode(OSAE)
        assert ours.extra_model_outputs["x"].data.dtype == object
        if how == "set":
            ours.set_extra_model_outputs(key="x", new_data=value, at_indices=0)
        else:
            ours.add_env_step(9, 0, 0.0, extra_model_outputs={"x": value})
        got = ours.get_extra_model_outputs("x", 0 if how == "set" else -1)
        assert type(got) is type(value)
        assert np.array_equal(got, value) if isinstance(value, np.ndarray) else got == value
        theirs = _object_episode(RSAE)
        # RLlib: set takes an array only (dm-tree refuses a list, tuple or dict); append
        # takes a dict only (np.concatenate refuses a list, tuple or array).
        refused = not isinstance(value, np.ndarray) if how == "set" else not isinstance(value, dict)
        if refused:
            with pytest.raises(ValueError):
                if how == "set":
                    theirs.set_extra_model_outputs(key="x", new_data=value, at_indices=0)
                else:
                    theirs.add_env_step(9, 0, 0.0, extra_model_outputs={"x": value})
        elif how == "set":
            theirs.set_extra_model_outputs(key="x", new_data=value, at_indices=0)
            assert np.array_equal(theirs.get_extra_model_outputs("x", 0), value)
        else:
            theirs.add_env_step(9, 0, 0.0, extra_model_outputs={"x": value})
            assert theirs.get_extra_model_outputs("x", -1) == value


# ------------------------------------------------------------- values outside the space
OUT_OF_SPACE = {
    # name: (setter, kwargs, what RLlib raises (None: stores it))
    "action, int index": ("set_actions", {"new_data": 7, "at_indices": 0}, AssertionError),
    "obs, list of indices": (
        "set_observations",
        {"new_data": np.full((1, 2), 9.0, np.float32), "at_indices": [0]},
        AssertionError,
    ),
    "action in row 0 of a slice": (
        "set_actions",
        {"new_data": np.array([7, 0]), "at_indices": slice(0, 2)},
        IndexError,
    ),
    "action in row 1 of a slice": (
        "set_actions",
        {"new_data": np.array([0, 7]), "at_indices": slice(0, 2)},
        None,
    ),
}


@pytest.mark.parametrize("name", OUT_OF_SPACE)
def test_a_value_outside_the_space(name: str) -> None:  # "set-space-check"
    setter, kwargs, rllib_error = OUT_OF_SPACE[name]
    ours = _episode(OSAE, True)
    before = copy.deepcopy(ours)
    with pytest.raises(ValueError, match="not in the buffer's space"):
        getattr(ours, setter)(**kwargs)
    assert ours == before
    theirs = _episode(RSAE, True)
    if rllib_error is None:
        getattr(theirs, setter)(**kwargs)
        assert theirs.get_actions().tolist() == [0, 7, 1]  # 7 stored in a Discrete(3) column
    else:
        with pytest.raises(rllib_error):
            getattr(theirs, setter)(**kwargs)


# ------------------------------------------------------------- lists into numpy'd columns
def test_a_list_of_items_into_a_numpy_column() -> None:  # "set-list-into-numpy"
    ours, theirs = _episode(OSAE, True), _episode(RSAE, True)
    ours.set_actions(new_data=[2, 0], at_indices=slice(0, 2))
    assert ours.get_actions().tolist() == [2, 0, 1]
    with pytest.raises(ValueError):  # dm-tree: a list is not the column's structure
        theirs.set_actions(new_data=[2, 0], at_indices=slice(0, 2))
    assert theirs.get_actions().tolist() == [1, 1, 1]


def test_a_box_row_given_as_a_list_at_an_int_index() -> None:  # "set-list-into-numpy"
    ours, theirs = _episode(OSAE, True), _episode(RSAE, True)
    ours.set_observations(new_data=[0.5, 0.5], at_indices=0)
    assert ours.get_observations(0).tolist() == [0.5, 0.5]
    assert ours.get_observations(0).dtype == np.float32
    with pytest.raises(ValueError):
        theirs.set_observations(new_data=[0.5, 0.5], at_indices=0)
    assert theirs.get_observations(0).tolist() == [0.0, 0.0]
