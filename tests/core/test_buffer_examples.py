"""docs/contract.md §2-§3 as tables of named cases, run in list mode and numpy mode."""

from __future__ import annotations

import copy
import pickle

import gymnasium as gym
import numpy as np
import pytest
import tree

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from tests.core._helpers import MODES, assert_same, make_buffer

# (name, call kwargs, expected) on data [4, 5, 6, 7, 8, 9] with lookback 3 (ts=0 is 7).
INDEX_TABLE = [
    ("all_after_lookback", dict(), [7, 8, 9]),
    ("int_from_ts0", dict(indices=0), 7),
    ("negative_from_end", dict(indices=-1), 9),
    ("negative_into_lookback", dict(indices=-1, neg_index_as_lookback=True), 6),
    ("slice_into_lookback", dict(indices=slice(-2, 1), neg_index_as_lookback=True), [5, 6, 7]),
    ("list_gathers", dict(indices=[0, -1]), [7, 9]),
    ("out_of_range_fill", dict(indices=10, fill=0), 0),
    ("left_of_lookback_fill", dict(indices=-5, neg_index_as_lookback=True, fill=-1), -1),
    ("negative_from_end_reaches_lookback", dict(indices=-4), 6),
    ("slice_none_start_is_ts0", dict(indices=slice(None, 2)), [7, 8]),
    ("slice_none_stop_is_end", dict(indices=slice(1, None)), [8, 9]),
    ("slice_whole_lookback", dict(indices=slice(-3, 0), neg_index_as_lookback=True), [4, 5, 6]),
    ("list_with_fill", dict(indices=[-4, 0, 5], neg_index_as_lookback=True, fill=0), [0, 7, 0]),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,kwargs,expected", INDEX_TABLE, ids=[c[0] for c in INDEX_TABLE])
def test_spec_index_table(name, kwargs, expected, mode):
    buf = make_buffer([4, 5, 6, 7, 8, 9], lookback=3, mode=mode)
    assert_same(buf.get(**kwargs), expected)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "indices,kwargs",
    [(10, {}), (3, {}), (-7, {}), (-4, {"neg_index_as_lookback": True}), ([0, 3], {})],
    ids=["past_end", "exactly_len", "before_start", "left_of_lookback", "list_member"],
)
def test_out_of_range_raises_index_error(indices, kwargs, mode):
    buf = make_buffer([4, 5, 6, 7, 8, 9], lookback=3, mode=mode)
    with pytest.raises(IndexError, match="out of range"):
        buf.get(indices, **kwargs)


