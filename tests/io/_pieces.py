"""Dataset pieces whose observations say where they come from, for the torch-dataset tests."""

from __future__ import annotations

from typing import Any

import numpy as np

from episodes import SingleAgentEpisode


def numbered_piece(
    id_: Any, t0: int, t1: int, end: str = "", number: int = 0
) -> SingleAgentEpisode:
    """Steps ``t0..t1`` of episode ``id_``; ``end`` is "", "terminated" or "truncated".

    Observations are ``[number, t]``, actions ``t % 3`` and rewards ``float(t)``, so an item
    read back names its episode and time.
    """
    return SingleAgentEpisode(
        id_,
        observations=[np.array([number, t], np.int64) for t in range(t0, t1 + 1)],
        actions=[t % 3 for t in range(t0, t1)],
        rewards=[float(t) for t in range(t0, t1)],
        t_started=t0,
        terminated=end == "terminated",
        truncated=end == "truncated",
        len_lookback_buffer=0,
    ).to_numpy()
