"""The helpers offered for writing connectors, and the pipeline, as a connector's author meets them.

- ``sliding_rows``, ``flatten_rows`` and ``concat_rows`` read a list as a container of leaves,
  while a list-mode getter reads a list of per-step items: a connector written from the helpers
  gave transposed rows or windows across a step's own vector, silently. A list may be either
  (a numpy'd column of ``[x, y]`` items reads as a list of per-leaf columns), so the helpers now
  refuse lists with a ``TypeError`` saying how to batch them; the shipped connectors, which read
  lists of leaves, keep doing so.
- ``sliding_rows`` of ``window - 1`` rows (``L = 0``: an episode without steps) raised numpy's
  "window shape cannot be larger than input array shape"; it gives ``[0, window, ...]``.
- ``flatten_rows`` of a batch without rows raised numpy's "cannot reshape array of size 0"; it
  gives float32 ``[0, D]``.
- ``ConnectorPipeline`` handed every connector the caller's own episode list: one that sorted it
  misaligned the columns of the connectors before and after it, and reordered the caller's list.
"""

from __future__ import annotations

import copy
from collections import UserDict
from types import MappingProxyType

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.connectors import (
    AddLearnerColumns,
    ConnectorPipeline,
    EpisodeConnector,
    FlattenObservations,
    FrameStack,
    PrevActionsPrevRewards,
    concat_rows,
    flatten_rows,
    sliding_rows,
)

BOX = gym.spaces.Box(-9, 9, (2,), np.float32)


def _box_chunk() -> SingleAgentEpisode:
    """A chunk with one step of lookback, as the runner cuts them (list mode)."""
    ep = SingleAgentEpisode(observation_space=BOX, action_space=gym.spaces.Discrete(2))
    ep.add_env_reset(np.float32([0, 0]))
    for t in range(1, 4):
        ep.add_env_step(np.float32([t, -t]), 0, 1.0)
    chunk = ep.cut(len_lookback_buffer=1)
    for t in range(4, 7):
        chunk.add_env_step(np.float32([t, -t]), 0, 1.0)
    return chunk


def _numpyd(ep: SingleAgentEpisode) -> SingleAgentEpisode:
    return copy.deepcopy(ep).to_numpy()


def _list_items_episode() -> SingleAgentEpisode:
    """Observations and actions recorded as Python lists, no spaces: lists of leaves numpy'd."""
    return SingleAgentEpisode(
        observations=[[t, -t] for t in range(4)],
        actions=[[1, 2], [3, 4], [5, 6]],
        rewards=[0.0] * 3,
        len_lookback_buffer=0,
    )


# ------------------------------------------------------------------ 1. lists are refused

A0, A1, A2 = np.float32([0, 0]), np.float32([1, -1]), np.float32([2, -2])

LIST_CASES = [
    pytest.param(lambda: sliding_rows([A0, A1, A2], 2), "sliding_rows", id="sliding-rows-of-steps"),
    pytest.param(lambda: sliding_rows([0.0, 1.0, 2.0], 2), "sliding_rows", id="sliding-scalars"),
    pytest.param(lambda: sliding_rows({"a": [A0, A1]}, 1), "sliding_rows", id="sliding-in-dict"),
    pytest.param(lambda: sliding_rows((np.zeros(3), [A0]), 1), "sliding_rows", id="in-tuple"),
    pytest.param(lambda: flatten_rows([A0, A1]), "flatten_rows", id="flatten-square-steps"),
    pytest.param(lambda: flatten_rows([A0, A1, A2], 3), "flatten_rows", id="flatten-3-steps"),
    pytest.param(
        lambda: flatten_rows({"x": [A0, A1]}, name="MyConnector 'obs'"),
        "MyConnector 'obs'",
        id="flatten-named",
    ),
    pytest.param(
        lambda: flatten_rows(MappingProxyType({"a": [A0, A1]})), "flatten_rows", id="in-mapping"
    ),
    pytest.param(lambda: sliding_rows(UserDict(a=[A0, A1]), 1), "sliding_rows", id="in-userdict"),
    pytest.param(lambda: concat_rows([[A0, A1], [A2]]), "concat_rows", id="concat-of-steps"),
    pytest.param(
        lambda: concat_rows([np.zeros((1, 2)), {"a": [A0]}]), "concat_rows", id="concat-second"
    ),
]


@pytest.mark.parametrize(("call", "who"), LIST_CASES)
def test_helpers_refuse_a_list_saying_how_to_batch_it(call, who):
    with pytest.raises(TypeError, match="got a list") as info:
        call()
    message = str(info.value)
    assert message.startswith(f"{who}: ")
    assert "np.stack" in message and "as a tuple" in message


