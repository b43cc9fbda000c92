"""Datasets read at once with ``max_open_shards="auto"`` share one descriptor budget.

Each ``"auto"`` dataset could keep a quarter of the soft ``RLIMIT_NOFILE`` shards open, so
four datasets of 300 one-episode shards read in one process under a limit of 1,024 ran out of
file descriptors (``DatasetIOError``: too many open files) where the old default of 64 each
read them all. Now a dataset keeps its 64 most recently used shards whatever the others hold,
and more only while all ``"auto"`` datasets of the process hold at most that quarter together.
"""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import Dataset, DatasetWriter
from episodes.io import open_shards as limits_module

SHARDS = 90
BUDGET = 80  # the quarter of the descriptor limit, made small for the test


@pytest.fixture(scope="module")
def many(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("budget") / "ds"
    with DatasetWriter(path) as w:
        for k in range(SHARDS):
            w.write(
                SingleAgentEpisode(
                    f"e{k}",
                    observations=[np.float32(k), np.float32(k + 1)],
                    actions=[0],
                    rewards=[1.0],
                    len_lookback_buffer=0,
                )
            )
            w.flush()
    return path


@pytest.fixture
def small_budget(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(limits_module, "map_limit", lambda: BUDGET)
    # Counted apart from the datasets other tests left open: those made now share this cell.
    monkeypatch.setattr(limits_module, "_OPEN_AUTO", [0])


def _read_all(ds: Dataset) -> None:
    for k in range(SHARDS):
        assert float(ds.episode(k).get_observations(0)) == k


def test_datasets_read_at_once_share_the_budget(many: Path, small_budget: None) -> None:
    held = limits_module.HELD_SHARDS
    datasets = [Dataset(many) for _ in range(4)]
    for ds in datasets:
        _read_all(ds)
    opened = [len(ds.open_shards()) for ds in datasets]
    assert opened == [BUDGET, held, held, held]  # the first within the budget, then 64 each
    assert limits_module.open_in_process() == sum(opened)
    for ds in datasets:
        ds.close()
    assert limits_module.open_in_process() == 0


def test_a_dataset_alone_keeps_the_budget_and_an_int_setting_counts_apart(
    many: Path, small_budget: None
) -> None:
    fixed = Dataset(many, max_open_shards=SHARDS)  # an int: its own bound, not the budget's
    _read_all(fixed)
    auto = Dataset(many)
    _read_all(auto)
    assert (len(fixed.open_shards()), len(auto.open_shards())) == (SHARDS, BUDGET)
    assert limits_module.open_in_process() == BUDGET
    fixed.close()
    auto.close()


def test_a_dataset_dropped_unclosed_gives_its_share_back(many: Path, small_budget: None) -> None:
    dropped = Dataset(many)
    _read_all(dropped)
    assert limits_module.open_in_process() == BUDGET
    del dropped
    gc.collect()
    assert limits_module.open_in_process() == 0
    later = Dataset(many)
    _read_all(later)
    assert len(later.open_shards()) == BUDGET
    later.close()


@pytest.mark.parametrize("value", ["Auto", "64", ""])
def test_another_string_names_auto(many: Path, value: str) -> None:
    with pytest.raises(ValueError, match=r"max_open_shards must be 'auto' or an int >= 1"):
        Dataset(many, max_open_shards=value)
