"""The inference fast paths of FlattenObservations and PrevActionsPrevRewards give exactly what
the general (per-episode) paths give: the same arrays (dtype, shape, bytes) or the same error,
with the batch left as it was on a refusal."""

from __future__ import annotations

from contextlib import ExitStack
from typing import Any
from unittest import mock

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.connectors import (
    FlattenObservations,
    PrevActionsPrevRewards,
    last_rows,
    observations,
    prev,
)

Box, Discrete, MultiDiscrete = gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete

OBS_SPACES = [
    gym.spaces.Dict({"a": Box(-1, 1, (3,), np.float32), "b": Discrete(5)}),
    gym.spaces.Dict({"z": Discrete(2, start=-1), "a": Box(-1, 1, (), np.float64)}),
    gym.spaces.Tuple((Box(-1, 1, (3,), np.float32), Discrete(4, start=3))),
    MultiDiscrete([3, 4]),
    MultiDiscrete([[2, 3], [1, 2]], start=[[1, 0], [0, -2]]),
    Discrete(16, start=2),
    gym.spaces.MultiBinary(3),
    Box(-5, 5, (2,), np.int64),
    gym.spaces.Dict({"x": gym.spaces.Tuple((Discrete(3), gym.spaces.MultiBinary(2)))}),
    gym.spaces.Dict({}),
    gym.spaces.Dict({"i": Box(-5, 5, (2,), np.int64), "d": Discrete(3)}),
    gym.spaces.Tuple((Discrete(3), gym.spaces.Text(4))),
]


def _odd(value: Any, space: Any, kind: int) -> Any:
    """``value`` (an item of ``space``) made odd in one of a few ways (kind 0: as sampled)."""
    if kind == 0:
        return value
    if isinstance(space, gym.spaces.Dict):
        if kind == 7 and value:
            return {k: v for k, v in list(value.items())[1:]}  # a key missing
        return {k: _odd(v, space.spaces[k], kind) for k, v in value.items()}
    if isinstance(space, gym.spaces.Tuple):
        parts = [_odd(v, s, kind) for v, s in zip(value, space.spaces)]
        return parts if kind == 6 else tuple(parts)  # kind 6: a list for a tuple
    if isinstance(space, Discrete):
        return {
            1: np.int8(value),
            2: int(space.start) + int(space.n),
            3: float(value),
            4: 2**70,
            5: np.uint64(value) if value >= 0 else value,
            8: True,
        }.get(kind, int(value))
    if isinstance(space, gym.spaces.Text):
        return value
    arr = np.asarray(value)
    if kind == 1 and arr.dtype.kind == "f":
        return np.full(arr.shape, np.nan, arr.dtype)
    if kind == 2 and arr.dtype.kind == "f":
        return np.full(arr.shape, 1e300)  # float64 float32 cannot hold
    if kind == 3:
        return arr.tolist()
    if kind == 4:
        return np.ma.masked_array(arr, mask=np.ones(arr.shape, bool))
    if kind == 5:
        return arr.astype(np.float64 if arr.dtype.kind != "f" else np.float32)
    if kind == 9 and arr.dtype.kind == "i":  # rounded twice through float64, another float32
        return np.full(arr.shape, 2**62 + 2**38 + 1, np.int64)
    if kind == 8 and arr.ndim:
        return arr[:-1]  # another shape
    return value


@st.composite
def observation_episodes(draw: Any) -> list[SingleAgentEpisode]:
    space = draw(st.sampled_from(OBS_SPACES))
    space.seed(draw(st.integers(0, 100)))
    episodes = []
    for i in range(draw(st.integers(1, 4))):
        steps, lookback = draw(st.integers(0, 5)), draw(st.integers(0, 3))
        obs = [space.sample() for _ in range(steps + lookback + 1)]
        odd = draw(st.sampled_from([0] * 10 + [1, 2, 3, 4, 5, 6, 7, 8, 9]))
        obs[-1] = _odd(obs[-1], space, odd)
        own = draw(st.sampled_from(["shared"] * 6 + ["none", "equal"]))
        episode = SingleAgentEpisode(
            id_=f"e{i}",
            observations=obs,
            actions=[0] * (steps + lookback),
            rewards=[0.0] * (steps + lookback),
            observation_space={"shared": space, "none": None, "equal": _copy(space)}[own],
            len_lookback_buffer=lookback,
        )
        if draw(st.booleans()):
            try:
                episode.to_numpy()
            except Exception:  # noqa: BLE001 - items that do not stack stay list-mode
                pass
        episodes.append(episode)
    return episodes


