"""Session 13 fixes: lookbacks far beyond what is stored, argument checks before emptiness.

A chunk or sequence lookback is walked only as far as the drawn starts' episodes reach (the
rest is padding), and the link walk stops once every row left its episode; batches for
ordinary lookbacks are byte-for-byte what they were (digests recorded before the change).
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EmptyBufferError, EpisodeReplayBuffer, EvictedEpisodeError
from episodes.replay.nstep import walk

from ._episodes import episode


def _random_buffer(seed: int) -> EpisodeReplayBuffer:
    """Interleaved chunks of up to 6 episodes (some evicted): links that are not adjacent."""
    rng = np.random.default_rng(seed)
    queues = []
    for i in range(int(rng.integers(1, 7))):
        length = int(rng.integers(1, 16))
        end = ("terminated", "truncated", "ongoing")[int(rng.integers(3))]
        cuts = sorted({*rng.integers(1, length + 1, int(rng.integers(0, 4))).tolist(), length})
        obs = [np.array([i, t], np.float32) for t in range(length + 1)]
        actions = rng.integers(0, 3, length).tolist()
        rewards = rng.normal(size=length).round(3).tolist()
        logp = rng.normal(size=length).tolist()
        parts, a = [], 0
        for b in cuts:
            last = b == length
            parts.append(
                SingleAgentEpisode(
                    f"ep{i}",
                    observations=obs[a : b + 1],
                    actions=actions[a:b],
                    rewards=rewards[a:b],
                    infos=[{"t": t} for t in range(a, b + 1)],
                    extra_model_outputs={"logp": logp[a:b]},
                    terminated=last and end == "terminated",
                    truncated=last and end == "truncated",
                    t_started=a,
                    len_lookback_buffer=0,
                )
            )
            a = b
        queues.append(parts)
    buf = EpisodeReplayBuffer(int(rng.integers(8, 40)), seed=seed)
    while any(queues):
        live = [q for q in queues if q]
        queue = live[int(rng.integers(len(live)))]
        try:
            buf.add(queue.pop(0))
        except EvictedEpisodeError:
            queue.clear()  # the rest of an evicted episode cannot be added
    return buf


def _feed(h: Any, value: Any) -> None:
    value = np.asarray(value)
    if value.dtype == object:
        h.update(repr(value.tolist()).encode())
    else:
        h.update(f"{value.dtype}{value.shape}".encode())
        h.update(np.ascontiguousarray(value).tobytes())


def _digest(seed: int) -> str:
    """Sequences and chunks of several (T, lookback, pad) from one seeded buffer, hashed."""
    h = hashlib.sha256()
    buf = _random_buffer(seed)
    for T in (1, 3):
        for lookback in (0, 1, 3, 20):  # 20: beyond every episode, so clamped now
            for pad in (False, True):
                try:
                    batch = buf.sample(
                        8,
                        batch_length_T=T,
                        lookback=lookback,
                        pad=pad,
                        include_infos=True,
                        include_extra_model_outputs=True,
                    )
                except EmptyBufferError:
                    h.update(b"empty")
                    continue
                for key in sorted(batch):
                    h.update(key.encode())
                    _feed(h, batch[key])
            try:
                eps = buf.sample(8, sample_episodes=True, batch_length_T=T, lookback=lookback)
            except EmptyBufferError:
                h.update(b"empty")
                continue
            for ep in eps:
                h.update(repr((ep.id_, ep.t_started, ep.is_terminated, ep.is_truncated)).encode())
                columns = (ep.observations, ep.actions, ep.rewards, ep.extra_model_outputs["logp"])
                for column in columns:
                    h.update(str(column.lookback).encode())
                    _feed(h, column.data)
                h.update(repr(ep.infos.data).encode())
    return h.hexdigest()[:16]


# Recorded with the code before the clamp and the early stop (commit bdcb28b), re-recorded when
# sequence infos became those of next_obs ({} where padded): only the infos changed.
_BEFORE = {
    0: "e0e065d756a33a0c",
    1: "1e8d9a42e59563ab",
    2: "a114c490b1170783",
    3: "cc024a45d408f1b0",
    4: "264e17cb2bac92bf",
    5: "df1e2be6281007a6",
    6: "ca225c4b64cbf1b2",
    7: "e2b38b8b5122233d",
    8: "4bd00a5771882b79",
    9: "dbcd7ed4848b1b36",
    10: "c2aef1b383c4426f",
    11: "b3c6936106195c6f",
    12: "4f67d70a5a797fa4",
    13: "6984aa33a0a14888",
    14: "168a8e1f3737008d",
    15: "de625f2b7b43c6a7",
}


@pytest.mark.parametrize("seed", sorted(_BEFORE))
def test_same_seed_gives_the_batches_it_gave_before(seed):
    assert _digest(seed) == _BEFORE[seed]


def _follow(store: Any, start: int, length: int, backward: bool) -> list[int]:
    """The plain walk: follow one link at a time, -1 once off the episode."""
    link = store.prv if backward else store.nxt
    out, cur = [], int(store.prv[start]) if backward else start
    for _ in range(length):
        out.append(cur)
        cur = int(link[cur]) if cur >= 0 else -1
    return out[::-1] if backward else out


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("backward", [False, True], ids=["forward", "backward"])
def test_walk_follows_the_links(seed, backward):
    buf = _random_buffer(seed)
    store = buf._store
    live = np.flatnonzero(store.live[: store.end])
    rng = np.random.default_rng(seed)
    starts = rng.choice(live, 12)
    for length in (1, 2, 7, 9, 17, 40):
        got = walk(store, starts, length, backward=backward)
        want = [_follow(store, int(s), length, backward) for s in starts]
        assert got.tolist() == want, length


class _CountingLinks(np.ndarray):
    """A link column that counts the reads of its entries (the walk's steps)."""

    reads: int

    def __getitem__(self, key: Any) -> Any:
        self.reads += 1
        return np.asarray(super().__getitem__(key))


def _ten_step_buffer() -> EpisodeReplayBuffer:
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(episode("a", 0, 10, "terminated"))
    return buf


def _count_reads(buf: EpisodeReplayBuffer) -> _CountingLinks:
    store = buf._store
    store.prv = store.prv.view(_CountingLinks)
    store.prv.reads = 0
    return store.prv


def test_walk_stops_once_every_row_left_its_episode():
    buf = _ten_step_buffer()
    links = _count_reads(buf)
    got = walk(buf._store, np.array([2, 5]), 100_000, backward=True)
    assert got.shape == (2, 100_000)
    assert got[:, -5:].tolist() == [[-1, -1, -1, 0, 1], [0, 1, 2, 3, 4]]
    assert (got[:, :-5] == -1).all()
    assert links.reads < 64  # the stored steps, not the 100_000 asked


@pytest.mark.parametrize("lookback", [10**7, 10**12])
def test_chunk_lookback_beyond_what_is_stored(lookback):
    # Before: walked (and allocated) the asked lookback: 10**12 was a MemoryError, 10**7 took
    # 10**7 link steps (half a minute). A chunk's lookback holds what is stored, so the result
    # is the one a lookback of the episode's length gives from the same seed.
    buf = _ten_step_buffer()
    links = _count_reads(buf)
    eps = buf.sample(6, sample_episodes=True, batch_length_T=2, lookback=lookback)
    assert links.reads < 64
    again = _ten_step_buffer().sample(6, sample_episodes=True, batch_length_T=2, lookback=10)
    assert [(ep.t_started, ep.observations.lookback) for ep in eps] == [
        (ep.t_started, ep.observations.lookback) for ep in again
    ]
    for ep, twin in zip(eps, again):
        assert ep.observations.lookback == ep.t_started  # all the steps before the chunk
        np.testing.assert_array_equal(ep.observations.data, twin.observations.data)
        np.testing.assert_array_equal(ep.actions.data, twin.actions.data)


def test_sequence_lookback_beyond_what_is_stored():
    # Sequences keep their documented [B, lookback + T] shape: the extra columns are padding,
    # and the walk stops at the episode's first step instead of stepping 10**5 times.
    buf = _ten_step_buffer()
    links = _count_reads(buf)
    lookback = 100_000
    seq = buf.sample(3, batch_length_T=2, lookback=lookback, include_infos=True)
    twin = _ten_step_buffer().sample(3, batch_length_T=2, lookback=10, include_infos=True)
    assert links.reads < 64
    assert seq["obs"].shape == (3, lookback + 2, 2) and seq["is_lookback"][:, :lookback].all()
    for key, column in seq.items():
        np.testing.assert_array_equal(column[:, -12:], twin[key], err_msg=key)
        if key not in ("indices", "is_lookback"):  # padding: zeros, False, {}
            assert not column[:, : lookback - 10].astype(bool).any(), key
    assert (seq["indices"][:, : lookback - 10] == -1).all()


# ----------------------------------------------------------------------- argument checks
@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"lookback": -1}, "lookback must be an int >= 0"),
        ({"batch_length_T": 2, "lookback": 1.5}, "lookback must be an int >= 0"),
        ({"pad": True}, "pad applies to sequences"),
        ({"lookback": 2}, "lookback applies to sequences"),
        ({"n_step": 0}, "n_step must be an int >= 1"),
        ({"n_step": (3, 2)}, "n_step range"),
        ({"n_step": range(1, 5, 2)}, "n_step range"),
        ({"batch_length_T": -1}, "batch_length_T must be an int >= 0"),
        ({"batch_length_T": 1.0}, "batch_length_T must be an int >= 0"),
        ({"batch_length_T": 2, "n_step": 3}, "n_step applies to transitions"),
        ({"gamma": 2.0}, "gamma"),
        ({"sample_episodes": True, "device": "cpu"}, "device applies to batches"),
        ({"sample_episodes": True, "batch_length_T": -1}, "batch_length_T must be"),
    ],
    ids=lambda v: str(v)[:40],
)
def test_bad_arguments_are_reported_before_an_empty_buffer(kwargs, match):
    # Before: an empty buffer answered EmptyBufferError whatever the arguments.
    buf = EpisodeReplayBuffer(10)
    with pytest.raises(ValueError, match=match) as info:
        buf.sample(2, **kwargs)
    assert not isinstance(info.value, EmptyBufferError)
    with pytest.raises(EmptyBufferError):  # good arguments: the buffer's own error
        buf.sample(2, **{k: v for k, v in kwargs.items() if k == "sample_episodes"})


