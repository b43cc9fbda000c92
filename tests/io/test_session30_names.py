"""Extra outputs named like the episode's own columns, in a v2 dataset's step readers.

An extra output named ``observations`` or ``infos`` holds one item per step, as every extra
output does: the step readers took it for the column of that name and called the dataset
corrupt, where ``read_episodes`` and ``validate_dataset`` read it.
"""

from __future__ import annotations

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import Dataset, DatasetWriter, read_episodes, validate_dataset
from episodes.io.torch_data import SequenceDataset, TransitionDataset


@pytest.mark.parametrize("key", ["observations", "infos", "actions", "rewards", "t"])
def test_an_extra_output_named_like_a_column_reads_back_on_every_path(tmp_path, key):
    episode = SingleAgentEpisode(
        "e",
        observations=[np.zeros(2, np.float32)] * 3,
        actions=[0, 1],
        rewards=[1.0, 1.0],
        len_lookback_buffer=0,
        extra_model_outputs={key: [0.5, 1.5]},
    ).to_numpy()
    root = tmp_path / "data"
    with DatasetWriter(root) as writer:
        writer.write(episode)
    assert next(read_episodes(root)) == episode
    assert validate_dataset(root).ok
    assert Dataset(root).steps(0, 0, 2)["extra_model_outputs"][key].tolist() == [0.5, 1.5]
    assert float(TransitionDataset(root)[1]["extra_model_outputs"][key]) == 1.5
    sequence = SequenceDataset(root, length=2)[0]["extra_model_outputs"][key]
    assert sequence.tolist() == [0.5, 1.5]