FILL_TABLE = [
    ("left_padding", slice(-7, -2), 0.0, [0.0, 0.0, 10, 11, 12]),
    ("left_clipped_without_fill", slice(-7, -2), None, [10, 11, 12]),
    ("right_padding", slice(1, 6), 0, [13, 14, 0, 0, 0]),
    ("right_clipped_without_fill", slice(1, 6), None, [13, 14]),
    ("both_sides_padding", slice(-8, 5), 0, [0, 0, 0, 10, 11, 12, 13, 14, 0, 0]),
    ("entirely_right", slice(5, 7), -1, [-1, -1]),
    ("empty_slice", slice(2, 1), 0, []),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("name,slice_,fill,expected", FILL_TABLE, ids=[c[0] for c in FILL_TABLE])
def test_fill_slices(name, slice_, fill, expected, mode):
    buf = make_buffer([10, 11, 12, 13, 14], lookback=2, mode=mode)
    result = buf.get(slice_, fill=fill)
    assert_same(result, expected)
    if fill is not None:
        assert len(result) == max(0, len(expected))


def test_fill_entirely_left_with_lookback_flag():
    buf = make_buffer([10, 11, 12, 13, 14], lookback=2)
    assert buf.get(slice(-6, -4), neg_index_as_lookback=True, fill=9) == [9, 9]


@pytest.mark.parametrize("mode", MODES)
def test_filler_with_space_has_shape_and_dtype(mode):
    space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    items = [np.full(2, i, np.float32) * 0.1 for i in range(3)]
    buf = make_buffer(items, lookback=1, space=space, mode=mode)
    out = buf.get(slice(-3, 1), neg_index_as_lookback=True, fill=0.5)
    arr = np.asarray(out)
    assert arr.shape == (4, 2) and arr.dtype == np.float32
    np.testing.assert_allclose(arr[:2], 0.5)
    single = buf.get(7, fill=0.5)
    assert single.dtype == np.float32 and single.shape == (2,)


ONE_HOT_TABLE = [
    ("discrete", gym.spaces.Discrete(3), [0, 2, 1], [[1, 0, 0], [0, 0, 1], [0, 1, 0]]),
    ("discrete_start", gym.spaces.Discrete(3, start=-1), [-1, 1], [[1, 0, 0], [0, 0, 1]]),
    (
        "multidiscrete",
        gym.spaces.MultiDiscrete([2, 3]),
        [np.array([1, 0]), np.array([0, 2])],
        [[0, 1, 1, 0, 0], [1, 0, 0, 0, 1]],
    ),
    (
        "multidiscrete_start",
        gym.spaces.MultiDiscrete([2, 2], start=[1, 5]),
        [np.array([2, 5])],
        [[0, 1, 1, 0]],
    ),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "name,space,items,expected", ONE_HOT_TABLE, ids=[c[0] for c in ONE_HOT_TABLE]
)
def test_one_hot(name, space, items, expected, mode):
    buf = make_buffer(items, space=space, mode=mode)
    out = buf.get(one_hot_discrete=True)
    assert_same(out, expected)
    assert np.asarray(out).dtype == np.float32
    assert_same(buf.get(0, one_hot_discrete=True), expected[0])
    assert_same(buf.get([0], one_hot_discrete=True), expected[:1])


@pytest.mark.parametrize("mode", MODES)
def test_one_hot_fill_is_zero_hot(mode):
    buf = make_buffer([1, 0], lookback=1, space=gym.spaces.Discrete(2), mode=mode)
    out = buf.get(slice(-3, 1), neg_index_as_lookback=True, fill=0.0, one_hot_discrete=True)
    assert_same(out, [[0, 0], [0, 0], [0, 1], [1, 0]])


def test_one_hot_needs_space():
    with pytest.raises(ValueError, match="space"):
        make_buffer([0, 1]).get(one_hot_discrete=True)


DICT_SPACE = gym.spaces.Dict(
    {"pos": gym.spaces.Box(-5, 5, (2,), np.float32), "key": gym.spaces.Discrete(3, start=1)}
)
TUPLE_SPACE = gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(0, 1, (1,), np.float32)))


def _dict_item(i):
    return {"key": 1 + i % 3, "pos": np.full(2, i, np.float32)}


@pytest.mark.parametrize("mode", MODES)
def test_nested_dict_items(mode):
    buf = make_buffer([_dict_item(i) for i in range(5)], lookback=2, space=DICT_SPACE, mode=mode)
    item = buf.get(0)
    assert item["key"] == 3 and np.array_equal(item["pos"], np.full(2, 2, np.float32))
    window = buf.get(slice(-3, 1), neg_index_as_lookback=True, fill=0, one_hot_discrete=True)
    if mode == "numpy":
        assert window["key"].shape == (4, 3) and window["pos"].shape == (4, 2)
        assert np.array_equal(window["key"][0], np.zeros(3)) and window["key"][3].tolist() == [
            0,
            0,
            1,
        ]
    else:
        assert len(window) == 4 and window[0]["key"].tolist() == [0, 0, 0]
        assert window[3]["key"].tolist() == [0, 0, 1]


@pytest.mark.parametrize("mode", MODES)
def test_nested_tuple_items_keep_tuples(mode):
    items = [(i % 2, np.full(1, 0.5, np.float32)) for i in range(3)]
    buf = make_buffer(items, space=TUPLE_SPACE, mode=mode)
    assert isinstance(buf.get(0), tuple)
    if mode == "numpy":
        assert isinstance(buf.data, tuple) and buf.data[0].dtype == np.int64
    out = buf.get(1, one_hot_discrete=True)
    assert out[0].tolist() == [0, 1]


def test_finalize_dtypes():
    ints = make_buffer([0, 1, 2], mode="numpy")
    floats32 = make_buffer([np.float32(0.5)], mode="numpy")
    floats = make_buffer([0.5, 1.5], mode="numpy")
    assert ints.data.dtype == np.int64
    assert floats32.data.dtype == np.float32
    assert floats.data.dtype == np.float64


@pytest.mark.parametrize("mode", MODES)
def test_append_extend_pop_concat(mode):
    buf = make_buffer([1, 2, 3], lookback=1, mode=mode)
    buf.append(4)
    buf.extend([5, 6])
    assert_same(buf.get(), [2, 3, 4, 5, 6])
    assert int(buf.pop()) == 6
    other = make_buffer([99, 7, 8], lookback=1, mode=mode)
    buf.concat(other)
    assert_same(buf.get(), [2, 3, 4, 5, 7, 8])
    assert len(buf) == 6 and buf.len_incl_lookback() == 7


