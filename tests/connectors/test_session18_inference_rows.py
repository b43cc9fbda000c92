"""Session 18: reads of Box episodes take one stack.

FlattenObservations(inference=True) stacks Box episodes' last observations in one call,
FlattenObservations() joins their rows in one concatenation, and FrameStack(inference=True)
stacks their last ``n`` observations (episodes sharing one Box space).

The general path reads, batches and flattens each episode's rows on its own (about 60-80
Python calls an episode). The property pins the shortcuts to the general path: same array,
dtype and shape, or the same refusal, for drawn Box episodes in both modes.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.connectors import FlattenObservations, FrameStack, observations
from episodes.testing.strategies import episodes

BOXES = st.sampled_from(
    [
        gym.spaces.Box(-1.0, 1.0, (3,), np.float32),
        gym.spaces.Box(-5, 5, (2, 2), np.int64),
        gym.spaces.Box(0, 255, (2, 1, 2), np.uint8),
        gym.spaces.Box(-1.0, 1.0, (), np.float64),
        gym.spaces.Box(0, 1, (2,), np.bool_),
    ]
)


def _run(connector: object, eps: list) -> object:
    try:
        return connector(eps, {})  # type: ignore[operator]
    except Exception as err:  # noqa: BLE001 - the refusal itself is compared
        return type(err)


def _general(connector: object, eps: list) -> object:
    """The general path's result (or the type of its refusal), the shortcuts switched off."""
    names = ("_last_box_rows", "_box_rows", "_last_box_frames")
    saved = [getattr(observations, name) for name in names]
    for name in names:
        setattr(observations, name, lambda *args: None)
    try:
        return _run(connector, eps)
    finally:
        for name, shortcut in zip(names, saved):
            setattr(observations, name, shortcut)


def _same(got: object, want: object, key: str) -> None:
    if isinstance(want, type):
        assert got is want
        return
    assert isinstance(got, dict) and isinstance(want, dict) and got.keys() == want.keys()
    if key not in want:  # no episode had a row
        return
    assert got[key].dtype == want[key].dtype and got[key].shape == want[key].shape
    np.testing.assert_array_equal(got[key], want[key])


CONNECTORS = st.sampled_from(
    [
        lambda: FlattenObservations(inference=True),
        lambda: FlattenObservations(),
        lambda: FrameStack(1, inference=True),
        lambda: FrameStack(3, inference=True),
        lambda: FrameStack(4, fill=-1, inference=True),
        lambda: FrameStack(2, fill=0.5, inference=True),
    ]
)


@settings(max_examples=150, deadline=None)
@given(st.data(), BOXES, st.integers(1, 5), CONNECTORS)
def test_the_shortcut_gives_what_the_general_path_gives(data, space, count, make):
    eps = [data.draw(episodes(space, gym.spaces.Discrete(2), min_len=0)) for _ in range(count)]
    for ep in eps:  # one space object, as a runner's chunks share theirs
        ep.observation_space = space
    _same(_run(make(), eps), _general(make(), eps), "obs")


def test_box_episodes_take_one_stack(monkeypatch):
    calls = []
    real = observations._read_obs
    monkeypatch.setattr(observations, "_read_obs", lambda *a: calls.append(1) or real(*a))
    eps = [_box_episode(i, numpy=i % 2 == 0) for i in range(20)]
    out = FlattenObservations(inference=True)(eps, {})
    assert calls == [] and out["obs"].shape == (20, 3) and out["obs"].dtype == np.float32
    assert out["obs"][:, 0].tolist() == [float(i) for i in range(20)]


def test_box_episodes_take_one_frame_stack(monkeypatch):
    calls = []
    real = observations._read_obs
    monkeypatch.setattr(observations, "_read_obs", lambda *a: calls.append(1) or real(*a))
    space = gym.spaces.Box(-100, 100, (3,), np.float32)
    eps = [_box_episode(i, numpy=i % 2 == 0, space=space) for i in range(6)]
    out = FrameStack(3, fill=-7, inference=True)(eps, {})
    assert calls == [] and out["obs"].shape == (6, 3, 3) and out["obs"].dtype == np.float32
    assert out["obs"][2, :, 0].tolist() == [-7.0, 1.0, 2.0]


def test_episodes_no_fast_path_covers_take_the_general_path(monkeypatch):
    calls = []
    real = observations._read_obs
    monkeypatch.setattr(observations, "_read_obs", lambda *a: calls.append(1) or real(*a))
    ep = SingleAgentEpisode(  # no space: leaves as recorded, which only the general path reads
        observations=[{"a": 0.0, "b": np.zeros(2)}, {"a": 2.0, "b": np.ones(2)}],
        actions=[1],
        rewards=[0.0],
        len_lookback_buffer=0,
    )
    out = FlattenObservations(inference=True)([ep], {})
    assert calls == [1] and out["obs"].tolist() == [[2.0, 1.0, 1.0]]


def _box_episode(i: int, numpy: bool, space: gym.Space | None = None) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(
        str(i),
        observations=[np.full(3, i - 1, np.float32), np.full(3, i, np.float32)],
        actions=[0],
        rewards=[1.0],
        observation_space=space or gym.spaces.Box(-100, 100, (3,), np.float32),
        len_lookback_buffer=0,
    )
    return ep.to_numpy() if numpy else ep


@pytest.mark.parametrize(
    "connector", [FlattenObservations, lambda: FlattenObservations(inference=True)]
)
def test_one_episodes_rows_do_not_depend_on_the_others_dtypes(connector) -> None:
    """int64 rows beside float32 ones: each episode's rows round to float32 once, alone."""
    big = 2**60 + 2**36 + 1
    ints = SingleAgentEpisode(
        "i",
        observations=[np.full(3, big, np.int64)] * 2,
        actions=[0],
        rewards=[0.0],
        observation_space=gym.spaces.Box(-(2**62), 2**62, (3,), np.int64),
        len_lookback_buffer=0,
    )
    floats = _box_episode(0, numpy=False, space=gym.spaces.Box(-100, 100, (3,), np.float32))
    alone = connector()([ints], {})["obs"]
    beside = connector()([ints, floats], {})["obs"]
    np.testing.assert_array_equal(beside[: len(alone)], alone)
    assert alone[0, 0] == np.array(big, np.int64).astype(np.float32)  # one rounding
