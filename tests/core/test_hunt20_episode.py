"""Hunt 20 on the episode: list-mode sample batches, narrow-float returns, concat durations.

- ``get_sample_batch()`` of a list-mode episode kept its columns as Python lists, where
  RLlib's ``SampleBatch`` makes arrays of them (``batch["rewards"] * 0.99`` failed).
- ``get_return()`` summed float16/float32 rewards in their own dtype (inf, or rounded) and
  gave a complex reward's real part silently.
- ``get_duration_s()`` after ``concat_episode`` spans both chunks (contract §5.3).
"""

from __future__ import annotations

import copy
import itertools
import math
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

import episodes.episode.recording as recording
from episodes import SampleBatch, SingleAgentEpisode
from episodes.io.returns import exact_return

BOX = gym.spaces.Box(-9.0, 9.0, (2,), np.float32)


def _episode(observations: list[Any], numpy: bool = False, **kwargs: Any) -> SingleAgentEpisode:
    n = len(observations) - 1
    kwargs.setdefault("actions", list(range(n)))
    kwargs.setdefault("rewards", [float(i) for i in range(n)])
    kwargs.setdefault("id_", "x")
    episode = SingleAgentEpisode(observations=observations, len_lookback_buffer=0, **kwargs)
    return episode.to_numpy() if numpy else episode


def _leaves(value: Any) -> Any:
    """A column as comparable (dtype, shape, values) leaves, nested as it is."""
    if isinstance(value, dict):
        return {key: _leaves(leaf) for key, leaf in value.items()}
    if isinstance(value, (tuple, list)):
        return type(value)(_leaves(leaf) for leaf in value)
    assert isinstance(value, np.ndarray), type(value)
    return value.dtype, value.shape, value.tolist()


# Each: observations (3, two steps) and extra keyword arguments of the episode.
EPISODES: dict[str, tuple[list[Any], dict[str, Any]]] = {
    "ints": ([0, 1, 2], {}),
    "box rows": ([np.full(2, i, np.float32) for i in range(3)], {"observation_space": BOX}),
    "dict obs": (
        [{"a": np.full(2, i, np.float32), "k": i} for i in range(3)],
        {"observation_space": gym.spaces.Dict({"a": BOX, "k": gym.spaces.Discrete(3)})},
    ),
    "tuple obs": (
        [(i, np.full(2, i, np.float32)) for i in range(3)],
        {"observation_space": gym.spaces.Tuple((gym.spaces.Discrete(3), BOX))},
    ),
    "tuple obs recorded as lists": (
        [[i, np.full(2, i, np.float32)] for i in range(3)],
        {"observation_space": gym.spaces.Tuple((gym.spaces.Discrete(3), BOX))},
    ),
    "dict extra outputs": (
        [0, 1, 2],
        {"extra_model_outputs": {"h": [{"c": np.full(2, i, np.float32)} for i in range(2)]}},
    ),
    "float extra outputs, terminated": (
        [0, 1, 2],
        {"extra_model_outputs": {"vf": [0.5, 0.25]}, "terminated": True},
    ),
    "tuple id": ([0, 1, 2], {"id_": ("run", 1)}),
}


@pytest.mark.parametrize("name", EPISODES)
def test_list_mode_sample_batch_is_the_numpy_episodes(name: str) -> None:
    observations, kwargs = EPISODES[name]
    listed = _episode(observations, **copy.deepcopy(kwargs)).get_sample_batch()
    numpyd = _episode(observations, numpy=True, **copy.deepcopy(kwargs)).get_sample_batch()
    assert sorted(listed) == sorted(numpyd)
    assert listed.count == numpyd.count == 2
    for key in numpyd:
        if key == "infos":
            assert listed[key] == numpyd[key] and type(listed[key]) is list
        else:
            assert _leaves(listed[key]) == _leaves(numpyd[key]), key


def test_list_mode_columns_compute_as_arrays() -> None:
    episode = _episode([0, 1, 2], rewards=[1.0, 2.0], extra_model_outputs={"vf": [0.5, 0.25]})
    batch = episode.get_sample_batch()
    assert (batch["rewards"] * 0.99).tolist() == [0.99, 1.98]
    assert batch["terminateds"].dtype == bool and batch["t"].dtype == np.int64
    assert (batch["vf"] + 1).tolist() == [1.5, 1.25]
    assert episode.get_data_dict()["rewards"] == [1.0, 2.0]  # the data dict keeps its lists


