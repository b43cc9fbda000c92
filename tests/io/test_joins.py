"""PieceJoins: the border check of ``episodes validate`` agrees with ``load_episode``.

Random episodes cut into random pieces, written in a random order (v1 and v2): the checker
reports nothing and every id loads back whole; with one piece's observations moved, it reports
exactly that piece's border and loading that id fails. Checked in time order, it holds one
border per running episode.
"""

from __future__ import annotations

import numpy as np
import pytest
from _gen import moved
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.io import (
    CorruptDatasetError,
    DatasetWriter,
    EpisodeWriter,
    PieceJoins,
    load_episode,
    read_episodes,
)


def whole(id_: str, length: int) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[np.float32([ord(id_[-1]), t]) for t in range(length + 1)],
        actions=[t % 3 for t in range(length)],
        rewards=[float(t) for t in range(length)],
        terminated=True,
        len_lookback_buffer=0,
    )


@st.composite
def cut_datasets(draw):
    """Pieces of 1-4 episodes (cut at random steps, zero-length pieces allowed), shuffled."""
    pieces = []
    for k in range(draw(st.integers(1, 4))):
        length = draw(st.integers(1, 12))
        # Cuts before the last step: a piece after the terminated one would not join.
        cuts = sorted(draw(st.lists(st.integers(0, length - 1), max_size=4)))
        episode = whole(f"e{k}", length)
        bounds = [0, *cuts, length]
        pieces += [episode[a:b] for a, b in zip(bounds, bounds[1:])]
    order = draw(st.permutations(range(len(pieces))))
    return [pieces[i] for i in order]


def write(path, pieces, v1):
    with EpisodeWriter(path) if v1 else DatasetWriter(path) as writer:
        writer.write_many(pieces)


def check_all(path, order):
    pieces = list(read_episodes(path))
    joins = PieceJoins.of(path)
    return [message for i in order for message in joins.check(i, pieces[i])], joins


@pytest.mark.parametrize("v1", [False, True], ids=["v2", "v1"])
@settings(max_examples=40, deadline=None)
@given(pieces=cut_datasets(), data=st.data())
def test_cut_pieces_join_in_any_order_and_a_moved_piece_is_reported(
    tmp_path_factory, v1, pieces, data
):
    path = tmp_path_factory.mktemp("ds")
    write(path, pieces, v1)
    order = data.draw(st.permutations(range(len(pieces))), label="check order")
    problems, joins = check_all(path, order)
    assert problems == [] and joins.pending == 0
    for id_ in {p.id_ for p in pieces}:
        loaded = load_episode(path, id_)
        assert np.asarray(loaded.get_observations()).tolist() == [
            [ord(id_[-1]), t] for t in range(loaded.t + 1)
        ]

    later = [i for i, p in enumerate(pieces) if p.t_started > 0]  # has a predecessor
    if not later:
        return
    bad = data.draw(st.sampled_from(later), label="moved piece")
    broken = list(pieces)
    broken[bad] = moved(pieces[bad])
    path = tmp_path_factory.mktemp("broken")
    write(path, broken, v1)
    problems, _ = check_all(path, order)
    assert any(f"piece at t={pieces[bad].t_started} " in m for m in problems)
    assert all(repr(pieces[bad].id_) in m for m in problems)
    with pytest.raises(CorruptDatasetError):
        load_episode(path, pieces[bad].id_)


def test_checked_in_time_order_one_border_per_running_episode_is_held():
    runs = [whole(f"e{k}", 20) for k in range(3)]
    pieces = [run[a : a + 5] for a in range(0, 20, 5) for run in runs]  # as a runner writes
    joins = PieceJoins([(p.id_, p.t_started, p.t, p.is_done) for p in pieces])
    held = []
    for i, piece in enumerate(pieces):
        assert joins.check(i, piece) == []
        held.append(joins.pending)
    assert max(held) == 3 and held[-1] == 0


def test_a_piece_checked_twice_counts_once():
    episode = whole("e1", 4)
    joins = PieceJoins([("e1", 0, 2, False), ("e1", 2, 4, True)])
    assert joins.check(0, episode[0:2]) == [] and joins.check(0, episode[0:2]) == []
    assert joins.check(1, moved(episode[2:4])) != []


def _steps(id_, key=None, n=5):
    extras = {key: [0.0] * n} if key else None
    return SingleAgentEpisode(
        id_,
        observations=list(range(n + 1)),
        actions=[0] * n,
        rewards=[1.0] * n,
        extra_model_outputs=extras,
        len_lookback_buffer=0,
    )


def _validate_agrees_with_load(path, id_="x"):
    from episodes.io import piece_problems

    problems = list(piece_problems(path))
    joins = PieceJoins.of(path)
    problems += [p for i, piece in enumerate(read_episodes(path)) for p in joins.check(i, piece)]
    try:
        load_episode(path, id_)
        loads = True
    except CorruptDatasetError:
        loads = False
    return problems, loads


@pytest.mark.parametrize("v1", [False, True], ids=["v2", "v1"])
def test_a_stepless_piece_inside_stored_steps_is_reported(tmp_path, v1):
    # Neither check saw it, and load_episode could not join it (validate said OK).
    write(tmp_path / "d", [_steps("x"), _steps("x")[3:3]], v1)
    problems, loads = _validate_agrees_with_load(tmp_path / "d")
    assert not loads and any("inside stored steps" in p for p in problems)


@pytest.mark.parametrize("v1", [False, True], ids=["v2", "v1"])
def test_extra_output_keys_changing_across_a_stepless_piece_are_reported(tmp_path, v1):
    empty = SingleAgentEpisode("x", observations=[3], t_started=3, len_lookback_buffer=0)
    write(tmp_path / "d", [_steps("x", "a")[0:3], empty, _steps("x", "b")[3:5]], v1)
    problems, loads = _validate_agrees_with_load(tmp_path / "d")
    assert not loads and any("extra-model-output keys" in p for p in problems)
    same = tmp_path / "same"
    write(same, [_steps("x", "a")[0:3], empty, _steps("x", "a")[3:5]], v1)
    assert _validate_agrees_with_load(same) == ([], True)


def test_pieces_of_text_in_both_modes_join(tmp_path):
    # A numpy'd piece's last observation is a numpy str_, its successor's a str: not equal.
    first = SingleAgentEpisode(
        "x", observations=["ab", "cd"], actions=[0], rewards=[1.0], len_lookback_buffer=0
    )
    second = first.cut()
    second.add_env_step("ef", 1, 1.0)
    first.to_numpy()
    write(tmp_path / "d", [first, second], False)
    assert list(load_episode(tmp_path / "d", "x").get_observations()) == ["ab", "cd", "ef"]
