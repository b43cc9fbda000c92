"""Random operation sequences on an episode: validate() holds after every operation, and the
chunks cut along the way always concatenate back to the episode recorded without cuts."""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from episodes import SingleAgentEpisode

OBS_SPACE = gym.spaces.Box(-10.0, 10.0, (2,), np.float32)
ACT_SPACE = gym.spaces.Discrete(3)


class EpisodeMachine(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.reference = SingleAgentEpisode(
            "e", observation_space=OBS_SPACE, action_space=ACT_SPACE
        )
        self.reference.add_env_reset(np.zeros(2, np.float32))
        self.chunks = [copy.deepcopy(self.reference)]
        self.step = 0

    @property
    def current(self):
        return self.chunks[-1]

    @precondition(lambda self: not self.current.is_done)
    @rule(
        action=st.integers(0, 2),
        reward=st.floats(-5, 5),
        end=st.sampled_from([None, "term", "trunc"]),
    )
    def add_step(self, action, reward, end):
        self.step += 1
        obs = np.full(2, self.step % 10, np.float32)
        flags = dict(terminated=end == "term", truncated=end == "trunc")
        extra = {"vf": reward / 2}
        for ep in (self.reference, self.current):
            ep.add_env_step(
                obs, action, reward, {"t": self.step}, extra_model_outputs=extra, **flags
            )

    @precondition(lambda self: not self.current.is_done)
    @rule(lookback=st.integers(0, 4))
    def cut(self, lookback):
        self.chunks.append(self.current.cut(len_lookback_buffer=lookback))

    @rule()
    def to_numpy(self):
        self.current.to_numpy()

    @precondition(lambda self: len(self.current) > 0)
    @rule(data=st.data())
    def slice_reads_match_getters(self, data):
        n = len(self.current)
        a = data.draw(st.integers(0, n))
        b = data.draw(st.integers(a, n))
        part = self.current[a:b]
        part.validate()
        assert np.array_equal(
            np.asarray(part.get_actions()), np.asarray(self.current.get_actions(slice(a, b)))
        )

    @precondition(lambda self: len(self.current) > 0)
    @rule(data=st.data())
    def set_and_restore_reward(self, data):
        i = data.draw(st.integers(0, len(self.current) - 1))
        old = self.current.get_rewards(i)
        self.current.set_rewards(new_data=123.0, at_indices=i)
        assert self.current.get_rewards(i) == 123.0
        self.current.set_rewards(new_data=old, at_indices=i)

    @invariant()
    def every_chunk_validates(self):
        for chunk in self.chunks:
            chunk.validate()

    def teardown(self):
        whole = copy.deepcopy(self.chunks[0])
        for chunk in self.chunks[1:]:
            whole.concat_episode(chunk)
        whole.validate()
        assert whole.t == self.reference.t and len(whole) == len(self.reference)
        for getter in ("get_observations", "get_actions", "get_rewards"):
            assert np.array_equal(
                np.asarray(getattr(whole, getter)()), np.asarray(getattr(self.reference, getter)())
            )
        assert whole.get_infos() == self.reference.get_infos()
        assert (whole.is_terminated, whole.is_truncated) == (
            self.reference.is_terminated,
            self.reference.is_truncated,
        )


TestEpisodeMachine = EpisodeMachine.TestCase
