"""Differential tests: our replay buffers against RLlib 2.60's where RLlib's answers are fixed.

Counts, the eviction order and the n-step values of the items RLlib samples are compared on
random streams of episode chunks. RLlib's sampling is random, so the n-step check runs the
other way round: every transition RLlib returns (episode id, start index) is looked up in our
buffer and recomputed there. One known RLlib deviation is left out of the comparison and pinned
below: a window that reaches a termination with fewer than ``n`` steps left comes back from
RLlib with ``terminated=False`` (see docs/replay.md). Run with the reference venv:

    .venv-ref/bin/python -m pytest -q tests/differential/test_rllib_replay.py
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("ray.rllib")

from hypothesis import assume, event, given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from ray.rllib.env.single_agent_episode import SingleAgentEpisode as RSAE  # noqa: E402
from ray.rllib.utils.replay_buffers.episode_replay_buffer import (  # noqa: E402
    EpisodeReplayBuffer as RBuffer,
)
from ray.rllib.utils.replay_buffers.prioritized_episode_buffer import (  # noqa: E402
    PrioritizedEpisodeReplayBuffer as RPrioritized,
)

from episodes import SingleAgentEpisode as OSAE  # noqa: E402
from episodes.replay import (  # noqa: E402
    EpisodeReplayBuffer,
    EvictedEpisodeError,
    PrioritizedEpisodeReplayBuffer,
)


def _twin_chunks(i: int, length: int, cuts: list[int], end: str):
    rng = np.random.default_rng(i)
    obs = [np.array([i, t], np.float32) for t in range(length + 1)]
    actions = [int(a) for a in rng.integers(0, 3, length)]
    rewards = [float(r) for r in rng.normal(size=length).round(3)]
    out, a = [], 0
    for b in [*cuts, length]:
        last = b == length
        kwargs = dict(
            observations=obs[a : b + 1],
            actions=actions[a:b],
            rewards=rewards[a:b],
            terminated=last and end == "terminated",
            truncated=last and end == "truncated",
            t_started=a,
            len_lookback_buffer=0,
        )
        out.append((OSAE(f"e{i}", **kwargs), RSAE(id_=f"e{i}", **kwargs)))
        a = b
    return out


@st.composite
def twin_streams(draw, interleave=True):
    queues = []
    for i in range(draw(st.integers(1, 7))):
        length = draw(st.integers(1, 15))
        cuts = (
            sorted(set(draw(st.lists(st.integers(1, length - 1), max_size=2))))
            if length > 1
            else []
        )
        end = draw(st.sampled_from(["terminated", "truncated", "ongoing"]))
        queues.append(_twin_chunks(i, length, cuts, end))
    if not interleave:
        return [pair for q in queues for pair in q]
    stream = []
    while any(queues):
        live = [q for q in queues if q]
        stream.append(live[draw(st.integers(0, len(live) - 1))].pop(0))
    return stream


def _assert_counts(ours, theirs):
    assert ours.get_num_timesteps() == theirs.get_num_timesteps()
    assert ours.get_num_episodes() == theirs.get_num_episodes()
    assert ours.get_added_timesteps() == theirs.get_added_timesteps()
    assert ours.get_num_episodes_evicted() == theirs.get_num_episodes_evicted()
    assert ours.get_episode_ids() == [ep.id_ for ep in theirs.episodes]


@given(
    stream=twin_streams(interleave=False), capacity=st.integers(5, 60), prioritized=st.booleans()
)
def test_counts_and_eviction_match(stream, capacity, prioritized):
    ours_cls, theirs_cls = (
        (PrioritizedEpisodeReplayBuffer, RPrioritized)
        if prioritized
        else (EpisodeReplayBuffer, RBuffer)
    )
    ours, theirs = ours_cls(capacity), theirs_cls(capacity)
    for mine, rl in stream:
        try:
            ours.add(mine)
        except EvictedEpisodeError:
            # RLlib would start a new episode with the old id; we refuse (docs/replay.md).
            return
        theirs.add(rl)
        _assert_counts(ours, theirs)


@given(stream=twin_streams(), capacity=st.integers(3, 30))
def test_restart_on_evicted_stores_what_rllib_stores(stream, capacity):
    # on_evicted="restart": a chunk continuing an evicted episode starts a new one, as RLlib's
    # uniform buffer stores it (its prioritized one counts added steps otherwise, see above).
    ours, theirs = EpisodeReplayBuffer(capacity), RBuffer(capacity)
    for mine, rl in stream:
        try:
            theirs.add(rl)
        except (IndexError, AssertionError):  # evicting an interleaved episode (pinned below)
            assume(False)
        if mine.id_ in ours.get_evicted_ids():
            event("an evicted episode came back")
        ours.add(mine, on_evicted="restart")
        _assert_counts(ours, theirs)
        assert [(ep.t_started, len(ep)) for ep in ours.get_episodes()] == [
            (ep.t_started, len(ep)) for ep in theirs.episodes
        ]


def test_restart_on_evicted_is_reached_by_the_streams_above():
    # The property above compares something only where an evicted episode comes back.
    a, b = _twin_chunks(0, 4, [3], "terminated"), _twin_chunks(1, 3, [], "terminated")
    ours, theirs = EpisodeReplayBuffer(5), RBuffer(5)
    for mine, rl in [a[0], b[0], a[1]]:  # b evicts the running a; a's next chunk restarts it
        ours.add(mine, on_evicted="restart")
        theirs.add(rl)
    _assert_counts(ours, theirs)
    assert ours.get_evicted_ids() == [] and ours.get_num_episodes_evicted() == 1
    assert [(ep.id_, ep.t_started, len(ep)) for ep in ours.get_episodes()] == [
        ("e1", 0, 3),
        ("e0", 3, 1),
    ]
    assert [(ep.id_, ep.t_started, len(ep)) for ep in theirs.episodes] == [
        ("e1", 0, 3),
        ("e0", 3, 1),
    ]


@given(stream=twin_streams(), n_step=st.integers(1, 4), gamma=st.sampled_from([0.5, 0.99]))
def test_n_step_values_of_rllib_samples(stream, n_step, gamma):
    ours, theirs = EpisodeReplayBuffer(10_000), RBuffer(10_000)
    for mine, rl in stream:
        ours.add(mine)
        theirs.add(rl)
    # RLlib counts an item whose window runs past its episode's end as
    # `len - ts - (n - 1) + 1` items, negative for the last steps of a short episode: where
    # those outweigh the rest its count drifts down and sample() never returns.
    drift = [
        (min(len(ep), ts + n_step - 1) - ts - (n_step - 1) + 1) or 1
        for ep in theirs.episodes
        for ts in range(len(ep))
    ]
    assume(np.mean(drift) >= 0.5)
    theirs.rng = np.random.default_rng(0)
    sampled = theirs.sample(64, n_step=n_step, gamma=gamma, sample_episodes=True)
    lengths = {ep.id_: len(ep) for ep in theirs.episodes}
    for ep in sampled:
        ts = ep.t_started  # RLlib: the index into its stored episode
        got = ours.get_transitions(ours.locate(ep.id_, ts), n_step=n_step, gamma=gamma)
        np.testing.assert_array_equal(got["obs"][0], ep.get_observations(0))
        np.testing.assert_array_equal(got["next_obs"][0], ep.get_observations(-1))
        assert got["actions"][0] == ep.get_actions(0)
        np.testing.assert_allclose(got["rewards"][0], ep.get_rewards(0), rtol=1e-5, atol=1e-6)
        if ts + n_step <= lengths[ep.id_]:  # RLlib's flags are right only for full windows
            assert bool(got["terminateds"][0]) == ep.is_terminated
            assert bool(got["truncateds"][0]) == ep.is_truncated


def test_rllib_deviation_evicting_an_interleaved_episode():
    """Pinned: RLlib fails evicting an episode whose chunks came interleaved; we evict it."""
    a = _twin_chunks(0, 4, [1], "terminated")
    b = _twin_chunks(1, 3, [], "terminated")
    stream = [a[0], b[0], a[1]]  # e0's chunks around e1's: e0 is not contiguous
    ours, theirs = EpisodeReplayBuffer(5), RBuffer(5)
    for mine, _ in stream:
        ours.add(mine)
    assert ours.get_episode_ids() == ["e1"] and ours.get_num_timesteps() == 3
    with pytest.raises((IndexError, AssertionError)):
        for _, rl in stream:
            theirs.add(rl)


def test_rllib_deviation_short_terminal_window():
    """Pinned: we flag a terminal window shorter than n as terminated; RLlib does not."""
    ((mine, rl),) = _twin_chunks(0, 5, [], "terminated")
    ours, theirs = EpisodeReplayBuffer(100), RBuffer(100)
    ours.add(mine)
    theirs.add(rl)
    theirs.rng = np.random.default_rng(0)
    short = [e for e in theirs.sample(64, n_step=3, sample_episodes=True) if e.t_started == 4]
    assert short and not short[0].is_terminated  # RLlib
    got = ours.get_transitions(ours.locate("e0", 4), n_step=3)
    assert got["terminateds"].tolist() == [True] and got["n_step"].tolist() == [1]


@pytest.mark.parametrize("ending", [True, False], ids=["ending", "not-ending"])
def test_rllib_deviation_stepless_chunk_of_an_unknown_id(ending):
    """Pinned: RLlib stores a stepless chunk of a new id as an empty episode; we ignore it."""
    ours, theirs = EpisodeReplayBuffer(10), RBuffer(10)
    mine = OSAE("x", observations=[0.0], terminated=ending, len_lookback_buffer=0)
    rl = RSAE(id_="x", observations=[0.0], terminated=ending, len_lookback_buffer=0)
    ours.add(mine)
    theirs.add(rl)
    assert theirs.get_num_episodes() == 1  # RLlib
    assert ours.get_num_episodes() == 0 and ours.get_episode_ids() == []
    assert ours.get_num_timesteps() == theirs.get_num_timesteps() == 0


@pytest.mark.parametrize("prioritized", [False, True], ids=["uniform", "prioritized"])
def test_continuation_with_another_border_observation_is_refused_by_both(prioritized):
    """A chunk whose first observation is not the stored last one: both buffers refuse it.

    Ours is unchanged afterwards; RLlib's has already counted the refused chunk's steps.
    """
    first, _ = _twin_chunks(0, 4, [2], "terminated")
    kwargs = dict(
        observations=[np.array([9, t], np.float32) for t in (2, 3)],  # e0 has [0, 2] at t=2
        actions=[0],
        rewards=[1.0],
        t_started=2,
        len_lookback_buffer=0,
    )
    wrong = (OSAE("e0", **kwargs), RSAE(id_="e0", **kwargs))
    ours = (PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer)(100)
    theirs = (RPrioritized if prioritized else RBuffer)(100)
    ours.add(first[0])
    theirs.add(first[1])
    with pytest.raises(ValueError, match="differs"):
        ours.add(wrong[0])
    with pytest.raises(AssertionError):
        theirs.add(wrong[1])
    assert ours.get_num_timesteps() == 2 and ours.get_episode_ids() == ["e0"]
    assert theirs.get_num_timesteps() == 3  # RLlib: 2 stored + 1 refused


def test_rllib_deviation_sample_episodes_is_not_n_step_transitions():
    """Pinned: RLlib's ``sample_episodes=True`` gives one-step episodes, each one n-step
    transition (DQN's path); ours gives whole episodes (or ``batch_length_T`` chunks) and takes
    no ``n_step`` there: n-step transitions are ``sample(...)``'s default unit here."""
    ((mine, rl),) = _twin_chunks(0, 10, [], "terminated")
    ours, theirs = EpisodeReplayBuffer(100), RBuffer(100)
    ours.add(mine)
    theirs.add(rl)
    theirs.rng = np.random.default_rng(0)
    assert {len(e) for e in theirs.sample(4, n_step=3, sample_episodes=True)} == {1}
    with pytest.raises(ValueError, match="n_step applies to transitions"):
        ours.sample(4, n_step=3, sample_episodes=True)
    assert [len(e) for e in ours.sample(2, sample_episodes=True)] == [10, 10]
    batch = ours.sample(4, n_step=3, gamma=0.9)  # the n-step transitions RLlib's episodes hold
    assert len(batch["n_step"]) == 4


def test_rllib_deviation_short_truncated_window():  # "short-window-flags"
    """Pinned: every window ending at a truncation is ``truncated`` here; RLlib flags only the
    full one (an episode of 3 steps, ``n_step=3``: RLlib {0: True, 1: False, 2: False})."""
    ((mine, rl),) = _twin_chunks(0, 3, [], "truncated")
    ours, theirs = EpisodeReplayBuffer(100), RBuffer(100)
    ours.add(mine)
    theirs.add(rl)
    theirs.rng = np.random.default_rng(0)
    flags = {
        e.t_started: e.is_truncated for e in theirs.sample(200, n_step=3, sample_episodes=True)
    }
    assert flags == {0: True, 1: False, 2: False}  # RLlib
    got = ours.get_transitions(ours.locate("e0", [0, 1, 2]), n_step=3, gamma=0.5)
    assert got["truncateds"].tolist() == [True, True, True]
    assert got["terminateds"].tolist() == [False, False, False]
    assert got["n_step"].tolist() == [3, 2, 1]


def test_rllib_deviation_sequence_length_in_the_constructor():  # "constructor-sequence-length"
    """Pinned: RLlib's ``batch_length_T`` in the constructor makes plain ``sample()`` return
    sequences; ours takes it per call and ``sample()`` returns transitions."""
    ((mine, rl),) = _twin_chunks(0, 10, [], "terminated")
    theirs = RBuffer(100, batch_size_B=4, batch_length_T=5)
    theirs.add(rl)
    assert np.asarray(theirs.sample()["obs"]).shape == (4, 5, 2)  # RLlib
    with pytest.raises(TypeError, match="batch_length_T"):
        EpisodeReplayBuffer(100, batch_size_B=4, batch_length_T=5)
    ours = EpisodeReplayBuffer(100, batch_size_B=4, seed=0)
    ours.add(mine)
    assert ours.sample()["obs"].shape == (4, 2)
    assert ours.sample(batch_length_T=5)["obs"].shape == (4, 5, 2)


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("uniform-sample-beta", dict(beta=0.4)),  # "uniform-sample-beta"
        ("sample-to-numpy", dict(to_numpy=True, sample_episodes=True)),  # "sample-to-numpy"
        (
            "sample-min-length",  # "sample-min-length"
            dict(min_batch_length_T=1, batch_length_T=2, sample_episodes=True),
        ),
    ],
)
def test_rllib_deviation_sample_keywords_we_refuse(name, kwargs):
    """Pinned: keywords RLlib's uniform ``sample`` takes (and ignores, or needs no more here)
    are a ``TypeError`` here, not swallowed."""
    ((mine, rl),) = _twin_chunks(0, 10, [], "terminated")
    ours, theirs = EpisodeReplayBuffer(100, seed=0), RBuffer(100)
    ours.add(mine)
    theirs.add(rl)
    theirs.rng = np.random.default_rng(0)
    extra = {"n_step": 1} if kwargs.get("sample_episodes") else {}
    out = theirs.sample(4, **kwargs, **extra)  # RLlib takes it
    if name == "sample-to-numpy":
        assert not any(e.is_numpy for e in out)  # and ignores it
        assert all(e.is_numpy for e in ours.sample(2, sample_episodes=True))
    if name == "sample-min-length":
        assert out and all(len(e) >= 1 for e in out)
    if name == "uniform-sample-beta":
        assert np.asarray(out["obs"]).shape[:2] == (4, 64)  # ignored: its default sequences
    with pytest.raises(TypeError, match=next(iter(kwargs))):
        ours.sample(4, **kwargs)


