"""Torch datasets give one dtype and shape per column over the whole dataset.

Pieces whose columns differ in type (a list-mode piece's float64 observations beside a
numpy'd piece's float32 ones, int32 actions beside int64) gave batches whose dtype changed
from batch to batch, or, in DataLoader workers, values wrapped or rounded into the first
item's dtype. Types of one kind are now joined when the dataset is made and every item is
cast to them; other mixes are a DatasetError then, naming the column and both pieces.
"""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch
import tree
from torch.utils.data import DataLoader

from episodes import SingleAgentEpisode
from episodes.io import Dataset, DatasetError, DatasetWriter
from episodes.io.item_types import CastColumn, item_types
from episodes.io.torch_data import SequenceDataset, TransitionDataset

BOX2 = gym.spaces.Box(-10, 10, (2,), np.float32)


def _ep(id_, obs, actions, rewards, numpy=True, **kw):
    kw.setdefault("len_lookback_buffer", 0)
    ep = SingleAgentEpisode(id_, observations=obs, actions=actions, rewards=rewards, **kw)
    return ep.to_numpy() if numpy else ep


def _obs(dtype, n=3):
    return np.arange(2 * (n + 1), dtype=dtype).reshape(n + 1, 2) / 8


def _write(path, *pieces):
    with DatasetWriter(path, sync=False) as w:
        for piece in pieces:
            w.write(piece)
    return path


def _pair(kind):
    """Two pieces that differ in one column, and the dtype that column joins in (or None)."""
    f32, i64 = np.float32, np.int64
    acts = np.array([0, 1, 1])
    if kind == "list-mode float64 obs beside numpy'd float32":
        a = _ep("a", _obs(f32), acts, [1.0] * 3, observation_space=BOX2)
        b = _ep("b", [[0.1, 0.2]] * 4, acts, [1.0] * 3, numpy=False, observation_space=BOX2)
        return a, b, "obs", torch.float64
    if kind == "int32 actions beside int64 beyond int32":
        a = _ep("a", _obs(f32), np.array([1, 2, 3], np.int32), [1.0] * 3)
        b = _ep("b", _obs(f32), np.array([2**40, 3, -(2**40)], i64), [1.0] * 3)
        return a, b, "actions", torch.int64
    if kind == "int8 actions beside uint8":
        a = _ep("a", _obs(f32), np.array([-1, -128, 127], np.int8), [1.0] * 3)
        b = _ep("b", _obs(f32), np.array([255, 0, 200], np.uint8), [1.0] * 3)
        return a, b, "actions", torch.int16
    if kind == "float32 rewards beside float64":
        a = _ep("a", _obs(f32), acts, np.array([0.1, 0.2, 0.3], f32))
        b = _ep("b", _obs(f32), acts, np.array([1 / 3, 1e300, -1e-300]))
        return a, b, "rewards", torch.float64
    if kind == "float32 extras beside float64":
        vf = {"vf": np.array([0.1, 0.2, 0.3], f32)}
        a = _ep("a", _obs(f32), acts, [1.0] * 3, extra_model_outputs=vf)
        vf64 = {"vf": np.array([1 / 3, 2 / 3, 1e300])}
        b = _ep("b", _obs(f32), acts, [1.0] * 3, extra_model_outputs=vf64)
        return a, b, "extra_model_outputs", torch.float64
    if kind == "Dict obs: float32 part beside float64":
        space = gym.spaces.Dict({"p": BOX2, "k": gym.spaces.Discrete(3)})
        a_obs = [{"p": _obs(f32)[t], "k": np.int64(t % 3)} for t in range(4)]
        b_obs = [{"p": _obs(np.float64)[t] + 1 / 3, "k": np.int64(t % 3)} for t in range(4)]
        a = _ep("a", a_obs, acts, [1.0] * 3, observation_space=space)
        b = _ep("b", b_obs, acts, [1.0] * 3, numpy=False)
        return a, b, "obs", torch.float64
    if kind == "big-endian float32 obs beside native float64":
        a = _ep("a", _obs(">f4"), acts, [1.0] * 3)
        b = _ep("b", _obs(np.float64) + 1 / 3, acts, [1.0] * 3)
        return a, b, "obs", torch.float64
    raise AssertionError(kind)


JOINED = [
    "list-mode float64 obs beside numpy'd float32",
    "int32 actions beside int64 beyond int32",
    "int8 actions beside uint8",
    "float32 rewards beside float64",
    "float32 extras beside float64",
    "Dict obs: float32 part beside float64",
    "big-endian float32 obs beside native float64",
]


