"""Session 53: behaviour that hand-made mutants of session 52's modules showed unpinned.

Each test fails on at least one such mutant and passes on the real code:

- reset options: read-only mappings refused as no dict, the dicts given copied;
- recorder choice: only all-tensor observations go to the device recorder, which counts
  ``window="vector_steps"`` as the host one does;
- quick rows: which columns skip the general reading, and float32 rewards without a warning;
- first agents: a bad record refused whole (the table unchanged), episodes without metadata;
- refused weights: what a refusal says, what it leaves pending, one raise per round (Ray's
  exceptions stood in for, so these run in a moment; the package still needs Ray to import).
"""

from __future__ import annotations

import types
import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from episodes.replay.metadata import EpisodeMeta
from episodes.replay.quick_rows import quick_rows, rewards_as_float32
from episodes.replay.saved_agents import load_first_agents, saved_first_agents
from episodes.replay.table import EpisodeTable
from episodes.runner import EnvRunner, RandomPolicy
from episodes.runner.reset_options import check_options, check_reset_options


# ----------------------------------------------------------------------------- reset options
class _LevelEnv(gym.Env):
    """Two-step episodes; logs the options of every reset it gets."""

    observation_space = spaces.Box(-100, 100, (1,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, log: list):
        self.log = log

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.log.append(None if options is None else dict(options))
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.full(1, self.t, np.float32), 1.0, self.t >= 2, False, {}


def _runner(**kwargs: Any) -> tuple[EnvRunner, list]:
    log: list = []
    env = gym.vector.SyncVectorEnv([lambda: _LevelEnv(log)], autoreset_mode=AutoresetMode.DISABLED)
    return EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0, **kwargs), log


MAPPINGS = [
    ("full_reset", lambda m: check_options(m), "options must be None or a dict of reset"),
    (
        "reset_options",
        lambda m: check_reset_options(m, AutoresetMode.DISABLED),
        r"reset_options must be None, a dict of reset options or a callable",
    ),
]


@pytest.mark.parametrize(
    ("check", "match"), [c[1:] for c in MAPPINGS], ids=[c[0] for c in MAPPINGS]
)
def test_a_read_only_mapping_is_refused_as_no_dict(check, match):
    with pytest.raises(TypeError, match=match):
        check(types.MappingProxyType({"level": 3}))


def test_options_given_are_copied_so_later_changes_to_the_dict_do_not_reach_the_env():
    given = {"level": 3}
    assert check_options(given) == given and check_options(given) is not given
    runner, log = _runner(reset_options=given)
    runner.reset(options=given)
    given["level"] = 99  # after the runner took it
    runner.sample(3)  # the full reset, then one reset of the ended sub-env
    assert log == [{"level": 3}, {"level": 3}]


# --------------------------------------------------------------------------- recorder choice
LEAVES = [
    ("all_tensors", ("t", "t"), True),
    ("tensor_then_array", ("t", "a"), False),
    ("array_then_tensor", ("a", "t"), False),
    ("all_arrays", ("a", "a"), False),
    ("one_tensor", ("t",), True),
]


@pytest.mark.parametrize(("kinds", "expect"), [c[1:] for c in LEAVES], ids=[c[0] for c in LEAVES])
def test_only_observations_of_tensors_alone_are_recorded_on_the_device(kinds, expect):
    torch = pytest.importorskip("torch")
    from episodes.runner.recorder_choice import holds_tensors

    leaf = {"t": lambda: torch.zeros(2), "a": lambda: np.zeros(2)}
    batch = {f"k{i}": leaf[kind]() for i, kind in enumerate(kinds)}
    assert holds_tensors(batch) is expect
    assert holds_tensors(tuple(batch.values())) is expect


def _windows(runner: EnvRunner, calls: int, num_steps: int) -> list:
    return [
        [
            (c.custom_data["env_index"], c.t_started, len(c), c.is_done)
            for c in runner.sample(num_steps)
        ]
        for _ in range(calls)
    ]


def test_the_device_recorder_counts_vector_steps_as_the_host_one_does():
    pytest.importorskip("torch")
    from tests.runner._tensor_env import TensorPolicy, TensorVectorEnv

    def make():
        return gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")  # next-step mode

    def left(obs):
        return np.zeros(len(obs), np.int64), {}

    kwargs = {"seed": 0, "window": "vector_steps"}
    host = EnvRunner(make(), left, **kwargs)
    device = EnvRunner(TensorVectorEnv(make()), TensorPolicy(left), **kwargs)
    expect = _windows(host, 4, 5)  # episodes of ~9 steps: resets inside the windows
    assert any(done for window in expect for *_, done in window)
    assert _windows(device, 4, 5) == expect