def test_a_list_mode_read_is_refused_where_it_gave_wrong_rows():
    chunk = _box_chunk()
    read = chunk.get_observations(slice(-1, 3), neg_index_as_lookback=True)
    assert type(read) is list  # what the getters give in list mode, fill= or not
    padded = chunk.get_observations(slice(-3, 3), neg_index_as_lookback=True, fill=0.0)
    assert type(padded) is list
    for call in (
        lambda: sliding_rows(read, 2),
        lambda: flatten_rows(read),
        lambda: concat_rows([read, read]),
    ):
        with pytest.raises(TypeError, match="per-step items"):
            call()


class StackTwo(EpisodeConnector):
    """A connector written from the helpers, batching each read first as the error says."""

    def __call__(self, episodes, batch):
        parts = []
        for ep in episodes:
            a, b = self.rows(ep)
            read = ep.get_observations(slice(a - 1, b), neg_index_as_lookback=True)
            parts.append(sliding_rows(np.stack(read) if isinstance(read, list) else read, 2))
        batch["obs"] = concat_rows(parts)
        return batch


@pytest.mark.parametrize("mode", ["list", "numpy"])
def test_a_connector_that_batches_its_reads_matches_frame_stack(mode):
    chunk = _box_chunk()
    if mode == "numpy":
        chunk = _numpyd(chunk)
    got = StackTwo()([chunk], {})["obs"]
    np.testing.assert_array_equal(got, FrameStack(2)([chunk], {})["obs"])
    assert got.shape == (3, 2, 2)


def test_flatten_rows_of_stacked_steps_are_the_steps():
    read = _box_chunk().get_observations(slice(0, 2))
    np.testing.assert_array_equal(flatten_rows(np.stack(read)), np.stack(read))


def test_a_numpyd_list_of_leaves_goes_in_as_a_tuple():
    leaves = _numpyd(_list_items_episode()).get_observations(slice(0, 3))
    assert type(leaves) is list and len(leaves) == 2  # one column per part of [x, y]
    with pytest.raises(TypeError, match="got a list"):
        flatten_rows(leaves)
    assert flatten_rows(tuple(leaves)).tolist() == [[0, 0], [1, -1], [2, -2]]
    windows = sliding_rows(tuple(leaves), 2)
    assert type(windows) is tuple and windows[1].tolist() == [[0, -1], [-1, -2]]


@pytest.mark.parametrize("mode", ["list", "numpy"])
def test_shipped_connectors_still_read_lists_of_leaves(mode):
    ep = _list_items_episode()
    if mode == "numpy":
        ep = _numpyd(ep)
    stacked = FrameStack(2, fill=[0, 0])([ep], {})["obs"]
    assert type(stacked) is list
    assert [leaf.tolist() for leaf in stacked] == [
        [[0, 0], [0, 1], [1, 2]],
        [[0, 0], [0, -1], [-1, -2]],
    ]
    flat = FlattenObservations()([ep], {})["obs"]
    assert flat.tolist() == [[0.0, 0.0], [1.0, -1.0], [2.0, -2.0]]
    flat_stack = FrameStack(2, fill=[0, 0], flatten=True)([ep], {})["obs"]
    assert flat_stack.tolist()[2] == [1.0, -1.0, 2.0, -2.0]


@pytest.mark.parametrize("mode", ["list", "numpy"])
def test_prev_actions_of_list_items_still_window_their_leaves(mode):
    ep = _list_items_episode()
    if mode == "numpy":
        ep = _numpyd(ep)
    prev = PrevActionsPrevRewards(2, 0, one_hot_discrete=False, fill=[0, 0])([ep], {})
    assert [leaf.tolist() for leaf in prev["prev_n_actions"]] == [
        [[0, 0], [0, 1], [1, 3]],
        [[0, 0], [0, 2], [2, 4]],
    ]


# ------------------------------------------------------------------ 2. sliding_rows, L = 0

EMPTY_WINDOWS = [
    pytest.param(np.arange(4, dtype=np.float32).reshape(2, 2), 3, (0, 3, 2), id="2-rows-window-3"),
    pytest.param(np.zeros(1, np.int64), 2, (0, 2), id="1-row-window-2"),
    pytest.param(np.zeros((0, 2), np.bool_), 1, (0, 1, 2), id="no-rows-window-1"),
    pytest.param(np.zeros((2, 2, 3), np.uint8), 3, (0, 3, 2, 3), id="images"),
]


@pytest.mark.parametrize(("value", "window", "shape"), EMPTY_WINDOWS)
def test_sliding_rows_of_window_minus_one_rows_gives_no_windows(value, window, shape):
    got = sliding_rows(value, window)
    assert got.shape == shape and got.dtype == value.dtype
    nested = sliding_rows({"a": value, "b": (value,)}, window)
    assert nested["a"].shape == shape and nested["b"][0].shape == shape


@pytest.mark.parametrize(("rows", "window"), [(1, 3), (0, 2), (2, 5)])
def test_sliding_rows_of_fewer_rows_still_refuses(rows, window):
    with pytest.raises(ValueError):
        sliding_rows(np.zeros((rows, 2)), window)


