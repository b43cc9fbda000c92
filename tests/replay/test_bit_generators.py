"""Buffers seeded with any numpy bit generator keep it through their state and saves.

The state and saves rebuilt a PCG64 generator whatever the buffer held: a buffer seeded with
``Generator(MT19937(0))`` sampled, but ``set_state`` refused its state ("must be for a PCG64
RNG") and ``save`` failed writing the MT19937 state's array into JSON.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.replay.state import generator_from_state

from ._episodes import chunk, make_episode_data

KINDS = ["PCG64", "PCG64DXSM", "MT19937", "Philox", "SFC64"]
CLASSES = [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer]


def _buffer(cls, kind):
    buf = cls(100, seed=np.random.Generator(getattr(np.random, kind)(7)))
    buf.add([chunk(f"e{i}", make_episode_data(i, 12), 0, 12) for i in range(3)])
    buf.sample(4)
    return buf


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("cls", CLASSES)
def test_state_round_trip_keeps_the_bit_generator(cls, kind):
    buf = _buffer(cls, kind)
    back = cls(100)
    back.set_state(pickle.loads(pickle.dumps(buf.get_state())))
    assert type(back.rng.bit_generator).__name__ == kind
    assert np.array_equal(back.sample(8)["indices"], buf.sample(8)["indices"])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("cls", CLASSES)
def test_save_and_load_keep_the_bit_generator(cls, kind, tmp_path):
    buf = _buffer(cls, kind)
    buf.save(tmp_path / "b")
    back = EpisodeReplayBuffer.load(tmp_path / "b")
    assert type(back.rng.bit_generator).__name__ == kind
    assert np.array_equal(back.sample(8)["indices"], buf.sample(8)["indices"])


@pytest.mark.parametrize("name", ["seed", "default_rng", "Generator", 3, None, "os"])
def test_a_state_naming_no_bit_generator_is_refused(name):
    state = dict(np.random.default_rng(0).bit_generator.state, bit_generator=name)
    with pytest.raises(ValueError, match="bit generator"):
        generator_from_state(state)