def _copy(space: Any) -> Any:
    import copy

    return copy.deepcopy(space)


def _outcome(call: Any) -> Any:
    batch = {"kept": np.arange(2)}
    try:
        out = call(batch)
    except Exception as err:  # noqa: BLE001 - compared as type and message
        assert list(batch) == ["kept"]  # left as it was
        return ("error", type(err), str(err))
    return {k: (v.dtype, v.shape, v.tobytes()) for k, v in out.items() if k != "kept"}


def _general(*targets: tuple[Any, str]) -> ExitStack:
    stack = ExitStack()
    for module, attr in targets:
        stack.enter_context(mock.patch.object(module, attr, lambda *a, **k: None))
    return stack


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck))
@given(observation_episodes(), st.booleans())
def test_flatten_inference_fast_path_equals_general_path(episodes: Any, encode: bool) -> None:
    _check_flatten(episodes, encode)


def _check_flatten(episodes: Any, encode: bool) -> None:
    conn = FlattenObservations(inference=True, one_hot_discrete=encode)
    fast = _outcome(lambda batch: conn(episodes, batch))
    with _general((observations, "last_flat_rows"), (observations, "_last_box_rows")):
        general = _outcome(lambda batch: conn(episodes, batch))
    assert fast == general


_INTS = gym.spaces.Dict({"i": Box(-5, 5, (2,), np.int64), "d": Discrete(3)})
_BIG = 2**62 + 2**38 + 1  # float32 of it differs from float32 of float64 of it


@pytest.mark.parametrize(
    ("space", "items"),
    [
        (_INTS, [{"i": np.int64([_BIG, 1]), "d": 0}, {"i": np.float64([1, 2]), "d": 1}]),
        (_INTS, [{"i": np.int64([1, 1]), "d": np.int64(2)}, {"i": np.int64([1, 2]), "d": 2**63}]),
        (_INTS, [{"i": np.int64([1, 1]), "d": np.int64(2)}, {"i": np.int64([1, 2]), "d": 3}]),
        (_INTS, [{"i": np.ma.masked_array([1, 1], [True, False]), "d": 0}]),
        (_INTS, [{"i": np.int64([1, 1]), "d": 0, "x": 1}]),
        (OBS_SPACES[0], [{"a": np.float64([1e300, 0, 0]), "b": 0}]),
        (OBS_SPACES[0], [{"a": np.float32([np.nan, 0, 0]), "b": 0}, {"a": [0, 0, 0], "b": 0}]),
        (OBS_SPACES[3], [np.array([2, 0]), np.array([2.0, 0.0])]),
        (OBS_SPACES[4], [np.array([[1, 0], [0, -2]]), np.array([[1, 0], [0, -3]])]),
        (OBS_SPACES[5], [np.uint64(3), np.int64(2), 2]),
        (Discrete(3, start=2**60), [np.uint64(2**60 + 1), np.int64(2**60)]),  # float64 if joined
    ],
)
@pytest.mark.parametrize("encode", [True, False])
def test_flatten_inference_odd_items_as_general_path(space: Any, items: Any, encode: bool) -> None:
    episodes = [
        SingleAgentEpisode(observations=[item], observation_space=space, len_lookback_buffer=0)
        for item in items
    ]
    _check_flatten(episodes, encode)


@pytest.mark.parametrize(
    ("space", "item", "expected"),
    [
        (OBS_SPACES[0], {"a": np.float32([1, 2, 3]), "b": 2}, [1, 2, 3, 0, 0, 1, 0, 0]),
        (OBS_SPACES[2], (np.float32([1, 2, 3]), 4), [1, 2, 3, 0, 1, 0, 0]),
        (OBS_SPACES[3], np.array([2, 0]), [0, 0, 1, 1, 0, 0, 0]),
        (OBS_SPACES[5], 3, [0, 1] + [0] * 14),
    ],
)
def test_flatten_inference_reads_shared_spaces_in_one_pass(
    space: Any, item: Any, expected: list[float]
) -> None:
    episodes = [
        SingleAgentEpisode(observations=[item], observation_space=space, len_lookback_buffer=0)
        for _ in range(3)
    ]
    assert last_rows.last_flat_rows(episodes, True, "x") is not None  # not left to the general
    out = FlattenObservations(inference=True)(episodes, {})["obs"]
    assert out.dtype == np.float32 and out.tolist() == [expected] * 3


