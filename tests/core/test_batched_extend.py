"""Extending a numpy column by a list of numbers: the one-stack path equals the per-item casts.

``staged_batch`` stacks a list of plain numbers into a flat number column with one array and
one batch check; it must accept exactly what casting item by item accepts, store the same
values in the same dtype, and leave refusals (and their messages) to the per-item path.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.buffer.value_fit import staged_batch, staged_rows

ODD_VALUES = [
    0,
    1,
    -1,
    300,
    -300,
    2**31,
    2**63,
    -(2**63),
    2**64,
    10**30,
    0.5,
    2.0,
    -0.0,
    1e40,
    float("nan"),
    float("inf"),
    True,
    False,
    np.int8(5),
    np.uint8(250),
    np.float32(1.5),
    np.float16(2),
    np.float64(1e39),
    np.bool_(True),
    np.array(3.0),
    None,
    "1",
    1 + 2j,
    2**53 + 1,
    np.uint64(2**60 + 1),
    np.int64(2**62 + 1),
    16777217,
    -(2**53) - 3,
]
DTYPES = [
    np.float16,
    np.float32,
    np.float64,
    np.int8,
    np.int32,
    np.int64,
    np.uint8,
    np.uint64,
    np.bool_,
]


def _one_by_one(column: np.ndarray, items: list[object]) -> np.ndarray:
    return np.stack([staged_rows([column], item)[0] for item in items])


def _outcome(stage, column, items):  # type: ignore[no-untyped-def]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return "ok", stage(column, items)
        except (ValueError, TypeError, OverflowError) as error:
            return "error", f"{type(error).__name__}: {error}"


@settings(max_examples=1500, deadline=None)
@given(
    dtype=st.sampled_from(DTYPES),
    items=st.lists(st.sampled_from(ODD_VALUES), min_size=1, max_size=5),
)
def test_batch_of_scalars_equals_item_by_item(dtype, items):  # type: ignore[no-untyped-def]
    column = np.zeros(3, dtype)
    batched = _outcome(lambda c, i: staged_batch([c], None, i), column, items)
    single = _outcome(_one_by_one, column, items)
    assert batched[0] == single[0]
    if single[0] == "error":
        assert batched[1] == single[1]
    else:
        assert batched[1].dtype == single[1].dtype
        np.testing.assert_array_equal(batched[1], single[1])


@pytest.mark.parametrize(
    "name, dtype, items, accepted",
    [
        ("floats into float32", np.float32, [[0.5, 1.0], [2.0, 3.0]], True),
        ("float32 rows", np.float32, [np.ones(2, np.float32), np.zeros(2, np.float32)], True),
        ("scalar is not a row of two", np.float32, [1.0, 2.0], False),
        ("1e40 overflows float32", np.float32, [[1e40, 0.0]], False),
        ("0.5 is not an int", np.int64, [[0.5, 1]], False),
        ("-1 is not a uint8", np.uint8, [[-1, 1]], False),
        ("None is not a number", np.float64, [[None, 1.0]], False),
        ("ragged rows", np.float64, [[1.0, 2.0], [1.0]], False),
    ],
)
def test_rows_into_a_box_column(name, dtype, items, accepted):  # type: ignore[no-untyped-def]
    column = np.zeros((4, 2), dtype)
    batched = _outcome(lambda c, i: staged_batch([c], None, i), column, items)
    single = _outcome(_one_by_one, column, items)
    assert batched[0] == single[0] == ("ok" if accepted else "error"), name
    if accepted:
        assert batched[1].dtype == column.dtype
        np.testing.assert_array_equal(batched[1], single[1])
    else:
        assert batched[1] == single[1]


def test_list_chunk_onto_numpy_episode_equals_numpy_chunk() -> None:
    import gymnasium as gym

    space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    rng = np.random.default_rng(0)
    obs = rng.uniform(-1, 1, (12, 3)).astype(np.float32)

    def build(numpy_chunk: bool) -> SingleAgentEpisode:
        ep = SingleAgentEpisode(
            id_="same", observation_space=space, action_space=gym.spaces.Discrete(2)
        )
        ep.add_env_reset(obs[0])
        for t in range(1, 6):
            ep.add_env_step(obs[t], t % 2, 0.5 * t, extra_model_outputs={"v": float(t)})
        nxt = ep.cut(len_lookback_buffer=2)
        for t in range(6, 12):
            nxt.add_env_step(obs[t], t % 2, 0.5 * t, extra_model_outputs={"v": float(t)})
        ep.to_numpy()
        if numpy_chunk:
            nxt.to_numpy()
        ep.concat_episode(nxt)
        return ep

    from_list, from_numpy = build(False), build(True)
    assert from_list == from_numpy
    assert from_list.get_observations().dtype == np.float32
    assert (
        from_list.get_extra_model_outputs("v").dtype
        == from_numpy.get_extra_model_outputs("v").dtype
    )
