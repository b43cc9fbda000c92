"""get_return's quick paths give the float numpy's sum gives, bit for bit.

A few Python floats (or a short float64 array) are added in Python in numpy's pairwise order,
and a float list skips the rounded-int check's max; both are compared here with the reward sum
as it was before them (copied below), over odd rewards.
"""

from __future__ import annotations

import math
import struct
import warnings
from decimal import Decimal
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.episode import returns
from episodes.episode.returns import exact_sum, reward_sum
from episodes.episode.reward_values import first_unreal

# --- the reward sum before the quick paths, as it was --------------------------------------


def _old_reward_sum(rewards: Any) -> float:
    if not len(rewards):
        return 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        return _old_sum(rewards)


def _old_sum(rewards: Any) -> float:
    try:
        try:
            values = np.asarray(rewards)
        except ValueError as error:
            raise returns._not_scalar_rewards(f"ragged rewards ({error})") from error
        if values.dtype is np.dtype(np.float64) and values.ndim == 1:
            if values is not rewards and _old_rounded_ints(values, rewards):
                return exact_sum(list(rewards))
            return float(np.add.reduce(values))
        if values.ndim != 1:
            if values.size != len(values):
                raise returns._not_scalar_rewards(f"rewards of shape {values.shape}")
            values = values.reshape(-1)
        kind = values.dtype.kind
        if kind == "c":
            raise returns._complex_rewards(values)
        if kind == "O":
            odd = next((v for v in values if np.ndim(v) != 0), None)
            if odd is not None:
                raise returns._not_scalar_rewards(f"a reward {odd!r} of type {type(odd).__name__}")
        if kind not in "biufc":
            misfit = first_unreal(rewards if isinstance(rewards, list) else values.tolist())
            if misfit:
                raise TypeError(
                    f"get_return needs real numbers as rewards, got {misfit[0]!r} of type "
                    f"{type(misfit[0]).__name__}"
                )
            return exact_sum(values.tolist())
        if kind == "f" and values.dtype.itemsize < 8:
            return float(values.sum(dtype=np.float64))
        if kind in "iu" and np.abs(values.astype(np.float64)).sum() >= 2.0**62:
            return exact_sum(values.tolist())
        return float(values.sum())
    except OverflowError:
        return exact_sum(rewards)


def _old_rounded_ints(values: np.ndarray, rewards: Any) -> bool:
    import numbers

    with np.errstate(invalid="ignore"):
        if not np.abs(values).max() >= 2.0**53:
            return False
    return all(isinstance(v, numbers.Integral) for v in rewards)


# --- odd rewards ------------------------------------------------------------------------------

_ODD_FLOATS = [
    1e16,
    -1e16,
    1.0,
    -1.0,
    0.1,
    -0.0,
    0.0,
    1e308,
    -1e308,
    5e-324,
    2.0**53,
    2.0**53 + 2,
    math.inf,
    -math.inf,
    math.nan,
    -math.nan,
    3e15,
    1e-300,
    0.5,
    7.0,
]
_ODD_INTS = [
    0,
    1,
    -1,
    2**53,
    2**53 + 1,
    -(2**53) - 1,
    2**62,
    2**63 - 1,
    2**63,
    -(2**63),
    2**64 - 1,
    2**64,
    2**70,
    2**1100,
    -(2**1100),
    3,
]
_NUMPY_TYPES = [
    np.float16,
    np.float32,
    np.float64,
    np.longdouble,
    np.int8,
    np.int16,
    np.int32,
    np.int64,
    np.uint8,
    np.uint16,
    np.uint32,
    np.uint64,
    np.bool_,
]

floats = st.one_of(st.sampled_from(_ODD_FLOATS), st.floats(allow_nan=True, allow_infinity=True))


def _numpy_scalar(pair: tuple[type, float]) -> Any:
    kind, value = pair
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            if np.issubdtype(kind, np.integer):
                info = np.iinfo(kind)
                return kind(min(max(int(value) if math.isfinite(value) else 0, info.min), info.max))
            return kind(value)
        except (OverflowError, ValueError):
            return kind(0)


numpy_scalars = st.tuples(st.sampled_from(_NUMPY_TYPES), floats).map(_numpy_scalar)
odd_items = st.one_of(
    floats,
    st.sampled_from(_ODD_INTS),
    st.booleans(),
    numpy_scalars,
    st.sampled_from([1j, np.complex64(1), np.complex128(2 + 0j), Fraction(1, 3), Decimal("0.1")]),
    st.sampled_from([None, "x", np.array(1.5), np.array([2.0])]),
)
# Float lists most of the time (the quick path), now and then one odd item among them.
reward_lists = st.one_of(
    st.lists(floats, max_size=300),
    st.lists(st.sampled_from([1e16, 1.0, -1e16, 0.1, 3.0]), min_size=7, max_size=140),
    st.lists(floats, max_size=300).flatmap(
        lambda xs: st.tuples(st.just(xs), odd_items, st.integers(0, len(xs))).map(
            lambda t: t[0][: t[2]] + [t[1]] + t[0][t[2] :]
        )
    ),
    st.lists(odd_items, max_size=40),
)


def _outcome(fn: Any, rewards: Any) -> tuple[Any, ...]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            got = fn(rewards)
        except Exception as error:  # noqa: BLE001 - the errors are compared
            return ("error", type(error), str(error))
    return (type(got), struct.pack("<d", got))


