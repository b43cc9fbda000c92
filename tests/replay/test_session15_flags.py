"""Replay flags must be bools: a string such as "no" turned padding (or infos) on."""

from __future__ import annotations

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer


def _buffer(cls: type = EpisodeReplayBuffer) -> EpisodeReplayBuffer:
    buf = cls(capacity=100, seed=0)
    obs = np.arange(6, dtype=np.float32).reshape(6, 1)
    buf.add(
        [
            SingleAgentEpisode(
                observations=list(obs),
                actions=[0] * 5,
                rewards=[1.0] * 5,
                terminated=True,
                len_lookback_buffer=0,
            )
        ]
    )
    return buf


CASES = {
    "pad as a string": dict(batch_length_T=3, pad="no"),
    "pad as an int": dict(batch_length_T=3, pad=1),
    "include_infos as a string": dict(include_infos="False"),
    "include_extra_model_outputs as None": dict(include_extra_model_outputs=None),
    "sample_episodes as a string": dict(sample_episodes="no"),
}


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("kwargs", CASES.values(), ids=list(CASES))
def test_a_flag_that_is_no_bool_is_refused(cls: type, kwargs: dict) -> None:
    buf = _buffer(cls)
    state = buf.rng.bit_generator.state
    with pytest.raises(ValueError, match="must be a bool"):
        buf.sample(2, **kwargs)
    assert buf.rng.bit_generator.state == state
    empty = cls(capacity=10)
    with pytest.raises(ValueError, match="must be a bool"):  # before the empty-buffer error
        empty.sample(2, **kwargs)


def test_numpy_bools_are_flags() -> None:
    batch = _buffer().sample(2, batch_length_T=3, pad=np.True_, include_infos=np.False_)
    assert batch["mask"].shape == (2, 3)


def test_from_dataset_refuses_a_prioritized_that_is_no_bool(tmp_path) -> None:
    with pytest.raises(ValueError, match="prioritized must be a bool"):
        EpisodeReplayBuffer.from_dataset(tmp_path / "none", prioritized="yes")
