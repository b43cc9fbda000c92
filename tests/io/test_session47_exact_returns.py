"""A return bound meeting returns the manifest cannot hold reads only those episodes' pieces.

A manifest stores an int return beyond float range as null (NaN); ``filter_dataset`` then sums
that episode's rewards exactly from its pieces. It read every piece of the source to do so, so
a filter on returns cost a pass over the whole dataset as soon as one such episode was in it,
and damage in a piece it neither judged by its rewards nor kept stopped it. Now only the pieces
of the episodes whose return is unknown are read for the sum.
"""

from __future__ import annotations

import json
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from episodes import SingleAgentEpisode
from episodes.io import (
    Dataset,
    DatasetError,
    DatasetWriter,
    EpisodeWriter,
    filter_dataset,
    read_episodes,
)
from episodes.io.returns import exact_returns
from episodes.io.values import id_key

HUGE = 2**1100  # beyond float range: the manifest holds no return for it


def _piece(id_: Any, t0: int, rewards: list[Any], done: bool = False) -> SingleAgentEpisode:
    n = len(rewards)
    return SingleAgentEpisode(
        id_,
        observations=[0.0] * (n + 1),
        actions=[0] * n,
        rewards=rewards,
        t_started=t0,
        terminated=done,
        len_lookback_buffer=0,
    )


# Manifest order: the huge episode's two pieces around a plain one's.
PIECES = [
    lambda: _piece("huge", 0, [HUGE, 1]),
    lambda: _piece("plain", 0, [0.25, 0.25]),
    lambda: _piece("huge", 2, [-HUGE, 2], done=True),
    lambda: _piece("other huge", 0, [HUGE]),
]
PLAIN = 1  # the manifest position of the plain piece


def _v2(path: Path) -> Path:
    with DatasetWriter(path, sync=False, shard_bytes=1) as writer:  # a shard per piece
        writer.write_many(make() for make in PIECES)
    return path


def _v1(path: Path) -> Path:
    with EpisodeWriter(path, sync=False) as writer:
        writer.write_many(make() for make in PIECES)
    return path


def _lose_v2(path: Path, piece: int) -> None:
    """Zeroes the body of the shard holding ``piece``, keeping its size: a read of it fails."""
    name = Dataset(path).shards[piece].name
    data = path / "shards" / f"{name}.arrow"
    raw = bytearray(data.read_bytes())
    raw[8:-8] = bytes(len(raw) - 16)
    data.write_bytes(raw)


def _lose_v1(path: Path, piece: int) -> None:
    """Breaks the header of every array file of chunk ``piece``, keeping their sizes."""
    lines = (path / "manifest.jsonl").read_text().splitlines()
    for array in (path / json.loads(lines[piece])["chunk"]).glob("*.npy"):
        raw = bytearray(array.read_bytes())
        raw[:6] = b"broken"
        array.write_bytes(raw)


WRITE = {"v2": (_v2, _lose_v2), "v1": (_v1, _lose_v1)}

# name: (filter kwargs, the ids kept)
BOUNDS = {
    "min_return": ({"min_return": 1.0}, ["huge", "other huge"]),  # 3 and 2**1100
    "max_return": ({"max_return": 0.1}, []),  # 3, 0.5 and 2**1100: nothing kept
    "both_bounds": ({"min_return": 3.0, "max_return": 3.0}, ["huge"]),
}


@pytest.mark.parametrize("version", WRITE.keys())
@pytest.mark.parametrize("name", BOUNDS.keys())
def test_a_return_filter_sums_unknown_returns_without_reading_other_pieces(
    tmp_path: Path, version: str, name: str
) -> None:
    write, lose = WRITE[version]
    kwargs, ids = BOUNDS[name]
    src = write(tmp_path / "src")
    lose(src, PLAIN)  # the plain episode's return is in the manifest: never read, never kept
    count = filter_dataset(src, tmp_path / "out", **kwargs)
    got = [(e.id_, e.t_started) for e in read_episodes(tmp_path / "out", verify=True)]
    want = [(e.id_, e.t_started) for e in (make() for make in PIECES) if e.id_ in ids]
    assert count == len(got) and got == want


@pytest.mark.parametrize("version", WRITE.keys())
def test_losing_a_piece_of_an_unknown_return_is_still_refused(tmp_path: Path, version: str) -> None:
    write, lose = WRITE[version]
    src = write(tmp_path / "src")
    lose(src, 3)  # "other huge": its return must be summed from this piece
    with pytest.raises(DatasetError):
        filter_dataset(src, tmp_path / "out", min_return=1.0)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("version", WRITE.keys())
def test_exact_returns_of_some_ids_equal_sums_over_all_pieces(tmp_path: Path, version: str) -> None:
    src = WRITE[version][0](tmp_path / "src")
    whole: dict[str, Fraction] = {}
    for piece in (make() for make in PIECES):
        key = id_key(piece.id_)
        whole[key] = whole.get(key, Fraction(0)) + sum(map(Fraction, piece.rewards.get()))
    for ids in (["huge"], ["other huge", "huge"], ["plain"], [], ["absent"]):
        assert exact_returns(src, ids) == {
            id_key(i): whole[id_key(i)] for i in ids if id_key(i) in whole
        }
    # With a stop, the pieces before it only (the huge episode's first piece).
    assert exact_returns(src, ["huge"], stop=2) == {id_key("huge"): HUGE + 1}