TRUNCATE_TABLE = [
    # (name, keep, visible after, lookback after) on [1, 2, 3, 4] + appended 5.0, 6.0, lookback 2
    ("keep_everything", 6, [3, 4, 5, 6], 2),
    ("drop_the_appended_items", 4, [3, 4], 2),
    ("into_the_lookback", 1, [], 1),
    ("nothing_left", 0, [], 0),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "name,keep,visible,lookback", TRUNCATE_TABLE, ids=[c[0] for c in TRUNCATE_TABLE]
)
def test_truncate(name, keep, visible, lookback, mode):
    buf = make_buffer([1, 2, 3, 4], lookback=2, mode=mode)
    buf.append(5)  # in numpy mode these wait in the pending list: truncate writes them first
    buf.append(6)
    buf.truncate(keep)
    assert_same(buf.get(), visible)
    assert buf.lookback == lookback and buf.len_incl_lookback() == keep
    buf.append(7)
    assert_same(buf.get(), [*visible, 7])


COPY_TAIL_TABLE = [
    # (name, count, visible, visible items after, lookback after) on [1, 2, 3, 4], lookback 1
    ("two_visible_of_three", 3, 2, [3, 4], 1),
    ("more_than_stored", 9, 1, [4], 3),
    ("nothing", 0, 0, [], 0),
    ("all_lookback", 2, 0, [], 2),
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    "name,count,visible,items,lookback", COPY_TAIL_TABLE, ids=[c[0] for c in COPY_TAIL_TABLE]
)
def test_copy_tail(name, count, visible, items, lookback, mode):
    buf = make_buffer([1, 2, 3, 4], lookback=1, mode=mode)
    tail = buf.copy_tail(count, visible)
    assert_same(tail.get(), items)
    assert tail.lookback == lookback and tail.finalized == buf.finalized
    tail.append(9)  # owns its data
    assert_same(buf.get(), [2, 3, 4])


def test_finalized_appends_are_amortised():
    buf = make_buffer([0.0], mode="numpy")
    capacities = set()
    for i in range(1000):
        buf.append(float(i))
        capacities.add(len(buf.store.leaves[0]))
    # Capacity doubles: a handful of reallocations for 1000 appends, not one per append.
    assert len(capacities) <= 10
    assert buf.get(-1) == 999.0


def test_add_operator():
    buf = make_buffer([1, 2], lookback=1)
    assert (buf + 1).get() == [3]
    assert (buf + [5]).get() == [2, 5]
    assert (buf + make_buffer([0, 9], lookback=1)).get() == [2, 9]
    with pytest.raises(RuntimeError, match="finalized"):
        make_buffer([1], mode="numpy") + 1


def test_add_operator_adds_to_numpy_numbers():
    # A Discrete space's samples are np.int64: "a number is added to each item" means them too.
    buf = make_buffer([np.int64(1), np.float32(2.0), 3, "a"], lookback=0)
    assert (buf + 1).get() == [2, 3.0, 4, "a"]
    assert (buf + np.int64(1)).get() == [2, 3.0, 4, "a"]
    assert (buf + np.float32(0.5)).get()[:3] == [1.5, 2.5, 3.5]
    with pytest.raises(TypeError, match="cannot add bool"):
        buf + np.True_


@pytest.mark.parametrize("mode", MODES)
def test_set_rules(mode):
    buf = make_buffer([4, 5, 6, 7, 8, 9], lookback=3, mode=mode)
    buf.set(70, at_indices=0)
    buf.set(60, at_indices=-1, neg_index_as_lookback=True)
    buf.set([80, 90], at_indices=slice(1, 3))
    buf[-1] = 91
    assert_same(buf.get(slice(-1, None), neg_index_as_lookback=True), [60, 70, 80, 91])
    buf.set([1, 2, 3])
    assert_same(buf.get(), [1, 2, 3])
    buf.set([11, 12], at_indices=[0, 1])
    assert_same(buf.get(), [11, 12, 3])


@pytest.mark.parametrize("mode", MODES)
def test_protocols(mode):
    buf = make_buffer([1, 2, 3, 4], lookback=1, mode=mode)
    assert np.asarray(buf).tolist() == [2, 3, 4]
    assert [int(x) for x in buf] == [2, 3, 4]
    with pytest.raises(IndexError):
        buf[len(buf)]
    clone = copy.deepcopy(buf)
    assert clone == buf and clone is not buf


