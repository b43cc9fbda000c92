"""The storage a conversion makes is not zero-filled where the conversion writes it whole.

``episodes_to_rollout(..., storage=None)`` built a ``RolloutStorage`` (``torch.zeros`` for
every field) and then took the chunks' columns as its tensors, or copied them over every
element: the zeros were made and thrown away (peak 2.1x the data, where a reused storage
peaks at 1.05x; on the runner's vector-steps window 22 of 22 MB, and the page faults of fresh
zeros cost 3-4x the conversion's time). Now only the returns and advantages, which
``compute_returns`` fills, are zeroed; the rest is allocated and written. Every path gives
what the zero-filled storage gave: the table below converts each case with the new
storages' unfilled memory poisoned, against the same conversion with every field zeroed.

A ``copy=True`` conversion of a runner's gathered window into a given storage gathered the
observations and actions straight into the storage, then wrote them into themselves: the
write cloned the source (it lay in the memory written) and copied it back. A copy whose
source is its destination's own view is now dropped.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import episodes.converter.storage_for as storage_for
from episodes import SingleAgentEpisode
from episodes.converter import ColumnKeys, episodes_to_rollout
from episodes.envs.torch_cartpole import TorchCartPole
from episodes.rollout import RolloutStorage
from episodes.rollout.aliasing import unalias
from episodes.runner import EnvRunner

GAMMA = 0.9
DIST = ColumnKeys(distribution=("logits",))


def value_fn(obs: Any) -> Any:
    obs = obs["pos"] if isinstance(obs, dict) else obs
    return obs[..., 0] * 2 + 1


def _episode(
    k: int, steps: int, *, end: str = "", dict_obs: bool = False, float_actions: bool = False
) -> SingleAgentEpisode:
    rng = np.random.default_rng(k)
    obs: Any = rng.normal(size=(steps + 1, 3)).astype(np.float32)
    if dict_obs:
        obs = [{"pos": o, "ids": np.arange(2, dtype=np.int16) + i} for i, o in enumerate(obs)]
    actions = (
        rng.normal(size=(steps, 2)).astype(np.float32)
        if float_actions
        else rng.integers(0, 3, steps)
    )
    extras = {
        "vf_preds": rng.normal(size=steps).astype(np.float32),
        "action_logp": rng.normal(size=steps).astype(np.float32),
        "logits": rng.normal(size=(steps, 3)).astype(np.float32),
        "h": rng.normal(size=(steps, 1, 4)).astype(np.float32),
        "c": rng.normal(size=(steps, 2, 5)).astype(np.float32),
        "teacher": actions.copy(),
    }
    return SingleAgentEpisode(
        observations=list(obs),
        actions=list(actions),
        rewards=rng.normal(size=steps).tolist(),
        terminated=end == "terminated",
        truncated=end == "truncated",
        len_lookback_buffer=0,
        extra_model_outputs=extras,
    )


def _chunks(lengths: tuple[int, ...], **kw: Any) -> Callable[[], list[SingleAgentEpisode]]:
    ends = ("truncated", "terminated", "")
    return lambda: [_episode(k, n, end=ends[k % 3], **kw) for k, n in enumerate(lengths)]


def _policy(obs: Any) -> tuple[Any, dict[str, Any]]:
    obs = np.asarray(obs)
    actions = (obs[:, 2] > 0).astype(np.int64)
    logits = np.stack([obs[:, 0], -obs[:, 0]], axis=1).astype(np.float32)
    extras = {"vf_preds": obs[:, 1].astype(np.float32), "action_logp": obs[:, 3].copy()}
    return actions, extras | {"logits": logits, "teacher": actions.copy()}


class _Recurrent:
    def initial_state(self, n: int) -> np.ndarray:
        return np.zeros((n, 2), np.float32)

    def __call__(self, obs: Any, state: np.ndarray) -> tuple[Any, dict[str, Any], Any]:
        actions, extras = _policy(obs)
        extras["h"] = state[:, None, :].copy()  # [N, num_layers=1, hidden=2]
        return actions, extras, np.tanh(state + np.asarray(obs)[:, :2])


def _torch_policy(obs: torch.Tensor) -> tuple[Any, dict[str, Any]]:
    actions = (obs[:, 2] > 0).long()
    return actions, {"vf_preds": obs[:, 1].clone(), "action_logp": obs[:, 3].clone()}


def _runner(mode: str = "NEXT_STEP", window: str = "transitions", policy: Any = _policy) -> Any:
    def sample() -> Any:
        env = gym.make_vec(
            "CartPole-v1",
            3,
            vectorization_mode="sync",
            max_episode_steps=9,
            vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode[mode]},
        )
        runner = EnvRunner(env, policy, seed=0, window=window)
        runner.sample(13)  # the next sample continues episodes
        return runner.sample(24)

    return sample


def _torch_runner(window: str) -> Any:
    def sample() -> Any:
        env = TorchCartPole(3, max_episode_steps=9)
        runner = EnvRunner(env, _torch_policy, seed=0, window=window)
        runner.sample(13)
        return runner.sample(24)

    return sample


HIDDEN = ColumnKeys(actor_hidden=("h", "c"), critic_hidden=("h",), distribution=("logits",))
TEACH = ColumnKeys(privileged_actions="teacher")
CASES: dict[str, tuple[Callable[[], Any], dict[str, Any]]] = {
    "per_env": (_chunks((5, 5, 5, 5)), {"keys": DIST}),
    "per_env float64": (_chunks((4, 4, 4)), {"keys": DIST, "dtype": torch.float64}),
    "per_chunk padded": (_chunks((3, 5, 2, 5)), {"keys": DIST, "layout": "per_chunk"}),
    "per_chunk dict obs": (
        _chunks((2, 4, 3), dict_obs=True),
        {"keys": DIST, "layout": "per_chunk"},
    ),
    "per_chunk hidden": (_chunks((3, 5, 2)), {"keys": HIDDEN, "layout": "per_chunk"}),
    "per_env float actions": (_chunks((4, 4), float_actions=True), {"keys": DIST}),
    "distillation padded": (
        _chunks((3, 5, 2), float_actions=True),
        {"keys": TEACH, "layout": "per_chunk", "training_type": "distillation"},
    ),
    "runner next-step": (_runner(), {"keys": DIST}),
    "runner next-step float64": (_runner(), {"keys": DIST, "dtype": torch.float64}),
    "runner vector steps": (_runner(window="vector_steps"), {"keys": DIST}),
    "runner same-step": (_runner("SAME_STEP"), {"keys": DIST}),
    "runner same-step vector steps": (_runner("SAME_STEP", "vector_steps"), {"keys": DIST}),
    "runner disabled": (_runner("DISABLED"), {"keys": DIST}),
    "runner per_chunk": (_runner(), {"keys": DIST, "layout": "per_chunk"}),
    "runner recurrent": (
        _runner(policy=_Recurrent()),
        {"keys": ColumnKeys(actor_hidden=("h",), distribution=("logits",))},
    ),
    "runner recurrent vector steps": (
        _runner(window="vector_steps", policy=_Recurrent()),
        {"keys": ColumnKeys(actor_hidden=("h",), critic_hidden=("h",))},
    ),
    "runner distillation": (_runner(), {"keys": TEACH, "training_type": "distillation"}),
    "runner distillation vector steps": (
        _runner(window="vector_steps"),
        {"keys": TEACH, "training_type": "distillation"},
    ),
    "torch env": (_torch_runner("transitions"), {}),
    "torch env vector steps": (_torch_runner("vector_steps"), {}),
}


def _poisoned_empty(fill: int) -> Callable[..., torch.Tensor]:
    """``torch.empty`` whose memory holds a value no conversion writes (NaN, 77, True...)."""
    empty = torch.empty

    def poisoned(*args: Any, **kwargs: Any) -> torch.Tensor:
        out = empty(*args, **kwargs)
        if out.device.type != "meta" and out.numel():
            if out.dtype.is_floating_point:
                out.fill_(float("nan") if fill else -123.25)
            else:
                out.fill_(True if out.dtype == torch.bool else 77 - 80 * fill)
        return out

    return poisoned


def _convert(case: str, **kw: Any) -> Any:
    make, options = CASES[case]
    return episodes_to_rollout(make(), gamma=GAMMA, value_fn=value_fn, **options, **kw)


def _state(rollout: Any) -> dict[str, Any]:
    st = rollout.storage
    out: dict[str, Any] = {f"tensors/{k}": v for k, v in st.tensors.items()}
    for which in ("actor", "critic"):
        for i, t in enumerate(getattr(st, f"saved_hidden_states_{which}") or ()):
            out[f"{which}/{i}"] = t
    out.update(valid=st.valid, mask=rollout.mask, last_values=rollout.last_values)
    out.update(step=st.step, shared=st.shared, bound=st.observations is not None)
    return out


def _assert_same(got: dict[str, Any], want: dict[str, Any]) -> None:
    assert got.keys() == want.keys()
    for name, value in want.items():
        if isinstance(value, torch.Tensor):
            assert value.dtype == got[name].dtype and value.shape == got[name].shape, name
            assert torch.equal(got[name], value), name  # a NaN left from the poison: unequal
        else:
            assert got[name] == value, name


@pytest.mark.parametrize("copy", [False, True], ids=["shared", "copied"])
@pytest.mark.parametrize("case", list(CASES))
def test_new_storage_equals_the_zero_filled_one(case, copy, monkeypatch):
    with monkeypatch.context() as m:  # today's storage: every field zeroed
        m.setattr(storage_for, "_WRITTEN", frozenset())
        want = _convert(case, copy=copy)
    want_state = _state(want)
    for fill in (0, 1):
        with monkeypatch.context() as m:
            m.setattr(torch, "empty", _poisoned_empty(fill))
            got = _convert(case, copy=copy)
        _assert_same(_state(got), want_state)
        # The same again into the storage made (given storages are not reallocated).
        _assert_same(_state(_convert(case, copy=copy, storage=got.storage)), want_state)
    if want.storage.training_type == "rl":
        want.storage.compute_returns(want.last_values, GAMMA, 0.95)
        got.storage.compute_returns(got.last_values, GAMMA, 0.95)
        _assert_same(_state(got), _state(want))


def test_meta_device_is_refused_as_before():
    with pytest.raises(ValueError, match="meta device holds no data"):
        _convert("per_env", device="meta")


@pytest.mark.parametrize(
    "case",
    ["per_env", "per_chunk padded", "per_chunk hidden", "runner next-step", "runner vector steps"],
)
def test_only_the_returns_and_advantages_are_zero_filled(case, monkeypatch):
    zeros, made = torch.zeros, []

    def counted(*args: Any, **kwargs: Any) -> torch.Tensor:
        out = zeros(*args, **kwargs)
        made.append((tuple(out.shape), out.dtype))
        return out

    with monkeypatch.context() as m:
        m.setattr(torch, "zeros", counted)
        st = _convert(case).storage
    assert made == [(tuple(st.returns.shape), st.returns.dtype)] * 2  # and the advantages


def test_public_constructor_still_zeroes_every_field(monkeypatch):
    monkeypatch.setattr(torch, "empty", _poisoned_empty(1))
    st = RolloutStorage(
        "rl", 3, 4, {"a": (2,), "b": ((1,), torch.int8)}, (2,), actor_hidden_state=((1, 3), (1, 3))
    )
    for tensor in [*st.tensors.values(), *st.saved_hidden_states_actor]:
        assert not tensor.any()


def test_a_copy_into_its_own_tensor_is_dropped():
    tensors = {"obs": torch.arange(6.0).view(3, 2, 1), "r": torch.zeros(3, 2, 1)}
    dst = tensors["obs"]
    copies, _ = unalias([(dst[0:3], dst), (tensors["r"], dst)], [], tensors, set())
    assert len(copies) == 1 and copies[0][0] is tensors["r"]
    assert copies[0][1] is dst  # the obs is no longer written: read as it is, no clone


@pytest.mark.parametrize("copy", [False, True], ids=["shared", "copied"])
@pytest.mark.parametrize("window", ["transitions", "vector_steps"])
def test_gathered_fields_are_not_copied_into_themselves(window, copy, monkeypatch):
    """Into a given storage: fields gathered in place (observations, actions, values,
    log-probs) are not cloned and copied back (``copy=True`` cloned all four, the default
    the values and log-probs)."""
    make, options = _runner(window=window), CASES["runner next-step"][1]
    storage = episodes_to_rollout(make(), gamma=GAMMA, value_fn=value_fn, copy=True, **options)
    want = _state(episodes_to_rollout(make(), gamma=GAMMA, value_fn=value_fn, **options))
    chunks = make()
    clone, cloned = torch.Tensor.clone, []

    def counted(self: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
        cloned.append(tuple(self.shape))
        return clone(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "clone", counted)
    got = episodes_to_rollout(
        chunks, gamma=GAMMA, value_fn=value_fn, copy=copy, storage=storage.storage, **options
    )
    monkeypatch.undo()
    steps = tuple(storage.storage.rewards.shape[:2])
    assert [shape for shape in cloned if shape[:2] == steps] == []
    if copy:
        want["shared"] = frozenset()  # copied: nothing taken
    _assert_same(_state(got), want)


def _longdouble(field: str) -> SingleAgentEpisode:
    """A teacher's episode whose ``field`` column holds ``np.longdouble`` values."""
    steps = np.arange(8.0).reshape(4, 2)
    kinds = {name: np.longdouble if name == field else np.float32 for name in ("obs", "teacher")}
    return SingleAgentEpisode(
        observations=list(steps.astype(kinds["obs"])),
        actions=list(steps[:3].astype(np.float32)),
        rewards=[1.0, 1.0, 1.0],
        len_lookback_buffer=0,
        extra_model_outputs={"teacher": list(steps[:3].astype(kinds["teacher"]))},
    )


@pytest.mark.parametrize("layout", ["per_env", "per_chunk"])
@pytest.mark.parametrize(
    ("field", "named"),
    [("obs", "observations"), ("teacher", "'teacher' outputs")],
)
def test_a_longdouble_column_is_named_in_the_refusal(field, named, layout):
    chunks = [_longdouble(field), _longdouble(field)]
    with pytest.raises(TypeError, match=f"these chunks' {named} hold float128 values"):
        episodes_to_rollout(
            chunks, gamma=GAMMA, keys=TEACH, training_type="distillation", layout=layout
        )
