"""``from_dataset`` stores a dataset's columns in the dtypes its pieces join in.

Before the fix the buffer's columns took the first piece's dtypes and refused a later piece
whose values they cannot hold (uint8 observations, then int8 ones holding -128; float16, then
float32 holding 7e4), while ``TransitionDataset`` reads the same dataset in the joined dtype
(int16, float32): whether a valid dataset loaded depended on the order of its pieces. Now the
columns take the joined dtype whichever piece comes first, as the torch datasets give it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter
from episodes.io.torch_data import TransitionDataset
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer

# (column, first piece's (dtype, values), second piece's (dtype, values), the joined dtype).
CASES = {
    "uint8 then int8 observations": (
        "obs",
        (np.uint8, [0, 255, 7]),
        (np.int8, [-128, 0, 1]),
        np.int16,
    ),
    "float16 then float32 observations": (
        "obs",
        (np.float16, [0.5, 1.0, 2.0]),
        (np.float32, [7e4, 0.0, 1.0]),
        np.float32,
    ),
    "uint16 then int16 observations": (
        "obs",
        (np.uint16, [65535, 0, 3]),
        (np.int16, [-5, 0, 1]),
        np.int32,
    ),
    "float32 then float64 observations": (
        "obs",
        (np.float32, [0.25, 1.0, 2.0]),
        (np.float64, [1e300, 0.0, 0.1]),
        np.float64,
    ),
    "int32 then int64 actions": ("actions", (np.int32, [1, 2]), (np.int64, [2**40, -3]), np.int64),
    "uint32 then int8 actions": (
        "actions",
        (np.uint32, [2**32 - 1, 0]),
        (np.int8, [-1, 5]),
        np.int64,
    ),
    "float16 then float32 extra outputs": (
        "logp",
        (np.float16, [0.5, -1.0]),
        (np.float32, [-7e4, 3.0]),
        np.float32,
    ),
}


def piece(id_: str, column: str, dtype: Any, values: list[Any]) -> SingleAgentEpisode:
    """A two-step numpy'd episode whose ``column`` holds ``values`` (others float32 / int64)."""
    obs = np.arange(3, dtype=np.float32).reshape(3, 1)
    actions = np.array([0, 1], np.int64)
    logp = np.zeros(2, np.float32)
    if column == "obs":
        obs = np.array(values, dtype).reshape(3, 1)
    elif column == "actions":
        actions = np.array(values, dtype)
    else:
        logp = np.array(values, dtype)
    episode = SingleAgentEpisode(
        id_,
        observations=list(obs),
        actions=list(actions),
        rewards=[1.0, 1.0],
        extra_model_outputs={"logp": list(logp)},
        terminated=True,
        len_lookback_buffer=0,
    )
    episode.to_numpy()
    return episode


def stored(buffer: EpisodeReplayBuffer, column: str) -> dict[str, np.ndarray]:
    """Per stored episode id, the column as the buffer gives it back."""
    out = {}
    for episode in buffer.get_episodes():
        if column == "obs":
            out[episode.id_] = np.asarray(episode.get_observations())[:, 0]
        elif column == "actions":
            out[episode.id_] = np.asarray(episode.get_actions())
        else:
            out[episode.id_] = np.asarray(episode.get_extra_model_outputs(column))
    return out


def write(path: Path, pieces: list[SingleAgentEpisode]) -> Path:
    with DatasetWriter(path) as writer:
        for episode in pieces:
            writer.write(episode)
    return path


def item_dtype(path: Path, column: str) -> np.dtype[Any]:
    """The dtype ``TransitionDataset`` gives the column in."""
    item = TransitionDataset(path)[0]
    value = item["extra_model_outputs"][column] if column == "logp" else item[column]
    return np.asarray(value).dtype


