"""Session 18: a replay buffer does not keep the memory its chunks' spaces came in alive.

A RunnerGroup sample arrives pickled with out-of-band buffers: the chunks' Box bounds are
read-only views of the sample's shared-memory segment. A buffer that kept those space objects
held the segment leased for its whole life.
"""

from __future__ import annotations

import gc
import pickle
import weakref

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer


def _transported(space: gym.Space) -> tuple[gym.Space, list[weakref.ref]]:
    """``space`` as a transport delivers it: bounds viewing arenas only the caller holds."""
    buffers: list[pickle.PickleBuffer] = []
    stream = pickle.dumps(space, protocol=5, buffer_callback=buffers.append)
    arenas = [np.frombuffer(bytearray(buffer.raw()), np.uint8) for buffer in buffers]
    return pickle.loads(stream, buffers=arenas), [weakref.ref(arena) for arena in arenas]


def _chunk(obs_space: gym.Space, action_space: gym.Space, id_: str = "a") -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[np.full(4, t, np.float32) for t in range(4)],
        actions=[0, 1, 0],
        rewards=[1.0, 2.0, 3.0],
        terminated=True,
        observation_space=obs_space,
        action_space=action_space,
        len_lookback_buffer=0,
    )


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda: EpisodeReplayBuffer(100, seed=0), id="uniform"),
        pytest.param(lambda: PrioritizedEpisodeReplayBuffer(100, seed=0), id="prioritized"),
    ],
)
def test_buffer_lets_go_of_the_memory_its_spaces_came_in(make):
    obs_space, obs_arenas = _transported(gym.spaces.Box(-2.0, 2.0, (4,), np.float32))
    assert obs_arenas, "a Box's bounds travel out of band"
    action_space, _ = _transported(gym.spaces.Discrete(2))
    buffer = make()
    buffer.add(_chunk(obs_space, action_space))
    del obs_space, action_space
    gc.collect()
    assert [arena() for arena in obs_arenas] == [None] * len(obs_arenas)
    (episode,) = buffer.sample(1, sample_episodes=True)
    assert episode.observation_space == gym.spaces.Box(-2.0, 2.0, (4,), np.float32)
    assert episode.action_space == gym.spaces.Discrete(2)


def test_spaces_are_copied_once_and_then_kept():
    buffer = EpisodeReplayBuffer(100, seed=0)
    space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    buffer.add(_chunk(space, gym.spaces.Discrete(2)))
    first = buffer.sample(1, sample_episodes=True)[0].observation_space
    buffer.add(_chunk(gym.spaces.Box(-5.0, 5.0, (4,), np.float32), gym.spaces.Discrete(2), "b"))
    again = buffer.sample(1, sample_episodes=True)[0].observation_space
    assert first is again and first is not space and first == space


class _LockedBox(gym.spaces.Box):
    """A user's Box that holds what deepcopy refuses."""

    def __init__(self) -> None:
        import threading

        super().__init__(-1.0, 1.0, (4,), np.float32)
        self.lock = threading.Lock()


def test_a_space_deepcopy_refuses_is_kept_as_given():
    space = _LockedBox()
    buffer = EpisodeReplayBuffer(100, seed=0)
    buffer.add(_chunk(space, gym.spaces.Discrete(2)))
    assert buffer.get_num_timesteps() == 3
    assert buffer.sample(1, sample_episodes=True)[0].observation_space is space
