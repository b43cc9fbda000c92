"""Pins for session 13's io findings: returns beyond float range, dict keys that do not sort,
ids equal in Python but repr'd apart (``-0.0``), and bool piece ranges (each failed before
its fix)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.cli import main as cli_main
from episodes.io import (
    DatasetWriter,
    EpisodeWriter,
    dataset_info,
    filter_dataset,
    load_episode,
    read_episodes,
    split,
    validate_dataset,
)
from episodes.replay import EpisodeReplayBuffer

WRITERS = [pytest.param(DatasetWriter, id="v2"), pytest.param(EpisodeWriter, id="v1")]
BIG = 2**1100  # an int reward beyond float range: stored, with a null return


def piece(id_: Any, rewards: list[Any], *, t_started: int = 0, done: bool = True, **kw: Any):
    n = len(rewards)
    return SingleAgentEpisode(
        id_,
        observations=kw.pop("observations", list(range(t_started, t_started + n + 1))),
        actions=kw.pop("actions", [0] * n),
        rewards=rewards,
        t_started=t_started,
        terminated=done,
        len_lookback_buffer=0,
        **kw,
    )


def write(path: Path, writer: Any, episodes: list[SingleAgentEpisode]) -> Path:
    with writer(path) as w:
        for ep in episodes:
            w.write(ep)
    return path


def kept_ids(path: Path) -> list[Any]:
    return sorted(str(s.id_) for s in dataset_info(path).episodes)


# ------------------------------------------------------- 1: returns beyond float range
def big_returns(path: Path, writer: Any) -> Path:
    return write(
        path,
        writer,
        [
            piece("big", [BIG, 1]),
            piece("neg", [-BIG, 0]),
            # Two pieces whose huge rewards cancel: the episode's return is 3.
            piece("cancel", [BIG], done=False),
            piece("cancel", [-BIG + 3], t_started=1),
            piece("inf", [BIG, math.inf]),
            piece("nan", [BIG, math.inf, -math.inf]),
            piece("small", [5]),
        ],
    )


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize(
    ("bounds", "kept"),
    [
        pytest.param({"min_return": 0.0}, ["big", "cancel", "inf", "small"], id="min-0"),
        pytest.param({"min_return": 4.0}, ["big", "inf", "small"], id="min-4"),
        pytest.param({"min_return": 1e308}, ["big", "inf"], id="min-max-float"),
        pytest.param({"min_return": BIG + 1}, ["big", "inf"], id="min-exact-int"),
        pytest.param({"min_return": BIG + 2}, ["inf"], id="min-above-exact-int"),
        pytest.param({"min_return": math.inf}, ["inf"], id="min-inf"),
        pytest.param({"max_return": 4.0}, ["cancel", "neg"], id="max-4"),
        pytest.param({"max_return": -1e308}, ["neg"], id="max-min-float"),
        pytest.param(
            {"max_return": math.inf}, ["big", "cancel", "inf", "neg", "small"], id="max-inf"
        ),
        pytest.param({"min_return": 3, "max_return": 3}, ["cancel"], id="exactly-3"),
        pytest.param({"min_return": np.float32(4.0)}, ["big", "inf", "small"], id="numpy-bound"),
    ],
)
def test_filter_compares_returns_beyond_float_range(tmp_path, writer, bounds, kept):
    src = big_returns(tmp_path / "src", writer)
    assert math.isnan(next(s.ret for s in dataset_info(src).episodes if s.id_ == "big"))
    filter_dataset(src, tmp_path / "dst", **bounds)
    assert kept_ids(tmp_path / "dst") == sorted(kept)


def test_cli_filter_by_return_beyond_float_range(tmp_path, capsys):
    src = big_returns(tmp_path / "src", DatasetWriter)
    code = cli_main(["filter", str(src), "--out", str(tmp_path / "dst"), "--min-return", "4"])
    assert code == 0, capsys.readouterr().err
    assert kept_ids(tmp_path / "dst") == ["big", "inf", "small"]


# ------------------------------------------------------- 2: dict keys that do not sort
MIXED = {"a": 1, 0: 2}  # dm-tree sorts keys: int and str together raise a TypeError


@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"observations": [MIXED, {"a": 3, 0: 4}, {"a": 5, 0: 6}]}, id="observations"),
        pytest.param({"actions": [{1: "x", "b": (1,)}, {1: "y", "b": (2,)}]}, id="actions"),
        pytest.param({"actions": [{"a": 1}, {"a": 1, 0: 2}]}, id="later-action"),
        pytest.param({"extra_model_outputs": {"e": [{"k": 1, 2: 1.5}, MIXED]}}, id="extras"),
    ],
)
def test_mixed_key_dicts_are_stored_as_json(tmp_path, writer, fields):
    ep = piece("d", [0.0, 1.0], **fields)
    path = tmp_path / "ds"
    with writer(path) as w:
        w.write(ep)
        w.write(piece("after", [1.0]))  # the writer is still usable
    back = load_episode(path, "d")
    assert back.observations.get() == ep.observations.get()
    assert back.actions.get() == ep.actions.get()
    for key, column in ep.extra_model_outputs.items():
        assert back.extra_model_outputs[key].get() == column.get()
    assert len(load_episode(path, "after")) == 1
    assert validate_dataset(path).ok


@pytest.mark.parametrize("writer", WRITERS)
def test_mixed_key_dicts_join_across_pieces(tmp_path, writer):
    ep = piece("d", [0.0], observations=[{"a": 1, 0: 2}, {"a": 1, 0: 3}], done=False)
    successor = ep.cut()
    successor.add_env_step({"a": 1, 0: 4}, 0, 1.0, terminated=True)
    path = write(tmp_path / "ds", writer, [ep, successor])
    joined = load_episode(path, "d")
    assert joined.observations.get() == [{"a": 1, 0: 2}, {"a": 1, 0: 3}, {"a": 1, 0: 4}]
    assert joined.is_terminated and validate_dataset(path).ok


# ------------------------------------------------------- 3: ids equal in Python
@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize(
    ("first", "second", "ask"),
    [
        pytest.param(0.0, -0.0, 0.0, id="zero-asks-zero"),
        pytest.param(0.0, -0.0, -0.0, id="zero-asks-negzero"),
        pytest.param(-0.0, 0.0, 0.0, id="negzero-first"),
        pytest.param(("x", 0.0), ("x", -0.0), ("x", -0.0), id="in-a-tuple"),
        pytest.param(math.nan, -math.nan, float("nan"), id="nan"),
    ],
)
def test_ids_equal_in_python_are_one_episode(tmp_path, writer, first, second, ask):
    path = write(
        tmp_path / "ds",
        writer,
        [piece(first, [1.0], done=False), piece(second, [1.0], t_started=1)],
    )
    joined = load_episode(path, ask)
    assert (len(joined), joined.is_terminated) == (2, True)
    assert repr(joined.id_) == repr(first)  # the first piece's id, as written
    assert [repr(e.id_) for e in read_episodes(path, ids=[ask])] == [repr(first), repr(second)]
    [summary] = dataset_info(path).episodes
    assert (summary.num_chunks, summary.length) == (2, 2)
    assert validate_dataset(path).ok


@pytest.mark.parametrize("seed", range(8))
def test_split_keeps_zero_ids_together(tmp_path, seed):
    src = write(
        tmp_path / "src",
        DatasetWriter,
        [piece(("x", 0.0), [1.0], done=False), piece(("x", -0.0), [1.0], t_started=1)],
    )
    sides = split(src, tmp_path / "t", tmp_path / "v", fraction=0.5, seed=seed)
    assert sorted(sides) == [0, 2]


def test_filter_and_buffer_take_zero_ids_as_one(tmp_path):
    src = write(
        tmp_path / "src",
        DatasetWriter,
        [piece(0.0, [1.0], done=False), piece(-0.0, [1.0], t_started=1), piece("x", [1.0])],
    )
    assert filter_dataset(src, tmp_path / "dst", min_length=2) == 2
    buffer = EpisodeReplayBuffer.from_dataset(src)
    assert buffer.get_num_episodes() == 2 and buffer.get_num_timesteps() == 3


# ------------------------------------------------------- 4: bool piece ranges
@pytest.mark.parametrize("writer", WRITERS)
@pytest.mark.parametrize(
    "bounds",
    [
        pytest.param({"start": True}, id="start-True"),
        pytest.param({"stop": False}, id="stop-False"),
        pytest.param({"start": np.bool_(True)}, id="start-np-bool"),
        pytest.param({"start": 1.0}, id="start-float"),
    ],
)
def test_read_episodes_refuses_non_int_ranges(tmp_path, writer, bounds):
    path = write(tmp_path / "ds", writer, [piece(str(i), [1.0]) for i in range(3)])
    with pytest.raises(TypeError, match="must be an int"):
        read_episodes(path, **bounds)
    ids = [e.id_ for e in read_episodes(path, start=np.int64(1), stop=np.int32(3))]
    assert ids == ["1", "2"]
