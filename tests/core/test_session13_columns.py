"""Numpy column dtypes (session 13 hunt): object rows survive appends, and a column with a space
takes its dtypes from the space, not from the first value given.

1. A row of Python objects appended to a finalized column took the "row of the stored dtype"
   fast path, which keeps the row's bytes (pointers, for objects); the next read failed to
   rebuild them and lost every pending row.
2. The first value into an empty numpy'd column with a space chose the dtype: ``True`` made a
   Discrete action column bool (the action 2 was then refused), ``np.uint8(1)`` made it uint8
   (299 refused), and a Box row given as a Python list made a float32 Box column float64 (the
   episode's own stored observation then failed the Box check).
3. The same rule for a column numpy'd after its items: ``to_numpy`` of a list-mode episode and
   ``concat_episode`` of a list-mode successor into an empty numpy'd column stack observations
   and actions in the space's dtypes, and the converter and connectors read a list-mode
   episode's as its numpy'd episode holds them (a part with an item outside its space keeps the
   items' dtypes).
"""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from episodes.buffer import array_store
from episodes.structs import data_equal

# Box checks of Python lists defer to gymnasium, which warns that it casts them.
pytestmark = pytest.mark.filterwarnings("ignore:.*Casting input x to numpy array")

# ----------------------------------------------------------------------------- object rows
_PAIR = np.dtype([("a", object), ("b", np.float64)])
_PLAIN_PAIR = np.dtype([("a", np.int32), ("b", np.float64)])


def _objects(*values: object) -> np.ndarray:
    row = np.empty(len(values), object)
    row[:] = values
    return row


def _record(dtype: np.dtype, values: list[tuple[object, float]]) -> np.ndarray:
    row = np.empty(len(values), dtype)
    for i, value in enumerate(values):
        row[i] = value
    return row


# Rows of one column, each appended after the column is finalized.
OBJECT_ROWS = {
    "object row": [_objects(None, 1), _objects("a", None), _objects(2.5, "b")],
    "nested objects in cells": [
        _objects({"k": [1, 2]}, (3,)),
        _objects([None], {"z": "w"}),
    ],
    "2-d object rows": [
        np.array([[None, 1], ["x", 2.0]], dtype=object),
        np.array([[{}, ()], [[], "y"]], dtype=object),
    ],
    "structured with an object field": [
        _record(_PAIR, [("s", 1.0), (None, 2.0)]),
        _record(_PAIR, [([1], 3.0), ({"d": 1}, 4.0)]),
    ],
    "structured without objects (bytes fast path)": [
        _record(_PLAIN_PAIR, [(1, 1.0), (2, 2.0)]),
        _record(_PLAIN_PAIR, [(3, 3.0), (4, 4.0)]),
    ],
}


def _assert_rows(stored: np.ndarray, rows: list[np.ndarray]) -> None:
    assert stored.dtype == rows[0].dtype and len(stored) == len(rows)
    for got, want in zip(stored, rows):
        assert got.tolist() == want.tolist()


@pytest.mark.parametrize("rows", OBJECT_ROWS.values(), ids=list(OBJECT_ROWS))
@pytest.mark.parametrize("start", ["empty", "first row"])
def test_rows_of_objects_append_to_a_finalized_buffer_and_read_back(rows, start):
    buf = InfiniteLookbackBuffer([] if start == "empty" else [rows[0].copy()])
    buf.finalize()
    for row in rows[len(buf) :]:
        buf.append(row.copy())
    _assert_rows(buf.get(), rows)
    _assert_rows(buf.get(), rows)  # and again: a read leaves nothing behind
    _assert_rows(InfiniteLookbackBuffer.from_state(buf.get_state()).get(), rows)


def test_rows_of_objects_under_a_dict_append_and_read_back():
    rows = [{"x": _objects(None, 1)}, {"x": _objects("a", [2])}, {"x": _objects((), {})}]
    buf = InfiniteLookbackBuffer(rows[:1])
    buf.finalize()
    for row in rows[1:]:
        buf.append(row)
    assert [r.tolist() for r in buf.get()["x"]] == [r["x"].tolist() for r in rows]


def test_object_extra_outputs_of_a_numpy_episode_read_back():
    ep = SingleAgentEpisode()
    ep.add_env_reset(0.0)
    ep.to_numpy()
    given = [_objects("a", None), _objects("b", None), _objects(None, {"c": 1})]
    for i, value in enumerate(given):
        ep.add_env_step(float(i + 1), 0, 0.0, extra_model_outputs={"k": value})
    _assert_rows(ep.get_extra_model_outputs("k"), given)
    ep.validate()


