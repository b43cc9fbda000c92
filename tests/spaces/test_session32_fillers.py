"""Remembered fill checks, the one-integer one-hot and fillers of spaces of one's own."""

import importlib

import gymnasium as gym
import gymnasium.spaces as gs
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors import FrameStack, PrevActionsPrevRewards
from episodes.spaces import filler_batch, filler_item, one_hot
from episodes.spaces.filler import filler_leaf

filler = importlib.import_module("episodes.spaces.filler")
one_hot_module = importlib.import_module("episodes.spaces.one_hot")  # the name is the function

SPACES = {
    "box_f32": gs.Box(-1, 1, (2,), np.float32),
    "box_f64_scalar": gs.Box(-1, 1, (), np.float64),
    "box_uint8": gs.Box(0, 255, (2,), np.uint8),
    "box_int8": gs.Box(-5, 5, (1, 2), np.int8),
    "discrete": gs.Discrete(3),
    "discrete_int32": gs.Discrete(4, start=-1, dtype=np.int32),
    "multi_discrete": gs.MultiDiscrete([2, 3]),
    "multi_binary": gs.MultiBinary(3),
    "text": gs.Text(4),
    "dict": gs.Dict({"p": gs.Box(-1, 1, (2,)), "k": gs.Discrete(2), "t": gs.Text(2)}),
    "tuple": gs.Tuple((gs.Box(0, 9, (1,), np.uint8), gs.MultiDiscrete([2]))),
}

FILLS = {
    "int_0": 0,
    "float_0": 0.0,
    "neg_zero": -0.0,
    "nan": float("nan"),
    "np_nan": np.nan,
    "f32_nan": np.float32("nan"),
    "inf": float("inf"),
    "neg_inf": -np.inf,
    "true": True,
    "false": False,
    "np_true": np.bool_(True),
    "minus_one": -1,
    "one": 1,
    "half": 0.5,
    "f32_half": np.float32(0.5),
    "i64_minus_one": np.int64(-1),
    "i32_seven": np.int32(7),
    "huge_float": 1e40,
    "huge_int": 2**70,
    "big_uint8": 256,
    "string": "x",
    "empty_string": "",
    "none": None,
}


def _outcome(make):
    """What ``make()`` gives: its value, or its error's type and message."""
    try:
        return "value", make()
    except Exception as err:  # noqa: BLE001 - the errors are compared
        return "error", (type(err), str(err))


def _leaves(value, path=""):
    if isinstance(value, dict):
        return [leaf for key in value for leaf in _leaves(value[key], f"{path}[{key!r}]")]
    if isinstance(value, tuple):
        return [leaf for i, part in enumerate(value) for leaf in _leaves(part, f"{path}[{i}]")]
    return [(path, value)]


def _assert_same(got, want):
    """Same nesting, leaf types, dtypes, shapes, values (NaN and the sign of 0 too), flags."""
    assert type(got) is type(want)
    got_leaves, want_leaves = _leaves(got), _leaves(want)
    assert [p for p, _ in got_leaves] == [p for p, _ in want_leaves]
    for (_, a), (_, b) in zip(got_leaves, want_leaves, strict=True):
        assert type(a) is type(b)
        if isinstance(b, np.ndarray):
            assert a.dtype == b.dtype and a.shape == b.shape
            assert a.flags.writeable == b.flags.writeable
            assert a is not b and not np.shares_memory(a, b)
            if b.dtype.kind in "fc":
                np.testing.assert_array_equal(np.signbit(a.real), np.signbit(b.real))
            np.testing.assert_array_equal(a, b)
        else:
            assert a is b or a == b or (a != a and b != b)


def _cold_then_warm(make):
    filler._VERDICTS.clear()
    cold = _outcome(make)
    warm = [_outcome(make) for _ in range(2)]
    return cold, warm


@pytest.mark.parametrize("fill_name", list(FILLS))
@pytest.mark.parametrize("space_name", list(SPACES))
@pytest.mark.parametrize("form", ["item", "item_one_hot", "batch_2", "batch_0"])
def test_a_remembered_fill_check_gives_what_a_fresh_one_does(form, space_name, fill_name):
    space, fill = SPACES[space_name], FILLS[fill_name]
    if form == "item":
        make = lambda: filler_item(space, fill)  # noqa: E731
    elif form == "item_one_hot":
        make = lambda: filler_item(space, fill, one_hot_discrete=True)  # noqa: E731
    else:
        n = int(form.rsplit("_", 1)[1])
        make = lambda: filler_batch(space, fill, n)  # noqa: E731
    (cold_kind, cold), warm = _cold_then_warm(make)
    for warm_kind, value in warm:
        assert warm_kind == cold_kind
        if cold_kind == "error":
            assert value == cold
        else:
            _assert_same(value, cold)


