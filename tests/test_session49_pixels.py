"""Pixel (Atari-style) DQN journey: frame stacks built from single stored frames.

The buffer stores each frame once; a stack of ``k`` frames is a sequence sample with
``lookback=k - 1``, and an n-step target's next stack comes from the same sample with
``pad=True``. These tests hold those stacks to what ``FrameStack(k)`` gives the learner, to
the n-step transitions of the same items, and to what a stacking policy acted on.
"""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest

from episodes.connectors import FrameStack, ShortLookbackWarning
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.runner import EnvRunner, RandomPolicy

K, N_STEP, GAMMA = 4, 3, 0.9
SHAPE = (3, 3)


class _Frames(gym.Env):
    """uint8 frames whose first pixels name the step and the episode; random lengths."""

    def __init__(self, lo: int = 2, hi: int = 30):
        self.observation_space = gym.spaces.Box(0, 255, SHAPE, np.uint8)
        self.action_space = gym.spaces.Discrete(6)
        self.lo, self.hi, self.count = lo, hi, 0

    def _frame(self):
        frame = np.full(SHAPE, 200, np.uint8)
        frame.reshape(-1)[:2] = [self.t + 1, self.count % 256]
        return frame

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.count += 1
        self.t = 0
        self.length = int(self.np_random.integers(self.lo, self.hi))
        self.cut = bool(self.np_random.random() < 0.3)  # truncated, not terminated
        return self._frame(), {}

    def step(self, action):
        self.t += 1
        done = self.t >= self.length
        return self._frame(), 1.0, done and not self.cut, done and self.cut, {}


def _vector(num_envs: int = 4, **kwargs) -> gym.vector.SyncVectorEnv:
    return gym.vector.SyncVectorEnv([lambda: _Frames(**kwargs)] * num_envs)


def _filled(cls, capacity: int, on_evicted: str = "raise", **kwargs):
    env = _vector(**kwargs)
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    buf = cls(capacity, seed=1)
    for _ in range(25):
        buf.add(runner.sample(7), on_evicted=on_evicted)
    return buf


def stacked_batch(buf, batch_size, *, k=K, n_step=N_STEP, gamma=GAMMA):
    """The recipe of replay.md: k-frame stacks and n-step targets from one sequence sample."""
    lookback = k - 1
    b = buf.sample(batch_size, batch_length_T=n_step, lookback=lookback, pad=True)
    rows = np.arange(batch_size)
    steps = b["mask"][:, lookback:]
    m = steps.sum(axis=1)  # steps in each window, 1 .. n_step
    last = lookback + m - 1  # each window's last step
    before = b["obs"][rows[:, None], last[:, None] + np.arange(1 - lookback, 1)]
    return {
        "obs": b["obs"][:, :k],
        "next_obs": np.concatenate([before, b["next_obs"][rows, last][:, None]], axis=1),
        "rewards": (b["rewards"][:, lookback:] * steps * gamma ** np.arange(n_step)).sum(1),
        "n_step": m,
        "terminateds": b["is_terminated"][rows, last],
        "weights": b.get("weights", np.ones(batch_size, np.float32)),  # prioritized only
        "indices": b["indices"][:, lookback],
    }


CASES = [
    pytest.param(EpisodeReplayBuffer, 10_000, "raise", id="uniform"),
    pytest.param(PrioritizedEpisodeReplayBuffer, 10_000, "raise", id="prioritized"),
    # running episodes evicted and restarted: stored episodes begin after t = 0
    pytest.param(EpisodeReplayBuffer, 60, "restart", id="restarted"),
]


@pytest.mark.parametrize(("cls", "capacity", "on_evicted"), CASES)
def test_recipe_stacks_match_framestack_and_nstep_transitions(cls, capacity, on_evicted):
    buf = _filled(cls, capacity, on_evicted)
    whole = {ep.id_: ep for ep in buf.get_episodes()}
    batch = stacked_batch(buf, 256)
    assert batch["obs"].dtype == np.uint8 and batch["next_obs"].dtype == np.uint8
    assert batch["obs"].shape == batch["next_obs"].shape == (256, K, *SHAPE)
    reference = buf.get_transitions(batch["indices"], n_step=N_STEP, gamma=GAMMA)
    assert np.array_equal(batch["n_step"], reference["n_step"])
    assert np.allclose(batch["rewards"], reference["rewards"])
    assert np.array_equal(batch["terminateds"], reference["terminateds"])
    assert np.array_equal(batch["next_obs"][:, -1], reference["next_obs"])
    ids, times = buf.episode_steps(batch["indices"])
    starts = 0
    for i, (id_, t) in enumerate(zip(ids, times, strict=True)):
        episode = whole[id_]
        row = t - episode.t_started
        starts += row < K - 1
        with warnings.catch_warnings():  # a restarted episode's earlier frames are gone
            warnings.simplefilter("ignore", ShortLookbackWarning)
            stack = FrameStack(K)([episode], {})["obs"][row]
        assert np.array_equal(stack, batch["obs"][i])
        frames = np.asarray(episode.get_observations(slice(None)))
        padded = np.concatenate([np.zeros((K - 1, *SHAPE), np.uint8), frames])
        after = row + batch["n_step"][i]  # the stack the target bootstraps from
        assert np.array_equal(padded[after : after + K], batch["next_obs"][i])
    assert starts > 0  # stacks at episode starts (zero frames before the first) were drawn


def test_stacks_stay_uint8_on_a_torch_device():
    torch = pytest.importorskip("torch")
    buf = _filled(EpisodeReplayBuffer, 10_000)
    batch = buf.sample(32, batch_length_T=1, lookback=K - 1, device="cpu")
    assert batch["obs"].dtype == torch.uint8 and batch["obs"].shape == (32, K, *SHAPE)


class _StackingPolicy:
    """Acts on its last K frames, kept as its recurrent state (zeros before the first)."""

    def initial_state(self, count):
        return np.zeros((count, K, *SHAPE), np.uint8)

    def __call__(self, obs, state):
        frames = np.concatenate([state[:, 1:], np.asarray(obs)[:, None]], axis=1)
        actions = frames[:, -1, 0, 0].astype(np.int64) % 6
        return actions, {"frames": frames.copy()}, frames


def test_acting_stacks_equal_replay_stacks():
    env = _vector()
    policy = _StackingPolicy()
    runner = EnvRunner(env, policy, initial_state=policy.initial_state, seed=0)
    buf = EpisodeReplayBuffer(10_000, seed=2)
    for _ in range(10):
        buf.add(runner.sample(9))
    items = np.concatenate([buf.get_episode_indices(id_) for id_ in buf.get_episode_ids()])
    acted = buf.get_transitions(items, include_extra_model_outputs=True)["frames"]
    ids, times = buf.episode_steps(items)
    whole = {ep.id_: ep for ep in buf.get_episodes()}
    for i, (id_, t) in enumerate(zip(ids, times, strict=True)):
        stack = FrameStack(K)([whole[id_]], {})["obs"][t - whole[id_].t_started]
        assert np.array_equal(stack, acted[i])  # and FrameStack's rows are the replay stacks
