"""Differential pins of session 21: RLlib's nested numpy'd failures hold for Tuple spaces too.

The rows nested-numpy-set, mixed-mode-concat-nested and nested-numpy-lookback were first pinned
with Dict observations; RLlib 2.60 fails the same way for Tuple observations, nested actions
and nested extra model outputs, and its numpy'd buffers cannot ``concat`` or ``extend`` with
nested items. Each test names its docs/deviations.md tag and asserts both sides. Run with the
reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_rllib_session21.py
"""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("ray.rllib")

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402

from tests.differential._rllib_ops import OSAE, RSAE, OBuf, RBuf  # noqa: E402

pytestmark = pytest.mark.differential

BOX = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
TUPLE = gym.spaces.Tuple((gym.spaces.Discrete(3), BOX))
DICT = gym.spaces.Dict({"a": BOX, "b": gym.spaces.Discrete(3)})


def _tuple_obs(i: int) -> tuple[int, np.ndarray]:
    return i % 3, np.full(2, i / 10, np.float32)


def _numpy_tuple_episode(cls: Any, steps: int = 3) -> Any:
    episode = cls("x", observation_space=TUPLE, action_space=gym.spaces.Discrete(2))
    episode.add_env_reset(_tuple_obs(0))
    for i in range(1, steps + 1):
        episode.add_env_step(_tuple_obs(i), 1, 1.0)
    episode.to_numpy()
    return episode


def test_set_on_a_numpy_tuple_column() -> None:  # "nested-numpy-set"
    new = (np.int64(2), np.full(2, 0.5, np.float32))
    ours, theirs = _numpy_tuple_episode(OSAE), _numpy_tuple_episode(RSAE)
    ours.set_observations(new_data=new, at_indices=0)
    got = ours.get_observations(0)
    assert got[0] == 2 and np.array_equal(got[1], new[1])
    assert ours.get_observations(1)[0] == 1  # the next item is untouched
    with pytest.raises(AssertionError):
        theirs.set_observations(new_data=new, at_indices=0)


def _list_parent_numpy_successor(cls: Any) -> tuple[Any, Any]:
    parent = cls("y", observation_space=TUPLE, action_space=gym.spaces.Discrete(2))
    parent.add_env_reset(_tuple_obs(0))
    successor = parent.cut()
    successor.add_env_step(_tuple_obs(1), 1, 1.0)
    successor.to_numpy()
    return parent, successor


def test_list_mode_tuple_episode_concatenating_a_numpy_chunk() -> None:
    # "mixed-mode-concat-nested": RLlib list.extend()s the tuple of leaf arrays.
    ours, ours_next = _list_parent_numpy_successor(OSAE)
    theirs, theirs_next = _list_parent_numpy_successor(RSAE)
    ours.concat_episode(ours_next)
    theirs.concat_episode(theirs_next)
    assert len(ours.get_observations()) == 2
    last = ours.get_observations(-1)
    assert last[0] == 1 and np.array_equal(last[1], _tuple_obs(1)[1])
    leaves = theirs.observations.data[-2:]  # one array per tuple position, not an observation
    assert np.array_equal(leaves[0], [0, 1]) and np.asarray(leaves[1]).shape == (2, 2)


NESTED = {
    "tuple-observations": (TUPLE, gym.spaces.Discrete(2), False),
    "dict-actions": (BOX, DICT, False),
    "nested-extra-outputs": (BOX, gym.spaces.Discrete(2), True),
}


def _numpy_nested_episode(cls: Any, case: str) -> Any:
    obs_space, act_space, nested_extras = NESTED[case]
    episode = cls("x", observation_space=obs_space, action_space=act_space)
    obs_space.seed(0)
    act_space.seed(0)
    episode.add_env_reset(obs_space.sample())
    for i in range(5):
        extras = {"h": {"a": np.full(2, i, np.float32), "b": np.int64(i)}} if nested_extras else {}
        episode.add_env_step(
            obs_space.sample(), act_space.sample(), 1.0, extra_model_outputs=extras
        )
    episode.to_numpy()
    return episode


@pytest.mark.parametrize("case", list(NESTED))
def test_cut_of_nested_numpy_columns_keeps_the_lookback(case: str) -> None:
    # "nested-numpy-lookback": RLlib clamps the lookback with len() of the struct, then its
    # own check inside cut() fails.
    ours = _numpy_nested_episode(OSAE, case).cut(len_lookback_buffer=4)
    ours.validate()
    columns = [ours.observations, ours.actions, *ours.extra_model_outputs.values()]
    assert all(column.lookback == 4 for column in columns)
    with pytest.raises(AssertionError):
        _numpy_nested_episode(RSAE, case).cut(len_lookback_buffer=4)


