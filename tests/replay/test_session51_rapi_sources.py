"""``update_priorities(priorities, batch)``: a sampled batch knows the buffer that drew it.

Two buffers number their items from 0 alike, so one buffer's ``indices`` handed to another
change the wrong items without a word; a state restored by ``set_state`` may give an older
batch's indices to other steps. A prioritized buffer's batch is a ``ReplayBatch`` (the same
dict) carrying its buffer's token, and ``update_priorities`` given the batch refuses a batch it
did not draw (or drew before ``set_state``), leaving every priority as it was.
"""

from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from episodes.replay import PrioritizedEpisodeReplayBuffer

from ._episodes import episode


def _buffer(seed=0, capacity=1_000, ids=("a", "b")):
    buf = PrioritizedEpisodeReplayBuffer(capacity, seed=seed)
    buf.add([episode(id_, i, 6) for i, id_ in enumerate(ids)])
    return buf


def _priorities(buf):
    return buf.get_state()["prioritized"]["priorities"]


# ----------------------------------------------------------------------- refused batches
def _other_buffer(mine, batch):
    other = _buffer(seed=1)
    return other


def _after_foreign_state(mine, batch):
    mine.set_state(_buffer(seed=1, ids=("x", "y")).get_state())
    return mine


def _after_rollback(mine, batch):
    mine.set_state(mine.get_state())  # same contents: refused all the same (cheap to tell)
    return mine


def _after_load(mine, batch, tmp_path):
    mine.save(tmp_path / "save")
    return PrioritizedEpisodeReplayBuffer.load(tmp_path / "save")


REFUSED = [
    pytest.param(_other_buffer, "sampled from another buffer", id="another-buffer"),
    pytest.param(_after_foreign_state, "before a set_state", id="foreign-set-state"),
    pytest.param(_after_rollback, "before a set_state", id="rollback"),
]


@pytest.mark.parametrize(("target", "words"), REFUSED)
def test_a_batch_another_buffer_drew_is_refused_and_changes_nothing(target, words):
    mine = _buffer()
    batch = mine.sample(8)
    buf = target(mine, batch)
    before = _priorities(buf).copy()
    top = buf.max_priority
    with pytest.raises(ValueError, match=words):
        buf.update_priorities(np.full(8, 9.0), batch)
    assert np.array_equal(_priorities(buf), before) and buf.max_priority == top


def test_a_batch_drawn_before_a_load_is_refused(tmp_path):
    mine = _buffer()
    batch = mine.sample(4)
    loaded = _after_load(mine, batch, tmp_path)
    with pytest.raises(ValueError, match="after a load that kept item ids"):
        loaded.update_priorities(np.full(4, 9.0), batch)
    # the documented way across a load still works: the indices themselves
    loaded.update_priorities(np.full(4, 9.0), batch["indices"])
    assert loaded.get_priorities(batch["indices"]).tolist() == [9.0] * 4


@pytest.mark.parametrize(
    "given",
    [
        pytest.param(lambda b: dict(b), id="plain-dict"),
        pytest.param(lambda b: {k: np.concatenate([b[k], b[k]]) for k in b}, id="joined"),
        pytest.param(lambda b: {"indices": b["indices"]}, id="hand-made"),
    ],
)
def test_a_mapping_without_a_source_is_refused_naming_the_way_out(given):
    buf = _buffer()
    batch = buf.sample(4)
    before = _priorities(buf).copy()
    with pytest.raises(ValueError, match=r"carries no source: pass the item indices"):
        buf.update_priorities(np.full(4, 9.0), given(batch))
    assert np.array_equal(_priorities(buf), before)


# ------------------------------------------------------------------------ accepted batches
def test_the_batch_is_the_dict_it_was_with_its_source():
    buf = _buffer()
    batch = buf.sample(5, n_step=2, gamma=0.9, beta=0.4)
    assert isinstance(batch, dict) and type(batch).__name__ == "ReplayBatch"
    assert np.array_equal(batch.priority_items, batch["indices"])
    again = PrioritizedEpisodeReplayBuffer(1_000, seed=0)
    again.add([episode(id_, i, 6) for i, id_ in enumerate("ab")])
    plain = dict(again.sample(5, n_step=2, gamma=0.9, beta=0.4))
    assert plain.keys() == batch.keys()
    for key in plain:
        assert np.array_equal(plain[key], batch[key]), key


