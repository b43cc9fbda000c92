"""Session 15 converter fixes: each test failed before its fix.

- Side by side (a distributed ``GroupSample``): parts whose actions differ in kind (a Discrete
  runner's ints next to a Box runner's floats) were joined into float64; actions or extra
  outputs of other per-step shapes failed with numpy's concatenate error. The general path
  refuses both with a ``ValueError`` naming the field and both envs: now the fast path raises
  that same error, before ``value_fn`` is called.
- What ``value_fn`` returns was not checked (None became a NaN bootstrap, complex numbers
  their real part, strings were parsed, too many values a reshape error), nor were stored
  ``custom_data`` bootstrap values ("2.5" parsed, True taken as 1.0, None or an array a bare
  ``float()`` error): one check on every path (general, runner blocks on the host or on a
  device, side by side) now refuses them naming ``value_fn`` or the chunk and the key.
- ``ColumnKeys(distribution=("logits"))`` (a str: the comma missing) was split into keys
  'l', 'o', ...; ``actor_hidden="hc"`` stored the columns 'h' and 'c'; ``values=None`` gave a
  bare ``AssertionError``. Now a ``TypeError`` names the field.
- In a flat list without ``env_index``, a chunk without steps that ends no listed episode
  became an env of its own with 0 steps, so ``layout="per_env"`` failed; api.md says such
  chunks are left out.
- ``side_by_side``'s module docstring said an ``obs_fn`` sends the sequence down the general
  path; it is applied to each part, on the fast path.
- ``keys``, ``storage``, ``copy`` (and ``value_fn``, ``obs_fn``, ``extra_model_outputs``) of the
  wrong type failed late or not at all (``copy=1`` was taken); now a ``TypeError`` comes before
  anything is read. ``group_by_env`` of a flat list names the item that is not a chunk.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from fractions import Fraction
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.converter import (
    ColumnKeys,
    bootstrap_values,
    episodes_to_batch,
    episodes_to_rollout,
    group_by_env,
)
from episodes.distributed.sample import GroupSample, RunnerSample
from episodes.envs.torch_cartpole import TorchCartPole
from episodes.runner import EnvRunner, SampledChunks

# ------------------------------------------------------------------------------ helpers


class ConstantEnv(gym.Env):  # type: ignore[type-arg]
    """Two float32 observations a step, of a given action space; never ends."""

    def __init__(self, action_space: gym.Space[Any]):
        self.observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
        self.action_space = action_space

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        return np.zeros(2, np.float32), {}

    def step(self, action: Any) -> Any:
        return np.ones(2, np.float32), 1.0, False, False, {}


def runner_sample(
    action_space: gym.Space[Any], seed: int, mean_size: int = 2, steps: int = 3
) -> SampledChunks:
    """One runner's sample (one env): its actions of ``action_space``, a "mean" output."""

    def policy(obs: Any) -> Any:
        n = len(obs)
        actions = np.stack([action_space.sample() for _ in range(n)])
        return actions, {
            "vf_preds": np.zeros(n, np.float32),
            "action_logp": np.zeros(n, np.float32),
            "mean": np.zeros((n, mean_size), np.float32),
        }

    env = gym.vector.SyncVectorEnv([lambda: ConstantEnv(action_space)])
    return EnvRunner(env, policy, seed=seed).sample(steps)


def group(*parts: SampledChunks) -> GroupSample:
    """A distributed round of these runners' samples (what ``RunnerGroup.sample`` returns)."""
    return GroupSample([RunnerSample(r, 0, 0, 0, p.num_envs, p) for r, p in enumerate(parts)])


def copies(chunks: Sequence[SingleAgentEpisode]) -> list[SingleAgentEpisode]:
    """The same chunks, built on their own: the general path."""
    return [SingleAgentEpisode.from_state(c.get_state()) for c in chunks]


