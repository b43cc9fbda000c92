"""The runner refuses policy outputs and final observations holding masked entries.

A policy's actions and extra outputs that are not numpy arrays were made arrays with
``np.asarray`` (on a torch env's runner, moved to the device with ``torch.as_tensor``), and a
same-step env's final observations stacked with ``np.asarray``: a numpy masked array's mask was
dropped there, and the placeholder values under it were recorded as data, where the runner's
blocks refuse such observations and ``to_numpy``, the setters and the replay buffer such items.
Each is a ``ValueError`` naming the field, before the env steps for a policy output. A masked
array with nothing masked is the plain array it holds, recorded as one.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

from episodes.runner import EnvRunner
from episodes.structs import flatten

N = 2
WORDS = "a numpy masked array with masked entries"


def masked(hide: bool, row: int = 0) -> np.ma.MaskedArray:
    """Ones ``[N, 2]``, row ``row``'s first entry masked (placeholder -999) if ``hide``."""
    data = np.ones((N, 2), np.float32)
    mask = np.zeros((N, 2), bool)
    if hide:
        data[row, 0], mask[row, 0] = -999.0, True
    return np.ma.masked_array(data, mask=mask)


class Env(gym.vector.VectorEnv):  # type: ignore[type-arg]
    """Sub-env 0 ends every second step; Box (or ``nested``: Dict) observations, Box actions.

    ``tensors``: observations, rewards and flags as torch tensors (a GPU simulator's form).
    ``finals``: a same-step env's final observations as "items" (gymnasium's object array,
    one item per sub-env) or "batched" (one ``[N, ...]`` masked array per leaf); ``hide``
    masks an entry of sub-env ``row``'s (1: a row of the batched form that holds no data).
    """

    def __init__(
        self,
        mode: str = "next_step",
        *,
        tensors: bool = False,
        nested: bool = False,
        finals: str = "items",
        hide: bool = False,
        row: int = 0,
    ):
        self.num_envs = N
        self.metadata = {"autoreset_mode": AutoresetMode[mode.upper()]}
        box = gym.spaces.Box(-1e3, 1e3, (2,), np.float32)
        single = gym.spaces.Dict({"pos": box}) if nested else box
        self.single_observation_space = single
        self.single_action_space = box
        self.observation_space = gym.vector.utils.batch_space(single, N)
        self.action_space = gym.vector.utils.batch_space(box, N)
        self.mode, self.tensors, self.nested, self.finals, self.hide = (
            mode,
            tensors,
            nested,
            finals,
            hide,
        )
        self.row, self.steps = row, 0

    def _obs(self, value: float) -> Any:
        obs: Any = np.full((N, 2), value, np.float32)
        obs = torch.from_numpy(obs) if self.tensors else obs
        return {"pos": obs} if self.nested else obs

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        return self._obs(0.0), {}

    def step(self, actions: Any) -> Any:
        self.steps += 1
        ended = np.array([self.steps % 2 == 0, False])
        infos: dict[str, Any] = {}
        if ended.any() and self.mode == "same_step":
            final = masked(self.hide, self.row)
            if self.finals == "items":
                items = np.empty(N, dtype=object)
                items[0] = {"pos": final[0]} if self.nested else final[0]
                infos = {"final_obs": items, "_final_obs": ended}
            else:
                infos = {"final_obs": {"pos": final} if self.nested else final}
                infos["_final_obs"] = ended
        rewards, flags = np.ones(N), (ended, np.zeros(N, bool))
        if self.tensors:
            rewards, flags = torch.ones(N), tuple(torch.from_numpy(f) for f in flags)
        return self._obs(float(self.steps)), rewards, *flags, infos


def policy_of(outputs: str, hide_at: int | None, tensors: bool = False) -> Any:
    """A policy whose ``outputs`` are masked arrays, with an entry masked at call ``hide_at``.

    ``outputs``: "actions", "list" (the actions a list of per-env masked rows), "extra" (an
    extra output) or "nested" (an extra output's dict leaf). The others are plain (tensors on
    a torch env's runner, where ``tensors``).
    """
    calls = [0]

    def policy(obs: Any) -> Any:
        hide = calls[0] == hide_at
        calls[0] += 1
        out = masked(hide)
        plain: Any = torch.zeros(N, 2) if tensors else np.zeros((N, 2), np.float32)
        if outputs == "actions":
            return out, {"vf": plain[:, 0]}
        if outputs == "list":
            return list(out), {}
        if outputs == "extra":
            return plain, {"vf": out}
        return plain, {"d": {"x": out}}

    return policy


OUTPUTS = [
    # (outputs, the field named)
    ("actions", "the policy's actions"),
    ("list", "the policy's actions"),
    ("extra", "the policy's extra output 'vf'"),
    ("nested", "the policy's extra output 'd'"),
]


@pytest.mark.parametrize("tensors", [False, True])
@pytest.mark.parametrize("hide_at", [0, 2])  # the first call (allocating the blocks), a later
@pytest.mark.parametrize(("outputs", "field"), OUTPUTS)
def test_masked_policy_outputs_are_refused_before_the_env_steps(
    outputs: str, field: str, hide_at: int, tensors: bool
) -> None:
    env = Env(tensors=tensors)
    runner = EnvRunner(env, policy_of(outputs, hide_at, tensors))
    with pytest.raises(ValueError, match=f"^{field}: {WORDS}"):
        runner.sample(4)
    assert env.steps == hide_at  # refused before env.step


