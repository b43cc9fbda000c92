"""Replay refusals of one chunk among many name it: its place in add's list and its episode.

``add`` of a vector env's chunks, and ``from_dataset`` over a dataset with one odd piece, say
which chunk (``chunk 2 (episode 'bad')``; from a dataset, the dataset and the episode) for
every refusal of the chunk's own values, and keep their error class and the buffer unchanged.
Rewards that are not one number per step are a ``ValueError``, as rows of another shape are.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer

from .reference import assert_states_equal


def _ep(id_: Any, **changes: Any) -> SingleAgentEpisode:
    """Two steps: float32 (2,) observations, int actions, scalar rewards, one (2,) extra."""
    data: dict[str, Any] = {
        "observations": [np.full(2, t, np.float32) for t in range(3)],
        "actions": [0, 1],
        "rewards": [1.0, 1.0],
        "extra_model_outputs": {"l": [np.zeros(2, np.float32)] * 2},
    }
    data.update(changes)
    return SingleAgentEpisode(id_, len_lookback_buffer=0, **data).to_numpy()


def _dict_actions() -> dict[str, Any]:
    space = gym.spaces.Dict({"a": gym.spaces.Box(-1, 1, (2,))})
    actions = [{"a": np.zeros(2, np.float32)} for _ in range(2)]
    return {"actions": actions, "action_space": space}


# Each: the odd chunk's changes, the error class, words of the refusal.
ODD = {
    "actions beyond the int32 column": (
        {"actions": np.array([2**40, 1])},
        ValueError,
        "actions of dtype int64 hold values the buffer's int32 column cannot",
    ),
    "float64 observations overflowing float32": (
        {"observations": [np.full(2, 1e300)] * 3},
        ValueError,
        "observations of dtype float64 hold values",
    ),
    "int observations for a float column": (
        {"observations": [np.zeros(2, np.int64)] * 3},
        ValueError,
        r"observations of shape \(2,\) dtype int64 do not fit",
    ),
    "observations of another shape": (
        {"observations": [np.zeros(3, np.float32)] * 3},
        ValueError,
        r"observations of shape \(3,\)",
    ),
    "an extra of another shape": (
        {"extra_model_outputs": {"l": [np.zeros(3, np.float32)] * 2}},
        ValueError,
        r"extra_model_outputs\['l'\] of shape \(3,\)",
    ),
    "other extra keys": (
        {"extra_model_outputs": {}},
        ValueError,
        r"extra_model_outputs keys \[\] differ from the buffer's \['l'\]",
    ),
    "rewards of shape (1,)": (
        {"rewards": [np.ones(1), np.ones(1)]},
        ValueError,
        r"rewards must be scalars, got shape \(1,\)",
    ),
    "rewards beyond float32": (
        {"rewards": [1e300, 1.0]},
        ValueError,
        "rewards hold values a float32 column cannot",
    ),
    "complex rewards": (
        {"rewards": [1 + 1j, 1.0]},
        TypeError,
        "rewards must be real numbers",
    ),
    # Stored since session 43 where the buffer's actions nest; here they are flat int32.
    "nested actions": (
        _dict_actions(),
        ValueError,
        r"actions nested as \{'a': float32 \(2,\)\} do not fit the buffer's shape \(\)",
    ),
}


def _filled(cls: type) -> EpisodeReplayBuffer:
    buf = cls(100, seed=0)
    buf.add([_ep(f"e{i}", actions=np.array([0, 1], np.int32)) for i in range(3)])
    return buf


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("case", list(ODD))
def test_add_names_the_refused_chunk(cls: type, case: str) -> None:
    changes, error, words = ODD[case]
    buf = _filled(cls)
    before = buf.get_state()
    chunks = [_ep("x0"), _ep("x1"), _ep("bad", **changes), _ep("x3")]
    with pytest.raises(error, match=rf"^chunk 2 \(episode 'bad'\): {words}") as caught:
        buf.add(chunks)
    assert type(caught.value) is error
    assert_states_equal(buf.get_state(), before)


@pytest.mark.parametrize("case", [c for c in ODD if "int32" not in ODD[c][2]])
def test_a_first_add_names_the_chunk_that_differs_from_the_first(case: str) -> None:
    # Into an empty buffer the first chunk fixes the columns; a later one is refused by them.
    changes, error, words = ODD[case]
    buf = EpisodeReplayBuffer(100)
    before = buf.get_state()
    chunks = [_ep(0), _ep(1), _ep(2), _ep(("odd", 3), **changes)]
    with pytest.raises(error, match=rf"^chunk 3 \(episode \('odd', 3\)\): {words}"):
        buf.add(chunks)
    assert_states_equal(buf.get_state(), before)


def test_an_ending_chunk_without_steps_is_named_too() -> None:
    buf = _filled(EpisodeReplayBuffer)
    before = buf.get_state()
    end = SingleAgentEpisode(
        "e1", observations=[np.zeros(3, np.float32)], t_started=2, terminated=True,
        len_lookback_buffer=0,
    )  # fmt: skip
    with pytest.raises(ValueError, match=r"^chunk 1 \(episode 'e1'\): observations of shape"):
        buf.add([_ep("x0"), end])
    assert_states_equal(buf.get_state(), before)


def test_a_non_episode_among_the_chunks_is_named_by_its_place() -> None:
    buf = _filled(EpisodeReplayBuffer)
    before = buf.get_state()
    with pytest.raises(TypeError, match=r"^chunk 1: add\(\) takes SingleAgentEpisode chunks"):
        buf.add([_ep("x0"), "x1"])
    assert_states_equal(buf.get_state(), before)


def test_a_single_chunk_is_named_as_chunk_0() -> None:
    buf = _filled(EpisodeReplayBuffer)
    with pytest.raises(ValueError, match=r"^chunk 0 \(episode 'bad'\): rewards must be scalars"):
        buf.add(_ep("bad", rewards=[np.ones(1), np.ones(1)]))


# The refusals from_dataset left unnamed (a TypeError, or the rewards' shape, a TypeError
# then); the others were named already and must stay named once (add names them too now).
UNNAMED_FROM_DATASET = ["rewards of shape (1,)", "complex rewards", "nested actions"]
# from_dataset joins the dataset's dtypes before it fills the buffer (as TransitionDataset
# does), so these pieces load in the wider dtype there (tests/replay/
# test_session40_from_dataset_dtypes.py); add() still refuses them.
JOINED_BY_FROM_DATASET = [
    "actions beyond the int32 column",
    "float64 observations overflowing float32",
]


def _refused_from_dataset(tmp_path: Any, case: str) -> None:
    changes, error, words = ODD[case]
    path = os.fspath(tmp_path / "ds")
    pieces = [_ep(f"e{i}", actions=np.array([0, 1], np.int32)) for i in range(5)]
    with DatasetWriter(path) as writer:
        writer.write_many([*pieces, _ep("b", **changes)])
    with pytest.raises(error, match=rf"^dataset {path!r}, episode 'b': {words}") as caught:
        EpisodeReplayBuffer.from_dataset(path)
    assert type(caught.value) is error
    assert "chunk 0" not in str(caught.value)  # add's own naming: the piece is named once


@pytest.mark.parametrize("case", UNNAMED_FROM_DATASET)
def test_from_dataset_names_the_dataset_and_the_episode(tmp_path: Any, case: str) -> None:
    _refused_from_dataset(tmp_path, case)


@pytest.mark.parametrize(
    "case", [c for c in ODD if c not in UNNAMED_FROM_DATASET + JOINED_BY_FROM_DATASET]
)
def test_from_dataset_still_names_a_piece_once(tmp_path: Any, case: str) -> None:
    _refused_from_dataset(tmp_path, case)


NAMED_ALREADY = {
    "times-beyond-int64": lambda: SingleAgentEpisode(
        "a",
        observations=[0.0, 1.0],
        actions=[0],
        rewards=[1.0],
        t_started=2**63,
        len_lookback_buffer=0,
    ),
    "info-that-does-not-copy": lambda: SingleAgentEpisode(
        "a",
        observations=[0.0, 1.0],
        actions=[0],
        rewards=[1.0],
        infos=[{}, {"lock": threading.Lock()}],
        len_lookback_buffer=0,
    ),
}


@pytest.mark.parametrize("make", NAMED_ALREADY.values(), ids=NAMED_ALREADY.keys())
def test_a_refusal_naming_its_episode_names_it_once(make):
    buffer = EpisodeReplayBuffer(100)
    with pytest.raises((TypeError, ValueError)) as caught:
        buffer.add(make())
    message = str(caught.value)
    assert message.startswith("chunk 0: ")
    assert message.count("episode 'a'") == 1
