"""``get_transitions`` gives the columns a sampled batch has, so one loss takes both.

It lacked ``weights`` (a loss written for sampled batches raised ``KeyError``) and could not
include infos or extra model outputs.
"""

from __future__ import annotations

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer

BUFFERS = {"uniform": EpisodeReplayBuffer, "prioritized": PrioritizedEpisodeReplayBuffer}
FLAGS = {
    "plain": {},
    "infos": {"include_infos": True},
    "extras": {"include_extra_model_outputs": True},
    "both": {"include_infos": True, "include_extra_model_outputs": True},
}


def _buffer(kind):
    buffer = BUFFERS[kind](100, seed=3)
    for name, length in (("a", 5), ("b", 3)):
        buffer.add(
            SingleAgentEpisode(
                name,
                observations=[[float(t)] for t in range(length + 1)],
                actions=list(range(length)),
                rewards=[float(t) for t in range(length)],
                infos=[{"t": t} for t in range(length + 1)],
                extra_model_outputs={"logp": [-0.1 * t for t in range(length)]},
                truncated=name == "b",
                len_lookback_buffer=0,
            )
        )
    return buffer


def _plain(value):
    if isinstance(value, np.ndarray):
        return value.tolist()
    return value


@pytest.mark.parametrize("flags", FLAGS.values(), ids=FLAGS.keys())
@pytest.mark.parametrize("kind", BUFFERS)
def test_get_transitions_of_sampled_indices_is_the_sampled_batch(kind, flags):
    buffer = _buffer(kind)
    sampled = buffer.sample(16, n_step=2, gamma=0.5, **flags)
    given = buffer.get_transitions(sampled["indices"], n_step=2, gamma=0.5, **flags)
    assert set(given) == set(sampled)
    for key in set(sampled) - {"weights"}:
        assert _plain(given[key]) == _plain(sampled[key]), key
    assert given["weights"].dtype == np.float32
    assert given["weights"].tolist() == [1.0] * 16


@pytest.mark.parametrize("flag", ["include_infos", "include_extra_model_outputs"])
def test_get_transitions_refuses_flags_that_are_not_bools(flag):
    buffer = _buffer("uniform")
    with pytest.raises(ValueError, match=flag):
        buffer.get_transitions([0], **{flag: "no"})