@pytest.mark.parametrize("fill_name", list(FILLS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.uint8, np.bool_])
def test_filler_leaf_remembers_alike(dtype, fill_name):
    fill = FILLS[fill_name]
    (cold_kind, cold), warm = _cold_then_warm(lambda: filler_leaf((2,), fill, dtype))
    for warm_kind, value in warm:
        assert warm_kind == cold_kind
        if cold_kind == "error":
            assert value == cold
        else:
            _assert_same(value, cold)


def test_equal_fills_of_other_types_are_checked_apart():
    """0, 0.0, False and NaNs share no verdict: each keeps its own outcome."""
    box = gs.Box(0, 255, (1,), np.uint8)
    filler._VERDICTS.clear()
    assert filler_item(box, 0).tolist() == [0]
    assert filler_item(box, False).tolist() == [0]
    assert filler_item(box, 0.0).tolist() == [0]
    with pytest.raises(ValueError, match="the value changes"):
        filler_item(box, -1)
    with pytest.raises(ValueError, match="the value changes"):
        filler_item(box, float("nan"))
    nan_box = gs.Box(0, 1, (1,), np.float32)
    assert np.isnan(filler_item(nan_box, float("nan"))).all()
    assert np.isnan(filler_item(nan_box, np.float32("nan"))).all()
    assert np.signbit(filler_item(nan_box, -0.0)).all()
    assert not np.signbit(filler_item(nan_box, 0.0)).any()


def test_a_repeated_plain_fill_is_checked_once(monkeypatch):
    calls = []
    check = filler._check_fill
    monkeypatch.setattr(filler, "_check_fill", lambda *a: (calls.append(a), check(*a))[1])
    filler._VERDICTS.clear()
    space = gs.Dict({"a": gs.Box(-1, 1, (4,)), "b": gs.Discrete(3)})
    for _ in range(5):
        filler_item(space, 0.0)
        filler_batch(space, 0.0, 3)
    assert len(calls) == 2  # once per leaf
    for _ in range(3):  # a refused fill is checked anew every time
        with pytest.raises(ValueError):
            filler_item(space, "0")
    assert len(calls) == 5


def test_the_remembered_verdicts_stay_bounded():
    filler._VERDICTS.clear()
    box = gs.Box(-1, 1, (1,), np.float64)
    for i in range(3 * filler._MAX_VERDICTS):
        assert filler_item(box, float(i)).tolist() == [float(i)]
    assert len(filler._VERDICTS) <= filler._MAX_VERDICTS


@pytest.mark.parametrize("numpy", [False, True])
def test_padded_reads_stay_writable_and_unshared(numpy):
    ep = SingleAgentEpisode(
        observations=[np.ones(2, np.float32)] * 3,
        actions=[0, 1],
        rewards=[1.0, 2.0],
        observation_space=gs.Box(-1, 1, (2,), np.float32),
        action_space=gs.Discrete(2),
        len_lookback_buffer=0,
    )
    if numpy:
        ep.to_numpy()
    for _ in range(2):
        first = ep.get_observations(slice(-3, -1), neg_index_as_lookback=True, fill=0.0)
        assert np.asarray(first[0]).flags.writeable
        first[0][...] = 7.0
        again = ep.get_observations(slice(-3, -1), neg_index_as_lookback=True, fill=0.0)
        np.testing.assert_array_equal(np.asarray(again), np.zeros((2, 2), np.float32))
        one = ep.get_observations(-1, neg_index_as_lookback=True, fill=0.0)
        one[...] = 5.0
        assert ep.get_observations(-1, neg_index_as_lookback=True, fill=0.0).tolist() == [0, 0]


# -- one integer one-hot: the same as the array path ------------------------------------------

DISCRETES = {
    "n3": gs.Discrete(3),
    "start_minus_2": gs.Discrete(4, start=-2),
    "start_high": gs.Discrete(2, start=2**62),
    "int32": gs.Discrete(5, dtype=np.int32),
    "huge_n": gs.Discrete(2**62),
}

VALUES = {
    "zero": 0,
    "one": 1,
    "two": 2,
    "three": 3,
    "minus_one": -1,
    "minus_two": -2,
    "np_int8": np.int8(1),
    "np_uint8": np.uint8(2),
    "np_int64": np.int64(-2),
    "np_uint64_max": np.uint64(2**64 - 1),
    "start_high": 2**62 + 1,
    "beyond_64_bits": 2**70,
    "below_64_bits": -(2**70),
    "int64_max": 2**63 - 1,
}


