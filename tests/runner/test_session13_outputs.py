"""Session 13 fixes: what ``EnvRunner.sample`` does with a policy's malformed return.

Each test failed before its fix:

* extras that are not a dict (a list), an extra output under a non-str key, and a return of
  another form (None, a bare action batch, three items from a feed-forward policy, two from a
  recurrent one) failed in Python's own words (unpacking, ``dict()``, ``sorted()``), naming
  neither the policy nor the output;
* a torch tensor on the meta device (no data: actions, an extra output, a recurrent state or
  ``initial_state``'s) was refused only after the env stepped (torch's NotImplementedError,
  gymnasium's AssertionError), which left the runner unusable, on the host and on a torch
  env alike; at a later step of a call it stopped the runner in torch's bare words.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes.envs.torch_cartpole import TorchCartPole
from episodes.runner import EnvRunner
from episodes.structs import map_batch
from tests.runner._runner_env import CountingSteps

N = 3


class CountedTorchCartPole(TorchCartPole):
    """TorchCartPole counting its vector steps, to tell whether a refusal came before one."""

    steps = 0

    def step(self, actions: Any) -> Any:
        self.steps += 1
        return super().step(actions)


def make_env(kind: str) -> Any:
    if kind == "torch":
        return CountedTorchCartPole(N)
    return CountingSteps(gym.make_vec("CartPole-v1", N, vectorization_mode="sync"))


def _angle(obs: Any) -> np.ndarray:
    return (obs.cpu().numpy() if torch.is_tensor(obs) else np.asarray(obs))[:, 2]


def _good(obs: Any) -> tuple[Any, dict[str, Any]]:
    """Pushes by the pole's angle; records the angle, also nested (tensors on a torch env)."""
    angle = _angle(obs)
    actions, vf = (angle > 0).astype(np.int64), angle.astype(np.float32)
    if torch.is_tensor(obs):
        actions, vf = torch.from_numpy(actions), torch.from_numpy(vf)
    return actions, {"vf_preds": vf, "s": {"h": (vf, 2 * vf)}}


def _meta(like: Any) -> torch.Tensor:
    return torch.empty(tuple(np.shape(like)), dtype=torch.as_tensor(like).dtype, device="meta")


class Toggled:
    """``_good``; while ``bad`` is set, returns ``bad(*_good(obs))`` instead."""

    def __init__(self) -> None:
        self.bad: Any = None

    def __call__(self, obs: Any) -> Any:
        actions, extras = _good(obs)
        return (actions, extras) if self.bad is None else self.bad(actions, extras)


def _data(chunks: Any) -> list[Any]:
    """What the chunks record, without their ids (a runner's ids have a random prefix)."""
    out = []
    for c in chunks:
        extras = {  # a nested output's leaves as lists too
            k: map_batch(lambda x: np.asarray(x).tolist(), c.get_extra_model_outputs(k))
            for k in sorted(c.extra_model_outputs)
        }
        out.append(
            (
                c.custom_data["env_index"],
                c.t_started,
                len(c),
                np.asarray(c.get_observations()).tolist(),
                np.asarray(c.get_actions()).tolist(),
                np.asarray(c.get_rewards()).tolist(),
                c.is_terminated,
                c.is_truncated,
                extras,
            )
        )
    return out


# (what the policy returns instead, given its good actions and extras; error; message)
MALFORMED = {
    "extras a list": (lambda a, e: (a, [1, 2]), TypeError, "extra outputs must be a dict"),
    "extras an array": (lambda a, e: (a, np.zeros(N)), TypeError, "must be a dict"),
    "an int key": (lambda a, e: (a, {**e, 5: e["vf_preds"]}), TypeError, "str keys.* 5"),
    "None": (lambda a, e: None, TypeError, "the policy returned None: a policy.obs. returns"),
    "three items": (lambda a, e: (a, e, None), TypeError, "returned a tuple of 3 items"),
    "the actions alone": (lambda a, e: a, TypeError, "returned a value of type"),
    "meta actions": (lambda a, e: (_meta(a), e), ValueError, "actions: got a torch .* meta"),
    "meta extra": (
        lambda a, e: (a, {**e, "vf_preds": _meta(e["vf_preds"])}),
        ValueError,
        "extra output 'vf_preds': got a torch tensor on the meta device",
    ),
    "meta leaf of a nested extra": (
        lambda a, e: (a, {**e, "s": {"h": (e["vf_preds"], _meta(e["vf_preds"]))}}),
        ValueError,
        "extra output 's': .*meta device",
    ),
}


