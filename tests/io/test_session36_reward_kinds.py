"""Rewards of other number kinds join as float64 in the torch datasets.

An env giving ``0`` a step and ``1.0`` at its goal records int64 rewards in the episodes that
miss it and float64 in the others; ``TransitionDataset()`` (``n_step=1``) and
``SequenceDataset`` refused such a dataset, while ``n_step=2`` read it (its sums are float64).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader

from episodes import SingleAgentEpisode
from episodes.io import DatasetError, DatasetWriter
from episodes.io.item_types import item_types, joined_rewards
from episodes.io.torch_data import SequenceDataset, TransitionDataset

# name: (rewards of episode a, rewards of episode b)
MIXES = {
    "int64 beside float64": ([0, 0, 1], [0.0, 0.5, 1.0]),
    "float32 beside int64": (np.array([0.25, 0.5, 1.0], np.float32), [3, -2, 7]),
    "bool beside float64": (np.array([False, True, False]), [0.5, -0.5, 2.0]),
    "uint8 beside float32": (np.array([0, 255, 3], np.uint8), np.ones(3, np.float32)),
    "uint64 beside int64": (np.array([0, 2**40, 3], np.uint64), np.array([-1, 0, 1])),
}


def _write(path, *rewards):
    with DatasetWriter(path) as w:
        for k, r in enumerate(rewards):
            w.write(
                SingleAgentEpisode(
                    f"e{k}",
                    observations=np.arange(4, dtype=np.float32),
                    actions=np.zeros(3, np.int64),
                    rewards=r,
                    terminated=True,
                    len_lookback_buffer=0,
                ).to_numpy()
            )
    return path


def _want(*rewards):
    return [float(x) for r in rewards for x in np.asarray(r).tolist()]


@pytest.mark.parametrize("name", list(MIXES))
def test_one_step_transitions_give_float64_rewards(tmp_path, name):
    a, b = MIXES[name]
    data = TransitionDataset(_write(tmp_path / "d", a, b))
    (batch,) = list(DataLoader(data, batch_size=len(data)))
    assert batch["rewards"].dtype == torch.float64
    assert batch["rewards"].tolist() == _want(a, b)


@pytest.mark.parametrize("name", list(MIXES))
def test_sequences_give_float64_rewards(tmp_path, name):
    a, b = MIXES[name]
    data = SequenceDataset(_write(tmp_path / "d", a, b), length=3)
    (batch,) = list(DataLoader(data, batch_size=len(data)))
    assert batch["rewards"].dtype == torch.float64
    assert batch["rewards"].flatten().tolist() == _want(a, b)


def test_one_kind_keeps_its_dtype(tmp_path):
    data = TransitionDataset(_write(tmp_path / "d", [0, 1, 2], np.array([3, 4, 5], np.int32)))
    (batch,) = list(DataLoader(data, batch_size=len(data)))
    assert batch["rewards"].dtype == torch.int64
    assert batch["rewards"].tolist() == [0, 1, 2, 3, 4, 5]


def test_other_shapes_and_complex_rewards_are_still_refused(tmp_path):
    with pytest.raises(DatasetError, match="rewards"):
        TransitionDataset(_write(tmp_path / "a", [0, 1, 2], np.ones((3, 1))))
    with pytest.raises(DatasetError, match="rewards"):
        TransitionDataset(_write(tmp_path / "b", [0.5, 1.0, 2.0], np.array([1j, 2j, 3j])))


JOINS = {
    # name: (a, b, joined dtype or None)
    "same": (np.int64(1), np.int64(1), np.int64),
    "int beside float": (np.int64(1), np.float32(1), np.float64),
    "bool beside int": (np.bool_(True), np.int8(1), np.float64),
    "one kind keeps its join": (np.float32(1), np.float64(1), np.float64),
    "complex beside float": (np.complex64(1), np.float32(1), None),
    "uint64 beside int64": (np.uint64(1), np.int64(1), np.float64),
    "other shapes": (np.int64(1), np.zeros(2), None),
    "other nestings": ({"a": np.int64(0)}, {"b": np.float64(0)}, None),
}


@pytest.mark.parametrize("name", list(JOINS))
def test_joined_rewards_table(name):
    a, b, want = JOINS[name]
    both = joined_rewards(item_types(a), item_types(b))
    if want is None:
        assert both is None
    else:
        assert both is not None and both[1][0][0] == np.dtype(want)