def test_an_older_batch_of_the_same_buffer_sets_its_own_items():
    buf = _buffer()
    old = buf.sample(3)
    new = buf.sample(3)
    prio = np.array([2.0, 3.0, 4.0])
    buf.update_priorities(prio, old)
    expected = dict(zip(old["indices"].tolist(), prio.tolist(), strict=True))  # last one wins
    assert buf.get_priorities(list(expected)).tolist() == list(expected.values())
    untouched = sorted(set(new["indices"].tolist()) - set(expected))
    assert buf.get_priorities(untouched).tolist() == [1.0] * len(untouched)


def test_the_last_batch_equals_updating_without_indices():
    one, two = _buffer(), _buffer()
    b1, b2 = one.sample(6), two.sample(6)
    td = np.linspace(0.5, 3.0, 6)
    one.update_priorities(td, b1)
    two.update_priorities(td)
    assert np.array_equal(_priorities(one), _priorities(two))
    assert np.array_equal(b1["indices"], b2["indices"]) and one.max_priority == two.max_priority


def test_a_sequence_batch_sets_its_starts():
    buf = _buffer()
    batch = buf.sample(4, batch_length_T=3, lookback=1)
    assert np.array_equal(batch.priority_items, batch["indices"][:, 1])
    td = np.array([5.0, 6.0, 7.0, 8.0])
    buf.update_priorities(td, batch)
    expected = dict(zip(batch["indices"][:, 1].tolist(), td.tolist(), strict=True))
    assert buf.get_priorities(list(expected)).tolist() == list(expected.values())


def test_items_evicted_since_are_skipped():
    buf = _buffer(capacity=12)
    batch = buf.sample(8)
    buf.add(episode("c", 2, 6))  # 18 > 12: "a" goes
    gone = set(batch["indices"].tolist()) - set(
        np.concatenate([buf.get_episode_indices(i) for i in buf.get_episode_ids()]).tolist()
    )
    buf.update_priorities(np.full(8, 7.0), batch)
    kept = sorted(set(batch["indices"].tolist()) - gone)
    assert buf.get_priorities(kept).tolist() == [7.0] * len(kept)


@pytest.mark.parametrize(
    "copied",
    [
        pytest.param(copy.deepcopy, id="deepcopy"),
        pytest.param(lambda b: pickle.loads(pickle.dumps(b)), id="pickle"),
    ],
)
def test_a_copied_batch_keeps_its_source(copied):
    buf = _buffer()
    batch = copied(buf.sample(4))
    assert type(batch).__name__ == "ReplayBatch"
    buf.update_priorities(np.full(4, 6.0), batch)
    assert buf.get_priorities(batch["indices"]).tolist() == [6.0] * 4


def test_a_tensor_batch_is_checked_too():
    pytest.importorskip("torch")
    mine, other = _buffer(), _buffer(seed=1)
    batch = mine.sample(4, device="cpu")
    with pytest.raises(ValueError, match="another buffer"):
        other.update_priorities(np.full(4, 9.0), batch)
    mine.update_priorities(np.full(4, 9.0), batch)
    assert mine.get_priorities(batch["indices"].numpy()).tolist() == [9.0] * 4


def test_episode_samples_stay_lists():
    buf = _buffer()
    assert type(buf.sample(2, sample_episodes=True)) is list


def test_plain_indices_of_another_buffer_are_still_taken():
    # Documented limit: indices alone carry no source, and a priority update with them is
    # taken as ever; the batch is what can be checked.
    mine, other = _buffer(), _buffer(seed=1)
    batch = mine.sample(4)
    other.update_priorities(np.full(4, 9.0), batch["indices"])
    assert other.get_priorities(batch["indices"]).tolist() == [9.0] * 4
