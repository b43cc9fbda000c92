"""docs/contract.md §8 as a property: whatever an operation gets, it either succeeds and leaves a
valid episode, or raises one of the documented exception types and leaves the episode exactly as
it was. The tables in tests/core/test_bad_input.py name the known cases; this draws hostile
arguments (wrong shapes, dtypes, strings, NaN, unknown keys, out-of-range indices) for every
writing and reading operation, in list and numpy mode, with and without spaces.
"""

from __future__ import annotations

import copy
import functools
import linecache
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

import episodes
from episodes import InfiniteLookbackBuffer, SingleAgentEpisode

OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
ACT_SPACES = {
    "discrete": gym.spaces.Discrete(3),
    "box": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
}
# What docs/contract.md §8.2 allows an operation to raise on bad input; anything else is a bug.
DOCUMENTED = (AssertionError, IndexError, ValueError, TypeError, KeyError)
# ... raised on purpose: by a ``raise`` statement of the package itself (the innermost frame of
# the traceback), never by Python or numpy tripping over a value inside it. Every refusal seen
# in 8,000 random examples (about 50 raise sites, 730 distinct messages) is such a raise.
_PACKAGE = Path(episodes.__file__).resolve().parent
# Python's own messages for a crash; a refusal may quote numpy's conversion errors, not these.
_CRASH_MESSAGES = re.compile(
    "|".join(
        [
            r"object is not subscriptable",
            r"unsupported operand type",
            r"(list|tuple) index out of range",
            r"has no attribute",
            r"takes \d+ positional arguments? but",
            r"missing \d+ required (positional|keyword)",
            r"unexpected keyword argument",
            r"object is not (iterable|callable)",
            r"unhashable type",
            r"not supported between instances",
            r"cannot be interpreted as an integer",
            r"is out of bounds for axis",
            r"too many indices for array",
            r"only integers, slices",
            r"has no len\(\)",
            r"can't multiply sequence",
            r"can only concatenate",
            r"truth value of an array",
            r"pop from empty list",
            r"division by zero",
            r"^'[^']*'$",  # a bare KeyError from a dict lookup
        ]
    )
)


@functools.cache
def _in_package(filename: str) -> bool:
    return Path(filename).resolve().is_relative_to(_PACKAGE)


def _not_deliberate(error: BaseException) -> str | None:
    """Why ``error`` is no deliberate refusal (a crash of a documented type), or None."""
    tb = error.__traceback__
    while tb is not None and tb.tb_next is not None:  # the innermost frame: where it was raised
        tb = tb.tb_next
    assert tb is not None
    filename, lineno = tb.tb_frame.f_code.co_filename, tb.tb_lineno
    line = linecache.getline(filename, lineno).strip()
    if not _in_package(filename):
        return f"raised outside the package, at {filename}:{lineno}: {line}"
    if not line.startswith("raise"):
        return f"raised by no raise statement, at {filename}:{lineno}: {line}"
    if _CRASH_MESSAGES.search(str(error)):
        return f"raised with Python's message for a crash: {error}"
    return None


def _crash(kind: type[Exception], message: str) -> None:
    raise kind(message)


def _package_crash() -> None:
    # A TypeError inside the package (``self.t - self.t_started``), from no raise statement.
    SingleAgentEpisode.__len__(SimpleNamespace(t=None, t_started=0))


@pytest.mark.parametrize(
    ("raiser", "deliberate"),
    [
        (lambda: SingleAgentEpisode().get_actions(5), True),
        (lambda: InfiniteLookbackBuffer([1]).get(1.5), True),
        (lambda: SingleAgentEpisode().slice([0]), True),
        (lambda: _crash(TypeError, "a test helper"), False),  # outside the package
        (lambda: np.zeros(2)[5], False),
        (lambda: [][0], False),
        (_package_crash, False),  # inside the package, but no raise statement
    ],
    ids=["episode-get", "buffer-get", "slice", "outside", "numpy", "python", "package"],
)
def test_only_the_package_raise_statements_count_as_refusals(raiser, deliberate):
    with pytest.raises(DOCUMENTED) as error:
        raiser()
    assert (_not_deliberate(error.value) is None) is deliberate, _not_deliberate(error.value)


