"""Session 19 read fixes: load_episode(numpy=True) bounds the Text padding of the joined
episode, not only of each piece; v2 dataset_info takes the spaces from the shard index without
decoding episode 0; Dataset tells v1 from v2 by the other readers' rule (a killed v1 writer's
leftovers are NotADatasetError everywhere); the torch datasets' and iter_episodes' index
checks say what they expect, at the call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch

import episodes.io.encoding as encoding
import episodes.io.shard_reader as shard_reader
from episodes import SingleAgentEpisode
from episodes.io import (
    CorruptDatasetError,
    Dataset,
    DatasetError,
    DatasetWriter,
    EpisodeWriter,
    NotADatasetError,
    dataset_info,
    load_episode,
    read_episodes,
)
from episodes.io.torch_data import SequenceDataset, TransitionDataset

WIDTH = 1000  # Text(WIDTH): 4 * (WIDTH - 1) bytes of padding per one-character string
STEPS = 39  # 40 observations per piece


def _text_pieces() -> list[SingleAgentEpisode]:
    first = SingleAgentEpisode(
        "a",
        observations=["x"] * (STEPS + 1),
        actions=[0] * STEPS,
        rewards=[1.0] * STEPS,
        observation_space=gym.spaces.Text(WIDTH),
        len_lookback_buffer=0,
    )
    second = first.cut()
    for _ in range(STEPS):
        second.add_env_step("x", 0, 1.0)
    return [first, second]


def _write(path: Path, version: int, pieces: list[SingleAgentEpisode]) -> None:
    if version == 1:
        with EpisodeWriter(path) as w1:
            w1.write_many(pieces)
    else:
        with DatasetWriter(path) as w2:
            w2.write_many(pieces)


PIECE_PADDING = (STEPS + 1) * 4 * (WIDTH - 1)  # one piece's padding, as the readers count it


# ----------------------------------------------------------------- joined Text padding (1)
@pytest.mark.parametrize("version", [1, 2], ids=["v1", "v2"])
def test_joined_text_padding_is_bounded_before_the_piece_is_stacked(
    tmp_path: Path, version: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(tmp_path, version, _text_pieces())
    # Each piece alone is within the bound, the two joined are not (contract: format.md,
    # "Reading untrusted v1 datasets", numpy=True and Text spaces).
    monkeypatch.setattr(encoding, "MAX_TEXT_PADDING", PIECE_PADDING + PIECE_PADDING // 2)
    pieces = list(read_episodes(tmp_path, numpy=True))
    assert [p.get_observations().dtype for p in pieces] == [np.dtype(f"<U{WIDTH}")] * 2
    stacked = []
    real = SingleAgentEpisode.to_numpy

    def to_numpy(self: SingleAgentEpisode, *args: Any, **kwargs: Any) -> Any:
        stacked.append(self.t_started)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SingleAgentEpisode, "to_numpy", to_numpy)
    with pytest.raises(DatasetError, match="cannot be numpy'd") as err:
        load_episode(tmp_path, "a", numpy=True)
    # The joined episode's padding: its pieces share one observation (session 30 joins the
    # pieces first, then numpys the episode once).
    assert f"with {(2 * STEPS + 1) * 4 * (WIDTH - 1)} bytes" in str(err.value)
    assert "read it with numpy=False" in str(err.value)
    assert stacked == []  # refused before any strings were stacked
    # The bound is per load: the pieces still read one by one, and whole without numpy.
    assert len(list(read_episodes(tmp_path, numpy=True))) == 2
    assert len(load_episode(tmp_path, "a", numpy=False)) == 2 * STEPS


@pytest.mark.parametrize("version", [1, 2], ids=["v1", "v2"])
def test_joined_text_padding_within_the_bound_loads(
    tmp_path: Path, version: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write(tmp_path, version, _text_pieces())
    monkeypatch.setattr(encoding, "MAX_TEXT_PADDING", 2 * PIECE_PADDING)
    episode = load_episode(tmp_path, "a", numpy=True)
    assert episode.get_observations().shape == (2 * STEPS + 1,)
    assert episode.get_observations().dtype == np.dtype(f"<U{WIDTH}")


# ---------------------------------------------------------- dataset_info reads no data (2)
def _spaced(id_: str, low: float) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=np.zeros((3, 2), np.float32),
        actions=np.zeros(2, np.int64),
        rewards=np.ones(2, np.float32),
        observation_space=gym.spaces.Box(low, 1, (2,), np.float32),
        action_space=gym.spaces.Discrete(3),
        len_lookback_buffer=0,
    ).to_numpy()


@pytest.mark.parametrize(
    ("data_format", "shard_bytes"),
    [("arrow", None), ("parquet", None), ("arrow", 1)],
    ids=["arrow", "parquet", "a-shard-per-piece"],
)
def test_dataset_info_takes_the_spaces_from_the_index(
    tmp_path: Path, data_format: str, shard_bytes: int | None, monkeypatch: pytest.MonkeyPatch
) -> None:
    kwargs = {} if shard_bytes is None else {"shard_bytes": shard_bytes}
    with DatasetWriter(tmp_path, data_format=data_format, **kwargs) as w:
        w.write_many([_spaced("a", -1.0), _spaced("b", -2.0)])
    first = Dataset(tmp_path).episode(0)

    def decode_rows(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("dataset_info decoded an episode's data")

    monkeypatch.setattr(shard_reader, "decode_rows", decode_rows)
    info = dataset_info(tmp_path)
    assert info.observation_space == first.observation_space
    assert info.observation_space == gym.spaces.Box(-1.0, 1, (2,), np.float32)  # episode 0's
    assert info.action_space == first.action_space == gym.spaces.Discrete(3)


def test_dataset_info_spaces_of_an_empty_v2_dataset_are_none(tmp_path: Path) -> None:
    DatasetWriter(tmp_path).close()
    info = dataset_info(tmp_path)
    assert (info.observation_space, info.action_space) == (None, None)


# --------------------------------------------------- a killed v1 writer's leftovers (3)
def _killed_v1_writer(root: Path) -> None:  # what EpisodeWriter leaves before format.json
    (root / "chunks").mkdir()
    (root / ".lock").touch()
    (root / "manifest.jsonl").touch()


def _manifest_only(root: Path) -> None:
    (root / "manifest.jsonl").write_text("")


def _v1_manifest_line(root: Path) -> None:  # a v1 manifest line, format.json deleted
    (root / "chunks").mkdir()
    (root / "manifest.jsonl").write_text('{"chunk": "chunks/x"}\n')


OPENERS = {
    "Dataset": lambda p: Dataset(p),
    "TransitionDataset": lambda p: TransitionDataset(p),
    "SequenceDataset": lambda p: SequenceDataset(p, length=1),
}


@pytest.mark.parametrize("opener", OPENERS.values(), ids=OPENERS.keys())
@pytest.mark.parametrize(
    "leftovers",
    [_killed_v1_writer, _manifest_only, _v1_manifest_line],
    ids=["killed-v1-writer", "empty-manifest-only", "v1-manifest-no-format-json"],
)
def test_dataset_says_not_a_dataset_as_the_other_readers(
    tmp_path: Path, leftovers: Any, opener: Any
) -> None:
    leftovers(tmp_path)
    with pytest.raises(NotADatasetError) as theirs:
        dataset_info(tmp_path)
    assert "(no format v2 manifest.jsonl, no v1 format.json)" in str(theirs.value)
    with pytest.raises(NotADatasetError) as ours:
        opener(tmp_path)
    assert str(ours.value) == str(theirs.value)


def test_a_damaged_v2_header_beside_shards_is_still_damage(tmp_path: Path) -> None:
    with DatasetWriter(tmp_path) as w:
        w.write(_spaced("a", -1.0))
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_bytes(b"garbage" + manifest.read_bytes()[7:])
    with pytest.raises(CorruptDatasetError):
        Dataset(tmp_path)


# ---------------------------------------------------------------- index messages (5)
@pytest.fixture
def small(tmp_path: Path) -> Path:
    with DatasetWriter(tmp_path) as w:
        w.write_many(
            [
                SingleAgentEpisode(
                    x,
                    observations=[0.0, 1.0, 2.0],
                    actions=[0, 1],
                    rewards=[1.0, 1.0],
                    len_lookback_buffer=0,
                )
                for x in "ab"
            ]
        )
    return tmp_path


BAD_ITEMS = {
    "float-tensor": torch.tensor(1.0),
    "float-array": np.array(1.0),
    "float32-array": np.array(1.0, np.float32),
    "complex-tensor": torch.tensor(1 + 0j),
    "numpy-float": np.float64(1.0),
}


@pytest.mark.parametrize("kind", ["TransitionDataset", "SequenceDataset"])
@pytest.mark.parametrize("index", BAD_ITEMS.values(), ids=BAD_ITEMS.keys())
def test_torch_datasets_refuse_a_float_index_in_their_words(
    small: Path, kind: str, index: Any
) -> None:
    data = OPENERS[kind](small)
    with pytest.raises(TypeError, match=r"^index must be an int, got "):
        data[index]
    # Integer scalars of every kind still index.
    assert data[torch.tensor(1)].keys() == data[np.array(1)].keys() == data[1].keys()


BAD_INDICES = {
    "int": 5,
    "float": 2.0,
    "str": "01",
    "bytes": b"\x00",
    "0-d-array": np.array(1),
    "0-d-tensor": torch.tensor(1),
}


@pytest.mark.parametrize("indices", BAD_INDICES.values(), ids=BAD_INDICES.keys())
def test_iter_episodes_checks_indices_at_the_call(small: Path, indices: Any) -> None:
    with pytest.raises(TypeError, match=r"^indices must be None or an iterable"):
        Dataset(small).iter_episodes(indices)


def test_iter_episodes_does_not_advance_a_generator_at_the_call(small: Path) -> None:
    pulled: list[int] = []

    def indices() -> Any:
        for i in (1, 0):
            pulled.append(i)
            yield i

    it = Dataset(small).iter_episodes(indices())
    assert pulled == []
    assert [e.id_ for e in it] == ["b", "a"]
    assert [e.id_ for e in Dataset(small).iter_episodes(np.array([1]))] == ["b"]
