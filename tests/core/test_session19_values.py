"""Values numpy columns hold (session 19 hunt): big ints into bools, NULs, concat across dtypes.

- A Python int beyond uint64 (``2**64``) into a numpy'd bool column was stored as True, while
  5 is refused (contract §3.7: "5 into bools" does not fit).
- numpy's fixed-width strings drop trailing NULs: a numpy'd column stored ``"a\\x00"`` as
  ``"a"``. It now refuses such a value; numpy'ing a list-mode column still drops them.
- ``concat_episode`` without an observation space refused a successor whose first observation
  equals the last one in value but is held in another dtype (contract §6.3: by value).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from episodes.spaces import equal_in_space


def _column(items: list[Any]) -> InfiniteLookbackBuffer:
    buffer = InfiniteLookbackBuffer(items)
    buffer.finalize()
    return buffer


# ------------------------------------------------------------------ big ints into bool columns
BIG_INTS = {"2**64": 2**64, "2**100": 2**100, "-2**64": -(2**64), "2**64 - 1": 2**64 - 1, "5": 5}

# How a value is written into a numpy'd column of bools ([False, False] stored).
BOOL_WRITES: dict[str, Callable[[InfiniteLookbackBuffer, Any], None]] = {
    "append": lambda buf, v: buf.append(v),
    "extend": lambda buf, v: buf.extend([False, v]),
    "set at index": lambda buf, v: buf.set(v, at_indices=0),
    "set slice": lambda buf, v: buf.set([True, v], at_indices=slice(0, 2)),
}


@pytest.mark.parametrize("write", list(BOOL_WRITES), ids=list(BOOL_WRITES))
@pytest.mark.parametrize("value", list(BIG_INTS.values()), ids=list(BIG_INTS))
def test_ints_no_bool_holds_are_refused(write: str, value: int) -> None:
    buf = _column([np.bool_(False), np.bool_(False)])
    before = buf.data.copy()
    with pytest.raises(ValueError, match="does not fit a numpy column of dtype bool"):
        BOOL_WRITES[write](buf, value)
    assert buf.data.tolist() == before.tolist()


@pytest.mark.parametrize(
    "dtype", [np.int8, np.int64, np.uint8, np.uint64], ids=lambda d: np.dtype(d).name
)
@pytest.mark.parametrize("value", [2**64, 2**100, -(2**64)], ids=["2**64", "2**100", "-2**64"])
def test_ints_beyond_uint64_into_int_columns_are_refused(dtype: type, value: int) -> None:
    buf = _column([dtype(0), dtype(1)])
    with pytest.raises(ValueError, match="does not fit a numpy column"):
        buf.append(value)
    assert buf.data.tolist() == [0, 1]


def test_int_beyond_uint64_into_a_float_column_keeps_its_rule() -> None:
    buf = _column([np.float32(0.0)])
    buf.append(2**64)  # a float holds it, rounded (ints into floats round, contract §3.7)
    assert buf.data.tolist() == [0.0, float(np.float32(2**64))]
    with pytest.raises(ValueError, match="does not fit"):
        buf.append(10**400)  # beyond float32's range


def test_add_env_step_refuses_a_big_int_for_a_bool_extra_output() -> None:
    ep = SingleAgentEpisode(observation_space=gym.spaces.Box(-1, 1, (1,), np.float32))
    ep.add_env_reset(np.zeros(1, np.float32))
    ep.add_env_step(np.zeros(1, np.float32), 0, 1.0, extra_model_outputs={"flag": np.bool_(0)})
    ep.to_numpy()
    snapshot = copy.deepcopy(ep)
    with pytest.raises(ValueError, match="extra_model_outputs\\['flag'\\]"):
        ep.add_env_step(np.zeros(1, np.float32), 0, 1.0, extra_model_outputs={"flag": 2**64})
    assert ep == snapshot
    assert ep.get_extra_model_outputs("flag").tolist() == [False]


# ------------------------------------------------------------------------- trailing NULs
STRING_WRITES: dict[str, tuple[list[Any], Callable[[InfiniteLookbackBuffer], None]]] = {
    "append str": (["x", "yy"], lambda buf: buf.append("a\x00")),
    "append np.str_": (["x", "yy"], lambda buf: buf.append(np.str_("a\x00"))),
    "append only NULs": (["x", "yy"], lambda buf: buf.append("\x00")),
    "append bytes": ([b"x", b"yy"], lambda buf: buf.append(b"a\x00")),
    "extend": (["x", "yy"], lambda buf: buf.extend(["b", "a\x00"])),
    "set at index": (["x", "yy"], lambda buf: buf.set("a\x00", at_indices=0)),
    "set slice": (["x", "yy"], lambda buf: buf.set(["q", "a\x00"], at_indices=slice(0, 2))),
    "set index list": (["x", "yy"], lambda buf: buf.set(["q", "a\x00"], at_indices=[0, 1])),
    "extend an empty column": ([], lambda buf: buf.extend(["b", "a\x00"])),
    "append to an empty column": ([], lambda buf: buf.append("a\x00")),
}


@pytest.mark.parametrize("case", list(STRING_WRITES), ids=list(STRING_WRITES))
def test_numpy_string_columns_refuse_trailing_nuls(case: str) -> None:
    items, write = STRING_WRITES[case]
    buf = _column(items)
    before = copy.deepcopy(buf)
    with pytest.raises(ValueError, match="drop trailing NUL characters"):
        write(buf)
    assert buf == before


def test_the_refusal_shows_the_nul_of_a_numpy_string() -> None:
    buf = _column(["x"])
    with pytest.raises(ValueError, match=r"np\.str_\('a\\x00'\)"):
        buf.append(np.str_("a\x00"))


def test_inner_nuls_and_object_columns_are_kept() -> None:
    buf = _column(["x", "yyy"])
    buf.append("a\x00b")
    assert str(buf.data[-1]) == "a\x00b"
    objects = InfiniteLookbackBuffer([None, "x"])
    objects.finalize()
    objects.append("a\x00")
    assert objects.data[-1] == "a\x00"


def test_numpyd_text_episode_refuses_a_trailing_nul_and_to_numpy_keeps_dropping_them() -> None:
    space = gym.spaces.Text(max_length=4, charset="ab\x00")
    ep = SingleAgentEpisode(observation_space=space)
    ep.add_env_reset("a\x00")
    ep.add_env_step("b\x00\x00", 0, 1.0)
    ep.to_numpy()  # as RLlib: numpy's fixed-width strings drop them
    assert [str(o) for o in ep.get_observations()] == ["a", "b"]
    snapshot = copy.deepcopy(ep)
    with pytest.raises(ValueError, match="drop trailing NUL characters"):
        ep.add_env_step("a\x00", 0, 1.0)
    assert ep == snapshot
    ep.add_env_step("ab", 0, 1.0)
    assert str(ep.get_observations(-1)) == "ab"


# -------------------------------------------------------------- concat across leaf dtypes
def _chunk(observations: list[Any], *, numpy: bool, t_started: int = 0) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(
        id_="x",
        observations=observations,
        actions=[0] * (len(observations) - 1),
        rewards=[1.0] * (len(observations) - 1),
        len_lookback_buffer=0,
        t_started=t_started,
    )
    return ep.to_numpy() if numpy else ep


# (self's last observation, other's first): equal in value, held in other dtypes.
EQUAL_BOUNDARIES = {
    "float32 vs float64": (np.float32([2.0]), np.float64([2.0])),
    "float16 vs float32 NaN": (np.float16([np.nan, 1.0]), np.float32([np.nan, 1.0])),
    "int8 vs int64": (np.int8([3, -1]), np.int64([3, -1])),
    "uint8 vs int64": (np.uint8([255, 0]), np.int64([255, 0])),
    "int64 vs float64": (np.int64([2, 3]), np.float64([2.0, 3.0])),
    "dict leaves": (
        {"a": np.float32([2.0]), "b": np.int32(1)},
        {"a": np.float64([2.0]), "b": np.int64(1)},
    ),
    "tuple vs list leaves": ((np.float32(1.0), np.int8(2)), [np.float64(1.0), np.int64(2)]),
}

# Boundaries that still differ: other values, shapes, nesting or kinds.
DIFFERENT_BOUNDARIES = {
    "other value": (np.float32([2.0]), np.float64([2.5])),
    "float32 rounding": (np.float32([0.1]), np.float64([0.1])),
    "other shape": (np.float32([2.0]), np.float64([[2.0]])),
    "int beyond 2**53 vs float": (np.int64([2**53 + 1]), np.float64([2.0**53])),
    "-1 vs uint64 max": (np.int64([-1]), np.uint64([2**64 - 1])),
    "other dict keys": ({"a": np.float32([2.0])}, {"b": np.float64([2.0])}),
    "NaN vs number": (np.float32([np.nan]), np.float64([1.0])),
    "text vs bytes": ("a", b"a"),
    "number vs string": (np.float64([1.0]), np.array(["1.0"])),
}


def _concat_pair(last: Any, first: Any, numpy: bool) -> tuple[SingleAgentEpisode, Any]:
    ep = _chunk([copy.deepcopy(last), copy.deepcopy(last)], numpy=numpy)
    other = _chunk([first, copy.deepcopy(first)], numpy=numpy, t_started=1)
    return ep, other


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("case", list(EQUAL_BOUNDARIES), ids=list(EQUAL_BOUNDARIES))
def test_concat_without_space_compares_the_boundary_by_value(case: str, numpy: bool) -> None:
    last, first = EQUAL_BOUNDARIES[case]
    assert equal_in_space(first, last, None)
    ep, other = _concat_pair(last, first, numpy)
    ep.concat_episode(other)
    assert ep.t == 2 and len(ep) == 2 and len(ep.observations) == 3


@pytest.mark.parametrize("case", list(DIFFERENT_BOUNDARIES), ids=list(DIFFERENT_BOUNDARIES))
def test_concat_without_space_refuses_a_boundary_of_other_values(case: str) -> None:
    last, first = DIFFERENT_BOUNDARIES[case]
    assert not equal_in_space(first, last, None)
    ep, other = _concat_pair(last, first, numpy=False)
    snapshot = copy.deepcopy(ep)
    with pytest.raises(AssertionError, match="other's first observation differs"):
        ep.concat_episode(other)
    assert ep == snapshot


def test_concat_of_a_successor_numpyd_next_to_float64_steps() -> None:
    ep = SingleAgentEpisode(id_="x")
    ep.add_env_reset(np.array([1.0], np.float32))
    ep.add_env_step(np.array([2.0], np.float32), 0, 1.0)
    successor = ep.cut()
    successor.add_env_step(np.array([3.0]), 0, 1.0)  # the env now gives float64
    successor.to_numpy()  # its float32 first observation becomes float64
    ep.concat_episode(successor)
    assert [np.asarray(o).tolist() for o in ep.get_observations()] == [[1.0], [2.0], [3.0]]


ROW_WRITES = {
    "append a row": lambda buf: buf.append(["x\x00", "y"]),
    "append a tuple row": lambda buf: buf.append(("x", "y\x00")),
    "set a row": lambda buf: buf.set(["z\x00", "w"], at_indices=0),
    "extend rows": lambda buf: buf.extend([["a", "b"], ["c", "d\x00"]]),
    "append an object-array row": lambda buf: buf.append(np.array(["x\x00", "y"], object)),
}


@pytest.mark.parametrize("name", list(ROW_WRITES))
def test_rows_of_strings_refuse_a_trailing_nul_too(name):
    buf = InfiniteLookbackBuffer([np.array(["ab", "cd"]), np.array(["ef", "gh"])])
    buf.finalize()
    before = copy.deepcopy(buf)
    with pytest.raises(ValueError, match="drop trailing NUL"):
        ROW_WRITES[name](buf)
    assert buf == before


EMPTY_PART_SPACES = {
    "empty Dict part": gym.spaces.Dict(
        {"a": gym.spaces.Dict({}), "b": gym.spaces.Discrete(3, start=-1), "c": gym.spaces.Tuple(())}
    ),
    "empty Tuple part": gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Tuple(()))),
}


@pytest.mark.parametrize("name", list(EMPTY_PART_SPACES))
def test_a_numpyd_column_with_an_empty_part_takes_its_own_reads_back(name):
    space = EMPTY_PART_SPACES[name]
    space.seed(0)
    episode = SingleAgentEpisode(
        observations=[space.sample() for _ in range(4)],
        actions=[0, 0, 0],
        rewards=[0.0] * 3,
        observation_space=space,
        action_space=gym.spaces.Discrete(2),
        len_lookback_buffer=0,
    ).to_numpy()
    read = episode.get_observations([3, 0])
    before = copy.deepcopy(episode.get_observations())  # reads are views
    episode.set_observations(new_data=read, at_indices=[0, 3])
    after = episode.get_observations()
    leaf = "b" if name == "empty Dict part" else 0
    assert after[leaf].tolist() == [
        before[leaf][3],
        before[leaf][1],
        before[leaf][2],
        before[leaf][0],
    ]
