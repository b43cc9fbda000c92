"""Round 25 (replay docs audit): list-structured items, devices without data, max priority."""

from __future__ import annotations

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter
from episodes.replay import EpisodeReplayBuffer


def _list_obs(width: int = 2) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        "a", observations=[[t + k * 0.5 for k in range(width)] for t in range(4)],
        actions=[0, 1, 0], rewards=[1.0, 1.0, 1.0], terminated=True, len_lookback_buffer=0,
    )  # fmt: skip


@pytest.mark.parametrize("width", [2, 4], ids=["2 leaves", "as many leaves as steps"])
def test_list_structured_observations_are_rows_in_every_mode(tmp_path, width: int) -> None:
    listed = EpisodeReplayBuffer(10)
    listed.add(_list_obs(width))
    expected = listed.get_episodes()[0].get_observations()
    assert expected.shape == (4, width)
    numpied = EpisodeReplayBuffer(10)
    numpied.add(_list_obs(width).to_numpy())
    with DatasetWriter(tmp_path / "d") as writer:
        writer.write(_list_obs(width))
    loaded = EpisodeReplayBuffer.from_dataset(tmp_path / "d", capacity=10)
    for buffer in (numpied, loaded):
        got = buffer.get_episodes()[0].get_observations()
        np.testing.assert_array_equal(got, expected)  # not leaf-major ([leaves, steps])
        assert got.dtype == expected.dtype


def test_list_items_holding_tuples_are_rows_in_every_mode(tmp_path) -> None:
    def episode() -> SingleAgentEpisode:
        return SingleAgentEpisode(
            "a", observations=[[(t, 1), (2, 3)] for t in range(4)], actions=[0] * 3,
            rewards=[1.0] * 3, len_lookback_buffer=0,
        )  # fmt: skip

    listed, numpied = EpisodeReplayBuffer(100), EpisodeReplayBuffer(100)
    listed.add(episode())
    numpied.add(episode().to_numpy())
    with DatasetWriter(tmp_path / "d") as writer:
        writer.write(episode())
    loaded = EpisodeReplayBuffer.from_dataset(tmp_path / "d", capacity=100)
    expected = listed.get_episodes()[0].get_observations()
    assert expected.shape == (4, 2, 2)
    for buffer in (numpied, loaded):
        np.testing.assert_array_equal(buffer.get_episodes()[0].get_observations(), expected)


def test_list_structured_items_with_a_nested_part_stay_refused() -> None:
    ep = SingleAgentEpisode(
        "n", observations=[[t, {"x": t}] for t in range(3)], actions=[0, 1],
        rewards=[0.0, 0.0], len_lookback_buffer=0,
    ).to_numpy()  # fmt: skip
    buffer = EpisodeReplayBuffer(10)
    with pytest.raises(TypeError, match="observations"):
        buffer.add(ep)
    assert buffer.get_num_timesteps() == 0


def _two_step_episodes(count: int) -> list[SingleAgentEpisode]:
    return [
        SingleAgentEpisode(
            i,
            observations=[np.zeros(1, np.float32)] * 3,
            actions=[0, 1],
            rewards=[1.0, 1.0],
            len_lookback_buffer=0,
        )  # fmt: skip
        for i in range(count)
    ]


def test_a_meta_device_is_refused_before_anything_is_counted() -> None:
    from episodes.replay.errors import DeviceError

    buffer = EpisodeReplayBuffer(10, seed=0)
    buffer.add(_two_step_episodes(1))
    with pytest.raises(DeviceError, match="meta"):
        buffer.sample(4, device="meta")
    assert buffer.get_sampled_timesteps() == 0


def test_a_batch_larger_than_the_buffer_lists_starts_without_blind_rounds(monkeypatch) -> None:
    from episodes.replay import sampling

    drawn: list[int] = []
    real = np.random.Generator.integers

    class Counting:
        def __init__(self, rng: np.random.Generator):
            self.rng = rng

        def integers(self, low, high=None, size=None, *args, **kwargs):
            if size is not None:
                drawn.append(int(np.prod(size)))
            return real(self.rng, low, high, size, *args, **kwargs)

    flags = np.zeros(100, bool)  # 2 of 100 starts fit: a first round of 600,000
    flags[[3, 50]] = True
    got = sampling.draw_flagged(flags, 2, Counting(np.random.default_rng(0)), 100_000)
    assert set(got.tolist()) == {3, 50}
    assert sum(drawn) <= 100_000  # one pick among the listed starts, no rounds over the range


def test_max_priority_counts_a_floored_priority_as_stored() -> None:
    from episodes.replay import PrioritizedEpisodeReplayBuffer
    from episodes.replay.prioritized import PRIORITY_FLOOR

    buffer = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buffer.add(_two_step_episodes(1))
    buffer.max_priority = PRIORITY_FLOOR / 10
    buffer.update_priorities([0.0, 0.0], [0, 1])
    assert buffer.get_priorities([0, 1]).tolist() == [PRIORITY_FLOOR] * 2
    assert buffer.max_priority == PRIORITY_FLOOR