ACTION_SPACES = [
    Discrete(3, start=-1),
    Discrete(4),
    Box(-1, 1, (2,), np.float32),
    Box(-5, 5, (2,), np.int64),
    MultiDiscrete([2, 3]),
    None,
]


def _odd_action(value: Any, space: Any, kind: int) -> Any:
    if kind == 0 or space is None:
        return value
    if isinstance(space, Discrete):
        return {
            1: np.int8(value),
            2: int(space.start) + int(space.n),
            3: float(value),
            4: True,
            5: np.uint64(value) if value >= 0 else value,
        }.get(kind, int(value))
    arr = np.asarray(value)
    return {
        1: arr.tolist(),
        2: np.ma.masked_array(arr, np.ones(arr.shape, bool)),
        3: arr.astype(np.float64),
        4: arr[:1],
        5: np.full(arr.shape, np.nan, np.float64),
    }.get(kind, value)


REWARDS = [
    1.5,
    -2,
    np.float32(0.25),
    np.float64(np.nan),
    2**62 + 2**38 + 1,
    1e300,
    1 + 2j,
    True,
    np.array([1.0, 2.0]),
    np.int64(7),
    np.longdouble(0.1),
    "r",
]


@st.composite
def action_episodes(draw: Any) -> list[SingleAgentEpisode]:
    space = draw(st.sampled_from(ACTION_SPACES))
    sampler = space if space is not None else Discrete(3)
    sampler.seed(draw(st.integers(0, 100)))
    episodes = []
    for i in range(draw(st.integers(1, 4))):
        steps, lookback = draw(st.integers(0, 5)), draw(st.integers(0, 3))
        count = steps + lookback
        actions = [sampler.sample() for _ in range(count)]
        actions = [int(a) if isinstance(sampler, Discrete) else a for a in actions]
        if actions and draw(st.integers(0, 3)) == 0:
            at = draw(st.integers(0, count - 1))
            actions[at] = _odd_action(actions[at], space, draw(st.integers(1, 5)))
        rewards: list[Any] = [float(r) for r in range(count)]
        if rewards and draw(st.integers(0, 2)) == 0:
            rewards[draw(st.integers(0, count - 1))] = draw(st.sampled_from(REWARDS))
        own = draw(st.sampled_from(["shared"] * 6 + ["none", "equal"]))
        episode = SingleAgentEpisode(
            id_=f"e{i}",
            observations=[0] * (count + 1),
            actions=actions,
            rewards=rewards,
            action_space={"shared": space, "none": None, "equal": _copy(space)}[own],
            len_lookback_buffer=lookback,
        )
        if draw(st.booleans()):
            try:
                episode.to_numpy()
            except Exception:  # noqa: BLE001 - items that do not stack stay list-mode
                pass
        episodes.append(episode)
    return episodes


FILLS = [0.0, 1, -2.5, float("nan"), "x", 2**60, 1e300, True, np.float32(2)]


@settings(max_examples=500, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    action_episodes(),
    st.integers(0, 3),
    st.integers(0, 3),
    st.sampled_from(FILLS),
    st.booleans(),
)
def test_prev_inference_fast_path_equals_general_path(
    episodes: Any, n_actions: int, n_rewards: int, fill: Any, encode: bool
) -> None:
    _check_prev(episodes, n_actions, n_rewards, fill, encode)


def _check_prev(episodes: Any, n_actions: int, n_rewards: int, fill: Any, encode: bool) -> None:
    conn = PrevActionsPrevRewards(
        n_actions, n_rewards, fill=fill, one_hot_discrete=encode, inference=True
    )
    fast = _outcome(lambda batch: conn(episodes, batch))
    with _general((prev, "last_prev_actions"), (prev, "last_prev_rewards")):
        general = _outcome(lambda batch: conn(episodes, batch))
    assert fast == general


