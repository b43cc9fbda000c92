"""`find_slots` agrees with a plain search of the id column, whatever the gaps and the asks."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.replay import PrioritizedEpisodeReplayBuffer
from episodes.replay.item_slots import find_slots


def _reference(uid, live, idx):
    where = {int(u): s for s, u in enumerate(uid)}
    found = np.array([int(i) in where and bool(live[where[int(i)]]) for i in idx], bool)
    slots = np.array([where.get(int(i), -1) for i in idx], np.int64)
    return slots, found


@settings(max_examples=300, deadline=None)
@given(
    first=st.integers(0, 2**40),
    gaps=st.lists(st.integers(1, 4), max_size=40),
    dead=st.data(),
    asks=st.data(),
)
def test_find_slots_matches_a_plain_search(first, gaps, dead, asks):
    uid = first + np.concatenate([[0], np.cumsum(gaps)]).astype(np.int64)[: len(gaps) + 1]
    live = np.array(dead.draw(st.lists(st.booleans(), min_size=len(uid), max_size=len(uid))))
    near = st.integers(first - 3, int(uid[-1]) + 3)
    far = st.sampled_from([-1, -(2**63), 2**63 - 1, 0])
    idx = np.array(asks.draw(st.lists(near | far, max_size=30)), np.int64)
    slots, found = find_slots(uid, live, idx)
    want_slots, want_found = _reference(uid, live, idx)
    assert found.tolist() == want_found.tolist()
    assert slots[found].tolist() == want_slots[found].tolist()


CASES = [
    ("empty column", np.zeros(0, np.int64), [3, -1]),
    ("no asks", np.arange(5, dtype=np.int64), []),
    ("contiguous", np.arange(10, 20, dtype=np.int64), [19, 10, 15, 9, 20]),
    ("gaps at the front", np.array([1, 4, 9, 10, 11, 12]), [12, 1, 4, 5, 10]),
    ("gaps at the back", np.array([0, 1, 2, 3, 7, 20]), [20, 7, 3, 0, 19, 8]),
]


@pytest.mark.parametrize(("uid", "asks"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_find_slots_cases(uid, asks):
    live = np.ones(len(uid), bool)
    idx = np.array(asks, np.int64)
    slots, found = find_slots(uid, live, idx)
    want_slots, want_found = _reference(uid, live, idx)
    assert found.tolist() == want_found.tolist()
    assert slots[found].tolist() == want_slots[found].tolist()


def test_priorities_by_index_after_evictions_and_compactions():
    """Explicit indices keep finding their steps while old episodes go and slots move."""
    buf = PrioritizedEpisodeReplayBuffer(60, seed=0)
    rng = np.random.default_rng(1)
    kept = {}
    for e in range(80):
        n = int(rng.integers(1, 9))
        buf.add(
            SingleAgentEpisode(
                f"e{e}",
                observations=[float(t) for t in range(n + 1)],
                actions=[0] * n,
                rewards=[1.0] * n,
                terminated=True,
                len_lookback_buffer=0,
            )
        )
        items = buf.get_episode_indices(f"e{e}")
        buf.update_priorities(np.full(len(items), e + 1.0), items)
        kept = {k: v for k, v in kept.items() if k in buf.get_episode_ids()}
        kept[f"e{e}"] = items
        every = np.concatenate(list(kept.values()))
        order = rng.permutation(len(every))
        want = np.concatenate([np.full(len(v), int(k[1:]) + 1.0) for k, v in kept.items()])
        assert buf.get_priorities(every[order]).tolist() == want[order].tolist()
        ids, t = buf.episode_steps(every[order])
        assert [int(i[1:]) + 1.0 for i in ids] == want[order].tolist()
