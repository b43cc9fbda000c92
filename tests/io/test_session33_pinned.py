"""Decompressed (zstd) record batches kept alive by an open dataset's caches are bounded in bytes.

The leaf views and column plans each open shard caches hold their record batch: bounded only by
their number (1,024 views a shard), a pass of ``Dataset.steps`` over image pieces kept every
piece decompressed (300 pieces of 51 frames of 84x84x4 in 7 shards: +553 MiB of RSS).
"""

from __future__ import annotations

import pickle

import numpy as np
import pyarrow as pa
import pytest

import episodes.io.shard_reader as shard_reader
from episodes import SingleAgentEpisode
from episodes.io import Dataset, DatasetWriter
from episodes.io.pinned import BoundedCache, ByteBudget

FRAME = (32, 32, 4)  # 4 KiB a frame: a piece of 25 frames is 100 KiB decompressed


def _pieces(n: int) -> list[SingleAgentEpisode]:
    rng = np.random.default_rng(0)
    return [
        SingleAgentEpisode(
            str(i),
            observations=list(rng.integers(0, 4, size=(25, *FRAME), dtype=np.uint8)),
            actions=[i % 2] * 24,
            rewards=[float(i)] * 24,
            len_lookback_buffer=0,
        )
        for i in range(n)
    ]


@pytest.fixture
def zstd_dataset(tmp_path):
    path = tmp_path / "d"
    with DatasetWriter(path, compression="zstd", shard_bytes=64 << 20) as w:
        w.write_many(_pieces(60))
    return path


@pytest.mark.parametrize("order", ["in order", "random", "episodes"])
def test_reads_keep_at_most_the_budget_of_decompressed_batches(zstd_dataset, monkeypatch, order):
    monkeypatch.setattr(shard_reader, "_CACHED_BYTES", 1 << 20)
    ds = Dataset(zstd_dataset)
    assert len(ds.shards) == 1  # one shard: its last 4 batches are all it keeps besides
    before = pa.total_allocated_bytes()
    indices = np.random.default_rng(1).permutation(60) if order == "random" else range(60)
    for i in indices:
        if order == "episodes":
            ds.episode(int(i))
        else:
            ds.steps(int(i), 0, 24)
    held = pa.total_allocated_bytes() - before
    # 60 pieces of 100 KiB: all of them (6 MB) were kept before; now the budget and 4 batches.
    assert held <= (1 << 20) + 5 * 110_000, held


def test_reads_give_the_same_steps_after_their_views_were_forgotten(zstd_dataset, monkeypatch):
    monkeypatch.setattr(shard_reader, "_CACHED_BYTES", 300_000)
    ds = Dataset(zstd_dataset)
    first = [ds.steps(i, 0, 24) for i in (0, 1, 2)]
    for i in range(3, 60):
        ds.steps(i, 3, 7)
    for i, old in zip((0, 1, 2), first):
        new = ds.steps(i, 0, 24)
        assert np.array_equal(new["observations"], old["observations"])
        assert np.array_equal(new["rewards"], old["rewards"])
    expected = _pieces(3)[2].get_observations(slice(0, 25))
    assert np.array_equal(first[2]["observations"], np.stack(expected))


def test_uncompressed_shards_pin_nothing(tmp_path):
    with DatasetWriter(tmp_path / "d") as w:
        w.write_many(_pieces(10))
    ds = Dataset(tmp_path / "d")
    for i in (3, 1, 7):
        ds.steps(i, 0, 24)
    assert ds._budget.nbytes == 0  # views into the memory map are the page cache


def test_a_pickled_dataset_starts_with_an_empty_budget(zstd_dataset):
    ds = Dataset(zstd_dataset)
    for i in (5, 2, 9):
        ds.steps(i, 0, 24)
    assert ds._budget.nbytes > 0
    again = pickle.loads(pickle.dumps(ds))
    assert again._budget.nbytes == 0 and again._budget is not ds._budget
    assert np.array_equal(again.steps(2, 0, 24)["observations"], ds.steps(2, 0, 24)["observations"])