@pytest.mark.parametrize("order", ["as listed", "reversed"])
@pytest.mark.parametrize("make", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("case", list(CASES))
def test_from_dataset_joins_the_pieces_dtypes_in_either_order(
    tmp_path: Path, case: str, make: type[EpisodeReplayBuffer], order: str
) -> None:
    column, (dtype_a, a), (dtype_b, b), joined = CASES[case]
    pieces = [piece("a", column, dtype_a, a), piece("b", column, dtype_b, b)]
    if order == "reversed":
        pieces.reverse()
    path = write(tmp_path / "data", pieces)
    buffer = make.from_dataset(path, seed=0)
    values = stored(buffer, column)
    assert {k: v.dtype for k, v in values.items()} == {"a": joined, "b": joined}
    assert values["a"].tolist() == np.array(a, dtype_a).astype(joined).tolist()
    assert values["b"].tolist() == np.array(b, dtype_b).astype(joined).tolist()
    assert item_dtype(path, column) == joined  # as the torch dataset reads it
    assert buffer.get_num_timesteps() == buffer.get_added_timesteps() == 4


def test_pieces_of_one_episode_out_of_time_order_join_too(tmp_path: Path) -> None:
    """The later piece (int8) is written first: the first piece added is the uint8 head."""
    head = SingleAgentEpisode(
        "e",
        observations=np.array([[0], [127]], np.uint8),
        actions=[0],
        rewards=[1.0],
        len_lookback_buffer=0,
    ).to_numpy()
    tail = SingleAgentEpisode(
        "e",
        observations=np.array([[127], [-128]], np.int8),
        actions=[1],
        rewards=[1.0],
        t_started=1,
        terminated=True,
        len_lookback_buffer=0,
    ).to_numpy()
    path = write(tmp_path / "data", [tail, head])
    buffer = EpisodeReplayBuffer.from_dataset(path)
    (episode,) = buffer.get_episodes()
    obs = np.asarray(episode.get_observations())[:, 0]
    assert obs.dtype == np.int16 and obs.tolist() == [0, 127, -128]


def test_a_from_dataset_buffer_saves_and_loads_in_the_joined_dtype(tmp_path: Path) -> None:
    pieces = [piece("a", "obs", np.uint8, [0, 255, 7]), piece("b", "obs", np.int8, [-128, 0, 1])]
    buffer = EpisodeReplayBuffer.from_dataset(write(tmp_path / "data", pieces), seed=0)
    buffer.save(tmp_path / "saved")
    again = EpisodeReplayBuffer.load(tmp_path / "saved")
    values = stored(again, "obs")
    assert {k: (v.dtype, v.tolist()) for k, v in values.items()} == {
        "a": (np.int16, [0, 255, 7]),
        "b": (np.int16, [-128, 0, 1]),
    }


def test_add_still_takes_the_first_chunks_dtype(tmp_path: Path) -> None:
    """Only from_dataset joins: add's columns stay the first chunk's (docs/replay.md)."""
    buffer = EpisodeReplayBuffer(100)
    buffer.add(piece("a", "obs", np.uint8, [0, 255, 7]))
    with pytest.raises(ValueError, match="int8 hold values the buffer's uint8 column cannot"):
        buffer.add(piece("b", "obs", np.int8, [-128, 0, 1]))
    # ... and so does add to a buffer from_dataset filled: its columns are the joined ones.
    path = write(tmp_path / "data", [piece("a", "obs", np.uint8, [0, 1, 2])])
    filled = EpisodeReplayBuffer.from_dataset(path)
    filled.add(piece("b", "obs", np.int8, [0, 1, 2]))
    assert {v.dtype for v in stored(filled, "obs").values()} == {np.dtype(np.uint8)}


def test_pieces_that_do_not_join_are_refused_as_add_refuses_them(tmp_path: Path) -> None:
    """int8 beside float32: no dtype of one kind holds both; the second piece is refused."""
    pieces = [piece("a", "obs", np.int8, [0, 1, 2]), piece("b", "obs", np.float32, [0.5, 1, 2])]
    path = write(tmp_path / "data", pieces)
    with pytest.raises(ValueError, match=r"dataset .*episode 'b': observations of shape"):
        EpisodeReplayBuffer.from_dataset(path)
