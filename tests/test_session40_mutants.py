"""Behaviour that hand-made mutants of four modules showed no test pinned (session 40).

Each test fails with one mutant of ``episodes.rollout.specs``, ``episodes.converter.side_by_side``,
``episodes.buffer.value_fit`` or ``episodes.replay.loaded_shards`` applied, and passes on the
code as it is:

- a storage refuses an unknown training type, ``num_transitions_per_env=0``, a string as a
  shape, an example tensor not ``[num_envs, ...]`` (0-d too) and two leaves of one name; an
  example hidden state keeps its dtype;
- a side-by-side group sample (runner samples gathered by a ``RunnerGroup``, on the host or a
  torch device) is refused with the general path's error when its parts differ in length or
  shape (naming their real dtypes) or hold Tuple observations (``value_fn`` not called); a
  masked window beside an unmasked one keeps both masks; device values torch cannot join
  (uint32 beside int32) convert as the general path converts them;
- a numpy'd column refuses records of other fields, complex values in a real column and
  longer strings, appended or extended (naming the item), and first items ending in NUL; a
  0-d array written into an object column is stored as its value;
- a save whose later shards mix plain episodes and episodes with infos loads each in place.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from episodes.converter import episodes_to_rollout
from episodes.distributed import GroupSample, RunnerSample
from episodes.replay import EpisodeReplayBuffer, loaded_shards, saved_shards
from episodes.rollout import RolloutStorage
from episodes.runner import EnvRunner, SampledChunks
from tests.runner._tensor_env import TensorVectorEnv

# ------------------------------------------------------------------------------ helpers


class _ConstantEnv(gym.Env):  # type: ignore[type-arg]
    """Observations of ``space`` (zeros, then ones), two actions; ends every ``ends`` steps."""

    def __init__(self, space: gym.Space[Any], ends: int = 0):
        self.observation_space = space
        self.action_space = gym.spaces.Discrete(2)
        self.ends, self.t = ends, 0

    def _obs(self, value: float) -> Any:
        space = self.observation_space
        if isinstance(space, gym.spaces.Tuple):
            return tuple(np.full(s.shape, value, s.dtype) for s in space.spaces)
        return np.full(space.shape, value, space.dtype)

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        super().reset(seed=seed)
        self.t = 0
        return self._obs(0.0), {}

    def step(self, action: Any) -> Any:
        self.t += 1
        return self._obs(1.0), 1.0, self.t == self.ends, False, {}


def _policy(obs: Any) -> Any:
    n = len(obs[0]) if isinstance(obs, tuple) else len(obs)
    zeros = np.zeros(n, np.float32)
    return np.zeros(n, np.int64), {"vf_preds": zeros, "action_logp": zeros}


BOX = gym.spaces.Box(-1, 1, (2,), np.float32)


def _sample(seed: int, steps: int, space: gym.Space[Any] = BOX, envs: int = 1) -> SampledChunks:
    env = gym.vector.SyncVectorEnv([lambda: _ConstantEnv(space) for _ in range(envs)])
    return EnvRunner(env, _policy, seed=seed).sample(steps)


def _window_runner(ends: int, on_device: bool, space: gym.Space[Any] = BOX) -> EnvRunner:
    """A runner of ``vector_steps`` windows: reset steps (a mask) where its envs end."""
    env: Any = gym.vector.SyncVectorEnv([lambda: _ConstantEnv(space, ends) for _ in range(2)])
    if on_device:
        env = TensorVectorEnv(env)
    policy = _tensor_policy if on_device else _policy
    return EnvRunner(env, policy, seed=ends, window="vector_steps")


def _tensor_policy(obs: Any) -> Any:
    zeros = torch.zeros(len(obs))
    return torch.zeros(len(obs), dtype=torch.int64), {"vf_preds": zeros, "action_logp": zeros}


def _group(*parts: SampledChunks) -> GroupSample:
    """What ``RunnerGroup.sample`` returns for these runners' samples: the fast path's input."""
    return GroupSample([RunnerSample(r, 0, 0, 0, p.num_envs, p) for r, p in enumerate(parts)])


def _general(group: GroupSample) -> list[SingleAgentEpisode]:
    """The same chunks, built on their own: the general path."""
    return [SingleAgentEpisode.from_state(c.get_state()) for c in group]


class _CountingValueFn:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, obs: Any) -> np.ndarray:
        self.calls += 1
        return np.zeros(len(obs))


def _error(call: Callable[[], Any]) -> tuple[type[BaseException], str]:
    with pytest.raises((ValueError, TypeError)) as info:
        call()
    return info.type, str(info.value)


# ------------------------------------------------------------ 1. a storage's sizes and specs


def _example(envs: int) -> torch.Tensor:
    return torch.zeros(envs, 5)


# name -> (RolloutStorage arguments, error type, words of the message)
BAD_STORAGES: dict[str, tuple[tuple[Any, ...], type[Exception], str]] = {
    "no transitions per env": (("rl", 2, 0, 3, 1), ValueError, "num_transitions_per_env"),
    "no envs": (("rl", 0, 4, 3, 1), ValueError, "num_envs"),
    "an unknown training type": (("ppo", 2, 4, 3, 1), ValueError, "training_type"),
    "an empty string as the observation shape": (("rl", 2, 4, "", 1), TypeError, "observations"),
    "an empty string as the actions shape": (("rl", 2, 4, 3, ""), TypeError, "actions_shape"),
    "an example of 3 envs for 2": (("rl", 2, 4, _example(3), 1), ValueError, "num_envs=2"),
    "a 0-d example": (("rl", 2, 4, torch.tensor(1.0), 1), ValueError, "num_envs=2"),
    "a nested 0-d example": (("rl", 2, 4, {"a": torch.tensor(1)}, 1), ValueError, "num_envs=2"),
    "a key with a slash naming a nested leaf": (
        ("rl", 2, 4, {"a/b": 3, "a": {"b": 2}}, 1),
        ValueError,
        "'observations/a/b'",
    ),
    "empty bytes as a nested observation shape": (
        ("distillation", 2, 4, {"a": b""}, 1),
        TypeError,
        "observations['a']",
    ),
}


@pytest.mark.parametrize("case", BAD_STORAGES)
def test_bad_storage_sizes_and_shapes_are_refused_naming_the_argument(case: str) -> None:
    args, error, words = BAD_STORAGES[case]
    with pytest.raises(error) as info:
        RolloutStorage(*args)
    assert words in str(info.value)


def test_an_empty_sequence_is_still_a_scalar_shape() -> None:
    # What a string must not pass as: an empty tuple is the shape of a scalar.
    storage = RolloutStorage("rl", 2, 4, (), 1)
    assert storage.observations.shape == (4, 2)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16], ids=str)
def test_an_example_hidden_state_keeps_its_dtype(dtype: torch.dtype) -> None:
    # A tensor spec gives its own dtype (parse_hidden); a shape takes the storage's.
    storage = RolloutStorage(
        "rl", 2, 4, 3, 1,
        actor_hidden_state=(torch.zeros(1, 2, 8, dtype=dtype), torch.zeros(1, 2, 8)),
        critic_hidden_state=(1, 8),
    )  # fmt: skip
    actor, critic = storage.saved_hidden_states_actor, storage.saved_hidden_states_critic
    assert [(h.dtype, tuple(h.shape)) for h in actor] == [
        (dtype, (4, 1, 2, 8)),
        (torch.float32, (4, 1, 2, 8)),
    ]
    assert [(h.dtype, tuple(h.shape)) for h in critic] == [(torch.float32, (4, 1, 2, 8))]


# --------------------------------------------------------- 2. side by side: the general path


@pytest.mark.parametrize("on_device", [False, True], ids=["host", "device"])
def test_parts_of_other_lengths_are_refused_as_the_general_path_refuses_them(on_device) -> None:
    def parts() -> GroupSample:
        if on_device:
            return _group(_window_runner(0, True).sample(3), _window_runner(0, True).sample(4))
        return _group(_sample(0, 3, envs=2), _sample(1, 4))

    general = _error(
        lambda: episodes_to_rollout(_general(parts()), gamma=0.9, value_fn=_zeros_like)
    )
    fast = _error(lambda: episodes_to_rollout(parts(), gamma=0.9, value_fn=_zeros_like))
    assert fast == general
    assert general[0] is ValueError and "same, non-zero number of steps" in general[1]


def test_device_parts_of_other_shapes_are_refused_naming_their_dtypes() -> None:
    def parts() -> GroupSample:
        spaces = [gym.spaces.Box(-1, 1, (k,), np.float64) for k in (2, 3)]
        return _group(*(_window_runner(0, True, space).sample(3) for space in spaces))

    assert parts().side_by_side()[0].recording.device is not None  # recorded on a device
    general = _error(
        lambda: episodes_to_rollout(_general(parts()), gamma=0.9, value_fn=_zeros_like)
    )
    value_fn = _CountingValueFn()
    fast = _error(lambda: episodes_to_rollout(parts(), gamma=0.9, value_fn=value_fn))
    assert _no_ids(fast) == _no_ids(general) and value_fn.calls == 0
    assert general[0] is ValueError and "float64(2,)" in general[1] and "float64(3,)" in general[1]


def _no_ids(error: tuple[type[BaseException], str]) -> tuple[type[BaseException], str]:
    """The error without its episode ids (two runners of one seed draw other ids)."""
    return error[0], re.sub(r"episode '[^']*'", "episode", error[1])


def _cartpole_part(seed: int, values_dtype: torch.dtype) -> SampledChunks:
    from episodes.envs.torch_cartpole import TorchCartPole

    def policy(obs: torch.Tensor) -> Any:
        n = len(obs)
        extras = {"vf_preds": torch.ones(n, dtype=values_dtype), "action_logp": torch.zeros(n)}
        return (obs[:, 2] > 0).long(), extras

    return EnvRunner(TorchCartPole(2), policy, seed=seed).sample(4)


def test_device_parts_whose_values_torch_cannot_join_convert_as_the_general_path() -> None:
    # torch.cat refuses uint32 beside int32; numpy joins them (the general path's columns).
    def parts() -> GroupSample:
        return _group(_cartpole_part(0, torch.uint32), _cartpole_part(1, torch.int32))

    def first_obs(obs: Any) -> Any:
        return obs[:, 0]

    fast = episodes_to_rollout(parts(), gamma=0.9, value_fn=first_obs)
    general = episodes_to_rollout(_general(parts()), gamma=0.9, value_fn=first_obs)
    assert torch.equal(fast.storage.values, torch.ones(4, 4, 1))
    assert torch.equal(fast.storage.values, general.storage.values)
    assert torch.equal(fast.storage.rewards, general.storage.rewards)


def test_tuple_observations_side_by_side_are_refused_before_value_fn() -> None:
    space = gym.spaces.Tuple((BOX, gym.spaces.Box(-1, 1, (1,), np.float32)))

    def parts() -> GroupSample:
        return _group(_sample(0, 3, space), _sample(1, 3, space))

    general = _error(lambda: episodes_to_rollout(_general(parts()), gamma=0.9, value_fn=np.zeros))
    value_fn = _CountingValueFn()
    fast = _error(lambda: episodes_to_rollout(parts(), gamma=0.9, value_fn=value_fn))
    assert fast == general
    assert general[0] is TypeError and "RolloutStorage holds a tensor" in general[1]
    assert value_fn.calls == 0


@pytest.mark.parametrize("on_device", [False, True], ids=["host", "device"])
@pytest.mark.parametrize("masked_first", [True, False], ids=["masked first", "masked last"])
def test_a_masked_window_beside_an_unmasked_one_keeps_both_masks(on_device, masked_first):
    ends = [3, 0] if masked_first else [0, 3]  # 0: never ends, so no reset step, no mask
    runners = [_window_runner(e, on_device) for e in ends]
    parts = [runner.sample(6) for runner in runners]
    alone = [episodes_to_rollout(part, gamma=0.9, value_fn=_zeros_like) for part in parts]
    assert [r.mask is None for r in alone] == [e == 0 for e in ends]
    joined = episodes_to_rollout(_group(*parts), gamma=0.9, value_fn=_zeros_like)
    assert [part.built() for part in parts] == [[], []]  # the fast path
    want = torch.cat(
        [torch.ones(6, 2, dtype=torch.bool) if r.mask is None else r.mask for r in alone], 1
    )
    assert joined.mask is not None and not bool(want.all())
    assert torch.equal(joined.mask.cpu(), want.cpu())


def _zeros_like(obs: Any) -> Any:
    return torch.zeros(len(obs)) if isinstance(obs, torch.Tensor) else np.zeros(len(obs))


# -------------------------------------------------------------- 3. what a numpy column takes

_RECORD = np.dtype([("a", np.int64), ("b", np.float64)])


def _finalized(items: list[Any]) -> InfiniteLookbackBuffer:
    buf = InfiniteLookbackBuffer(items)
    buf.finalize()
    return buf


# name -> (the column's items, a value it cannot hold)
MISFITS: dict[str, tuple[list[Any], Any]] = {
    "a number into a column of records": ([np.zeros((), _RECORD)] * 2, 5),
    "a 0-d array into a column of records": ([np.zeros((), _RECORD)] * 2, np.array(5)),
    "a record of other fields": (
        [np.zeros((), _RECORD)] * 2,
        np.zeros((), [("x", np.int64), ("y", np.float64)]),
    ),
    "a complex row into float rows": ([np.zeros(2), np.zeros(2)], np.array([1 + 2j, 0])),
    "a numpy complex into a float column": ([0.0, 1.0], np.complex128(1 + 2j)),
    "a numpy complex into an int column": ([0, 1], np.complex64(3 + 1j)),
}


@pytest.mark.parametrize("case", MISFITS)
def test_values_a_numpy_column_cannot_hold_are_refused_unchanged(case: str) -> None:
    items, value = MISFITS[case]
    buf = _finalized(items)
    before = buf.data.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's ComplexWarning is no refusal
        with pytest.raises(ValueError, match="does not fit a numpy column"):
            buf.append(value)
    assert len(buf) == 2 and buf.data.tobytes() == before.tobytes()


# name -> (write a 0-d array into a numpy'd object column, read back what it stored)
ZERO_D_WRITES: dict[str, Callable[[InfiniteLookbackBuffer], Any]] = {
    "append": lambda buf: (buf.append(np.array(5)), buf.get(-1))[1],
    "extend": lambda buf: (buf.extend([np.array(5), 1]), buf.get(-2))[1],
    "set one": lambda buf: (buf.set(np.array(5), at_indices=0), buf.get(0))[1],
    "set a list": lambda buf: (buf.set([np.array(5), np.array(6)], at_indices=[0, 1]), buf.get(0))[
        1
    ],
}


@pytest.mark.parametrize("case", ZERO_D_WRITES)
def test_a_0d_array_written_into_an_object_column_is_stored_as_its_value(case: str) -> None:
    buf = _finalized([None, "a"])
    assert buf.data.dtype == object
    value = ZERO_D_WRITES[case](buf)
    assert type(value) is int and value == 5


def test_a_nested_object_leaf_unwraps_a_0d_array_too() -> None:
    buf = _finalized([{"a": None}, {"a": "x"}])
    buf.append({"a": np.array(7)})
    value = buf.get(-1)["a"]
    assert type(value) is int and value == 7


# ------------------------------------------------ 4. a save's shards read into a buffer state


def test_a_later_shard_of_plain_and_odd_episodes_loads_each_in_its_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Episodes with infos are read one by one, the plain ones gathered, in every shard.
    odd = {3, 9, 10, 14}
    episodes = [
        SingleAgentEpisode(
            f"e{i}", observations=np.arange(5, dtype=np.float32) + 10 * i,
            actions=[i % 2, 1, 0, 1], rewards=[float(i), 0.5, 0.0, 2.0], len_lookback_buffer=0,
            infos=[{"i": i}, {}, {}, {}, {"end": i}] if i in odd else None,
        )
        for i in range(16)
    ]  # fmt: skip
    buf = EpisodeReplayBuffer(10_000, seed=1)
    buf.add(episodes)
    with monkeypatch.context() as m:
        m.setattr(saved_shards, "DEFAULT_SHARD_BYTES", 20_000)  # a few episodes a shard
        buf.save(tmp_path / "buf")
    shards = len((tmp_path / "buf" / "episodes" / "manifest.jsonl").read_text().splitlines()) - 1
    assert 3 < shards < 16  # several shards, some of several episodes
    assert loaded_shards.read_stored(tmp_path / "buf" / "episodes") is not None  # batched
    back = EpisodeReplayBuffer.load(tmp_path / "buf")
    assert back.get_episode_ids() == [f"e{i}" for i in range(16)]
    for ep, want in zip(back.get_episodes(), episodes):
        assert ep.id_ == want.id_
        np.testing.assert_array_equal(ep.get_observations(), want.get_observations())
        np.testing.assert_array_equal(ep.get_actions(), want.get_actions())
        np.testing.assert_array_equal(ep.get_rewards(), want.get_rewards())
        assert ep.get_infos() == want.get_infos()


# name -> the space of an empty numpy'd column, a first item holding a string ending in NUL
_TEXT = gym.spaces.Text(5)
FIRST_NULS: dict[str, tuple[gym.Space[Any], Any]] = {
    "a Dict with a Text part": (
        gym.spaces.Dict({"t": _TEXT, "x": gym.spaces.Discrete(3)}),
        {"t": "ab\x00", "x": 1},
    ),
    "a Tuple with a Text part": (gym.spaces.Tuple((_TEXT, gym.spaces.Discrete(3))), ("ab\x00", 1)),
}


@pytest.mark.parametrize("case", FIRST_NULS)
def test_first_items_extended_ending_in_nul_are_refused(case: str) -> None:
    # numpy's fixed-width strings drop a trailing NUL: "ab\x00" would read back as "ab".
    space, item = FIRST_NULS[case]
    buf = InfiniteLookbackBuffer(space=space)
    buf.finalize()
    with pytest.raises(ValueError, match="trailing NUL"):
        buf.extend([item])
    assert len(buf) == 0


# name -> (the column's items, a list extending it whose item does not fit, the words naming it)
MISFIT_EXTENDS: dict[str, tuple[list[Any], list[Any], str]] = {
    "a row of 3 into rows of 2": ([np.zeros(2)] * 2, [[1.0, 2.0, 3.0]], "[1.0, 2.0, 3.0]"),
    "a scalar into rows of 2": ([np.zeros(2)] * 2, [np.zeros(2), 1.0], "1.0"),
    "a row into scalars": ([0.0, 1.0], [[1.0, 2.0]], "[1.0, 2.0]"),
}


@pytest.mark.parametrize("case", MISFIT_EXTENDS)
def test_extend_names_the_item_that_does_not_fit(case: str) -> None:
    # The batch of an extend is checked at once; a doubt takes the per-item path and its error.
    items, new, words = MISFIT_EXTENDS[case]
    buf = _finalized(items)
    with pytest.raises(ValueError) as info:
        buf.extend(new)
    assert str(info.value).startswith(f"{words} does not fit a numpy column")
    assert "item shape" in str(info.value) and len(buf) == 2


def _text_column() -> InfiniteLookbackBuffer:
    return _finalized(["ab", "cd"])  # no Text space: the strings seen make it <U2


# name -> (make a numpy'd column, a batch or list extending it that it cannot hold)
BATCH_MISFITS: dict[str, tuple[Callable[[], InfiniteLookbackBuffer], Any]] = {
    "a complex batch into floats": (lambda: _finalized([0.0, 1.0]), np.array([1 + 2j, 3])),
    "numpy complex numbers into floats": (
        lambda: _finalized([0.0, 1.0]),
        [np.complex128(1 + 2j), np.complex128(3)],
    ),
    "complex rows into float rows": (
        lambda: _finalized([np.zeros(2), np.zeros(2)]),
        np.array([[1 + 2j, 0], [0, 0]]),
    ),
    "numbers into records": (lambda: _finalized([np.zeros((), _RECORD)] * 2), np.array([5, 6])),
    "records of other fields": (
        lambda: _finalized([np.zeros((), _RECORD)] * 2),
        np.zeros(2, [("x", np.int64), ("y", np.float64)]),
    ),
    "a batch of longer strings": (_text_column, np.array(["hello", "x"])),
    "numpy strings longer than the column's": (_text_column, [np.str_("hello"), np.str_("x")]),
}


@pytest.mark.parametrize("case", BATCH_MISFITS)
def test_batches_a_numpy_column_cannot_hold_are_refused_unchanged(case: str) -> None:
    make, batch = BATCH_MISFITS[case]
    buf = make()
    before = buf.data.copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # numpy's ComplexWarning is no refusal
        with pytest.raises(ValueError, match="does not fit a numpy column"):
            buf.extend(batch)
    assert len(buf) == 2 and buf.data.tobytes() == before.tobytes()