def test_a_flush_that_fails_keeps_its_pending_rows(monkeypatch):
    rows = [np.full(2, float(i)) for i in range(4)]
    buf = InfiniteLookbackBuffer([rows[0]])
    buf.finalize()
    for row in rows[1:]:
        buf.append(row)  # float64 rows of the stored shape wait as bytes

    def failing(*args, **kwargs):
        raise MemoryError("no memory for the pending rows")

    with monkeypatch.context() as patch:
        patch.setattr(array_store.np, "frombuffer", failing)
        with pytest.raises(MemoryError):
            buf.get()
    assert len(buf) == 4
    assert buf.get().tolist() == [row.tolist() for row in rows]


# ----------------------------------------------------------- dtypes from the column's space
BOX3 = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
BOX2_64 = gym.spaces.Box(-1.0, 1.0, (2,), np.float64)
D300 = gym.spaces.Discrete(300)
MD = gym.spaces.MultiDiscrete([300, 3])
MB = gym.spaces.MultiBinary(3)
DICT = gym.spaces.Dict({"k": D300, "pos": gym.spaces.Box(-1.0, 1.0, (2,), np.float32)})
TUPLE = gym.spaces.Tuple((D300, gym.spaces.Box(-1.0, 1.0, (2,), np.float32)))

# (action space, first action, a later valid action, the leaf dtypes the column must have)
FIRST_ACTIONS = {
    "Discrete, Python bool": (D300, True, 299, [np.int64]),
    "Discrete, uint8": (D300, np.uint8(1), 299, [np.int64]),
    "Discrete, int8": (D300, np.int8(1), 299, [np.int64]),
    "Discrete, int32": (D300, np.int32(1), 299, [np.int64]),
    "MultiDiscrete, uint8 array": (
        MD,
        np.array([1, 2], np.uint8),
        np.array([299, 2]),
        [np.int64],
    ),
    "MultiDiscrete, list": (MD, [1, 2], np.array([299, 0]), [np.int64]),
    "MultiBinary, bool array": (MB, np.array([True, False, True]), np.array([1, 1, 0]), [np.int8]),
    "Box float64, float32 row": (
        BOX2_64,
        np.array([0.1, 0.2], np.float32),
        np.array([0.1, 0.3]),
        [np.float64],
    ),
    "Box float32, list row": (BOX3, [0.1, 0.2, 0.3], np.zeros(3, np.float32), [np.float32]),
    "Dict, bool and list parts": (
        DICT,
        {"k": True, "pos": [0.5, 0.25]},
        {"k": 299, "pos": np.zeros(2, np.float32)},
        [np.int64, np.float32],
    ),
    "Tuple given as a list": (
        TUPLE,
        [np.uint8(1), [0.5, 0.25]],
        (299, np.zeros(2, np.float32)),
        [np.int64, np.float32],
    ),
}


def _leaf_dtypes(buf: InfiniteLookbackBuffer) -> list[np.dtype]:
    return [leaf.dtype for leaf in buf.store.leaf_views()]


@pytest.mark.parametrize(
    ("space", "first", "later", "dtypes"), FIRST_ACTIONS.values(), ids=list(FIRST_ACTIONS)
)
@pytest.mark.parametrize("numpy_at", ["before reset", "after reset"])
def test_the_first_action_of_a_numpy_column_takes_the_space_dtype(
    space, first, later, dtypes, numpy_at
):
    assert space.contains(first) and space.contains(later)
    ep = SingleAgentEpisode(observation_space=BOX3, action_space=space)
    if numpy_at == "before reset":
        ep.to_numpy()
    ep.add_env_reset(np.zeros(3, np.float32))
    ep.to_numpy()
    ep.add_env_step(np.zeros(3, np.float32), first, 0.0)
    assert _leaf_dtypes(ep.actions) == [np.dtype(d) for d in dtypes]
    ep.add_env_step(np.zeros(3, np.float32), later, 0.0)  # was refused for True, uint8, ...
    ep.add_env_step(np.zeros(3, np.float32), ep.get_actions(0), 0.0)  # its own stored action
    assert data_equal(ep.get_actions(1), ep.actions.store.get(1))
    assert len(ep) == 3 and _leaf_dtypes(ep.actions) == [np.dtype(d) for d in dtypes]
    ep.validate()


