"""`flatten_episode_observations`: a copy whose observations are gymnasium's flat rows."""

from __future__ import annotations

import pickle
import warnings
from collections import OrderedDict
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import given

from episodes import SingleAgentEpisode
from episodes.connectors import Float32RangeError, flatten_episode_observations
from episodes.connectors.flat_episodes import flat_space
from episodes.replay import EpisodeReplayBuffer
from episodes.testing.strategies import episodes

NESTED = gym.spaces.Dict(
    {
        "observation": gym.spaces.Box(-2.0, 2.0, (3,), np.float64),
        "desired_goal": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
        "mode": gym.spaces.Discrete(3, start=1),
        "bits": gym.spaces.Tuple((gym.spaces.MultiBinary(2), gym.spaces.MultiDiscrete([2, 3]))),
    }
)


def _all_observations(episode: SingleAgentEpisode) -> list[Any]:
    """Every observation, lookback included, one item each (a numpy'd column read by index)."""
    lookback = episode.observations.lookback
    count = lookback + len(episode.observations)
    return [
        episode.get_observations(i - lookback, neg_index_as_lookback=True) for i in range(count)
    ]


def _beyond_float32(space: gym.Space, items: list[Any]) -> bool:
    """Whether a flattened item holds a finite value float32 cannot hold."""
    largest = float(np.finfo(np.float32).max)
    for item in items:
        row = gym.spaces.flatten(space, item).astype(np.float64)
        if (np.isfinite(row) & (np.abs(row) > largest)).any():
            return True
    return False


@given(episode=episodes(lookback=(0, 4), max_len=6))
def test_rows_are_gymnasium_flatten_of_every_observation(episode: SingleAgentEpisode) -> None:
    before = pickle.dumps(episode.get_state())
    space = episode.observation_space
    try:
        flat = flatten_episode_observations(episode)
    except Float32RangeError:  # refused exactly where a value would become inf
        assert _beyond_float32(space, _all_observations(episode))
        assert pickle.dumps(episode.get_state()) == before
        return
    assert pickle.dumps(episode.get_state()) == before  # the original untouched
    want = [
        gym.spaces.flatten(space, item).astype(np.float32) for item in _all_observations(episode)
    ]
    got = _all_observations(flat)
    assert len(got) == len(want)
    for row, expected in zip(got, want):
        assert row.dtype == np.float32
        np.testing.assert_array_equal(row, expected)
    assert flat.observation_space == flat_space(space)
    assert flat.observations.lookback == episode.observations.lookback
    assert flat.observations.finalized == episode.observations.finalized
    flat.validate()
    state, flat_state = episode.get_state(), flat.get_state()
    for key in state.keys() - {"observations", "observation_space"}:
        assert pickle.dumps(flat_state[key]) == pickle.dumps(state[key]), key


@given(episode=episodes(lookback=(0, 3), max_len=5, numpy=False))
def test_list_mode_and_numpy_mode_give_the_same_rows(episode: SingleAgentEpisode) -> None:
    if _beyond_float32(episode.observation_space, _all_observations(episode)):
        return  # refused in both modes (the test above)
    from_list = flatten_episode_observations(episode)
    episode.to_numpy()
    from_numpy = flatten_episode_observations(episode)
    from_list.to_numpy()
    np.testing.assert_array_equal(from_list.observations.data, from_numpy.observations.data)


def _nested_episode(length: int, lookback: int, seed: int = 0) -> SingleAgentEpisode:
    NESTED.seed(seed)
    return SingleAgentEpisode(
        "g",
        observations=[NESTED.sample() for _ in range(length + lookback + 1)],
        actions=list(range(length + lookback)),
        rewards=[float(t) for t in range(length + lookback)],
        extra_model_outputs={"logp": [0.5] * (length + lookback)},
        observation_space=NESTED,
        len_lookback_buffer=lookback,
        t_started=7,
    )


def test_the_copy_owns_its_columns() -> None:
    episode = _nested_episode(4, 2)
    flat = flatten_episode_observations(episode)
    flat.set_rewards(new_data=[9.0] * 4)
    flat.set_observations(new_data=np.zeros(flat.observation_space.shape, np.float32), at_indices=0)
    flat.custom_data["k"] = 1
    assert list(episode.get_rewards()) == [2.0, 3.0, 4.0, 5.0]
    assert isinstance(episode.get_observations(0), dict) and "k" not in episode.custom_data
    assert flat.t_started == 7 and flat.id_ == "g"