@pytest.mark.parametrize("n_step", [(1, 2), range(1, 2), 2, True, 1.0, "1"], ids=lambda v: repr(v))
@pytest.mark.parametrize("unit", ["sequences", "chunks"])
def test_sequences_and_chunks_take_only_the_default_n_step(n_step, unit):
    # Sequences and chunks have no horizon; only the default passes. Before, True and 1.0
    # compared equal to 1 and were ignored, while transitions refuse them.
    buf = _ten_step_buffer()
    kwargs = {"batch_length_T": 2, "sample_episodes": unit == "chunks"}
    state = buf.rng.bit_generator.state
    with pytest.raises(ValueError, match="n_step applies to transitions"):
        buf.sample(2, n_step=n_step, **kwargs)
    assert buf.rng.bit_generator.state == state and buf.get_sampled_timesteps() == 0
    for default in (1, np.int64(1), None):
        buf.sample(2, n_step=default, **kwargs)


def test_transitions_take_the_ranges_as_before():
    buf = _ten_step_buffer()
    for n_step in ((1, 2), range(1, 2), (2, 4), range(3, 4)):
        batch = buf.sample(20, n_step=n_step)
        lo, hi = (n_step.start, n_step.stop) if isinstance(n_step, range) else n_step
        assert set(batch["n_step"].tolist()) <= set(range(1, hi))  # fewer at the episode end
    with pytest.raises(ValueError, match="n_step must be an int >= 1"):
        buf.sample(2, n_step=True)
