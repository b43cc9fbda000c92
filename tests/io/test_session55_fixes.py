"""Pieces of one id stored in other dtypes, array-likes in infos, and a v2 manifest's order.

``load_episode(s)(numpy=True)`` gives each column the dtype the whole episode's values take
(format.md, "Random access and loading"): pieces stored numpy'd in other dtypes (a later run
appending float64 observations, int64 actions) were joined into the first piece's dtype
instead, rounding values that fit it and refusing the others as pieces that do not join.
Array-likes in infos stay refused, as format.md says ("Columns"), now with a way out named.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.io import (
    CorruptDatasetError,
    DatasetWriter,
    EpisodeWriter,
    UnstorableValueError,
    load_episode,
    load_episodes,
    read_episodes,
)

WRITERS = {"v1": EpisodeWriter, "v2": DatasetWriter}
BIG = 2**40  # no int32 holds it
FINE = 1 + 2**-40  # float32 rounds it to 1.0


def _piece(obs: Any, actions: Any, rewards: Any, *, t_started: int, numpy: bool) -> Any:
    episode = SingleAgentEpisode(
        "a",
        observations=obs,
        actions=actions,
        rewards=rewards,
        t_started=t_started,
        len_lookback_buffer=0,
    )
    return episode.to_numpy() if numpy else episode


def _two_writes(path: Path, fmt: str, first: Any, second: Any) -> None:
    """Two writers, one after the other: a dataset appended to by a later run."""
    for piece in (first, second):
        with WRITERS[fmt](path) as writer:
            writer.write(piece)


def _mixed(numpy_first: bool = True, numpy_second: bool = True) -> tuple[Any, Any]:
    first = _piece(
        np.zeros((2, 2), np.float32),
        np.array([1], np.int32),
        np.array([1], np.int32),
        t_started=0,
        numpy=numpy_first,
    )
    second = _piece(
        np.array([[0.0, 0.0], [FINE, 2.0]]),  # float64, starting where the first ends
        np.array([BIG], np.int64),
        np.array([BIG], np.int64),
        t_started=1,
        numpy=numpy_second,
    )
    return first, second


# (name, first piece numpy'd, second piece numpy'd): each was joined in the first's dtypes
# (or refused) unless the first was stored in list mode.
LAYOUTS = [
    ("both numpy'd", True, True),
    ("numpy'd then list mode", True, False),
    ("list mode then numpy'd", False, True),
    ("both list mode", False, False),
]


@pytest.mark.parametrize("fmt", WRITERS)
@pytest.mark.parametrize(("name", "first_np", "second_np"), LAYOUTS, ids=[c[0] for c in LAYOUTS])
def test_numpy_true_joins_pieces_in_the_dtype_of_their_values(
    tmp_path: Path, fmt: str, name: str, first_np: bool, second_np: bool
) -> None:
    _two_writes(tmp_path, fmt, *_mixed(first_np, second_np))
    stored = read_episodes(tmp_path, numpy=True)
    assert [p.get_actions().dtype.name for p in stored] == ["int32", "int64"]
    [episode] = load_episodes(tmp_path, ["a"], numpy=True)
    obs, actions, rewards = episode.get_observations(), episode.get_actions(), episode.get_rewards()
    assert (obs.dtype.name, actions.dtype.name, rewards.dtype.name) == ("float64", "int64", "int64")
    assert obs.tolist() == [[0.0, 0.0], [0.0, 0.0], [FINE, 2.0]]  # not rounded to float32's 1.0
    assert actions.tolist() == [1, BIG] and rewards.tolist() == [1, BIG]
    assert episode == load_episode(tmp_path, "a", numpy=True)


@pytest.mark.parametrize("fmt", WRITERS)
def test_numpy_none_still_joins_into_the_first_numpyd_piece_as_documented(
    tmp_path: Path, fmt: str
) -> None:
    """format.md: ``numpy=None`` joins as ``concat_episode`` does; ``numpy=True`` widens."""
    _two_writes(tmp_path, fmt, *_mixed())
    with pytest.raises(CorruptDatasetError, match=r"int64 does not fit .* int32"):
        load_episodes(tmp_path, ["a"])
    first, second = _mixed()
    second.observations.data[-1, 0] = 1.5  # fits float32: cast, not refused
    second.actions.data[0] = second.rewards.data[0] = 7
    _two_writes(tmp_path / "fits", fmt, first, second)
    [episode] = load_episodes(tmp_path / "fits", ["a"])
    assert episode.get_observations().dtype == np.float32
    assert episode.get_actions().dtype == np.int32
    [wide] = load_episodes(tmp_path / "fits", ["a"], numpy=True)
    assert (wide.get_observations().dtype, wide.get_actions().dtype) == (np.float64, np.int64)


@pytest.mark.parametrize("fmt", WRITERS)
def test_each_episode_keeps_its_own_dtypes_and_a_lone_piece_is_unchanged(
    tmp_path: Path, fmt: str
) -> None:
    narrow = SingleAgentEpisode("n", observations=np.zeros((1, 2), np.float32)).to_numpy()
    wide = SingleAgentEpisode("w", observations=np.zeros((1, 2))).to_numpy()
    _two_writes(tmp_path, fmt, narrow, wide)
    got = load_episodes(tmp_path, ["n", "w"], numpy=True)
    assert [e.get_observations().dtype.name for e in got] == ["float32", "float64"]


@pytest.mark.parametrize("fmt", WRITERS)
def test_dict_observations_widen_leaf_by_leaf(tmp_path: Path, fmt: str) -> None:
    def obs(pos: Any, tag: str) -> dict[str, Any]:
        return {"pos": pos, "tag": np.str_(tag)}

    first = _piece([obs(np.int8(0), "ab"), obs(np.int8(1), "ab")], [0], [0.5], t_started=0,
                   numpy=True)  # fmt: skip
    second = _piece([obs(np.int16(1), "ab"), obs(np.int16(300), "abcde")], [1], [0.5],
                    t_started=1, numpy=True)  # fmt: skip
    _two_writes(tmp_path, fmt, first, second)
    [episode] = load_episodes(tmp_path, ["a"], numpy=True)
    got = episode.get_observations()
    assert got["pos"].dtype == np.int16 and got["pos"].tolist() == [0, 1, 300]
    assert got["tag"].dtype == np.dtype("<U5") and got["tag"].tolist() == ["ab", "ab", "abcde"]


@pytest.mark.parametrize(
    ("dtypes", "joined"),
    [
        pytest.param(["f4", "f8"], "f8", id="float32 beside float64"),
        pytest.param(["i4", "i8"], "i8", id="int32 beside int64"),
        pytest.param(["?", "i1"], "i1", id="bool beside int8"),
        pytest.param(["i8", "u8"], "f8", id="int64 beside uint64, as numpy stacks them"),
        pytest.param(["<U2", "<U5"], "<U5", id="strings"),
        pytest.param(["<U2", "i8"], None, id="strings beside ints: left as stored"),
        pytest.param(["M8[s]", "M8[ms]"], None, id="datetimes: left as stored"),
    ],
)
def test_joined_dtype(dtypes: list[str], joined: str | None) -> None:
    from episodes.io.piece_dtypes import joined_dtype  # new: the other cases run without it

    got = joined_dtype([np.dtype(d) for d in dtypes])
    assert got == (None if joined is None else np.dtype(joined))


NUMBERS = ["bool", "int8", "uint8", "int16", "int32", "int64", "float16", "float32", "float64"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(NUMBERS), min_size=2, max_size=4))
@example(["int8", "uint8", "float16"])  # numpy's promotion is not associative here
def test_widened_pieces_join_as_their_list_mode_values_stack(dtypes: list[str]) -> None:
    """Numpy'd pieces give what the same pieces in list mode give once numpy'd."""

    def pieces(numpy: bool) -> list[Any]:
        out = []
        for t, name in enumerate(dtypes):
            # Each starts where the one before ends. Rows, not scalars: numpy stacks arrays in
            # the result_type of all their dtypes at once (scalars it promotes one by one,
            # which differs for some mixes: int8, uint8 and float16 give float32, not float16).
            obs = np.array([[t % 2], [(t + 1) % 2]]).astype(name)
            out.append(_piece(list(obs), [0], [1.0], t_started=t, numpy=numpy))
        return out

    from episodes.io.piece_dtypes import widen_pieces

    numpyd, listed = pieces(True), pieces(False)
    widen_pieces(numpyd)
    joined, plain = numpyd[0], listed[0]
    for piece, other in zip(numpyd[1:], listed[1:], strict=True):
        joined.concat_episode(piece)
        plain.concat_episode(other)
    got, want = joined.get_observations(), plain.to_numpy().get_observations()
    assert got.dtype == want.dtype and got.tolist() == want.tolist()


class _ArrayLike:
    """A JAX-like array: numpy reads it through ``__array__`` only."""

    def __init__(self, values: Any) -> None:
        self._values = np.asarray(values)

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return self._values if dtype is None else self._values.astype(dtype)


@pytest.mark.parametrize("fmt", WRITERS)
def test_array_likes_are_read_in_columns_and_refused_in_infos_as_documented(
    tmp_path: Path, fmt: str
) -> None:
    """format.md ("Columns"): array-likes in infos stay refused; the message says what to do."""
    episode = SingleAgentEpisode(
        "a",
        observations=[_ArrayLike([0.0, 1.0]), _ArrayLike([2.0, 3.0])],
        actions=[_ArrayLike(1)],
        rewards=[_ArrayLike(0.5)],
        extra_model_outputs={"vf": [_ArrayLike(np.float32(0.25))]},
        len_lookback_buffer=0,
    )
    with WRITERS[fmt](tmp_path / "columns") as writer:
        writer.write(episode)
    [back] = read_episodes(tmp_path / "columns")
    assert all(type(o) is np.ndarray for o in back.get_observations())
    assert back.get_observations()[1].tolist() == [2.0, 3.0]
    assert type(back.get_actions()[0]) is np.ndarray and back.get_actions()[0].tolist() == 1
    assert back.get_extra_model_outputs("vf")[0].dtype == np.float32
    for infos in ([{"x": _ArrayLike([1.0])}, {}], [{}, {"x": {"y": [_ArrayLike(2)]}}]):
        with_info = SingleAgentEpisode("b", observations=[0, 1], infos=infos, actions=[0],
                                       rewards=[0.0], len_lookback_buffer=0)  # fmt: skip
        with pytest.raises(UnstorableValueError, match=r"infos\[.*array-like: store np\.asarray"):
            with WRITERS[fmt](tmp_path / "infos") as writer:
                writer.write(with_info)


# ------------------------------------------- pieces listed out of order, and relist's order
def _three_pieces() -> list[SingleAgentEpisode]:
    """Episode "a" in three pieces: steps 0..1 (float32), 1..2 and 2..3 (float64, int64)."""
    first = _piece(np.zeros((2, 2), np.float32), np.array([0], np.int32), [1.0], t_started=0,
                   numpy=True)  # fmt: skip
    second = _piece(np.array([[0.0, 0.0], [FINE, 1.0]]), np.array([BIG]), [2.0], t_started=1,
                    numpy=True)  # fmt: skip
    third = SingleAgentEpisode("a", observations=np.array([[FINE, 1.0], [3.0, 3.0]]),
                               actions=np.array([5]), rewards=[3.0], t_started=2,
                               len_lookback_buffer=0, terminated=True).to_numpy()  # fmt: skip
    return [first, second, third]


def _check_whole(path: Path) -> None:
    [episode, other] = load_episodes(path, ["a", "b"], numpy=True)
    assert (episode.t_started, episode.t, episode.is_terminated) == (0, 3, True)
    assert episode.get_observations().tolist() == [[0, 0], [0, 0], [FINE, 1], [3, 3]]
    assert episode.get_actions().tolist() == [0, BIG, 5] and other.get_observations().tolist() == [
        7
    ]
    assert episode == load_episode(path, "a", numpy=True)


def test_pieces_listed_in_another_order_than_written_join_in_time_order(tmp_path: Path) -> None:
    """Writers committing out of order list an episode's later pieces before its first."""
    first, second, third = _three_pieces()
    slow = DatasetWriter(tmp_path, sync=False)
    slow.write(first)
    with DatasetWriter(tmp_path, sync=False) as writer:
        writer.write(third)
        writer.write(SingleAgentEpisode("b", observations=[7]))
    with DatasetWriter(tmp_path, sync=False) as writer:
        writer.write(second)
    slow.close()
    assert [(e.id_, e.t_started) for e in read_episodes(tmp_path)] == [
        ("a", 2), ("b", 0), ("a", 1), ("a", 0)
    ]  # fmt: skip
    _check_whole(tmp_path)


