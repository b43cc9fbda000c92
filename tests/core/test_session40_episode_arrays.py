"""numpy holds episodes as objects: random picks, permutations and object arrays of episodes."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.runner import EnvRunner, RandomPolicy


def _episodes() -> list[SingleAgentEpisode]:
    return [
        SingleAgentEpisode(i, observations=[0.0, 1.0, 2.0], actions=[0, 1], rewards=[1.0, 2.0])
        for i in "abcd"
    ]


def _chunks() -> Any:
    env = gym.make_vec("CartPole-v1", 4, vectorization_mode="sync")
    return EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(3)


PICKS: dict[str, Callable[[Any], np.ndarray]] = {
    "choice": lambda eps: np.random.default_rng(0).choice(eps, 2, replace=False),
    "permutation": lambda eps: np.random.default_rng(0).permutation(eps),
    "object array": lambda eps: np.array(eps, dtype=object),
    "array": lambda eps: np.array(eps),
    "asarray": lambda eps: np.asarray(eps),
}


@pytest.mark.parametrize("source", ["list of episodes", "runner sample", "numpy'd episodes"])
@pytest.mark.parametrize("pick", PICKS)
def test_numpy_holds_each_episode_as_one_item(source: str, pick: str) -> None:
    if source == "runner sample":
        given: Any = _chunks()
    elif source == "numpy'd episodes":
        given = [ep.to_numpy() for ep in _episodes()]
    else:
        given = _episodes()
    out = PICKS[pick](given)
    assert out.dtype == object and out.ndim == 1
    assert all(isinstance(ep, SingleAgentEpisode) for ep in out)
    ids = [ep.id_ for ep in given]
    assert all(any(ep is mine for mine in given) for ep in out)  # the episodes, not copies
    assert {ep.id_ for ep in out} <= set(ids)
    if pick != "choice":
        assert sorted(ep.id_ for ep in out) == sorted(ids)


def test_one_episode_is_a_zero_d_object_array() -> None:
    ep = _episodes()[0]
    arr = np.asarray(ep)
    assert arr.shape == () and arr.dtype == object and arr.item() is ep


@pytest.mark.parametrize("dtype", [float, np.int64, "U5", bool])
def test_an_episode_is_no_array_of_numbers(dtype: Any) -> None:
    with pytest.raises(TypeError, match="no array of"):
        np.asarray(_episodes()[0], dtype=dtype)


def test_comparing_with_an_array_gives_falses() -> None:
    assert (_episodes()[0] == np.array([1, 2])).tolist() == [False, False]


def test_a_random_pick_converts_and_a_connector_takes_it() -> None:
    from episodes.connectors import FlattenObservations
    from episodes.converter import episodes_to_batch
    from episodes.testing.compare import outputs_equal

    eps = [
        SingleAgentEpisode(
            i,
            observations=[0.0, 1.0, 2.0],
            actions=[0, 1],
            rewards=[1.0, 2.0],
            len_lookback_buffer=0,
        )
        for i in "abc"
    ]
    picked = np.random.default_rng(0).choice(eps, 2, replace=False)
    batch, listed = episodes_to_batch(picked), episodes_to_batch(picked.tolist())
    assert batch.keys() == listed.keys()
    assert all(np.array_equal(batch[k], listed[k]) for k in batch)
    flat, flat_listed = (
        FlattenObservations()(picked, {}),
        FlattenObservations()(picked.tolist(), {}),
    )
    assert outputs_equal(flat, flat_listed)