@pytest.mark.parametrize("mode", MODES)
def test_state_round_trip(mode):
    buf = make_buffer([_dict_item(i) for i in range(4)], lookback=1, space=DICT_SPACE, mode=mode)
    state = buf.get_state()
    assert set(state) == {"data", "lookback", "finalized", "space", "typed"}
    assert isinstance(state["space"], dict) and state["typed"] is (mode == "numpy")
    again = InfiniteLookbackBuffer.from_state(state)
    assert again == buf
    again.append(_dict_item(9))
    assert again != buf


def test_equality_is_dtype_aware():
    a = make_buffer([np.zeros(2, np.float32)], mode="numpy")
    b = make_buffer([np.zeros(2, np.float64)], mode="numpy")
    assert a != b
    assert make_buffer([1, 2], lookback=1) != make_buffer([1, 2], lookback=0)
    assert make_buffer([1, 2]) != make_buffer([1, 2], mode="numpy")


def test_lookback_is_clamped():
    assert make_buffer([1, 2], lookback=5).lookback == 2


@pytest.mark.parametrize("copier", [copy.deepcopy, lambda b: pickle.loads(pickle.dumps(b))])
def test_copied_numpy_buffers_keep_the_row_fast_path(copier):
    # Rows of the stored dtype wait as bytes for one bulk write; the check compares dtypes by
    # identity, and a copied or unpickled array carries a new (equal) dtype object.
    buf = copier(make_buffer([np.zeros(3, np.float32)] * 2, mode="numpy"))
    buf.append(np.ones(3, np.float32))
    assert len(buf.store._pending) == 1
    np.testing.assert_array_equal(buf.get(-1), np.ones(3, np.float32))


BATCHES = {
    "ints": np.arange(5),
    "rows": np.arange(10.0).reshape(5, 2),
    "dict": {"a": np.arange(5), "b": np.zeros((5, 3), np.float32)},
}


@pytest.mark.parametrize("batch", BATCHES.values(), ids=BATCHES.keys())
def test_a_batch_builds_a_numpy_buffer(batch):
    """RLlib's rule: data that is not a list is a finalized batch, taken as it is."""
    items = [tree.map_structure(lambda leaf, i=i: leaf[i], batch) for i in range(5)]
    built = InfiniteLookbackBuffer(batch, lookback=2)
    assert built.finalized and len(built) == 3
    assert built == make_buffer(items, lookback=2, mode="numpy")


@pytest.mark.parametrize("batch", BATCHES.values(), ids=BATCHES.keys())
def test_extend_of_a_finalized_buffer_takes_a_batch_or_a_list(batch):
    items = [tree.map_structure(lambda leaf, i=i: leaf[i], batch) for i in range(5)]
    by_batch = make_buffer(items[:2], lookback=1, mode="numpy")
    by_list = copy.deepcopy(by_batch)
    by_batch.extend(tree.map_structure(lambda leaf: leaf[2:], batch))
    by_list.extend(items[2:])
    assert by_batch == by_list == make_buffer(items, lookback=1, mode="numpy")


PLUS = {
    "number": (2, [3, 4, 5]),
    "list": ([9], [1, 2, 3, 9]),
    "buffer_without_its_lookback": (InfiniteLookbackBuffer([7, 8], lookback=1), [1, 2, 3, 8]),
}


@pytest.mark.parametrize("other, items", PLUS.values(), ids=PLUS.keys())
def test_plus_makes_a_new_list_buffer(other, items):
    buf = InfiniteLookbackBuffer([1, 2, 3], lookback=1)
    out = buf + other
    assert out.store.items(0) == items and out.lookback == 1
    assert buf.get() == [2, 3]  # the operand is unchanged


def test_repr_and_comparison_with_other_types():
    buf = InfiniteLookbackBuffer([1, 2], lookback=1)
    assert repr(buf) == "InfiniteLookbackBuffer(len=1, lookback=1, list, space=None)"
    buf.finalize()
    assert "numpy" in repr(buf)
    assert buf != [2] and not (buf == "buffer")


ROW = np.float32([0.5, 0.6])
# (case, how a list-mode buffer takes a numpy'd buffer's items) -- each then holds copies.
TAKES_NUMPY_ITEMS = [
    ("concat", lambda mine, other: mine.concat(other) or mine),
    ("plus", lambda mine, other: mine + other),
    ("set from a buffer", lambda mine, other: mine.set(other, at_indices=[0]) or mine),
]


