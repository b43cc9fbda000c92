"""Episode ids the time-order check cannot key (lists, dicts), pinned.

``check_time_order`` keyed a dict by each chunk's id, so ``episodes_to_rollout`` raised
``TypeError: unhashable type`` for a list id, while ``group_by_env`` and the stepless-end
lookup already accept such ids (they match nothing). Hashable ids keep their check.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.converter import episodes_to_rollout


def chunk(id_: Any, t0: int = 0, n: int = 2) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[np.full(2, t, np.float32) for t in range(t0, t0 + n + 1)],
        actions=[t % 2 for t in range(t0, t0 + n)],
        rewards=[1.0] * n,
        extra_model_outputs={"vf_preds": [0.0] * n, "action_logp": [0.0] * n},
        t_started=t0,
        len_lookback_buffer=0,
    )


def zero_values(obs: Any) -> np.ndarray:
    return np.zeros(len(obs))


@pytest.mark.parametrize(
    "id_", [["run", 1], {"run": 1}, ("run", [1])], ids=["list", "dict", "tuple-holding-list"]
)
def test_unhashable_id_converts(id_: Any) -> None:
    rollout = episodes_to_rollout([[chunk(id_)], [chunk("b")]], gamma=0.9, value_fn=zero_values)
    assert rollout.storage.num_transitions_per_env == 2
    np.testing.assert_array_equal(rollout.storage.rewards[:, :, 0].numpy(), np.ones((2, 2)))


def test_hashable_id_still_checked() -> None:
    with pytest.raises(ValueError, match="time order"):
        episodes_to_rollout([[chunk("a"), chunk("a")]], gamma=0.9, value_fn=zero_values)
