"""``from_dataset`` of nested observations stored in several pieces equals ``add`` of the pieces.

Before the fix, where an episode's pieces stopped was kept as ``np.array`` of the piece's last
observation: a Tuple of differently shaped parts (what ``EnvRunner`` chunks and
``RunnerGroup(write_to=...)`` write in pieces) failed in numpy's words ("inhomogeneous
shape"), and a Dict one became an object array that a later piece of an episode evicted while
loading never equalled ("does not continue where its earlier pieces stopped ... a piece
repeated or missing?"). Now it is the chunk's record row, compared as ``add`` compares a
continuing chunk with the stored episode: both in the buffer's columns.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter
from episodes.io.torch_data import SequenceDataset, TransitionDataset
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer


def _box(shape: tuple[int, ...]) -> gym.spaces.Box:
    return gym.spaces.Box(-100, 100, shape, np.float32)


SPACES: dict[str, Any] = {
    "dict": gym.spaces.Dict({"x": _box((2,)), "k": gym.spaces.Discrete(7)}),
    "tuple of differently shaped parts": gym.spaces.Tuple(
        (_box((2,)), gym.spaces.Discrete(7), _box((3, 2)))
    ),
    "dict in tuple": gym.spaces.Tuple(
        (gym.spaces.Dict({"a": _box((3,)), "b": gym.spaces.Discrete(5)}), _box((2,)))
    ),
    # No space; the later pieces store the dict's leaf as int8, the first as int16 (joined:
    # int16): compared raw, the records' dtypes differ.
    "dict without a space, int16 then int8": None,
}


def _obs(kind: str, t: int, later: bool) -> Any:
    if kind == "dict":
        return {"x": np.full(2, t, np.float32), "k": t % 7}
    if kind == "tuple of differently shaped parts":
        return (np.full(2, t, np.float32), t % 7, np.full((3, 2), -t, np.float32))
    if kind == "dict in tuple":
        return ({"a": np.full(3, t, np.float32), "b": t % 5}, np.full(2, t / 2, np.float32))
    return {"v": np.full(2, t, np.int8 if later else np.int16)}


def _piece(kind: str, id_: str, a: int, b: int, done: bool = False) -> SingleAgentEpisode:
    """Steps ``a`` .. ``b`` of episode ``id_`` (observations ``a`` .. ``b``), numpy'd."""
    return SingleAgentEpisode(
        id_,
        observations=[_obs(kind, t, a > 0) for t in range(a, b + 1)],
        actions=[t % 2 for t in range(a, b)],
        rewards=[float(t) for t in range(a, b)],
        t_started=a,
        terminated=done,
        observation_space=SPACES[kind],
        len_lookback_buffer=0,
    ).to_numpy()


# How episode "a" (9 steps, terminated) and "b" (6 steps, running) are cut, in write order.
PIECINGS = {
    "one piece each": [("a", 0, 9, True), ("b", 0, 6, False)],
    "several pieces": [
        ("a", 0, 4, False),
        ("b", 0, 3, False),
        ("a", 4, 7, False),
        ("b", 3, 6, False),
        ("a", 7, 9, True),
    ],
    "several pieces, the last without steps": [
        ("a", 0, 5, False),
        ("b", 0, 6, False),
        ("a", 5, 9, False),
        ("a", 9, 9, True),
    ],
}
# None holds every step; 8 evicts "a" while it runs (its later pieces come after it is gone).
CAPACITIES = {"every step": None, "evicting a running episode": 8}


def _chunks(kind: str, piecing: str) -> list[SingleAgentEpisode]:
    return [_piece(kind, *cut) for cut in PIECINGS[piecing]]


def _nested_equal(x: Any, y: Any) -> bool:
    if isinstance(x, dict):
        return (
            isinstance(y, dict)
            and x.keys() == y.keys()
            and all(_nested_equal(x[k], y[k]) for k in x)
        )
    if isinstance(x, (tuple, list)):
        return type(x) is type(y) and len(x) == len(y) and all(map(_nested_equal, x, y))
    x, y = np.asarray(x), np.asarray(y)
    return x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)