def _leaves(value):
    if isinstance(value, dict):
        return [x for k in sorted(value) for x in _leaves(value[k])]
    return [value]


def _expected(piece, key, t, stop=None):
    """The piece's own values of ``key`` at step ``t`` (or ``t:stop``), numpy'd."""
    piece = copy.deepcopy(piece).to_numpy()
    if key in ("obs", "next_obs"):
        get = piece.get_observations
    elif key == "actions":
        get = piece.get_actions
    elif key == "rewards":
        get = piece.get_rewards
    else:
        return {k: _expected_extra(piece, k, t, stop) for k in piece.extra_model_outputs}
    value = get(t) if stop is None else get(slice(t, stop))
    if isinstance(value, dict):
        return {k: np.asarray(v) for k, v in value.items()}
    return np.asarray(value)


def _expected_extra(piece, k, t, stop):
    return np.asarray(piece.get_extra_model_outputs(k, t if stop is None else slice(t, stop)))


def _exact(got, want):
    """Each leaf of the batch item holds the piece's value exactly."""
    got, want = _leaves(got), _leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = g.numpy(), np.asarray(w)
        assert g.shape == w.shape
        assert np.array_equal(g.astype(w.dtype), w) and np.array_equal(g, w.astype(g.dtype))


def _squeeze(value):
    if isinstance(value, dict):
        return {k: _squeeze(v) for k, v in value.items()}
    return value[0]


def _dtypes(value):
    return tuple(leaf.dtype for leaf in _leaves(value))


@pytest.mark.parametrize("kind", JOINED)
def test_a_joined_mix_gives_one_dtype_in_every_batch_with_exact_values(tmp_path, kind):
    a, b, key, dtype = _pair(kind)
    path = _write(tmp_path / "d", a, b)
    data = TransitionDataset(path)
    seen = set()
    for index, batch in enumerate(DataLoader(data, batch_size=1)):
        piece, t = (a, index) if index < len(a) else (b, index - len(a))
        seen.add(_dtypes(batch[key]))
        _exact(_squeeze(batch[key]), _expected(piece, key, t))
        if key == "obs":
            seen.add(_dtypes(batch["next_obs"]))
            _exact(_squeeze(batch["next_obs"]), _expected(piece, "next_obs", t + 1))
    assert len(seen) == 1 and dtype in next(iter(seen))
    # windows are cast as a whole
    windows = DataLoader(SequenceDataset(path, length=2), batch_size=1)
    assert {_dtypes(batch[key]) for batch in windows} == seen
    windows = list(DataLoader(SequenceDataset(path, length=3), batch_size=1))
    for piece, batch in zip((a, b), windows):
        _exact(_squeeze(batch[key]), _expected(piece, key, 0, 3 + (key == "obs")))


def test_a_dict_obs_mix_casts_the_part_that_differs_alone(tmp_path):
    a, b, _, _ = _pair("Dict obs: float32 part beside float64")
    data = TransitionDataset(_write(tmp_path / "d", a, b))
    batches = list(DataLoader(data, batch_size=2))
    assert {x["obs"]["p"].dtype for x in batches} == {torch.float64}
    assert {x["obs"]["k"].dtype for x in batches} == {torch.int64}


@pytest.mark.parametrize(
    "kind",
    ["int32 actions beside int64 beyond int32", "list-mode float64 obs beside numpy'd float32"],
)
def test_workers_stack_a_joined_mix_without_wrapping_or_rounding(tmp_path, kind):
    # A worker's default_collate stacks into a buffer of the first item's dtype: 2**40
    # became 0 in an int32 batch, 0.1 became 0.10000000149 in a float32 one.
    a, b, key, dtype = _pair(kind)
    data = TransitionDataset(_write(tmp_path / "d", a, b))
    (batch,) = list(DataLoader(data, batch_size=len(data), num_workers=2))
    assert batch[key].dtype == dtype
    want = [_expected(p, key, t) for p in (a, b) for t in range(len(p))]
    assert np.array_equal(batch[key].numpy(), np.stack(want).astype(batch[key].numpy().dtype))
    assert np.array_equal(batch[key].numpy().astype(np.stack(want).dtype), np.stack(want))


