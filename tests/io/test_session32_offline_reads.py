"""dataset_info's spaces past a piece stored without them; filter and split refuse bad joins."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import (
    DatasetError,
    DatasetWriter,
    dataset_info,
    filter_dataset,
    merge,
    split,
    validate_dataset,
)

BOX = gym.spaces.Box(-9, 9, (1,), np.float32)
DISC = gym.spaces.Discrete(2)


def _steps(id_="a", **spaces):
    return SingleAgentEpisode(
        id_,
        observations=[np.full(1, t, np.float32) for t in range(4)],
        actions=[0] * 3,
        rewards=[1.0] * 3,
        len_lookback_buffer=0,
        **spaces,
    )


def _end(id_="a", **spaces):
    return SingleAgentEpisode(
        id_,
        observations=[np.full(1, 3, np.float32)],
        t_started=3,
        truncated=True,
        len_lookback_buffer=0,
        **spaces,
    )


SPACES = {"observation_space": BOX, "action_space": DISC}
CASES = {
    "steps then end": ([_steps(**SPACES), _end()], (BOX, DISC)),
    "end then steps": ([_end(), _steps(**SPACES)], (BOX, DISC)),
    # Each space from the first piece that has it.
    "end with an observation space only": (
        [_end(observation_space=BOX), _steps(action_space=DISC)],
        (BOX, DISC),
    ),
    "no spaces anywhere": ([_end(), _steps()], (None, None)),
    "only an end, with spaces": ([_end(**SPACES)], (BOX, DISC)),
    # The first piece with steps is the last looked at (as the first piece was before).
    "steps without spaces first": ([_steps("b"), _steps(**SPACES)], (None, None)),
    "ends without spaces, then steps": (
        [_end("x"), _end("y"), _steps(**SPACES), _steps("b")],
        (BOX, DISC),
    ),
}


@pytest.mark.parametrize("name", CASES)
def test_dataset_info_spaces(tmp_path, name):
    pieces, want = CASES[name]
    with DatasetWriter(tmp_path / "d", shard_bytes=1) as w:  # a shard a piece
        w.write_many(pieces)
    info = dataset_info(tmp_path / "d")
    assert (info.observation_space, info.action_space) == want


def test_export_minari_takes_the_spaces_after_a_stepless_end(tmp_path):
    pytest.importorskip("minari")
    from episodes.io import export_minari

    with DatasetWriter(tmp_path / "d") as w:
        w.write_many([_end(), _steps(**SPACES)])
    assert export_minari(tmp_path / "d", "ns/a-v0", root=tmp_path / "m") == 1


def _duplicated(path):
    ep = SingleAgentEpisode(
        "a",
        observations=[np.full(1, t, np.float32) for t in range(7)],
        actions=[0] * 6,
        rewards=[1.0] * 6,
        terminated=True,
        len_lookback_buffer=0,
    )
    with DatasetWriter(path) as w:
        w.write(SingleAgentEpisode("ok", observations=[0.0, 1.0], actions=[0], rewards=[1.0]))
        w.write_many([ep[0:2], ep[2:4], ep[2:4], ep[4:6]])  # the middle piece twice
    return path


REFUSING = {
    "filter": lambda src, root: filter_dataset(src, root / "f", min_length=7),
    "filter, nothing asked": lambda src, root: filter_dataset(src, root / "f"),
    "split": lambda src, root: split(src, root / "t", root / "v", fraction=0.5),
}


@pytest.mark.parametrize("name", REFUSING)
def test_filter_and_split_refuse_pieces_stored_twice(tmp_path, name):
    src = _duplicated(tmp_path / "src")
    assert validate_dataset(src).problems == ["episode 'a': steps [2, 4) are stored twice"]
    with pytest.raises(DatasetError) as caught:
        REFUSING[name](src, tmp_path)
    assert str(caught.value) == (
        f"episode 'a': steps [2, 4) are stored twice in {src}; nothing was written"
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src"]


def test_merge_still_says_what_it_said(tmp_path):
    src = _duplicated(tmp_path / "src")
    with pytest.raises(DatasetError, match=r"stored twice once .*src are merged; nothing"):
        merge([src], tmp_path / "m")


def test_filter_and_split_take_pieces_that_join(tmp_path):
    ep = _steps("z")
    with DatasetWriter(tmp_path / "src") as w:
        w.write_many([ep[0:1], ep[1:3], _end("z")])
    assert filter_dataset(tmp_path / "src", tmp_path / "f", min_length=3) == 3
    assert sum(split(tmp_path / "src", tmp_path / "t", tmp_path / "v")) == 3
