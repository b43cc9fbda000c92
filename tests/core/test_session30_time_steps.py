"""Time steps past int64 in batches, found by an integer-extremes hunt.

``get_data_dict``/``get_sample_batch`` of a numpy'd episode raised ``OverflowError`` past
int64, and ``episodes_to_batch`` gave float64 steps that rounded neighbours together; the
``t`` column now holds every step exactly (``sample_batch.time_steps``), in list and
numpy mode alike.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.connectors import AddLearnerColumns
from episodes.converter import episodes_to_batch
from episodes.episode.sample_batch import time_steps


@given(st.integers(-(2**70), 2**70), st.integers(0, 5))
def test_time_steps_hold_every_step_exactly(start, count):
    steps = time_steps(start, start + count)
    assert [int(step) for step in steps] == list(range(start, start + count))
    assert steps.dtype.kind in "iuO"


@pytest.mark.parametrize("t_started", [2**63 - 2, 2**63 - 1, 2**63, 2**70, -(2**63) - 1])
@pytest.mark.parametrize("numpyd", [False, True], ids=["list", "numpy"])
def test_every_batch_gives_the_exact_steps(t_started, numpyd):
    episode = SingleAgentEpisode(
        "e",
        observations=[0.0, 1.0, 2.0],
        actions=[0, 1],
        rewards=[1.0, 1.0],
        t_started=t_started,
        len_lookback_buffer=0,
    )
    if numpyd:
        episode.to_numpy()
    want = [t_started, t_started + 1]
    assert [int(t) for t in episode.get_data_dict()["t"]] == want
    assert [int(t) for t in episode.get_sample_batch()["t"]] == want
    assert [int(t) for t in AddLearnerColumns(["t"])([episode], {})["t"]] == want
    assert [int(t) for t in episodes_to_batch([episode])["t"]] == want
