"""get_return is a float, also for int rewards whose sum no float holds."""

from __future__ import annotations

import math

import pytest

from episodes import SingleAgentEpisode

CASES = {
    "ints": ([1, 2], 3.0),
    "floats": ([0.5, 0.25], 0.75),
    "ints beyond float range": ([2**1100, 1], math.inf),
    "negative ints beyond float range": ([-(2**1100), 1], -math.inf),
    "no steps": ([], 0.0),
}


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize("name", CASES)
def test_get_return(name: str, numpy: bool) -> None:
    rewards, want = CASES[name]
    ep = SingleAgentEpisode(
        "x",
        observations=list(range(len(rewards) + 1)),
        actions=[0] * len(rewards),
        rewards=rewards,
        len_lookback_buffer=0,
    )
    if numpy:
        if any(abs(r) >= 2**63 for r in rewards):
            pytest.skip("a numpy'd rewards column holds no such ints")
        ep.to_numpy()
    got = ep.get_return()
    assert type(got) is float and got == want
