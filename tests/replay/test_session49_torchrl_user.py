"""What a TorchRL user translating DQN / SAC / recurrent code meets (docs/replay.md).

The "Coming from TorchRL" table's claims that need no TorchRL: the swapped
``update_priorities`` call named as such, the batch dtypes on numpy and torch, priorities of
items evicted since the sample, capacity with a running episode, ``len``, and a fresh buffer
standing in for ``rb.empty()``. The comparisons with TorchRL itself are in
``tests/differential/test_session49_torchrl_user.py``.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer


def _chunk(id_, start, stop, action_dtype=np.int64, **flags):
    return SingleAgentEpisode(
        id_,
        observations=[np.full(3, t, np.float32) for t in range(start, stop + 1)],
        actions=np.arange(start, stop, dtype=action_dtype),
        rewards=[1.0] * (stop - start),
        t_started=start,
        len_lookback_buffer=0,
        **flags,
    )


def _filled(alpha=0.6):
    buf = PrioritizedEpisodeReplayBuffer(100, alpha=alpha, seed=0)
    buf.add([_chunk("a", 0, 6), _chunk("b", 0, 4, terminated=True)])
    return buf


# TorchRL's rb.update_priority(index, priority): the same order here swaps the arguments.
SWAPPED = {
    "numpy": lambda b: (b["indices"], np.random.default_rng(0).random(len(b["indices"]))),
    "torch": lambda b: (torch.as_tensor(b["indices"]), torch.rand(len(b["indices"]))),
    "lists": lambda b: (b["indices"].tolist(), [0.5] * len(b["indices"])),
    "signed torch td": lambda b: (torch.as_tensor(b["indices"]), torch.randn(len(b["indices"]))),
}


@pytest.mark.parametrize("name", list(SWAPPED))
def test_update_priorities_with_torchrl_argument_order_says_so(name):
    buf = _filled()
    batch = buf.sample(5, beta=0.4)
    before = buf.get_priorities(batch["indices"]).copy()
    index, td_error = SWAPPED[name](batch)
    with pytest.raises(ValueError, match="takes the priorities first, then the indices"):
        buf.update_priorities(index, td_error)
    np.testing.assert_array_equal(buf.get_priorities(batch["indices"]), before)
    assert buf.max_priority == 1.0


@pytest.mark.parametrize(
    "priorities, indices, words",
    [
        pytest.param([1.0, 2.0], [0.0, 1.0], "indices must be integers", id="float both"),
        pytest.param([1, 2], [0, 1, 2], "equally long", id="int priorities, other length"),
    ],
)
def test_other_bad_calls_keep_their_own_words(priorities, indices, words):
    buf = _filled()
    with pytest.raises(ValueError, match=words) as info:
        buf.update_priorities(priorities, indices)
    assert "priorities first" not in str(info.value)


def test_no_priorities_for_no_indices_stay_a_no_op():
    buf = _filled()
    buf.update_priorities(np.array([], np.int64), [])  # [] reads as float64: not a swap
    assert buf.max_priority == 1.0


def test_the_right_order_with_integer_priorities_is_taken():
    buf = _filled()
    batch = buf.sample(3)
    buf.update_priorities(np.array([2, 3, 4]), torch.as_tensor(batch["indices"]))
    # A repeated index keeps its last priority.
    last = {int(i): p for i, p in zip(batch["indices"], [2.0, 3.0, 4.0])}
    assert buf.get_priorities(list(last)).tolist() == list(last.values())


DTYPES = {
    "obs": (np.float32, torch.float32),
    "next_obs": (np.float32, torch.float32),
    "rewards": (np.float32, torch.float32),
    "discounts": (np.float32, torch.float32),
    "weights": (np.float32, torch.float32),
    "terminateds": (np.bool_, torch.bool),
    "truncateds": (np.bool_, torch.bool),
    "indices": (np.int64, torch.int64),
    "n_step": (np.int64, torch.int64),
}
SEQUENCE_DTYPES = {
    "obs": (np.float32, torch.float32),
    "rewards": (np.float32, torch.float32),
    "is_first": (np.bool_, torch.bool),
    "is_last": (np.bool_, torch.bool),
    "is_terminated": (np.bool_, torch.bool),
    "is_truncated": (np.bool_, torch.bool),
    "mask": (np.bool_, torch.bool),
    "indices": (np.int64, torch.int64),
    "weights": (np.float32, torch.float32),
}


@pytest.mark.parametrize("device", [None, "cpu"], ids=["numpy", "torch"])
@pytest.mark.parametrize("action_dtype", [np.int64, np.int32])
@pytest.mark.parametrize("sequences", [False, True], ids=["transitions", "sequences"])
def test_batch_dtypes_are_the_documented_ones(device, action_dtype, sequences):
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buf.add([_chunk("a", 0, 6, action_dtype), _chunk("b", 0, 4, action_dtype, truncated=True)])
    extra = dict(batch_length_T=3, lookback=1) if sequences else dict(n_step=3, gamma=0.9)
    batch = buf.sample(4, beta=0.5, device=device, **extra)
    side = 0 if device is None else 1
    expected = SEQUENCE_DTYPES if sequences else DTYPES
    for key, dtypes in expected.items():
        assert batch[key].dtype == dtypes[side], key
    actions = (action_dtype, torch.int64 if action_dtype is np.int64 else torch.int32)
    assert batch["actions"].dtype == actions[side]  # as stored: .long() int32 ones to gather


def test_priorities_of_items_evicted_since_the_sample_are_skipped():
    buf = PrioritizedEpisodeReplayBuffer(10, alpha=1.0, seed=0)
    buf.add([_chunk("a", 0, 5, terminated=True), _chunk("b", 0, 4)])
    batch = buf.sample(32)
    kept = np.isin(batch["indices"], buf.get_episode_indices("b"))
    assert kept.any() and not kept.all()
    buf.add(_chunk("c", 0, 3, terminated=True))  # 12 > 10 steps: "a" goes
    assert buf.get_episode_ids() == ["b", "c"]
    td_error = torch.linspace(1.0, 4.0, 32)
    buf.update_priorities(td_error, torch.as_tensor(batch["indices"]))  # no error
    last = {int(i): float(p) for i, p in zip(batch["indices"][kept], td_error.numpy()[kept])}
    np.testing.assert_allclose(buf.get_priorities(list(last)), list(last.values()), rtol=1e-6)
    # Only the stored items' values count towards the largest priority, repeats included.
    assert buf.max_priority == pytest.approx(float(td_error[kept].max()), rel=1e-6)
    c = buf.get_episode_indices("c")  # added between the sample and the update: untouched
    np.testing.assert_allclose(buf.get_priorities(c), 1.0)


def test_a_running_episode_longer_than_the_capacity_stays_whole():
    """TorchRL's ring would keep the last ``capacity`` steps; here the episode stays whole."""
    buf = EpisodeReplayBuffer(10, seed=0)
    for start in range(0, 30, 5):
        buf.add(_chunk("never ends", start, start + 5))
    assert len(buf) == buf.get_num_timesteps() == 30
    assert buf.get_num_episodes_evicted() == 0


