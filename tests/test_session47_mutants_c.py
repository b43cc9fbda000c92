"""Behaviour that hand-made mutants of ``episodes.runner.device_recorder``,
``episodes.runner.device_blocks``, ``episodes.runner.device_values`` and
``episodes.runner.host_values`` showed no test pinned (session 47, third batch).

Each test fails with a mutant (named beside it) applied, and passes on the code as it is. The
torch-tensor recording path is driven through ``EnvRunner.sample`` on CPU torch envs (a numpy
vector env seen through torch, ``tests.runner._tensor_env``), and compared with a runner on
the numpy env itself, same scripts, seeds and policy; the blocks through their module's public
classes, compared with plain references.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes.runner import EnvRunner
from episodes.runner.device_blocks import DeviceBlocks, TensorColumn
from tests.runner._random_env import EnvSpec, Policy
from tests.runner._random_env import make_vec as random_vec
from tests.runner._runner_env import action_policy
from tests.runner._runner_env import make_vec as scripted_vec
from tests.runner._tensor_env import TensorPolicy, TensorVectorEnv
from tests.runner.test_batched_equals_per_step import assert_same_chunks


def _numpy_and_torch_runners(scripts: list[Any], mode: str, **kwargs: Any) -> tuple[Any, Any]:
    host = EnvRunner(scripted_vec(scripts, mode), action_policy, seed=0, **kwargs)
    device = EnvRunner(
        TensorVectorEnv(scripted_vec(scripts, mode)), TensorPolicy(action_policy), seed=0, **kwargs
    )
    return host, device


def _assert_same_calls(host: Any, device: Any, sizes: list[int]) -> None:
    ids: dict[str, str] = {}
    for size in sizes:
        expected, got = host.sample(size), device.sample(size)
        assert got.recording.device is not None  # recorded in torch blocks
        assert_same_chunks(expected, got, ids)


# ------------------------------------------------------------------ device_recorder


# (name, scripts, mode, sizes, lookback)
RECORDING_CASES = [
    # A sub-env that carries reset steps into a call in which it is the slowest: the call may
    # end only once its carried transitions, not rows, and the new ones make up num_steps.
    # mutants: begin counts carried rows without `& ~self._carried_dead[:carried]`, or
    # `_keep_rows` carries no reset steps (`np.zeros_like` of the dead rows)
    (
        "carried reset steps of the slowest sub-env",
        [
            [(2, "term"), (1, "term"), (9, "trunc")],
            [(5, "trunc"), (1, "trunc"), (2, "term")],
            [(1, "term"), (9, "term"), (3, "trunc"), (2, "trunc")],
        ],
        "NextStep",
        [1, 3, 6],
        1,
    ),
    # A call's first look at the device starts from what its sub-envs carried in, not from
    # the count of the call before.
    # mutant: begin keeps the last call's count (no `self._have_device = None`)
    (
        "a later call counts from its own carried rows",
        [[(1, "trunc")], [(9, "trunc"), (2, "term")]],
        "NextStep",
        [1, 5, 6, 2],
        1,
    ),
]


@pytest.mark.timeout(60)  # a mutant's miscount can keep a call stepping for ever
@pytest.mark.parametrize(
    ("scripts", "mode", "sizes", "lookback"),
    [case[1:] for case in RECORDING_CASES],
    ids=[case[0] for case in RECORDING_CASES],
)
def test_a_torch_env_records_what_the_numpy_env_records(scripts, mode, sizes, lookback):
    host, device = _numpy_and_torch_runners(scripts, mode, len_lookback_buffer=lookback)
    _assert_same_calls(host, device, sizes)


# mutant: the look at the device ends a call only once `self._least > self.num_steps`
@pytest.mark.timeout(60)  # a mutant's miscount can keep a call stepping for ever
@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_a_call_steps_the_torch_env_no_more_than_its_transitions_need(mode):
    """Without endings, ``sample(n)`` is ``n`` vector steps: one more would be recorded by
    no call until later, and stepped by the env for nothing."""
    env = TensorVectorEnv(scripted_vec([[(100, "trunc")]] * 2, mode))
    runner = EnvRunner(env, TensorPolicy(action_policy), seed=0)
    for size in (5, 3):
        runner.sample(size)
    assert [len(sub_env.actions) for sub_env in env.env.envs] == [8, 8]


# (name, spec, num_envs, mode, seed, lookback, sizes): random envs with sparse infos.
RANDOM_CASES = [
    # A row's infos are read by the call that recorded it and by no later one, whose rows are
    # numbered anew (a row without infos there has none).
    # mutant: finish reads the pending infos with `.get` instead of `.pop`
    (
        "infos of a row go with it (next-step)",
        ("box", "discrete", 0.3, 0.0, 0.6),
        2,
        "NextStep",
        483,
        2,
        [7, 2, 1],
    ),
    (
        "infos of a row go with it (same-step)",
        ("box", "box", 0.3, 0.0, 0.6),
        2,
        "SameStep",
        738,
        0,
        [1, 3, 1, 1],
    ),
]


@pytest.mark.timeout(60)  # a mutant's miscount can keep a call stepping for ever
@pytest.mark.parametrize(
    ("spec", "num_envs", "mode", "seed", "lookback", "sizes"),
    [case[1:] for case in RANDOM_CASES],
    ids=[case[0] for case in RANDOM_CASES],
)
def test_a_torch_random_env_records_what_the_numpy_env_records(
    spec, num_envs, mode, seed, lookback, sizes
):
    made = []
    for on_torch in (False, True):
        env = random_vec(EnvSpec(*spec), num_envs, mode)
        policy = Policy(env.single_action_space, recurrent=False)
        if on_torch:
            env, policy = TensorVectorEnv(env), TensorPolicy(policy)
        made.append(EnvRunner(env, policy, seed=seed, len_lookback_buffer=lookback))
    _assert_same_calls(*made, sizes)


# ------------------------------------------------------------------ device_blocks


class _ListRewards(TensorVectorEnv):
    """Scripted sub-envs whose rewards come as a list of Python floats (tenths)."""

    def step(self, actions: Any) -> Any:
        obs, rewards, terminated, truncated, infos = super().step(actions)
        return obs, [float(r) / 10 for r in rewards.tolist()], terminated, truncated, infos


# mutant: `torch.as_tensor(rewards, ...)` for `torch.as_tensor(as_host_typed(rewards), ...)`
# (Python floats made torch's default float32, rounded)
@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_a_list_of_python_float_rewards_is_recorded_as_the_floats_themselves(mode):
    env = _ListRewards(scripted_vec([[(2, "term")], [(3, "trunc")]], mode))
    chunks = EnvRunner(env, TensorPolicy(action_policy), seed=0).sample(4)
    for chunk in chunks:
        k = chunk.get_observations()[1:, 1].astype(int)  # [env, episode, t] after each step
        t = chunk.get_observations()[1:, 2].astype(int)
        expected = [float(10 * k_ + t_) / 10 for k_, t_ in zip(k, t)]  # reward_of(k, t) / 10
        assert chunk.get_rewards().tolist() == expected


class _BigEndianSteps(TensorVectorEnv):
    """Scripted sub-envs whose step observations come as big-endian numpy arrays."""

    def __init__(self, env: Any, dtype: str):
        super().__init__(env)
        self.dtype = dtype

    def step(self, actions: Any) -> Any:
        obs, rewards, terminated, truncated, infos = super().step(actions)
        return obs.numpy().astype(self.dtype), rewards, terminated, truncated, infos


# mutant: `tensor_dtype` reads a numpy batch's own dtype (`>f4`), not its native one
@pytest.mark.parametrize("dtype", [">f4", ">f8", ">i8"])
def test_big_endian_numpy_observations_of_a_torch_env_are_recorded_by_value(dtype):
    host, _ = _numpy_and_torch_runners([[(2, "term")], [(3, "trunc")]], "NextStep")
    env = _BigEndianSteps(scripted_vec([[(2, "term")], [(3, "trunc")]], "NextStep"), dtype)
    device = EnvRunner(env, TensorPolicy(action_policy), seed=0)
    for size in (3, 4):
        for want, got in zip(host.sample(size), device.sample(size), strict=True):
            assert got.get_observations().dtype.isnative
            assert got.get_observations().tolist() == want.get_observations().tolist()


class _FloatFlags(TensorVectorEnv):
    """Scripted sub-envs whose ``terminated``/``truncated`` come as float tensors of 0 and 1."""

    def step(self, actions: Any) -> Any:
        obs, rewards, terminated, truncated, infos = super().step(actions)
        return obs, rewards, terminated.float(), truncated.float(), infos


# mutant: the flags are moved to the device without `dtype=torch.bool`
@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_float_flags_of_a_torch_env_are_read_as_bools(mode):
    scripts = [[(2, "term")], [(3, "trunc")]]
    host, _ = _numpy_and_torch_runners(scripts, mode)
    device = EnvRunner(
        _FloatFlags(scripted_vec(scripts, mode)), TensorPolicy(action_policy), seed=0
    )
    _assert_same_calls(host, device, [3, 4])


class _IntObsFloatFinals(TensorVectorEnv):
    """Scripted sub-envs whose observations are int32 tensors, same-step finals float32."""

    def reset(self, **kwargs: Any) -> Any:
        obs, infos = super().reset(**kwargs)
        return obs.to(torch.int32), infos

    def step(self, actions: Any) -> Any:
        obs, rewards, terminated, truncated, infos = super().step(actions)
        if "final_obs" in infos:
            infos["final_obs"] = infos["final_obs"].to(torch.float32)
        return obs.to(torch.int32), rewards, terminated, truncated, infos


# mutant: `match_finals` does nothing (`if False:` for the dtype comparison; otherwise pinned
# only by the module's doctest)
def test_float_finals_of_int_observations_give_every_chunk_one_dtype():
    """The float finals widen the int observations, as on the host: an episode's chunks keep
    one dtype, whichever of them holds the final observation."""
    env = _IntObsFloatFinals(scripted_vec([[(2, "term")], [(3, "trunc")]], "SameStep"))
    policy = TensorPolicy(lambda obs: action_policy(np.asarray(obs, np.float32)))
    runner = EnvRunner(env, policy, seed=0, len_lookback_buffer=1)
    chunks = [chunk for size in (3, 4, 3) for chunk in runner.sample(size)]
    assert {chunk.get_observations().dtype for chunk in chunks} == {np.dtype(np.float64)}
    for chunk in chunks:  # [env, episode, t] rows, as the scripted env makes them
        obs = chunk.get_observations()
        assert (obs[:, 0] == chunk.custom_data["env_index"]).all()
        assert np.array_equal(np.diff(obs[:, 2]), np.ones(len(obs) - 1))


# mutant: `_device_of` gives None (torch's default device) for a numpy leaf
@pytest.mark.parametrize(
    "make",
    [
        lambda: DeviceBlocks.allocate(np.zeros((3, 2), np.float32), rows=2, with_finals=True),
        lambda: TensorColumn.for_batch({"a": np.zeros(3), "b": np.ones((3, 2), np.int8)}, rows=4),
    ],
    ids=["blocks", "column"],
)
def test_numpy_batches_make_blocks_on_the_host_under_another_default_device(make):
    """``meta`` stands in for a GPU made torch's default device by a training script."""
    with torch.device("meta"):
        made = make()
    leaves = made.obs.leaves + made.finals.leaves if isinstance(made, DeviceBlocks) else made.leaves
    assert {leaf.device.type for leaf in leaves} == {"cpu"}