@pytest.mark.parametrize(
    ("space", "first", "later", "dtypes"), FIRST_ACTIONS.values(), ids=list(FIRST_ACTIONS)
)
def test_the_first_observation_of_a_numpy_column_takes_the_space_dtype(space, first, later, dtypes):
    ep = SingleAgentEpisode(observation_space=space).to_numpy()
    ep.add_env_reset(first)
    assert _leaf_dtypes(ep.observations) == [np.dtype(d) for d in dtypes]
    stored = ep.get_observations(0)
    ep.add_env_step(stored, 0, 0.0)  # the episode's own observation is in its space
    ep.add_env_step(later, 0, 0.0)
    ep.set_observations(new_data=stored, at_indices=-1)
    assert _leaf_dtypes(ep.observations) == [np.dtype(d) for d in dtypes]
    ep.validate()


def test_values_are_kept_when_the_first_value_opens_the_column():
    ep = SingleAgentEpisode(observation_space=BOX3, action_space=D300).to_numpy()
    ep.add_env_reset([0.1, 0.2, 0.3])
    ep.add_env_step(np.zeros(3, np.float32), True, 0.0)
    assert ep.get_observations(0).tolist() == np.float32([0.1, 0.2, 0.3]).tolist()
    assert ep.get_actions().tolist() == [1]


def test_a_refused_first_step_leaves_the_column_open():
    ep = SingleAgentEpisode(observation_space=BOX3, action_space=D300)
    ep.add_env_reset(np.zeros(3, np.float32))
    ep.to_numpy()
    with pytest.raises(ValueError):
        ep.add_env_step(np.zeros(3, np.float32), True, "no reward")
    assert len(ep) == 0 and not ep.actions.store.typed
    ep.add_env_step(np.zeros(3, np.float32), 299, 0.0)
    assert ep.get_actions().dtype == np.int64


def test_columns_without_a_space_keep_the_first_value_dtype():
    ep = SingleAgentEpisode().to_numpy()
    ep.add_env_reset(np.float32(0.5))
    ep.add_env_step(np.float32(1.0), np.uint8(1), 0.0)
    assert ep.get_observations().dtype == np.float32
    assert ep.get_actions().dtype == np.uint8


# (space, value, expected) for in_space_dtypes; a cast that changes the value is not made.
IN_SPACE = {
    "Discrete bool": (D300, True, np.int64(1)),
    "Box list row": (BOX3, [0.5, 0.25, 0.0], np.float32([0.5, 0.25, 0.0])),
    "int Box, 2.5 left as given": (gym.spaces.Box(0, 5, (), np.int64), 2.5, 2.5),
    "Text left as given": (gym.spaces.Text(4), "ab", "ab"),
    "Dict of another key set left": (DICT, {"k": True}, {"k": True}),
    "Tuple keeps its list": (TUPLE, [True, [0.5, 0.0]], [np.int64(1), np.float32([0.5, 0.0])]),
}


@pytest.mark.parametrize(("space", "value", "want"), IN_SPACE.values(), ids=list(IN_SPACE))
def test_in_space_dtypes(space, value, want):
    from episodes.buffer.value_fit import in_space_dtypes

    got = in_space_dtypes(space, value)
    assert data_equal(got, want) and type(got) is type(want)


# (space, items, expected leaf dtypes of the stack in the space's dtypes)
STACKS = {
    "Discrete bools": (D300, [True, False], [np.int64]),
    "Discrete uint8": (D300, [np.uint8(1), np.uint8(2)], [np.int64]),
    "Box list rows": (BOX3, [[0.1, 0.2, 0.3], [0.0, 0.0, 0.0]], [np.float32]),
    "Dict": (DICT, [{"k": True, "pos": [0.5, 0.25]}], [np.int64, np.float32]),
    "an item outside the space keeps all": (D300, [True, np.uint8(1), 300], [np.int64]),
    "an item outside a Box keeps float64": (BOX3, [[0.1, 0.2, 0.3], [5.0, 0.0, 0.0]], [float]),
    "MultiBinary bools": (MB, [np.array([True, False, True])], [np.int8]),
}