def test_a_connector_windowing_a_just_reset_episode_gives_no_rows():
    ep = SingleAgentEpisode(observation_space=BOX, action_space=gym.spaces.Discrete(2))
    ep.add_env_reset(np.float32([1, 1]))
    ep.to_numpy()
    read = ep.get_observations(slice(-2, 0), neg_index_as_lookback=True, fill=0.0)
    assert read.shape == (2, 2)
    assert sliding_rows(read, 3).shape == (0, 3, 2)


# ------------------------------------------------------------------ 3. flatten_rows, no rows

NO_ROWS = [
    pytest.param(np.zeros((0, 2), np.float32), 2, id="matrix"),
    pytest.param({"a": np.zeros((0, 2)), "b": np.zeros((0, 3))}, 5, id="dict"),
    pytest.param(np.zeros((0, 2, 2)), 4, id="images"),
    pytest.param((np.zeros(0, np.int64), np.zeros((0, 3), np.uint8)), 4, id="tuple-of-1d"),
    pytest.param(np.zeros((0, 0)), 0, id="no-columns"),
]


@pytest.mark.parametrize(("value", "width"), NO_ROWS)
@pytest.mark.parametrize("rows", [None, 0])
def test_flatten_rows_of_a_batch_without_rows_is_an_empty_matrix(value, width, rows):
    got = flatten_rows(value, rows)
    assert got.shape == (0, width) and got.dtype == np.float32


def test_flatten_rows_of_rows_with_zero_width_leaves():
    got = flatten_rows({"a": np.zeros((3, 0)), "b": np.ones(3)})
    assert got.tolist() == [[1.0], [1.0], [1.0]]


# ------------------------------------------------------------------ 4. the pipeline's list


def _scored(k: int) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(
        observation_space=gym.spaces.Box(-99, 99, (1,), np.float32),
        action_space=gym.spaces.Discrete(2),
    )
    ep.add_env_reset(np.float32([k * 10]))
    for t in range(1, 3):
        ep.add_env_step(np.float32([k * 10 + t]), 0, float(k))
    return ep


def sort_by_return(episodes, batch):  # a connector of a user's, ordering episodes in place
    episodes.sort(key=lambda e: -e.get_return())
    batch["ret"] = np.repeat([e.get_return() for e in episodes], [len(e) for e in episodes])
    return batch


def drop_first(episodes, batch):
    del episodes[0]
    return batch


@pytest.mark.parametrize("meddler", [sort_by_return, drop_first], ids=["sort", "drop"])
def test_a_connector_changing_its_list_leaves_the_others_columns_aligned(meddler):
    episodes = [_scored(0), _scored(1), _scored(2)]
    given = list(episodes)
    pipe = ConnectorPipeline([FrameStack(1), meddler, AddLearnerColumns(["rewards", "eps_id"])])
    batch = pipe(given, {})
    assert given == episodes  # the caller's list, in its order
    ids = [ep.id_ for ep in episodes for _ in range(len(ep))]
    assert batch["eps_id"].tolist() == ids
    assert batch["obs"][:, 0, 0].tolist() == [0.0, 1.0, 10.0, 11.0, 20.0, 21.0]
    assert batch["rewards"].tolist() == [0.0, 0.0, 1.0, 1.0, 2.0, 2.0]


def test_each_connector_gets_its_own_list_of_the_same_episodes():
    seen = []

    def record(episodes, batch):
        seen.append(episodes)
        return batch

    episodes = [_scored(0), _scored(1)]
    ConnectorPipeline([record, record])(episodes, {})
    assert seen[0] is not episodes and seen[1] is not seen[0]
    assert all(type(got) is list and got == episodes for got in seen)
    assert all(a is b for got in seen for a, b in zip(got, episodes))  # no episode copied


# ------------------------------------------------------------------ 5. what a refusal restores


def test_a_refusal_restores_top_level_keys_not_in_place_changes():
    ep = SingleAgentEpisode(observations=[np.float32([0.0])] * 3, actions=[0, 1], rewards=[1, 2])
    obs, meta = np.ones(2), {"a": 1}
    batch = {"obs": obs, "meta": meta}

    def change(episodes, b):
        b["obs"] *= 2  # in place: stays, as documented
        b["meta"]["a"] = 99
        b["new"] = 1  # added: removed again
        b["meta2"] = b.pop("meta")  # a key moved: put back
        return b

    def refuse(episodes, b):
        raise ValueError("refused")

    with pytest.raises(ValueError, match="refused"):
        ConnectorPipeline([change, FrameStack(2), refuse])([ep], batch)
    assert list(batch) == ["obs", "meta"]
    assert batch["obs"] is obs and batch["meta"] is meta
    assert obs.tolist() == [2.0, 2.0] and meta == {"a": 99}
