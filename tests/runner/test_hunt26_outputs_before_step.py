"""The policy's outputs are recorded as the policy returned them, whatever the env does next.

An env may write its next observations into the buffer the policy read (gymnasium's
``SyncVectorEnv(copy=False)``, simulators on a device) or clip the actions it is given in
place. Outputs that are views of either used to be copied into the blocks after ``env.step``,
so chunks held the next step's values (an action mask passed through as an extra output) or
the env's clipped actions.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes.envs.torch_cartpole import TorchCartPole
from episodes.runner import EnvRunner


class InPlaceCartPole(TorchCartPole):
    """A torch env that writes every observation into one tensor, as simulators do."""

    buffer: torch.Tensor

    def reset(self, **kwargs):
        obs, infos = super().reset(**kwargs)
        self.buffer = obs.clone()
        return self.buffer, infos

    def step(self, actions):
        obs, *rest = super().step(actions)
        self.buffer.copy_(obs)
        return (self.buffer, *rest)


class ClippingCartPole(TorchCartPole):
    """A torch env that clips the actions it is given in place."""

    def step(self, actions):
        actions.clamp_(0, 0)
        return super().step(actions)


class ClippingSyncEnv(gym.vector.SyncVectorEnv):
    """A numpy vector env that clips the actions it is given in place."""

    def step(self, actions):
        actions[:] = 0
        return super().step(actions)


def sync_env(copy: bool) -> gym.vector.VectorEnv:
    return gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2, copy=copy)


def numpy_view_policy(obs):
    return (obs[:, 2] > 0).astype(np.int64), {"velocity": obs[:, 1]}


def torch_view_policy(obs):
    return (obs[:, 2] > 0).long(), {"velocity": obs[:, 1]}


VIEW_CASES = [
    ("gymnasium SyncVectorEnv(copy=False)", lambda: sync_env(False), numpy_view_policy),
    ("gymnasium SyncVectorEnv(copy=True)", lambda: sync_env(True), numpy_view_policy),
    ("torch env writing observations in place", lambda: InPlaceCartPole(2), torch_view_policy),
    ("torch env with fresh observations", lambda: TorchCartPole(2), torch_view_policy),
]


@pytest.mark.parametrize("name, make_env, policy", VIEW_CASES, ids=[c[0] for c in VIEW_CASES])
def test_an_extra_output_viewing_the_observations_keeps_that_steps_values(name, make_env, policy):
    chunks = EnvRunner(make_env(), policy, seed=0, len_lookback_buffer=0).sample(6)
    for chunk in chunks:
        obs = np.asarray(chunk.get_observations(slice(None)))
        recorded = np.asarray(chunk.get_extra_model_outputs("velocity"))
        np.testing.assert_array_equal(recorded, obs[: len(chunk), 1], err_msg=name)


CLIP_CASES = [
    (
        "numpy env clipping in place",
        lambda: ClippingSyncEnv([lambda: gym.make("CartPole-v1")] * 2),
        lambda obs: (np.ones(2, np.int64), {}),
    ),
    (
        "torch env clipping in place",
        lambda: ClippingCartPole(2),
        lambda obs: (torch.ones(2, dtype=torch.long), {}),
    ),
]


@pytest.mark.parametrize("name, make_env, policy", CLIP_CASES, ids=[c[0] for c in CLIP_CASES])
def test_actions_an_env_clips_in_place_are_recorded_as_the_policy_gave_them(name, make_env, policy):
    chunks = EnvRunner(make_env(), policy, seed=0).sample(3)
    for chunk in chunks:
        assert np.asarray(chunk.get_actions()).tolist() == [1] * len(chunk), name


class SwitchingPolicy:
    """Int outputs; in ``bad`` mode output ``a`` turns float (its int64 column would widen to
    float64) and ``b`` turns into values its column refuses; ``big`` ints come after."""

    def __init__(self, torch_env: bool, refused: str):
        self.torch_env, self.refused, self.mode = torch_env, refused, "small"

    def __call__(self, obs):
        n = len(obs)
        actions = torch.zeros(n, dtype=torch.long) if self.torch_env else np.zeros(n, np.int64)
        if self.mode == "bad":
            refused = np.array(["s"] * n) if self.refused == "strings" else np.full(n, 1j)
            return actions, {"a": np.full(n, 0.5), "b": refused}
        value = 2**60 + 1 if self.mode == "big" else 3  # float64 would round 2**60 + 1
        return actions, {"a": np.full(n, value, np.int64), "b": np.zeros(n, np.float32)}


REFUSALS = [
    ("numpy env, strings", False, "strings"),
    ("numpy env, complex", False, "complex"),
    ("torch env, complex", True, "complex"),
]


@pytest.mark.parametrize("name, torch_env, refused", REFUSALS, ids=[r[0] for r in REFUSALS])
def test_an_output_refused_at_a_calls_first_step_leaves_no_widened_column(name, torch_env, refused):
    # ``a`` widens before ``b`` is refused: the restored runner must still hold ``a`` as
    # int64, or its later ints beyond 2**53 would be rounded.
    policy = SwitchingPolicy(torch_env, refused)
    env = TorchCartPole(2) if torch_env else gym.make_vec("CartPole-v1", 2, "sync")
    runner = EnvRunner(env, policy, seed=0)
    runner.sample(3)
    policy.mode = "bad"
    with pytest.raises(ValueError, match="extra output 'b'"):
        runner.sample(3)
    policy.mode = "big"
    for chunk in runner.sample(3):
        recorded = np.asarray(chunk.get_extra_model_outputs("a"))
        assert recorded.dtype == np.int64, name
        assert recorded.tolist() == [2**60 + 1] * len(chunk), name


class CountingCartPole(TorchCartPole):
    steps = 0

    def step(self, actions):
        self.steps += 1
        return super().step(actions)


@pytest.mark.parametrize("where", ["actions", "extra"])
def test_meta_outputs_at_a_later_step_are_refused_before_that_env_step(where):
    calls = [0]

    def policy(obs):
        calls[0] += 1
        actions, extras = torch.zeros(len(obs), dtype=torch.long), {"v": torch.zeros(len(obs))}
        if calls[0] == 3:
            meta = torch.empty(len(obs), device="meta")
            if where == "actions":
                actions = meta.long()
            else:
                extras = {"v": meta}
        return actions, extras

    env = CountingCartPole(2)
    runner = EnvRunner(env, policy, seed=0)
    with pytest.raises(ValueError, match="meta"):
        runner.sample(5)
    assert env.steps == 2  # the third step's outputs never reached the env
    with pytest.raises(RuntimeError):  # the env stepped at the call's first two steps
        runner.sample(5)