class CountingValueFn:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, obs: Any) -> np.ndarray:
        self.calls += 1
        return np.zeros(len(obs))


def error_of(call: Callable[[], Any]) -> tuple[type[BaseException], str]:
    with pytest.raises((ValueError, TypeError)) as info:
        call()
    return info.type, str(info.value)


def steps_chunk(id_: str = "a", *, truncated: bool = False) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[np.zeros(2, np.float32)] * 3,
        actions=[0, 1],
        rewards=[1.0, 1.0],
        truncated=truncated,
        len_lookback_buffer=0,
        extra_model_outputs={"vf_preds": [0.0, 0.0], "action_logp": [0.0, 0.0]},
    )


def zeros(obs: Any) -> np.ndarray:
    return np.zeros(len(obs))


# ------------------------------------------------- 1. side by side: the general path's refusal

# name -> the two runners' samples: each pair the general path refuses
UNLIKE_PARTS: dict[str, Callable[[], tuple[SampledChunks, SampledChunks]]] = {
    "int actions next to float actions": lambda: (
        runner_sample(gym.spaces.Discrete(3), 0),
        runner_sample(gym.spaces.Box(-1, 1, (), np.float32), 1),
    ),
    "actions of 2 vs 3 numbers": lambda: (
        runner_sample(gym.spaces.Box(-1, 1, (2,), np.float32), 0, mean_size=2),
        runner_sample(gym.spaces.Box(-1, 1, (3,), np.float32), 1, mean_size=3),
    ),
    "an extra output of 2 vs 3 numbers": lambda: (
        runner_sample(gym.spaces.Box(-1, 1, (2,), np.float32), 0, mean_size=2),
        runner_sample(gym.spaces.Box(-1, 1, (2,), np.float32), 1, mean_size=3),
    ),
}
KEYS = ColumnKeys(distribution=("mean",))


@pytest.mark.parametrize("case", UNLIKE_PARTS)
def test_side_by_side_refuses_unlike_parts_as_the_general_path(case: str) -> None:
    parts = UNLIKE_PARTS[case]()
    general = error_of(
        lambda: episodes_to_rollout(copies(group(*parts)), gamma=0.9, value_fn=zeros, keys=KEYS)
    )
    value_fn = CountingValueFn()
    fast = error_of(
        lambda: episodes_to_rollout(group(*parts), gamma=0.9, value_fn=value_fn, keys=KEYS)
    )
    assert fast == general
    assert general[0] is ValueError and "env 0 (episode" in general[1]
    assert value_fn.calls == 0  # refused before any value is asked for


def test_side_by_side_still_joins_alike_parts_as_the_general_path() -> None:
    box = gym.spaces.Box(-1, 1, (2,), np.float32)
    parts = (runner_sample(box, 0), runner_sample(box, 1))
    fast = episodes_to_rollout(group(*parts), gamma=0.9, value_fn=zeros, keys=KEYS)
    assert [p.built() for p in parts] == [[], []]  # the fast path: no chunk built
    general = episodes_to_rollout(copies(group(*parts)), gamma=0.9, value_fn=zeros, keys=KEYS)
    for name, tensor in general.storage.tensors.items():
        assert torch.equal(fast.storage.tensors[name], tensor), name


# --------------------------------------------------------- 2. what a value function returns

# name -> what value_fn returns for one observation
BAD_OUTPUTS: dict[str, Callable[[Any], Any]] = {
    "None": lambda obs: None,
    "complex numbers": lambda obs: np.full(len(obs), 2 + 5j),
    "strings": lambda obs: ["2.5"] * len(obs),
    "bools": lambda obs: np.ones(len(obs), bool),
    "a bool tensor": lambda obs: torch.ones(len(obs), dtype=torch.bool),
    "a complex tensor": lambda obs: torch.ones(len(obs), dtype=torch.complex64),
    "one value too many": lambda obs: np.zeros(len(obs) + 1),
    "a ragged list": lambda obs: [[1.0, 2.0], [3.0]],
}
GOOD_OUTPUTS: dict[str, Callable[[Any], Any]] = {
    "float array": lambda obs: np.full(len(obs), 2.0),
    "[B, 1] tensor": lambda obs: torch.full((len(obs), 1), 2.0),
    "int array": lambda obs: np.full(len(obs), 2),
    "list of floats": lambda obs: [2.0] * len(obs),
}