def test_rllib_deviation_update_priorities_second_argument():  # "update-priorities-module-id"
    """Pinned: RLlib's second argument is a module id; ours is the indices, and a string
    there is a ValueError naming RLlib's module_id (nothing changed)."""
    ((mine, rl),) = _twin_chunks(0, 10, [], "terminated")
    ours, theirs = PrioritizedEpisodeReplayBuffer(100, seed=0), RPrioritized(100)
    ours.add(mine)
    theirs.add(rl)
    theirs.sample(4, n_step=1)
    theirs.update_priorities(np.full(4, 2.0), "default_policy")  # RLlib
    batch = ours.sample(4)
    with pytest.raises(ValueError, match="module_id"):
        ours.update_priorities(np.full(4, 2.0), "default_policy")
    assert ours.get_priorities(batch["indices"]).tolist() == [1.0] * 4
    ours.update_priorities(np.full(4, 2.0))
    assert ours.get_priorities(batch["indices"]).tolist() == [2.0] * 4


def test_rllib_deviation_zero_priority():  # "zero-priority"
    """Pinned: both raise priorities from 0 up to 1e-12 to 1e-12 (before alpha); RLlib raises
    negative ones too, where ours refuses them."""
    ((mine, rl),) = _twin_chunks(0, 10, [], "terminated")
    ours = PrioritizedEpisodeReplayBuffer(100, alpha=0.6, seed=0)
    theirs = RPrioritized(100, alpha=0.6)
    ours.add(mine)
    theirs.add(rl)
    theirs.sample(4, n_step=1)
    values = [0.0, -1.0, 1e-13, 2.0]
    floored = dict(zip(theirs._last_sampled_indices, [max(v, 1e-12) ** 0.6 for v in values]))
    theirs.update_priorities(np.array(values))  # RLlib: no error, every value floored
    assert {i: theirs._sum_segment[i] for i in floored} == pytest.approx(floored)
    ours.update_priorities([0.0, 1e-13, 2.0], [0, 1, 2])
    assert ours.get_priorities([0, 1, 2]).tolist() == [1e-12, 1e-12, 2.0]
    assert ours.get_state()["prioritized"]["leaves"][0] == pytest.approx(1e-12**0.6)
    before = ours.get_priorities([0, 1, 2])
    with pytest.raises(ValueError, match=">= 0"):
        ours.update_priorities([-1.0], [0])
    assert ours.get_priorities([0, 1, 2]).tolist() == before.tolist()


def test_rllib_deviation_per_added_timesteps():  # "per-added-timesteps"
    """Pinned: a continuing chunk whose episode the same ``add`` evicts. RLlib's uniform buffer
    counts its steps as added, its prioritized buffer does not; both of ours count them."""
    (a0, a1) = _twin_chunks(0, 10, [9], "terminated")
    ((b_mine, b_rl),) = _twin_chunks(1, 3, [], "ongoing")
    added = {}
    for name, buffer, side in [
        ("ours uniform", EpisodeReplayBuffer(7, seed=0), 0),
        ("ours prioritized", PrioritizedEpisodeReplayBuffer(7, seed=0), 0),
        ("rllib uniform", RBuffer(7), 1),
        ("rllib prioritized", RPrioritized(7), 1),
    ]:
        buffer.add(a0[side])  # ongoing and alone: kept over capacity
        buffer.add([a1[side], (b_mine, b_rl)[side]])  # "e0" ends and is evicted in this add
        assert buffer.get_num_timesteps() == 3
        assert buffer.get_num_episodes_evicted() == 1
        added[name] = buffer.get_added_timesteps()
    assert added == {
        "ours uniform": 13,
        "ours prioritized": 13,
        "rllib uniform": 13,
        "rllib prioritized": 12,
    }
