"""Block memory is recorded into again only once nothing reads it (``episodes.runner.recycling``).

A recycled block set must never be one that a chunk, a recording, a numpy view or a tensor
still reads; a runner that recycles must record exactly what one that never recycles records.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from episodes.runner import EnvRunner, recycling
from episodes.runner.blocks import Blocks
from episodes.runner.recycling import KEPT, BlockPool
from tests.runner._random_env import EnvSpec, Policy, make_vec
from tests.runner.test_batched_equals_per_step import assert_same_chunks


def blocks_of(rows: int = 6, dtype: type = np.float32) -> Blocks:
    blocks = Blocks.allocate(np.zeros((3, 2), dtype), rows=rows)
    blocks.ensure_outputs(np.zeros(3, np.int64), {"vf": np.zeros(3, np.float32)})
    return blocks


def hold_nothing(blocks: Blocks) -> object:
    return None


def hold_obs_view(blocks: Blocks) -> object:
    return blocks.obs.leaves[0][2:4, 1]


def hold_reward_view(blocks: Blocks) -> object:
    return blocks.rewards[1:]


def hold_extra_tensor(blocks: Blocks) -> object:
    return torch.from_numpy(blocks.extras["vf"].leaves[0][:, 0])


def hold_action_view_of_view(blocks: Blocks) -> object:
    return blocks.actions.leaves[0][1:][1:] if blocks.actions else None


def hold_blocks_sharing(blocks: Blocks) -> object:
    return blocks.sharing()


def hold_dead_flags(blocks: Blocks) -> object:
    return blocks.dead


POOL_CASES = [
    # (name, what a reader keeps of the pooled arrays, whether the pool may hand them back)
    ("nothing kept", hold_nothing, True),
    ("a view of an observation block", hold_obs_view, False),
    ("a view of the rewards", hold_reward_view, False),
    ("a tensor over an extra output", hold_extra_tensor, False),
    ("a view of a view of the actions", hold_action_view_of_view, False),
    ("blocks recording into the same arrays", hold_blocks_sharing, False),
    ("the dead flags themselves", hold_dead_flags, False),
]


@pytest.mark.skipif(not recycling.COUNTS_ARE_EXACT, reason="the pool never hands back here")
@pytest.mark.parametrize("name, hold, free", POOL_CASES, ids=[c[0] for c in POOL_CASES])
def test_the_pool_hands_back_only_what_nothing_reads(name, hold, free):
    pool = BlockPool()
    blocks = blocks_of()
    pool.add(blocks)
    kept = hold(blocks)
    del blocks
    taken = pool.take(blocks_of(rows=1), rows=6)
    assert (taken is not None) == free, name
    del kept
    if not free:  # once the reader lets go, the set is free
        assert pool.take(blocks_of(rows=1), rows=6) is not None


@pytest.mark.parametrize(
    "name, like, rows, free",
    [
        ("same layout, fewer rows asked", blocks_of(rows=2), 5, True),
        ("more rows than the set holds", blocks_of(rows=2), 7, False),
        ("other observation dtype", blocks_of(rows=2, dtype=np.float64), 5, False),
        ("no action block yet", Blocks.allocate(np.zeros((3, 2), np.float32), rows=2), 5, False),
    ],
)
def test_the_pool_hands_back_only_sets_of_the_same_layout_and_enough_rows(name, like, rows, free):
    pool = BlockPool()
    pool.add(blocks_of())
    assert (pool.take(like, rows) is not None) == (free and recycling.COUNTS_ARE_EXACT), name


def test_the_pool_keeps_only_the_newest_sets():
    pool = BlockPool()
    for rows in range(1, KEPT + 3):
        pool.add(blocks_of(rows=rows))
    assert len(pool) == (KEPT if recycling.COUNTS_ARE_EXACT else 0)
    assert pool.take(blocks_of(rows=1), rows=KEPT + 3) is None  # the longest were kept...
    if recycling.COUNTS_ARE_EXACT:
        assert pool.take(blocks_of(rows=1), rows=KEPT + 2) is not None  # ...and handed back


def make_runner(num_envs: int = 32) -> EnvRunner:
    # Next-step resets make the carried rows grow, so calls run out of room and carry over.
    env = make_vec(EnvSpec("box", "discrete", 0.05, 0.05, 0.3), num_envs, "NextStep")
    return EnvRunner(env, Policy(env.single_action_space, False), len_lookback_buffer=2, seed=3)


def spy_on_successors(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    recycled: list[bool] = []
    successor = Blocks.successor

    def spy(self, first, stop, rows, into=None):
        recycled.append(into is not None)
        return successor(self, first, stop, rows, into)

    monkeypatch.setattr(Blocks, "successor", spy)
    return recycled


def test_chunks_and_views_held_across_calls_are_never_written(monkeypatch):
    recycled = spy_on_successors(monkeypatch)
    runner = make_runner()
    held = []
    for call in range(120):
        chunks = runner.sample(4)
        if call % 7 == 0:  # the whole sample, as a training loop keeps its last one
            held.append((chunks, [copy.deepcopy(chunk) for chunk in chunks]))
        elif call % 7 == 3:  # one built chunk without its sample
            chunk = chunks[call % len(chunks)]
            held.append(([chunk], [copy.deepcopy(chunk)]))
        elif call % 7 == 5:  # an array a chunk's getter returned
            obs = chunks[0].get_observations()
            held.append(([obs], [obs.copy()]))
    assert any(recycled), "no block set was recycled: the test checks nothing"
    for kept, snapshot in held:
        for now, then in zip(kept, snapshot):
            if isinstance(now, np.ndarray):
                np.testing.assert_array_equal(now, then)
            else:
                assert now == then


@pytest.mark.skipif(not recycling.COUNTS_ARE_EXACT, reason="the pool never hands back here")
def test_a_recycling_runner_records_what_a_fresh_one_records(monkeypatch):
    recycled = spy_on_successors(monkeypatch)
    twin = make_runner()
    twin._recorder._pool = type("NoPool", (), {"add": id, "take": lambda *a: None})()  # noqa: SLF001
    runner = make_runner()
    ids: dict[str, str] = {}
    for _ in range(80):
        assert_same_chunks(twin.sample(4), runner.sample(4), ids)
    assert sum(recycled) > 5


def test_a_recycled_set_reads_as_new_blocks_after_the_carried_rows():
    """Rows a recycled set held from an earlier call read as ``allocate`` and ``new_leaf`` make
    them: zero flags and rewards, zero int64 leaves (floats widening an int64 leaf check every
    row for ints float64 would round).
    """
    old = blocks_of(rows=6)
    big = np.full(3, 2**53 + 1, np.int64)  # float64 would round it
    for row in range(6):
        old.actions.put(row, big)
        old.rewards[row] = 7.0
        old.dead[row] = True
    current = blocks_of(rows=4)
    current.rewards[:] = np.arange(4)[:, None]
    nxt = current.successor(1, 3, rows=5, into=old)
    assert nxt.step_rows == 6 and np.shares_memory(nxt.actions.leaves[0], old.actions.leaves[0])
    np.testing.assert_array_equal(nxt.rewards[:, 0], [1, 2, 0, 0, 0, 0])
    assert not nxt.dead.any() and not nxt.actions.leaves[0][2:].any()
    nxt.actions.put(2, np.array([0.5, 1.5, 2.5]))  # widens: the old ints are gone
    assert nxt.actions.leaves[0].dtype == np.float64
