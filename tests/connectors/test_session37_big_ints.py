"""The observation connectors' fast paths stack list-mode ints as their general path does.

A list-mode read of ``[6, 2**63 + 1]`` stacked with ``np.asarray`` is float64, rounded; the
general path batches it with ``batch``, which keeps it uint64, exact (as ``to_numpy`` does).
``FrameStack``'s inference read gave the rounded floats, and ``FlattenObservations``' learner
read rounded twice (to float64, then to float32), where the general path and the numpy'd
episode round once. Such reads are now left to the general path.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable
from typing import Any
from unittest import mock

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors import FlattenObservations, FrameStack
from episodes.connectors import observations as module

BIG = 2**63 + 1
ODD = 2**63 + 2**39 + 1  # rounded to float64 first, it rounds to another float32
U64 = gym.spaces.Box(0, 2**64 - 1, (), np.uint64)
ROWS = gym.spaces.Box(0, 2**64 - 1, (2,), np.uint64)


def _episode(obs: list[Any], space: gym.Space[Any], id_: str = "a") -> SingleAgentEpisode:
    steps = len(obs) - 1
    return SingleAgentEpisode(
        id_,
        observations=obs,
        actions=[0] * steps,
        rewards=[0.0] * steps,
        observation_space=space,
        len_lookback_buffer=0,
    )


def _outcome(fn: Callable[[], Any]) -> Any:
    try:
        out = fn()
    except (ValueError, TypeError) as err:
        return type(err).__name__, str(err)
    return out.dtype, out.tolist()


def _general(connector: Callable[..., Any], episodes: list[SingleAgentEpisode]) -> Any:
    fast = ("_last_box_frames", "_box_rows", "_last_box_rows")
    with mock.patch.multiple(module, **dict.fromkeys(fast, lambda *args: None)):
        return connector(episodes, {})["obs"]


CONNECTORS = {
    "FrameStack(2) inference": lambda: FrameStack(2, fill=0, inference=True),
    "FrameStack(3) inference": lambda: FrameStack(3, fill=0, inference=True),
    "FrameStack(2)": lambda: FrameStack(2, fill=0),
    "FrameStack(2, flatten)": lambda: FrameStack(2, fill=0, flatten=True),
    "FlattenObservations": lambda: FlattenObservations(),
    "FlattenObservations inference": lambda: FlattenObservations(inference=True),
}
OBSERVATIONS = [
    ([5, 6, BIG], U64),
    ([BIG, 5, 6], U64),
    ([ODD, 5, 6], U64),
    ([5, ODD, 6, 7], U64),
    ([np.uint64(5), 6, BIG], U64),
    ([BIG, BIG, 1, 2], U64),
    ([np.array([BIG, 1], np.uint64), np.array([1, 2]), np.array([3, 4])], ROWS),
    ([np.array([1, 2]), np.array([3, 4]), np.array([ODD, 1], np.uint64)], ROWS),
    ([[1, 2], [3, 4], [ODD, 1]], ROWS),  # rows given as lists: as numpy stacks them
    ([5.0, 6.0, 7.0], gym.spaces.Box(-10, 10, (), np.float64)),  # floats: the fast path
]


@pytest.mark.parametrize("name", CONNECTORS)
@pytest.mark.parametrize(("obs", "space"), OBSERVATIONS)
def test_fast_paths_give_the_general_paths_result(name: str, obs: list[Any], space: Any) -> None:
    others = [_episode(obs, space), _episode([1, 2, 3], space, "b")] if space is U64 else []
    for episodes in ([_episode(obs, space)], others):
        if not episodes:
            continue
        make = CONNECTORS[name]
        got = make()(copy.deepcopy(episodes), {})["obs"]
        want = _general(make(), copy.deepcopy(episodes))
        assert (got.dtype, got.tolist()) == (want.dtype, want.tolist())


def test_the_reported_reads_agree_with_the_numpyd_episode() -> None:
    listed = _episode([5, 6, BIG], U64)
    numpyd = copy.deepcopy(listed).to_numpy()
    for episode in (listed, numpyd):
        frames = FrameStack(2, fill=0, inference=True)([episode], {})["obs"]
        assert frames.dtype == np.uint64 and frames.tolist() == [[6, BIG]]
    listed = _episode([ODD, 5, 6], U64)
    numpyd = copy.deepcopy(listed).to_numpy()
    once = float(np.float32(np.uint64(ODD)))  # rounded once, as the numpy'd column is
    for episode in (listed, numpyd):
        rows = FlattenObservations()([episode], {})["obs"]
        assert rows.ravel().tolist() == [once, 5.0]


MIXES = [[5, 6, BIG], [1, 2, 3], [ODD, 5, 6], [np.uint64(1), np.uint64(2), np.uint64(3)]]


@pytest.mark.parametrize("name", CONNECTORS)
def test_episodes_of_both_modes_side_by_side(name: str) -> None:
    # Rows of several episodes, list mode or numpy'd, stacked together by the fast paths.
    make = CONNECTORS[name]
    for first, second in itertools.product(MIXES, repeat=2):
        for numpyd in itertools.product([False, True], repeat=2):
            episodes = [_episode(first, U64, "a"), _episode(second, U64, "b")]
            for episode, flag in zip(episodes, numpyd):
                if flag:
                    episode.to_numpy()
            fast = _outcome(lambda eps=episodes: make()(copy.deepcopy(eps), {})["obs"])
            want = _outcome(lambda eps=episodes: _general(make(), copy.deepcopy(eps)))
            assert fast == want, (first, second, numpyd)
