"""The runner refuses observations that are masked arrays with masked entries.

A row write into the blocks (``leaf[row] = batch``) dropped the mask, and the placeholder values
under it were recorded as data, where ``to_numpy``, the setters and the replay buffer refuse
such a value. A masked array with nothing masked is the plain array it holds, recorded as one.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from episodes.runner import EnvRunner
from episodes.structs import flatten

N = 2


class MaskingEnv(gym.vector.VectorEnv):  # type: ignore[type-arg]
    """Sub-env 1's first sensor is masked (placeholder -999) in the observation of ``at``.

    ``at``: "reset" (the first reset), "step" (the second step's), "reset_mask" (a disabled
    mode's own reset of sub-env 0, which ends its episode at the second step) or None (no
    entry masked: every observation a masked array with an all-False mask). Episodes of
    sub-env 0 end at step 2; ``nested`` gives Dict observations ``{"pos": ..., "t": ...}``.
    """

    def __init__(self, mode: str, at: str | None, nested: bool = False, masked: bool = True):
        self.num_envs = N
        self.metadata = {"autoreset_mode": AutoresetMode[mode.upper()]}
        box = gym.spaces.Box(-1e3, 1e3, (2,), np.float32)
        single = gym.spaces.Dict({"pos": box, "t": gym.spaces.Discrete(10)}) if nested else box
        self.single_observation_space = single
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.vector.utils.batch_space(single, N)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, N)
        self.at, self.nested, self.masked, self.mode = at, nested, masked, mode
        self.steps = 0
        self.t = np.zeros(N, np.int64)

    def _obs(self, now: str) -> Any:
        hide = self.masked and now == self.at
        data = np.stack([self.t.astype(np.float32), np.arange(N, dtype=np.float32)], 1)
        mask = np.zeros((N, 2), bool)
        if hide:
            data[1, 0], mask[1, 0] = -999.0, True
        pos = np.ma.masked_array(data, mask=mask)
        return {"pos": pos, "t": self.t % 10} if self.nested else pos

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        if options and "reset_mask" in options:
            self.t[options["reset_mask"]] = 0
            return self._obs("reset_mask"), {}
        self.t[:] = 0
        return self._obs("reset"), {}

    def step(self, actions: Any):
        self.steps += 1
        self.t += 1
        ended = np.array([self.t[0] >= 2, False])
        infos: dict[str, Any] = {}
        if ended.any() and self.mode == "same_step":
            final = np.asarray(self._obs("final") if not self.nested else self._obs("final")["pos"])
            items = np.empty(N, dtype=object)
            for i in range(N):
                items[i] = {"pos": final[i], "t": self.t[i] % 10} if self.nested else final[i]
            infos = {"final_obs": items, "_final_obs": ended.copy()}
            self.t[ended] = 0
        obs = self._obs("step" if self.steps == 2 else "other")
        if self.mode == "next_step" and ended.any():
            self.t[ended] = -1  # the next step resets it to 0
        return obs, np.ones(N), ended, np.zeros(N, bool), infos


def policy(obs: Any) -> Any:
    return np.zeros(N, np.int64), {"vf_preds": np.zeros(N, np.float32)}


REFUSED = [
    # (mode, at, nested, the field named)
    ("next_step", "reset", False, "the env's reset observations"),
    ("next_step", "step", False, "the env's observations"),
    ("same_step", "step", False, "the env's observations"),
    ("disabled", "reset_mask", False, "the env's reset observations"),
    ("next_step", "reset", True, "the env's reset observations"),
    ("next_step", "step", True, r"the env's observations \(leaf 0\)"),
    ("same_step", "step", True, r"the env's observations \(leaf 0\)"),
    ("disabled", "reset_mask", True, r"the env's reset observations \(leaf 0\)"),
]


@pytest.mark.parametrize("numpy_episodes", [True, False])
@pytest.mark.parametrize(("mode", "at", "nested", "field"), REFUSED)
def test_masked_observations_are_refused(
    mode: str, at: str, nested: bool, field: str, numpy_episodes: bool
) -> None:
    runner = EnvRunner(MaskingEnv(mode, at, nested), policy, numpy_episodes=numpy_episodes)
    with pytest.raises(ValueError, match=f"^{field}: a numpy masked array with masked entries"):
        runner.sample(4)


@pytest.mark.parametrize("numpy_episodes", [True, False])
@pytest.mark.parametrize("mode", ["next_step", "same_step", "disabled"])
@pytest.mark.parametrize("nested", [False, True])
def test_nothing_masked_records_as_plain_arrays(
    mode: str, nested: bool, numpy_episodes: bool
) -> None:
    """Masked arrays with an all-False mask record what their plain arrays record."""

    class Plain(MaskingEnv):
        def _obs(self, now: str) -> Any:
            obs = super()._obs(now)
            return {k: np.asarray(v) for k, v in obs.items()} if nested else np.asarray(obs)

    got, want = (
        EnvRunner(env(mode, "step", nested, masked=False), policy, numpy_episodes=numpy_episodes)
        for env in (MaskingEnv, Plain)
    )
    for _ in range(2):
        for a, b in zip(got.sample(3), want.sample(3)):
            assert len(a) == len(b) and a.is_done == b.is_done
            for ours, theirs in zip(leaves(a), leaves(b)):
                assert type(ours) is type(theirs) and ours.dtype == theirs.dtype
                assert np.array_equal(ours, theirs)


def leaves(chunk: Any) -> list[Any]:
    """The chunk's observations (lookback included), leaf by leaf, step by step."""
    obs = chunk.get_observations(
        slice(-chunk.observations.lookback, len(chunk) + 1), neg_index_as_lookback=True
    )
    items = obs if isinstance(obs, list) else [obs]
    return [leaf for item in items for leaf in flatten(item)[0]]
