"""Fixes of bugs found in the chunks ``EnvRunner.sample()`` returns (hunt round 7).

* same-step final observations are rounded into the observation block's dtype (or widen it),
  on the host and on a torch device, so an episode's chunks join and both converter paths agree;
* disabled mode: the runner's own reset observations widen their column as a step's do;
* malformed env step outputs (a lost axis, one scalar for all sub-envs) are a ValueError naming
  the field before anything is written, instead of being broadcast over the sub-envs' rows;
* a copy of a ``SampledChunks`` keeps the spaces and infos lookback edited on built chunks;
* ``unchanged()``'s docstring says that any setter counts (copy on write).
"""

from __future__ import annotations

import copy
import os
import pickle
import re

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from episodes.converter import episodes_to_rollout
from episodes.io import DatasetWriter, load_episode
from episodes.runner import EnvRunner, RandomPolicy, SampledChunks
from episodes.runner.blocks import Blocks
from tests.runner.test_device_recording import SyncCounter


def zero_policy(obs):
    n = len(obs)
    return np.zeros(n, np.int64), {"vf_preds": np.zeros(n, np.float32), "action_logp": np.zeros(n)}


def torch_policy(obs):
    n = len(obs)
    return torch.zeros(n, dtype=torch.long), {
        "vf_preds": torch.zeros(n),
        "action_logp": torch.zeros(n),
    }


class Float64Env(gym.Env):
    """A float32 Box env whose observations are float64 (``final`` scales the ending's one)."""

    observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, length: int = 2, final: float = 1.0):
        self.length, self.final = length, final

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2), {}

    def step(self, action):
        self.t += 1
        done = self.t == self.length
        obs = np.full(2, self.t * 0.1) * (self.final if done else 1.0)
        return obs, 1.0, False, done, {}


def same_step(length: int = 2, final: float = 1.0, num_envs: int = 2) -> gym.vector.VectorEnv:
    # SyncVectorEnv casts the batched observations to float32 but passes final_obs raw.
    make = [lambda: Float64Env(length, final)] * num_envs
    return gym.vector.SyncVectorEnv(make, autoreset_mode="SameStep")


# --------------------------------------------------------------- 1. same-step final observations
def test_same_step_final_observation_is_rounded_into_the_observation_dtype():
    chunks = EnvRunner(same_step(), zero_policy, seed=0, len_lookback_buffer=0).sample(3)
    assert {str(c.get_observations().dtype) for c in chunks} == {"float32"}
    done = next(c for c in chunks if c.is_done)
    assert done.observation_space.contains(done.get_observations(-1))
    assert done.get_observations(-1).tolist() == np.float32([0.2, 0.2]).tolist()


def test_same_step_chunks_of_one_episode_join_across_calls(tmp_path):
    runner = EnvRunner(same_step(length=4, num_envs=1), zero_policy, seed=0)
    first, second = runner.sample(2), runner.sample(2)
    assert second[0].is_done and second[0].id_ == first[0].id_
    joined = copy.deepcopy(first[0])
    joined.concat_episode(second[0])
    assert len(joined) == 4
    path = os.path.join(tmp_path, "ds")
    with DatasetWriter(path) as writer:
        writer.write_many(first)
        writer.write_many(second)
    assert len(load_episode(path, first[0].id_)) == 4


def test_same_step_converter_paths_agree_on_a_float64_final_observation():
    def value_fn(obs):
        return 1e7 * np.asarray(obs, np.float64)[:, 0]

    chunks = EnvRunner(same_step(), zero_policy, seed=0, len_lookback_buffer=0).sample(3)
    fast = episodes_to_rollout(chunks, gamma=1.0, value_fn=value_fn, dtype=torch.float64)
    general = episodes_to_rollout(list(chunks), gamma=1.0, value_fn=value_fn, dtype=torch.float64)
    assert torch.equal(fast.storage.rewards, general.storage.rewards)


def test_same_step_final_observation_beyond_the_dtype_widens_the_column():
    # 1e300 does not fit float32: rounding would make it inf, so the column widens instead.
    chunks = EnvRunner(same_step(final=1e301), zero_policy, seed=0, len_lookback_buffer=0).sample(3)
    done = next(c for c in chunks if c.is_done)
    assert done.get_observations().dtype == np.float64
    assert done.get_observations(-1).tolist() == [0.2 * 1e301] * 2
    assert chunks.recording.blocks.obs.leaves[0].dtype == np.float64


