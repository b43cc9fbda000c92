"""Session 38: list protocols of ``Rollout.groups``, ``ConnectorPipeline`` and ``SampleBatch``.

* the fast path's ``Rollout.groups`` reads indices, slices and ``==`` as the general path's
  list of lists does (a bool or a float refused, as ``SampledChunks`` refuses them), keeps a
  group once built, and prints briefly;
* ``copy.copy`` of a ``ConnectorPipeline`` owns its list (as a list's copy), and its indices
  are read as ``SampledChunks`` reads them;
* ``SampleBatch[start:stop]`` is the batch of those rows, as RLlib's.
"""

from __future__ import annotations

import copy
import pickle
from collections import OrderedDict, namedtuple
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SampleBatch, SingleAgentEpisode
from episodes.connectors import ConnectorPipeline, FlattenObservations, FrameStack
from episodes.runner import EnvRunner

torch = pytest.importorskip("torch")

from episodes.converter import episodes_to_rollout  # noqa: E402

# ------------------------------------------------------------------------ Rollout.groups


def _policy(obs: Any) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    n = len(obs)
    return np.zeros(n, np.int64), {"vf_preds": np.ones(n), "action_logp": np.zeros(n)}


@pytest.fixture(scope="module")
def both_groups() -> tuple[Any, list[list[SingleAgentEpisode]]]:
    """The fast path's groups and the general path's, of the same chunks (3 envs)."""
    env = gym.make_vec("CartPole-v1", 3, vectorization_mode="sync")
    chunks = EnvRunner(env, _policy, seed=0).sample(4)

    def value_fn(obs: Any) -> np.ndarray:
        return np.ones(len(obs))

    fast = episodes_to_rollout(chunks, gamma=0.99, value_fn=value_fn).groups
    slow = episodes_to_rollout(list(copy.deepcopy(chunks)), gamma=0.99, value_fn=value_fn).groups
    assert type(fast).__name__ == "LazyGroups" and isinstance(slow, list)
    return fast, slow


# index -> None (read as the list reads it) or the error both a list-like read must raise.
GROUP_INDICES: list[tuple[Any, type[Exception] | None]] = [
    (0, None),
    (2, None),
    (-1, None),
    (-3, None),
    (np.int64(1), None),
    (np.int32(-2), None),
    (3, IndexError),
    (-4, IndexError),
    (0.9, TypeError),
    (np.float64(1.5), TypeError),
    ("1", TypeError),
    (None, TypeError),
    (True, TypeError),  # refused as SampledChunks refuses it (a list takes it as 1)
    (np.True_, TypeError),
]


@pytest.mark.parametrize(("index", "error"), GROUP_INDICES, ids=repr)
def test_groups_index_as_a_list(both_groups: Any, index: Any, error: Any) -> None:
    fast, slow = both_groups
    if error is None:
        assert fast[index] == slow[index]
        assert isinstance(fast[index], list)
        return
    with pytest.raises(error):
        fast[index]
    if not isinstance(index, (bool, np.bool_)):
        with pytest.raises(error):
            slow[index]


def _error(read: Any) -> type[Exception] | None:
    try:
        read()
    except Exception as err:  # noqa: BLE001 - the type is the result
        return type(err)
    return None


@pytest.mark.parametrize("index", [True, np.False_, 0.5, "0", None, 7], ids=repr)
def test_groups_refuse_as_sampled_chunks(both_groups: Any, index: Any) -> None:
    fast, _ = both_groups
    chunks = fast._chunks  # the runner's SampledChunks
    assert _error(lambda: fast[index]) is _error(lambda: chunks[index]) is not None


SLICES = [
    slice(None),
    slice(1, None),
    slice(None, -1),
    slice(None, None, -1),
    slice(0, 0),
    slice(-10, 10),
    slice(None, None, 2),
    slice(2, 0, -1),
    slice(5, 9),
]


@pytest.mark.parametrize("where", SLICES, ids=repr)
def test_groups_slice_as_a_list(both_groups: Any, where: slice) -> None:
    fast, slow = both_groups
    part = fast[where]
    assert type(part) is list and all(type(group) is list for group in part)
    assert part == slow[where]


def test_groups_equal_as_a_list(both_groups: Any) -> None:
    fast, slow = both_groups
    lists = [list(group) for group in fast]
    cases = [
        (fast == slow, True),
        (slow == fast, True),
        (fast == lists, True),
        (fast == tuple(lists), True),
        (fast == copy.deepcopy(fast), True),
        (fast == pickle.loads(pickle.dumps(fast)), True),
        (fast == lists[:-1], False),
        (fast == lists[::-1], False),
        (fast != slow, False),
        (fast == "abc", False),
        (fast == 3, False),
    ]
    assert [got for got, _ in cases] == [want for _, want in cases]
    with pytest.raises(TypeError):
        hash(fast)


