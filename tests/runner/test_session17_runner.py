"""Session 17 runner fixes: rewards, lists and info masks alike on both paths; metrics flags.

Each test failed before its fix (but the last, which pins the converter rule the docs state):

* complex rewards were recorded without their imaginary part on a torch env (torch's
  ``UserWarning`` only) and failed in numpy's ``UFuncTypeError`` after the row was written on
  a numpy env; string rewards failed in numpy's conversion words: contract §11 wants a
  ``ValueError`` naming the env's rewards;
* a list of Python floats (the env's rewards, a policy's extra output) was rounded to float32
  on a torch env, where the numpy path records float64: the two paths must record the same
  chunks bit for bit;
* an info mask ``_key`` of another length than the sub-envs failed in numpy's broadcasting
  words, blamed the (correct) values, or silently dropped the last sub-envs' infos;
* ``EnvRunner.get_metrics(reset="no")`` cleared the counters (the group's refuses it), and
  ``GroupMetrics.add_lost`` took negative and fractional step counts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes.converter import episodes_to_rollout
from episodes.distributed import GroupMetrics
from episodes.envs.torch_cartpole import TorchCartPole
from episodes.runner import EnvRunner, RunnerMetrics
from episodes.runner.recorder import reported

N = 3
Step = tuple[Any, Any, Any, Any, dict[str, Any]]


class _Edited(gym.vector.VectorEnv):  # type: ignore[type-arg]
    """TorchCartPole whose steps ``edit`` changes; numpy in and out unless ``tensors``."""

    def __init__(self, tensors: bool, edit: Callable[[Step], Step]):
        self.inner = TorchCartPole(N, max_episode_steps=50)
        self.tensors, self.edit = tensors, edit
        for name in ("num_envs", "metadata", "single_observation_space", "single_action_space",
                     "observation_space", "action_space"):  # fmt: skip
            setattr(self, name, getattr(self.inner, name))

    def _out(self, value: Any) -> Any:
        return value if self.tensors or not isinstance(value, torch.Tensor) else value.numpy()

    def reset(self, **kwargs: Any) -> Any:
        obs, infos = self.inner.reset(**kwargs)
        return self._out(obs), infos

    def step(self, actions: Any) -> Any:
        obs, rew, term, trunc, _ = self.inner.step(torch.as_tensor(actions))
        step = tuple(self._out(v) for v in (obs, rew, term, trunc))
        return self.edit((*step, {}))  # type: ignore[arg-type]


def _policy(extras: Callable[[int], dict[str, Any]] = lambda n: {}) -> Any:
    def policy(obs: Any) -> Any:
        n = len(obs)
        if isinstance(obs, torch.Tensor):
            return torch.ones(n, dtype=torch.long), extras(n)
        return np.ones(n, np.int64), extras(n)

    return policy


BACKENDS = ["numpy", "torch"]


def _runner(backend: str, edit: Callable[[Step], Step], **kw: Any) -> EnvRunner:
    return EnvRunner(_Edited(backend == "torch", edit), _policy(**kw), seed=0)


def _rewards(make: Callable[[Any], Any]) -> Callable[[Step], Step]:
    return lambda s: (s[0], make(s[1]), s[2], s[3], s[4])


def _as(value: Any, like: Any) -> Any:
    return torch.as_tensor(value) if isinstance(like, torch.Tensor) else np.asarray(value)


# ----------------------------------------------------------------------------------- rewards
REFUSED_REWARDS = {
    "complex": lambda r: _as(np.full(N, 1 + 2j, np.complex64), r),
    "complex128": lambda r: _as(np.full(N, 1 + 2j), r),
    "strings": lambda r: np.array(["1.5", "x", "2"]),
    "objects": lambda r: np.array([1.0, None, 2.0], dtype=object),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(REFUSED_REWARDS))
def test_rewards_no_real_block_holds_are_refused_naming_them(backend: str, case: str) -> None:
    runner = _runner(backend, _rewards(REFUSED_REWARDS[case]))
    with pytest.raises(ValueError, match="the env's rewards"):
        runner.sample(3)
    assert runner.metrics.reduce(reset=False)["num_env_steps"] == 0  # nothing counted


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(
    "make, want",
    [
        (lambda r: _as(np.array([True, False, True]), r), [1.0, 0.0, 1.0]),
        (lambda r: _as(np.array([1, 2, 3], np.int32), r), [1.0, 2.0, 3.0]),
        (lambda r: _as(np.array([1, 2, 3], np.uint8), r), [1.0, 2.0, 3.0]),
    ],
    ids=["bool", "int32", "uint8"],
)
def test_real_rewards_are_still_recorded(backend: str, make: Any, want: list[float]) -> None:
    chunks = _runner(backend, _rewards(make)).sample(2)
    assert [chunk.get_rewards().tolist() for chunk in chunks] == [[w, w] for w in want]


# ---------------------------------------------------------------------- Python float lists
def test_python_float_lists_record_as_numpy_does_on_both_paths() -> None:
    edit = _rewards(lambda r: [0.1] * N)
    extras = lambda n: {"vf_preds": [0.1] * n, "nested": {"w": [0.3] * n}}  # noqa: E731
    got = {b: _runner(b, edit, extras=extras).sample(2)[0] for b in BACKENDS}
    for chunk in got.values():
        assert chunk.get_rewards().dtype == np.float64
        assert chunk.get_rewards().tolist() == [0.1, 0.1]  # not 0.10000000149011612
        vf = chunk.get_extra_model_outputs("vf_preds")
        assert vf.dtype == np.float64 and vf.tolist() == [0.1, 0.1]
        nested = chunk.get_extra_model_outputs("nested")["w"]
        assert nested.dtype == np.float64 and nested.tolist() == [0.3, 0.3]
    numpy_chunk, torch_chunk = got["numpy"], got["torch"]
    assert torch_chunk.get_rewards().tobytes() == numpy_chunk.get_rewards().tobytes()


def test_tensor_outputs_keep_their_dtype_on_a_torch_env() -> None:
    extras = lambda n: {"vf_preds": torch.full((n,), 0.1)}  # noqa: E731
    chunk = _runner("torch", lambda s: s, extras=extras).sample(2)[0]
    assert chunk.get_extra_model_outputs("vf_preds").dtype == np.float32


# -------------------------------------------------------------------------------- info masks
W = np.arange(float(N))
ALL = np.ones(N, bool)
BAD_MASKS: dict[str, tuple[dict[str, Any], str]] = {
    "short mask, only key": ({"w": W, "_w": np.array([True, True])}, r"infos\['_w'\]"),
    "short mask, second key": (
        {"u": W, "_u": ALL, "w": W, "_w": np.array([True, True])},
        r"infos\['_w'\]",
    ),
    "long mask": ({"w": W, "_w": np.ones(N + 1, bool)}, r"infos\['_w'\]"),
    "2-D mask": ({"w": W, "_w": np.ones((N, 1), bool)}, r"infos\['_w'\]"),
    "short mask beside an unmasked key": (
        {"u": W, "w": W, "_w": np.array([True])},
        r"infos\['_w'\]",
    ),
    "short nested mask": (
        {"n": {"w": W, "_w": np.array([True, True])}, "_n": ALL},
        r"infos\['n'\]\['_w'\]",
    ),
}


def _infos(infos: dict[str, Any], tensors: bool) -> Callable[[Step], Step]:
    def convert(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: convert(v) for k, v in value.items()}
        return torch.as_tensor(value) if tensors else value

    return lambda s: (*s[:4], convert(infos))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("case", sorted(BAD_MASKS))
def test_info_masks_of_another_length_are_refused_naming_them(backend: str, case: str) -> None:
    infos, match = BAD_MASKS[case]
    runner = _runner(backend, _infos(infos, backend == "torch"))
    with pytest.raises(ValueError, match=match + " must hold one flag per sub-env"):
        runner.sample(2)


@pytest.mark.parametrize("backend", BACKENDS)
def test_right_masks_still_split_the_infos(backend: str) -> None:
    mask = np.array([False, True, True])
    infos = {"w": W, "_w": mask, "n": {"v": W, "_v": ~mask}, "_n": ALL}
    chunks = _runner(backend, _infos(infos, backend == "torch")).sample(1)
    got = [chunk.get_infos()[-1] for chunk in chunks]
    assert [sorted(info) for info in got] == [["n"], ["n", "w"], ["n", "w"]]
    assert [float(info["w"]) for info in got[1:]] == [1.0, 2.0]
    assert [sorted(info["n"]) for info in got] == [["v"], [], []]


def test_reported_checks_every_mask_and_leaves_the_env_s_arrays_alone() -> None:
    mask = np.array([False, True, False])
    assert reported({"w": W, "_w": mask, "u": W, "_u": mask[::-1]}, N).tolist() == [0, 1, 0]
    out = reported({"w": W, "_w": mask}, N)
    assert out is not None
    out[:] = True
    assert mask.tolist() == [False, True, False]  # a copy: the recorder ands it in place
    with pytest.raises(ValueError, match=r"infos\['_w'\] must hold one flag.*got a list"):
        reported({"w": W, "_w": [[True], [True, False]]}, N)
    assert reported({}, N) is None
    assert reported({"final_obs": W, "_final_obs": ALL[:1]}, N, drop=("final_obs",)) is None


# ------------------------------------------------------------------------------------ metrics
def test_runner_get_metrics_takes_only_a_bool_reset() -> None:
    runner = _runner("numpy", lambda s: s)
    runner.sample(4)
    for bad in ("no", 0, None, 1.0):
        with pytest.raises(TypeError, match="reset must be a bool"):
            runner.get_metrics(reset=bad)  # type: ignore[arg-type]
    assert runner.get_metrics(reset=np.False_)["num_env_steps"] == 4 * N  # kept
    assert runner.get_metrics()["num_env_steps"] == 4 * N
    assert runner.get_metrics()["num_env_steps"] == 0
    with pytest.raises(TypeError, match="reset must be a bool"):
        RunnerMetrics().reduce(reset="yes")  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [-7, 1.5, 2.0, True, "3", None])
def test_group_add_lost_refuses_counts_that_are_no_whole_number(bad: Any) -> None:
    metrics = GroupMetrics()
    metrics.add_lost(num_env_steps=4, error="first")
    with pytest.raises(ValueError, match=r"num_env_steps must be an int >= 0"):
        metrics.add_lost(num_env_steps=bad, error="x")
    assert (metrics.num_lost_samples, metrics.num_lost_env_steps) == (1, 4)
    assert metrics.errors == ["first"]
    metrics.add_lost(num_env_steps=np.int64(3), error="y")
    out = metrics.reduce()
    assert out["num_lost_env_steps"] == 7 and type(out["num_lost_env_steps"]) is int


# ----------------------------------------------------------- converter: the env's device
def test_only_the_sampled_chunks_themselves_convert_on_the_env_s_device() -> None:
    seen: list[str] = []

    def value_fn(obs: Any) -> Any:
        seen.append(type(obs).__name__)
        return torch.zeros(len(obs)) if isinstance(obs, torch.Tensor) else np.zeros(len(obs))

    def policy(obs: Any) -> Any:
        return (obs[:, 2] > 0).long(), {"vf_preds": obs[:, 0], "action_logp": obs[:, 1]}

    chunks = EnvRunner(TorchCartPole(N, max_episode_steps=4), policy, seed=0).sample(6)
    for given, layout, want in [
        (chunks, "per_env", "Tensor"),
        (chunks, "per_chunk", "Tensor"),
        (chunks.by_env(), "per_env", "ndarray"),
        (list(chunks), "per_env", "ndarray"),
    ]:
        seen.clear()
        episodes_to_rollout(given, gamma=0.99, value_fn=value_fn, layout=layout)
        assert seen == [want], (type(given).__name__, layout)