@pytest.mark.parametrize("mode, stored", [("restart", ["b", "a"]), ("drop", ["b"])])
def test_on_evicted_keeps_or_drops_a_running_episodes_tail(mode, stored):
    buf = EpisodeReplayBuffer(8, seed=0)
    buf.add([_chunk("a", 0, 5), _chunk("b", 0, 5)])  # 10 > 8: running "a" goes
    buf.add([_chunk("a", 5, 7), _chunk("b", 5, 6)], on_evicted=mode)
    assert buf.get_episode_ids() == stored
    if mode == "restart":  # the tail, as TorchRL's ring keeps it, from its own time
        episode = buf.get_episodes()[1]
        assert episode.t_started == 5 and len(episode) == 2


def test_a_new_buffer_stands_in_for_empty_and_takes_running_chunks():
    buf = EpisodeReplayBuffer(100, batch_size_B=4, seed=0)
    buf.add(_chunk("a", 0, 5))
    buf = EpisodeReplayBuffer(100, batch_size_B=4, seed=0)  # rb.empty()
    assert len(buf) == 0
    buf.add(_chunk("a", 5, 8))  # the running episode's next chunk
    (episode,) = buf.get_episodes()
    assert episode.t_started == 5 and len(buf) == 3
    assert buf.sample()["obs"].shape == (4, 3)