@pytest.mark.parametrize(("space", "items", "dtypes"), STACKS.values(), ids=list(STACKS))
def test_in_space_batch_dtypes(space, items, dtypes):
    from episodes.buffer.value_fit import in_space_batch_dtypes
    from episodes.spaces import batch_in_space
    from episodes.structs import flatten

    stacked = batch_in_space(items, space)
    got = in_space_batch_dtypes(space, stacked, items)
    assert [leaf.dtype for leaf in flatten(got)[0]] == [np.dtype(d) for d in dtypes]
    assert (
        data_equal(
            [leaf.tolist() for leaf in flatten(got)[0]],
            [leaf.tolist() for leaf in flatten(stacked)[0]],
        )
        or space is BOX3
    )  # float32 rounds the rows


# The first actions whose own dtype is not the space's (a list of ints already stacks as int64).
TO_NUMPY = {k: v for k, v in FIRST_ACTIONS.items() if k != "MultiDiscrete, list"}


@pytest.mark.parametrize(
    ("space", "first", "later", "dtypes"), TO_NUMPY.values(), ids=list(TO_NUMPY)
)
def test_to_numpy_of_list_mode_actions_takes_the_space_dtype(space, first, later, dtypes):
    ep = SingleAgentEpisode(observation_space=BOX3, action_space=space)
    ep.add_env_reset(np.zeros(3, np.float32))
    ep.add_env_step(np.zeros(3, np.float32), first, 0.0)
    ep.to_numpy()
    assert _leaf_dtypes(ep.actions) == [np.dtype(d) for d in dtypes]
    ep.add_env_step(np.zeros(3, np.float32), later, 0.0)


# ------------------------------------- concat_episode of a list-mode successor, converters
def _successor(ep: SingleAgentEpisode, first_action, space) -> SingleAgentEpisode:
    """A list-mode chunk continuing ``ep`` (reset only) by one step."""
    return SingleAgentEpisode(
        ep.id_,
        observations=[np.zeros(3, np.float32), [0.5, 0.25, 0.0]],
        actions=[copy.deepcopy(first_action)],
        rewards=[1.0],
        observation_space=BOX3,
        action_space=space,
        t_started=ep.t,
        len_lookback_buffer=0,
    )


@pytest.mark.parametrize(
    ("space", "first", "later", "dtypes"), FIRST_ACTIONS.values(), ids=list(FIRST_ACTIONS)
)
def test_concat_of_a_list_mode_successor_into_an_empty_numpy_column(space, first, later, dtypes):
    numpyd = SingleAgentEpisode(observation_space=BOX3, action_space=space)
    numpyd.add_env_reset(np.zeros(3, np.float32))
    numpyd.to_numpy()
    listed = SingleAgentEpisode(numpyd.id_, observation_space=BOX3, action_space=space)
    listed.add_env_reset(np.zeros(3, np.float32))
    numpyd.concat_episode(_successor(numpyd, first, space))
    listed.concat_episode(_successor(listed, first, space))
    listed.to_numpy()
    assert _leaf_dtypes(numpyd.actions) == [np.dtype(d) for d in dtypes]
    for name in ("observations", "actions"):
        mine, theirs = getattr(numpyd, name).store, getattr(listed, name).store
        assert _leaf_dtypes(getattr(numpyd, name)) == _leaf_dtypes(getattr(listed, name)), name
        # Leaf by leaf: a Tuple given as a list is a tuple numpy'd before, a list after.
        assert data_equal(mine.leaf_views(), theirs.leaf_views()), name
    numpyd.add_env_step(np.zeros(3, np.float32), later, 0.0)  # was refused for True, uint8, ...
    numpyd.validate()


def _converter_episode(space, first, later, numpy: bool) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(
        "e",
        observations=[[0.1, 0.2, 0.3], [0.0, 0.5, -0.5], [0.25, 0.0, 1.0]],
        actions=[copy.deepcopy(first), copy.deepcopy(later)],
        rewards=[1.0, 0.5],
        observation_space=BOX3,
        action_space=space,
        extra_model_outputs={"vf_preds": [0.0, 0.0], "action_logp": [0.0, 0.0]},
        truncated=True,
        len_lookback_buffer=0,
    )
    return ep.to_numpy() if numpy else ep


def _assert_same(got, want, where: str = "") -> None:
    if isinstance(want, dict):
        assert isinstance(got, dict) and got.keys() == want.keys(), where
        for key in want:
            _assert_same(got[key], want[key], f"{where}[{key!r}]")
        return
    if isinstance(want, (tuple, list)) and not isinstance(want, np.ndarray):
        assert type(got) is type(want) and len(got) == len(want), where
        for i, (g, w) in enumerate(zip(got, want)):
            _assert_same(g, w, f"{where}[{i}]")
        return
    if not isinstance(want, (np.ndarray, torch.Tensor)):  # infos, ids
        return
    assert got.dtype == want.dtype and got.shape == want.shape, (where, got.dtype, want.dtype)
    assert (got == want).all(), where