# mutants: `ensure_outputs` remakes the actions column (`if True:` for `if self.actions is
# None:`), or every extra-output column (`if True:` for `if key not in self.extras:`)
def test_an_extra_output_added_later_keeps_the_rows_written_before():
    blocks = DeviceBlocks.allocate(torch.zeros(2, 3), rows=3)
    first = (torch.tensor([7, 9]), {"vf": torch.tensor([0.25, -1.5])})
    second = (torch.tensor([3, 4]), {"vf": torch.tensor([2.0, 8.0]), "logp": torch.ones(2)})
    blocks.put_outputs(0, *first)
    blocks.put_outputs(1, *second)
    assert blocks.actions.leaves[0][:2].tolist() == [[7, 9], [3, 4]]
    assert blocks.extras["vf"].leaves[0][:2].tolist() == [[0.25, -1.5], [2.0, 8.0]]
    assert blocks.extras["logp"].leaves[0][1].tolist() == [1.0, 1.0]


# ------------------------------------------------------------------ host_values


def _masked_rows(container: Any) -> list[Any]:
    """Two sub-envs' rows of one value each, the first masked, inside ``container``."""
    return [container([np.ma.masked_array(0.5, mask=True)]), container([np.ma.masked_array(0.7)])]


# mutants: the classes `_may_hold_masked` looks into cut to `(np.ma.MaskedArray,)` (a list of
# lists or tuples is not looked into); `_may_hold_masked` passes over such an item class (no
# `return True`)
@pytest.mark.filterwarnings("ignore:Warning. converting a masked element to nan")  # shape read
@pytest.mark.parametrize(
    "container",
    [list, tuple, lambda row: row[0]],
    ids=["list of lists", "list of tuples", "list of masked arrays"],
)
def test_masked_entries_nested_in_a_list_output_are_refused_on_a_numpy_env(container):
    env = scripted_vec([[(3, "term")], [(3, "term")]], "NextStep")

    def policy(obs: Any) -> Any:
        return np.zeros(len(obs), np.int64), {"vf": _masked_rows(container)}

    with pytest.raises(ValueError, match="the policy's extra output 'vf': a numpy masked array"):
        EnvRunner(env, policy, seed=0).sample(2)
    assert all(sub_env.actions == [] for sub_env in env.envs)  # refused before the env stepped