def _contents(buffer: EpisodeReplayBuffer) -> dict[str, Any]:
    """The buffer's episodes, counters and a seeded sample of each kind, as comparable values."""
    episodes = [
        (
            ep.id_,
            ep.t_started,
            ep.is_terminated,
            ep.is_truncated,
            ep.get_observations(),
            ep.get_actions(),
            ep.get_rewards(),
        )
        for ep in buffer.get_episodes()
    ]
    return {
        "episodes": episodes,
        "counters": (
            buffer.get_episode_ids(),
            buffer.get_num_timesteps(),
            buffer.get_added_timesteps(),
            buffer.get_num_episodes(),
            buffer.get_num_episodes_evicted(),
        ),
        "n-step sample": buffer.sample(6, n_step=3, gamma=0.5),
        "sequence sample": buffer.sample(4, batch_length_T=3, lookback=1, pad=True),
    }


DICTS = ("dict", "dict without a space, int16 then int8")  # a Dict at the top


def _cases(control: bool) -> list[Any]:
    """The cases the fix mends (``control``: those that loaded before, and must still)."""
    return [
        pytest.param(kind, piecing, capacity, prioritized, id=f"{kind}-{piecing}-{cap}-{cls}")
        for kind in SPACES
        for piecing in PIECINGS
        for cap, capacity in CAPACITIES.items()
        # A Tuple's observation failed np.array; a Dict's (an object array) failed only the
        # comparison of an evicted episode's later piece; one piece each needed neither.
        if control == (piecing == "one piece each" or (kind in DICTS and capacity is None))
        for prioritized, cls in ((False, "uniform"), (True, "prioritized"))
    ]


def _compare(tmp_path: Path, kind: str, piecing: str, capacity: Any, prioritized: bool) -> None:
    chunks = _chunks(kind, piecing)
    with DatasetWriter(tmp_path / "data") as writer:
        for chunk in chunks:
            writer.write(chunk)
    loaded = EpisodeReplayBuffer.from_dataset(
        tmp_path / "data", capacity=capacity, prioritized=prioritized, seed=3
    )
    cls = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
    added = cls(capacity or 15, seed=3)
    added.add(chunks)
    want, got = _contents(added), _contents(loaded)
    assert (want["counters"][4] > 0) == (capacity is not None)  # evicted where it should
    for what in want:
        assert _nested_equal(got[what], want[what]), what


@pytest.mark.parametrize(("kind", "piecing", "capacity", "prioritized"), _cases(False))
def test_from_dataset_of_pieces_equals_add_of_them(
    tmp_path: Path, kind: str, piecing: str, capacity: Any, prioritized: bool
) -> None:
    _compare(tmp_path, kind, piecing, capacity, prioritized)


@pytest.mark.parametrize(("kind", "piecing", "capacity", "prioritized"), _cases(True))
def test_controls_equal_add_too(
    tmp_path: Path, kind: str, piecing: str, capacity: Any, prioritized: bool
) -> None:
    _compare(tmp_path, kind, piecing, capacity, prioritized)


@pytest.mark.parametrize("kind", [k for k in SPACES if SPACES[k] is not None])
def test_torch_datasets_join_nested_pieces_as_one(tmp_path: Path, kind: str) -> None:
    """The torch datasets read a nested episode in pieces as the same episode in one piece."""
    for piecing in ("one piece each", "several pieces"):
        with DatasetWriter(tmp_path / piecing) as writer:
            for chunk in _chunks(kind, piecing):
                writer.write(chunk)
    for make in (
        lambda path: TransitionDataset(path, n_step=3, gamma=0.5),
        lambda path: SequenceDataset(path, length=4),
    ):
        whole, cut = make(tmp_path / "one piece each"), make(tmp_path / "several pieces")
        assert len(whole) == len(cut) > 0
        assert sorted(map(repr, whole)) == sorted(map(repr, cut))
