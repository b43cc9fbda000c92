"""A wrong type of integer argument is one error everywhere: a TypeError and a ValueError both."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from episodes.connectors import FrameStack
from episodes.errors import IntegerTypeError
from episodes.indexing import as_int, whole_number
from episodes.io import Dataset, DatasetWriter
from episodes.replay import EpisodeReplayBuffer
from episodes.rollout import CircularBuffer, RolloutStorage


def _episode() -> SingleAgentEpisode:
    return SingleAgentEpisode(observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 1.0])


def _dataset(tmp_path: Path, value: Any) -> Any:
    with DatasetWriter(tmp_path / "ds") as writer:
        writer.write(_episode())
    return Dataset(tmp_path / "ds", max_open_shards=value)


def _filled_buffer() -> EpisodeReplayBuffer:
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(SingleAgentEpisode("a", observations=[0.0] * 6, actions=[0] * 5, rewards=[1.0] * 5))
    return buf


# Every count below was refused before too: as a TypeError by some, a ValueError by others.
TAKERS: dict[str, Callable[[Any, Path], Any]] = {
    "RolloutStorage num_envs": lambda v, _: RolloutStorage("rl", v, 3, [2], [1]),
    "CircularBuffer max_len": lambda v, _: CircularBuffer(v, 2),
    "replay batch_size_B": lambda v, _: EpisodeReplayBuffer(10, batch_size_B=v),
    "replay sample lookback": lambda v, _: _filled_buffer().sample(2, batch_length_T=2, lookback=v),
    "Dataset max_open_shards": lambda v, p: _dataset(p, v),
    "DatasetWriter shard_bytes": lambda v, p: DatasetWriter(p / "w", shard_bytes=v),
    "cut len_lookback_buffer": lambda v, _: _episode().cut(len_lookback_buffer=v),
    "episode t_started": lambda v, _: SingleAgentEpisode(observations=[0], t_started=v),
    "episode len_lookback_buffer": lambda v, _: SingleAgentEpisode(
        observations=[0, 1], len_lookback_buffer=v
    ),
    "buffer lookback": lambda v, _: InfiniteLookbackBuffer([1, 2], lookback=v),
    "FrameStack n": lambda v, _: FrameStack(v),
    "as_int": lambda v, _: as_int(v, what="n"),
    "whole_number": lambda v, _: whole_number(v, "n", 1),
}
WRONG_TYPES = {
    "whole float": 2.0,
    "float": 2.5,
    "bool": True,
    "string": "2",
    "None": None,
    "array": np.array([2]),
    "tensor": torch.tensor([2]),
}


@pytest.mark.parametrize("wrong", WRONG_TYPES)
@pytest.mark.parametrize("taker", TAKERS)
def test_a_wrong_type_is_a_type_error_and_a_value_error(
    taker: str, wrong: str, tmp_path: Path
) -> None:
    if taker == "episode t_started" and wrong == "None":
        pytest.skip("None is the default t_started, 0")
    with pytest.raises(IntegerTypeError) as caught:
        TAKERS[taker](WRONG_TYPES[wrong], tmp_path)
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, ValueError)


@pytest.mark.parametrize(
    "taker", ["RolloutStorage num_envs", "CircularBuffer max_len", "whole_number", "FrameStack n"]
)
def test_an_int_out_of_range_is_a_plain_value_error(taker: str, tmp_path: Path) -> None:
    with pytest.raises(ValueError) as caught:
        TAKERS[taker](0, tmp_path)
    assert not isinstance(caught.value, TypeError)


@pytest.mark.parametrize("taker", ["as_int", "whole_number", "CircularBuffer max_len"])
def test_numpy_ints_are_ints(taker: str, tmp_path: Path) -> None:
    TAKERS[taker](np.int64(3), tmp_path)  # no error