class TorchSameStep(gym.vector.VectorEnv):
    """Same-step, float32 tensor observations, float64 ``infos["final_obs"]``; no host syncs."""

    def __init__(self, n: int = 2):
        self.num_envs = n
        self.metadata = {"autoreset_mode": AutoresetMode.SAME_STEP}
        self.single_observation_space = gym.spaces.Box(-10, 10, (2,), np.float32)
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, n)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, n)
        self.t = torch.zeros(n)

    def reset(self, *, seed=None, options=None):
        self.t = torch.zeros(self.num_envs)
        return torch.zeros(self.num_envs, 2), {}

    def step(self, actions):
        self.t = self.t + 1
        obs = self.t[:, None].repeat(1, 2) * 0.1
        truncated = self.t == 2
        final_obs = obs.double()
        self.t = torch.where(truncated, torch.zeros_like(self.t), self.t)
        obs = torch.where(truncated[:, None], torch.zeros_like(obs), obs)
        infos = {"final_obs": final_obs, "_final_obs": truncated}
        ones = torch.ones(self.num_envs, dtype=torch.float64)
        return obs, ones, torch.zeros_like(truncated), truncated, infos


# ----------------------------------------------------------- 2. the same on a torch device
def test_device_final_observation_of_another_dtype_shares_the_observation_dtype():
    def value_fn(obs):
        return torch.as_tensor(obs)[:, 0].double()

    chunks = EnvRunner(TorchSameStep(), torch_policy, seed=0).sample(3)
    assert chunks.recording.device is not None
    dtypes = {str(c.get_observations().dtype) for c in chunks}
    assert len(dtypes) == 1  # the finals are rounded into the block (no look at the values)
    fast = episodes_to_rollout(chunks, gamma=0.9, value_fn=value_fn)  # crashed: Float vs Double
    general = episodes_to_rollout(list(chunks), gamma=0.9, value_fn=value_fn)
    assert torch.equal(fast.storage.rewards, general.storage.rewards)


def test_device_rounding_of_final_observations_never_waits_for_the_device():
    runner = EnvRunner(TorchSameStep(4), torch_policy, seed=0)
    runner.sample(1)  # allocation; the first finals arrive while counting
    recorder = runner._recorder  # noqa: SLF001 - the test watches the recorder's steps
    recorder.begin(4, runner._obs)  # noqa: SLF001
    counter = SyncCounter()
    with counter:
        while recorder.row - recorder._begin_row < 4:  # noqa: SLF001
            runner._step()  # noqa: SLF001
    assert counter.calls == []
    assert recorder.device_blocks.obs.leaves[0].dtype == torch.float32  # finals rounded in
    assert sum(recorder.finish().chunk_lengths()) == 4 * 4


# ------------------------------------------------------- 3. disabled mode's reset observations
class ResetsToFloats(gym.vector.VectorEnv):
    """Disabled mode: int observations from steps, ``reset_obs`` from the runner's resets."""

    def __init__(self, reset_obs):
        self.num_envs = 2
        self.metadata = {"autoreset_mode": AutoresetMode.DISABLED}
        self.single_observation_space = gym.spaces.Box(-10, 10, (1,), np.float64)
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, 2)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, 2)
        self.reset_obs, self.t = reset_obs, 0

    def reset(self, *, seed=None, options=None):
        if options is None:
            return np.zeros((2, 1), np.int64), {}
        return self.reset_obs, {}

    def step(self, actions):
        self.t += 1
        done = np.array([self.t % 2 == 0, False])
        return np.full((2, 1), self.t, np.int64), np.ones(2), done, np.zeros(2, bool), {}


def test_disabled_reset_observations_widen_the_int_column():
    env = ResetsToFloats(np.full((2, 1), 0.5))
    chunks = EnvRunner(env, zero_policy, seed=0, len_lookback_buffer=0).sample(4)
    ours = [c.get_observations()[:, 0].tolist() for c in chunks if c.custom_data["env_index"] == 0]
    assert ours == [[0.0, 1.0, 2.0], [0.5, 3.0, 4.0]]  # was [0, 3, 4]: 0.5 cast to 0


def test_disabled_reset_observations_of_the_wrong_shape_are_refused():
    env = ResetsToFloats(np.zeros((2, 1, 1)))
    with pytest.raises(ValueError, match=r"reset observations.*\(2, 1, 1\).*\(2, 1\)"):
        EnvRunner(env, zero_policy, seed=0).sample(4)


