"""Behaviour that hand-made mutants of ``episodes.io.reader``, ``episodes.io.torch_data`` and
``episodes.io.item_steps`` showed no test pinned (session 46, second batch).

Each test fails with one mutant (named beside it) applied, and passes on the code as it is.
Datasets are written with the io writers (``EpisodeWriter`` for format v1, ``DatasetWriter``
for v2) into ``tmp_path``; what the readers and the torch datasets give back is compared with
the episodes written, item by item, through the public API.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from episodes import SingleAgentEpisode  # noqa: E402
from episodes.io import (  # noqa: E402
    CorruptDatasetError,
    DatasetError,
    DatasetWriter,
    EpisodeWriter,
    load_episode,
    read_episodes,
)
from episodes.io.torch_data import SequenceDataset, TransitionDataset  # noqa: E402
from tests.io._pieces import numbered_piece  # noqa: E402

# A piece: (id, t_started, t_end, end), end "" (not done), "terminated" or "truncated".
# Observations are [episode number, t]: an item's obs says where it comes from.
Piece = tuple[Any, int, int, str]


_piece = numbered_piece


def _v2(path: Path, episodes: list[SingleAgentEpisode], **kwargs: Any) -> Path:
    with DatasetWriter(path, sync=False, **kwargs) as writer:
        writer.write_many(episodes)
    return path


def _v1(path: Path, episodes: list[SingleAgentEpisode]) -> Path:
    with EpisodeWriter(path, sync=False) as writer:
        writer.write_many(episodes)
    return path


WRITERS = {"v1": _v1, "v2": _v2}


def _same(a: Any, b: Any) -> bool:
    """Items equal leaf by leaf (dicts of arrays, numbers, bools)."""
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return bool(np.array_equal(np.asarray(a), np.asarray(b)))


# ------------------------------------------------------------------ reader: flags


@pytest.mark.parametrize("layout", sorted(WRITERS))
@pytest.mark.parametrize("flag", [np.True_, np.False_], ids=["np.True_", "np.False_"])
def test_numpy_booleans_are_taken_as_the_readers_numpy_flag(
    tmp_path: Path, layout: str, flag: Any
) -> None:
    # mutant: read_flags accepts only plain bools for numpy (a numpy bool a TypeError)
    episodes = [_piece("a", 0, 3, "terminated"), _piece("b", 0, 2)]
    path = WRITERS[layout](tmp_path / "d", episodes)
    plain = bool(flag)
    got = list(read_episodes(path, numpy=flag))
    want = list(read_episodes(path, numpy=plain))
    assert got == want and [ep.id_ for ep in got] == ["a", "b"]
    assert load_episode(path, "a", numpy=flag) == load_episode(path, "a", numpy=plain)


# ------------------------------------------------------------------ torch items: indices


@pytest.mark.parametrize("kind", ["transitions", "sequences"])
def test_the_first_item_is_at_minus_len_and_no_further(tmp_path: Path, kind: str) -> None:
    # mutant: item_index refuses index -count (``-count < value`` for ``-count <= value``)
    path = _v2(tmp_path / "d", [_piece("a", 0, 4, "terminated"), _piece("b", 2, 5)])
    data = TransitionDataset(path) if kind == "transitions" else SequenceDataset(path, length=2)
    count = len(data)
    assert count == (7 if kind == "transitions" else 5)
    assert _same(data[-count], data[0]) and _same(data[-1], data[count - 1])
    for bad in (-count - 1, count):
        with pytest.raises(IndexError, match=f"index {bad} out of range for {count} items"):
            data[bad]


@pytest.mark.parametrize("kind", ["transitions", "sequences"])
def test_a_dataset_without_episodes_has_no_items(tmp_path: Path, kind: str) -> None:
    # mutant: __len__ of a dataset without runs is 1
    path = _v2(tmp_path / "d", [])
    data = TransitionDataset(path) if kind == "transitions" else SequenceDataset(path, length=1)
    assert len(data) == 0 and list(data) == []
    with pytest.raises(IndexError, match="index 0 out of range for 0 items"):
        data[0]
    ids, t = data.episode_steps([])
    assert ids.tolist() == [] and t.tolist() == []


# ------------------------------------------------------------------ reader: arguments

BAD_READ_ARGUMENTS = {
    # mutant: bytes taken as a collection of ids (its ints), not refused as one id
    "bytes ids": ({"ids": b"ab"}, "ids must be a collection of ids"),
    # mutant: start and stop not checked as ints (a bool or a float slices, or reaches v2)
    "bool start": ({"start": True}, "start"),
    "float stop": ({"stop": 1.0}, "stop"),
    "bool stop": ({"stop": np.True_}, "stop"),
}


@pytest.mark.parametrize("layout", sorted(WRITERS))
@pytest.mark.parametrize("case", sorted(BAD_READ_ARGUMENTS))
def test_read_episodes_refuses_what_is_no_id_collection_or_int(
    tmp_path: Path, layout: str, case: str
) -> None:
    kwargs, words = BAD_READ_ARGUMENTS[case]
    path = WRITERS[layout](tmp_path / "d", [_piece("a", 0, 2), _piece("b", 0, 1)])
    with pytest.raises(TypeError, match=words):
        list(read_episodes(path, **kwargs))
    # the same values as ints and a list of ids read
    assert [ep.id_ for ep in read_episodes(path, start=1, stop=2)] == ["b"]
    assert [ep.id_ for ep in read_episodes(path, ids=[b"ab", "b"])] == ["b"]


@pytest.mark.parametrize("layout", sorted(WRITERS))
@pytest.mark.parametrize("flags", [{"numpy": "no"}, {"verify": "yes"}, {"numpy": 1}])
def test_bad_read_flags_raise_at_the_call_not_at_the_first_episode(
    tmp_path: Path, layout: str, flags: dict[str, Any]
) -> None:
    # mutants: read_episodes leaves the flags to the chunk reads (a v1 dataset raised
    # lazily); load_episode does not check them (numpy="no" numpy'd a v1 episode)
    path = WRITERS[layout](tmp_path / "d", [_piece("a", 0, 2)])
    with pytest.raises(TypeError, match="must be"):
        read_episodes(path, **flags)  # not iterated
    with pytest.raises(TypeError, match="must be"):
        load_episode(path, "a", **flags)


@pytest.mark.parametrize("layout", sorted(WRITERS))
@pytest.mark.parametrize("ids", [[], (), set()], ids=["list", "tuple", "set"])
def test_an_empty_collection_of_ids_reads_no_episode(tmp_path: Path, layout: str, ids: Any) -> None:
    # mutant: an empty collection of ids is taken as no filter (every episode read)
    path = WRITERS[layout](tmp_path / "d", [_piece("a", 0, 2), _piece("b", 0, 1)])
    assert list(read_episodes(path, ids=ids)) == []
    assert [ep.id_ for ep in read_episodes(path, ids=None)] == ["a", "b"]


# ------------------------------------------------------------------ torch: episode_steps


def test_episode_steps_refuses_complex_and_float_tensors(tmp_path: Path) -> None:
    # mutant: a complex tensor of indices is taken (its real parts)
    path = _v2(tmp_path / "d", [_piece("a", 0, 4, "terminated")])
    data = TransitionDataset(path)
    for bad in (torch.tensor([1 + 0j]), torch.tensor([1.0]), torch.tensor([True])):
        with pytest.raises(TypeError, match="indices must be ints, got a tensor of"):
            data.episode_steps(bad)
    ids, t = data.episode_steps(torch.tensor([1, -1]))
    assert ids.tolist() == ["a", "a"] and t.tolist() == [1, 3]


@pytest.mark.parametrize("indices", [[0], [99], 99, [-99]], ids=str)
def test_a_closed_dataset_refuses_episode_steps_of_any_index(tmp_path: Path, indices: Any) -> None:
    # mutant: episode_steps checks the indices before the dataset being open (an IndexError)
    path = _v2(tmp_path / "d", [_piece("a", 0, 3)])
    data = TransitionDataset(path)
    assert data.episode_steps([0])[1].tolist() == [0]
    data.close()
    with pytest.raises(DatasetError, match="is closed"):
        data.episode_steps(indices)


SHAPED_INDICES = {
    # mutant: an object array of more than one dimension goes through tolist (an empty one
    # of shape (0, 2) became no index at all)
    "empty 2-d object array": np.empty((0, 2), dtype=object),
    "empty 2-d int array": np.empty((0, 2), dtype=np.int64),
    "2-d object array": np.array([[0, 1]], dtype=object),
    "2-d list": [[0], [1]],
}


@pytest.mark.parametrize("case", sorted(SHAPED_INDICES))
def test_episode_steps_refuses_indices_of_more_than_one_dimension(
    tmp_path: Path, case: str
) -> None:
    path = _v2(tmp_path / "d", [_piece("a", 0, 3)])
    data = TransitionDataset(path)
    with pytest.raises(ValueError, match="indices must be one index or a 1-d sequence"):
        data.episode_steps(SHAPED_INDICES[case])
    assert data.episode_steps(np.empty(0, dtype=object))[1].tolist() == []


@pytest.mark.parametrize("given", ["", "ab", b"", b"\x00\x01"], ids=repr)
def test_episode_steps_takes_a_string_or_bytes_as_one_bad_index(tmp_path: Path, given: Any) -> None:
    # mutant: a str or bytes is taken as a sequence of indices (b"\x00\x01" as items 0 and 1,
    # "" as no index)
    path = _v2(tmp_path / "d", [_piece("a", 0, 3)])
    data = TransitionDataset(path)
    with pytest.raises(TypeError, match=f"index must be an int, got {type(given).__name__} "):
        data.episode_steps(given)


JSON_COLUMNS = {
    # mutant: only observations, actions and rewards are checked for JSON storage, not extras
    "mixed extra": ({"extra_model_outputs": {"k": [1, "x"]}}, "extra_model_outputs/k"),
    "mixed actions": ({"actions": [0, "left"]}, "actions"),
}


@pytest.mark.parametrize("kind", ["transitions", "sequences"])
@pytest.mark.parametrize("case", sorted(JSON_COLUMNS))
def test_a_column_stored_as_json_is_refused_for_items(tmp_path: Path, kind: str, case: str) -> None:
    given, name = JSON_COLUMNS[case]
    columns = {"actions": [0, 1], "rewards": [1.0, 1.0], **given}
    episode = SingleAgentEpisode(
        "a", observations=[0.0, 1.0, 2.0], len_lookback_buffer=0, **columns
    )
    path = _v2(tmp_path / "d", [episode])
    data = TransitionDataset(path) if kind == "transitions" else SequenceDataset(path, length=2)
    # the column is named (the message once said only "a column")
    with pytest.raises(DatasetError, match=rf"episode 0: {name} stored as JSON \(mixed"):
        data[0]


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for key in sorted(value) for leaf in _leaves(value[key])]
    return [value]


@pytest.mark.parametrize("kind", ["transitions", "sequences"])
def test_big_endian_columns_come_out_native_and_batch(tmp_path: Path, kind: str) -> None:
    # mutants: the observations/actions/rewards plans, or the extras plans, are not made
    # native (a '>f8' item, which torch refuses)
    steps = 4
    episode = SingleAgentEpisode(  # list mode: each column stacked as given, big-endian
        "a",
        observations=[np.full(2, t, ">f8") for t in range(steps + 1)],
        actions=[np.array(t, ">i4") for t in range(steps)],
        rewards=[np.array(t / 2, ">f8") for t in range(steps)],
        extra_model_outputs={"v": [np.full(3, -t, ">f4") for t in range(steps)]},
        terminated=True,
        len_lookback_buffer=0,
    )
    path = _v2(tmp_path / "d", [episode])
    data = TransitionDataset(path) if kind == "transitions" else SequenceDataset(path, length=2)
    obs = np.array([np.full(2, t, float) for t in range(steps + 1)])
    extras = np.array([np.full(3, -t, np.float32) for t in range(steps)])
    for t in range(len(data)):
        item = data[t]
        arrays = [leaf for leaf in _leaves(item) if isinstance(leaf, np.ndarray)]
        assert len(arrays) >= 5 and all(leaf.dtype.isnative for leaf in arrays)
        if kind == "transitions":
            want = {"obs": obs[t], "next_obs": obs[t + 1], "actions": t, "v": extras[t]}
        else:
            want = {"obs": obs[t : t + 3], "actions": [t, t + 1], "v": extras[t : t + 2]}
        got = {**item, "v": item["extra_model_outputs"]["v"]}
        assert all(np.array_equal(got[key], value) for key, value in want.items())
    batch = next(iter(torch.utils.data.DataLoader(data, batch_size=len(data))))
    assert batch["obs"].dtype == torch.float64 and batch["actions"].dtype == torch.int32
    assert batch["extra_model_outputs"]["v"].dtype == torch.float32


@pytest.mark.parametrize("piece", [0, 1], ids=["first piece", "second piece"])
def test_verify_reads_every_v1_chunk_file_and_finds_a_flipped_data_byte(
    tmp_path: Path, piece: int
) -> None:
    # mutants: read_episodes / load_episode pass verify=False to the chunk reads
    path = _v1(tmp_path / "d", [_piece("a", 0, 3), _piece("a", 3, 5, "terminated")])
    chunk = sorted((path / "chunks").iterdir())[piece]
    rewards = chunk / "rew.0.npy"
    raw = bytearray(rewards.read_bytes())
    raw[-1] ^= 0x01  # the last byte of the last float64: a value, not the header
    rewards.write_bytes(bytes(raw))
    assert len(list(read_episodes(path))) == 2  # unverified, the data is only mmapped
    with pytest.raises(CorruptDatasetError, match="rew.0.npy"):
        list(read_episodes(path, verify=True))
    with pytest.raises(CorruptDatasetError, match="rew.0.npy"):
        load_episode(path, "a", verify=True)
    assert len(load_episode(path, "a")) == 5


# ------------------------------------------------------------------ reader: joins (v1)


def test_a_piece_inside_another_is_reported_where_it_starts(tmp_path: Path) -> None:
    # mutant: load_episode orders pieces by (t, t_started): the error named the outer piece
    path = _v1(tmp_path / "d", [_piece("a", 0, 5), _piece("a", 2, 3)])
    with pytest.raises(CorruptDatasetError, match=r"chunks of episode 'a' do not join at t=2 "):
        load_episode(path, "a")


FIRST_BAD = {
    # mutant: the exact-int path lets index == count through its own check (named later,
    # after a bigger one)
    "count before a huge one": ([4, 2**70], 4),
    "count beside a uint64": ([0, np.uint64(1), 4, 2**70], 4),
    "minus count minus one first": ([-5, 2**70], -5),
    # mutant: an unsigned array lets index == count through (then a numpy IndexError)
    "uint8 array at count": (np.array([0, 4], np.uint8), 4),
    "uint64 list at count": ([np.uint64(4)], 4),
    # mutant: a signed array lets index == count through
    "int64 array at count": (np.array([-4, 4]), 4),
}


@pytest.mark.parametrize("case", sorted(FIRST_BAD))
def test_episode_steps_names_the_first_index_out_of_range(tmp_path: Path, case: str) -> None:
    indices, first = FIRST_BAD[case]
    path = _v2(tmp_path / "d", [_piece("a", 0, 4)])
    data = TransitionDataset(path)
    with pytest.raises(IndexError, match=rf"^index {first} out of range for 4 items$"):
        data.episode_steps(indices)


def _list_piece(t0: int, t1: int, rewards: list[Any], end: str = "") -> SingleAgentEpisode:
    return SingleAgentEpisode(
        "a",
        observations=[float(t) for t in range(t0, t1 + 1)],
        actions=[t % 2 for t in range(t0, t1)],
        rewards=rewards,
        t_started=t0,
        terminated=end == "terminated",
        len_lookback_buffer=0,
    )


NUMPY_MODES = {
    # mutants: load_episode numpys each piece (int rewards then float ones would not join),
    # or reads list pieces as stored for numpy=False, or numpys for numpy=False, or never
    "list pieces, numpy=True": (False, True, True),
    "list pieces, numpy=False": (False, False, False),
    "list pieces, as stored": (False, None, False),
    "numpy pieces, numpy=False": (True, False, False),
    "numpy pieces, as stored": (True, None, True),
}


@pytest.mark.parametrize("case", sorted(NUMPY_MODES))
def test_load_episode_gives_the_joined_episode_in_the_mode_asked(tmp_path: Path, case: str) -> None:
    stored_numpy, numpy, want_numpy = NUMPY_MODES[case]
    pieces = [_list_piece(0, 2, [1, 2]), _list_piece(2, 4, [0.5, 1.5], "terminated")]
    if stored_numpy:
        pieces = [piece.to_numpy() for piece in pieces]
        pieces[0] = _list_piece(0, 2, [1.0, 2.0]).to_numpy()
    path = _v1(tmp_path / "d", pieces)
    got = load_episode(path, "a", numpy=numpy)
    assert got.is_numpy is want_numpy
    assert (got.t_started, got.t, got.is_terminated) == (0, 4, True)
    assert [float(r) for r in got.get_rewards()] == [1.0, 2.0, 0.5, 1.5]
    assert [float(o) for o in got.get_observations()] == [0.0, 1.0, 2.0, 3.0, 4.0]