FINALS = [
    # (tensors, nested, finals, the field named)
    (False, False, "items", r"the env's final observation \(infos\['final_obs'\]\) of sub-env 0"),
    (False, True, "items", r"the env's final observation \(infos\['final_obs'\]\) of sub-env 0"),
    (False, False, "batched", r"the env's final observation \(infos\['final_obs'\]\) of sub-env 0"),
    (
        False,
        True,
        "batched",
        r"the env's final observation \(infos\['final_obs'\]\), leaf 0 of sub-env 0",
    ),
    (True, False, "batched", r"the env's infos\['final_obs'\]"),
    (True, True, "batched", r"the env's infos\['final_obs'\]"),
]


@pytest.mark.parametrize("numpy_episodes", [True, False])
@pytest.mark.parametrize(("tensors", "nested", "finals", "field"), FINALS)
def test_masked_final_observations_are_refused(
    tensors: bool, nested: bool, finals: str, field: str, numpy_episodes: bool
) -> None:
    env = Env("same_step", tensors=tensors, nested=nested, finals=finals, hide=True)
    policy = policy_of("none", None, tensors)
    runner = EnvRunner(env, lambda obs: (policy(obs)[0], {}), numpy_episodes=numpy_episodes)
    with pytest.raises(ValueError, match=f"^{field}: {WORDS}"):
        runner.sample(4)


RECORDED = [
    # (mode, tensors, nested, finals, outputs)
    ("next_step", False, False, "items", "actions"),
    ("next_step", False, False, "items", "list"),
    ("next_step", False, False, "items", "extra"),
    ("next_step", False, True, "items", "nested"),
    ("same_step", False, False, "items", "actions"),
    ("same_step", False, True, "items", "extra"),
    ("same_step", False, False, "batched", "list"),
    ("same_step", False, True, "batched", "nested"),
    ("next_step", True, False, "items", "actions"),
    ("next_step", True, True, "items", "extra"),
    ("same_step", True, False, "batched", "nested"),
    ("same_step", True, True, "batched", "actions"),
]


@pytest.mark.parametrize("numpy_episodes", [True, False])
@pytest.mark.parametrize(("mode", "tensors", "nested", "finals", "outputs"), RECORDED)
def test_nothing_masked_records_as_plain_arrays(
    mode: str, tensors: bool, nested: bool, finals: str, outputs: str, numpy_episodes: bool
) -> None:
    """All-False masks record what the plain arrays under them record, outputs and finals."""

    class Plain(Env):
        def step(self, actions: Any) -> Any:
            *rest, infos = super().step(actions)
            if "final_obs" in infos:
                unmask = (lambda x: x) if tensors else np.asarray
                finals_ = infos["final_obs"]
                if isinstance(finals_, np.ndarray) and finals_.dtype == object:
                    for i, item in enumerate(finals_):
                        if item is not None:
                            finals_[i] = flatten_map(np.asarray, item)
                else:
                    infos["final_obs"] = flatten_map(unmask, finals_)
            return *rest, infos

    def plain_policy(obs: Any) -> Any:
        actions, extras = policy_of(outputs, None, tensors)(obs)
        return flatten_map(np.asarray, actions), flatten_map(np.asarray, extras)

    kwargs = {"tensors": tensors, "nested": nested, "finals": finals}
    got = EnvRunner(
        Env(mode, **kwargs), policy_of(outputs, None, tensors), numpy_episodes=numpy_episodes
    )
    want = EnvRunner(Plain(mode, **kwargs), plain_policy, numpy_episodes=numpy_episodes)
    for _ in range(2):
        for a, b in zip(got.sample(3), want.sample(3)):
            assert len(a) == len(b) and a.is_done == b.is_done
            for ours, theirs in zip(recorded(a), recorded(b)):
                assert type(ours) is type(theirs) and ours.dtype == theirs.dtype
                assert np.array_equal(ours, theirs)


def flatten_map(fn: Any, value: Any) -> Any:
    """``fn`` applied to each leaf of dicts (a list of rows is one leaf, as a batch's is)."""
    if isinstance(value, dict):
        return {key: flatten_map(fn, part) for key, part in value.items()}
    return fn(value) if isinstance(value, (np.ndarray, list)) else value


def recorded(chunk: Any) -> list[Any]:
    """The chunk's observations (lookback included), actions and extras, leaf by leaf."""
    obs = chunk.get_observations(
        slice(-chunk.observations.lookback, len(chunk) + 1), neg_index_as_lookback=True
    )
    extras = [chunk.get_extra_model_outputs(key) for key in sorted(chunk.extra_model_outputs)]
    columns = [obs, chunk.get_actions(), *extras]
    out = []
    for column in columns:
        items = column if isinstance(column, list) else [column]
        out += [np.asarray(leaf) for item in items for leaf in flatten(item)[0]]
    return out


@pytest.mark.parametrize("numpy_episodes", [True, False])
@pytest.mark.parametrize("nested", [False, True])
def test_masked_rows_of_sub_envs_that_did_not_end_are_no_data(
    nested: bool, numpy_episodes: bool
) -> None:
    """A batched final observation masked where no episode ended records as its plain array."""

    class Plain(Env):
        def step(self, actions: Any) -> Any:
            *rest, infos = super().step(actions)
            if "final_obs" in infos:
                infos["final_obs"] = flatten_map(np.asarray, infos["final_obs"])
            return *rest, infos

    kwargs: dict[str, Any] = {"nested": nested, "finals": "batched", "hide": True, "row": 1}
    policy = policy_of("actions", None)
    got = EnvRunner(Env("same_step", **kwargs), policy, numpy_episodes=numpy_episodes)
    want = EnvRunner(Plain("same_step", **kwargs), policy, numpy_episodes=numpy_episodes)
    for a, b in zip(got.sample(4), want.sample(4)):
        assert len(a) == len(b) and a.is_done == b.is_done
        for ours, theirs in zip(recorded(a), recorded(b)):
            assert type(ours) is type(theirs) and ours.dtype == theirs.dtype
            assert np.array_equal(ours, theirs)