def test_groups_keep_a_group_as_a_list_does(both_groups: Any) -> None:
    fast, _ = both_groups
    fast = copy.deepcopy(fast)  # the module fixture stays as it was
    first = fast[0]
    assert fast[0] is first and fast[0:1][0] is first and next(iter(fast)) is first
    first.append(first[0])  # as on a list of lists: the change stays
    assert len(fast[0]) == len(first) and fast[0][-1] is first[0]


def test_groups_repr(both_groups: Any) -> None:
    fast, slow = both_groups
    fresh = copy.deepcopy(fast)
    fresh._built.clear()
    chunks = sum(len(group) for group in slow)
    assert repr(fresh) == f"LazyGroups(3 groups, {chunks} chunks, 0 built)"
    fresh[1]
    assert repr(fresh) == f"LazyGroups(3 groups, {chunks} chunks, 1 built)"


# --------------------------------------------------------------------- ConnectorPipeline


def _pipe() -> ConnectorPipeline:
    return ConnectorPipeline([FlattenObservations(), FrameStack(2)])


COPY_EDITS = {
    "append": lambda q: q.append(FlattenObservations()),
    "insert": lambda q: q.insert(0, FlattenObservations()),
    "insert past the end": lambda q: q.insert(10, FlattenObservations()),
}


@pytest.mark.parametrize("edit", list(COPY_EDITS))
def test_pipeline_copy_owns_its_list(edit: str) -> None:
    pipe = _pipe()
    before = list(pipe)
    other = copy.copy(pipe)
    assert type(other) is ConnectorPipeline and all(a is b for a, b in zip(other, pipe))
    COPY_EDITS[edit](other)
    assert list(pipe) == before and len(other) == 3
    deep = copy.deepcopy(pipe)
    COPY_EDITS[edit](deep)
    assert list(pipe) == before


PIPE_INDICES: list[tuple[Any, type[Exception] | None]] = [
    (0, None),
    (-1, None),
    (np.int64(1), None),
    (2, IndexError),
    (-3, IndexError),
    (True, TypeError),  # refused as insert(True, ...) and SampledChunks refuse it
    (np.False_, TypeError),
    (1.0, TypeError),
    ("0", TypeError),
]


@pytest.mark.parametrize(("index", "error"), PIPE_INDICES, ids=repr)
def test_pipeline_index_as_sampled_chunks(index: Any, error: Any) -> None:
    pipe = _pipe()
    if error is None:
        assert pipe[index] is pipe.connectors[int(index)]
    else:
        with pytest.raises(error):
            pipe[index]
    assert pipe[1:] == pipe.connectors[1:] and pipe[::-1] == pipe.connectors[::-1]


# --------------------------------------------------------------------------- SampleBatch

Pair = namedtuple("Pair", "a b")


def _batch() -> SampleBatch:
    return SampleBatch(
        {
            "obs": np.arange(10).reshape(5, 2),
            "actions": [0, 1, 1, 0, 1],
            "rewards": [1.0, 2.0, 3.0, 4.0, 5.0],
            "nested": {"a": np.arange(5), "b": (np.arange(5) * 2, np.arange(5) * 3)},
            "ordered": OrderedDict(x=np.arange(5)),
            "pair": Pair(np.arange(5), np.arange(5) + 1),
            "gamma": 0.99,
            "infos": [{"i": i} for i in range(5)],
        }
    )


def _rows_of(value: Any, rows: list[int]) -> Any:
    """``value`` at ``rows``, built row by row (the expectation, independent of slicing)."""
    if isinstance(value, dict):
        return {key: _rows_of(part, rows) for key, part in value.items()}
    if isinstance(value, tuple):
        return tuple(_rows_of(part, rows) for part in value)
    if isinstance(value, list):
        return [value[r] for r in rows]
    return value if value.ndim == 0 else np.stack([value[r] for r in rows]) if rows else value[:0]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray):
        return np.array_equal(a, b)
    return bool(a == b)


ROW_SLICES = [
    slice(0, 2),
    slice(1, None),
    slice(None, -1),
    slice(-2, None),
    slice(0, 0),
    slice(3, 1),
    slice(5, 10),
    slice(-10, 2),
    slice(None),
    slice(None, None, 2),
    slice(None, None, -1),
    slice(4, 0, -2),
]


@pytest.mark.parametrize("where", ROW_SLICES, ids=repr)
def test_sample_batch_slices_rows(where: slice) -> None:
    batch = _batch()
    rows = list(range(5))[where]
    part = batch[where]
    assert type(part) is SampleBatch and list(part) == list(batch)
    assert len(part) == part.count == len(rows)
    for key in batch:
        want = _rows_of(batch[key], rows)
        assert _same(part[key], want), key
    assert type(part["pair"]) is Pair and type(part["ordered"]) is OrderedDict
    assert part["gamma"] is batch["gamma"]  # a number column has no rows: kept
    assert all(a is b for a, b in zip(part["infos"], batch["infos"][where]))


