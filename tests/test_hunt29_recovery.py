"""Refused or interrupted calls leave the object as it was (session-29 recovery hunt)."""

from __future__ import annotations

import copy

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import Dataset, DatasetWriter
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer


class _Info:
    """An info value whose copy (made on the way out of a sample) raises once armed."""

    armed: type[BaseException] | None = None

    def __deepcopy__(self, memo):
        if _Info.armed is not None:
            error, _Info.armed = _Info.armed, None
            raise error("raised while the batch's infos are copied")
        return _Info()


def _filled(kind):
    buffer = kind(100, seed=0)
    buffer.add(
        SingleAgentEpisode(
            "a",
            observations=[np.zeros(2, np.float32)] * 8,
            actions=[0] * 7,
            rewards=[1.0] * 7,
            infos=[{"x": _Info()}] * 8,
            len_lookback_buffer=0,
        )
    )
    return buffer


@pytest.mark.parametrize("error", [RuntimeError, KeyboardInterrupt])
@pytest.mark.parametrize("kind", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_an_interrupted_sample_leaves_the_generator_and_the_last_batch(kind, error):
    buffer, twin = _filled(kind), _filled(kind)
    first, twin_first = buffer.sample(2), twin.sample(2)
    _Info.armed = error
    with pytest.raises(error):
        buffer.sample(3, include_infos=True)
    assert buffer.rng.bit_generator.state == twin.rng.bit_generator.state
    if kind is PrioritizedEpisodeReplayBuffer:  # the update reaches the batch the caller holds
        buffer.update_priorities([5.0, 5.0])
        twin.update_priorities([5.0, 5.0])
        assert np.array_equal(buffer.get_priorities(first["indices"]), [5.0, 5.0])
        assert np.array_equal(
            buffer.get_priorities(np.arange(7)), twin.get_priorities(np.arange(7))
        )
    again, twin_again = buffer.sample(4), twin.sample(4)
    assert all(np.array_equal(again[k], twin_again[k]) for k in ("obs", "rewards"))
    assert np.array_equal(first["obs"], twin_first["obs"])


def test_refused_step_ranges_open_no_shard(tmp_path):
    with DatasetWriter(tmp_path) as writer:
        for i in range(2):  # one shard each
            writer.write(
                SingleAgentEpisode(
                    str(i),
                    observations=[0.0, 1.0, 2.0],
                    actions=[0, 1],
                    rewards=[1.0, 1.0],
                    len_lookback_buffer=0,
                )
            )
            writer.flush()
    dataset = Dataset(tmp_path, max_open_shards=1)
    dataset.episode(0)
    open_before = dataset.open_shards()
    for call, error in [
        (lambda: dataset.steps(1, 0, 99), IndexError),
        (lambda: dataset.steps(1, True, 2), TypeError),
        (lambda: dataset.steps(1, 2, 1), IndexError),
        (lambda: dataset.steps(5, 0, 1), IndexError),
    ]:
        with pytest.raises(error):
            call()
    assert dataset.evictions == 0 and dataset.open_shards() == open_before
    assert dataset.steps(-1, 0, 2)["rewards"].tolist() == [1.0, 1.0]  # negative: from the end


def _state():
    buffer = _filled(EpisodeReplayBuffer)
    return buffer, buffer.get_state()


@pytest.mark.parametrize(
    "break_state, match",
    [
        (lambda s: s["steps"].__setitem__("uid", s["steps"]["uid"] + 0.5), "uid'] must be int"),
        (lambda s: s["layout"].__setitem__("uid", s["layout"]["uid"] + 0.5), "uid'] must be int"),
        (lambda s: s.__setitem__("num_timesteps", "garbage"), "num_timesteps is 'garbage'"),
        (lambda s: s.__setitem__("num_timesteps", 3), "num_timesteps is 3 for 7"),
        (lambda s: s.__setitem__("num_timesteps", 7.0), "num_timesteps is 7.0"),
    ],
    ids=["fractional-uids", "fractional-layout-uids", "str-count", "other-count", "float-count"],
)
def test_set_state_refuses_what_no_buffer_had(break_state, match):
    buffer, state = _state()
    before = copy.deepcopy(buffer.get_state())
    broken = copy.deepcopy(state)
    break_state(broken)
    with pytest.raises(ValueError, match=match):
        buffer.set_state(broken)
    after = buffer.get_state()
    assert after["steps"]["uid"].tolist() == before["steps"]["uid"].tolist()
    assert after["num_timesteps"] == before["num_timesteps"]