# ------------------------------------------------------------------------------ quick rows
BOX = gym.spaces.Box(-1, 1, (2,))
TAKEN = [
    ("float_box", np.zeros((3, 2), np.float32), BOX),
    ("bool_none", np.zeros(3, bool), None),
    ("int_discrete", np.zeros(3, np.int64), gym.spaces.Discrete(2)),
    ("uint_multidiscrete", np.zeros((3, 2), np.uint8), gym.spaces.MultiDiscrete([2, 2])),
    ("int_multibinary", np.zeros((3, 2), np.int8), gym.spaces.MultiBinary(2)),
    ("complex_none", np.zeros(3, np.complex64), None),
]
LEFT = [  # read the general way, which refuses or rebuilds them
    ("masked", np.ma.masked_array(np.zeros((3, 2)), mask=False), None),
    ("record", np.zeros(3, [("a", "f4")]), None),
    ("object", np.zeros(3, object), None),
    ("str", np.array(["a", "b", "c"]), None),
    ("bytes", np.array([b"a", b"b", b"c"]), None),
    ("datetime", np.zeros(3, "M8[s]"), None),
    ("timedelta", np.zeros(3, "m8[s]"), None),
    ("zero_dim", np.array(1.0), None),
    ("more_rows", np.zeros((4, 2)), None),
    ("fewer_rows", np.zeros((2, 2)), None),
    ("list", [[0.0, 0.0]] * 3, None),
    ("tuple_space", np.zeros((3, 2)), gym.spaces.Tuple([gym.spaces.Discrete(2)] * 2)),
    ("sequence_space", np.zeros((3, 2)), gym.spaces.Sequence(gym.spaces.Discrete(2))),
    ("box_subclass", np.zeros((3, 2)), type("MyBox", (gym.spaces.Box,), {})(-1, 1, (2,))),
]


@pytest.mark.parametrize(("values", "space"), [c[1:] for c in TAKEN], ids=[c[0] for c in TAKEN])
def test_plain_numeric_rows_are_taken_as_they_are(values, space):
    assert quick_rows(values, 3, space) is values


@pytest.mark.parametrize(("values", "space"), [c[1:] for c in LEFT], ids=[c[0] for c in LEFT])
def test_anything_else_is_left_to_the_general_reading(values, space):
    assert quick_rows(values, 3, space) is None


REWARDS = [
    ("float64", np.array([1.5, -2.0]), None, [1.5, -2.0]),
    ("float16", np.array([1.5, -2.0], np.float16), None, [1.5, -2.0]),
    ("int", np.array([1, 2]), None, [1.0, 2.0]),
    ("inf_given", np.array([np.inf, 1.0]), None, [np.inf, 1.0]),
    ("overflow", np.array([1e300]), (ValueError, "overflow to inf"), None),
    ("rows_of_two", np.zeros((2, 1)), (ValueError, r"must be scalars, got shape \(1,\)"), None),
    ("complex", np.array([1 + 1j]), (TypeError, "must be real numbers"), None),
]


@pytest.mark.parametrize(
    ("rows", "error", "expect"), [c[1:] for c in REWARDS], ids=[c[0] for c in REWARDS]
)
def test_rewards_as_float32_is_float32_rewards_with_no_warning(rows, error, expect):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's overflow or complex warning is no answer
        if error is not None:
            with pytest.raises(error[0], match=error[1]):
                rewards_as_float32(rows)
            return
        stored = rewards_as_float32(rows)
    assert stored.dtype == np.float32 and stored.tolist() == expect


# ---------------------------------------------------------------------------- first agents
def _table(*metas: EpisodeMeta | None) -> EpisodeTable:
    """Episodes "e0", "e1", ... with ``metas``."""
    table = EpisodeTable()
    for i, meta in enumerate(metas):
        table.open(f"e{i}", t_begin=0, final_obs=np.zeros((1, 1)), final_info={}, meta=meta)
    return table


def _unnamed() -> EpisodeMeta:
    return EpisodeMeta(None, None, None, None, None, None)


BAD_RECORDS = [
    ("tuple_record", (["e0", "red"],), "first_agents is no list"),
    ("tuple_pair", [("e0", "red")], r"first_agents\[0\] is no \[id, agent\] pair"),
    ("three_items", [["e0", "red", "blue"]], r"first_agents\[0\] is no \[id, agent\] pair"),
    ("second_not_stored", [["e0", "red"], ["e9", "red"]], r"^first_agents\[1\] names episode 'e9'"),
    ("second_none", [["e0", "red"], ["e1", None]], r"^first_agents\[1\] gives episode 'e1'"),
]


@pytest.mark.parametrize(
    ("record", "match"), [c[1:] for c in BAD_RECORDS], ids=[c[0] for c in BAD_RECORDS]
)
def test_a_bad_first_agents_record_is_refused_leaving_the_table_unchanged(record, match):
    table = _table(_unnamed(), _unnamed())
    with pytest.raises(ValueError, match=match):
        load_first_agents(table, record)
    assert [meta.later_agent for meta in table.meta[:2]] == [None, None]


