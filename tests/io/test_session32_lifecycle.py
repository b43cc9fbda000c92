"""Lifecycle: torch datasets whose path is replaced, and where an unclosed writer's warning points.

A TransitionDataset or SequenceDataset counts its items when made and opens its reader lazily
(in each DataLoader worker after pickling): a dataset put at the same path in between was read
with the old lengths and flags. The unclosed-writer ResourceWarning named weakref.py.
"""

from __future__ import annotations

import gc
import pickle
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import CorruptDatasetError, DatasetWriter, EpisodeWriter

torch_data = pytest.importorskip("episodes.io.torch_data")


def _write(root: Path, lengths: list[int], base: int) -> None:
    with DatasetWriter(root, sync=False) as w:
        for i, n in enumerate(lengths):
            obs = [np.float32(base + 100 * i + t) for t in range(n + 1)]
            w.write(
                SingleAgentEpisode(
                    f"e{base}-{i}",
                    observations=obs,
                    actions=[1] * n,
                    rewards=[1.0] * n,
                    terminated=True,
                    len_lookback_buffer=0,
                ).to_numpy()
            )


def _transitions(root: Path):
    return torch_data.TransitionDataset(root)


def _sequences(root: Path):
    return torch_data.SequenceDataset(root, length=2)


def _same(data):
    return data


def _pickled(data):  # as a DataLoader worker gets it
    return pickle.loads(pickle.dumps(data))


@pytest.mark.parametrize("make", [_transitions, _sequences], ids=["transitions", "sequences"])
@pytest.mark.parametrize("ship", [_same, _pickled], ids=["here", "pickled"])
def test_a_replaced_dataset_is_refused(tmp_path: Path, make, ship) -> None:
    root = tmp_path / "d"
    _write(root, [10, 10], 0)
    data = make(root)
    shutil.rmtree(root)
    _write(root, [3, 3, 3], 5000)
    data = ship(data)
    for index in (0, 5, len(data) - 1):
        with pytest.raises(CorruptDatasetError, match="no longer the dataset"):
            data[index]


@pytest.mark.parametrize("make", [_transitions, _sequences], ids=["transitions", "sequences"])
@pytest.mark.parametrize("ship", [_same, _pickled], ids=["here", "pickled"])
def test_a_dataset_appended_to_still_reads(tmp_path: Path, make, ship) -> None:
    root = tmp_path / "d"
    _write(root, [4, 5], 0)
    data = make(root)
    expected = [make(root)[i] for i in range(len(data))]  # read before the append
    _write(root, [3], 7000)  # another shard, after those counted
    data = ship(data)
    got = [data[i] for i in range(len(data))]
    assert len(got) == len(expected)
    for a, b in zip(got, expected, strict=True):
        assert np.array_equal(a["obs"], b["obs"]) and np.array_equal(
            a["terminated"], b["terminated"]
        )


def _drop_by_del(root: Path, writer_cls) -> None:
    w = writer_cls(root)
    del w  # the warning names this line's file


def _drop_by_scope(root: Path, writer_cls) -> None:
    def scope() -> None:
        writer_cls(root)

    scope()


def _drop_by_collect(root: Path, writer_cls) -> None:
    w = writer_cls(root)
    w.cycle = w
    del w
    gc.collect()


@pytest.mark.parametrize("writer_cls", [DatasetWriter, EpisodeWriter])
@pytest.mark.parametrize("drop", [_drop_by_del, _drop_by_scope, _drop_by_collect])
def test_the_unclosed_writer_warning_names_the_users_file(tmp_path: Path, writer_cls, drop) -> None:
    gc.collect()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        drop(tmp_path / "d", writer_cls)
    unclosed = [w for w in caught if issubclass(w.category, ResourceWarning)]
    assert [Path(w.filename).name for w in unclosed] == [Path(__file__).name]