# ------------------------------------------------------------ 4. malformed env step outputs
class Malformed(gym.vector.VectorEnv):
    """Next-step env of 2 sub-envs, (3,) observations; ``bad`` replaces one step output."""

    def __init__(self, field: str, value):
        self.num_envs = 2
        self.metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}
        self.single_observation_space = gym.spaces.Box(-1, 1, (3,), np.float32)
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, 2)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, 2)
        self.field, self.value = field, value

    def reset(self, *, seed=None, options=None):
        return np.zeros((2, 3), np.float32), {}

    def step(self, actions):
        out = {
            "obs": np.zeros((2, 3), np.float32),
            "rewards": np.ones(2),
            "terminated": np.zeros(2, bool),
            "truncated": np.zeros(2, bool),
        }
        out[self.field] = self.value
        return out["obs"], out["rewards"], out["terminated"], out["truncated"], {}


MALFORMED = {
    "obs lost its item axis": ("obs", np.zeros((2, 1), np.float32), "observations", "(2, 1)"),
    "obs of one sub-env": ("obs", np.zeros((1, 3), np.float32), "observations", "(1, 3)"),
    "one scalar reward": ("rewards", np.float64(1.0), "rewards", "()"),
    "rewards with a unit axis": ("rewards", np.ones((2, 1)), "rewards", "(2, 1)"),
    "one terminated flag": ("terminated", False, "terminated", "()"),
    "one truncated flag": ("truncated", np.zeros(1, bool), "truncated", "(1,)"),
}


@pytest.mark.parametrize("case", MALFORMED.values(), ids=MALFORMED.keys())
def test_malformed_env_outputs_are_refused(case):
    field, value, name, shape = case
    runner = EnvRunner(Malformed(field, value), zero_policy, seed=0)
    with pytest.raises(ValueError, match=f"{name}.*{re.escape(shape)}"):
        runner.sample(2)


def test_a_malformed_step_writes_nothing():
    blocks = Blocks.allocate(np.zeros((2, 3)), rows=2)
    blocks.obs.leaves[0][:] = 7.0
    ok, no = np.ones(2), np.zeros(2, bool)
    for obs, rewards in [(np.zeros((2, 1)), ok), (np.zeros((2, 3)), np.float64(1.0))]:
        with pytest.raises(ValueError):
            blocks.put_env_step(0, obs, np.asarray(rewards), no, no)
        assert blocks.actions is None and not blocks.rewards.any()
        assert (blocks.obs.leaves[0] == 7.0).all()


def test_malformed_observations_of_a_torch_env_are_refused():
    class Lost(TorchSameStep):
        def step(self, actions):
            obs, *rest = super().step(actions)
            return (obs[:, :1], *rest)

    with pytest.raises(ValueError, match=r"observations.*\(2, 1\).*\(2, 2\)"):
        EnvRunner(Lost(), torch_policy, seed=0).sample(2)


# ------------------------------------------------------------ 5. copies keep edits to built chunks
COPIES = {
    "pickle": lambda chunks: pickle.loads(pickle.dumps(chunks)),
    "deepcopy": copy.deepcopy,
    "copy": copy.copy,
}


def cartpole_chunks(calls: int = 1) -> SampledChunks:
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    for _ in range(calls):
        chunks = runner.sample(4)
    return chunks


@pytest.mark.parametrize("how", COPIES.values(), ids=COPIES.keys())
def test_a_copy_keeps_a_column_space_edited_on_a_built_chunk(how):
    chunks = cartpole_chunks()
    space = gym.spaces.Box(-1.0, 1.0, (), np.float64)
    chunks[0].rewards.space = space
    dup = how(chunks)
    assert dup[0].rewards.space == space
    assert dup[0] == chunks[0] and list(dup) == list(chunks)


@pytest.mark.parametrize("how", COPIES.values(), ids=COPIES.keys())
def test_a_copy_keeps_an_infos_lookback_edited_on_a_built_chunk(how):
    chunks = cartpole_chunks(calls=2)  # the second call's chunks have a lookback of 1
    assert chunks[0].infos.lookback == 1
    chunks[0].infos.lookback = 0
    assert how(chunks)[0].infos.lookback == 0


# ----------------------------------------------------------------- 6. unchanged()'s docstring
def test_unchanged_docstring_says_every_setter_counts():
    chunks = cartpole_chunks()
    chunks[0].set_observations(new_data=chunks[0].get_observations(1).copy(), at_indices=1)
    assert not chunks.unchanged()  # the same value written: copy on write, the blocks never see it
    assert "wrote through" not in (SampledChunks.unchanged.__doc__ or "")