@pytest.mark.parametrize("numpy", [False, True])
@pytest.mark.parametrize(
    ("space", "actions", "rewards"),
    [
        (Discrete(3, start=-1), [1, -1], [0.5, 2.0]),
        (Box(-1, 1, (2,), np.float32), [np.float32([0.5, -0.5])] * 2, [1, 2]),
    ],
)
def test_prev_inference_reads_in_one_pass(
    space: Any, actions: Any, rewards: Any, numpy: bool
) -> None:
    long = SingleAgentEpisode(
        observations=[0, 0, 0],
        actions=actions,
        rewards=rewards,
        action_space=space,
        len_lookback_buffer=0,
    )
    new = SingleAgentEpisode(observations=[0], action_space=space, len_lookback_buffer=0)
    episodes = [long.to_numpy() if numpy else long, new]
    assert last_rows.last_prev_actions(episodes, 2, 0.0, True) is not None
    assert last_rows.last_prev_rewards(episodes, 2, 0.0) is not None
    _check_prev(episodes, 2, 3, 0.0, True)
    out = PrevActionsPrevRewards(2, 3, inference=True)(episodes, {})
    assert out["prev_n_rewards"].tolist() == [[0.0, *map(float, rewards)], [0.0, 0.0, 0.0]]


_F32 = Box(-1, 1, (2,), np.float32)
_BIG_REWARD = 2**62 + 2**38 + 1  # float32 of it differs from float32 of float64 of it
_LONG = np.longdouble(1) + np.longdouble(2) ** -24 + np.longdouble(2) ** -60


def _episode(space: Any, actions: list[Any], rewards: list[Any], numpy: bool) -> Any:
    episode = SingleAgentEpisode(
        observations=[0] * (len(actions) + 1),
        actions=actions,
        rewards=rewards,
        action_space=space,
        len_lookback_buffer=0,
    )
    return episode.to_numpy() if numpy else episode


@pytest.mark.parametrize(
    ("space", "actions", "rewards", "numpy", "n_actions", "n_rewards"),
    [
        (Discrete(3), [[1]], [[_BIG_REWARD]], False, 1, 1),  # int64 -> float32 directly
        (Discrete(3), [[1]], [[_BIG_REWARD]], True, 1, 1),
        (Discrete(3), [[1, 2]], [[1, _BIG_REWARD]], True, 2, 2),
        (Discrete(3), [[1, 2]], [[1.0, 2 + 1j]], True, 2, 2),
        (Discrete(3), [[1]], [[_LONG]], False, 1, 1),  # float64 would round it to a tie
        (Discrete(3), [[1]], [[np.array([1.0, 2.0])]], False, 1, 1),
        (Discrete(3), [[1]], [[np.array([1.0, 2.0])]], True, 1, 1),
        (Box(-5, 5, (2,), np.int64), [[np.float32([1, 2])]], [[0.0]], False, 2, 0),  # float64
        (_F32, [[np.float16([1, 2])], [np.float16([1, 2])]], [[0.0], [1.0]], False, 2, 0),
        (_F32, [[np.float32([1])]], [[0.0]], False, 2, 0),  # not the space's shape
        (
            _F32,
            [[np.float32([1, 2]), np.ma.masked_array(np.float32([1, 2]), [1, 0])]],
            [[0, 0]],
            False,
            2,
            0,
        ),
        (_F32, [[np.float32([1, 2]), [1.0, 2.0]]], [[0, 0]], False, 2, 0),
        (_F32, [[np.float64([1e300, 2])]], [[0.0]], False, 1, 0),
        (Discrete(3, start=-1), [[-1, np.uint64(1)], [np.int8(0)]], [[0, 0], [0]], False, 3, 1),
        (Discrete(3, start=-1), [[-2]], [[0]], False, 1, 1),
        (Discrete(3), [[1.0]], [[0]], False, 1, 1),
    ],
)
@pytest.mark.parametrize("fill", [0.0, -1])
def test_prev_inference_odd_values_as_general_path(
    space: Any, actions: Any, rewards: Any, numpy: bool, n_actions: int, n_rewards: int, fill: Any
) -> None:
    episodes = [_episode(space, a, r, numpy) for a, r in zip(actions, rewards)]
    _check_prev(episodes, n_actions, n_rewards, fill, True)


def test_prev_inference_refuses_episodes_without_an_observation_as_before() -> None:
    ready = _episode(Discrete(3), [1], [1.0], False)
    unreset = SingleAgentEpisode(action_space=ready.action_space)
    _check_prev([ready, unreset], 1, 1, 0.0, True)
    with pytest.raises(ValueError, match="holds no observation yet"):
        PrevActionsPrevRewards(inference=True)([ready, unreset], {})