def test_a_flattened_goal_episode_goes_into_a_replay_buffer() -> None:
    episode = _nested_episode(5, 0)
    buf = EpisodeReplayBuffer(100, seed=0)
    flat = flatten_episode_observations(episode)
    buf.add(flat)
    batch = buf.get_transitions(buf.locate("g", [7, 11]))
    for row, t in zip(batch["obs"], [0, 4]):
        want = gym.spaces.flatten(NESTED, episode.get_observations(t)).astype(np.float32)
        np.testing.assert_array_equal(row, want)


REFUSALS: dict[str, tuple[gym.Space, Any, type[Exception], str]] = {
    "text_leaf": (
        gym.spaces.Dict({"name": gym.spaces.Text(4)}),
        {"name": "ab"},
        ValueError,
        "strings",
    ),
    "rows_of_other_sizes": (
        gym.spaces.Dict({"seq": gym.spaces.Sequence(gym.spaces.Discrete(2))}),
        {"seq": (0, 1)},
        ValueError,
        "rows of one size",
    ),
    "beyond_float32": (
        gym.spaces.Box(-np.inf, np.inf, (1,), np.float64),
        np.array([1e300]),
        Float32RangeError,
        "float32",
    ),
}


@pytest.mark.parametrize("name", list(REFUSALS))
def test_refusals_leave_the_episode_unchanged(name: str) -> None:
    space, item, error, match = REFUSALS[name]
    episode = SingleAgentEpisode(
        observations=[item, item],
        actions=[0],
        rewards=[1.0],
        observation_space=space,
        len_lookback_buffer=0,
    )
    before = pickle.dumps(episode.get_state())
    with pytest.raises(error, match=match):
        flatten_episode_observations(episode)
    assert pickle.dumps(episode.get_state()) == before


def test_no_observations_and_no_space() -> None:
    fresh = flatten_episode_observations(SingleAgentEpisode(observation_space=NESTED))
    assert len(fresh.observations) == 0 and fresh.observation_space == flat_space(NESTED)
    spaceless = SingleAgentEpisode(
        observations=[{"b": np.ones(2), "a": 3.0}] * 2,
        actions=[0],
        rewards=[0.0],
        len_lookback_buffer=0,
    )
    flat = flatten_episode_observations(spaceless)  # leaves as recorded, keys sorted
    assert flat.get_observations(0).tolist() == [3.0, 1.0, 1.0] and flat.observation_space is None


UNSORTED = gym.spaces.Dict(
    OrderedDict(
        [
            ("b", gym.spaces.Box(5.0, 6.0, (1,), np.float32)),
            ("a", gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(0.0, 1.0, (1,))))),
        ]
    )
)


@pytest.mark.parametrize("numpy", [False, True])
def test_rows_follow_the_spaces_own_key_order(numpy: bool) -> None:
    UNSORTED.seed(3)
    items = [UNSORTED.sample() for _ in range(3)]
    episode = SingleAgentEpisode(
        observations=items,
        actions=[0, 1],
        rewards=[0.0, 0.0],
        observation_space=UNSORTED,
        len_lookback_buffer=1,
    )
    if numpy:
        episode.to_numpy()
    flat = flatten_episode_observations(episode)
    for t, item in zip(range(-1, 2), items):
        row = flat.get_observations(t, neg_index_as_lookback=True)
        np.testing.assert_array_equal(row, gym.spaces.flatten(UNSORTED, item).astype(np.float32))
        assert flat.observation_space.contains(row)


def test_bounds_beyond_float32_become_infinite_without_a_warning() -> None:
    space = gym.spaces.Dict({"a": gym.spaces.Box(-1e300, 1e300, (2,), np.float64)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert flat_space(space) == gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)


@pytest.mark.parametrize("space", [gym.spaces.Dict({}), gym.spaces.Tuple(())], ids=str)
def test_a_space_without_leaves_gives_rows_of_width_zero(space: gym.Space) -> None:
    episode = SingleAgentEpisode(
        observations=[space.sample()] * 2,
        actions=[0],
        rewards=[0.0],
        observation_space=space,
        len_lookback_buffer=0,
    )
    flat = flatten_episode_observations(episode)
    assert flat.observation_space.shape == (0,) and flat.get_observations(0).shape == (0,)


def test_a_one_of_leaf_is_refused_before_anything_is_read() -> None:
    space = gym.spaces.OneOf([gym.spaces.Discrete(2), gym.spaces.Box(0.0, 1.0, (2,))])
    episode = SingleAgentEpisode(
        observations=[space.sample() for _ in range(2)],
        actions=[0],
        rewards=[0.0],
        observation_space=space,
        len_lookback_buffer=0,
    )
    with pytest.raises(ValueError, match="OneOf"):
        flatten_episode_observations(episode)
