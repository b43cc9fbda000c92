"""Arguments of the v2 readers are checked where they are given (docs hunt, 2026-12-02)."""

from __future__ import annotations

import pytest

from episodes import SingleAgentEpisode
from episodes.io import Dataset, DatasetWriter


@pytest.fixture
def path(tmp_path):
    with DatasetWriter(tmp_path / "d") as w:
        w.write(
            SingleAgentEpisode(
                "a",
                observations=[0.0, 1.0, 2.0, 3.0],
                actions=[0, 1, 0],
                rewards=[1.0, 1.0, 1.0],
                terminated=True,
                len_lookback_buffer=0,
            )
        )
    return tmp_path / "d"


def _torch_data():
    pytest.importorskip("torch")
    import episodes.io.torch_data as torch_data

    return torch_data


BAD_MAX_OPEN = {"zero": 0, "negative": -1, "float": 1.5, "whole float": 2.0, "bool": True,
                "string": "2", "None": None}  # fmt: skip


@pytest.mark.parametrize("value", list(BAD_MAX_OPEN.values()), ids=list(BAD_MAX_OPEN))
@pytest.mark.parametrize(
    "make",
    [
        lambda p, m: Dataset(p, max_open_shards=m),
        lambda p, m: _torch_data().TransitionDataset(p, max_open_shards=m),
        lambda p, m: _torch_data().SequenceDataset(p, length=2, max_open_shards=m),
    ],
    ids=["Dataset", "TransitionDataset", "SequenceDataset"],
)
def test_max_open_shards_must_be_an_int_of_at_least_one(path, make, value):
    # 0 kept a shard open anyway, 1.5 was taken, "2" failed at the first read.
    with pytest.raises(ValueError, match="max_open_shards"):
        make(path, value)


BAD_BOUNDS = {"bool start": (True, 3), "bool stop": (0, True), "float start": (1.0, 3),
              "float stop": (0, 2.0)}  # fmt: skip


@pytest.mark.parametrize("bounds", list(BAD_BOUNDS.values()), ids=list(BAD_BOUNDS))
def test_step_bounds_are_ints_not_bools_or_floats(path, bounds):
    # steps(0, True, 3) read from step 1; steps(0, 1.0, 3) failed inside Python's slicing.
    with pytest.raises(TypeError, match="step"):
        Dataset(path).steps(0, *bounds)


def test_numpy_int_bounds_are_taken(path):
    import numpy as np

    out = Dataset(path).steps(0, np.int64(1), np.int32(3))
    assert out["observations"].tolist() == [1.0, 2.0, 3.0] and out["terminated"]
