"""The replay buffer stores int rewards beyond int64 as float32 (docs/replay.md, rewards)."""

from __future__ import annotations

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer


def _episode(rewards: list, id_: str = "a", numpy: bool = False) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(
        id_,
        observations=[np.zeros(1, np.float32)] * 3,
        actions=[0, 0],
        rewards=rewards,
        len_lookback_buffer=0,
    )
    return ep.to_numpy() if numpy else ep


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize(
    "rewards", [[2**70, 1], [-(2**70), 2.5], [2**64, True]], ids=["2**70", "neg", "with-bool"]
)
def test_ints_beyond_int64_are_stored_as_float32(rewards: list, numpy: bool) -> None:
    buf = EpisodeReplayBuffer(10)
    buf.add(_episode(rewards, numpy=numpy))
    stored = buf.get_state()["steps"]["rewards"]
    assert stored.dtype == np.float32
    assert stored.tolist() == np.asarray([float(r) for r in rewards], np.float32).tolist()


_REFUSED = {
    "beyond-float32": ([10**40, 1], ValueError, "overflow"),
    "beyond-float64": ([10**400, 1], ValueError, "overflow"),
    "complex-among-big-ints": ([2**70, 1j], TypeError, "real numbers.*complex"),
    "string-among-big-ints": ([2**70, "x"], TypeError, "real numbers.*str"),
    "none": ([None, 1], TypeError, "real numbers.*NoneType"),
    "strings": (["1.5", "2"], TypeError, "real numbers.*str"),
}


@pytest.mark.parametrize("case", list(_REFUSED))
def test_refused_rewards_leave_the_buffer_unchanged(case: str) -> None:
    rewards, error, match = _REFUSED[case]
    buf = EpisodeReplayBuffer(10)
    buf.add(_episode([1.0, 2.0], "kept"))
    before = buf.get_state()["steps"]["rewards"].copy()
    with pytest.raises(error, match=match):
        buf.add(_episode(rewards))
    assert buf.get_episode_ids() == ["kept"]
    assert buf.get_num_timesteps() == 2
    assert buf.get_state()["steps"]["rewards"].tolist() == before.tolist()


def test_big_int_overflow_is_refused_when_numpyd_too() -> None:
    buf = EpisodeReplayBuffer(10)
    with pytest.raises(ValueError, match="overflow"):
        buf.add(_episode([10**40, 1], numpy=True))
    assert buf.get_num_timesteps() == 0
