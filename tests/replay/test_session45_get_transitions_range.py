"""``get_transitions`` names an ``n_step`` range as something only ``sample`` takes."""

from __future__ import annotations

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.errors import IntegerTypeError
from episodes.replay import EpisodeReplayBuffer


def _buffer() -> EpisodeReplayBuffer:
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(
        SingleAgentEpisode(
            "x",
            observations=[np.float32([t]) for t in range(5)],
            actions=[0] * 4,
            rewards=[1.0, 2.0, 3.0, 4.0],
            terminated=True,
            len_lookback_buffer=0,
        )
    )
    return buf


RANGES = {
    "tuple": (1, 4),
    "list": [1, 4],
    "range": range(1, 4),
}


@pytest.mark.parametrize("value", RANGES.values(), ids=RANGES.keys())
def test_a_range_is_named_as_samples_and_nothing_changes(value):
    buf = _buffer()
    before = buf.get_counters()
    with pytest.raises(IntegerTypeError, match="ranges are for sample") as caught:
        buf.get_transitions(buf.locate("x", [0, 1]), n_step=value)
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, ValueError)
    assert "n_step must be an int >= 1" in str(caught.value)
    assert buf.get_counters() == before
    assert buf.get_num_timesteps() == 4


INTS = {"int": 2, "numpy int": np.int64(2), "0-d array": np.array(2)}


@pytest.mark.parametrize("value", INTS.values(), ids=INTS.keys())
def test_one_horizon_still_builds_the_batch(value):
    buf = _buffer()
    batch = buf.get_transitions(buf.locate("x", [0, 3]), n_step=value, gamma=0.5)
    assert batch["rewards"].tolist() == [1.0 + 0.5 * 2.0, 4.0]
    assert batch["n_step"].tolist() == [2, 1]


def test_a_sampled_range_batch_is_rebuilt_one_horizon_at_a_time():
    buf = _buffer()
    batch = buf.sample(8, n_step=(1, 4), gamma=0.9)
    for n in np.unique(batch["n_step"]):
        picked = batch["n_step"] == n
        again = buf.get_transitions(batch["indices"][picked], n_step=int(n), gamma=0.9)
        np.testing.assert_array_equal(again["rewards"], batch["rewards"][picked])
        np.testing.assert_array_equal(again["next_obs"], batch["next_obs"][picked])
