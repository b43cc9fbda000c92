"""Seed forms gymnasium and numpy take, refused by the seed check once it came in (regress11).

``episodes.seeds.check_seed`` (None or an int >= 0) went in front of every seeded object, and
with it ``EnvRunner(seed=[s0, s1])`` (one seed per sub-env, as ``VectorEnv.reset`` takes),
``RandomPolicy(Dict space, seed={key: seed})`` (as ``Space.seed`` takes) and replay buffers
seeded with a numpy ``Generator``, ``SeedSequence``, ``BitGenerator`` or a list of ints (as
``np.random.default_rng`` takes) became a ``ValueError``. Each consumer now takes its library's
forms, every int in them checked as before (a bool, a float, a negative int or a string is
still refused); the runner group keeps the plain int it derives per-runner seeds from.

The results of the forms taken are compared with what the library gives for the same seed,
which is what the code before the check gave.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.runner import EnvRunner, RandomPolicy

BUFFERS = [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer]
REFUSED = r"^seed must be None or an int >= 0"


def _env() -> gym.vector.VectorEnv:
    return gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")


# ------------------------------------------------------------------------------ EnvRunner

# seed given -> the seed VectorEnv.reset gets for the same first observations.
RUNNER_SEEDS: dict[str, tuple[Any, Any]] = {
    "a list": ([1, 2], [1, 2]),
    "a tuple": ((1, 2), [1, 2]),
    "numpy ints in a list": ([np.int64(1), np.uint8(2)], [1, 2]),
    "None for one sub-env": ([None, 3], [None, 3]),
    "an int": (5, 5),
    "a numpy int": (np.int64(5), 5),
}


@pytest.mark.parametrize(("seed", "reset_seed"), RUNNER_SEEDS.values(), ids=list(RUNNER_SEEDS))
def test_env_runner_takes_a_seed_per_sub_env(seed, reset_seed):
    env = _env()
    chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=seed).sample(1)
    first = {c.custom_data["env_index"]: c.get_observations(0) for c in chunks}
    expected, _ = _env().reset(seed=reset_seed)
    seeded = [i for i in range(2) if not isinstance(reset_seed, list) or reset_seed[i] is not None]
    assert seeded and all(np.array_equal(first[i], expected[i]) for i in seeded)


RUNNER_REFUSED = {
    "too few": [1],
    "too many": [1, 2, 3],
    "a bool in it": [True, 2],
    "a float in it": [1.5, 2],
    "a negative int in it": [-1, 2],
    "a string in it": ["1", 2],
    "a numpy array": np.array([1, 2]),  # VectorEnv.reset refuses its numpy ints
    "a dict": {"a": 1},
    "a bool": True,
    "a float": 1.5,
    "a negative int": -1,
}


@pytest.mark.parametrize("seed", RUNNER_REFUSED.values(), ids=list(RUNNER_REFUSED))
def test_env_runner_refuses_other_seeds_when_made(seed):
    env = _env()
    with pytest.raises(ValueError, match=REFUSED):
        EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=seed)


# ---------------------------------------------------------------------------- RandomPolicy

DICT = gym.spaces.Dict({"a": gym.spaces.Discrete(3), "b": gym.spaces.Discrete(4)})
TUPLE = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Discrete(4)))
NESTED = gym.spaces.Dict({"a": gym.spaces.Discrete(3), "t": TUPLE})

# space, seed given, the seed Space.seed gets for the same samples.
POLICY_SEEDS: dict[str, tuple[gym.Space[Any], Any, Any]] = {
    "an int": (gym.spaces.Discrete(5), 3, 3),
    "a dict for a Dict": (DICT, {"a": 1, "b": 2}, {"a": 1, "b": 2}),
    "an int for a Dict": (DICT, 7, 7),
    "a list for a Tuple": (TUPLE, [1, 2], [1, 2]),
    "a tuple for a Tuple": (TUPLE, (1, 2), (1, 2)),
    "nested": (NESTED, {"a": 1, "t": [2, 3]}, {"a": 1, "t": [2, 3]}),
    "numpy ints in a dict": (DICT, {"a": np.int64(1), "b": np.uint8(2)}, {"a": 1, "b": 2}),
}


@pytest.mark.parametrize(
    ("space", "seed", "space_seed"), POLICY_SEEDS.values(), ids=list(POLICY_SEEDS)
)
def test_random_policy_takes_what_space_seed_takes(space, seed, space_seed):
    import copy

    policy = RandomPolicy(copy.deepcopy(space), seed=seed)
    reference = copy.deepcopy(space)
    reference.seed(space_seed)
    assert [str(policy(None)[0]) for _ in range(8)] == [str(reference.sample()) for _ in range(8)]


POLICY_REFUSED: dict[str, tuple[gym.Space[Any], Any]] = {
    "a float in a dict": (DICT, {"a": 1.5, "b": 2}),
    "a bool in a dict": (DICT, {"a": True, "b": 2}),
    "a negative int in a list": (TUPLE, [1, -1]),
    "a string deep inside": (NESTED, {"a": 1, "t": [2, "3"]}),
    "a float": (gym.spaces.Discrete(2), 1.5),
    "a bool": (gym.spaces.Discrete(2), True),
    "a string": (gym.spaces.Discrete(2), "1"),
}


@pytest.mark.parametrize(("space", "seed"), POLICY_REFUSED.values(), ids=list(POLICY_REFUSED))
def test_random_policy_refuses_other_seeds_unseeded(space, seed):
    import copy

    space = copy.deepcopy(space)
    states = [s.np_random.bit_generator.state for s in _leaf_spaces(space)]
    with pytest.raises(ValueError, match=REFUSED):
        RandomPolicy(space, seed=seed)
    assert [s.np_random.bit_generator.state for s in _leaf_spaces(space)] == states


def _leaf_spaces(space: gym.Space[Any]) -> list[gym.Space[Any]]:
    if isinstance(space, gym.spaces.Dict):
        return [leaf for sub in space.spaces.values() for leaf in _leaf_spaces(sub)]
    if isinstance(space, gym.spaces.Tuple):
        return [leaf for sub in space.spaces for leaf in _leaf_spaces(sub)]
    return [space]


# ---------------------------------------------------------------------------- the buffers

# A maker of the seed (the same fresh one each call): a Generator is used itself.
BUFFER_SEEDS: dict[str, Callable[[], Any]] = {
    "a Generator": lambda: np.random.default_rng(0),
    "a SeedSequence": lambda: np.random.SeedSequence(0),
    "a BitGenerator": lambda: np.random.PCG64(0),
    "a list": lambda: [1, 2],
    "a tuple": lambda: (1, 2),
    "a numpy array": lambda: np.array([1, 2]),
    "numpy ints in a list": lambda: [np.int64(1), np.uint8(2)],
    "an int": lambda: 0,
    "a numpy int": lambda: np.int64(0),
}


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("make", BUFFER_SEEDS.values(), ids=list(BUFFER_SEEDS))
def test_replay_buffers_take_what_default_rng_takes(cls, make):
    seed = make()
    buf = cls(10, seed=seed)
    if isinstance(seed, np.random.Generator):
        assert buf.rng is seed
    expected = np.random.default_rng(make()).integers(0, 1000, 8).tolist()
    assert buf.rng.integers(0, 1000, 8).tolist() == expected


BUFFER_REFUSED = {
    "a bool": True,
    "a float": 1.5,
    "a numpy float": np.float64(2.0),
    "a negative int": -1,
    "a string": "1",
    "a negative int in a list": [1, -2],
    "a float in a list": [1, 1.5],
    "a bool in a list": [True],
    "None in a list": [None],
    "a float array": np.array([1.5]),
    "a dict": {"a": 1},
}


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("seed", BUFFER_REFUSED.values(), ids=list(BUFFER_REFUSED))
def test_replay_buffers_refuse_other_seeds(cls, seed):
    with pytest.raises(ValueError, match=REFUSED):
        cls(10, seed=seed)


def _filled(cls: type[EpisodeReplayBuffer], seed: Any) -> EpisodeReplayBuffer:
    buf = cls(100, seed=seed)
    for i in range(3):
        buf.add(
            SingleAgentEpisode(
                f"e{i}",
                observations=[float(t) for t in range(6)],
                actions=[0] * 5,
                rewards=[float(i)] * 5,
                terminated=True,
                len_lookback_buffer=0,
            )
        )
    return buf


@pytest.mark.parametrize("cls", BUFFERS)
@pytest.mark.parametrize("name", ["a Generator", "a SeedSequence", "a list"])
def test_state_and_files_keep_the_generator_of_such_a_seed(cls, name):
    buf = _filled(cls, BUFFER_SEEDS[name]())
    buf.sample(4)
    state = buf.get_state()
    expected = buf.sample(16)["obs"].tolist()
    back = cls(100, seed=5)
    back.set_state(state)
    assert back.sample(16)["obs"].tolist() == expected
    buf = _filled(cls, BUFFER_SEEDS[name]())
    with tempfile.TemporaryDirectory() as tmp:
        buf.save(tmp + "/buf")
        loaded = cls.load(tmp + "/buf")
    assert loaded.sample(16)["obs"].tolist() == buf.sample(16)["obs"].tolist()


# ------------------------------------------------------------- the plain check, the group


@pytest.mark.parametrize(
    "seed",
    [[1, 2], {"a": 1}, np.random.default_rng(0), np.random.SeedSequence(0)],
    ids=["a list", "a dict", "a Generator", "a SeedSequence"],
)
def test_the_plain_check_and_the_group_context_stay_strict(seed):
    from episodes.seeds import check_seed

    with pytest.raises(ValueError, match=r"^seed must be None or an int >= 0, got "):
        check_seed(seed)
    pytest.importorskip("ray")
    from episodes.distributed.context import RunnerContext, runner_seed

    with pytest.raises(ValueError, match=r"^seed must be None or an int >= 0, got "):
        RunnerContext.create(seed=seed, index=0)
    with pytest.raises(ValueError, match=r"^seed must be None or an int >= 0, got "):
        runner_seed(seed, 1)
