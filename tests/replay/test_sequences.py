"""Sequence batches and episode chunks against the reference."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, EvictedEpisodeError

from ._episodes import chunk, chunk_streams, episode, make_episode_data
from .reference import RefBuffer


def _check_sequences(ref, batch, T, lookback, pad):
    B = len(batch["obs"])
    assert batch["obs"].shape == (B, lookback + T, 2)
    assert batch["is_lookback"][:, :lookback].all() and not batch["is_lookback"][:, lookback:].any()
    for b in range(B):
        start_uid = int(batch["indices"][b, lookback])
        ep, k = ref.where(start_uid)
        if not pad:
            assert len(ep) - k >= T  # never crosses the episode's end
        for j in range(lookback + T):
            i = k - lookback + j
            inside = 0 <= i < len(ep)
            assert bool(batch["mask"][b, j]) == inside
            if not inside:  # padding: zeros, every flag False, no item, no info
                assert batch["indices"][b, j] == -1
                for key in ("obs", "next_obs", "actions", "rewards", "logp"):
                    assert not np.any(batch[key][b, j]), key
                for key in ("is_first", "is_last", "is_terminated", "is_truncated"):
                    assert not batch[key][b, j], key
                assert batch["infos"][b, j] == {}
                continue
            assert batch["indices"][b, j] == ep.uids[i]
            np.testing.assert_array_equal(batch["obs"][b, j], ep.obs[i])
            np.testing.assert_array_equal(batch["next_obs"][b, j], ep.obs[i + 1])
            assert batch["actions"][b, j] == ep.actions[i]
            assert np.isclose(batch["rewards"][b, j], ep.rewards[i])
            last = i == len(ep) - 1
            assert bool(batch["is_first"][b, j]) == (i == 0)
            assert bool(batch["is_last"][b, j]) == last
            assert bool(batch["is_terminated"][b, j]) == (last and ep.terminated)
            assert bool(batch["is_truncated"][b, j]) == (last and ep.truncated)


@given(
    stream=chunk_streams(max_len=10),
    T=st.integers(1, 6),
    lookback=st.integers(0, 3),
    pad=st.booleans(),
)
def test_sequences_match_reference(stream, T, lookback, pad):
    buf, ref = EpisodeReplayBuffer(30, seed=2), RefBuffer(30)
    try:
        ref.add(stream)
    except ValueError:
        return
    buf.add(stream)
    if not pad and max(len(ep) for ep in ref.episodes.values()) < T:
        with pytest.raises(ValueError, match="batch_length_T"):
            buf.sample(8, batch_length_T=T, lookback=lookback)
        return
    batch = buf.sample(
        16,
        batch_length_T=T,
        lookback=lookback,
        pad=pad,
        include_infos=True,
        include_extra_model_outputs=True,
    )
    _check_sequences(ref, batch, T, lookback, pad)
    assert batch["logp"].shape == (16, lookback + T)


def test_sequence_example_with_burn_in():
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(episode("a", 0, 6, "truncated"))
    batch = buf.sample(50, batch_length_T=3, lookback=2)
    starts = batch["obs"][:, 2, 1]
    assert set(starts.tolist()) == {0.0, 1.0, 2.0, 3.0}
    row = int(np.flatnonzero(starts == 0.0)[0])
    assert batch["mask"][row].tolist() == [False, False, True, True, True]
    row = int(np.flatnonzero(starts == 3.0)[0])
    assert batch["is_truncated"][row].tolist() == [False] * 4 + [True]


def test_sample_episodes_chunks_and_whole():
    data = make_episode_data(0, 8)
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add([chunk("a", data, 0, 5), episode("b", 1, 4, "terminated")])
    buf.add(chunk("a", data, 5, 8, terminated=True))
    whole = buf.sample(20, sample_episodes=True)
    assert {ep.id_ for ep in whole} == {"a", "b"}
    for ep in whole:
        assert isinstance(ep, SingleAgentEpisode) and ep.is_terminated and ep.t_started == 0
        assert len(ep) == (8 if ep.id_ == "a" else 4)
    parts = buf.sample(30, sample_episodes=True, batch_length_T=3, lookback=2)
    for ep in parts:
        assert len(ep) == 3
        obs = ep.get_observations()
        assert obs[:, 1].tolist() == list(range(ep.t_started, ep.t_started + 4))
        k = min(2, ep.t_started)  # the lookback stops at the episode's first step
        back = ep.get_observations(slice(-k, 0), neg_index_as_lookback=True) if k else []
        assert [o[1] for o in back] == list(range(ep.t_started - k, ep.t_started))
        length = 8 if ep.id_ == "a" else 4
        assert ep.is_terminated == (ep.t_started + 3 == length)
        ep.validate()


def test_torch_sequences_on_device():
    torch = pytest.importorskip("torch")
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(episode("a", 0, 10))
    batch = buf.sample(4, batch_length_T=5, device="cpu")
    assert batch["mask"].dtype == torch.bool and batch["obs"].shape == (4, 5, 2)
    _ = EvictedEpisodeError


@given(stream=chunk_streams(max_len=10), T=st.integers(1, 5), lookback=st.integers(0, 3))
def test_episode_chunks_match_reference(stream, T, lookback):
    buf, ref = EpisodeReplayBuffer(40, seed=3), RefBuffer(40)
    try:
        ref.add(stream)
    except ValueError:
        return
    buf.add(stream)
    if max(len(ep) for ep in ref.episodes.values()) < T:
        return
    for chunk_ep in buf.sample(12, sample_episodes=True, batch_length_T=T, lookback=lookback):
        ep = ref.episodes[chunk_ep.id_]
        k = chunk_ep.t_started - ep.t_begin  # index of the chunk's first step in the episode
        assert len(chunk_ep) == T and 0 <= k <= len(ep) - T
        back = min(lookback, k)
        obs = chunk_ep.get_observations(slice(-back, T + 1), neg_index_as_lookback=True)
        np.testing.assert_array_equal(np.asarray(obs), np.asarray(ep.obs[k - back : k + T + 1]))
        assert list(chunk_ep.get_actions()) == ep.actions[k : k + T]
        np.testing.assert_allclose(chunk_ep.get_rewards(), ep.rewards[k : k + T], rtol=1e-6)
        assert list(chunk_ep.get_infos()) == ep.infos[k : k + T + 1]
        ends = k + T == len(ep)
        assert chunk_ep.is_terminated == (ends and ep.terminated)
        assert chunk_ep.is_truncated == (ends and ep.truncated)
        chunk_ep.validate()
