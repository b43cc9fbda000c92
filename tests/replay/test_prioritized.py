"""Prioritized buffer: priorities follow their items through evictions and compactions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from episodes.replay import EvictedEpisodeError, PrioritizedEpisodeReplayBuffer

from ._episodes import chunk, chunk_streams, episode, make_episode_data
from .reference import RefBuffer, assert_states_equal


@given(
    stream=chunk_streams(max_episodes=8),
    capacity=st.integers(3, 30),
    alpha=st.sampled_from([1.0, 0.5]),
    seed=st.integers(0, 3),
)
def test_priorities_follow_items(stream, capacity, alpha, seed):
    buf = PrioritizedEpisodeReplayBuffer(capacity, alpha=alpha, seed=seed)
    ref = RefBuffer(capacity)
    want: dict[int, float] = {}  # uid -> priority
    rng = np.random.default_rng(seed)
    max_p = 1.0
    for part in np.array_split(np.arange(len(stream)), 4):
        chunks = [stream[i] for i in part]
        try:
            ref.add(chunks)
        except ValueError:
            with pytest.raises(EvictedEpisodeError):
                buf.add(chunks)
            return
        buf.add(chunks)
        live = {u for ep in ref.episodes.values() for u in ep.uids}
        for u in live - set(want):
            want[u] = max_p
        batch = buf.sample(8, beta=0.5)
        assert set(batch["indices"].tolist()) <= live
        new = rng.uniform(0.1, 3.0, 8)
        buf.update_priorities(new)  # the last sample's items
        for u, p in zip(batch["indices"].tolist(), new):
            want[u] = p
        max_p = max(max_p, float(new.max()))
        uids = np.array(sorted(live))
        np.testing.assert_allclose(buf.get_priorities(uids), [want[u] for u in uids], rtol=1e-9)
        assert buf.max_priority == pytest.approx(max_p)


@pytest.mark.parametrize(
    ("name", "priorities", "indices"),
    [
        ("wrong length", [1.0, 2.0], [0]),
        ("NaN", [float("nan")], [0]),
        ("infinite", [float("inf")], [0]),
        ("negative", [-1.0], [0]),
        ("never issued", [1.0], [10_000]),
        ("two-dimensional", [[1.0]], [[0]]),
        ("float indices", [1.0], [0.5]),
    ],
)
def test_bad_priorities_change_nothing(name, priorities, indices):
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buf.add(episode("a", 0, 10))
    buf.sample(4)
    before = buf.get_state()
    with pytest.raises(ValueError):
        buf.update_priorities(np.array(priorities), np.array(indices))
    assert_states_equal(buf.get_state(), before)


@pytest.mark.parametrize(
    ("name", "alpha", "priorities"),
    [
        # Finite and > 0 (raised to 1e-12), but 1e-12 ** 30 is 0 in the tree: sampling gave
        # rows -1, weights inf.
        ("p ** alpha underflows to 0", 30.0, [1e-200] * 4),
        ("p ** alpha overflows", 2.0, [1e200, 1.0, 1.0, 1.0]),
        # Each finite, the sum infinite: every draw went to the last item.
        ("the sum overflows", 1.0, [1e308, 1e308, 1.0, 1.0]),
    ],
)
def test_priorities_the_tree_cannot_hold_change_nothing(name, alpha, priorities):
    buf = PrioritizedEpisodeReplayBuffer(100, alpha=alpha, seed=0)
    buf.add(episode("a", 0, 4))
    buf.sample(4)
    before = buf.get_state()
    with pytest.raises(ValueError, match="infinite|0 or"):
        buf.update_priorities(np.array(priorities), np.arange(4))
    assert_states_equal(buf.get_state(), before)
    assert (buf.sample(64)["weights"] <= 1.0).all()


def test_update_before_any_sample_is_an_error():
    buf = PrioritizedEpisodeReplayBuffer(100)
    buf.add(episode("a", 0, 3))
    with pytest.raises(ValueError, match="nothing sampled yet"):
        buf.update_priorities(np.ones(2))


@pytest.mark.parametrize(
    "other_sample",
    [{"sample_episodes": True, "batch_length_T": 2}, {"sample_episodes": True}],
    ids=["chunks", "episodes"],
)
def test_update_after_an_episode_sample_does_not_reach_an_older_batch(other_sample):
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buf.add(episode("a", 0, 6))
    older = buf.sample(4)["indices"]
    buf.sample(2, **other_sample)
    with pytest.raises(ValueError, match="drew no transitions"):
        buf.update_priorities(np.full(4, 9.0))
    assert buf.get_priorities(older).tolist() == [1.0] * 4


def test_a_refused_sample_keeps_the_last_batch_for_update_priorities():
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buf.add(episode("a", 0, 6))
    batch = buf.sample(3)
    with pytest.raises(ValueError):
        buf.sample(2, batch_length_T=2, n_step=3)  # refused: n_step is for transitions
    buf.update_priorities([5.0, 6.0, 7.0])
    assert buf.get_priorities(batch["indices"][-1:]).tolist() == [7.0]


@pytest.mark.parametrize("alpha", [0.0, 0.01, 0.5, 1.0])
def test_priorities_read_back_as_set_whatever_alpha(tmp_path, alpha):
    buf = PrioritizedEpisodeReplayBuffer(100, alpha=alpha, seed=0)
    buf.add(episode("a", 0, 3))
    buf.update_priorities([5.0, 2.0, 0.5], [0, 1, 2])
    assert buf.get_priorities([0, 1, 2]).tolist() == [5.0, 2.0, 0.5]
    copy = PrioritizedEpisodeReplayBuffer(1)
    copy.set_state(buf.get_state())
    assert copy.get_priorities([0, 1, 2]).tolist() == [5.0, 2.0, 0.5]
    buf.save(tmp_path / "saved")
    loaded = PrioritizedEpisodeReplayBuffer.load(tmp_path / "saved")
    assert loaded.get_priorities([0, 1, 2]).tolist() == [5.0, 2.0, 0.5]


def test_evicted_items_are_skipped():
    buf = PrioritizedEpisodeReplayBuffer(10, seed=0)
    buf.add(episode("a", 0, 6))
    batch = buf.sample(4)
    buf.add(episode("b", 1, 6))  # evicts "a"
    buf.update_priorities(np.full(4, 5.0), batch["indices"])
    assert buf.get_episode_ids() == ["b"]
    np.testing.assert_allclose(buf.get_priorities(buf.get_episode_indices("b")), 1.0)


def test_device_with_sample_episodes_is_refused():
    buf = PrioritizedEpisodeReplayBuffer(10, seed=0)
    buf.add(episode("a", 0, 6))
    with pytest.raises(ValueError, match="device"):
        buf.sample(2, sample_episodes=True, device="cpu")


def test_priorities_survive_compactions():
    """Interleaved chunks scatter each episode's slots; evictions then compact the store.

    Every live item's priority is set to a value derived from its id, so a compaction that
    moved a leaf to the wrong slot (or lost it) shows in ``get_priorities`` and in sampling.
    """
    buf = PrioritizedEpisodeReplayBuffer(100, alpha=1.0, seed=3)
    datas = {i: make_episode_data(i, 30) for i in range(24)}
    compactions = 0
    for group in range(0, 24, 3):
        for a in range(0, 30, 5):
            moves = buf._store.moves
            buf.add(
                [
                    chunk(f"e{i}", datas[i], a, a + 5, terminated=a == 25)
                    for i in range(group, group + 3)
                ]
            )
            compactions += buf._store.moves - moves
            uids = np.concatenate([buf.get_episode_indices(e) for e in buf.get_episode_ids()])
            buf.update_priorities(1.0 + uids % 7, uids)
            np.testing.assert_array_equal(buf.get_priorities(uids), 1.0 + uids % 7)
            batch = buf.sample(256, beta=1.0)
            drawn = batch["indices"]
            assert np.isin(drawn, uids).all()
            # Importance weights are (p / p_min)^-1 with p_min = 1: they name each item's priority.
            np.testing.assert_allclose(batch["weights"], 1.0 / (1.0 + drawn % 7), rtol=1e-6)
    assert compactions >= 3  # the scenario must keep exercising the remapping of the tree


@pytest.mark.parametrize(
    ("name", "alpha", "max_priority"),
    [
        # 1e-7 ** 50 is 0: new steps were never drawn (sampling gave index -1, weight inf).
        ("new steps' p ** alpha underflows", 50.0, 1e-7),
        # 1e7 ** 50 overflowed in add(), after the rows were stored (OverflowError).
        ("new steps' p ** alpha overflows", 50.0, 1e7),
        ("zero", 1.0, 0.0),
        ("a string", 1.0, "2"),
        ("a bool", 1.0, True),
    ],
)
def test_a_max_priority_new_steps_cannot_get_is_refused(name, alpha, max_priority):
    buf = PrioritizedEpisodeReplayBuffer(100, alpha=alpha, seed=0)
    buf.add(episode("a", 0, 3))
    before = buf.get_state()
    with pytest.raises(ValueError, match="max_priority|alpha"):
        buf.max_priority = max_priority
    assert_states_equal(buf.get_state(), before)
    state = buf.get_state()
    state["prioritized"]["max_priority"] = max_priority
    if isinstance(max_priority, float) and max_priority > 0:  # the state's own check
        with pytest.raises(ValueError, match="broken replay buffer state"):
            buf.set_state(state)
        assert_states_equal(buf.get_state(), before)


def test_an_add_that_would_make_the_sum_infinite_is_refused_before_storing():
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buf.add(episode("a", 0, 2))
    buf.sample(2)
    buf.update_priorities([1e308], [0])  # new steps now get 1e308 each
    before = buf.get_state()
    with pytest.raises(ValueError, match="infinite"):
        buf.add(episode("b", 0, 2))
    assert_states_equal(buf.get_state(), before)
    assert np.isfinite(buf.sample(8)["weights"]).all()


def test_an_update_is_judged_by_the_sum_it_makes():
    """Setting an item's priority again to the same huge value leaves the sum as it is."""
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buf.add(episode("a", 0, 2))
    buf.update_priorities([1e308], [0])
    buf.update_priorities([1e308, 1e308], [0, 0])  # refused before: total + new > max float
    assert buf.get_priorities([0, 1]).tolist() == [1e308, 1.0]
    with pytest.raises(ValueError, match="infinite"):
        buf.update_priorities([1e308], [1])


