"""Copies keep what they copy: column spaces, replay flags, finalized chunk infos.

- A column's own space survives pickle, deepcopy and ``from_state`` (contract §7.3: the
  rebuilt episode is equal in every field), of a plain episode and of a built chunk, alone or
  inside its ``SampledChunks``; a state without edits loads with the spaces it always had.
- ``EpisodeReplayBuffer.set_state`` refuses episode flags that are not bools, naming the field,
  and leaves the buffer as it was; the bools ``get_state`` writes (an array, a list) load.
- A finalized infos column of a built chunk travels with a pickled or deep-copied
  ``SampledChunks``.
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer
from episodes.runner import EnvRunner, RandomPolicy

BOX = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
REWARDS = gym.spaces.Box(float("-inf"), float("inf"), (), np.float32)


def _episode() -> SingleAgentEpisode:
    return SingleAgentEpisode(
        "e",
        observations=[np.zeros(2, np.float32)] * 3,
        actions=[0, 1],
        rewards=[1.0, 2.0],
        observation_space=BOX,
        action_space=gym.spaces.Discrete(2),
        len_lookback_buffer=0,
    )


def _chunks() -> Any:
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    return EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(4)


def _edit_spaces(episode: SingleAgentEpisode) -> None:
    episode.observations.space = None
    episode.actions.space = gym.spaces.Discrete(5)
    episode.rewards.space = None


COPIES: dict[str, Callable[[SingleAgentEpisode], SingleAgentEpisode]] = {
    "pickle": lambda ep: pickle.loads(pickle.dumps(ep)),
    "deepcopy": copy.deepcopy,
    "from_state": lambda ep: SingleAgentEpisode.from_state(ep.get_state()),
}


@pytest.mark.parametrize("how", sorted(COPIES))
@pytest.mark.parametrize("source", ["episode", "chunk"])
def test_a_columns_own_space_survives_copies(source: str, how: str) -> None:
    episode = _episode() if source == "episode" else _chunks()[0]
    _edit_spaces(episode)
    copied = COPIES[how](episode)
    assert copied == episode
    assert copied.observations.space is None
    assert copied.actions.space == gym.spaces.Discrete(5)
    assert copied.rewards.space is None
    # The episode-level spaces stay as they were, and still check what is added.
    assert copied.observation_space == episode.observation_space is not None
    assert copied.action_space == episode.action_space
    numpy_copy = copied.to_numpy()  # numpy'd episodes check each step against the spaces
    with pytest.raises(ValueError, match="action space"):
        numpy_copy.add_env_step(numpy_copy.get_observations(-1), 7, 0.0)  # 7: no Discrete(2)


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_sampled_chunks_carry_their_chunks_column_spaces(how: str) -> None:
    chunks = _chunks()
    _edit_spaces(chunks[0])
    copied = pickle.loads(pickle.dumps(chunks)) if how == "pickle" else copy.deepcopy(chunks)
    assert copied[0] == chunks[0]
    assert (copied[0].observations.space, copied[0].rewards.space) == (None, None)
    assert copied[0].actions.space == gym.spaces.Discrete(5)


def test_an_episode_level_space_of_none_stays_none_in_from_state() -> None:
    episode = _episode()
    episode.observation_space = None  # the column too
    episode.observations.space = BOX  # then the column alone
    copied = SingleAgentEpisode.from_state(episode.get_state())
    assert copied == episode
    assert (copied.observation_space, copied.observations.space) == (None, BOX)


@pytest.mark.parametrize("how", sorted(COPIES))
@pytest.mark.parametrize("source", ["episode", "chunk"])
def test_unedited_copies_keep_the_spaces_they_always_had(source: str, how: str) -> None:
    episode = _episode() if source == "episode" else _chunks()[0]
    copied = COPIES[how](episode)
    assert copied == episode
    assert copied.observations.space == copied.observation_space is not None
    assert copied.actions.space == copied.action_space is not None
    assert copied.rewards.space == REWARDS


def _replay_chunk(id_: str, n: int, **flags: Any) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[np.full(2, t, np.float32) for t in range(n + 1)],
        actions=[0] * n,
        rewards=[1.0] * n,
        len_lookback_buffer=0,
        **flags,
    )


def _replay_buffer() -> EpisodeReplayBuffer:
    buffer = EpisodeReplayBuffer(100, seed=0)
    buffer.add([_replay_chunk("a", 3), _replay_chunk("b", 2, terminated=True)])
    return buffer


BAD_FLAGS = {
    "strings": ("terminated", np.array(["False", "True"])),
    "floats": ("truncated", [0.5, 0.0]),
    "ints": ("terminated", np.array([0, 1])),
    "objects": ("truncated", np.array([None, None], dtype=object)),
}


@pytest.mark.parametrize("case", sorted(BAD_FLAGS))
def test_replay_set_state_refuses_flags_that_are_not_bools(case: str) -> None:
    name, value = BAD_FLAGS[case]
    state = _replay_buffer().get_state()
    state["episodes"][name] = value
    target = _replay_buffer()
    target.add(_replay_chunk("c", 1))
    before = target.get_state()
    with pytest.raises(ValueError, match=name):
        target.set_state(state)
    after = target.get_state()
    assert after["episodes"]["ids"] == before["episodes"]["ids"] == ["a", "b", "c"]
    assert after["episodes"]["terminated"].tolist() == [False, True, False]


GOOD_FLAGS = {
    "array": lambda flags: flags,
    "list of bools": lambda flags: [bool(f) for f in flags],
    "list of numpy bools": lambda flags: list(flags),
}


@pytest.mark.parametrize("case", sorted(GOOD_FLAGS))
def test_replay_set_state_takes_bool_flags(case: str) -> None:
    state = _replay_buffer().get_state()
    for name in ("terminated", "truncated"):
        state["episodes"][name] = GOOD_FLAGS[case](state["episodes"][name])
    target = EpisodeReplayBuffer(100, seed=0)
    target.set_state(state)
    assert target.get_state()["episodes"]["terminated"].tolist() == [False, True]
    assert target.get_state()["episodes"]["truncated"].tolist() == [False, False]


def test_replay_set_state_takes_an_empty_buffers_flags() -> None:
    state = EpisodeReplayBuffer(10).get_state()
    state["episodes"]["terminated"] = state["episodes"]["truncated"] = []
    target = EpisodeReplayBuffer(10)
    target.set_state(state)
    assert len(target.get_state()["episodes"]["ids"]) == 0


class _InfoEnv(gym.Env[np.ndarray, int]):
    observation_space = gym.spaces.Box(-9, 9, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        self.t = 0
        return np.zeros(1, np.float32), {"t": 0}

    def step(self, action: int) -> Any:
        self.t += 1
        return np.full(1, self.t, np.float32), 1.0, False, False, {"t": self.t}


@pytest.mark.parametrize("how", ["pickle", "deepcopy"])
def test_sampled_chunks_carry_a_finalized_infos_column(how: str) -> None:
    env = gym.vector.SyncVectorEnv([_InfoEnv, _InfoEnv])
    chunks = EnvRunner(env, lambda obs: (np.zeros(len(obs), np.int64), None), seed=0).sample(3)
    chunks[0].infos.finalize()
    _ = chunks[1]  # built, untouched: rebuilt from the blocks on the other side
    copied = pickle.loads(pickle.dumps(chunks)) if how == "pickle" else copy.deepcopy(chunks)
    assert copied[0] == chunks[0]
    assert copied[0].infos.finalized
    assert copied[0].get_infos()["t"].tolist() == [0, 1, 2, 3]
    assert copied[1] == chunks[1] and not copied[1].infos.finalized