def test_concat_into_a_numpy_buffer() -> None:  # "buffer-numpy-concat-extend"
    ours, theirs = OBuf([1.0, 2.0], 0), RBuf([1.0, 2.0], 0)
    ours.finalize()
    theirs.finalize()
    ours.concat(OBuf([3.0, 4.0], 1))  # the other's lookback item is not appended
    assert ours.get().tolist() == [1.0, 2.0, 4.0]
    with pytest.raises(AttributeError):
        theirs.concat(RBuf([3.0, 4.0], 1))


def test_extend_a_numpy_buffer_with_dict_items() -> None:  # "buffer-numpy-concat-extend"
    first = {"a": np.zeros(2), "b": 0}
    ours, theirs = OBuf([first], 0), RBuf([dict(first)], 0)
    ours.finalize()
    theirs.finalize()
    ours.extend([{"a": np.ones(2), "b": 1}])
    got = ours.get()
    assert got["a"].tolist() == [[0.0, 0.0], [1.0, 1.0]] and got["b"].tolist() == [0, 1]
    with pytest.raises(ValueError):
        theirs.extend([{"a": np.ones(2), "b": 1}])


NUMBER_COLUMNS = {
    "only a number": {"a": 5},
    "number first": {"a": 5, "b": [1, 2]},
    "number rewards": {"rewards": 1.0, "obs": [1, 2]},
}


@pytest.mark.parametrize("case", list(NUMBER_COLUMNS))
def test_sample_batch_number_columns_count_as_rllibs(case: str) -> None:
    from ray.rllib.policy.sample_batch import SampleBatch as RllibBatch

    from episodes import SampleBatch

    columns = NUMBER_COLUMNS[case]
    assert len(SampleBatch(dict(columns))) == len(RllibBatch(dict(columns)))


READ_FLAGS = {
    "lookback-as-one": {"neg_index_as_lookback": 1},
    "one-hot-as-string": {"one_hot_discrete": "no"},
}


@pytest.mark.parametrize("case", list(READ_FLAGS))
def test_read_flags_must_be_bools(case: str) -> None:  # "flag-types"
    flags = READ_FLAGS[case]
    ours = OBuf([0, 1, 2], 1, gym.spaces.Discrete(3))
    theirs = RBuf([0, 1, 2], 1, gym.spaces.Discrete(3))
    with pytest.raises(TypeError, match=f"{next(iter(flags))} must be a bool"):
        ours.get(-1, **flags)
    truthy = {key: bool(value) for key, value in flags.items()}
    assert np.array_equal(theirs.get(-1, **flags), ours.get(-1, **truthy))


MISSHAPED_FILLS = {
    "flat rows": ([np.zeros(2), np.ones(2)], [9.0, 9.0, 9.0]),
    "nested items": (
        [{"h": np.zeros(2, np.float32)}, {"h": np.ones(2, np.float32)}],
        {"h": np.zeros(5)},
    ),
}


@pytest.mark.parametrize("case", list(MISSHAPED_FILLS))
def test_an_int_read_refuses_a_fill_of_another_shape(case: str) -> None:
    # "nested-fill-no-space": every read form refuses it alike; RLlib's int read returns it.
    items, fill = MISSHAPED_FILLS[case]
    ours, theirs = OBuf(list(items), 0), RBuf(list(items), 0)
    ours.finalize()
    theirs.finalize()
    for index in (5, [5], slice(0, 4)):
        with pytest.raises(ValueError, match="cannot pad this buffer's items"):
            ours.get(index, fill=fill)
    assert theirs.get(5, fill=fill) is fill


def test_empty_list_items_numpy_as_rllibs() -> None:
    ours, theirs = OBuf([[], [], []], 1), RBuf([[], [], []], 1)
    ours.finalize()
    theirs.finalize()
    assert ours.get().shape == theirs.get().shape == (2, 0)
    assert ours.get().dtype == theirs.get().dtype
    assert len(ours) == len(theirs)


def _tagged(base: Any) -> Any:
    class Tagged(base):  # type: ignore[misc, valid-type]
        pass

    episode = Tagged(
        observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 1.0], len_lookback_buffer=0
    )
    episode.tag = "mine"
    return episode


def test_chunks_of_a_subclass() -> None:  # "subclass-chunks"
    ours, theirs = _tagged(OSAE), _tagged(RSAE)
    for make in (lambda e: e.cut(), lambda e: e[0:1], lambda e: e.slice(slice(1, 2))):
        chunk = make(ours)
        assert type(chunk) is type(ours) and chunk.tag == "mine"
        assert type(make(theirs)) is RSAE
