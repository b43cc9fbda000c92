"""Reader errors that point at ``episodes relist``; ids given as numpy scalars stored.

- A dataset whose ``unlisted/shards/`` holds files (moved there by a writer that opened it
  alone) fails to read where the manifest names a shard now there (a manifest put back whole)
  or does not name an episode's shard (lost lines): the error of ``read_episodes``,
  ``load_episode`` and ``dataset_info`` names ``unlisted/shards/`` and ``episodes relist``.
- An id taken from a numpy array (``np.str_``, ``np.int64``) as ``agent_id`` (or any of the
  episode's ids) is stored as the Python value it equals, and reads back equal.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import (
    CorruptDatasetError,
    Dataset,
    DatasetError,
    DatasetWriter,
    EpisodeNotFoundError,
    EpisodeWriter,
    UnstorableValueError,
    dataset_info,
    load_episode,
    read_episodes,
    relist_shards,
)

QUARANTINE = Path("unlisted") / "shards"


def _episode(id_: Any, **ids: Any) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_, observations=[0, 1], actions=[0], rewards=[1.0], len_lookback_buffer=0, **ids
    )


def _quarantined(tmp_path: Path, *, put_back: bool) -> Path:
    """Episodes a, b, c one shard each; b's and c's lines lost and their files quarantined."""
    path = tmp_path / "data"
    with DatasetWriter(path, shard_bytes=1) as writer:
        writer.write_many(_episode(x) for x in "abc")
    manifest = path / "manifest.jsonl"
    whole = manifest.read_bytes()
    manifest.write_bytes(b"".join(whole.splitlines(keepends=True)[:2]))
    DatasetWriter(path).close()  # opens alone: b's and c's files go to unlisted/shards/
    assert len(list((path / QUARANTINE).iterdir())) == 4
    if put_back:
        manifest.write_bytes(whole)  # a backup put back: its lines name the moved files
    return path


READS: dict[str, Callable[[Path], Any]] = {
    "read_episodes": lambda path: list(read_episodes(path)),
    "read_episodes_ids": lambda path: list(read_episodes(path, ids=["c"])),
    "load_episode": lambda path: load_episode(path, "c"),
    "dataset_info": dataset_info,
    "Dataset.episode": lambda path: Dataset(path).episode(2),
}


@pytest.mark.parametrize("read", READS.values(), ids=READS.keys())
def test_missing_shard_error_points_at_relist(tmp_path: Path, read: Callable[[Path], Any]):
    path = _quarantined(tmp_path, put_back=True)
    with pytest.raises(CorruptDatasetError, match="is missing") as caught:
        read(path)
    message = str(caught.value)
    assert f"{path / QUARANTINE}/ holds 4 files (2 shards)" in message
    assert f"`episodes relist {path}`" in message
    assert message.count("`episodes relist") == 1  # hinted once, whichever layer met it
    assert isinstance(caught.value.__cause__, CorruptDatasetError)  # the reader's own error
    assert [r.relisted for r in relist_shards(path)] == [True, True]  # what the error says
    assert [e.id_ for e in read_episodes(path)] == ["a", "b", "c"]


def test_episode_of_a_lost_line_is_not_found_with_a_pointer(tmp_path: Path):
    path = _quarantined(tmp_path, put_back=False)
    with pytest.raises(EpisodeNotFoundError, match="no episode with id 'b'") as caught:
        load_episode(path, "b")
    assert "`episodes relist" in str(caught.value) and "unlisted/shards/" in str(caught.value)
    assert [e.id_ for e in read_episodes(path)] == ["a"]  # fewer shards: no error to extend


@pytest.mark.parametrize("version", ["v1", "v2"])
def test_no_pointer_without_quarantined_files(tmp_path: Path, version: str):
    path = tmp_path / "data"
    with (DatasetWriter if version == "v2" else EpisodeWriter)(path) as writer:
        writer.write(_episode("a"))
    with pytest.raises(EpisodeNotFoundError) as caught:
        load_episode(path, "b")
    assert "relist" not in str(caught.value)
    assert caught.value.__cause__ is None  # raised as it was, not as its own cause
    if version == "v2":
        (path / QUARANTINE).mkdir(parents=True)  # there, but empty: nothing to relist
        with pytest.raises(EpisodeNotFoundError) as caught:
            load_episode(path, "b")
        assert "relist" not in str(caught.value)
        assert caught.value.__cause__ is None


NUMPY_IDS = {
    "str_": np.str_("ag"),
    "int64": np.int64(3),
    "uint8": np.uint8(7),
    "bool_": np.True_,
    "float32": np.float32(0.5),
    "float64_nan": np.float64("nan"),
}


@pytest.mark.parametrize("writer", [DatasetWriter, EpisodeWriter], ids=["v2", "v1"])
@pytest.mark.parametrize("value", NUMPY_IDS.values(), ids=NUMPY_IDS.keys())
def test_numpy_scalar_ids_are_stored_as_python_values(
    tmp_path: Path, writer: type[Any], value: Any
):
    item = value.item()
    episode = _episode(np.str_("e"), agent_id=value, module_id=value, multi_agent_episode_id=value)
    with writer(tmp_path / "data") as w:
        w.write(episode)
    [back] = read_episodes(tmp_path / "data")
    for got in (back.agent_id, back.module_id, back.multi_agent_episode_id):
        assert type(got) is type(item)
        assert got == value or (got != got and value != value)  # NaN: NaN again
        assert hash(got) == hash(value) or got != got
    assert back.id_ == "e" and type(back.id_) is str
    assert load_episode(tmp_path / "data", np.str_("e")).agent_id is not None


REFUSED = {
    "bytes_": np.bytes_(b"ag"),
    "complex": np.complex128(1j),
    "datetime64": np.datetime64("2020-01-01"),
    "array": np.array(["ag"]),
    "in_a_tuple": ("ag", np.complex128(1j)),
}


@pytest.mark.parametrize("value", REFUSED.values(), ids=REFUSED.keys())
def test_other_numpy_ids_stay_refused_and_nothing_is_written(tmp_path: Path, value: Any):
    path = tmp_path / "data"
    with DatasetWriter(path) as writer:
        writer.write(_episode("a"))
        with pytest.raises(UnstorableValueError, match="agent_id"):
            writer.write(_episode("b", agent_id=value))
    assert [e.id_ for e in read_episodes(path)] == ["a"]


def test_hint_keeps_the_error_type_for_callers(tmp_path: Path):
    path = _quarantined(tmp_path, put_back=True)
    with pytest.raises(DatasetError) as caught:
        dataset_info(path)
    assert type(caught.value) is CorruptDatasetError