def _unique_pinned_bytes(ds: Dataset) -> int:
    from episodes.io.pinned import pinned_arrays, plan_views

    arrays = {}
    for shard in ds.open_shards():
        for key in list(shard._views._entries):
            for a in pinned_arrays(shard, [shard._views.get(key)]):
                arrays[id(a)] = a.nbytes
        for key in list(shard._plans._entries):
            for a in pinned_arrays(shard, plan_views(shard._plans.get(key))):
                arrays[id(a)] = a.nbytes
    return sum(arrays.values())


def test_an_array_held_by_a_view_and_a_plan_counts_once(zstd_dataset):
    ds = Dataset(zstd_dataset)
    for i in np.random.default_rng(2).permutation(60)[:30]:  # random reads cache plans too
        ds.steps(int(i), 0, 5)
    assert ds._budget.nbytes == _unique_pinned_bytes(ds) > 0  # it was twice that


def test_a_working_set_within_the_budget_stays_cached(zstd_dataset, monkeypatch):
    """Counted twice, 6 MB of pieces under an 8 MB budget were re-planned and decompressed on
    nearly every random read (500x slower warm reads)."""
    monkeypatch.setattr(shard_reader, "_CACHED_BYTES", 8 << 20)
    planned: list[int] = []
    real = shard_reader.plan_columns
    monkeypatch.setattr(shard_reader, "plan_columns", lambda s, j: planned.append(j) or real(s, j))
    ds = Dataset(zstd_dataset)
    order = [int(i) for i in np.random.default_rng(3).permutation(60)]
    for i in order:
        ds.steps(i, 0, 5)
    planned.clear()
    for i in order[::-1]:
        ds.steps(i, 0, 5)
    # Only pieces read right after the piece before them were not cached (a pass in order).
    assert set(planned) <= {j for prev, j in zip(order, order[1:]) if j == prev + 1}
    assert len(planned) <= 3


def test_closing_a_shard_frees_what_its_caches_pinned(tmp_path):
    path = tmp_path / "d"
    with DatasetWriter(path, compression="zstd", shard_bytes=1) as w:  # a shard per piece
        w.write_many(_pieces(12))
    ds = Dataset(path, max_open_shards=1)
    for i in np.random.default_rng(4).permutation(12).tolist() * 2:
        ds.steps(int(i), 0, 5)
        assert ds._budget.nbytes == _unique_pinned_bytes(ds) <= 110_000  # one open shard's
    before = pa.total_allocated_bytes()
    ds.steps(0, 0, 5)
    ds.steps(1, 0, 5)  # closes shard 0: its batch is freed
    assert pa.total_allocated_bytes() - before <= 2 * 110_000


ARR = {k: np.zeros(n, np.uint8) for k, n in [("a", 40), ("b", 40), ("c", 40), ("big", 101)]}
ARR["c2"] = np.zeros(70, np.uint8)


@pytest.mark.parametrize(
    "steps, kept, nbytes",
    [
        ("two under the budget", ["a", "b"], 80),
        ("a third over it forgets the oldest", ["b", "c"], 80),
        ("an entry over the budget alone is not kept", ["b", "c"], 80),
        ("entries pinning nothing only count", ["b", "c", "x"], 80),
        ("the count limit forgets the oldest too", ["c", "x", "y"], 40),
        ("putting a key again replaces it", ["c", "x", "y"], 70),
        ("clear forgets everything", [], 0),
    ],
)
def test_bounded_cache_table(steps, kept, nbytes):
    budget = ByteBudget(100)
    cache, other = BoundedCache(3, budget), BoundedCache(3, budget)
    script = [
        (
            "two under the budget",
            lambda: (cache.put("a", 1, [ARR["a"]]), cache.put("b", 2, [ARR["b"]])),
        ),
        ("a third over it forgets the oldest", lambda: cache.put("c", 3, [ARR["c"]])),
        ("an entry over the budget alone is not kept", lambda: other.put("big", 0, [ARR["big"]])),
        ("entries pinning nothing only count", lambda: cache.put("x", 4)),
        ("the count limit forgets the oldest too", lambda: cache.put("y", 5)),
        ("putting a key again replaces it", lambda: cache.put("c", 6, [ARR["c2"]])),
        ("clear forgets everything", cache.clear),
    ]
    for name, step in script:
        step()
        if name == steps:
            break
    assert [k for k in ("a", "b", "c", "x", "y") if cache.get(k) is not None] == kept
    assert other.get("big") is None and len(other) == 0
    assert budget.nbytes == nbytes