@pytest.mark.parametrize(
    ("name", "indices", "error"),
    [
        ("float index", [1.5], ValueError),  # was truncated to item 1
        ("never issued", [10**6], ValueError),
        ("negative", [-1], ValueError),
        ("evicted-looking but too big for int64", np.array([2**63], np.uint64), ValueError),
    ],
)
def test_get_priorities_refuses_what_is_not_an_issued_index(name, indices, error):
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buf.add(episode("a", 0, 3))
    with pytest.raises(error):
        buf.get_priorities(indices)


def test_get_priorities_keeps_the_indices_shape():
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buf.add(episode("a", 0, 3))
    buf.update_priorities([2.0, 3.0], [1, 2])
    assert buf.get_priorities(np.int64(2)).shape == ()  # a scalar index: was a TypeError
    assert float(buf.get_priorities(2)) == 3.0
    assert buf.get_priorities([[1], [2]]).tolist() == [[2.0], [3.0]]


def test_torch_priorities_of_any_float_dtype_and_with_grad_are_taken():
    torch = pytest.importorskip("torch")
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buf.add(episode("a", 0, 4))
    loss = torch.tensor([0.5, 1.5, 2.5], requires_grad=True) * 2
    buf.update_priorities(loss.to(torch.bfloat16), torch.tensor([0, 1, 2]))  # autocast's dtype
    assert buf.get_priorities([0, 1, 2]).tolist() == [1.0, 3.0, 5.0]
    buf.update_priorities(loss + 1, torch.tensor([1, 2, 3]))
    assert buf.get_priorities([0, 1, 2, 3]).tolist() == [1.0, 2.0, 4.0, 6.0]


@pytest.mark.parametrize("alpha", ["1", None, True, float("nan"), -1.0])
def test_alpha_must_be_a_real_number(alpha):
    with pytest.raises(ValueError, match="alpha"):
        PrioritizedEpisodeReplayBuffer(100, alpha=alpha)


def test_alpha_is_read_only():
    buf = PrioritizedEpisodeReplayBuffer(100, alpha=0.5)
    with pytest.raises(AttributeError):
        buf.alpha = 2.0


def test_priority_settings_take_numpy_and_torch_scalars():
    torch = pytest.importorskip("torch")
    buf = PrioritizedEpisodeReplayBuffer(100, alpha=np.array(0.5), seed=0)
    buf.add(episode("a", 0, 3))
    buf.max_priority = torch.tensor(2.0)
    assert (buf.alpha, buf.max_priority) == (0.5, 2.0)
    assert buf.get_priorities([]).shape == (0,)  # [] is a float array: was refused


@pytest.mark.parametrize("alpha", [np.complex128(0.5 + 2j), np.array([0.5])], ids=repr)
def test_alpha_is_one_real_number(alpha):
    with pytest.raises(ValueError, match="alpha"):
        PrioritizedEpisodeReplayBuffer(100, alpha=alpha)