BATCHES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "list": ({"obs": [1, 2]}, {"obs": (np.dtype(np.int64), (2,), [1, 2])}),
    "number": ({"obs": [1, 2], "x": 2.5}, {"x": (np.dtype(np.float64), (), 2.5)}),
    "array kept": ({"obs": np.zeros(2, np.float32)}, {"obs": (np.dtype(np.float32), (2,), [0, 0])}),
    "seq_lens int32": (
        {"obs": np.zeros(6), "seq_lens": [2, 4]},
        {"seq_lens": (np.dtype(np.int32), (2,), [2, 4])},
    ),
    "dict rows": (
        {"obs": [{"a": 1}, {"a": 2}]},
        {"obs": {"a": (np.dtype(np.int64), (2,), [1, 2])}},
    ),
}


@pytest.mark.parametrize("name", BATCHES)
def test_sample_batch_makes_arrays_of_lists_and_numbers(name: str) -> None:
    given, want = BATCHES[name]
    batch = SampleBatch(given)
    for key, leaves in want.items():
        assert _leaves(batch[key]) == leaves


def test_sample_batch_leaves_infos_and_drops_empty_seq_lens() -> None:
    infos = [{"a": 1}, {}]
    batch = SampleBatch({"obs": [1, 2], "infos": infos, "seq_lens": None})
    assert batch["infos"] is infos and "seq_lens" not in batch
    assert "seq_lens" not in SampleBatch(obs=[1, 2], seq_lens=[])


def test_numpy_tuple_column_recorded_as_lists_keeps_its_leaves() -> None:
    # As many parts as steps (2 and 2): the leaves must not be stacked as if they were rows.
    space = gym.spaces.Tuple((gym.spaces.Discrete(3), BOX))
    observations = [[i, np.full(2, i, np.float32)] for i in range(3)]
    batch = _episode(observations, numpy=True, observation_space=space).get_sample_batch()
    assert [leaf.tolist() for leaf in batch["obs"]] == [[0, 1], [[0, 0], [1, 1]]]
    assert batch.count == 2


RAGGED = {
    "arrays of two shapes": [np.zeros(2), np.zeros(3), np.zeros(3)],
    "lists of two lengths": [[1, 2], [1, 2, 3], [1, 2, 3]],
    "tuples of two lengths": [(1, 2), (1, 2, 3), (1, 2, 3)],
}


@pytest.mark.parametrize("name", RAGGED)
def test_ragged_rows_are_a_value_error_naming_the_column(name: str) -> None:
    episode = _episode(RAGGED[name])
    before = episode.get_data_dict()
    with pytest.raises(ValueError, match="SampleBatch column 'obs'"):
        episode.get_sample_batch()
    assert repr(episode.get_data_dict()) == repr(before)


# Each: rewards, the return (exact_return of the same episode agrees).
NARROW = {
    "float16 overflowing its dtype": ([np.float16(60000)] * 2, 120000.0),
    "float16 rounding": ([np.float16(1)] * 3001, 3001.0),
    "float32 overflowing its dtype": ([np.float32(3e38)] * 2, float(np.float32(3e38)) * 2),
    "float16 beside a Python int": ([np.float16(60000), 60000], 120000.0),
}


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("name", NARROW)
def test_get_return_sums_narrow_floats_in_float64(name: str, numpy: bool) -> None:
    rewards, want = NARROW[name]
    episode = _episode(list(range(len(rewards) + 1)), numpy=numpy, rewards=list(rewards))
    got = episode.get_return()
    assert type(got) is float and got == want and got == float(exact_return(episode))


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
def test_get_return_refuses_complex_rewards(numpy: bool) -> None:
    episode = _episode([0, 1, 2], numpy=numpy, rewards=[1 + 2j, 1.0])
    with pytest.raises(TypeError, match="real numbers"):
        episode.get_return()
    assert "return=?" in repr(episode)


def test_get_return_of_huge_ints_is_still_infinite() -> None:
    assert _episode([0, 1, 2], rewards=[2**1100, 1]).get_return() == math.inf


