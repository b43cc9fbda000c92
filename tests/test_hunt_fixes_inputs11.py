"""Inputs the runner, the replay buffer and the seeds took quietly, now refused (docs11 hunt).

1. An int column widened to float64 rounded its recorded ints beyond 2**53 (the very reason
   int64 then uint64 is refused); the host's rule now refuses it when the recorded values need
   it (``widened_dtype`` / ``promoted_dtype`` with ``recorded``).
2. ``EnvRunner(seed=...)`` and ``EpisodeReplayBuffer(seed=...)`` took any seed: True ran as
   seed 1, 1.5 and -1 failed later inside gymnasium or numpy. ``episodes.seeds.check_seed``
   is the base check, also behind ``episodes.distributed.context``; the runner, its policy and
   the buffers take the other forms their libraries take (tests/test_regressions_seeds11.py).
3. ``sample(lookback=L)`` ignored ``L`` for transitions and whole episodes (where
   ``pad=True`` is refused); now a ``ValueError``, the generator left as it was.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.runner import EnvRunner, RandomPolicy

# ----------------------------------------------------- 1. int columns widened to float64

I64, U64, F64, F32 = (np.dtype(t) for t in (np.int64, np.uint64, np.float64, np.float32))

ROUNDED = {
    "int64 beyond 2**53": (I64, F64, np.array([2**60 + 1, 7])),
    "negative int64 beyond 2**53": (I64, F32, np.array([-(2**53) - 1])),
    "int64's least value (abs would wrap)": (I64, F64, np.array([np.iinfo(np.int64).min])),
    "uint64 beyond 2**53": (U64, F64, np.array([2**63], np.uint64)),
}


@pytest.mark.parametrize("column, got, recorded", ROUNDED.values(), ids=list(ROUNDED))
def test_floats_after_ints_float64_would_round_are_refused(column, got, recorded):
    from episodes.runner.widening import promoted_dtype, widened_dtype

    rounds = r"^x: got .* would round the column's ints beyond 2\*\*53"
    with pytest.raises(ValueError, match=rounds):
        promoted_dtype(column, got, "x", recorded)
    with pytest.raises(ValueError, match=r"^x: got .*; give every step's values one dtype"):
        widened_dtype(column, np.array([0.5], got), "x", recorded)


EXACT = {
    "ints within 2**53": (I64, F64, np.array([2**53, -(2**53), 0]), F64),
    "no recorded values (a device: dtypes alone)": (I64, F64, None, F64),
    "an empty column": (I64, F64, np.zeros(0, np.int64), F64),
    "int8 into float16 (exact for every int8)": (
        np.dtype(np.int8),
        np.dtype(np.float16),
        np.array([127, -128], np.int8),
        np.dtype(np.float16),
    ),
    "bools": (np.dtype(bool), F32, np.array([True]), F32),
    "a float column takes ints as before": (F64, I64, np.array([0.5]), F64),
}


@pytest.mark.parametrize("column, got, recorded, want", EXACT.values(), ids=list(EXACT))
def test_widenings_that_keep_every_value_still_happen(column, got, recorded, want):
    from episodes.runner.widening import promoted_dtype

    assert promoted_dtype(column, got, "x", recorded) == want


def test_a_fitting_value_never_reads_the_recorded_values():
    from episodes.runner.widening import widened_dtype

    big = np.array([2**60 + 1])
    assert widened_dtype(I64, np.array([3], np.uint64), "x", big) == I64  # fits: no widening


def _int_then_float_runner(first: np.ndarray) -> EnvRunner:
    batches = iter([first, np.array([0.5, 0.5]), np.array([1, 1])])

    def policy(obs: Any) -> Any:
        return np.zeros(len(obs), np.int64), {"x": next(batches)}

    return EnvRunner(gym.make_vec("CartPole-v1", 2, vectorization_mode="sync"), policy, seed=0)


def test_the_runner_refuses_floats_after_ints_float64_would_round():
    runner = _int_then_float_runner(np.array([2**60 + 1, 7]))
    with pytest.raises(ValueError, match=r"extra output 'x'.*beyond 2\*\*53"):
        runner.sample(3)


def test_the_runner_still_widens_small_ints_to_float64():
    chunks = _int_then_float_runner(np.array([2**53, 7])).sample(3)
    x = chunks[0].get_extra_model_outputs("x")
    assert x.dtype == np.float64 and int(x[0]) == 2**53


# ------------------------------------------------------------------------------- 2. seeds

BAD_SEEDS = {
    "True": True,
    "False": False,
    "numpy bool": np.bool_(True),
    "1.5": 1.5,
    "1.0": 1.0,
    "numpy float": np.float64(2.0),
    "-1": -1,
    "numpy -1": np.int64(-1),
    "a string": "1",
}
# Refused by the plain check (and, of another length than num_envs, by the runner); the
# buffers take a list of ints, as np.random.default_rng does.
A_LIST = {"a list": [1]}


def _env() -> gym.vector.VectorEnv:
    return gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")


@pytest.mark.parametrize("seed", [*BAD_SEEDS.values(), *A_LIST.values()], ids=[*BAD_SEEDS, *A_LIST])
def test_check_seed_refuses(seed):
    from episodes.seeds import check_seed

    with pytest.raises(ValueError, match=r"^seed must be None or an int >= 0, got "):
        check_seed(seed)


@pytest.mark.parametrize("seed", [*BAD_SEEDS.values(), *A_LIST.values()], ids=[*BAD_SEEDS, *A_LIST])
def test_env_runner_refuses_a_bad_seed_when_made(seed):
    env = _env()
    with pytest.raises(ValueError, match=r"^seed must be None or an int >= 0"):
        EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=seed)


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("seed", BAD_SEEDS.values(), ids=list(BAD_SEEDS))
def test_replay_buffers_refuse_a_bad_seed(cls, seed):
    with pytest.raises(ValueError, match=r"^seed must be None or an int >= 0"):
        cls(10, seed=seed)


def test_numpy_int_seeds_are_taken_as_ints():
    from episodes.seeds import check_seed

    assert check_seed(np.int64(3)) == 3 and type(check_seed(np.uint8(3))) is int
    assert check_seed(None) is None and check_seed(2**100) == 2**100
    env = _env()
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=np.int64(5))
    assert runner.seed == 5 and type(runner.seed) is int
    env = _env()
    same = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=5)
    assert [c.get_observations(0).tolist() for c in runner.sample(3)] == [
        c.get_observations(0).tolist() for c in same.sample(3)
    ]
    draws = EpisodeReplayBuffer(10, seed=np.int64(4)).rng.integers(0, 1000, 5)
    assert draws.tolist() == EpisodeReplayBuffer(10, seed=4).rng.integers(0, 1000, 5).tolist()


def test_the_distributed_context_uses_the_same_check():
    pytest.importorskip("ray")
    from episodes.distributed import context
    from episodes.seeds import check_seed

    assert context.check_seed is check_seed
    with pytest.raises(ValueError, match="seed must be None or an int >= 0, got True"):
        context.RunnerContext.create(seed=True, index=0)


# ------------------------------------------------------------------ 3. replay lookback


def _buffer(cls: type[EpisodeReplayBuffer] = EpisodeReplayBuffer) -> EpisodeReplayBuffer:
    buf = cls(100, seed=0)
    buf.add(
        SingleAgentEpisode(
            "a",
            observations=[np.full(2, t, np.float32) for t in range(6)],
            actions=[0] * 5,
            rewards=[1.0] * 5,
            len_lookback_buffer=0,
        )
    )
    return buf


IGNORED_LOOKBACK = {
    "transitions": {"lookback": 3},
    "transitions, n-step": {"lookback": 1, "n_step": 2},
    "whole episodes": {"sample_episodes": True, "lookback": 3},
}


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("kwargs", IGNORED_LOOKBACK.values(), ids=list(IGNORED_LOOKBACK))
def test_a_lookback_without_batch_length_T_is_refused(cls, kwargs):
    buf = _buffer(cls)
    state = buf.rng.bit_generator.state
    with pytest.raises(ValueError, match=r"^lookback applies to sequences and episode chunks"):
        buf.sample(2, **kwargs)
    assert buf.rng.bit_generator.state == state
    assert buf.get_num_timesteps() == 5
    assert buf.sample(2)["obs"].tolist() == _buffer(cls).sample(2)["obs"].tolist()


def test_lookback_still_applies_where_documented():
    buf = _buffer()
    assert buf.sample(2, batch_length_T=2, lookback=1)["obs"].shape == (2, 3, 2)
    chunks = buf.sample(2, sample_episodes=True, batch_length_T=2, lookback=1)
    assert all(len(ep) == 2 for ep in chunks)
    assert buf.sample(2, lookback=0)["obs"].shape == (2, 2)
    assert len(buf.sample(1, sample_episodes=True, lookback=0)) == 1


@pytest.mark.parametrize("seed", [True, 1.5, -1], ids=["bool", "float", "negative"])
def test_random_policy_refuses_a_bad_seed(seed):
    import gymnasium as gym

    from episodes.runner import RandomPolicy

    with pytest.raises(ValueError, match="seed"):
        RandomPolicy(gym.spaces.Discrete(2), seed=seed)