@pytest.mark.parametrize("env_kind", ["numpy", "torch"])
@pytest.mark.parametrize("refused_call", [0, 1], ids=["runner's first call", "a later call"])
@pytest.mark.parametrize(("bad", "error", "match"), MALFORMED.values(), ids=MALFORMED.keys())
def test_a_malformed_return_at_a_calls_first_step_is_refused_and_leaves_the_runner_as_it_was(
    bad, error, match, refused_call, env_kind
):
    env, policy = make_env(env_kind), Toggled()
    runner = EnvRunner(env, policy, seed=0)
    untouched = EnvRunner(make_env(env_kind), Toggled(), seed=0)
    got, want = [], []
    for call in range(3):
        if call == refused_call:
            policy.bad, steps = bad, env.steps
            with pytest.raises(error, match=match):
                runner.sample(5)
            assert env.steps == steps  # refused before the env stepped
            policy.bad = None
        got += _data(runner.sample(5))
        want += _data(untouched.sample(5))
    assert got == want


LATER_STEP = {
    "extras a list": (lambda a, e: (a, [1, 2]), TypeError, "extra outputs must be a dict"),
    "an int key": (lambda a, e: (a, {**e, 5: e["vf_preds"]}), TypeError, "str keys"),
    "None": (lambda a, e: None, TypeError, "the policy returned None"),
    "meta extra": (
        lambda a, e: (a, {**e, "vf_preds": _meta(e["vf_preds"])}),
        ValueError,
        "extra output 'vf_preds': got a torch tensor on the meta device",
    ),
}


@pytest.mark.parametrize("env_kind", ["numpy", "torch"])
@pytest.mark.parametrize(("bad", "error", "match"), LATER_STEP.values(), ids=LATER_STEP.keys())
def test_a_malformed_return_after_the_env_stepped_stops_the_runner_and_says_so(
    bad, error, match, env_kind
):
    class ThirdStepBad:
        k = 0

        def __call__(self, obs: Any) -> Any:
            self.k += 1
            actions, extras = _good(obs)
            return bad(actions, extras) if self.k == 3 else (actions, extras)

    runner = EnvRunner(make_env(env_kind), ThirdStepBad(), seed=0)
    with pytest.raises(error, match=match):
        runner.sample(5)
    with pytest.raises(RuntimeError, match="failed part-way .*the env had stepped"):
        runner.sample(5)


class Recurrent:
    """Counts each sub-env's steps in its state; ``bad`` spoils what it returns."""

    def __init__(self) -> None:
        self.bad: str | None = None

    def initial_state(self, n: int) -> Any:
        state = torch.zeros(n, 1)
        return _meta(state) if self.bad == "meta initial_state" else state

    def __call__(self, obs: Any, state: Any) -> Any:
        actions, extras = _good(obs)
        extras["t"] = state[:, 0].clone()
        state = state + 1
        if self.bad == "two items":
            return actions, extras
        if self.bad == "meta state":
            return actions, extras, _meta(state)
        return actions, extras, state


RECURRENT = {
    "two items": (TypeError, "a recurrent policy.obs, state. returns a tuple"),
    "meta state": (ValueError, "the policy's state: got a torch tensor on the meta device"),
    "meta initial_state": (ValueError, "initial_state's state: got a torch tensor on the meta"),
}


@pytest.mark.parametrize("env_kind", ["numpy", "torch"])
@pytest.mark.parametrize(
    ("bad", "error", "match"), [(k, *v) for k, v in RECURRENT.items()], ids=RECURRENT.keys()
)
def test_a_recurrent_policys_malformed_return_is_refused_before_the_env_steps(
    bad, error, match, env_kind
):
    env, policy = make_env(env_kind), Recurrent()
    runner = EnvRunner(env, policy, seed=0)
    untouched = EnvRunner(make_env(env_kind), Recurrent(), seed=0)
    refused_calls = [0] if bad == "meta initial_state" else [0, 1]  # read at the first reset
    got, want = [], []
    for call in range(3):
        if call in refused_calls:
            policy.bad, steps = bad, env.steps
            with pytest.raises(error, match=match):
                runner.sample(4)
            assert env.steps == steps
            policy.bad = None
        got += _data(runner.sample(4))
        want += _data(untouched.sample(4))
    assert got == want


ZEROS, ONES = np.zeros(N, np.int64), np.ones(N)
ACCEPTED = {
    "a tuple": ((ZEROS, {"v": ONES}), {"v": [1.0] * N}),
    "a list": ([ZEROS, {"v": ONES}], {"v": [1.0] * N}),
    "extras None": ((ZEROS, None), {}),
    "extras a read-only mapping": ((ZEROS, MappingProxyType({"v": ONES})), {"v": [1.0] * N}),
}


@pytest.mark.parametrize(("out", "extras"), ACCEPTED.values(), ids=ACCEPTED.keys())
def test_the_forms_a_policy_could_return_before_are_still_taken(out, extras):
    from episodes.runner.policy import policy_return  # new with the fix

    actions, got, state = policy_return(out, recurrent=False)
    assert state is None and actions is out[0]
    assert {k: v.tolist() for k, v in got.items()} == extras and type(got) is dict
    runner = EnvRunner(make_env("numpy"), lambda obs: out, seed=0)
    assert sorted(runner.sample(2)[0].extra_model_outputs) == sorted(extras)