def _refused(kind):
    f32 = np.float32
    acts = np.array([0, 1, 1])
    if kind == "extras of shape (2,) beside (3,)":
        a = _ep("a", _obs(f32), acts, [1.0] * 3, extra_model_outputs={"h": np.zeros((3, 2))})
        b = _ep("b", _obs(f32), acts, [1.0] * 3, extra_model_outputs={"h": np.zeros((3, 3))})
        return a, b, "extra_model_outputs/h"
    if kind == "scalar rewards beside shape (1,)":
        a = _ep("a", _obs(f32), acts, np.ones(3))
        b = _ep("b", _obs(f32), acts, np.ones((3, 1)))
        return a, b, "rewards"
    if kind == "int rewards beside float":
        a = _ep("a", [0.0, 1.0, 2.0, 3.0], acts, [1, 2, 3])
        b = _ep("b", [0.0, 1.0, 2.0, 3.0], acts, [0.5, 0.25, 0.125])
        return a, b, "rewards"
    if kind == "int64 actions beside uint64":
        a = _ep("a", _obs(f32), np.array([-1, 0, 1]), [1.0] * 3)
        b = _ep("b", _obs(f32), np.array([2**63, 0, 1], np.uint64), [1.0] * 3)
        return a, b, "actions"
    if kind == "bool actions beside int":
        a = _ep("a", _obs(f32), np.array([True, False, True]), [1.0] * 3)
        b = _ep("b", _obs(f32), acts, [1.0] * 3)
        return a, b, "actions"
    if kind == "float obs beside int obs":
        a = _ep("a", _obs(f32), acts, [1.0] * 3)
        b = _ep("b", np.arange(8).reshape(4, 2), acts, [1.0] * 3)
        return a, b, "observations"
    if kind == "Dict obs beside Box obs":
        a = _ep("a", _obs(f32), acts, [1.0] * 3)
        b = _ep("b", [{"p": x} for x in _obs(f32)], acts, [1.0] * 3)
        return a, b, "observations"
    raise AssertionError(kind)


REFUSED = [
    "extras of shape (2,) beside (3,)",
    "scalar rewards beside shape (1,)",
    "int64 actions beside uint64",
    "bool actions beside int",
    "float obs beside int obs",
    "Dict obs beside Box obs",
]


@pytest.mark.parametrize("make", ["transitions", "windows"])
@pytest.mark.parametrize("kind", REFUSED)
def test_a_mix_no_batch_holds_is_refused_when_the_dataset_is_made(tmp_path, kind, make):
    a, b, column = _refused(kind)
    path = _write(tmp_path / "d", a, b)
    with pytest.raises(DatasetError, match=rf"'a'.*'b'\).*{column}"):
        if make == "transitions":
            TransitionDataset(path)
        else:
            SequenceDataset(path, length=2)


def test_n_step_sums_join_int_and_float_rewards_as_float64(tmp_path):
    a, b, _ = _refused("int rewards beside float")
    data = TransitionDataset(_write(tmp_path / "d", a, b), n_step=2, gamma=0.5)
    (batch,) = list(DataLoader(data, batch_size=len(data)))
    assert batch["rewards"].dtype == torch.float64
    assert batch["rewards"].tolist() == [2.0, 3.5, 3.0, 0.625, 0.3125, 0.125]


def test_pieces_without_items_are_not_joined(tmp_path):
    # "b" is shorter than a window: SequenceDataset gives none of its items.
    a = _ep("a", _obs(np.float32), np.array([0, 1, 1]), [1.0] * 3)
    b = _ep("b", np.arange(2), np.array([0]), [1.0])
    path = _write(tmp_path / "d", a, b)
    assert len(SequenceDataset(path, length=2)) == 2
    with pytest.raises(DatasetError, match="'a'.*'b'"):
        TransitionDataset(path)


def test_a_piece_of_one_shard_read_in_other_types_is_refused_when_read(tmp_path):
    # One shard (one schema), but a list-mode piece without a space keeps the list [x, y]
    # that the other's Box space makes one row: read, it is refused naming both pieces.
    a = _ep("a", [[0.5, 1.5]] * 4, [0, 1, 1], [1.0] * 3, numpy=False, observation_space=BOX2)
    b = _ep("b", [[0.5, 1.5]] * 4, [0, 1, 1], [1.0] * 3, numpy=False)
    path = _write(tmp_path / "d", a, b)
    assert len(Dataset(path).shards) == 1
    data = TransitionDataset(path)
    assert data[0]["obs"].shape == (2,)
    with pytest.raises(DatasetError, match="'a'.*'b'.*observations"):
        data[len(data) - 1]


