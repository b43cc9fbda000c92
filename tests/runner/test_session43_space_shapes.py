"""A runner warns when the env's first observations do not fit its declared observation space.

Found by a hunt: gymnasium's vector ``TransformObservation`` without an ``observation_space``
leaves ``single_observation_space`` as it was, so every chunk carried a space that did not
describe its observations (``validate`` passed, datasets stored it), silently.
"""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.wrappers.vector import TransformObservation

from episodes.runner import EnvRunner, RandomPolicy, SpaceMismatchWarning
from episodes.runner.space_shapes import fixed_shapes, space_mismatch

S = gym.spaces


def sample_warnings(env: Any) -> list[str]:
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        runner.sample(3)
        runner.sample(3)  # no reset: nothing more to say
    return [str(w.message) for w in caught if issubclass(w.category, SpaceMismatchWarning)]


def test_a_wrapper_that_changes_observations_but_not_the_space_is_warned_of() -> None:
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    halved = TransformObservation(env, lambda obs: obs[:, :2])  # the space says (4,)
    said = sample_warnings(halved)
    assert len(said) == 1
    assert "observations of shape (2,) per sub-env, where the space says (4,)" in said[0]


FITTING = [
    ("CartPole", lambda: gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")),
    ("FrozenLake (Discrete)", lambda: gym.make_vec("FrozenLake-v1", 2, vectorization_mode="sync")),
    ("Blackjack (Tuple)", lambda: gym.make_vec("Blackjack-v1", 2, vectorization_mode="sync")),
]


@pytest.mark.parametrize("make", [f[1] for f in FITTING], ids=[f[0] for f in FITTING])
def test_observations_that_fit_their_space_are_not_warned_of(make: Any) -> None:
    assert sample_warnings(make()) == []


CASES = [
    ("fits", np.zeros((3, 4)), S.Box(-1, 1, (4,)), None),
    ("no space", np.zeros((3, 4)), None, None),
    ("leaf shape", np.zeros((3, 2)), S.Box(-1, 1, (4,)), "of shape (2,) per sub-env"),
    (
        "unit axis",
        np.zeros((3, 1)),
        S.Box(-1, 1, ()),
        "of shape (1,) per sub-env, where the space says ()",
    ),
    ("Dict key", {"a": np.zeros((3, 2))}, S.Dict({"b": S.Box(0, 1, (2,))}), "nested otherwise"),
    (
        "Dict keys in another order",
        {"b": np.zeros((3, 2)), "a": np.zeros(3, np.int64)},
        S.Dict({"a": S.Discrete(2), "b": S.Box(0, 1, (2,))}),
        None,
    ),
    (
        "a Dict leaf's shape",
        {"a": np.zeros(3, np.int64), "b": np.zeros((3, 5))},
        S.Dict({"a": S.Discrete(2), "b": S.Box(0, 1, (2,))}),
        "observations['b'] of shape (5,)",
    ),
    ("Tuple size", (np.zeros(3), np.zeros(3)), S.Tuple((S.Discrete(2),)), "nested otherwise"),
    ("flat for a Dict", np.zeros((3, 2)), S.Dict({"a": S.Box(0, 1, (2,))}), "nested otherwise"),
]


@pytest.mark.parametrize(
    ("obs", "space", "words"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_space_mismatch_names_what_differs(obs: Any, space: Any, words: str | None) -> None:
    said = space_mismatch(obs, space)
    if words is None:
        assert said is None
    else:
        assert said is not None and words in said


def test_a_torch_env_that_fits_its_space_is_not_warned_of() -> None:
    pytest.importorskip("torch")
    from episodes.envs.torch_cartpole import TorchCartPole

    env = TorchCartPole(4, device="cpu")
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SpaceMismatchWarning)
        runner.sample(2)


def test_the_warning_comes_last_once_per_runner_and_an_error_filter_leaves_it_usable() -> None:
    env = TransformObservation(
        gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"), lambda obs: obs[:, :2]
    )
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SpaceMismatchWarning)
        with pytest.raises(SpaceMismatchWarning):
            runner.sample(3)  # the call completed; only its chunks are not handed out
        chunks = runner.sample(3)  # said once: the runner goes on
    assert chunks[0].t_started == 3  # CartPole lasts longer than 3 steps: it went on
    runner.reset(seed=1)
    with warnings.catch_warnings():
        warnings.simplefilter("error", SpaceMismatchWarning)
        runner.sample(3)  # once per runner, reset() or not


class _Opaque(gym.Space):  # type: ignore[type-arg]
    """A user's space stating no shape of its items (gymnasium's base class takes none)."""

    def contains(self, x: Any) -> bool:
        return True


UNJUDGED = [
    ("a user's space", _Opaque(), np.zeros((2, 3))),
    ("a user's space in a Dict", S.Dict({"a": _Opaque()}), {"a": np.zeros((2, 3))}),
    ("Text", S.Text(4), np.array(["ab", "cd"])),
    ("a Sequence in a Tuple", S.Tuple((S.Sequence(S.Discrete(2)),)), (np.zeros((2, 3)),)),
]


@pytest.mark.parametrize(("space", "obs"), [c[1:] for c in UNJUDGED], ids=[c[0] for c in UNJUDGED])
def test_spaces_without_fixed_shapes_are_not_judged(space: Any, obs: Any) -> None:
    assert not fixed_shapes(space)
    assert space_mismatch(obs, space) is None


class _OpaqueEnv(gym.vector.VectorEnv):  # type: ignore[type-arg]
    """Two sub-envs of 3-float observations under a space of a user's class."""

    def __init__(self) -> None:
        self.num_envs = 2
        self.single_observation_space = _Opaque()
        self.single_action_space = S.Discrete(2)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, 2)
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}

    def reset(self, *, seed: Any = None, options: Any = None) -> Any:
        return np.zeros((2, 3)), {}

    def step(self, actions: Any) -> Any:
        return np.ones((2, 3)), np.ones(2), np.zeros(2, bool), np.zeros(2, bool), {}


def test_a_users_space_recorded_by_the_runner_is_not_warned_of() -> None:
    assert sample_warnings(_OpaqueEnv()) == []