def test_first_agents_reach_episodes_stored_without_metadata_and_save_back():
    table = _table(None, _unnamed(), EpisodeMeta(None, "blue", None, None, None, None))
    assert saved_first_agents(table) == {}  # nothing recorded: no later agent anywhere
    record = [["e0", "red"], ["e1", {"__ep_tuple__": ["green", 1]}]]  # as replay.json holds it
    load_first_agents(table, record)
    assert [table.meta[row].first_agent for row in range(3)] == ["red", ("green", 1), "blue"]
    assert saved_first_agents(table) == {"first_agents": record}


# ------------------------------------------------------------------------- refused weights
class _RayErrors:
    """Stand-ins for the ``ray.exceptions`` classes ``read_weights_ack`` tells apart."""

    class RayError(Exception):
        pass

    class RayTaskError(RayError):
        def __init__(self, cause: BaseException):
            super().__init__(f"ray::RunnerActor.set_weights() failed\n{cause!r}")
            self.cause = cause

    class RayActorError(RayError):
        pass

    class TaskCancelledError(RayError):
        pass


class _FakeRay:
    exceptions = _RayErrors


class _Deadline:
    """Raises ``error`` for the acknowledgement (None: it arrives)."""

    def __init__(self, error: BaseException | None):
        self.error, self.got = error, []

    def get(self, ray: Any, ref: Any) -> Any:
        self.got.append(ref)
        if self.error is not None:
            raise self.error
        return None


def _slot(ack: Any = "ack-ref") -> Any:
    from episodes.distributed.slots import Slot

    slot = Slot(index=1, generation=2, handle=None, num_envs=1)
    slot.weights_ack = ack
    return slot


ACKS = [
    ("key_error", KeyError("p_right"), r"raised KeyError: 'p_right'; it keeps the weights"),
    (
        "first_line",
        ValueError("shapes differ\n  at layer 3"),
        r"raised ValueError: shapes differ; it",
    ),
    ("colours", ValueError("\x1b[31mbad\x1b[0m"), r"raised ValueError: bad; it"),
    (
        "interrupt",
        _RayErrors.TaskCancelledError("cancelled"),
        r"raised KeyboardInterrupt \(or was cancelled: TaskCancelledError: cancelled\); it",
    ),
]


@pytest.mark.parametrize(("cause", "match"), [c[1:] for c in ACKS], ids=[c[0] for c in ACKS])
def test_a_refused_acknowledgement_names_the_runner_the_version_and_the_cause(cause, match):
    pytest.importorskip("ray")
    from episodes.distributed.refused_weights import WeightsRefused, read_weights_ack

    slot, err = _slot(), _RayErrors.RayTaskError(cause)
    with pytest.raises(WeightsRefused, match=match) as raised:
        read_weights_ack(_FakeRay, _Deadline(err), slot, 7)
    assert str(raised.value).startswith("runner 1 (generation 2) refused weights version 7: ")
    assert raised.value.__cause__ is err and raised.value.sample is None
    assert slot.weights_ack == "ack-ref"  # left to be pushed again


def test_an_acknowledgement_read_is_cleared_and_other_failures_pass_through():
    pytest.importorskip("ray")
    from episodes.distributed.refused_weights import read_weights_ack

    slot, deadline = _slot(), _Deadline(None)
    read_weights_ack(_FakeRay, deadline, slot, 3)
    assert slot.weights_ack is None and deadline.got == ["ack-ref"]
    read_weights_ack(_FakeRay, deadline, slot, 3)  # nothing pending: not read again
    assert deadline.got == ["ack-ref"]
    for error in (_RayErrors.RayActorError("dead"), TimeoutError("deadline")):
        slot = _slot()
        with pytest.raises(type(error)) as raised:  # a loss the group restarts, not a refusal
            read_weights_ack(_FakeRay, _Deadline(error), slot, 3)
        assert raised.value is error and slot.weights_ack == "ack-ref"


def test_the_round_raises_its_first_refusal_once_with_the_sample():
    pytest.importorskip("ray")
    from episodes.distributed.refused_weights import WeightsRefused, raise_refusal

    first, second = WeightsRefused("runner 0 refused"), WeightsRefused("runner 1 refused")
    refusals = [first, second]
    with pytest.raises(WeightsRefused) as raised:
        raise_refusal(refusals, "sample")
    assert raised.value is first and first.sample == "sample" and refusals == []
    raise_refusal(refusals, "next")  # emptied: the next round raises nothing
    only = [WeightsRefused("runner 1 refused")]
    with pytest.raises(WeightsRefused):
        raise_refusal(only, None)