def host_chunks() -> SampledChunks:
    def policy(obs: Any) -> Any:
        n = len(obs)
        return np.zeros(n, np.int64), {"vf_preds": np.zeros(n), "action_logp": np.zeros(n)}

    return EnvRunner(gym.make_vec("CartPole-v1", 1, vectorization_mode="sync"), policy).sample(3)


def device_chunks() -> SampledChunks:
    def policy(obs: Any) -> Any:
        z = torch.zeros(len(obs))
        return z.long(), {"vf_preds": z, "action_logp": z}

    return EnvRunner(TorchCartPole(1, device="cpu"), policy, seed=0).sample(3)


# name -> chunks of one env still running: one value asked for
PATHS: dict[str, Callable[[], Sequence[Any]]] = {
    "general": lambda: [steps_chunk()],
    "host blocks": host_chunks,
    "device blocks": device_chunks,
    "side by side": lambda: group(host_chunks(), host_chunks()),
}


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("output", BAD_OUTPUTS)
def test_value_fn_output_that_is_not_real_numbers_is_refused(path: str, output: str) -> None:
    with pytest.raises(ValueError, match="value_fn returned .*real number"):
        episodes_to_rollout(PATHS[path](), gamma=0.5, value_fn=BAD_OUTPUTS[output])


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("output", GOOD_OUTPUTS)
def test_value_fn_output_of_real_numbers_is_taken(path: str, output: str) -> None:
    rollout = episodes_to_rollout(PATHS[path](), gamma=0.5, value_fn=GOOD_OUTPUTS[output])
    assert rollout.last_values.flatten().tolist() == [2.0] * len(rollout.last_values)


def test_bootstrap_values_checks_value_fn_output() -> None:
    with pytest.raises(ValueError, match="value_fn returned None"):
        bootstrap_values([steps_chunk()], value_fn=lambda obs: None, keys=ColumnKeys())


BAD_STORED: dict[str, Any] = {
    "a numeric string": "2.5",
    "True": True,
    "numpy True": np.True_,
    "None": None,
    "complex": 1 + 2j,
    "two values": np.ones(2),
    "a list": [1.0, 2.0],
}
GOOD_STORED: dict[str, Any] = {
    "int": 2,
    "float": 2.0,
    "numpy float32": np.float32(2.0),
    "0-d array": np.array(2.0),
    "Fraction": Fraction(2),
    "1-element tensor": torch.tensor([2.0]),
}


@pytest.mark.parametrize("value", BAD_STORED)
def test_stored_bootstrap_value_that_is_not_a_real_number_is_refused(value: str) -> None:
    chunk = steps_chunk("ep-1", truncated=True)
    chunk.custom_data["bootstrap_value"] = BAD_STORED[value]
    with pytest.raises(ValueError) as info:
        episodes_to_rollout([chunk], gamma=0.5)
    message = str(info.value)
    assert "'ep-1'" in message and "custom_data['bootstrap_value']" in message


@pytest.mark.parametrize("value", GOOD_STORED)
def test_stored_bootstrap_value_of_a_real_number_is_taken(value: str) -> None:
    chunk = steps_chunk("ep-1", truncated=True)
    chunk.custom_data["bootstrap_value"] = GOOD_STORED[value]
    rollout = episodes_to_rollout([chunk], gamma=0.5)
    assert rollout.storage.rewards[-1, 0, 0].item() == 2.0  # 1 + 0.5 * 2


