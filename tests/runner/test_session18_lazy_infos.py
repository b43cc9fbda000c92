"""A recording keeps each vector step's infos batched and splits a sub-env's only when read.

Contract §11: no Python work per sub-env per step. An env that reports an info key every step
(Isaac Lab-style envs always do) made the recorder split the batched infos sub-env by
sub-env at every step. The infos read back are those the per-step reference splits eagerly.
"""

from __future__ import annotations

import copy
import importlib
import pickle
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes.runner import EnvRunner
from episodes.runner.infos import chunk_infos, env_info
from episodes.structs import data_equal
from tests.runner.per_step_runner import PerStepRunner

MODES = ["NextStep", "SameStep", "Disabled"]
NUM_ENVS = 3


class InfoEnv(gym.Env):  # type: ignore[type-arg]
    """Endings at random; infos with masked, nested and object (string) keys, some per step."""

    observation_space = gym.spaces.Box(-1e6, 1e6, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def _info(self) -> dict[str, Any]:
        roll = self.np_random.random()
        info: dict[str, Any] = {"t": self.t}
        if roll < 0.5:
            info["x"] = np.array([self.t, 2.0 * self.t])
        if roll > 0.3:
            info["log"] = {"a": float(roll), "name": f"step{self.t}"}
        if roll > 0.8:
            info["name"] = f"n{self.t}"
        return info

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(2, np.float32), self._info()

    def step(self, action):
        self.t += 1
        terminated = bool(self.np_random.random() < 0.15)
        truncated = bool(self.np_random.random() < 0.1)
        return np.full(2, self.t, np.float32), 1.0, terminated, truncated, self._info()


class ReusedInfos(gym.vector.VectorWrapper):
    """Adds infos written into the same arrays, masks and list every step (as envs that avoid
    allocations do): an unmasked key, a nested dict, and per-env arrays in a list and in an
    object array."""

    def __init__(self, env: gym.vector.VectorEnv):
        super().__init__(env)
        n = env.num_envs
        self.k = 0
        self.unmasked = np.zeros((n, 2))
        self.inner, self.inner_mask, self.outer_mask = (
            np.zeros(n),
            np.zeros(n, bool),
            np.ones(n, bool),
        )
        self.items = [np.zeros(2) for _ in range(n)]  # the same arrays every step
        self.objects = np.empty(n, dtype=object)  # an object array holding them too
        self.objects[:] = self.items
        self.items_mask = np.zeros(n, bool)

    def _extra(self, infos: dict[str, Any]) -> dict[str, Any]:
        self.k += 1
        n = self.num_envs
        self.unmasked[:] = self.k  # no "_u" mask: every sub-env reports it
        self.inner[:] = np.arange(n) + 10 * self.k
        self.inner_mask[:] = (np.arange(n) + self.k) % 2 == 0
        for i, item in enumerate(self.items):
            item[:] = 100 * self.k + i  # written in place, in the list and the object array
        self.items_mask[:] = (np.arange(n) + self.k) % 3 != 0
        return {
            **infos,
            "u": self.unmasked,
            "reused": {"v": self.inner, "_v": self.inner_mask},
            "_reused": self.outer_mask,
            "items": self.items,
            "_items": self.items_mask,
            "objects": self.objects,
            "_objects": self.items_mask,
        }

    def reset(self, **kwargs):
        obs, infos = self.env.reset(**kwargs)
        return obs, self._extra(infos)

    def step(self, actions):
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        return obs, rewards, terminated, truncated, self._extra(infos)


def make_env(mode: str, num_envs: int = NUM_ENVS) -> gym.vector.VectorEnv:
    env = gym.vector.SyncVectorEnv([InfoEnv for _ in range(num_envs)], autoreset_mode=mode)
    return ReusedInfos(env)


def zeros(obs: Any, *_: Any) -> Any:
    return np.zeros(len(obs), np.int64), {}


def same(have: list[Any], want: list[Any]) -> bool:
    return data_equal(have, want)


# ------------------------------------------------------------------- read back as eagerly split
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("lookback", [0, 2])
def test_infos_read_back_as_the_per_step_reference_splits_them(mode: str, lookback: int) -> None:
    """Masked, unmasked, nested, object and list keys, final infos, rows carried over calls."""
    reference = PerStepRunner(make_env(mode), zeros, len_lookback_buffer=lookback, seed=3)
    runner = EnvRunner(make_env(mode), zeros, len_lookback_buffer=lookback, seed=3)
    checked = 0
    for size in (4, 7, 2, 5):
        want, have = reference.sample(size), runner.sample(size)
        assert len(have) == len(want)
        for ref, new in zip(want, have, strict=True):
            assert same(list(new.infos.data), list(ref.infos.data))
            checked += sum(bool(info) for info in new.get_infos())
    assert checked > 50


@pytest.mark.parametrize("mode", MODES)
def test_a_row_reads_as_the_same_dict_every_time_and_across_calls(mode: str) -> None:
    """``same_infos`` compares by identity: a lookback row is the previous call's dict."""
    runner = EnvRunner(make_env(mode), zeros, len_lookback_buffer=1, seed=0)
    first = runner.sample(6)
    second = runner.sample(6)
    rec1, rec2 = first.recording, second.recording

    def by_step(infos: Any) -> dict[tuple[int, int], Any]:
        return {(int(info["u"][0]), env): info for (_, env), info in infos.items()}

    # The later call read first: the earlier one's rows still give the same dicts.
    later = by_step(rec2.infos)
    earlier = by_step(rec1.infos)
    carried = later.keys() & earlier.keys()
    assert carried
    assert all(later[key] is earlier[key] for key in carried)
    for rec, chunks in ((rec1, first), (rec2, second)):
        for k in range(len(chunks)):
            again = chunk_infos(rec, k)
            assert all(a is b or not a for a, b in zip(chunk_infos(rec, k), again, strict=True))
    assert first.unchanged() and second.unchanged()


@pytest.mark.parametrize("copier", ["pickle", "deepcopy"])
@pytest.mark.parametrize("mode", MODES)
def test_a_copied_sample_reads_the_same_infos(copier: str, mode: str) -> None:
    runner = EnvRunner(make_env(mode), zeros, len_lookback_buffer=1, seed=1)
    runner.sample(5)
    chunks = runner.sample(5)
    chunks[0].get_infos()  # one chunk read before the copy, the others not
    back = pickle.loads(pickle.dumps(chunks)) if copier == "pickle" else copy.deepcopy(chunks)
    assert len(back) == len(chunks)
    for k, chunk in enumerate(back):
        assert same(list(chunk.infos.data), chunk_infos(chunks.recording, k))
    assert back == chunks
    infos = back.recording.infos  # the recording's own infos survive a copy too
    again = pickle.loads(pickle.dumps(infos)) if copier == "pickle" else copy.deepcopy(infos)
    assert len(again) and same(dict(again.items()), dict(infos.items()))


def test_an_env_writing_its_info_arrays_in_place_leaves_the_recorded_infos() -> None:
    runner = EnvRunner(make_env("NextStep", 2), zeros, len_lookback_buffer=0, seed=0)
    chunks = runner.sample(4)
    runner.sample(3)  # the env rewrote its arrays, masks and list seven times since
    checked = 0
    for chunk in chunks:
        env = chunk.custom_data["env_index"]
        ks = [int(info["u"][0]) for info in chunk.get_infos()]
        assert ks == sorted(set(ks))  # each row its own step's, not the last one's
        for k, info in zip(ks, chunk.get_infos(), strict=True):
            assert info["reused"] == ({"v": env + 10 * k} if (env + k) % 2 == 0 else {})
            assert ("items" in info) == ((env + k) % 3 != 0)
            if "items" in info:
                assert info["items"].tolist() == [100 * k + env] * 2
                assert info["objects"].tolist() == [100 * k + env] * 2
                checked += 1
    assert checked > 3


# ------------------------------------------------------------------- refused at record time
class BadInfos(gym.vector.VectorWrapper):
    def __init__(self, env: gym.vector.VectorEnv, infos: dict[str, Any], at_reset: bool):
        super().__init__(env)
        self.bad, self.at_reset = infos, at_reset

    def reset(self, **kwargs):
        obs, infos = self.env.reset(**kwargs)
        return obs, (self.bad if self.at_reset else infos)

    def step(self, actions):
        obs, rewards, terminated, truncated, infos = self.env.step(actions)
        return obs, rewards, terminated, truncated, self.bad


ALL = np.ones(3, bool)
BAD = {
    # a number, a string or a 0-d array is the whole step's, shared (test_session40_shared_infos)
    "a short array": {"x": np.arange(2)},
    "a short list": {"x": [0.5]},
    "a set": {"x": {1, 2, 3}},
    # env 1 fails first (on "b"): env_info goes sub-env by sub-env, then key by key
    "the first sub-env's key": {
        "a": np.arange(2),
        "_a": ALL,
        "b": np.arange(1),
        "_b": np.array([False, True, False]),
    },
    "nested": {"n": {"y": np.arange(2), "_y": ALL}, "_n": ALL},
}


def _expected(infos: dict[str, Any]) -> str:
    for i in range(3):
        try:
            env_info(infos, i)
        except ValueError as err:
            return str(err)
    raise AssertionError("env_info took it")


@pytest.mark.parametrize("at_reset", [True, False], ids=["reset", "step"])
@pytest.mark.parametrize("bad", BAD.values(), ids=BAD)
def test_a_value_without_one_item_per_sub_env_is_refused_while_recording(bad, at_reset) -> None:
    env = BadInfos(gym.make_vec("CartPole-v1", 3, vectorization_mode="sync"), bad, at_reset)
    runner = EnvRunner(env, zeros, seed=0)
    with pytest.raises(ValueError) as err:
        runner.sample(3)
    assert str(err.value) == _expected(bad)
    if at_reset:  # refused before the env stepped: the runner is as it was, unstarted
        assert runner._obs is None and not runner._recorder.infos
        with pytest.raises(ValueError, match="must hold one value per sub-env"):
            runner.sample(3)
    else:  # the env stepped: refused at that step, not when a chunk's infos are read
        with pytest.raises(RuntimeError, match="failed part-way"):
            runner.sample(3)


# ------------------------------------------------------------------- no per-env work per step
def _count_splits(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the per-sub-env splits of batched infos, wherever the recorder does them."""
    calls: list[int] = []
    targets = [
        ("episodes.runner.recorder", "env_info"),
        ("episodes.runner.infos", "env_info"),
        ("episodes.runner.row_infos", "_split"),
    ]
    for module_name, name in targets:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        original = getattr(module, name, None)
        if original is None:
            continue

        def counting(*args: Any, _original: Any = original, **kwargs: Any) -> Any:
            calls.append(1)
            return _original(*args, **kwargs)

        monkeypatch.setattr(module, name, counting)
    return calls


class EveryStep(gym.vector.VectorEnv):  # type: ignore[type-arg]
    """Never ends; reports ``time_outs`` for every sub-env every step (Isaac Lab-style)."""

    def __init__(self, n: int, mode: str, tensors: bool):
        self.num_envs, self.tensors = n, tensors
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode(mode)}
        self.single_observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, n)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, n)

    def _out(self, x: np.ndarray) -> Any:
        return torch.from_numpy(x) if self.tensors else x

    def reset(self, *, seed=None, options=None):
        return self._out(np.zeros((self.num_envs, 2), np.float32)), {}

    def step(self, actions):
        n = self.num_envs
        no = self._out(np.zeros(n, bool))
        infos = {"time_outs": self._out(np.zeros(n, bool)), "_time_outs": np.ones(n, bool)}
        return self._out(np.zeros((n, 2), np.float32)), self._out(np.ones(n)), no, no, infos


def _policy(obs: Any) -> Any:
    return np.zeros(len(obs), np.int64), {}


@pytest.mark.parametrize("tensors", [False, True], ids=["numpy", "torch"])
@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_sampling_splits_no_sub_envs_infos_until_a_chunks_are_read(monkeypatch, mode, tensors):
    num_envs, num_steps = 64, 8
    runner = EnvRunner(EveryStep(num_envs, mode, tensors), _policy, seed=0)
    runner.sample(num_steps)
    calls = _count_splits(monkeypatch)
    chunks = runner.sample(num_steps)
    assert len(calls) == 0  # was num_envs * num_steps: one split per sub-env and step
    infos = chunks[5].get_infos()
    assert [bool(info["time_outs"]) for info in infos[1:]] == [False] * num_steps
    assert 0 < len(calls) <= num_steps + 2  # only that chunk's rows (its lookback too)


def test_tuple_items_are_copied_and_a_read_row_owns_its_data() -> None:
    from episodes.runner.row_infos import RowInfos

    arrays = [np.zeros(2), np.ones(2)]
    numeric = np.arange(8.0).reshape(2, 4)
    infos = RowInfos()
    infos.add(0, {"pair": tuple(arrays), "n": numeric}, np.array([True, True]))
    arrays[0][:] = 9.0  # the env writes into the arrays it handed out
    numeric[:] = -1.0
    got = infos.get((0, 0))
    assert got["pair"].tolist() == [0.0, 0.0] and got["n"].tolist() == [0.0, 1.0, 2.0, 3.0]
    assert got["n"].base is None  # held alone, it keeps no other sub-env's row alive
    assert infos.get((0, 0)) is got
