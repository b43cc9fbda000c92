"""Small forged files that would ask for memory without bound, and reads that run out of it.

Every checksum is recomputed (a forger can); the reader must still refuse indexes that make
it copy the same bytes many times, and a read the system cannot finish for lack of memory is a
``DatasetIOError`` (an ``OSError``), one line from the CLI.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.cli import main
from episodes.io import CorruptDatasetError, Dataset, DatasetIOError, DatasetWriter, read_episodes
from episodes.io.encoding import decode_episode, encode_episode
from tests.io.test_hunt_fixes_hostile import forge_index


def _dataset(root: Path) -> Path:
    ep = SingleAgentEpisode(
        "a",
        observations=[np.zeros(3, np.float32)] * 3,
        actions=[0, 1],
        rewards=[1.0, 1.0],
        len_lookback_buffer=0,
    )
    with DatasetWriter(root) as writer:
        writer.write(ep.to_numpy())
    return root


def _many_leaves_one_column(index: dict[str, Any]) -> None:
    entry = index["episodes"][0]
    column = entry["meta"]["columns"]["observations"]
    column["structure"] = {"dict": [[f"k{i}", "*"] for i in range(3)]}
    column["leaves"] = [{"file": f"obs.{i}.npy", "kind": "batched"} for i in range(3)]
    info = entry["leaves"].pop("obs.0.npy")
    for i in range(3):
        entry["leaves"][f"obs.{i}.npy"] = info


READS = {
    "read_episodes": lambda root: list(read_episodes(root)),
    "Dataset.episode": lambda root: Dataset(root).episode(0),
}


@pytest.mark.parametrize("read", list(READS))
def test_leaves_naming_one_column_are_refused(tmp_path: Path, read: str) -> None:
    root = _dataset(tmp_path / "d")
    forge_index(root, _many_leaves_one_column)
    with pytest.raises(CorruptDatasetError, match=r"name the same column \['observations'\]"):
        READS[read](root)


def test_a_read_out_of_memory_is_a_dataset_io_error() -> None:
    meta, arrays = encode_episode(
        SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0])
    )

    def load(name: str) -> np.ndarray:
        raise MemoryError("Unable to allocate 8.00 EiB")

    del arrays
    with pytest.raises(DatasetIOError, match="x: out of memory rebuilding the episode") as info:
        decode_episode(meta, load, where="x")
    assert isinstance(info.value, OSError) and info.value.errno == 12


def test_the_cli_says_out_of_memory_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _dataset(tmp_path / "d")

    def no_memory(*args: Any, **kwargs: Any) -> Any:
        raise MemoryError

    # The command imports it from episodes.io when it runs.
    monkeypatch.setattr("episodes.io.validation.validate_dataset", no_memory)
    assert main(["validate", str(root)]) == 1
    assert capsys.readouterr().err.strip() == "episodes: error: out of memory (MemoryError)"
