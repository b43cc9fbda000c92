"""read_steps' up-front check of the step columns: chunks whose columns share names but not
their nesting (a nested extra output ``h`` with keys a, b beside flat extras ``h.0``, ``h.1``)
are the ValueError naming both chunks that docs/distributed.md promises, not a bare KeyError."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("ray")

from episodes import SingleAgentEpisode, io  # noqa: E402
from episodes.distributed import EpisodeDatasource  # noqa: E402
from episodes.distributed.step_types import dataset_step_types  # noqa: E402


def _episode(id_: str, extras: dict[str, Any], *, numpy: bool) -> SingleAgentEpisode:
    episode = SingleAgentEpisode(
        id_,
        observations=[np.float32(t) for t in range(3)],
        actions=[0, 1],
        rewards=[1.0, 1.0],
        extra_model_outputs=extras,
        len_lookback_buffer=0,
    )
    return episode.to_numpy() if numpy else episode


NESTED = {"h": [{"a": 1.0, "b": 3.0}, {"a": 2.0, "b": 4.0}]}
FLAT = {"h.0": [9.0, 9.0], "h.1": [9.0, 9.0]}
NESTED_OBS = {"o": [{"x": 1.0}, {"x": 2.0}]}
FLAT_OBS = {"o.0": [1.0, 2.0]}


def _write(path: Path, version: int, episodes: list[SingleAgentEpisode]) -> str:
    if version == 1:
        with io.EpisodeWriter(path) as writer:
            writer.write_many(episodes)
    else:
        with io.DatasetWriter(path, shard_bytes=1) as writer:  # one chunk per shard
            writer.write_many(episodes)
    return str(path)


# (first chunk's extras, second chunk's extras): same step column names, another nesting.
CLASHES = {
    "nested-then-flat": (NESTED, FLAT),
    "flat-then-nested": (FLAT, NESTED),
    "one-key-nested-then-flat": (NESTED_OBS, FLAT_OBS),
    "one-key-flat-then-nested": (FLAT_OBS, NESTED_OBS),
}
# How the chunks are stored: the v2 index gives the types (numpy'd), or the chunk is read.
STORES = {"v2-numpy": (2, True), "v2-list": (2, False), "v1-numpy": (1, True)}


@pytest.mark.parametrize("store", STORES.values(), ids=STORES)
@pytest.mark.parametrize(("first", "second"), CLASHES.values(), ids=CLASHES)
def test_same_column_names_of_another_nesting_are_a_value_error(tmp_path, first, second, store):
    version, numpy = store
    episodes = [_episode("e0", first, numpy=numpy), _episode("e1", second, numpy=numpy)]
    path = _write(tmp_path / "ds", version, episodes)
    with pytest.raises(ValueError, match="do not share the nesting") as caught:
        dataset_step_types(path, "chunks 0-2")
    message = str(caught.value)
    assert "episode 'e0' (chunk 0)" in message and "episode 'e1' (chunk 1)" in message
    assert "extra." in message


def test_the_datasource_refuses_them_before_any_read_task(tmp_path):
    episodes = [_episode("e0", NESTED, numpy=True), _episode("e1", FLAT, numpy=True)]
    path = _write(tmp_path / "ds", 2, episodes)
    with pytest.raises(ValueError, match="do not share the nesting of their step columns"):
        EpisodeDatasource(path).get_read_tasks(parallelism=2)


def test_the_same_nesting_with_other_leaves_still_names_the_field(tmp_path):
    other = {"h": [{"a": 1.0, "c": 3.0}, {"a": 2.0, "c": 4.0}]}
    episodes = [_episode("e0", NESTED, numpy=True), _episode("e1", other, numpy=True)]
    path = _write(tmp_path / "ds", 2, episodes)
    with pytest.raises(ValueError, match=r"do not share the nesting of 'extra\.h': leaves"):
        dataset_step_types(path, "chunks 0-2")