def _obs(i: int) -> np.ndarray:
    return np.full(2, (i % 10) / 10, np.float32)


def _action(kind: str, i: int) -> Any:
    return i % 3 if kind == "discrete" else np.full(2, (i % 5) / 5, np.float32)


@st.composite
def recorded(draw: st.DrawFn) -> SingleAgentEpisode:
    """A valid episode: list or numpy mode, spaces or none, an optional lookback."""
    kind = draw(st.sampled_from(sorted(ACT_SPACES)))
    with_spaces = draw(st.booleans())
    ep = SingleAgentEpisode(
        "ep",
        observation_space=OBS_SPACE if with_spaces else None,
        action_space=ACT_SPACES[kind] if with_spaces else None,
    )
    ep.add_env_reset(_obs(0))
    n = draw(st.integers(0, 5))
    for i in range(1, n + 1):
        ep.add_env_step(
            _obs(i), _action(kind, i), float(i), {"i": i}, extra_model_outputs={"vf": i / 2}
        )
    if n and draw(st.booleans()):
        ep = ep.cut(len_lookback_buffer=draw(st.integers(0, 3)))
        for i in range(n + 1, n + 1 + draw(st.integers(0, 3))):
            ep.add_env_step(_obs(i), _action(kind, i), float(i), extra_model_outputs={"vf": 0.5})
    if draw(st.booleans()):
        ep.to_numpy()
    ep.custom_data["kind"] = kind
    return ep


def hostile_values() -> st.SearchStrategy[Any]:
    """Values that may or may not fit a column: right and wrong shapes, dtypes and kinds."""
    return st.one_of(
        st.sampled_from(
            [
                np.zeros(2, np.float32),
                np.full(2, 0.5, np.float32),
                np.zeros(3, np.float32),
                np.zeros((2, 2), np.float32),
                np.zeros(0),
                np.array(["a", "b"]),
                np.array([np.nan, 0.0], np.float32),
                np.full(2, 7.0, np.float32),
                np.zeros(2, np.int64),
                0,
                2,
                7,
                -1,
                0.5,
                float("nan"),
                float("inf"),
                True,
                "x",
                None,
                {"k": 1},
                [1, 2],
                (1, 2),
                [],
            ]
        ),
        st.floats(allow_nan=True, allow_infinity=True),
        st.integers(-5, 5),
    )


def indices() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.none(),
        st.integers(-8, 8),
        st.builds(slice, st.integers(-8, 8) | st.none(), st.integers(-8, 8) | st.none()),
        st.lists(st.integers(-8, 8), max_size=3),
        st.sampled_from([1.5, "0", slice(0, 4, -1), slice(0, 2, 2), slice(None, None, 0)]),
    )


def in_range(n: int) -> st.SearchStrategy[Any]:
    """Indices that address a column of ``n`` items (lookback aside): the reads that succeed."""
    if n == 0:
        return st.sampled_from([None, slice(None), slice(0, 0), []])
    index = st.integers(-n, n - 1)
    return st.one_of(st.none(), index, _slices(n), st.lists(index, min_size=1, max_size=3))


def _slices(n: int) -> st.SearchStrategy[slice]:
    bound = st.none() | st.integers(-n, n)
    return st.builds(slice, bound, bound)