@pytest.mark.parametrize("value_name", list(VALUES))
@pytest.mark.parametrize("space_name", list(DISCRETES))
def test_one_integer_one_hots_as_the_array_path(space_name, value_name):
    space, value = DISCRETES[space_name], VALUES[value_name]
    fast = _outcome(lambda: one_hot(value, space))
    slow = _outcome(lambda: one_hot(np.asarray(value), space))  # a 0-dim array: the array path
    assert fast[0] == slow[0]
    if slow[0] == "error":
        assert fast[1] == slow[1]
    else:
        _assert_same(fast[1], slow[1])
        assert fast[1].flags.c_contiguous


def test_one_integer_skips_the_array_scan(monkeypatch):
    def refuse(*args):
        raise AssertionError("scanned as an array")

    monkeypatch.setattr(one_hot_module, "_as_indices", refuse)
    space = gs.Discrete(4, start=1)
    assert one_hot(2, space).tolist() == [0, 1, 0, 0]
    assert one_hot(np.int64(4), space).tolist() == [0, 0, 0, 1]
    with pytest.raises(ValueError, match="out of range"):
        one_hot(0, space)


@pytest.mark.parametrize("numpy", [False, True])
def test_a_one_hot_action_read_is_as_before(numpy):
    space = gs.Discrete(3, start=1)
    ep = SingleAgentEpisode(
        observations=[0, 0, 0],
        actions=[3, 1],
        rewards=[0.0, 0.0],
        action_space=space,
        len_lookback_buffer=0,
    )
    if numpy:
        ep.to_numpy()
    for i in (-1, 0):
        got = ep.get_actions(i, one_hot_discrete=True)
        _assert_same(got, one_hot(np.asarray(ep.get_actions(i)), space))


# -- spaces of one's own with a shape and dtype fill as a Box of them ---------------------------


class Simplex(gym.Space):
    def __init__(self, n):
        super().__init__((n,), np.float32)

    def contains(self, x):
        return np.asarray(x).shape == self.shape


class Shapeless(gym.Space):
    def __init__(self):
        super().__init__(None, None)

    def contains(self, x):
        return True


BOX3 = gs.Box(-np.inf, np.inf, (3,), np.float32)


@pytest.mark.parametrize("fill", [0.0, -1, np.nan, True, 1e40, "x"])
def test_a_shaped_space_of_ones_own_fills_as_a_box(fill):
    for make in (
        lambda sp: filler_item(sp, fill),
        lambda sp: filler_batch(sp, fill, 2),
        lambda sp: filler_item(gs.Dict({"s": sp}), fill)["s"],
    ):
        got = _outcome(lambda make=make: make(Simplex(3)))
        want = _outcome(lambda make=make: make(BOX3))
        assert got[0] == want[0]
        if want[0] == "error":
            assert got[1][0] is want[1][0]
        else:
            _assert_same(got[1], want[1])


def test_a_space_without_shape_or_number_dtype_fills_with_fill_itself():
    assert filler_item(Shapeless(), 0.5) == 0.5
    assert filler_batch(Shapeless(), 0.5, 2).tolist() == [0.5, 0.5]
    obj = gym.Space((2,), object)
    assert filler_item(obj, "x") == "x"


READS = {
    "slice": lambda e: e.get_observations(slice(-2, 2), neg_index_as_lookback=True, fill=0.0),
    "index_list": lambda e: e.get_observations([-1, 0], neg_index_as_lookback=True, fill=0.0),
    "index": lambda e: e.get_observations(-1, neg_index_as_lookback=True, fill=-1.0),
    "actions": lambda e: e.get_actions(slice(-2, 1), neg_index_as_lookback=True, fill=0.0),
    "frame_stack": lambda e: FrameStack(2)([e], {})["obs"],
    "frame_stack_flat": lambda e: FrameStack(2, flatten=True)([e], {})["obs"],
    "prev_actions": lambda e: PrevActionsPrevRewards(2, 1)([e], {})["prev_n_actions"],
}


def _episode(space, numpy):
    ep = SingleAgentEpisode(
        observations=[np.full(3, i, np.float32) for i in range(3)],
        actions=[np.full(3, 0.5, np.float32)] * 2,
        rewards=[1.0, 2.0],
        observation_space=space,
        action_space=space,
        len_lookback_buffer=0,
    )
    if numpy:
        ep.to_numpy()
    return ep


@pytest.mark.parametrize("numpy", [False, True])
@pytest.mark.parametrize("read", list(READS))
def test_reads_of_a_shaped_space_of_ones_own_pad_as_with_a_box(read, numpy):
    got = READS[read](_episode(Simplex(3), numpy))
    want = READS[read](_episode(BOX3, numpy))
    assert type(got) is type(want)
    if isinstance(want, list):
        assert len(got) == len(want)
        for a, b in zip(got, want, strict=True):
            _assert_same(a, b)
    else:
        _assert_same(got, want)
