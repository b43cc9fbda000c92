"""from_dataset reads pieces in the order it adds them: a late first piece holds nothing back."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, EpisodeWriter
from episodes.replay import EpisodeReplayBuffer

PIECES = 250  # written between episode X's later piece and its first one
STEPS = 20
WIDTH = 1024  # float32 observations: 4 KiB a step, 86 KiB a piece, 21 MiB for all of them


def piece(id_, start, steps, done):
    return SingleAgentEpisode(
        id_,
        observations=np.zeros((steps + 1, WIDTH), np.float32),
        actions=np.zeros(steps, np.int64),
        rewards=np.ones(steps, np.float32),
        t_started=start,
        terminated=done,
        len_lookback_buffer=0,
    )


def written(late_first):
    first = [piece("X", 0, 5, False)]
    return [
        *([] if late_first else first),
        piece("X", 5, 5, True),
        *(piece(i, 0, STEPS, True) for i in range(PIECES)),
        *(first if late_first else []),
    ]


@pytest.mark.parametrize("writer", [DatasetWriter, EpisodeWriter], ids=["v2", "v1"])
@pytest.mark.parametrize("late_first", [False, True], ids=["in_time_order", "first_piece_last"])
def test_pieces_written_before_a_late_first_piece_do_not_wait_in_memory(
    tmp_path, writer, late_first
):
    path = tmp_path / "d"
    with writer(path) as w:
        for p in written(late_first):
            w.write(p)
    tracemalloc.start()
    try:
        buffer = EpisodeReplayBuffer.from_dataset(path, capacity=100)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # Holding the 250 pieces in between took 23 MiB at the peak; a 100-step buffer and one add
    # batch of pieces take 2 to 4 MiB.
    assert peak < 8 * 2**20, f"peak {peak / 2**20:.1f} MiB"
    # X (first written: dataset_info lists it first) was added first, then evicted.
    assert buffer.get_evicted_ids()[0] == "X"
    assert buffer.get_episode_ids() == list(range(PIECES - 5, PIECES))
    assert buffer.get_added_timesteps() == 10 + PIECES * STEPS