@pytest.mark.parametrize(
    "take", [c[1] for c in TAKES_NUMPY_ITEMS], ids=[c[0] for c in TAKES_NUMPY_ITEMS]
)
def test_a_list_buffer_never_shares_a_numpy_buffers_arrays(take):
    # The items of a numpy store are views: taken as they are, a write into the numpy buffer
    # (a chunk's setter) rewrote the list buffer (the episode it was concatenated into).
    other = InfiniteLookbackBuffer([ROW.copy()])
    other.finalize()
    mine = take(InfiniteLookbackBuffer([np.zeros(2, np.float32)]), other)
    other.set(np.float32([9, 9]), at_indices=0)
    np.testing.assert_array_equal(mine.get(-1), ROW)


def test_a_list_episode_never_shares_a_numpy_successors_arrays():
    ep = SingleAgentEpisode("a")
    ep.add_env_reset(np.zeros(2, np.float32))
    successor = ep.cut()
    successor.to_numpy()
    successor.add_env_step(ROW.copy(), 0, 1.0)
    ep.concat_episode(successor)
    successor.set_observations(new_data=np.float32([9, 9]), at_indices=-1)
    np.testing.assert_array_equal(ep.get_observations(-1), ROW)


BOX2 = gym.spaces.Box(-1, 1, (2,), np.float32)
# (case, space, first item, list-valued items extend/concat must take as append does)
LIST_ROWS = [
    ("flat Box", BOX2, np.zeros(2, np.float32), [[0.3, 0.4], [0.5, 0.6]]),
    ("MultiDiscrete", gym.spaces.MultiDiscrete([2, 3]), np.array([0, 1]), [[1, 0], [1, 2]]),
    (
        "Dict with a Box part",
        gym.spaces.Dict({"p": BOX2, "k": gym.spaces.Discrete(3)}),
        {"p": np.zeros(2, np.float32), "k": 1},
        [{"p": [0.5, 0.6], "k": 0}],
    ),
]


@pytest.mark.parametrize("how", ["extend", "concat"])
@pytest.mark.parametrize(
    ("space", "first", "items"), [c[1:] for c in LIST_ROWS], ids=[c[0] for c in LIST_ROWS]
)
def test_a_numpy_buffer_extends_by_list_rows_as_it_appends_them(space, first, items, how):
    appended = InfiniteLookbackBuffer([first], 0, space)
    appended.finalize()
    for item in items:
        appended.append(item)
    extended = InfiniteLookbackBuffer([first], 0, space)
    extended.finalize()
    if how == "extend":
        extended.extend(items)
    else:
        extended.concat(InfiniteLookbackBuffer(list(items), 0, space))
    assert extended == appended


@pytest.mark.parametrize("how", ["state", "io"])
def test_an_empty_numpy_column_keeps_its_decided_dtype(how, tmp_path):
    # A cut successor's empty columns keep the parent's dtypes; rebuilt from a state they
    # chose again from the first item (an int reward made the column int64, 0.25 refused).
    from episodes.io import EpisodeWriter, load_episode

    ep = SingleAgentEpisode("e", observations=[0.0, 1.0], actions=[0], rewards=[0.5])
    ep.to_numpy()
    successor = ep.cut()
    if how == "state":
        back = SingleAgentEpisode.from_state(successor.get_state())
    else:
        with EpisodeWriter(tmp_path / "ds") as writer:
            writer.write(successor)
        back = load_episode(tmp_path / "ds", "e", numpy=True)
    for chunk in (successor, back):
        chunk.add_env_step(2.0, 1, 1)  # an int reward into the float column
        chunk.add_env_step(3.0, 0, 0.25)
    assert back.get_rewards().dtype == successor.get_rewards().dtype == np.float64


def test_a_copy_of_a_numpy_column_carries_only_its_items():
    # Its spare capacity travelled too: 2 rows of a once 1000-row column pickled 1000 rows.
    buf = InfiniteLookbackBuffer([np.zeros(100)] * 1000)
    buf.finalize()
    whole = len(pickle.dumps(buf))
    for _ in range(998):
        buf.pop()
    assert len(pickle.dumps(buf)) < whole / 100
    for copied in (pickle.loads(pickle.dumps(buf)), copy.deepcopy(buf)):
        assert copied == buf
        copied.append(np.ones(100))
        assert len(copied) == 3 and len(buf) == 2
