"""Dataset readers: list-mode rows in the step readers, and load_episode(numpy=True).

- ``Dataset.steps``, ``TransitionDataset`` and ``SequenceDataset`` give a list-mode piece's
  items as a numpy'd piece holds them wherever the column's space says where the leaves are:
  a Box (Discrete, MultiDiscrete, MultiBinary) item given as a list is one row, inside Dict and
  Tuple spaces too; ``read_episodes`` still gives the piece as stored.
- ``load_episode(numpy=True)`` joins the pieces as stored and numpys the joined episode, as
  ``load_episode(numpy=None).to_numpy()`` does.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.io import (
    Dataset,
    DatasetWriter,
    EpisodeWriter,
    load_episode,
    read_episodes,
    validate_dataset,
)
from episodes.io.space_rows import row_plan
from episodes.io.torch_data import SequenceDataset, TransitionDataset

BOX2 = gym.spaces.Box(-5, 5, (2,), np.float32)
DISCRETE = gym.spaces.Discrete(4)


def _same(a: Any, b: Any) -> bool:
    """Equal in nesting (dict, list, tuple), leaf types, dtypes, shapes and values."""
    if isinstance(a, dict):
        return type(b) is dict and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return (
            type(a) is type(b) and len(a) == len(b) and all(map(_same, a, b))  # type: ignore[arg-type]
        )
    if type(a) is not type(b):
        return False
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and bool(np.array_equal(a, b))


# (observation space, observations, action space, actions): items as a list-mode episode
# records them; the same episode numpy'd is what the readers must give.
CASES: dict[str, tuple[Any, list[Any], Any, list[Any]]] = {
    "box-float-lists": (BOX2, [[0.0, 1.0], [1.0, 2.0], [2.0, 3.0]], None, [0, 1]),
    "box-int-lists": (BOX2, [[0, 1], [1, 2], [2, 3]], None, [0, 1]),
    "box-int-and-float": (BOX2, [[0, 1.5], [1, 2.5], [2, 3.5]], None, [0, 1]),
    "box-tuples": (BOX2, [(0.0, 1.0), (1.0, 2.0), (2.0, 3.0)], None, [0, 1]),
    "box-2x2-nested": (
        gym.spaces.Box(-5, 5, (2, 2)),
        [[[0.0, 1.0], [2.0, 3.0]], [[1.0, 1.0], [2.0, 2.0]], [[4.0, 3.0], [2.0, 1.0]]],
        None,
        [0, 1],
    ),
    "box-list-of-arrays": (
        gym.spaces.Box(-5, 5, (2, 3), np.float32),
        [[np.full(3, i, np.float32), np.full(3, -i, np.float32)] for i in range(3)],
        None,
        [0, 1],
    ),
    "box-40-components": (
        gym.spaces.Box(-99, 99, (40,)),
        [[float(i + j) for j in range(40)] for i in range(3)],
        None,
        [0, 1],
    ),
    "multi-discrete": (gym.spaces.MultiDiscrete([3, 3]), [[0, 1], [2, 2], [1, 0]], None, [0, 1]),
    "multi-binary": (gym.spaces.MultiBinary(3), [[0, 1, 1], [1, 0, 0], [1, 1, 0]], None, [0, 1]),
    "box-actions": (DISCRETE, [0, 1, 2], BOX2, [[0.5, -0.5], [1.0, -1.0]]),
    "dict": (
        gym.spaces.Dict({"pos": BOX2, "n": DISCRETE}),
        [{"pos": [0.0, 1.0], "n": 1}, {"pos": [1.0, 2.0], "n": 2}, {"pos": [2.0, 3.0], "n": 3}],
        None,
        [0, 1],
    ),
    "tuple-of-lists": (
        gym.spaces.Tuple((DISCRETE, gym.spaces.MultiBinary(2))),
        [[1, [0, 1]], [2, [1, 1]], [3, [1, 0]]],
        None,
        [0, 1],
    ),
    "dict-in-tuple": (
        gym.spaces.Tuple((gym.spaces.Dict({"b": BOX2}), BOX2)),
        [({"b": [float(i), i + 1.0]}, [i + 5.0, i + 6.0]) for i in range(3)],
        None,
        [0, 1],
    ),
}


def _episode(id_: str, case: str, numpy: bool) -> SingleAgentEpisode:
    obs_space, observations, act_space, actions = CASES[case]
    episode = SingleAgentEpisode(
        id_,
        observations=observations,
        actions=actions,
        rewards=[1.0, 0.5],
        observation_space=obs_space,
        action_space=act_space,
        len_lookback_buffer=0,
    )
    return episode.to_numpy() if numpy else episode


def _write(path: Path, case: str) -> None:
    with DatasetWriter(path) as w:
        w.write_many([_episode("list", case, False), _episode("numpy", case, True)])


# ----------------------------------------------------------- list-mode rows in step reads (1)
@pytest.mark.parametrize("case", list(CASES))
def test_step_readers_give_list_mode_items_as_a_numpyd_piece_holds_them(
    tmp_path: Path, case: str
) -> None:
    _write(tmp_path, case)
    ds = Dataset(tmp_path)
    listed, numpyd = ds.steps(0, 0, 2), ds.steps(1, 0, 2)
    for name in ("observations", "actions", "rewards"):
        assert _same(numpyd[name], listed[name]), name
    transitions, sequences = TransitionDataset(tmp_path), SequenceDataset(tmp_path, length=2)
    assert len(transitions) == 4 and len(sequences) == 2
    for name in ("obs", "next_obs", "actions", "rewards"):
        for t in range(2):
            assert _same(transitions[2 + t][name], transitions[t][name]), (name, t)
    for name in ("obs", "actions", "rewards"):
        assert _same(sequences[1][name], sequences[0][name]), name
    # The episode itself is given as stored: the list-mode piece keeps its lists.
    stored = next(iter(read_episodes(tmp_path)))
    assert not stored.is_numpy and stored == _episode("list", case, False)
    assert _same(stored.get_observations(0), CASES[case][1][0])


def test_list_mode_rows_are_read_only_views_alike_and_copies_are_owned(tmp_path: Path) -> None:
    _write(tmp_path, "box-float-lists")
    steps = Dataset(tmp_path).steps(0, 0, 2)["observations"]
    assert steps.shape == (3, 2) and not steps.flags.writeable
    item = TransitionDataset(tmp_path)[0]["obs"]
    item[0] = 9.0  # an item is the caller's own
    assert TransitionDataset(tmp_path)[0]["obs"].tolist() == [0.0, 1.0]


def test_a_dataloader_batches_list_mode_and_numpyd_pieces_together(tmp_path: Path) -> None:
    _write(tmp_path, "box-float-lists")
    loader = torch.utils.data.DataLoader(TransitionDataset(tmp_path), batch_size=4)
    batch = next(iter(loader))
    assert isinstance(batch["obs"], torch.Tensor) and batch["obs"].shape == (4, 2)
    assert batch["obs"][:2].tolist() == batch["obs"][2:].tolist() == [[0.0, 1.0], [1.0, 2.0]]


@pytest.mark.parametrize(
    ("space", "observations"),
    [
        (None, [[0.0, 1.0], [1.0, 2.0], [2.0, 3.0]]),  # no space: the items' own structure
        (gym.spaces.Sequence(DISCRETE), [[0, 1], [1, 2], [2, 3]]),  # not stackable
        (BOX2, [[0, [1]], [1, [2]], [2, [3]]]),  # ragged: no numpy'd piece holds it
        (
            gym.spaces.Tuple((BOX2,)),
            [[0.0, 1.0], [1.0, 2.0], [2.0, 3.0]],
        ),  # not the space's nesting
    ],
    ids=["no-space", "sequence", "ragged", "other-nesting"],
)
def test_items_no_space_says_are_rows_keep_their_stored_structure(
    tmp_path: Path, space: Any, observations: list[Any]
) -> None:
    episode = SingleAgentEpisode(
        "a",
        observations=observations,
        actions=[0, 1],
        rewards=[1.0, 0.5],
        observation_space=space,
        len_lookback_buffer=0,
    )
    with DatasetWriter(tmp_path) as w:
        w.write(episode)
    got = Dataset(tmp_path).steps(0, 0, 2)["observations"]
    assert isinstance(got, list) and len(got) == 2


@pytest.mark.parametrize(
    ("skeleton", "space", "shapes", "parts"),
    [
        ([0, 0], BOX2, [(5,), (5,)], ((0, 2, (2,)),)),
        ([0, 0], BOX2, [(5,), (5, 3)], (0, 1)),  # leaves of two shapes do not stack
        (
            {"b": [0, 0], "a": 0},
            gym.spaces.Dict({"a": DISCRETE, "b": BOX2}),
            [(5,)] * 3,
            (0, (1, 3, (2,))),
        ),  # dm-tree order: sorted keys
        ([[0, 0], [0]], gym.spaces.Box(0, 1, (2, 2)), [(5,)] * 3, (0, 1, 2)),  # ragged
        (0, BOX2, [(5, 2)], None),  # one leaf: nothing to join
    ],
    ids=["box", "two-shapes", "dict-order", "ragged", "flat"],
)
def test_row_plan_joins_the_leaves_numpy_would_stack(
    skeleton: Any, space: Any, shapes: list[tuple[int, ...]], parts: Any
) -> None:
    plan = row_plan(skeleton, space, [np.zeros(s) for s in shapes])
    if parts is None or all(isinstance(p, int) for p in parts):
        assert plan is None
    else:
        assert plan is not None and plan.parts == parts


# ------------------------------------------------------- load_episode(numpy=True) joins (2)
def _pieces(rewards: list[Any]) -> list[SingleAgentEpisode]:
    episode = SingleAgentEpisode(
        "e",
        observations=list(range(len(rewards) + 1)),
        actions=[0] * len(rewards),
        rewards=rewards,
        len_lookback_buffer=0,
    )
    return [episode.slice(slice(0, 2)), episode.slice(slice(2, len(rewards)))]


@pytest.mark.parametrize("version", [1, 2], ids=["v1", "v2"])
@pytest.mark.parametrize(
    "rewards",
    [
        [0, 1, 0.5],  # int rewards, then a piece of float ones
        [np.float32(0.25), np.float32(1.0), 0.5],  # float32 scalars, then Python floats
        [True, False, 2],  # bools, then ints
        [0.5, 1.5, 2.5],  # one kind throughout
    ],
    ids=["int-then-float", "float32-then-float", "bool-then-int", "floats"],
)
def test_load_episode_numpy_true_numpys_the_joined_episode(
    tmp_path: Path, version: int, rewards: list[Any]
) -> None:
    writer = EpisodeWriter if version == 1 else DatasetWriter
    with writer(tmp_path) as w:
        w.write_many(_pieces(rewards))
    assert validate_dataset(tmp_path).ok
    want = load_episode(tmp_path, "e").to_numpy()
    got = load_episode(tmp_path, "e", numpy=True)
    assert got.is_numpy and got == want
    assert got.get_rewards().dtype == want.get_rewards().dtype
    assert _same(got.get_observations(), want.get_observations())
