"""``episodes validate`` says which refused joins ``load_episode(..., numpy=True)`` makes.

``load_episode(..., numpy=True)`` joins an id's pieces stored numpy'd in other dtypes in
numpy's ``result_type`` (format.md, "Random access and loading"), while the default
``numpy=None`` joins them as stored and refuses a later piece's values the first piece's dtype
cannot take. The validator promises that a dataset it calls OK loads every id with
``load_episode`` (api.md), so such an id stays a problem; but it read like damage, nothing
saying the pieces load with ``numpy=True``. Now the line ends saying so, and later pieces of
the id are checked as ``numpy=True`` joins them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.cli import main
from episodes.io import (
    CorruptDatasetError,
    DatasetWriter,
    EpisodeWriter,
    load_episode,
    validate_dataset,
)
from episodes.io.joins import NUMPY_ONLY, PieceJoins

WRITERS = {"v1": EpisodeWriter, "v2": DatasetWriter}
BIG = 2**40  # no int32 holds it


def _piece(id_: Any, obs: Any, t_started: int, *, numpy: bool = True) -> SingleAgentEpisode:
    n = len(obs) - 1
    episode = SingleAgentEpisode(
        id_,
        observations=list(obs) if not numpy else obs,
        actions=[0] * n,
        rewards=[1.0] * n,
        t_started=t_started,
        len_lookback_buffer=0,
    )
    return episode.to_numpy() if numpy else episode


def _write(path: Path, fmt: str, pieces: list[SingleAgentEpisode]) -> None:
    # One writer per piece: a dataset appended to by later runs.
    for piece in pieces:
        with WRITERS[fmt](path) as writer:
            writer.write(piece)


I32, I64 = np.int32, np.int64
# name -> (pieces of id "a" in write order, loads with numpy=None, loads with numpy=True)
CASES: dict[str, tuple[list[SingleAgentEpisode], bool, bool]] = {
    "int64 beyond int32 after int32": (
        [_piece("a", np.array([0, 1], I32), 0), _piece("a", np.array([1, BIG], I64), 1)],
        False,
        True,
    ),
    "fitting int64 after int32": (
        [_piece("a", np.array([0, 1], I32), 0), _piece("a", np.array([1, 2], I64), 1)],
        True,
        True,
    ),
    "wider text after narrow text": (
        [_piece("a", np.array(["x", "ab"]), 0), _piece("a", np.array(["ab", "abcde"]), 1)],
        False,
        True,
    ),
    "three pieces, the wide one in the middle": (
        [
            _piece("a", np.array([0, 1], I32), 0),
            _piece("a", np.array([1, BIG, 5], I64), 1),
            _piece("a", np.array([5, 6], I32), 3),
        ],
        False,
        True,
    ),
    "written last to first": (
        [_piece("a", np.array([1, BIG], I64), 1), _piece("a", np.array([0, 1], I32), 0)],
        False,
        True,
    ),
    "list-mode piece beyond int32 after int32": (
        [_piece("a", np.array([0, 1], I32), 0), _piece("a", [1, BIG], 1, numpy=False)],
        False,
        True,
    ),
    "other observation shape": (
        [_piece("a", np.zeros((2, 2), I32), 0), _piece("a", np.zeros((2, 3), I64), 1)],
        False,
        False,
    ),
    "not starting where the first ends": (
        [_piece("a", np.array([0, 1], I32), 0), _piece("a", np.array([2, BIG], I64), 1)],
        False,
        False,
    ),
}


def _loads(path: Path, numpy: bool | None) -> bool:
    try:
        load_episode(path, "a", numpy=numpy)
    except CorruptDatasetError:
        return False
    return True


SAYS = f"({NUMPY_ONLY})"


@pytest.mark.parametrize("fmt", sorted(WRITERS))
@pytest.mark.parametrize("name", list(CASES))
def test_validate_agrees_with_load_episode(tmp_path: Path, fmt: str, name: str) -> None:
    pieces, as_stored, widened = CASES[name]
    _write(tmp_path, fmt, pieces)
    assert (_loads(tmp_path, None), _loads(tmp_path, True)) == (as_stored, widened)
    report = validate_dataset(tmp_path)
    # ok promises that load_episode loads every id; a problem that numpy=True joins says so.
    assert report.ok == as_stored, report.problems
    assert all(SAYS not in note for note in report.notes)
    if not as_stored:
        (problem,) = report.problems
        assert problem.startswith("episode 'a': piece at t=1 does not ")
        assert problem.endswith(SAYS) == widened, problem
    assert main(["validate", str(tmp_path)]) == (0 if as_stored else 1)


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_cli_says_numpy_true_joins_it(
    tmp_path: Path, fmt: str, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmp_path, fmt, CASES["int64 beyond int32 after int32"][0])
    assert main(["validate", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "BAD episode 'a': piece at t=1 does not join its predecessor: " in err
    assert f"{SAYS}\n1 problem in 2 episode pieces" in err


@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_only_the_widened_joins_say_so(tmp_path: Path, fmt: str) -> None:
    wide = [_piece("w", np.array([0, 1], I32), 0), _piece("w", np.array([1, BIG], I64), 1)]
    bad = [_piece("b", np.array([0, 1], I32), 0), _piece("b", np.zeros((2, 2), I64), 1)]
    with WRITERS[fmt](tmp_path) as writer:
        writer.write_many([bad[1], wide[1], wide[0], bad[0]])
    problems = sorted(validate_dataset(tmp_path).problems)
    assert [p[:12] for p in problems] == ["episode 'b':", "episode 'w':"]
    assert [p.endswith(SAYS) for p in problems] == [False, True]


def _joins(pieces: list[SingleAgentEpisode]) -> PieceJoins:
    return PieceJoins([("x", p.t_started, p.t, False) for p in pieces])


def test_piece_joins_leave_the_piece_as_read() -> None:
    first = _piece("x", np.array([0, 1], I32), 0)
    second = _piece("x", np.array([1, BIG], I64), 1)
    joins = _joins([first, second])
    # Checked last to first: the later piece waits, then joins widened.
    assert joins.check(1, second) == []
    (problem,) = joins.check(0, first)
    assert problem.endswith(SAYS) and joins.pending == 0
    assert second.get_observations().dtype == np.int64
    assert first.get_observations().dtype == np.int32


def test_later_pieces_join_onto_the_widened_columns() -> None:
    pieces = [
        _piece("x", np.array([0, 1], I32), 0),
        _piece("x", np.array([1.0, 0.5]), 1, numpy=False),  # numpy=True: float64
        _piece("x", np.array([0.5, 0.25]), 2),  # fits float64, not the first's int32
        _piece("x", np.zeros((2, 2), I64), 3),  # joins neither way
    ]
    joins = _joins(pieces)
    found = [joins.check(k, piece) for k, piece in enumerate(pieces)]
    assert [len(p) for p in found] == [0, 1, 0, 1]
    assert found[1][0].endswith(SAYS) and "piece at t=3" in found[3][0]
    assert not found[3][0].endswith(SAYS)
