"""The copy tools copy the pieces they judged: one snapshot of a source still written to.

``filter_dataset`` decides on the episodes' summaries, ``merge`` checks the pieces for overlaps
and ``split`` reads the source for each half; each then read the source again to copy it, and
a piece committed in between (a writer appending the next chunk of a passing episode) was
copied too: an episode longer than the filter allowed, steps stored twice, halves from two
different states of the source.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, dataset_info, filter_dataset, merge, split, tools


def _piece(id_: str, start: int, steps: int) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[0.0] * (steps + 1),
        actions=[0] * steps,
        rewards=[1.0] * steps,
        t_started=start,
        len_lookback_buffer=0,
    )


def _write(path: Path, *pieces: SingleAgentEpisode) -> None:
    with DatasetWriter(path) as writer:
        for piece in pieces:
            writer.write(piece)


def _append_after(
    monkeypatch: pytest.MonkeyPatch, name: str, path: Path, *more: SingleAgentEpisode
) -> None:
    """Makes ``tools.<name>`` commit the next piece of episode "x" (and ``more``) to ``path``
    once it ran.
    """
    real = getattr(tools, name)
    done: list[bool] = []

    def then_append(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        if not done:
            done.append(True)
            _write(path, _piece("x", 10, 10), *more)
        return out

    monkeypatch.setattr(tools, name, then_append)


def test_filter_copies_the_pieces_it_judged(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    _write(tmp_path / "src", _piece("x", 0, 10))
    _append_after(monkeypatch, "dataset_info", tmp_path / "src")
    assert filter_dataset(tmp_path / "src", tmp_path / "dst", max_length=15) == 1
    assert [(s.id_, s.length) for s in dataset_info(tmp_path / "dst").episodes] == [("x", 10)]
    assert dataset_info(tmp_path / "src").num_chunks == 2  # the source did grow


def test_merge_copies_the_pieces_it_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    _write(tmp_path / "a", _piece("x", 0, 10))
    _write(tmp_path / "b", _piece("y", 0, 5))
    _append_after(monkeypatch, "manifest_pieces", tmp_path / "a")
    assert merge([tmp_path / "a", tmp_path / "b"], tmp_path / "ab") == 2
    assert dataset_info(tmp_path / "ab").num_chunks == 2


def test_split_halves_come_from_one_snapshot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    _write(tmp_path / "src", *[_piece(f"e{i}", 0, 3) for i in range(20)], _piece("x", 0, 10))
    new = [_piece(f"new{i}", 0, 3) for i in range(10)]  # some fall in each half
    _append_after(monkeypatch, "_fill", tmp_path / "src", *new)  # once train is written
    train, val = split(tmp_path / "src", tmp_path / "train", tmp_path / "val", fraction=0.5)
    assert train + val == 21  # what was committed after the snapshot is in neither half
    assert dataset_info(tmp_path / "src").num_chunks == 32


def test_filter_sums_exact_returns_of_the_judged_pieces(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An int return beyond float range is NaN in the manifest: summed from the rewards instead.
    big = SingleAgentEpisode(
        "x", observations=[0, 1], actions=[0], rewards=[2**1100], len_lookback_buffer=0
    )
    _write(tmp_path / "src", big)
    real = tools.exact_returns

    def appended_first(*args: Any, **kwargs: Any) -> Any:
        # A writer commits the next piece, whose return would bring the sum to 0.
        nxt = SingleAgentEpisode(
            "x",
            observations=[1, 2],
            actions=[0],
            rewards=[-(2**1100)],
            t_started=1,
            len_lookback_buffer=0,
        )
        _write(tmp_path / "src", nxt)
        return real(*args, **kwargs)

    monkeypatch.setattr(tools, "exact_returns", appended_first)
    # Judged on the snapshot: a return of 2**1100, above max_return.
    assert filter_dataset(tmp_path / "src", tmp_path / "dst", max_return=1.0) == 0