@pytest.mark.parametrize("value", ["2.5", True, None])
def test_stored_bootstrap_value_is_refused_on_the_fast_path_too(value: Any) -> None:
    chunks = host_chunks()
    chunks[0].custom_data["bootstrap_value"] = value  # the one env still runs: it needs one
    with pytest.raises(ValueError, match="custom_data\\['bootstrap_value'\\]"):
        episodes_to_rollout(chunks, gamma=0.5)


# ---------------------------------------------------------------------------- 3. ColumnKeys

# name -> (ColumnKeys arguments, what the message holds)
BAD_KEYS: dict[str, tuple[dict[str, Any], str]] = {
    "distribution=('logits') (a str)": ({"distribution": ("logits")}, "('logits',)"),
    "actor_hidden='hc'": ({"actor_hidden": "hc"}, "ColumnKeys.actor_hidden"),
    "critic_hidden='h'": ({"critic_hidden": "h"}, "trailing comma"),
    "distribution holding an int": ({"distribution": ("mean", 1)}, "ColumnKeys.distribution"),
    "distribution=None": ({"distribution": None}, "ColumnKeys.distribution"),
    "values=None": ({"values": None}, "ColumnKeys.values must be a str"),
    "log_probs=1": ({"log_probs": 1}, "ColumnKeys.log_probs"),
    "bootstrap_value=None": ({"bootstrap_value": None}, "ColumnKeys.bootstrap_value"),
    "privileged_actions=('a',)": ({"privileged_actions": ("a",)}, "(or None)"),
}


@pytest.mark.parametrize("case", BAD_KEYS)
def test_column_keys_of_the_wrong_type_are_refused(case: str) -> None:
    arguments, names = BAD_KEYS[case]
    with pytest.raises(TypeError) as info:
        ColumnKeys(**arguments)
    assert names in str(info.value)


def test_column_keys_take_lists_as_tuples_and_stay_hashable() -> None:
    keys = ColumnKeys(distribution=["mean", "std"], actor_hidden=["h"], privileged_actions=None)
    assert keys.distribution == ("mean", "std") and keys.actor_hidden == ("h",)
    assert hash(keys) == hash(ColumnKeys(distribution=("mean", "std"), actor_hidden=("h",)))


# ------------------------------------------------------- 4. stepless chunks of a flat list


def test_stepless_chunks_ending_no_listed_episode_are_left_out_per_env() -> None:
    a, b = steps_chunk("A"), steps_chunk("B")
    elsewhere = SingleAgentEpisode(
        "C", observations=[np.zeros(2, np.float32)], t_started=7, terminated=True,
        len_lookback_buffer=0,
    )  # fmt: skip
    for stepless in (a.cut(), elsewhere):
        rollout = episodes_to_rollout([a, b, stepless], gamma=0.9, value_fn=zeros)
        assert tuple(rollout.storage.rewards.shape[:2]) == (2, 2)
        assert [[c.id_ for c in g] for g in rollout.groups] == [["A"], ["B"]]
    # group_by_env still gives every chunk its env (documented); envs the caller names stay.
    assert [len(g) for g in group_by_env([a, b, elsewhere])] == [1, 1, 1]
    with pytest.raises(ValueError, match="non-zero number of steps"):
        episodes_to_rollout([[a], [b], [elsewhere]], gamma=0.9, value_fn=zeros)


# ------------------------------------------------- 5. side_by_side's docstring and obs_fn


def test_side_by_side_docstring_says_obs_fn_stays_on_the_fast_path() -> None:
    from episodes.converter import side_by_side

    doc = " ".join(str(side_by_side.__doc__).split())
    assert "applied to each part's columns" in doc
    assert "an ``obs_fn`` (which may look at the whole batch) send" not in doc
    parts = (host_chunks(), host_chunks())
    episodes_to_rollout(group(*parts), gamma=0.9, value_fn=zeros, obs_fn=lambda o: o * 2.0)
    assert [p.built() for p in parts] == [[], []]  # as it says: no chunk built