@st.composite
def operations(draw: st.DrawFn, ep: SingleAgentEpisode) -> tuple[str, Any]:
    """One operation on ``ep`` with drawn, possibly hostile, arguments."""
    name = draw(
        st.sampled_from(
            [
                "add_env_step",
                "add_env_reset",
                "set",
                "set_extra",
                "concat",
                "to_numpy",
                "cut",
                "slice",
                "get",
                "slice",  # reads twice as often: their own check (nothing changes) needs them
                "get",
            ]
        )
    )
    value = draw(hostile_values())
    if name == "add_env_step":
        kind = ep.custom_data["kind"]
        i = ep.t + 1
        observation = draw(st.sampled_from([_obs(i), value]))
        action = draw(st.sampled_from([_action(kind, i), value]))
        reward = draw(st.sampled_from([1.0, value]))
        extras = draw(
            st.sampled_from(
                [{"vf": 0.5}, {"vf": value}, None, {}, {"vf": 0.5, "new": 1.0}, {"new": 1.0}]
            )
        )
        flags = draw(st.sampled_from([{}, {"terminated": True}, {"truncated": True}]))
        infos = draw(st.sampled_from([None, {"i": i}]))
        return name, lambda e: e.add_env_step(
            observation, action, reward, infos, extra_model_outputs=extras, **flags
        )
    if name == "add_env_reset":
        return name, lambda e: e.add_env_reset(value)
    if name in ("set", "set_extra"):
        at = draw(indices())
        new_data = draw(st.one_of(st.just(value), st.lists(hostile_values(), max_size=4)))
        lookback = draw(st.booleans())
        if name == "set_extra":
            key = draw(st.sampled_from(["vf", "nope"]))
            return name, lambda e: e.set_extra_model_outputs(
                key=key, new_data=new_data, at_indices=at, neg_index_as_lookback=lookback
            )
        setter = draw(st.sampled_from(["set_observations", "set_actions", "set_rewards"]))
        return setter, lambda e: getattr(e, setter)(
            new_data=new_data, at_indices=at, neg_index_as_lookback=lookback
        )
    if name == "concat":
        return name, lambda e: e.concat_episode(draw(successors(e)))
    if name == "to_numpy":
        return name, lambda e: e.to_numpy()
    if name == "cut":
        lookback = draw(st.sampled_from([0, 2, -1, 1.5, "2"]))
        return name, lambda e: e.cut(len_lookback_buffer=lookback)
    if name == "slice":
        wide = st.none() | st.integers(-8, 8)
        part = draw(st.one_of(_slices(len(ep)), st.builds(slice, wide, wide), indices()))
        return name, lambda e: e.slice(part)
    getter = draw(
        st.sampled_from(["get_observations", "get_actions", "get_rewards", "get_infos", "vf"])
    )
    n = len(ep) + (getter in ("get_observations", "get_infos"))
    at = draw(st.one_of(in_range(n), indices()))  # in range as often as hostile
    kwargs = dict(
        neg_index_as_lookback=draw(st.booleans()),
        fill=draw(st.sampled_from([None, 0.0, value])),
    )
    if getter in ("get_observations", "get_actions"):
        kwargs["one_hot_discrete"] = draw(st.booleans())
    if getter == "get_infos":
        kwargs.pop("fill")
    if getter == "vf":
        return getter, lambda e: e.get_extra_model_outputs("vf", at, **kwargs)
    return getter, lambda e: getattr(e, getter)(at, **kwargs)


@st.composite
def successors(draw: st.DrawFn, ep: SingleAgentEpisode) -> SingleAgentEpisode:
    """A chunk to concat onto ``ep``: usually a proper successor, sometimes a misfit one."""
    kind = ep.custom_data["kind"]
    base = SingleAgentEpisode("ep", t_started=ep.t, len_lookback_buffer=0)
    first = ep.get_observations(-1) if len(ep.observations) else _obs(0)
    base.observations.append(first)
    base.infos.append({})
    value = draw(hostile_values())
    for i in range(draw(st.integers(0, 2))):
        base.add_env_step(
            draw(st.sampled_from([_obs(i), value])),
            draw(st.sampled_from([_action(kind, i), value])),
            draw(st.sampled_from([1.0, value])),
            extra_model_outputs=draw(st.sampled_from([{"vf": 0.5}, {"vf": value}, {"x": 0.5}])),
        )
    if draw(st.booleans()):
        try:
            base.to_numpy()
        except ValueError:
            pass  # a misfit chunk that cannot be numpy'd stays in list mode
    return base


