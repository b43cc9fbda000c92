"""Prioritized sequences (R2D2): ``sample(B, batch_length_T=T)`` on the prioritized buffer.

A sequence's first (non-lookback) step ``i`` is drawn with probability ``p_i^alpha / sum_j
p_j^alpha`` over the steps that may start one (``pad=False``: ``T`` steps left in its episode;
``pad=True``: every stored step); the rest of the batch is the uniform buffer's for those
starts; ``weights`` holds one importance weight per sequence, normalized by the buffer-wide
smallest priority; ``update_priorities(priorities)`` with ``B`` values sets the starts'
priorities. Episodes (``sample_episodes``) stay uniform: ``beta`` there is still refused.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.replay import EmptyBufferError, EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.replay.sampling import slots_of
from episodes.replay.sequences import sequence_batch
from episodes.replay.sum_tree import SumTree

from ._episodes import chunk, episode, make_episode_data
from ._stats import chi_square_p


# ------------------------------------------------------------------------------- helpers
def _filled(lengths, *, alpha=1.0, seed=0, uniform=False):
    if uniform:
        buf = EpisodeReplayBuffer(10_000, seed=seed)
    else:
        buf = PrioritizedEpisodeReplayBuffer(10_000, alpha=alpha, seed=seed)
    buf.add([episode(f"e{i}", i, n) for i, n in enumerate(lengths)])
    return buf


def _every(buf):
    return np.concatenate([buf.get_episode_indices(i) for i in buf.get_episode_ids()])


def _prioritized(buf, seed=1):
    """``buf`` with priorities uniform in [0.1, 5] on every stored step."""
    every = _every(buf)
    buf.update_priorities(np.random.default_rng(seed).uniform(0.1, 5.0, len(every)), every)
    return buf


def _valid_starts(buf, length, pad, by_episode=False):
    """The stored item indices that may start a sequence (the exact rule), sorted."""
    starts, labels = [], []
    for k, id_ in enumerate(buf.get_episode_ids()):
        idx = buf.get_episode_indices(id_)
        starts.append(idx if pad else idx[: max(len(idx) - length + 1, 0)])
        labels.append(np.full(len(starts[-1]), k))
    starts, labels = np.concatenate(starts), np.concatenate(labels)
    order = np.argsort(starts)
    return (starts[order], labels[order]) if by_episode else starts[order]


def _assert_follows(buf, drawn, length, pad, per_episode=False):
    """Chi-square of the drawn starts against the exact start distribution (p > 1e-3)."""
    valid, episode_of = _valid_starts(buf, length, pad, by_episode=True)
    assert np.isin(drawn, valid).all()  # only steps that may start a sequence
    leaves = buf.get_priorities(valid) ** buf.alpha
    counts = np.bincount(np.searchsorted(valid, drawn), minlength=len(valid)).astype(float)
    expected = leaves / leaves.sum() * len(drawn)
    if per_episode:  # many starts: binned by episode, each bin a sum of probabilities
        counts, expected = np.bincount(episode_of, counts), np.bincount(episode_of, expected)
        counts, expected = counts[expected > 0], expected[expected > 0]
    assert expected.min() >= 5  # the approximation's own condition
    assert chi_square_p(counts, expected) > 1e-3


# ------------------------------------------------------------------- start frequencies
LENGTHS = [3, 8, 20, 5, 12, 1, 9]


def _evicted():
    # A buffer of 60 steps fed interleaved chunks of six 15-step episodes, then a late one:
    # episodes evicted, rows reused and the store compacted on the way.
    buf = PrioritizedEpisodeReplayBuffer(60, seed=11)
    datas = [make_episode_data(i, 15) for i in range(6)]
    for a in range(0, 15, 5):
        buf.add([chunk(f"e{i}", d, a, a + 5, terminated=a == 10) for i, d in enumerate(datas)])
    buf.add(episode("late", 9, 7))
    assert buf.get_num_episodes_evicted() > 0
    return _prioritized(buf)


def _sequence_updated(buf):
    # Priorities set only by default updates after sequence samples (the R2D2 loop).
    for k in range(20):
        batch = buf.sample(8, batch_length_T=4, lookback=1)
        buf.update_priorities(np.random.default_rng(k).uniform(0.5, 6.0, 8))
        assert np.isin(batch["indices"][:, 1], _valid_starts(buf, 4, False)).all()
    return buf


def _rare_starts():
    # 3,000 steps of 5-step episodes and two 40-step ones: 2% of the steps may start a
    # 30-step sequence, so the rounds give way to listing the valid starts.
    buf = PrioritizedEpisodeReplayBuffer(10_000, seed=3)
    buf.add([episode(f"s{i}", i, 5) for i in range(300)])
    buf.add([episode("long0", 400, 40)])
    buf.add([episode(f"t{i}", i, 5) for i in range(300, 600)])
    buf.add([episode("long1", 401, 40)])
    return _prioritized(buf)


# Large batches of a small buffer list the valid starts at once; batches of 32 from a few
# thousand steps draw from the tree in rounds (and list the rare valid starts after them).
CASES = [
    # (name, build, length, lookback, pad, (calls, batch), per_episode)
    ("pad-off", lambda: _prioritized(_filled(LENGTHS)), 4, 0, False, (1, 40_000), False),
    ("pad-on", lambda: _prioritized(_filled(LENGTHS)), 4, 0, True, (1, 40_000), False),
    ("lookback", lambda: _prioritized(_filled(LENGTHS)), 3, 2, False, (1, 40_000), False),
    (
        "alpha-0.6",
        lambda: _prioritized(_filled(LENGTHS, alpha=0.6)),
        5,
        1,
        False,
        (1, 40_000),
        False,
    ),
    ("after-eviction", _evicted, 4, 2, False, (1, 40_000), False),
    ("after-eviction-pad", _evicted, 6, 0, True, (1, 40_000), False),
    (
        "sequence-updates",
        lambda: _sequence_updated(_filled(LENGTHS)),
        4,
        0,
        False,
        (1, 40_000),
        False,
    ),
    (
        "rounds",
        lambda: _prioritized(_filled([200] * 20 + [30] * 20)),
        64,
        3,
        False,
        (400, 32),
        True,
    ),
    (
        "rounds-pad",
        lambda: _prioritized(_filled([200] * 20 + [30] * 20)),
        64,
        0,
        True,
        (400, 32),
        True,
    ),
    ("rare-starts-listed", _rare_starts, 30, 0, False, (400, 32), True),
]


@pytest.mark.parametrize(
    ("build", "length", "lookback", "pad", "draws", "per_episode"),
    [c[1:] for c in CASES],
    ids=[c[0] for c in CASES],
)
def test_starts_follow_the_priorities(build, length, lookback, pad, draws, per_episode):
    buf = build()
    calls, size = draws
    drawn = [
        buf.sample(size, batch_length_T=length, lookback=lookback, pad=pad, beta=0.4)["indices"]
        for _ in range(calls)
    ]
    _assert_follows(buf, np.concatenate(drawn)[:, lookback], length, pad, per_episode)


@pytest.mark.parametrize("pad", [False, True], ids=["pad-off", "pad-on"])
def test_alpha_0_draws_the_valid_starts_uniformly(pad):
    buf = _prioritized(_filled(LENGTHS, alpha=0.0))  # ignored: every leaf is p ** 0 = 1
    starts = buf.sample(30_000, batch_length_T=4, pad=pad)["indices"][:, 0]
    valid = _valid_starts(buf, 4, pad)
    counts = np.bincount(np.searchsorted(valid, starts), minlength=len(valid))
    assert chi_square_p(counts, np.full(len(valid), len(starts) / len(valid))) > 1e-3


def test_a_start_that_cannot_start_a_sequence_is_never_drawn_whatever_its_priority():
    buf = _filled([2, 6])
    every = buf.get_episode_indices("e0")  # 2 steps: no 3-step sequence starts there
    buf.update_priorities(np.full(2, 1e6), every)
    starts = buf.sample(2_000, batch_length_T=3)["indices"][:, 0]
    assert set(starts.tolist()) == set(buf.get_episode_indices("e1")[:4].tolist())


# ------------------------------------------------------------------------------ weights
@pytest.mark.parametrize(
    ("alpha", "beta", "lookback", "pad"),
    [(1.0, 0.4, 0, False), (0.6, 1.0, 2, False), (0.5, 0.7, 1, True), (1.0, 0.0, 0, False)],
    ids=["a1-b0.4", "a0.6-b1-lookback", "a0.5-pad", "beta-0"],
)
def test_weights_are_the_starts_importance_weights_over_the_buffer_wide_minimum(
    alpha, beta, lookback, pad
):
    buf = _prioritized(_filled(LENGTHS, alpha=alpha))
    buf.update_priorities([0.01], buf.get_episode_indices("e5"))  # 1 step: starts no 4-step one
    batch = buf.sample(500, batch_length_T=4, lookback=lookback, pad=pad, beta=beta)
    starts = batch["indices"][:, lookback]
    leaves = buf.get_priorities(starts) ** alpha
    p_min = 0.01**alpha  # buffer-wide, whether or not it may start a sequence
    assert batch["weights"].shape == (500,) and batch["weights"].dtype == np.float32
    np.testing.assert_allclose(batch["weights"], (leaves / p_min) ** -beta, rtol=1e-6)
    # The same as (N P(i))^-beta over its maximum, N and P over the valid starts, with the
    # maximum taken as if every stored step were a start: the constants cancel.
    valid = _valid_starts(buf, 4, pad)
    n, total = len(valid), (buf.get_priorities(valid) ** alpha).sum()
    per = (n * leaves / total) ** -beta / (n * p_min / total) ** -beta
    np.testing.assert_allclose(batch["weights"], per, rtol=1e-5)
    assert batch["weights"].max() <= 1.0


def test_the_least_priority_among_valid_starts_need_not_weigh_1():
    buf = _filled([2, 6])
    buf.update_priorities([0.5], buf.get_episode_indices("e0")[:1])  # cannot start a 3-step one
    weights = buf.sample(200, batch_length_T=3, beta=1.0)["weights"]
    assert np.allclose(weights, 0.5)  # (1.0 / 0.5) ** -1: normalized by the buffer's least


# --------------------------------------------------------------------- the batch itself
@pytest.mark.parametrize(
    ("kwargs"),
    [
        dict(batch_length_T=4),
        dict(batch_length_T=4, lookback=3, include_infos=True),
        dict(batch_length_T=6, pad=True, include_extra_model_outputs=True),
    ],
    ids=["plain", "lookback-infos", "pad-extras"],
)
def test_everything_but_the_weights_is_the_uniform_batch_of_the_same_starts(kwargs):
    buf = _filled(LENGTHS)
    twin = _filled(LENGTHS, uniform=True)
    _prioritized(buf)
    batch = buf.sample(64, beta=0.5, **kwargs)
    lookback = kwargs.get("lookback", 0)
    slots = slots_of(twin._store, batch["indices"][:, lookback])
    want = sequence_batch(
        twin._store,
        twin._table,
        slots,
        kwargs["batch_length_T"],
        lookback,
        kwargs.get("include_infos", False),
        kwargs.get("include_extra_model_outputs", False),
    )
    assert sorted(batch) == sorted([*want, "weights"])
    for key, value in want.items():
        if key == "infos":
            assert batch[key].tolist() == value.tolist()
        else:
            np.testing.assert_array_equal(batch[key], value)


def test_an_extra_model_output_named_weights_is_refused_with_sequences():
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    data = make_episode_data(0, 6)
    ep = SingleAgentEpisode(
        "a",
        observations=data["obs"],
        actions=data["actions"],
        rewards=data["rewards"],
        extra_model_outputs={"weights": data["logp"]},
        len_lookback_buffer=0,
    )
    buf.add(ep)
    rng = buf.rng.bit_generator.state
    with pytest.raises(ValueError, match="'weights' has the name of a batch column"):
        buf.sample(2, batch_length_T=3, include_extra_model_outputs=True)
    assert buf.rng.bit_generator.state == rng
    assert buf.sample(2, batch_length_T=3)["weights"].shape == (2,)  # without the extras


# ----------------------------------------------------------------------- update_priorities
def test_a_default_update_sets_the_starts_priorities():
    buf = _filled(LENGTHS)
    batch = buf.sample(16, batch_length_T=4, lookback=2)
    new = np.arange(1.0, 17.0)
    buf.update_priorities(new)
    starts = batch["indices"][:, 2]
    last = {int(s): v for s, v in zip(starts, new)}  # a repeated start keeps its last value
    assert buf.get_priorities(list(last)).tolist() == list(last.values())
    others = np.setdiff1d(batch["indices"][batch["mask"]], starts)
    assert set(buf.get_priorities(others).tolist()) <= {1.0}  # only the starts changed
    assert buf.max_priority == 16.0


@pytest.mark.parametrize("form", ["starts", "every-step"])
def test_an_explicit_update_takes_any_items_of_the_batch(form):
    buf = _filled(LENGTHS)
    batch = buf.sample(8, batch_length_T=4, lookback=1, pad=True)
    if form == "starts":
        idx = batch["indices"][:, 1]
        prio = np.linspace(1.0, 3.0, 8)
    else:  # TorchRL style: every (unpadded) step of each sequence, its row's priority
        idx = batch["indices"][batch["mask"]]
        prio = np.repeat(np.linspace(1.0, 3.0, 8), batch["mask"].sum(axis=1))
    buf.update_priorities(prio, idx)
    last = {int(i): p for i, p in zip(idx, prio)}
    assert buf.get_priorities(list(last)).tolist() == list(last.values())


def test_the_r2d2_recipe_of_the_docs():
    buf = _filled(LENGTHS)
    batch = buf.sample(8, batch_length_T=4, lookback=2, beta=0.6)
    td = np.random.default_rng(0).normal(size=batch["mask"].shape)
    loss_mask = batch["mask"] & ~batch["is_lookback"]
    abs_td = np.where(loss_mask, np.abs(td), 0.0)
    eta = 0.9
    mean = abs_td.sum(axis=1) / np.maximum(loss_mask.sum(axis=1), 1)
    buf.update_priorities(eta * abs_td.max(axis=1) + (1 - eta) * mean)
    starts = batch["indices"][:, 2]
    want = {int(s): v for s, v in zip(starts, eta * abs_td.max(axis=1) + (1 - eta) * mean)}
    np.testing.assert_allclose(buf.get_priorities(list(want)), list(want.values()))


def test_update_after_evictions_skips_the_evicted_starts():
    buf = PrioritizedEpisodeReplayBuffer(20, seed=0)
    buf.add([episode("a", 0, 10), episode("b", 1, 10)])
    batch = buf.sample(8, batch_length_T=3)
    buf.add(episode("c", 2, 10))  # evicts "a"
    buf.update_priorities(np.full(8, 4.0))
    kept = [int(s) for s in batch["indices"][:, 0] if s in buf.get_episode_indices("b")]
    assert buf.get_priorities(kept).tolist() == [4.0] * len(kept)


# ---------------------------------------------------------------------------------- errors
def test_no_episode_holding_T_steps_changes_nothing():
    buf = _filled([3, 2])
    last = buf.sample(4, beta=0.3)["indices"]
    rng = buf.rng.bit_generator.state
    state = buf.get_state()
    with pytest.raises(EmptyBufferError, match="no stored episode holds 4 steps"):
        buf.sample(4, batch_length_T=4, beta=0.5)
    assert buf.rng.bit_generator.state == rng and buf.get_sampled_timesteps() == 4
    after = buf.get_state()
    np.testing.assert_array_equal(after["prioritized"]["leaves"], state["prioritized"]["leaves"])
    buf.update_priorities(np.full(4, 3.0))  # still the last transition batch's items
    assert set(buf.get_priorities(last).tolist()) == {3.0}


@pytest.mark.parametrize("beta", [-0.1, float("nan"), True], ids=["negative", "nan", "bool"])
def test_a_bad_beta_is_refused_with_sequences(beta):
    buf = _filled(LENGTHS)
    rng = buf.rng.bit_generator.state
    with pytest.raises(ValueError, match="beta must be a finite float >= 0"):
        buf.sample(4, batch_length_T=3, beta=beta)
    assert buf.rng.bit_generator.state == rng


@pytest.mark.parametrize(
    "priorities",
    [np.ones(7), np.ones(9), np.ones((8, 4))],
    ids=["fewer", "more", "per-step-2d"],
)
def test_priorities_of_the_wrong_length_after_a_sequence_sample(priorities):
    buf = _filled(LENGTHS)
    buf.sample(8, batch_length_T=4)
    before = buf.get_state()["prioritized"]["priorities"].copy()
    with pytest.raises(ValueError, match="the last sample drew sequences: one priority each"):
        buf.update_priorities(priorities)
    np.testing.assert_array_equal(buf.get_state()["prioritized"]["priorities"], before)
    buf.update_priorities(np.full(8, 2.0))  # the right length still works


@pytest.mark.parametrize(
    "kwargs", [dict(sample_episodes=True), dict(sample_episodes=True, batch_length_T=3)]
)
def test_beta_with_sampled_episodes_stays_refused(kwargs):
    buf = _filled(LENGTHS)
    with pytest.raises(ValueError, match="episodes are drawn uniformly and carry no weights"):
        buf.sample(4, beta=0.4, **kwargs)
    buf.sample(4, **kwargs)
    with pytest.raises(ValueError, match=r"drew no transitions or sequences \(it drew episodes\)"):
        buf.update_priorities(np.ones(4))


# ------------------------------------------------------------------- uniform, determinism
def test_the_uniform_buffer_is_unchanged():
    buf = EpisodeReplayBuffer(100, seed=7)
    buf.add([episode("a", 0, 6), episode("b", 1, 3), episode("c", 2, 9)])
    batch = buf.sample(6, batch_length_T=3, lookback=1)
    assert "weights" not in batch
    # The draws of the code before prioritized sequences, for this seed.
    assert batch["indices"].tolist() == [
        [10, 11, 12, 13],
        [11, 12, 13, 14],
        [9, 10, 11, 12],
        [12, 13, 14, 15],
        [14, 15, 16, 17],
        [-1, 0, 1, 2],
    ]
    assert buf.sample(4, batch_length_T=5, pad=True)["indices"][:, 0].tolist() == [5, 12, 4, 17]
    with pytest.raises(TypeError, match="beta"):
        buf.sample(4, batch_length_T=3, beta=0.4)


def _run(buf):
    out = []
    for k in range(5):
        batch = buf.sample(16, batch_length_T=4, lookback=1, pad=k % 2 == 1, beta=0.5)
        buf.update_priorities(np.random.default_rng(k).uniform(0.1, 3.0, 16))
        out.append((batch["indices"].tolist(), batch["weights"].tolist()))
    return out


def test_deterministic_under_a_seed():
    assert _run(_filled(LENGTHS, seed=5)) == _run(_filled(LENGTHS, seed=5))
    assert _run(_filled(LENGTHS, seed=5)) != _run(_filled(LENGTHS, seed=6))


def test_state_and_save_keep_priorities_set_by_sequence_updates(tmp_path):
    buf = _filled(LENGTHS, alpha=0.7, seed=2)
    _run(buf)
    every = _every(buf)
    prio = buf.get_priorities(every)
    assert len(set(prio.tolist())) > 5  # the sequence updates set many
    restored = PrioritizedEpisodeReplayBuffer(10)
    restored.set_state(buf.get_state())
    buf.save(tmp_path / "saved")
    loaded = PrioritizedEpisodeReplayBuffer.load(tmp_path / "saved")
    for other in (restored, loaded):
        assert other.get_priorities(every).tolist() == prio.tolist()
        assert other.alpha == 0.7 and other.max_priority == buf.max_priority
    state = buf.get_state()
    restored.set_state(state)  # the same generator state: the same next sequences
    again = PrioritizedEpisodeReplayBuffer(10)
    again.set_state(state)
    assert _run(restored) == _run(again)


# ---------------------------------------------------------------------------- properties
@st.composite
def _setups(draw):
    lengths = draw(st.lists(st.integers(1, 12), min_size=1, max_size=6))
    length = draw(st.integers(1, 8))
    pad = draw(st.booleans())
    if not pad:
        lengths.append(draw(st.integers(length, 14)))  # at least one episode fits
    priorities = draw(st.lists(st.floats(0.05, 20.0), min_size=sum(lengths), max_size=sum(lengths)))
    alpha = draw(st.sampled_from([0.0, 0.5, 1.0]))
    return lengths, length, draw(st.integers(0, 3)), pad, priorities, alpha, draw(st.integers(0, 9))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_setups())
def test_prioritized_sequences_property(setup):
    lengths, length, lookback, pad, priorities, alpha, seed = setup
    buf = _filled(lengths, alpha=alpha, seed=seed)
    every = _every(buf)
    buf.update_priorities(priorities, every)
    beta = 0.5
    batch = buf.sample(12, batch_length_T=length, lookback=lookback, pad=pad, beta=beta)
    starts = batch["indices"][:, lookback]
    assert np.isin(starts, _valid_starts(buf, length, pad)).all()
    leaves = buf.get_priorities(starts) ** alpha
    least = (buf.get_priorities(every) ** alpha).min()
    np.testing.assert_allclose(batch["weights"], (leaves / least) ** -beta, rtol=1e-6)
    assert (batch["weights"] > 0).all() and (batch["weights"] <= 1.0).all()
    assert batch["mask"][:, lookback].all()  # a start is a stored step
    new = np.arange(1.0, 13.0)
    buf.update_priorities(new)
    last = {int(s): v for s, v in zip(starts, new)}
    assert buf.get_priorities(list(last)).tolist() == list(last.values())


@pytest.mark.parametrize("count", [1, 8192, 8193, 30_000], ids=lambda n: f"{n}-masses")
def test_a_search_in_pieces_finds_the_leaves_of_small_searches(count):
    rng = np.random.default_rng(count)
    tree = SumTree(50_000)
    leaves = rng.uniform(0.0, 3.0, 50_000)
    leaves[rng.random(50_000) < 0.3] = 0.0  # dead slots
    tree.rebuild(leaves)
    masses = rng.random(count) * tree.total
    small = np.concatenate([tree.find(masses[i : i + 1000]) for i in range(0, count, 1000)])
    assert tree.find(masses).tolist() == small.tolist()
    assert (tree.leaves(tree.find(masses)) > 0).all()


def test_a_large_transition_sample_draws_what_one_search_draws():
    buf = _prioritized(_filled([400] * 30))
    rng = np.random.default_rng(0)
    rng.bit_generator.state = buf.rng.bit_generator.state
    batch = buf.sample(20_000)
    assert (
        batch["indices"].tolist()
        == buf._store.uid[buf._tree.find(rng.random(20_000) * buf._tree.total)].tolist()
    )


@pytest.mark.parametrize("flag", ["no", 1, None], ids=["str", "int", "None"])
def test_a_bad_sample_episodes_flag_is_named_before_beta(flag):
    buf = _prioritized(_filled([10] * 3))
    state = buf.rng.bit_generator.state
    with pytest.raises(ValueError, match="sample_episodes must be a bool"):
        buf.sample(2, sample_episodes=flag, beta=0.5)
    assert buf.rng.bit_generator.state == state