def _same(rewards: Any, copy: Any = None) -> None:
    old = _outcome(_old_reward_sum, rewards if copy is None else copy)
    assert _outcome(reward_sum, rewards) == old, [
        struct.pack("<d", r).hex() if type(r) is float else r for r in rewards
    ]


@settings(max_examples=600, deadline=None)
@given(reward_lists)
def test_list_sums_as_before(rewards: list[Any]) -> None:
    _same(rewards, list(rewards))


@settings(max_examples=300, deadline=None)
@given(
    st.lists(floats, max_size=300),
    st.sampled_from(["<f8", ">f8", "<f4", "<f2"]),
    st.sampled_from([1, 2, -1]),
)
def test_array_sums_as_before(rewards: list[float], dtype: str, step: int) -> None:
    with np.errstate(all="ignore"):
        array = np.array(rewards, dtype=np.float64).astype(dtype)[::step]
    _same(array)


@pytest.mark.parametrize(
    ("rewards", "expected"),
    [
        ([], 0.0),
        ([-0.0], 0.0),
        ([-0.0] * 9, 0.0),
        ([1e16, 1.0] * 8, 8e16 + 8),  # numpy's running sums keep the ones; one by one drops them
        ([1e308, 1e308], math.inf),
        ([math.inf, -math.inf], math.nan),
        ([2**62, 2**62], 2.0**63),
        ([0.5, True, 2], 3.5),
    ],
)
def test_known_sums(rewards: list[Any], expected: float) -> None:
    got = reward_sum(rewards)
    assert type(got) is float
    assert got == expected or (math.isnan(got) and math.isnan(expected))
    assert struct.pack("<d", got) == struct.pack("<d", _old_reward_sum(rewards))


class _NoNumpyWork:
    """numpy with its array-making and max-taking refused: the quick paths need neither."""

    def __getattr__(self, name: str) -> Any:
        if name in ("asarray", "abs", "array", "errstate"):
            raise AssertionError(f"np.{name} called")
        return getattr(np, name)


@pytest.mark.parametrize("n", [1, 7, 8, 9, 16, 31, 32, returns._FEW])
def test_few_floats_summed_without_numpy(monkeypatch: pytest.MonkeyPatch, n: int) -> None:
    rewards = [(1e16, 1.0, -3e15, 0.1)[i % 4] for i in range(n)]
    expected = float(np.add.reduce(np.array(rewards)))
    monkeypatch.setattr(returns, "np", _NoNumpyWork())
    assert reward_sum(rewards) == expected
    assert reward_sum(np.array(rewards)) == expected


def test_more_floats_than_few_take_numpy(monkeypatch: pytest.MonkeyPatch) -> None:
    rewards = [(1e16, 1.0, -3e15, 0.1)[i % 4] for i in range(returns._FEW + 1)]
    monkeypatch.setattr(returns, "np", _NoNumpyWork())
    with pytest.raises(AssertionError, match="np.errstate called"):
        reward_sum(rewards)


def test_float_list_skips_the_rounded_int_max(monkeypatch: pytest.MonkeyPatch) -> None:
    rewards = [0.25 * i for i in range(300)]
    real_abs = np.abs
    calls: list[int] = []

    def counted_abs(values: Any) -> Any:
        calls.append(1)
        return real_abs(values)

    monkeypatch.setattr(np, "abs", counted_abs)
    assert reward_sum(rewards) == float(np.add.reduce(np.array(rewards)))
    assert calls == []  # an int list that float64 rounded still takes it:
    assert reward_sum([2**63, -1]) == 2.0**63 - 1 and calls == [1]


def test_numpy_order_check_sees_another_order() -> None:
    assert returns._SAME_ORDER

    def one_by_one(values: list[float]) -> float:
        total = 0.0
        for value in values:
            total += value
        return total

    probe_sums = returns._sums_in_numpy_order
    real = returns._pairwise_sum
    try:
        returns._pairwise_sum = one_by_one  # type: ignore[assignment]
        assert not probe_sums()
    finally:
        returns._pairwise_sum = real


@pytest.mark.parametrize("numpy_mode", [False, True])
@pytest.mark.parametrize("n", [0, 5, 20, 40])
def test_episode_return_leaves_out_the_lookback(numpy_mode: bool, n: int) -> None:
    rewards = [(1e16, 1.0, -1e16, 0.1)[i % 4] for i in range(n + 3)]
    episode = SingleAgentEpisode(
        observations=[0] * (n + 4), actions=[0] * (n + 3), rewards=rewards, len_lookback_buffer=3
    )
    if numpy_mode:
        episode.to_numpy()
    got = episode.get_return()
    assert type(got) is float
    assert got == _old_reward_sum(rewards[3:]) == float(np.add.reduce(np.array(rewards[3:])))


def test_nan_sign_as_numpy_gives_it() -> None:
    # Python's float additions give a NaN the sign of one operand or the other, as the
    # interpreter's specialized additions order them; the sum of NaNs is numpy's.
    nan, minus_nan = math.nan, -math.nan
    for rewards in ([nan, minus_nan], [minus_nan, nan], [minus_nan, 1.0, nan] * 4):
        for _ in range(20):  # past the interpreter's warm-up of the additions
            assert struct.pack("<d", reward_sum(rewards)) == struct.pack(
                "<d", _old_reward_sum(list(rewards))
            )
            assert struct.pack("<d", reward_sum(np.array(rewards))) == struct.pack(
                "<d", _old_reward_sum(np.array(rewards))
            )
