"""from_dataset sizes an empty buffer's columns once when every step read will be kept.

Growing them as add batches came held an old and a new copy of each column at every growth:
a peak of about twice the frames of an Atari dataset.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.replay.store import StepStore

pytest.importorskip("pyarrow")

STEPS = 10_000  # 100 episodes of 100 steps, in pieces of 50: several add batches of 4,096


def _dataset(path: Path) -> Path:
    with DatasetWriter(path, sync=False) as writer:
        for e in range(100):
            obs = np.arange(101 * 4, dtype=np.float32).reshape(101, 4) + 1000 * e
            episode = SingleAgentEpisode(
                f"e{e}", observations=list(obs[:51]), actions=[0] * 50, rewards=[1.0] * 50,
                len_lookback_buffer=0,
            )  # fmt: skip
            writer.write(episode)
            rest = SingleAgentEpisode(
                f"e{e}", observations=list(obs[50:]), actions=[1] * 50, rewards=[2.0] * 50,
                t_started=50, terminated=True, len_lookback_buffer=0,
            )  # fmt: skip
            writer.write(rest)
    return path


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[tuple[StepStore, int]]:
    sizes: list[tuple[StepStore, int]] = []  # a store's growths (add's probe stores too)
    real = StepStore._resize

    def resize(self: StepStore, size: int) -> None:
        sizes.append((self, size))
        real(self, size)

    monkeypatch.setattr(StepStore, "_resize", resize)
    return sizes


# (case, buffer class, capacity given to from_dataset, sized once up front)
CASES = [
    ("default capacity", EpisodeReplayBuffer, None, True),
    ("capacity above the steps", EpisodeReplayBuffer, 20_000, True),
    ("capacity of exactly the steps", EpisodeReplayBuffer, STEPS, True),
    ("prioritized", PrioritizedEpisodeReplayBuffer, 20_000, True),
    ("capacity below the steps: grows as before", EpisodeReplayBuffer, 5_000, False),
]


@pytest.mark.parametrize(("name", "cls", "capacity", "once"), CASES, ids=[c[0] for c in CASES])
def test_columns_sized_once_where_everything_is_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str, cls: type, capacity: int | None,
    once: bool,
) -> None:  # fmt: skip
    path = _dataset(tmp_path / "ds")
    expected = cls.from_dataset(path, capacity=capacity)  # unpatched: the same adds
    sizes = _counting(monkeypatch)
    buffer = cls.from_dataset(path, capacity=capacity)
    grown = [size for store, size in sizes if store is buffer._store]
    if once:
        assert grown == [STEPS]
        assert buffer._store.size == STEPS
    else:
        assert len(grown) > 1
    assert buffer.get_num_timesteps() == expected.get_num_timesteps()
    assert buffer.get_episode_ids() == expected.get_episode_ids()
    indices = np.concatenate([buffer.get_episode_indices(i) for i in buffer.get_episode_ids()])
    got, want = buffer.get_transitions(indices), expected.get_transitions(indices)
    for key in ("obs", "actions", "rewards", "next_obs", "terminateds"):
        np.testing.assert_array_equal(got[key], want[key])
    buffer.add(  # a later add after the presized fill still grows the columns
        SingleAgentEpisode("more", observations=[np.zeros(4, np.float32)] * 3, actions=[0, 0],
                           rewards=[0.0, 0.0], len_lookback_buffer=0)
    )  # fmt: skip
    assert "more" in buffer.get_episode_ids()
