"""Pins for session 31's io findings: copies keep wall times, quiet extreme rewards, warnings.

A. The copy tools (``migrate``, ``merge``, ``split``, ``filter_dataset``) computed every
   piece's ``wall_start``/``wall_end`` again with the copying process's clock offset: a copy
   made after a reboot (or on another machine) moved them by days. They keep the source's now,
   and a v1 source (no wall time stored) gives null.
B. Valid inf / huge rewards let numpy RuntimeWarnings escape from the writers' returns and
   from ``TransitionDataset``'s n-step sums.
C. ``export_minari``'s "infos left out" warning pointed into the library, not at the caller.
"""

from __future__ import annotations

import time
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import (
    Dataset,
    DatasetWriter,
    EpisodeWriter,
    filter_dataset,
    merge,
    migrate,
    split,
)
from episodes.io.nstep import discount_weights, discounted_sum

SHIFT = 500_000.0  # seconds: the copying process's wall clock minus perf_counter differs


def recorded(id_: str, steps: int = 2) -> SingleAgentEpisode:
    """An episode recorded step by step, so that it carries perf_counter timing."""
    episode = SingleAgentEpisode(id_)
    episode.add_env_reset(0)
    for k in range(steps):
        episode.add_env_step(k + 1, 0, 1.0)
    return episode


def walls(path: Path) -> dict[Any, tuple[Any, Any]]:
    ds = Dataset(path)
    out = {}
    for i in range(len(ds)):
        shard, j = ds.locate(i)
        entry = shard.entry_of(j)
        out[entry["meta"]["id"]] = (entry["wall_start"], entry["wall_end"])
    return out


@pytest.fixture
def source(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    before = time.time()
    with DatasetWriter(src) as w:  # a fresh write converts with its own clock, as before
        w.write_many(recorded(str(i)) for i in range(6))
    stored = walls(src)
    assert all(before - 60 < a <= b <= time.time() + 1 for a, b in stored.values())
    return src


@pytest.fixture
def other_clock(source: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The copy runs where time.time() - time.perf_counter() is SHIFT larger (a reboot).

    After ``source``: the source is written with the real clock.
    """
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + SHIFT)


def test_merge_keeps_the_sources_wall_times(source, tmp_path, other_clock):
    assert merge([source], tmp_path / "merged") == 6
    assert walls(tmp_path / "merged") == walls(source)


def test_migrate_of_a_v2_dataset_keeps_its_wall_times(source, tmp_path, other_clock):
    assert migrate(source, tmp_path / "copy", data_format="parquet") == 6
    assert walls(tmp_path / "copy") == walls(source)


def test_split_and_filter_keep_the_sources_wall_times(source, tmp_path, other_clock):
    n_train, n_val = split(source, tmp_path / "train", tmp_path / "val", fraction=0.5)
    assert n_train and n_val
    stored = walls(source)
    halves = {**walls(tmp_path / "train"), **walls(tmp_path / "val")}
    assert halves == stored
    assert filter_dataset(source, tmp_path / "long", min_length=2) == 6
    assert walls(tmp_path / "long") == stored


def test_a_copy_from_v1_stores_no_made_up_wall_times(tmp_path):
    with EpisodeWriter(tmp_path / "v1") as w:
        w.write(recorded("a"))
    assert migrate(tmp_path / "v1", tmp_path / "v2") == 1
    assert walls(tmp_path / "v2") == {"a": (None, None)}
    # The perf_counter timing itself still round-trips.
    (ep,) = Dataset(tmp_path / "v2")
    assert ep.get_duration_s() == pytest.approx(recorded("a").get_duration_s(), abs=1.0)


# ------------------------------------------------------------ B: extreme rewards, quietly
def inf_episode(rewards: list[float]) -> SingleAgentEpisode:
    n = len(rewards)
    return SingleAgentEpisode(
        "a",
        observations=[np.zeros(2, np.float32) + t for t in range(n + 1)],
        actions=[0] * n,
        rewards=rewards,
        terminated=True,
        len_lookback_buffer=0,
    )


@pytest.mark.parametrize("writer", [DatasetWriter, EpisodeWriter])
def test_writers_store_inf_and_minus_inf_rewards_without_warnings(tmp_path, writer):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # inf + -inf: "invalid value encountered in reduce"
        with writer(tmp_path / "d") as w:
            w.write(inf_episode([np.inf, -np.inf]))


def test_filter_by_return_of_inf_and_minus_inf_rewards_warns_not(tmp_path):
    with DatasetWriter(tmp_path / "d") as w:
        w.write(inf_episode([np.inf, -np.inf]))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the exact return, summed again: inf + -inf
        assert filter_dataset(tmp_path / "d", tmp_path / "f", min_return=0.0) == 0


def test_nstep_sums_of_extreme_rewards_warn_not(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        total = discounted_sum(np.array([1e308, 1e308, 1e308]), discount_weights(0.9, 3))
        nan = discounted_sum(np.array([np.inf, -np.inf]), discount_weights(0.9, 2))
    assert total == np.inf and np.isnan(nan)


def test_transition_dataset_of_huge_rewards_warns_not(tmp_path):
    pytest.importorskip("torch")
    from episodes.io.torch_data import TransitionDataset

    with DatasetWriter(tmp_path / "d") as w:
        w.write(inf_episode([1e308] * 6))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        td = TransitionDataset(tmp_path / "d", n_step=3, gamma=0.9)
        rewards = [float(td[i]["rewards"]) for i in range(3)]
    assert rewards == [np.inf] * 3


# ------------------------------------------------------ C: the Minari warning's location
def test_the_infos_left_out_warning_points_at_the_caller(tmp_path):
    pytest.importorskip("minari")
    import gymnasium as gym

    from episodes.io import export_minari

    with DatasetWriter(tmp_path / "ours") as w:
        w.write(
            SingleAgentEpisode(
                "a",
                observations=[0, 1, 0],
                actions=[1, 0],
                rewards=[1.0, 1.0],
                terminated=True,
                infos=[{}, {"x": 1}, {"y": 2.0}],
                len_lookback_buffer=0,
                observation_space=gym.spaces.Discrete(2),
                action_space=gym.spaces.Discrete(2),
            )
        )
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        export_minari(tmp_path / "ours", "s31/ours-v0", root=tmp_path / "minari")
    left_out = [w for w in seen if "infos left out" in str(w.message)]
    assert left_out, [str(w.message) for w in seen]
    assert all(w.filename == __file__ for w in left_out), [w.filename for w in left_out]
