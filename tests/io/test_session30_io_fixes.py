"""Dataset writers and tools: keys of a str subclass, and the user's own metadata.

- A ``np.str_`` key (a str) is stored by both writers as its plain ``str`` wherever a dict key
  is stored, and reads back as that ``str``; keys that are no str are still refused.
- ``split``, ``merge`` and ``filter_dataset`` record their provenance in ``metadata.user``
  without replacing a key the source's ``user`` holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import (
    Dataset,
    DatasetMetadata,
    DatasetWriter,
    EpisodeWriter,
    UnstorableValueError,
    filter_dataset,
    merge,
    read_episodes,
    split,
    validate_dataset,
)
from episodes.io.tool_args import with_provenance
from episodes.io.values import plain_keys

K = np.str_


class _OwnStr(str):
    """A str subclass whose ``__str__`` says something else than its characters."""

    def __str__(self) -> str:
        return "not-the-key"


class _Distinct(str):
    """A str subclass whose keys of one text are distinct dict keys."""

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)


def _episode(**kwargs: Any) -> SingleAgentEpisode:
    fields: dict[str, Any] = {
        "observations": [0.0, 1.0, 2.0],
        "actions": [0, 1],
        "rewards": [1.0, 2.0],
        "len_lookback_buffer": 0,
    }
    custom = kwargs.pop("custom_data", None)
    fields.update(kwargs)
    episode = SingleAgentEpisode("e", **fields)
    if custom is not None:
        episode.custom_data.update(custom)
    return episode


# Where a dict key is stored: the episode's arguments, and how to find the key read back.
PLACES = {
    "extra-output-key": (
        {"extra_model_outputs": {K("vf_preds"): [0.5, 0.25]}},
        lambda e: list(e.extra_model_outputs),
        ["vf_preds"],
    ),
    "dict-observation-key": (
        {"observations": [{K("pos"): np.float32(t)} for t in range(3)]},
        lambda e: list(e.get_observations(0)),
        ["pos"],
    ),
    "nested-dict-observation-key": (
        {"observations": [{"a": {K("b"): np.zeros(2)}} for _ in range(3)]},
        lambda e: list(e.get_observations(0)["a"]),
        ["b"],
    ),
    "dict-action-key": (
        {"actions": [{K("move"): 0}, {K("move"): 1}]},
        lambda e: list(e.get_actions(0)),
        ["move"],
    ),
    "extra-output-inner-key": (
        {"extra_model_outputs": {"h": [{K("c"): 1.0}, {K("c"): 2.0}]}},
        lambda e: list(e.get_extra_model_outputs("h", 0)),
        ["c"],
    ),
    "info-key": (
        {"infos": [{K("lives"): 3}, {}, {}]},
        lambda e: list(e.get_infos(0)),
        ["lives"],
    ),
    "custom-data-key": (
        {"custom_data": {K("env_index"): 0}},
        lambda e: list(e.custom_data),
        ["env_index"],
    ),
    "own-str-method": (
        {"extra_model_outputs": {_OwnStr("vf"): [0.5, 0.25]}},
        lambda e: list(e.extra_model_outputs),
        ["vf"],
    ),
}
WRITERS = {
    "v2-arrow": (DatasetWriter, {}),
    "v2-parquet": (DatasetWriter, {"data_format": "parquet"}),
    "v1": (EpisodeWriter, {}),
}


@pytest.mark.parametrize("numpy", [True, False], ids=["numpy", "list"])
@pytest.mark.parametrize(("writer", "options"), WRITERS.values(), ids=WRITERS)
@pytest.mark.parametrize(("given", "keys_of", "expected"), PLACES.values(), ids=PLACES)
def test_str_subclass_keys_are_stored_as_plain_str(
    tmp_path, given, keys_of, expected, writer, options, numpy
):
    episode = _episode(**given)
    if numpy:
        episode = episode.to_numpy()
    with writer(tmp_path / "ds", **options) as w:
        w.write(episode)
    (back,) = read_episodes(tmp_path / "ds")
    keys = keys_of(back)
    assert keys == expected and all(type(k) is str for k in keys)
    assert validate_dataset(tmp_path / "ds").ok


def test_values_under_a_np_str_key_read_back_unchanged(tmp_path):
    episode = _episode(extra_model_outputs={K("vf"): np.array([0.5, 0.25], np.float32)})
    with DatasetWriter(tmp_path / "ds") as w:
        w.write(episode.to_numpy())
    (back,) = read_episodes(tmp_path / "ds", numpy=True)
    stored = back.get_extra_model_outputs("vf")
    assert stored.dtype == np.float32 and stored.tolist() == [0.5, 0.25]


# Keys still refused: no str at all, or strs that would be one key once read back.
REFUSED = {
    "int-extra-output-key": {"extra_model_outputs": {1: [0.5, 0.25]}},
    "int-dict-observation-key": {"observations": [{1: np.float32(t)} for t in range(3)]},
    "bytes-dict-observation-key": {"observations": [{b"a": np.float32(t)} for t in range(3)]},
    "one-text-twice": {"extra_model_outputs": {_Distinct("v"): [0.5, 0.5], "v": [1.0, 1.0]}},
}


@pytest.mark.parametrize(("writer", "options"), WRITERS.values(), ids=WRITERS)
@pytest.mark.parametrize("given", REFUSED.values(), ids=REFUSED)
def test_keys_that_are_no_str_are_still_refused(tmp_path, given, writer, options):
    episode = _episode(**given).to_numpy()
    with pytest.raises(UnstorableValueError), writer(tmp_path / "ds", **options) as w:
        w.write(episode)


def test_plain_keys_refuses_one_text_twice_in_infos():
    with pytest.raises(UnstorableValueError, match="name one str twice"):
        plain_keys({_Distinct("a"): 1, _Distinct("a"): 2}, "infos[0]")


# -------------------------------------------------------------------------- metadata.user
USER = {"split": "official-test-split", "merged_from": ["lab-A"], "filtered_from": "raw-v1"}


def _source(path: Path, user: dict[str, Any]) -> Path:
    metadata = DatasetMetadata(env_id="Toy-v0", user=user)
    with DatasetWriter(path, metadata=metadata) as w:
        for i in range(4):
            w.write(
                SingleAgentEpisode(
                    f"e{i}", observations=[0, 1], actions=[0], rewards=[1.0], len_lookback_buffer=0
                )
            )
    return path


def _split(src: Path, root: Path) -> Path:
    split(src, root / "train", root / "val", fraction=0.5, seed=3)
    return root / "train"


def _merge(src: Path, root: Path) -> Path:
    merge([src], root / "merged")
    return root / "merged"


def _filter(src: Path, root: Path) -> Path:
    filter_dataset(src, root / "filtered", min_length=0)
    return root / "filtered"


# tool, its key, and the record it adds for the source at `src`
TOOLS = {
    "split": (_split, "split", lambda src: {"from": str(src), "fraction": 0.5, "seed": 3}),
    "merge": (_merge, "merged_from", lambda src: [str(src)]),
    "filter": (_filter, "filtered_from", lambda src: str(src)),
}


@pytest.mark.parametrize(("tool", "key", "record"), TOOLS.values(), ids=TOOLS)
def test_tools_keep_the_users_own_keys(tmp_path, tool, key, record):
    src = _source(tmp_path / "src", USER)
    user = Dataset(tool(src, tmp_path)).metadata.user
    assert {k: user[k] for k in USER} == USER
    assert user[f"{key}_2"] == record(src)
    assert set(user) == {*USER, f"{key}_2"}


@pytest.mark.parametrize(("tool", "key", "record"), TOOLS.values(), ids=TOOLS)
def test_tools_use_their_own_key_where_it_is_free(tmp_path, tool, key, record):
    src = _source(tmp_path / "src", {"run": 7})
    user = Dataset(tool(src, tmp_path)).metadata.user
    assert user == {"run": 7, key: record(src)}


@pytest.mark.parametrize(("tool", "key", "record"), TOOLS.values(), ids=TOOLS)
def test_a_tool_applied_twice_keeps_both_records(tmp_path, tool, key, record):
    src = _source(tmp_path / "src", {})
    once = tool(src, tmp_path / "a")
    twice = tool(once, tmp_path / "b")
    user = Dataset(twice).metadata.user
    assert user == {key: record(src), f"{key}_2": record(once)}


PROVENANCE = {
    "free": ({"run": 1}, {"run": 1, "split": "R"}),
    "taken": ({"split": 0}, {"split": 0, "split_2": "R"}),
    "taken-twice": ({"split": 0, "split_2": 1}, {"split": 0, "split_2": 1, "split_3": "R"}),
    "gap-kept": ({"split": 0, "split_3": 1}, {"split": 0, "split_3": 1, "split_2": "R"}),
}


@pytest.mark.parametrize(("user", "expected"), PROVENANCE.values(), ids=PROVENANCE)
def test_with_provenance_adds_under_the_first_free_key(user, expected):
    before = dict(user)
    assert with_provenance(user, "split", "R") == expected
    assert user == before  # the given dict is not changed
