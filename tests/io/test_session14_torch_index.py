"""The torch datasets take integer scalars as indices: no bool tensor, no one-element array."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter
from episodes.io.torch_data import SequenceDataset, TransitionDataset


@pytest.fixture
def path(tmp_path):
    with DatasetWriter(tmp_path / "d", sync=False) as w:
        w.write(
            SingleAgentEpisode(
                "a",
                observations=np.arange(5, dtype=np.float32),
                actions=[0, 1, 0, 1],
                rewards=[1.0] * 4,
                terminated=True,
                len_lookback_buffer=0,
            ).to_numpy()
        )
    return tmp_path / "d"


REFUSED = {
    "bool tensor": torch.tensor(True),
    "one-element 2-d tensor": torch.tensor([[1]]),
    "one-element 1-d tensor": torch.tensor([1]),
    "one-element 2-d array": np.array([[1]]),
    "0-d bool array": np.array(True),
}
TAKEN = {
    "int": 1,
    "numpy int": np.int64(1),
    "0-d int tensor": torch.tensor(1),
    "0-d array": np.array(1),
}


def _datasets(path):
    return [TransitionDataset(path), SequenceDataset(path, length=2)]


@pytest.mark.parametrize("index", REFUSED.values(), ids=REFUSED.keys())
def test_non_scalar_or_bool_indices_are_a_type_error(path, index):
    for ds in _datasets(path):
        with pytest.raises(TypeError, match="index must be an int"):
            ds[index]


@pytest.mark.parametrize("index", TAKEN.values(), ids=TAKEN.keys())
def test_integer_scalars_read_the_item(path, index):
    for ds in _datasets(path):
        np.testing.assert_equal(np.asarray(ds[index]["obs"]), np.asarray(ds[1]["obs"]))
