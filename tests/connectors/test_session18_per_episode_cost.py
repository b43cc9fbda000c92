"""Session 18: the windowed connectors cost less Python per episode.

``PrevActionsPrevRewards`` and ``FrameStack`` built a filler (and checked the fill) for every
episode and column, and windowed each episode's rows with ``sliding_window_view`` plus a move
and a copy. The filler is now worked out once per space and call (``FillerMemo``) and a flat
column is windowed with one gather. The tests pin the results against the plain numpy
construction and count the filler builds (never timings).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from episodes import SingleAgentEpisode
from episodes.connectors import FrameStack, PrevActionsPrevRewards, base, sliding_rows

BOX = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)


def _windows(x: np.ndarray, window: int) -> np.ndarray:
    views = np.lib.stride_tricks.sliding_window_view(x, window, axis=0)
    return np.ascontiguousarray(np.moveaxis(views, -1, 1))


@settings(max_examples=80, deadline=None)
@given(
    hnp.arrays(
        st.sampled_from([np.float32, np.int64, np.bool_]),
        hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5),
    ),
    st.integers(1, 5),
)
def test_sliding_rows_equals_numpys_windows(x: np.ndarray, window: int) -> None:
    if window > len(x) + 1:  # fewer rows than the window's first one needs
        with pytest.raises(ValueError):
            sliding_rows(x, window)
        return
    if window == len(x) + 1:  # L = 0 windows (an episode without steps), which numpy refuses
        got = sliding_rows(x, window)
        assert got.shape == (0, window, *x.shape[1:]) and got.dtype == x.dtype
        return
    got, want = sliding_rows(x, window), _windows(x, window)
    assert got.dtype == want.dtype and got.shape == want.shape and got.flags.c_contiguous
    np.testing.assert_array_equal(got, want)


def test_sliding_rows_of_a_nested_value_windows_every_leaf() -> None:
    value = {"a": np.arange(4), "b": (np.arange(8).reshape(4, 2),)}
    got = sliding_rows(value, 3)
    np.testing.assert_array_equal(got["a"], _windows(value["a"], 3))
    np.testing.assert_array_equal(got["b"][0], _windows(value["b"][0], 3))


def _episodes(count: int, action_space: gym.Space | None = None) -> list:
    action_space = gym.spaces.Discrete(3) if action_space is None else action_space
    out = []
    for i in range(count):
        ep = SingleAgentEpisode(
            str(i),
            observations=[np.full(2, t, np.float32) for t in range(6)],
            actions=[t % 3 for t in range(5)],
            rewards=[float(t) for t in range(5)],
            observation_space=BOX,
            action_space=action_space,
            len_lookback_buffer=0,
        )
        ep.to_numpy()
        out.append(ep)
    return out


@pytest.mark.parametrize(
    "connector, per_space",
    [
        pytest.param(lambda: PrevActionsPrevRewards(2, 2), 2, id="prev-actions-rewards"),
        pytest.param(lambda: FrameStack(3), 1, id="frame-stack"),
    ],
)
def test_the_filler_is_built_at_most_once_per_space(monkeypatch, connector, per_space) -> None:
    built = []
    real = base.filler_for

    def counting(space, fill, **kwargs):
        built.append(space)
        return real(space, fill, **kwargs)

    monkeypatch.setattr(base, "filler_for", counting)
    eps = _episodes(50)
    connector()(eps, {})
    first = len(built)
    connector()(eps, {})  # the same spaces and fill: kept across calls
    assert first <= per_space and len(built) == first


def test_episodes_of_two_action_spaces_get_their_own_fillers() -> None:
    eps = _episodes(2) + _episodes(2, gym.spaces.Discrete(3, start=0))
    out = PrevActionsPrevRewards(2, 1, one_hot_discrete=True)(eps, {})
    assert out["prev_n_actions"].shape == (20, 2, 3)
    assert out["prev_n_actions"][0].tolist() == [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]


@pytest.mark.parametrize(
    "connector",
    [
        pytest.param(
            lambda: PrevActionsPrevRewards(2, 0, fill=0.5, one_hot_discrete=False),
            id="prev-actions",
        ),
        pytest.param(lambda: PrevActionsPrevRewards(0, 2, fill="x"), id="prev-rewards"),
        pytest.param(lambda: FrameStack(2, fill="x"), id="frame-stack"),
    ],
)
def test_a_fill_that_cannot_fill_is_still_refused_leaving_the_batch(connector) -> None:
    batch = {"keep": 1}
    with pytest.raises(ValueError, match="fill"):
        connector()(_episodes(3), batch)
    assert batch == {"keep": 1}


@pytest.mark.parametrize("window", [True, 2.0, "2", None])
def test_sliding_rows_refuses_a_window_that_is_no_int(window) -> None:
    with pytest.raises(TypeError, match="window must be an int"):
        sliding_rows(np.arange(4), window)


def test_an_array_fill_is_worked_out_per_call_and_still_checked() -> None:
    eps = _episodes(3)
    out = FrameStack(2, fill=np.zeros(2, np.float32))(eps, {})
    assert out["obs"].shape == (15, 2, 2) and out["obs"].dtype == np.float32
    with pytest.raises(ValueError, match="fill"):
        FrameStack(2, fill=np.zeros(3))(eps, {})
