"""Behaviour that hand-made mutants of ``episodes.connectors.joining``,
``episodes.connectors.list_rows`` and ``episodes.connectors.base`` showed no test pinned
(session 47, sixth batch).

Each test fails with a mutant (named beside it) applied, and passes on the code as it is.
Columns of several episodes are joined through ``AddLearnerColumns`` and ``concat_rows``, and
compared with plain references built from the episodes' getters; the joining rules are driven
through ``join_leaves`` and ``text_join_pair``.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors import AddLearnerColumns, concat_rows, sliding_rows
from episodes.connectors.joining import join_leaves, text_join_pair


def _episode(id_: Any, obs: Any) -> SingleAgentEpisode:
    """A numpy'd episode of ``len(obs) - 1`` steps over the observations given (no lookback)."""
    n = len(obs) - 1
    return SingleAgentEpisode(
        id_, observations=obs, actions=[0] * n, rewards=[0.0] * n, len_lookback_buffer=0
    ).to_numpy()


def _obs_rows(episodes: list[SingleAgentEpisode]) -> list[Any]:
    """The learner rows of ``obs`` as plain Python values: each episode's observations of its
    steps, read one step at a time with the getter."""
    return [ep.get_observations(t).item() for ep in episodes for t in range(len(ep))]


# ------------------------------------------------------------------ joining: lossless ints

# mutants: `kind not in "iu"` for the first leaf (a bool first leaf skips the int check),
# `d.kind not in "iu"` among the leaves (a bool leaf skips it), `and leaf.size` dropped (an
# empty uint64 part reaches `max()`), `d is None and ...` (a float part no longer skips it)
INT_JOINS = [
    pytest.param(
        [
            np.array([True, False, True]),
            np.array([-1, -2]),
            np.array([2**60, 5], np.uint64),
        ],
        np.int64,
        id="bool-first-beside-int-and-uint64",
    ),
    pytest.param(
        [
            np.array([3, -1, 4]),
            np.array([2**62, 1], np.uint64),
            np.array([True, False]),
        ],
        np.int64,
        id="bool-beside-int-and-uint64",
    ),
    pytest.param(
        [np.array([3, -1, 4]), np.array([7], np.uint64)],
        np.int64,
        id="uint64-episode-of-no-steps",
    ),
    pytest.param(
        [np.array([3, -1, 4]), np.array([2**63, 1], np.uint64), np.array([0.5, 1.5])],
        np.float64,
        id="uint64-beyond-int64-beside-floats",
    ),
]


@pytest.mark.parametrize(("obs", "dtype"), INT_JOINS)
def test_learner_obs_of_int_episodes_join_without_rounding(obs, dtype):
    episodes = [_episode(name, o) for name, o in zip("abc", obs)]
    got = AddLearnerColumns()(episodes, {})["obs"]
    assert got.dtype == dtype
    assert got.tolist() == [dtype(v).item() for v in _obs_rows(episodes)]
    leaves = [np.asarray(ep.get_observations(slice(0, len(ep)))) for ep in episodes]
    joined = concat_rows(leaves)
    assert joined.dtype == dtype and joined.tolist() == got.tolist()


# ------------------------------------------------------------------ joining: text


# mutant: `joined.dtype.kind in "U"` (numbers beside bytes joined as bytes, b"1")
@pytest.mark.parametrize(
    "obs",
    [
        pytest.param([[1, 2, 3], [b"x", b"y"]], id="ints-then-bytes"),
        pytest.param([[b"x", b"y"], [0.5, 1.5]], id="bytes-then-floats"),
        pytest.param([[b"x", b"y"], [True, False]], id="bytes-then-bools"),
    ],
)
def test_numbers_beside_bytes_are_refused(obs):
    episodes = [_episode(name, np.asarray(o)) for name, o in zip("ab", obs)]
    with pytest.raises(ValueError, match="into bytes"):
        AddLearnerColumns()(episodes, {})
    with pytest.raises(ValueError, match="into bytes"):
        join_leaves([np.asarray(o) for o in obs])


# mutant: `not in (kind,)` (an object leaf counted as one text would change)
@pytest.mark.parametrize(
    ("leaves", "pair"),
    [
        pytest.param([np.array(["a"]), np.array([1], object)], None, id="object-beside-str"),
        pytest.param([np.array([b"a"]), np.array([None], object)], None, id="object-beside-bytes"),
        pytest.param(
            [np.array([None], object), np.array(["a"]), np.array([2])],
            (1, 2),
            id="object-first",
        ),
    ],
)
def test_object_leaves_are_no_leaf_text_would_change(leaves, pair):
    assert text_join_pair(leaves) == pair


# mutant: `_no_rows` calling a ragged leaf empty (it was left out of the join, unseen)
@pytest.mark.parametrize(
    "leaves",
    [
        pytest.param([np.zeros((2, 2)), [[1.0, 2.0], [3.0]]], id="ragged-after-rows"),
        pytest.param([[[1.0], [2.0, 3.0]], np.zeros((1, 1)), np.asarray([])], id="ragged-first"),
    ],
)
def test_a_ragged_leaf_is_not_left_out_of_a_join(leaves):
    with pytest.raises(ValueError):
        join_leaves(leaves)


# ------------------------------------------------------------------ list_rows: spaced layouts


# mutant: the one-class fast path taken for any space (a Text space's strings then took the
# width of the longest string read, not the space's `max_length`, as `to_numpy` gives)
@pytest.mark.parametrize(
    "obs",
    [
        pytest.param(["ab", "c", "d"], id="short-strings"),
        pytest.param(["a", "b"], id="one-char"),
        pytest.param(["abcdef", "", "x"], id="full-width"),
    ],
)
def test_list_mode_text_rows_take_the_space_width(obs):
    space = gym.spaces.Text(6)
    n = len(obs) - 1
    episode = SingleAgentEpisode(
        "a",
        observations=obs,
        actions=[0] * n,
        rewards=[0.0] * n,
        len_lookback_buffer=0,
        observation_space=space,
    )
    got = AddLearnerColumns()([episode], {})["obs"]
    reference = np.asarray([episode.get_observations(t) for t in range(n)], dtype="<U6")
    assert got.dtype == reference.dtype == episode.to_numpy().get_observations(slice(0, n)).dtype
    assert got.tolist() == reference.tolist()


# ------------------------------------------------------------------ base: sliding windows


# mutant: `rows >= 1` alone (a negative window took the gather, giving rows of no frames)
@pytest.mark.parametrize(
    "value",
    [
        pytest.param(np.arange(4), id="array"),
        pytest.param({"a": np.zeros((3, 2)), "b": np.arange(3)}, id="dict"),
    ],
)
@pytest.mark.parametrize("window", [-1, -3])
def test_sliding_rows_refuses_a_negative_window(value, window):
    with pytest.raises(ValueError):
        sliding_rows(value, window)


# the gather and numpy's own sliding view give the same windows, from 1 frame to all of them
@pytest.mark.parametrize("window", [1, 2, 4, 5])
def test_sliding_rows_match_plain_windows(window):
    x = np.arange(10).reshape(5, 2)
    got = sliding_rows(x, window)
    reference = [[x[r + k].tolist() for k in range(window)] for r in range(len(x) - window + 1)]
    assert got.tolist() == reference