@pytest.mark.parametrize(
    ("space", "first", "later", "dtypes"), FIRST_ACTIONS.values(), ids=list(FIRST_ACTIONS)
)
def test_list_mode_episodes_convert_as_their_numpyd_episodes(space, first, later, dtypes):
    from episodes.converter import episodes_to_batch, episodes_to_rollout

    listed = _converter_episode(space, first, later, numpy=False)
    numpyd = _converter_episode(space, first, later, numpy=True)
    want, got = episodes_to_batch([numpyd]), episodes_to_batch([listed])
    for column in ("obs", "next_obs", "actions"):
        _assert_same(got[column], want[column], column)
    seen = []

    def values(obs):  # also sees the final observation of the chunk
        seen.append(obs)
        return np.zeros(len(obs))

    if not isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):  # the storage's are flat
        want_r = episodes_to_rollout([numpyd], gamma=0.9, value_fn=values)
        got_r = episodes_to_rollout([listed], gamma=0.9, value_fn=values)
        _assert_same(seen[1], seen[0], "final observation")
        for name, tensor in want_r.storage.tensors.items():
            _assert_same(got_r.storage.tensors[name], tensor, name)


CONNECTORS = {
    "AddLearnerColumns": lambda: __import__("episodes.connectors").connectors.AddLearnerColumns(),
    "PrevActionsPrevRewards": lambda: __import__(
        "episodes.connectors"
    ).connectors.PrevActionsPrevRewards(1, 1),
    "FrameStack": lambda: __import__("episodes.connectors").connectors.FrameStack(2),
    "FrameStack(inference)": lambda: __import__("episodes.connectors").connectors.FrameStack(
        1, inference=True
    ),
}


@pytest.mark.parametrize("connector", CONNECTORS)
@pytest.mark.parametrize(
    ("space", "first", "later", "dtypes"), FIRST_ACTIONS.values(), ids=list(FIRST_ACTIONS)
)
def test_list_mode_episodes_give_connectors_the_numpyd_rows(space, first, later, dtypes, connector):
    listed = _converter_episode(space, first, later, numpy=False)
    numpyd = _converter_episode(space, first, later, numpy=True)
    want = CONNECTORS[connector]()([numpyd], {})
    got = CONNECTORS[connector]()([listed], {})
    assert got.keys() == want.keys()
    for key in want:
        _assert_same(got[key], want[key], key)


# Observations of a list-mode column, one outside the Box: to_numpy keeps the items' float64.
OUTSIDE = {
    "a row": [[0.1, 0.2, 0.3], [5.0, 0.0, 0.0], [0.0, 0.0, 0.0]],
    "the last observation": [[0.1, 0.2, 0.3], [0.0, 0.0, 0.0], [5.0, 0.0, 0.0]],
}


@pytest.mark.parametrize("observations", OUTSIDE.values(), ids=list(OUTSIDE))
def test_a_column_with_an_item_outside_its_space_converts_in_its_items_dtypes(observations):
    from episodes.converter import episodes_to_batch, episodes_to_rollout

    def make(numpy: bool) -> SingleAgentEpisode:
        ep = SingleAgentEpisode(
            "e",
            observations=copy.deepcopy(observations),
            actions=[0, 1],
            rewards=[1.0, 0.5],
            observation_space=BOX3,
            action_space=D300,
            extra_model_outputs={"vf_preds": [0.0, 0.0], "action_logp": [0.0, 0.0]},
            truncated=True,
            len_lookback_buffer=0,
        )
        return ep.to_numpy() if numpy else ep

    listed, numpyd = make(False), make(True)
    assert numpyd.observations.get().dtype == np.float64
    want, got = episodes_to_batch([numpyd]), episodes_to_batch([listed])
    for column in ("obs", "next_obs"):
        _assert_same(got[column], want[column], column)
    seen = []

    def values(obs):
        seen.append(obs)
        return np.zeros(len(obs))

    want_r = episodes_to_rollout([numpyd], gamma=0.9, value_fn=values)
    got_r = episodes_to_rollout([listed], gamma=0.9, value_fn=values)
    _assert_same(seen[1], seen[0], "final observation")  # float64 even when it is in the Box
    for name, tensor in want_r.storage.tensors.items():
        _assert_same(got_r.storage.tensors[name], tensor, name)
