"""Transition sampling against the plain-Python reference, for every sampled row."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.replay import (
    EpisodeReplayBuffer,
    EvictedEpisodeError,
    PrioritizedEpisodeReplayBuffer,
)

from ._episodes import chunk, chunk_streams, episode, make_episode_data
from .reference import RefBuffer, assert_states_equal, check_transition_batch


@pytest.mark.parametrize(
    ("name", "end", "n", "t", "want_m", "want_term", "want_trunc"),
    [
        ("middle of a terminated episode", "terminated", 3, 1, 3, False, False),
        ("window reaches the termination", "terminated", 3, 3, 2, True, False),
        ("last step, terminated", "terminated", 1, 4, 1, True, False),
        ("truncated tail shorter than n", "truncated", 4, 3, 2, False, True),
        ("truncated, exactly n left", "truncated", 2, 3, 2, False, True),
        ("ongoing episode: bootstrap from the latest obs", "ongoing", 5, 2, 3, False, False),
    ],
)
def test_n_step_examples(name, end, n, t, want_m, want_term, want_trunc):
    buf = EpisodeReplayBuffer(100)
    ref = RefBuffer(100)
    ep = episode("a", 0, 5, end)
    buf.add(ep)
    ref.add([ep])
    (uid,) = buf.locate("a", t)
    got = buf.get_transitions(np.array([uid]), n_step=n, gamma=0.9)
    assert got["n_step"].tolist() == [want_m]
    assert got["terminateds"].tolist() == [want_term]
    assert got["truncateds"].tolist() == [want_trunc]
    want = ref.transition(int(uid), n, 0.9)
    np.testing.assert_allclose(got["rewards"][0], want["rewards"], rtol=1e-6)
    np.testing.assert_array_equal(got["next_obs"][0], [0, t + want_m])


@pytest.mark.parametrize("n", [12, 10**7], ids=["n past the episode", "Monte-Carlo n"])
def test_an_n_beyond_every_episode_gives_monte_carlo_returns(n):
    # The walk stops once every window reached its episode's end: n=10**7 took minutes.
    buf = EpisodeReplayBuffer(100)
    ref = RefBuffer(100)
    eps = [episode("a", 0, 5, "terminated"), episode("b", 0, 9, "truncated")]
    buf.add(eps)
    ref.add(eps)
    uids = np.concatenate([buf.locate("a", range(5)), buf.locate("b", range(9))])
    got = buf.get_transitions(uids, n_step=n, gamma=0.9)
    assert got["n_step"].tolist() == [5, 4, 3, 2, 1, 9, 8, 7, 6, 5, 4, 3, 2, 1]
    for row, uid in enumerate(uids):
        want = ref.transition(int(uid), 14, 0.9)
        np.testing.assert_allclose(got["rewards"][row], want["rewards"], rtol=1e-6)


def test_truncated_bootstrap_uses_true_final_observation():
    data = make_episode_data(7, 3)
    data["obs"][3] = np.array([99.0, 99.0], np.float32)  # the true final observation
    buf = EpisodeReplayBuffer(10)
    buf.add(chunk("x", data, 0, 3, truncated=True))
    got = buf.get_transitions(buf.locate("x", [0, 1, 2]), n_step=5, gamma=0.5)
    assert got["next_obs"].tolist() == [[99.0, 99.0]] * 3
    assert got["n_step"].tolist() == [3, 2, 1]
    r = data["rewards"]
    np.testing.assert_allclose(got["rewards"][0], r[0] + 0.5 * r[1] + 0.25 * r[2], rtol=1e-5)
    np.testing.assert_allclose(got["discounts"], [0.125, 0.25, 0.5])


@given(
    stream=chunk_streams(),
    capacity=st.integers(1, 40),
    n_step=st.one_of(
        st.integers(1, 5),
        st.tuples(st.integers(1, 3), st.integers(4, 6)),
        st.builds(range, st.integers(1, 3), st.integers(4, 6)),  # the same, as a range
    ),
    gamma=st.sampled_from([0.0, 0.5, 0.99, 1.0]),
    prioritized=st.booleans(),
)
def test_every_sampled_row_matches_reference(stream, capacity, n_step, gamma, prioritized):
    cls = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
    buf = cls(capacity, seed=1)
    ref = RefBuffer(capacity)
    for piece in np.array_split(np.arange(len(stream)), 3):
        chunks = [stream[i] for i in piece]
        try:
            ref.add(chunks)
        except ValueError:
            # The stream continues an episode evicted before: refused, nothing changes.
            before = buf.get_state()
            with pytest.raises(EvictedEpisodeError):
                buf.add(chunks)
            assert_states_equal(buf.get_state(), before)
            return
        buf.add(chunks)
        assert buf.get_episode_ids() == list(ref.episodes)
        assert buf.get_num_timesteps() == ref.num_timesteps
        batch = buf.sample(
            64, n_step=n_step, gamma=gamma, include_infos=True, include_extra_model_outputs=True
        )
        if isinstance(n_step, int):
            lo, hi = n_step, n_step
        elif isinstance(n_step, range):
            lo, hi = n_step.start, n_step.stop - 1
        else:
            lo, hi = n_step[0], n_step[1] - 1
        check_transition_batch(ref, batch, lo, hi, gamma)
        assert batch["logp"].shape == (64,)
    assert buf.get_added_timesteps() == ref.added
    assert buf.get_num_episodes_evicted() == len(ref.evicted)


def test_long_stream_through_many_compactions():
    buf = EpisodeReplayBuffer(100, seed=3)
    ref = RefBuffer(100)
    datas = {i: make_episode_data(i, 30) for i in range(40)}
    # Three episodes at a time, 5-step chunks interleaved: slots of one episode are scattered.
    for group in range(0, 40, 3):
        ids = [i for i in range(group, min(group + 3, 40))]
        for a in range(0, 30, 5):
            chunks = [chunk(f"e{i}", datas[i], a, a + 5, terminated=a + 5 == 30) for i in ids]
            buf.add(chunks)
            ref.add(chunks)
            check_transition_batch(ref, buf.sample(32, n_step=3, gamma=0.9), 3, 3, 0.9)
    assert buf.get_episode_ids() == list(ref.episodes)
    assert buf.get_num_timesteps() == ref.num_timesteps


def test_sample_is_vectorized_over_torch_device():
    torch = pytest.importorskip("torch")
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(episode("a", 0, 10))
    batch = buf.sample(8, n_step=2, device="cpu")
    assert isinstance(batch["obs"], torch.Tensor) and batch["obs"].shape == (8, 2)
    assert batch["terminateds"].dtype == torch.bool


def test_empty_infos_come_back_as_fresh_dicts():
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(
        SingleAgentEpisode(
            "a",
            observations=[0.0, 1.0, 2.0],
            actions=[0, 1],
            rewards=[1.0, 1.0],
            len_lookback_buffer=0,
        )
    )
    infos = buf.sample(6, include_infos=True)["infos"]
    assert all(info == {} for info in infos)
    infos[0]["x"] = 1  # a fresh dict each time: nothing stored changes
    assert buf.sample(6, include_infos=True)["infos"].tolist() == [{}] * 6
    seq = buf.sample(2, batch_length_T=2, include_infos=True)["infos"]
    assert seq.tolist() == [[{}, {}], [{}, {}]]


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_episodes_near_capacity_compact_after_their_write(cls):
    """Long episodes evict more than they keep: the rows go dead while the store still has
    room, so the store compacts after writing, not while reserving."""
    buf, ref = cls(100, seed=0), RefBuffer(100)
    moves = []
    for i, length in enumerate([10] * 10 + [90, 95, 30, 99]):
        ep = episode(f"e{i}", i, length)
        buf.add(ep)
        ref.add([ep])
        moves.append(buf._store.moves)
        check_transition_batch(ref, buf.sample(64, n_step=3, gamma=0.9), 3, 3, 0.9)
        assert buf.get_episode_ids() == list(ref.episodes)
        assert buf._store.end - buf._store.num_live <= max(buf._store.num_live, 64)
    assert moves[-1] >= 2


def test_an_infinite_reward_sums_to_infinity_not_nan():
    """A window that stopped added 0 * its last reward: NaN for an inf reward."""
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(
        SingleAgentEpisode(
            "a",
            observations=[0.0, 1.0, 2.0, 3.0],
            actions=[0, 0, 0],
            rewards=[1.0, 1.0, -np.inf],
            terminated=True,
            len_lookback_buffer=0,
        )
    )
    for n_step in (3, 5):
        rewards = buf.get_transitions(buf.locate("a", [0, 1, 2]), n_step=n_step, gamma=0.5)
        assert rewards["rewards"].tolist() == [-np.inf] * 3


@pytest.mark.parametrize("n_step", [2**63, (1, 2**63 + 1), (2**63, 2**64)])
def test_a_horizon_beyond_int64_is_a_monte_carlo_return(n_step):
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(
        SingleAgentEpisode(
            "a",
            observations=[0.0, 1.0, 2.0],
            actions=[0, 0],
            rewards=[1.0, 1.0],
            terminated=True,
            len_lookback_buffer=0,
        )
    )
    batch = buf.sample(8, n_step=n_step, gamma=0.5)
    assert set(batch["rewards"].tolist()) <= {1.0, 1.5}
