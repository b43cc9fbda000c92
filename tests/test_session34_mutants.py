"""Behaviour a second mutation test found unpinned: each case fails for the mutant beside it."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.connectors import AddLearnerColumns, FrameStack
from episodes.rollout import RolloutStorage
from episodes.runner import EnvRunner, RandomPolicy


def test_distillation_batches_carry_each_steps_own_done():
    # Mutant: the generator's dones taken one step early (its test drew no done at all).
    storage = RolloutStorage("distillation", 2, 3, (1,), (1,))
    storage.dones[1, 0] = 1
    storage.dones[2, 1] = 1
    got = [batch.dones.flatten().tolist() for batch in storage.generator()]
    assert got == [[False, False], [True, False], [False, True]]


def test_a_narrower_block_write_leaves_the_step_at_the_furthest_row_written():
    # Mutant: write_block setting step to its own rows' end ("step becomes max(step, ...)").
    storage = RolloutStorage("rl", 2, 4, (3,), (1,))
    storage.write_block(0, rewards=torch.ones(4, 2))
    storage.write_block(0, values=torch.ones(2, 2))
    assert storage.step == 4
    storage.write_block(1, values=torch.ones(1, 2))
    assert storage.step == 4


def test_inference_frame_stack_with_flatten_gives_flat_float32_rows():
    # Mutant: the inference fast path ignoring flatten (it gave (1, 2, 2) float64).
    space = gym.spaces.Box(-5, 5, (2,), np.float64)
    ep = SingleAgentEpisode(
        observations=[np.zeros(2), np.ones(2)],
        actions=[0],
        rewards=[1.0],
        observation_space=space,
        len_lookback_buffer=0,
    )
    obs = FrameStack(2, flatten=True, inference=True)([ep], {})["obs"]
    assert obs.dtype == np.float32 and obs.tolist() == [[0.0, 0.0, 1.0, 1.0]]


@pytest.mark.parametrize("stored", [np.int64, np.float64])
def test_inference_frames_take_one_dtype_whether_padded_or_not(stored):
    # Mutant: the unpadded fast path skipping the cast that joins the stored rows' dtype with
    # the filler's (the space's): the dtype then depended on whether padding was needed.
    space = gym.spaces.Box(0, 100, (2,), np.float32)
    ep = SingleAgentEpisode(
        observations=[np.full(2, t, stored) for t in range(3)],
        actions=[0, 0],
        rewards=[1.0, 1.0],
        observation_space=space,
        len_lookback_buffer=0,
    )
    short = ep.slice(slice(0, 0))  # one observation: the stack pads
    unpadded = FrameStack(2, inference=True)([ep], {})["obs"]
    padded = FrameStack(2, inference=True)([short], {})["obs"]
    learner = FrameStack(2)([ep], {})["obs"]
    want = np.result_type(stored, np.float32)
    assert unpadded.dtype == padded.dtype == learner.dtype == want


def test_a_chunk_ended_by_a_stepless_truncated_end_has_truncateds_from_it():
    # Mutant: truncateds taken from the stepless end's is_terminated.
    ep = SingleAgentEpisode(
        "a", observations=[0.0, 1.0, 2.0], actions=[0, 0], rewards=[1.0, 1.0], len_lookback_buffer=0
    )
    end = SingleAgentEpisode(
        "a", observations=[2.0], truncated=True, t_started=2, len_lookback_buffer=0
    )
    batch = AddLearnerColumns()([ep, end], {})
    assert batch["terminateds"].tolist() == [False, False]
    assert batch["truncateds"].tolist() == [False, True]


class _EndsBothWays(gym.Env):
    observation_space = gym.spaces.Box(-10, 10, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        end = self.t == 2  # terminated and truncated at once: terminated wins
        return np.full(1, self.t, np.float32), 1.0, end, end, {}


def test_a_step_both_terminated_and_truncated_is_not_bootstrapped():
    # Mutant: the runner listing every truncated chunk for the bootstrap, terminated or not.
    env = gym.vector.SyncVectorEnv([_EndsBothWays])
    chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(3)
    steps, envs, ongoing, obs = chunks.bootstrap_observations()
    assert steps.tolist() == [] and envs.tolist() == []
    assert ongoing.tolist() == [0] and np.asarray(obs).tolist() == [[1.0]]
