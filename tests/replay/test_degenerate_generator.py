"""A saved generator state no seeding can reach is refused, not restored to hang ``sample``.

An all-zero MT19937 state passes every field's range check, but such a generator draws only
zeros, and a bounded draw that rejects 0 waits for another value forever.
"""

from __future__ import annotations

import copy
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer
from episodes.replay.rng import generator_from_state


def _mt_state(key: list[int]) -> dict[str, Any]:
    return {"bit_generator": "MT19937", "state": {"key": np.array(key, np.uint32), "pos": 624}}


ZERO = [0] * 624
CASES = {
    "all zero": (ZERO, True),
    "only key[0]'s low bits, which hold no state": ([0x7FFFFFFF] + ZERO[1:], True),
    "key[0]'s top bit": ([0x80000000] + ZERO[1:], False),
    "one other word": (ZERO[:-1] + [1], False),
}


@pytest.mark.parametrize("case", list(CASES))
def test_degenerate_mt19937_states_are_refused(case: str) -> None:
    key, degenerate = CASES[case]
    if degenerate:
        with pytest.raises(ValueError, match="19937 state bits are all zero"):
            generator_from_state(_mt_state(key))
    else:  # a reachable state draws, and not only zeros
        # A nearly-zero state draws zeros for a while (MT's slow recovery), then not only.
        draws = generator_from_state(_mt_state(key)).bit_generator.random_raw(100_000)
        assert len(np.unique(draws)) > 100


def test_set_state_refuses_it_and_keeps_the_buffer() -> None:
    buffer = EpisodeReplayBuffer(capacity=100, seed=1)
    buffer.add(
        SingleAgentEpisode(
            "e",
            observations=[np.zeros(2, np.float32)] * 6,
            actions=[1] * 5,
            rewards=[1.0] * 5,
            terminated=True,
            len_lookback_buffer=0,
        )
    )
    state = buffer.get_state()
    key = next(k for k in state if "rng" in k)
    bad = dict(state, **{key: _mt_state(ZERO)})
    before = copy.deepcopy(buffer.get_state())
    with pytest.raises(ValueError, match="19937 state bits are all zero"):
        buffer.set_state(bad)
    after = buffer.get_state()
    assert after.keys() == before.keys()
    assert repr(after[key]) == repr(before[key])
    assert buffer.sample(4)["obs"].shape == (4, 2)
