"""Differential pins of session 20: list-mode sample batches, concat durations, narrow returns.

``SampleBatch`` makes arrays of list columns as RLlib 2.60's does (``np.array``), so flat
columns agree dtype for dtype; nested rows stack as the numpy'd episode's column. Each
deviation test names its docs/deviations.md tag and asserts both sides. Run with the
reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_rllib_session20.py
"""

from __future__ import annotations

import itertools
import types
from typing import Any

import pytest

pytest.importorskip("ray.rllib")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import ray.rllib.env.single_agent_episode as rllib_episode  # noqa: E402

import episodes.episode.recording as recording  # noqa: E402
from tests.differential._rllib_ops import OSAE, RSAE  # noqa: E402

pytestmark = pytest.mark.differential

BOX = gym.spaces.Box(-9.0, 9.0, (2,), np.float32)


def _batch(cls: Any, observations: list[Any], **kwargs: Any) -> Any:
    n = len(observations) - 1
    kwargs.setdefault("actions", list(range(n)))
    kwargs.setdefault("rewards", [float(i) for i in range(n)])
    episode = cls("x", observations=observations, len_lookback_buffer=0, **kwargs)
    return episode.get_sample_batch()


# Each: observations and extra keyword arguments of a list-mode episode of two steps.
FLAT = {
    "ints, terminated": ([0, 1, 2], {"terminated": True}),
    "box rows": ([np.full(2, i, np.float32) for i in range(3)], {"observation_space": BOX}),
    "float32 rewards, truncated": (
        [0, 1, 2],
        {"rewards": [np.float32(0.5), np.float32(1.5)], "truncated": True},
    ),
    "float extra outputs": ([0.5, 1.5, 2.5], {"extra_model_outputs": {"vf": [0.5, 0.25]}}),
    "box actions": ([0, 1, 2], {"actions": [np.zeros(3, np.float32), np.ones(3, np.float32)]}),
}


@pytest.mark.parametrize("name", FLAT)
def test_list_mode_flat_columns_are_rllibs_arrays(name: str) -> None:
    observations, kwargs = FLAT[name]
    ours, theirs = _batch(OSAE, observations, **kwargs), _batch(RSAE, observations, **kwargs)
    assert sorted(ours) == sorted(theirs)
    for key, want in theirs.items():
        got = ours[key]
        if key == "infos":
            assert type(got) is type(want) is list and got == want
            continue
        assert type(got) is type(want) is np.ndarray, key
        assert (got.dtype, got.shape, got.tolist()) == (want.dtype, want.shape, want.tolist())
    assert (ours["rewards"] * 0.99).tolist() == (theirs["rewards"] * 0.99).tolist()


def test_ragged_rows_are_a_value_error_in_both() -> None:
    observations = [np.zeros(2), np.zeros(3), np.zeros(3)]
    with pytest.raises(ValueError, match="SampleBatch column 'obs'"):
        _batch(OSAE, observations)
    with pytest.raises(ValueError, match="inhomogeneous"):
        _batch(RSAE, observations)


def test_nested_rows_stack_leaf_by_leaf() -> None:  # "sample-batch-nested-rows"
    dicts = [{"a": np.full(2, i, np.float32), "k": i} for i in range(3)]
    ours, theirs = _batch(OSAE, dicts)["obs"], _batch(RSAE, dicts)["obs"]
    assert theirs.dtype == object and theirs.shape == (2,) and theirs[1] is dicts[1]
    assert sorted(ours) == ["a", "k"]
    assert ours["a"].dtype == np.float32 and ours["a"].tolist() == [[0, 0], [1, 1]]
    assert ours["k"].tolist() == [0, 1]
    tuples = [(i, np.full(2, i, np.float32)) for i in range(3)]
    with pytest.raises(ValueError, match="inhomogeneous"):
        _batch(RSAE, tuples)
    parts = _batch(OSAE, tuples)["obs"]
    assert type(parts) is tuple and [p.tolist() for p in parts] == [[0, 1], [[0, 0], [1, 1]]]
    # A tuple id: RLlib spreads its parts over a second axis.
    kwargs: dict[str, Any] = dict(observations=[0, 1], actions=[0], rewards=[1.0])
    ids = [
        cls(("run", 1), len_lookback_buffer=0, **kwargs).get_sample_batch() for cls in (OSAE, RSAE)
    ]
    assert ids[0]["eps_id"].dtype == object and ids[0]["eps_id"].tolist() == [("run", 1)]
    assert ids[1]["eps_id"].tolist() == [["run", "1"]]


def _fake_clocks(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every clock reading a quarter second after the last, the same for both libraries.
    clock = itertools.count(100.0, 0.25)
    monkeypatch.setattr(recording, "_now", lambda: next(clock))
    monkeypatch.setattr(
        rllib_episode, "time", types.SimpleNamespace(perf_counter=lambda: next(clock))
    )


@pytest.mark.parametrize("cls", [OSAE, RSAE], ids=["ours", "rllib"])
def test_duration_after_concat(cls: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    # "concat-duration"
    _fake_clocks(monkeypatch)
    episode = cls("a")
    episode.add_env_reset(0)
    episode.add_env_step(1, 0, 1.0)
    successor = episode.cut()
    successor.add_env_step(2, 0, 1.0)
    successor.add_env_step(3, 0, 1.0)
    before = episode.get_duration_s()
    assert before == 0.25
    episode.concat_episode(successor)
    assert episode.get_duration_s() == (0.75 if cls is OSAE else before)


# Each: rewards, RLlib's return, ours.
NARROW = {
    "float16 overflowing": ([np.float16(60000)] * 2, np.float16(np.inf), 120000.0),
    "float16 rounding": ([np.float16(1)] * 3001, np.float16(2048), 3001.0),
    "float32 overflowing": (
        [np.float32(3e38)] * 2,
        np.float32(np.inf),
        float(np.float32(3e38)) * 2,
    ),
}


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # RLlib's sum
@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("name", NARROW)
def test_return_of_narrow_floats(name: str, numpy: bool) -> None:  # "return-narrow-float"
    rewards, theirs, ours = NARROW[name]

    def episode(cls: Any) -> Any:
        ep = cls(
            "x",
            observations=list(range(len(rewards) + 1)),
            actions=[0] * len(rewards),
            rewards=list(rewards),
            len_lookback_buffer=0,
        )
        return ep.to_numpy() if numpy else ep

    got, want = episode(OSAE).get_return(), episode(RSAE).get_return()
    assert type(got) is float and got == ours
    assert want.dtype == theirs.dtype and want == theirs


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
def test_return_of_complex_rewards(numpy: bool) -> None:  # "return-complex"
    def episode(cls: Any) -> Any:
        ep = cls(
            "x",
            observations=[0, 1, 2],
            actions=[0, 0],
            rewards=[1 + 2j, 1.0],
            len_lookback_buffer=0,
        )
        if numpy:
            ep.to_numpy()
        return ep

    assert episode(RSAE).get_return() == 2 + 2j
    with pytest.raises(TypeError, match="real numbers"):
        episode(OSAE).get_return()