@pytest.mark.parametrize(
    "mtimes",
    [
        pytest.param([3, 2, 1], id="indexes older the later the piece"),
        pytest.param([1, 1, 1], id="one mtime: by shard name"),
        pytest.param([1, 3, 2], id="mixed"),
    ],
)
def test_relist_lists_lost_shards_oldest_index_first_then_by_name(
    tmp_path: Path, mtimes: list[int]
) -> None:
    """format.md ("A manifest that lost lines"): appended oldest index file first.

    Shard names are random (16 hex digits), so they carry no order of their own; equal mtimes
    fall back on the name, so the order is the same at every run.
    """
    from episodes.io import relist_shards

    with DatasetWriter(tmp_path, sync=False) as writer:
        writer.write(SingleAgentEpisode("b", observations=[7]))
    for piece in _three_pieces():  # a shard each
        with DatasetWriter(tmp_path, sync=False) as writer:
            writer.write(piece)
    manifest = tmp_path / "manifest.jsonl"
    lines = manifest.read_bytes().splitlines(keepends=True)
    names = [json.loads(line)["shard"] for line in lines[2:]]
    manifest.write_bytes(b"".join(lines[:2]))  # the three pieces' lines lost
    for name, seconds in zip(names, mtimes, strict=True):
        os.utime(tmp_path / "shards" / f"{name}.json", (seconds, seconds))
    want = [name for _, name in sorted(zip(mtimes, names, strict=True))]
    assert [shard.name for shard in relist_shards(tmp_path, dry_run=True)] == want
    assert [shard.name for shard in relist_shards(tmp_path, sync=False)] == want
    listed = manifest.read_bytes().splitlines()[2:]
    assert [json.loads(line)["shard"] for line in listed] == want
    _check_whole(tmp_path)


@pytest.mark.parametrize("numpy", [None, True], ids=["as_stored", "numpy"])
def test_a_list_mode_piece_outside_the_first_pieces_space_is_refused_either_way(tmp_path, numpy):
    # numpy=True numpys a list-mode piece before the join to widen its dtypes, and a numpy'd
    # piece's steps are not checked against the episode's spaces: one outside them (action 3
    # after a Discrete(2) piece) must stay refused, as numpy=None refuses it.
    first = SingleAgentEpisode(
        "e",
        observations=[[0.0], [0.0]],
        actions=[1],
        rewards=[1.0],
        action_space=gym.spaces.Discrete(2),
        len_lookback_buffer=0,
    ).to_numpy()
    later = SingleAgentEpisode(
        "e",
        observations=[[0.0], [0.0]],
        actions=[3],
        rewards=[1.0],
        t_started=1,
        len_lookback_buffer=0,
    )
    with DatasetWriter(tmp_path / "d") as writer:
        writer.write_many([first, later])
    with pytest.raises(CorruptDatasetError, match="action 3 is not in this episode's action"):
        load_episode(tmp_path / "d", "e", numpy=numpy)