@settings(
    max_examples=1000,  # cheap examples; many operations and modes to cover
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(data=st.data())
def test_an_operation_either_succeeds_validly_or_changes_nothing(data):
    ep = data.draw(recorded())
    name, call = data.draw(operations(ep))
    before = copy.deepcopy(ep)
    try:
        result = call(ep)
    except DOCUMENTED as error:
        event(f"{name} raised {type(error).__name__}")
        assert _not_deliberate(error) is None, f"{name}: {_not_deliberate(error)}"
        assert ep == before, f"{name} raised {error!r} and changed the episode"
        ep.validate()
        return
    event(f"{name} succeeded")
    ep.validate()
    if isinstance(result, SingleAgentEpisode):
        result.validate()
    if name.startswith("get") or name in ("vf", "cut", "slice"):
        assert ep == before, f"{name} is a read but changed the episode"


# ------------------------------------------------------------------------------ buffers alone
BUFFER_ITEMS = {
    "ints": [1, 2, 3, 4],
    "floats": [0.5, 1.5, 2.5, 3.5],
    "rows": [np.full(2, i, np.float32) for i in range(4)],
    "dicts": [{"a": i, "b": np.full(2, i, np.float32)} for i in range(4)],
    "tuples": [(i, float(i)) for i in range(4)],
}


@st.composite
def buffers(draw: st.DrawFn) -> InfiniteLookbackBuffer:
    items = copy.deepcopy(BUFFER_ITEMS[draw(st.sampled_from(sorted(BUFFER_ITEMS)))])
    buf = InfiniteLookbackBuffer(items, lookback=draw(st.integers(0, 3)))
    if draw(st.booleans()):
        buf.finalize()
    return buf


def _buffer_values() -> st.SearchStrategy[Any]:
    return st.one_of(
        hostile_values(),
        st.sampled_from(
            [
                {"a": 1, "b": np.zeros(2, np.float32)},
                {"a": 1},
                {"a": 1, "b": np.zeros(3)},
                (1, 2.0),
                (1,),
                InfiniteLookbackBuffer([5, 6], lookback=1),
            ]
        ),
    )


@settings(
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(data=st.data())
def test_a_buffer_operation_either_succeeds_or_changes_nothing(data):
    buf = data.draw(buffers())
    name = data.draw(
        st.sampled_from(["get", "set", "append", "extend", "pop", "concat", "truncate", "item"])
    )
    value = data.draw(_buffer_values())
    at = data.draw(indices())
    lookback = data.draw(st.booleans())
    calls = {
        "get": lambda b: b.get(
            at,
            neg_index_as_lookback=lookback,
            fill=data.draw(st.sampled_from([None, 0.0, value])),
        ),
        "set": lambda b: b.set(
            data.draw(st.one_of(st.just(value), st.lists(_buffer_values(), max_size=4))),
            at_indices=at,
            neg_index_as_lookback=lookback,
        ),
        "append": lambda b: b.append(value),
        "extend": lambda b: b.extend(data.draw(st.lists(_buffer_values(), max_size=3))),
        "pop": lambda b: b.pop(data.draw(st.sampled_from([-1, 0, 2, 9, -9, 1.5]))),
        "concat": lambda b: b.concat(value),
        "truncate": lambda b: b.truncate(data.draw(st.sampled_from([0, 2, 4, 9, -1, 1.5]))),
        "item": lambda b: b[at],
    }
    before = copy.deepcopy(buf)
    try:
        calls[name](buf)
    except DOCUMENTED as error:
        event(f"buffer {name} raised {type(error).__name__}")
        assert _not_deliberate(error) is None, f"buffer {name}: {_not_deliberate(error)}"
        assert buf == before, f"{name} raised {error!r} and changed the buffer"
        return
    event(f"buffer {name} succeeded")
    buf.get()  # still readable (a pending bad value would fail here)
    assert buf.lookback <= buf.len_incl_lookback()
    if name in ("get", "item"):
        assert buf == before, f"{name} is a read but changed the buffer"