HOMOGENEOUS = [
    ("float32 Box, int64 actions", lambda i: _ep(f"e{i}", _obs(np.float32), [0, 1, 1], [1.0] * 3)),
    (
        "list-mode Box rows",
        lambda i: _ep(
            f"e{i}", [[0.1, i]] * 4, [0, 1, 1], [1.0] * 3, numpy=False, observation_space=BOX2
        ),
    ),
    (
        "big-endian obs, uint8 actions, int rewards",
        lambda i: _ep(f"e{i}", _obs(">f4"), np.array([0, 255, 1], np.uint8), [1, 2, 3]),
    ),
    (
        "Dict obs, tuple extras",
        lambda i: _ep(
            f"e{i}",
            [{"p": x, "q": np.int8(i)} for x in _obs(np.float32)],
            [0, 1, 1],
            [1.0] * 3,
            extra_model_outputs={"h": [(np.float32(0.5), np.zeros(2, np.float16))] * 3},
        ),
    ),
    (
        "list-mode Tuple(Discrete, MultiBinary) rows",
        lambda i: _ep(
            f"e{i}",
            [(t, [0, 1, t % 2]) for t in range(4)],
            [0, 1, 1],
            [1.0] * 3,
            numpy=False,
            observation_space=gym.spaces.Tuple((gym.spaces.Discrete(4), gym.spaces.MultiBinary(3))),
        ),
    ),
    (
        "list-mode Dict(Box) rows beside a ragged part",
        lambda i: _ep(
            f"e{i}",
            [{"p": [[0.5, t], [1.5, 2.5]], "r": [[1], [2, 3]]} for t in range(4)],
            [0, 1, 1],
            [1.0] * 3,
            numpy=False,
            observation_space=gym.spaces.Dict(
                {"p": gym.spaces.Box(-5, 5, (2, 2)), "r": gym.spaces.Box(-5, 5, (3,))}
            ),
        ),
    ),
    (
        "Text obs",
        lambda i: _ep(
            f"e{i}",
            ["a", "bb", "ccc", ""],
            [0, 1, 1],
            [1.0] * 3,
            observation_space=gym.spaces.Text(5),
        ),
    ),
]


@pytest.mark.parametrize("name, make", HOMOGENEOUS, ids=[h[0] for h in HOMOGENEOUS])
def test_a_dataset_of_one_type_is_read_as_before_and_its_types_are_those_of_its_items(
    tmp_path, name, make
):
    pieces = [make(i) for i in range(3)]
    path = _write(tmp_path / "d", *pieces)
    data = TransitionDataset(path)
    reader = Dataset(path)
    for index in range(len(data)):
        item, (i, t) = data[index], data._locate(index)
        steps = reader.steps(i, t, t + 1)
        for key, column in (
            ("obs", "observations"),
            ("actions", "actions"),
            ("rewards", "rewards"),
        ):
            want = tree.map_structure(lambda v: v[0], steps[column])
            assert item_types(item[key]) == item_types(want)
            got = tree.flatten(item[key])
            assert all(np.array_equal(x, y) for x, y in zip(got, tree.flatten(want)))
        # the types found in the index when the dataset was made are the items' own: no cast
        plan = data._plan(i)
        for column in ("observations", "actions", "rewards"):
            assert not isinstance(plan[column], CastColumn)
            assert data._types[column][0] == item_types(plan[column].take(0))
        for key, column in plan["extra_model_outputs"].items():
            assert not isinstance(column, CastColumn)
            assert data._types[f"extra_model_outputs/{key}"][0] == item_types(column.take(0))


@pytest.mark.parametrize("dtype", [">f4", "<f2", "?", "u1", ">i8", "c8", "<U5", "S3", "M8[s]"])
@pytest.mark.parametrize("shape", [(), (0,), (2, 3)])
def test_a_flat_column_s_types_read_from_its_view_are_those_of_its_items(dtype, shape):
    # column_types reads a flat column's types from its view (no item taken): the same as
    # item_types of an item, whatever the dtype and shape.
    from episodes.io.item_types import column_types
    from episodes.io.shard_columns import ColumnPlan

    view = np.zeros((3, *shape), dtype)
    plan = ColumnPlan(1, 3, 0, [view], None)
    assert column_types(plan) == item_types(plan.take(0)) == item_types(plan.take(1, copy=True))
