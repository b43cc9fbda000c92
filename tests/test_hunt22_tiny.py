"""Hunt 22 small-edge fixes: ``SampleBatch.count`` skips columns of empty dicts or tuples (the
count no longer depends on column order), and too many mini-batches is an error naming
``num_mini_batches`` and what it splits."""

from __future__ import annotations

import pytest

from episodes.episode.sample_batch import SampleBatch

COUNTS = {
    "empty-dicts-first": ({"obs": [{}, {}], "actions": [0, 1]}, 2),
    "empty-dicts-last": ({"actions": [0, 1], "obs": [{}, {}]}, 2),
    "empty-tuples-first": ({"obs": [(), ()], "actions": [0, 1, 1]}, 3),
    "nested-empty-dict": ({"obs": [{"a": {}}, {"a": {}}], "t": [0, 1]}, 2),
    "only-empty-dicts": ({"x": [{}, {}]}, 0),
    "plain": ({"obs": [1, 2, 3]}, 3),
}


@pytest.mark.parametrize("case", list(COUNTS))
def test_sample_batch_count_skips_columns_without_leaves(case):
    columns, want = COUNTS[case]
    batch = SampleBatch(columns)
    assert batch.count == len(batch) == want


@pytest.mark.parametrize("generator", ["mini_batch_generator", "recurrent_mini_batch_generator"])
@pytest.mark.parametrize("parts", [2, 5])
def test_too_many_mini_batches_name_the_argument(generator, parts):
    torch = pytest.importorskip("torch")
    from episodes.rollout import RolloutStorage

    storage = RolloutStorage("rl", 1, 1, (2,), (1,))
    storage.rewards += torch.zeros(())  # a filled 1 x 1 storage
    what = "envs" if generator.startswith("recurrent") else "transitions"
    with pytest.raises(ValueError, match=rf"num_mini_batches must be between 1 and .* {what}"):
        list(getattr(storage, generator)(parts, num_epochs=1))