# ---------------------------------------------------------------- 6. arguments, up front


class Untouchable(Sequence[SingleAgentEpisode]):
    """Chunks that may not be read: a refusal must come first."""

    def __len__(self) -> int:
        raise AssertionError("read")

    def __getitem__(self, index: Any) -> Any:
        raise AssertionError("read")

    def __iter__(self) -> Iterator[SingleAgentEpisode]:
        raise AssertionError("read")


# name -> (keyword arguments, what the TypeError holds)
BAD_ROLLOUT_ARGUMENTS: dict[str, tuple[dict[str, Any], str]] = {
    "keys as a dict": ({"keys": {"values": "v"}}, "keys must be a ColumnKeys (or None), got dict"),
    "storage as a dict": ({"storage": {}}, "storage must be a RolloutStorage (or None)"),
    "copy=1": ({"copy": 1}, "copy must be a bool, got int (1)"),
    "copy='no'": ({"copy": "no"}, "copy must be a bool, got str"),
    "copy=None": ({"copy": None}, "copy must be a bool"),
    "value_fn an array": ({"value_fn": np.zeros(2)}, "value_fn must be a function"),
    "obs_fn an int": ({"obs_fn": 3}, "obs_fn must be a function"),
}


@pytest.mark.parametrize("case", BAD_ROLLOUT_ARGUMENTS)
def test_rollout_arguments_of_the_wrong_type_are_refused_before_any_work(case: str) -> None:
    arguments, message = BAD_ROLLOUT_ARGUMENTS[case]
    with pytest.raises(TypeError, match=message.replace("(", "\\(").replace(")", "\\)")):
        episodes_to_rollout(Untouchable(), gamma=0.9, **arguments)


def test_a_refused_copy_leaves_a_given_storage_as_it_was() -> None:
    storage = episodes_to_rollout([steps_chunk()], gamma=0.9, value_fn=zeros).storage
    before = {name: tensor.clone() for name, tensor in storage.tensors.items()}
    other = steps_chunk()
    other.set_rewards(new_data=np.array([5.0, 5.0]))
    with pytest.raises(TypeError, match="copy must be a bool"):
        episodes_to_rollout([other], gamma=0.9, value_fn=zeros, storage=storage, copy=0)
    assert all(torch.equal(storage.tensors[name], t) for name, t in before.items())


def test_numpy_bools_are_flags() -> None:
    rollout = episodes_to_rollout([steps_chunk()], gamma=0.9, value_fn=zeros, copy=np.True_)
    assert rollout.storage.step == 2
    assert len(episodes_to_batch([steps_chunk()], extra_model_outputs=np.False_)) == 10


BAD_BATCH_ARGUMENTS: dict[str, tuple[dict[str, Any], str]] = {
    "keys as a dict": ({"keys": {"values": "v"}}, "keys must be a ColumnKeys"),
    "extra_model_outputs=1": ({"extra_model_outputs": 1}, "extra_model_outputs must be a bool"),
    "obs_fn a str": ({"obs_fn": "flatten"}, "obs_fn must be a function"),
}


@pytest.mark.parametrize("case", BAD_BATCH_ARGUMENTS)
def test_batch_arguments_of_the_wrong_type_are_refused_before_any_work(case: str) -> None:
    arguments, message = BAD_BATCH_ARGUMENTS[case]
    with pytest.raises(TypeError, match=message):
        episodes_to_batch(Untouchable(), **arguments)


@pytest.mark.parametrize(
    ("episodes", "names"),
    [([steps_chunk(), 5], "item 1 has type int"), (["x"], "item 0 has type str")],
    ids=["an int after a chunk", "a str"],
)
def test_group_by_env_of_a_flat_list_names_the_item(episodes: list[Any], names: str) -> None:
    with pytest.raises(TypeError, match=names):
        group_by_env(episodes)