class _ActionLog(gym.Env):  # type: ignore[type-arg]
    """Logs the class of every action leaf it is handed; episodes never end."""

    def __init__(self, action_space: gym.Space[Any]):
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = action_space
        self.seen: list[str] = []

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> Any:
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action: Any) -> Any:
        leaves = action.values() if isinstance(action, dict) else action
        leaves = leaves if isinstance(action, (dict, tuple)) else [action]
        self.seen += [type(leaf).__module__.split(".")[0] for leaf in leaves]
        return np.zeros(2, np.float32), 0.0, False, False, {}


# (name, action space, the policy's actions for 2 sub-envs): some leaves torch tensors.
# mutants: `_holds_tensor` with `all` for `any` (a dict, a tuple), or `False` for a list
TORCH_ACTIONS = [
    (
        "dict, one leaf a tensor",
        gym.spaces.Dict({"a": gym.spaces.Discrete(3), "b": gym.spaces.Discrete(3)}),
        lambda: {"a": np.array([0, 1]), "b": torch.tensor([2, 1])},
    ),
    (
        "tuple, one leaf a tensor",
        gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Discrete(3))),
        lambda: (np.array([0, 1]), torch.tensor([2, 1])),
    ),
    ("list of tensors", gym.spaces.Discrete(3), lambda: [torch.tensor(2), torch.tensor(1)]),
]


@pytest.mark.parametrize(
    ("space", "actions"),
    [case[1:] for case in TORCH_ACTIONS],
    ids=[case[0] for case in TORCH_ACTIONS],
)
def test_a_numpy_env_is_handed_host_arrays_for_actions_holding_a_tensor(space, actions):
    env = gym.vector.SyncVectorEnv([lambda: _ActionLog(space)] * 2)
    EnvRunner(env, lambda obs: (actions(), {}), seed=0).sample(2)
    seen = {kind for sub_env in env.envs for kind in sub_env.seen}
    assert seen == {"numpy"}