def test_duration_after_concat_spans_both_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = itertools.count(100.0, 0.25)  # every reading a quarter second later
    monkeypatch.setattr(recording, "_now", lambda: next(clock))
    episode = SingleAgentEpisode("a")
    episode.add_env_reset(0)  # 100.0
    episode.add_env_step(1, 0, 1.0)  # 100.25
    successor = episode.cut()  # no step: no clock
    successor.add_env_step(2, 0, 1.0)  # 100.5
    successor.add_env_step(3, 0, 1.0)  # 100.75
    assert episode.get_duration_s() == 0.25
    episode.concat_episode(successor)
    assert episode.get_duration_s() == 0.75  # first step of self to last of the successor


# ------------------------------------------- regressions found against the session's start
_D = gym.spaces.Discrete(5)


def tree_equal(a: Any, b: Any) -> bool:
    if isinstance(a, dict) or isinstance(b, dict):
        return (
            type(a) is type(b) and a.keys() == b.keys() and all(tree_equal(a[k], b[k]) for k in a)
        )
    if isinstance(a, list | tuple) or isinstance(b, list | tuple):
        return type(a) is type(b) and len(a) == len(b) and all(map(tree_equal, a, b))
    return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b)


@pytest.mark.parametrize(
    "space, observations, actions",
    [
        pytest.param(
            gym.spaces.Tuple([gym.spaces.Tuple([_D, _D]), gym.spaces.Tuple([_D, _D])]),
            [[[0, 1], [2, 3]], [[1, 1], [1, 1]], [[4, 4], [4, 4]], [[2, 2], [0, 0]]],
            [0, 1, 0],
            id="tuple-of-tuples-as-lists",
        ),
        pytest.param(
            gym.spaces.Tuple([gym.spaces.Box(-5, 5, (2,), np.float32), gym.spaces.Tuple([_D, _D])]),
            [[np.full(2, t, np.float32), [t, t]] for t in range(4)],
            [[{"b": 1}, 2], [{"b": 0}, 1], [{"b": 1}, 0]],
            id="box-and-tuple-parts, dict-in-list actions without a space",
        ),
    ],
)
def test_numpy_tuple_columns_recorded_as_lists_keep_their_leaves_at_any_depth(
    space: gym.Space, observations: list, actions: list
) -> None:
    ep = SingleAgentEpisode(
        observations=observations, observation_space=space, actions=actions,
        rewards=[1.0, 2.0, 3.0], len_lookback_buffer=0,
    ).to_numpy()  # fmt: skip
    batch = ep.get_sample_batch()
    data = ep.get_data_dict()
    for key in ("obs", "actions"):
        assert tree_equal(batch[key], data[key]), key
    assert batch.count == 3


@pytest.mark.parametrize("empty", [[], (), ""], ids=["list", "tuple", "str"])
def test_empty_extra_model_outputs_read_as_none_as_in_rllib(empty: Any) -> None:
    ep = SingleAgentEpisode(
        observations=[0, 1], actions=[0], rewards=[1.0], extra_model_outputs=empty,
        len_lookback_buffer=0,
    )  # fmt: skip
    assert ep.extra_model_outputs == {}


def test_list_rows_beside_an_array_t_are_still_made_arrays() -> None:
    batch = SampleBatch(
        {
            "t": np.arange(3),
            "obs": [[1, 2], [3, 4], [5, 6]],
            "vf": [np.array([0.5, 1.0])] * 3,
        }
    )
    assert isinstance(batch["obs"], np.ndarray) and batch["obs"].shape == (3, 2)
    assert isinstance(batch["vf"], np.ndarray) and batch["vf"].shape == (3, 2)
    with pytest.raises(ValueError, match="SampleBatch column 'obs'"):
        SampleBatch({"t": np.arange(2), "obs": [[1, 2], [3]]})


def test_user_row_dicts_and_tuples_stack_even_when_square() -> None:
    # Rows whose leaves are as long as the batch has rows are still rows, not Tuple leaves.
    dicts = SampleBatch({"rewards": np.zeros(4), "obs": [{"pos": np.full(4, i)} for i in range(4)]})
    assert dicts["obs"]["pos"].shape == (4, 4)
    pairs = [(np.full(4, i), np.full(4, -i)) for i in range(4)]
    tuples = SampleBatch({"rewards": np.zeros(4), "obs": pairs})
    assert [leaf.shape for leaf in tuples["obs"]] == [(4, 4), (4, 4)]