def test_sample_batch_slice_views_as_rllib() -> None:
    batch = _batch()
    part = batch[1:3]
    part["obs"][0, 0] = -1
    part["nested"]["b"][1][0] = -2
    assert batch["obs"][1, 0] == -1 and batch["nested"]["b"][1][1] == -2  # views, as RLlib
    part["infos"].append({})  # a list is a new list (of the same rows)
    assert len(batch["infos"]) == 5


class _MyBatch(SampleBatch):
    pass


KEY_READS: list[tuple[Any, Any]] = [
    ("actions", np.array([0, 1, 1, 0, 1])),
    ("missing", KeyError),
    (0, KeyError),
    ((0, 1), KeyError),
]


@pytest.mark.parametrize(("key", "want"), KEY_READS, ids=repr)
def test_sample_batch_keys_stay_column_lookups(key: Any, want: Any) -> None:
    batch = _batch()
    if isinstance(want, type):
        with pytest.raises(want):
            batch[key]
    else:
        assert np.array_equal(batch[key], want)


def test_sample_batch_slice_keeps_the_class_and_leaf_lists() -> None:
    sub = _MyBatch({"obs": [1, 2, 3]})
    assert type(sub[1:]) is _MyBatch and sub[1:]["obs"].tolist() == [2, 3]
    space = gym.spaces.Tuple(
        (
            gym.spaces.Box(0, 9, (2,)),
            gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Box(0, 9, (1,)))),
        )
    )
    ep = SingleAgentEpisode(
        "e", observation_space=space, action_space=gym.spaces.Discrete(2), len_lookback_buffer=0
    )

    def item(i: int) -> list[Any]:
        return [np.full(2, i, np.float32), [i % 3, np.full(1, i, np.float32)]]

    ep.add_env_reset(item(0))
    for i in range(1, 5):
        ep.add_env_step(item(i), 1, float(i))
    ep.to_numpy()
    batch = ep.get_sample_batch()
    assert isinstance(batch["obs"], list)  # a numpy'd Tuple column's leaves
    part = batch[1:3]
    assert len(part) == 2 and part["t"].tolist() == [1, 2]
    assert part["obs"][0].tolist() == [[1, 1], [2, 2]]
    assert part["obs"][1][0].tolist() == [1, 2] and part["obs"][1][1].tolist() == [[1], [2]]
    user = SampleBatch({"obs": [1, 2, 3]})
    user["notes"] = ["a", "b", "c"]  # a list set later is rows
    assert user[1:]["notes"] == ["b", "c"]


SEQ_SLICES: list[tuple[slice, Any]] = [
    (slice(0, 2), ([2], [0, 1], [[0]])),
    (slice(2, 5), ([3], [2, 3, 4], [[1]])),
    (slice(2, None), ([3], [2, 3, 4], [[1]])),
    (slice(None), ([2, 3], [0, 1, 2, 3, 4], [[0], [1]])),
    (slice(-3, None), ([3], [2, 3, 4], [[1]])),
    (slice(0, 0), ([], [], [])),
    (slice(1, 4), ValueError),  # RLlib rounds both bounds down to a sequence start
    (slice(0, 3), ValueError),
    (slice(None, None, 2), ValueError),
]


@pytest.mark.parametrize(("where", "want"), SEQ_SLICES, ids=repr)
def test_sample_batch_slices_sequences(where: slice, want: Any) -> None:
    batch = SampleBatch(
        {
            "obs": np.arange(5),
            "seq_lens": [2, 3],
            "state_in_0": np.array([[0], [1]]),
            "infos": list(range(5)),
        }
    )
    if isinstance(want, type):
        with pytest.raises(want):
            batch[where]
        return
    part = batch[where]
    seq_lens, obs, state = want
    assert part["seq_lens"].tolist() == seq_lens and part["seq_lens"].dtype == np.int32
    assert part["obs"].tolist() == obs and part["infos"] == obs and len(part) == len(obs)
    assert part["state_in_0"].tolist() == state


def test_sample_batch_sequences_of_no_rows() -> None:
    # Empty sequences go where RLlib puts them: after a cut, with the rows that follow.
    batch = SampleBatch({"obs": np.arange(4), "seq_lens": [0, 2, 0, 2, 0]})
    assert batch[0:2]["seq_lens"].tolist() == [2, 0]
    assert batch[2:4]["seq_lens"].tolist() == [2, 0]
    assert batch[:]["seq_lens"].tolist() == [2, 0, 2, 0]
