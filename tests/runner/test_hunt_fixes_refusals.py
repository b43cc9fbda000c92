"""Hunt fixes of what the env runner refuses, and of what a refusal leaves behind.

Each test failed before its fix:

* a structured extra output whose inner key was renamed at a later step (or a tuple that
  became a dict of the same leaf shapes) was recorded under the first step's structure;
* a later step's strings or objects widened a float column to strings or objects, rewriting
  the earlier rows; int64 and uint64 values widened an int column to float64, rounding them;
  on a torch device such values gave torch's bare TypeError;
* a refusal at a call's first step, before the env stepped, still broke the runner for good
  (its RuntimeError said the env had stepped);
* a recurrent ``initial_state`` giving other leaf shapes at a sub-env's reset failed with a
  raw numpy broadcast error, or was broadcast into the state without an error.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes.runner import EnvRunner
from episodes.runner.blocks import Column
from episodes.runner.device_blocks import TensorColumn
from tests.runner._runner_env import CountingSteps
from tests.runner._tensor_env import TensorVectorEnv, to_arrays


def cartpole(mode: str = "next_step", tensors: bool = False) -> gym.vector.VectorEnv:
    modes = {"next_step": gym.vector.AutoresetMode.NEXT_STEP}
    modes["same_step"] = gym.vector.AutoresetMode.SAME_STEP
    env = gym.make_vec(
        "CartPole-v1", 3, vectorization_mode="sync", vector_kwargs={"autoreset_mode": modes[mode]}
    )
    return CountingSteps(TensorVectorEnv(env) if tensors else env)


class Scripted:
    """A policy returning ``outputs(k, obs)`` at its ``k``-th call (from 1)."""

    def __init__(self, outputs: Any):
        self.outputs, self.k = outputs, 0

    def __call__(self, obs: Any) -> Any:
        self.k += 1
        return self.outputs(self.k, obs)


# --------------------------------------------------------------- 1. nested extra outputs
def _zeros(obs: Any) -> Any:
    return (
        torch.zeros(len(obs), dtype=torch.int64)
        if torch.is_tensor(obs)
        else np.zeros(len(obs), np.int64)
    )


def _full(obs: Any, value: float) -> Any:
    return torch.full((len(obs),), value) if torch.is_tensor(obs) else np.full(len(obs), value)


NESTING_CHANGES = {
    "inner key renamed": lambda k, o: {
        "rnn": {"h": _full(o, 1.0)} if k < 3 else {"c": _full(o, -7.0)}
    },
    "tuple became dict": lambda k, o: {
        "s": (_full(o, 0.0), _full(o, 1.0)) if k < 3 else {"b": _full(o, 5.0), "a": _full(o, 9.0)}
    },
    "dict became tuple": lambda k, o: {"s": {"a": _full(o, 0.0)} if k < 3 else (_full(o, 1.0),)},
}


@pytest.mark.parametrize("tensors", [False, True], ids=["numpy", "torch"])
@pytest.mark.parametrize("extras", NESTING_CHANGES.values(), ids=NESTING_CHANGES.keys())
def test_a_changed_nesting_of_an_extra_output_is_refused_before_the_env_steps(extras, tensors):
    env = cartpole(tensors=tensors)
    policy = Scripted(lambda k, obs: (_zeros(obs), extras(k, obs)))
    with pytest.raises(ValueError, match=r"extra output '\w+' changed nesting from"):
        EnvRunner(env, policy, seed=0).sample(5)
    assert env.steps == policy.k - 1  # the refused step did not reach the env


def test_dict_key_order_and_namedtuples_are_the_same_nesting():
    from collections import namedtuple

    Pair = namedtuple("Pair", "x y")

    def outputs(k, obs):
        n = len(obs)
        d = {"a": np.zeros(n), "b": np.ones(n)} if k % 2 else {"b": np.ones(n), "a": np.zeros(n)}
        pair = Pair(np.zeros(n), np.ones(n)) if k % 2 else (np.zeros(n), np.ones(n))
        return np.zeros(n, np.int64), {"d": d, "p": pair}

    chunk = EnvRunner(cartpole(), Scripted(outputs), seed=0).sample(4)[0]
    assert chunk.get_extra_model_outputs("d")["b"].tolist() == [1.0] * 4


# ------------------------------------------------------------------ 2, 3. widening dtypes
LATE_VALUES = {
    "strings": (np.array(["oops"] * 3), r"got <U4 values for a column of float64"),
    "objects": (np.array([None, 1.0, 2.0], dtype=object), r"got object values for a column of"),
    "complex": (np.full(3, 1j), r"got complex128 values for a column of float64"),
}


@pytest.mark.parametrize(("late", "message"), LATE_VALUES.values(), ids=LATE_VALUES.keys())
def test_a_float_column_is_not_widened_to_strings_or_objects(late, message):
    policy = Scripted(
        lambda k, obs: (_zeros(obs), {"vf_preds": np.full(3, 0.5) if k < 3 else late})
    )
    runner = EnvRunner(cartpole(), policy, seed=0)
    with pytest.raises(ValueError, match=r"the policy's extra output 'vf_preds': " + message):
        runner.sample(5)


def test_int64_and_uint64_values_that_only_a_float_holds_are_refused():
    big = np.full(3, 2**63 + 1, np.uint64)
    policy = Scripted(lambda k, obs: (_zeros(obs), {"id": np.full(3, 2**62 + 1) if k < 3 else big}))
    with pytest.raises(ValueError, match=r"'id': got uint64 values for a column of int64.*2\*\*53"):
        EnvRunner(cartpole(), policy, seed=0).sample(5)


def test_uint64_values_an_int64_column_holds_keep_their_values():
    ids = lambda k: np.full(3, 2**62 + k) if k < 3 else np.full(3, 2**62 + k, np.uint64)  # noqa: E731
    policy = Scripted(lambda k, obs: (_zeros(obs), {"id": ids(k)}))
    values = EnvRunner(cartpole(), policy, seed=0).sample(4)[0].get_extra_model_outputs("id")
    assert values.dtype == np.int64 and [int(v) for v in values] == [2**62 + k for k in range(1, 5)]


COLUMN_REFUSALS = {
    "float then strings": (np.float64, np.array(["a", "b"])),
    "int then uint beyond": (np.int64, np.full(2, 2**63, np.uint64)),
    "uint then negative": (np.uint64, np.array([-1, 0])),
    "numbers then strings": (np.int64, np.array(["1", "2"])),
}


@pytest.mark.parametrize(("dtype", "late"), COLUMN_REFUSALS.values(), ids=COLUMN_REFUSALS.keys())
def test_a_refused_widening_leaves_the_column_as_it_was(dtype, late):
    col = Column.for_batch(np.zeros(2, dtype), rows=2)
    col.put(0, np.ones(2, dtype))
    before = col.leaves[0][0].copy()
    with pytest.raises(ValueError, match=r"a batch: got \S+ values for a column of"):
        col.put(1, late)
    assert col.leaves[0].dtype == np.dtype(dtype)
    assert col.leaves[0][0].tolist() == before.tolist()


def test_the_widenings_the_docs_promise_still_happen():
    col = Column.for_batch(np.zeros(2, np.int64), rows=3)
    col.put(0, np.array([1, 2]))
    col.put(1, np.array([0.5, 1.5]))  # floats after ints
    assert col.leaves[0].dtype == np.float64 and col.leaves[0][0].tolist() == [1.0, 2.0]
    col = Column.for_batch(np.zeros(2, bool), rows=2)
    col.put(0, np.array([True, False]))
    col.put(1, np.array([3, 4], np.int8))
    assert col.leaves[0].dtype == np.int8 and col.leaves[0][0].tolist() == [1, 0]
    col = Column.for_batch(np.array(["a", "b"]), rows=2)  # a Text space's longer strings
    col.put(0, np.array(["x", "y"]))
    col.put(1, np.array(["long", "er"]))
    assert col.leaves[0].dtype == np.dtype("<U4") and col.leaves[0].tolist() == [
        ["x", "y"],
        ["long", "er"],
    ]


DEVICE_LATE = {
    "numpy strings": (torch.zeros(3), np.array(["a", "b", "c"]), r"got <U1 values"),
    "numpy objects": (torch.zeros(3), np.array([None, 1.0, 2.0], dtype=object), r"got object"),
    "complex": (torch.zeros(3), torch.full((3,), 1j), r"got complex64 values for a column of"),
}
if hasattr(torch, "uint64"):  # torch 2.3+
    DEVICE_LATE["int64 then uint64"] = (
        torch.zeros(3, dtype=torch.int64),
        torch.ones(3, dtype=torch.uint64),
        r"got uint64 values for a column of int64",
    )


@pytest.mark.parametrize(("first", "late", "message"), DEVICE_LATE.values(), ids=DEVICE_LATE.keys())
@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_the_device_path_refuses_the_same_values_with_a_clear_error(first, late, message, mode):
    policy = Scripted(lambda k, obs: (_zeros(obs), {"v": first if k < 3 else late}))
    runner = EnvRunner(cartpole(mode, tensors=True), policy, seed=0)
    with pytest.raises(ValueError, match=r"the policy's extra output 'v': " + message):
        runner.sample(5)


@pytest.mark.torch_2_3
def test_a_tensor_column_refuses_int64_then_uint64_whatever_the_values():
    col = TensorColumn.for_batch(torch.zeros(2, dtype=torch.int64), rows=2)
    with pytest.raises(ValueError, match="got uint64 values for a column of int64"):
        col.put(0, torch.ones(2, dtype=torch.uint64))
    assert col.leaves[0].dtype == torch.int64


# ------------------------------------------------------ 4. a refusal before the env steps
def _data(chunks: Any) -> list[Any]:
    """What a chunk records, without its id (a runner's ids have a random prefix)."""
    out = []
    for c in chunks:
        extras = {
            k: np.asarray(c.get_extra_model_outputs(k)).tolist() for k in c.extra_model_outputs
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


class Toggled:
    """Pushes by the pole's angle; while ``bad``, returns ``bad(obs)`` instead."""

    def __init__(self, bad: Any = None):
        self.bad = bad

    def __call__(self, obs: Any) -> Any:
        if self.bad is not None:
            return self.bad(obs)
        angle = to_arrays(obs)[:, 2]
        actions = (angle > 0).astype(np.int64)
        extras = {"vf_preds": angle.astype(np.float32)}
        if torch.is_tensor(obs):
            return torch.from_numpy(actions), {"vf_preds": torch.from_numpy(extras["vf_preds"])}
        return actions, extras


def _raises(obs: Any) -> Any:
    raise KeyError("the policy's own error")


def _one_action(obs: Any) -> Any:
    return np.int64(0), {"vf_preds": np.zeros(3, np.float32)}


def _renamed(obs: Any) -> Any:  # refused once the first step named the outputs
    return np.zeros(3, np.int64), {"vf": np.zeros(3, np.float32)}


def _scalar_extra(obs: Any) -> Any:
    return np.zeros(3, np.int64), {"vf_preds": np.float32(0)}


# (bad outputs, error, the calls refused at their first step: 0 is the runner's first call)
FIRST_STEP_REFUSALS = {
    "one action for all": (_one_action, ValueError, [0, 1, 2]),
    "renamed key": (_renamed, ValueError, [1, 2]),
    "extra loses env axis": (_scalar_extra, ValueError, [0, 1, 2]),
    "policy raises": (_raises, KeyError, [0, 1, 2]),
}
REFUSED_CALLS = [
    pytest.param(bad, error, call, id=f"{name}-call {call}")
    for name, (bad, error, calls) in FIRST_STEP_REFUSALS.items()
    for call in calls
]


@pytest.mark.parametrize("tensors", [False, True], ids=["numpy", "torch"])
@pytest.mark.parametrize("mode", ["next_step", "same_step"])
@pytest.mark.parametrize(("bad", "error", "refused_call"), REFUSED_CALLS)
def test_a_call_refused_before_the_env_steps_leaves_the_runner_as_it_was(
    bad, error, refused_call, mode, tensors
):
    if tensors and bad is not _raises:  # the same outputs, as tensors
        numpy_bad = bad
        bad = lambda obs: tuple(  # noqa: E731
            {k: torch.as_tensor(v) for k, v in part.items()}
            if isinstance(part, dict)
            else torch.as_tensor(part)
            for part in numpy_bad(obs)
        )
    env, policy = cartpole(mode, tensors), Toggled()
    runner = EnvRunner(env, policy, seed=0)
    untouched = EnvRunner(cartpole(mode, tensors), Toggled(), seed=0)
    got, want = [], []
    for call in range(4):
        if call == refused_call:
            policy.bad = bad
            steps = env.steps
            with pytest.raises(error):
                runner.sample(7)
            assert env.steps == steps
            policy.bad = None
        got += _data(runner.sample(7))
        want += _data(untouched.sample(7))
    assert got == want


def test_a_recurrent_state_is_put_back_when_a_call_is_refused_before_the_env_steps():
    class Counter:
        bad = False

        def initial_state(self, n):
            return np.zeros((n, 1))

        def __call__(self, obs, state):
            actions = np.zeros(len(obs), np.int64)
            return (np.int64(0) if self.bad else actions), {"t": state[:, 0].copy()}, state + 1

    policy = Counter()
    runner = EnvRunner(cartpole(), policy, seed=0)
    untouched = EnvRunner(cartpole(), Counter(), seed=0)
    first = _data(runner.sample(4))
    policy.bad = True
    with pytest.raises(ValueError, match="actions changed shape"):
        runner.sample(4)
    policy.bad = False
    assert first + _data(runner.sample(4)) == _data(untouched.sample(4)) + _data(
        untouched.sample(4)
    )


def test_a_refusal_after_the_env_stepped_still_stops_the_runner_and_says_so():
    policy = Scripted(lambda k, obs: (np.zeros(3, np.int64) if k < 3 else np.int64(0), {}))
    runner = EnvRunner(cartpole(), policy, seed=0)
    with pytest.raises(ValueError, match="actions changed shape"):
        runner.sample(5)
    with pytest.raises(RuntimeError, match="failed part-way .*the env had stepped"):
        runner.sample(5)


# ------------------------------------------------------------- 5. a fresh state's shapes
class Recurrent:
    """A recurrent policy whose ``initial_state`` gives ``later(n)`` after its first call."""

    def __init__(self, later: Any):
        self.calls, self.later = 0, later

    def initial_state(self, n):
        self.calls += 1
        return np.zeros((n, 3)) if self.calls == 1 else self.later(n)

    def __call__(self, obs, state):
        return np.zeros(len(obs), np.int64), {}, state + 1


FRESH_STATES = {
    "wider": (lambda n: np.full((n, 4), 7.0), r"leaf shapes \[\(3, 4\)\]"),
    "unit width (was broadcast)": (lambda n: np.full((n, 1), 7.0), r"leaf shapes \[\(3, 1\)\]"),
    "two leaves": (
        lambda n: (np.zeros((n, 3)), np.zeros((n, 3))),
        r"leaf shapes \[\(3, 3\), \(3, 3\)\]",
    ),
}


@pytest.mark.parametrize(("later", "shapes"), FRESH_STATES.values(), ids=FRESH_STATES.keys())
def test_initial_state_of_other_leaves_at_a_reset_is_a_clear_error(later, shapes):
    runner = EnvRunner(cartpole(), Recurrent(later), seed=0)
    with pytest.raises(
        ValueError, match=r"initial_state returned \(at a sub-env's reset\) a state of " + shapes
    ):
        runner.sample(12)  # PushLeft ends sub-env episodes within 12 steps: a reset
