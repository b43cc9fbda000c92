"""Behaviour that hand-made mutants of ``episodes.replay.prioritized`` and
``episodes.replay.persistence`` showed no test pinned (session 46).

Each test fails with one mutant (named beside it) applied, and passes on the code as it is.
Everything goes through the public API: ``add``, ``sample``, ``update_priorities``,
``get_priorities``, ``max_priority``, ``get_state`` / ``set_state`` and ``save`` / ``load``.
Draw frequencies are judged by a fixed-seed chi-square test against ``p ** alpha / sum``, as
``tests/replay/test_distribution.py`` judges them; round trips are judged by drawing the same
batches (indices and weights) as the original with the generator state they restore. The
mutant names (P.. in ``prioritized``, S.. in ``persistence``) are those of the session's list.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from tests.replay._stats import chi_square_p


def _episode(id_: Any, n: int, first: float = 0.0) -> SingleAgentEpisode:
    """``n`` steps whose observation ``t`` is ``first + t``."""
    return SingleAgentEpisode(
        id_,
        observations=[first + t for t in range(n + 1)],
        actions=[0] * n,
        rewards=[1.0] * n,
        len_lookback_buffer=0,
    )


def _stored(buf: PrioritizedEpisodeReplayBuffer) -> np.ndarray:
    """Every stored item's index, oldest episode first."""
    return np.concatenate([buf.get_episode_indices(i) for i in buf.get_episode_ids()])


def _assert_drawn_by_priority(buf: PrioritizedEpisodeReplayBuffer, draws: int = 40_000) -> None:
    """Every stored item is drawn, each with probability ``p ** alpha / sum``."""
    items = np.sort(_stored(buf))
    p = buf.get_priorities(items) ** buf.alpha
    drawn = buf.sample(draws)["indices"]
    values, counts = np.unique(drawn, return_counts=True)
    assert values.tolist() == items.tolist()
    assert chi_square_p(counts, p / p.sum() * draws) > 1e-3


# ------------------------------------------------------------------ new steps' priorities
def test_priorities_outlive_the_growth_of_the_store():
    """P08 (the grown tree left empty): items stored before the store grew keep their mass."""
    buf = PrioritizedEpisodeReplayBuffer(1000, seed=0)
    buf.add(_episode("a", 10))
    buf.update_priorities(np.arange(1.0, 11.0), np.arange(10))
    buf.add(_episode("b", 100))  # past the first 64 rows: the store and the tree grow
    assert buf.get_priorities(np.arange(10)).tolist() == list(np.arange(1.0, 11.0))
    _assert_drawn_by_priority(buf)


@pytest.mark.parametrize(
    ("name", "weight", "stored"),
    [
        ("a weight below the floor is stored as the floor", 1e-300, 1e-12),
        ("a weight above it as given", 3.0, 3.0),
    ],
)
def test_add_weight_is_floored_and_applies_to_its_add_only(name, weight, stored):
    """P19 (no floor on add's weight)."""
    buf = PrioritizedEpisodeReplayBuffer(10, seed=0)
    buf.add(_episode("a", 2), weight=weight)
    buf.add(_episode("b", 2))
    assert buf.get_priorities([0, 1, 2, 3]).tolist() == [stored, stored, 1.0, 1.0]
    assert buf.max_priority == 1.0


@pytest.mark.parametrize(
    ("name", "stored", "new"),
    [
        ("two new steps at the weight overflow", 1.0, 2),
        ("one new step beside a stored one at the weight", 1e308, 1),
    ],
)
def test_an_add_weight_that_makes_the_sum_infinite_is_refused_before_storing(name, stored, new):
    """P14 (judged at max_priority, not at the weight), P15 (one step counted), P16 (the
    stored sum left out)."""
    buf = PrioritizedEpisodeReplayBuffer(10, seed=0)
    buf.add(_episode("a", 1), weight=stored)
    with pytest.raises(ValueError, match=r"at weight=1e\+308 would make the sum"):
        buf.add(_episode("b", new), weight=1e308)
    assert buf.get_episode_ids() == ["a"]
    assert buf.get_priorities([0]).tolist() == [stored]
    assert buf.sample(20)["indices"].tolist() == [0] * 20  # only "a" is drawn


# ------------------------------------------------------------------------ max_priority
def test_zero_priorities_raise_max_priority_to_the_floor():
    """P49: the floor is the largest value stored, so it counts toward max_priority; P45 (a 0
    refused), P48 (a 0 stored unfloored, then refused as a leaf of 0)."""
    buf = PrioritizedEpisodeReplayBuffer(10, seed=0)
    buf.add(_episode("a", 2))
    buf.max_priority = 1e-13
    buf.update_priorities([0.0, 0.0], [0, 1])
    assert buf.max_priority == 1e-12
    buf.add(_episode("b", 1))
    assert buf.get_priorities([0, 1, 2]).tolist() == [1e-12, 1e-12, 1e-12]


@pytest.mark.parametrize("form", ["the last sample's", "given indices"])
def test_priorities_of_items_evicted_since_sampled_do_not_count(form):
    """P53: a skipped (evicted) item's priority does not raise max_priority either."""
    buf = PrioritizedEpisodeReplayBuffer(4, seed=0)
    buf.add(_episode("a", 3))
    batch = buf.sample(2)
    buf.add(_episode("b", 3))  # evicts "a", the items sampled
    assert buf.get_episode_ids() == ["b"]
    if form == "given indices":
        buf.update_priorities([50.0, 60.0], batch["indices"])
    else:
        buf.update_priorities([50.0, 60.0])
    assert buf.max_priority == 1.0
    assert buf.get_priorities([3, 4, 5]).tolist() == [1.0, 1.0, 1.0]


# ------------------------------------------------------------------ state and save round trips
def _spread(alpha: float) -> PrioritizedEpisodeReplayBuffer:
    buf = PrioritizedEpisodeReplayBuffer(100, batch_size_B=5, alpha=alpha, seed=0)
    buf.add([_episode("a", 4), _episode("b", 4, 10.0)])
    buf.update_priorities([1.0, 4.0, 9.0, 16.0, 25.0, 36.0, 49.0, 64.0], np.arange(8))
    buf.max_priority = 70.0
    return buf


def _round_trip(buf: PrioritizedEpisodeReplayBuffer, how: str, tmp_path: Path) -> Any:
    if how == "set_state":
        copy = PrioritizedEpisodeReplayBuffer(5, alpha=1.0)
        copy.set_state(buf.get_state())
        return copy
    buf.save(tmp_path / "saved")
    return PrioritizedEpisodeReplayBuffer.load(tmp_path / "saved")


@pytest.mark.parametrize("alpha", [0.5, 1.0, 2.0])
@pytest.mark.parametrize("how", ["set_state", "save"])
def test_a_round_trip_draws_and_weighs_as_the_original(tmp_path, how, alpha):
    """P66 (the state's leaves without alpha), P79 (a load's leaves without alpha), S06 (the
    default batch size saved)."""
    buf = _spread(alpha)
    copy = _round_trip(buf, how, tmp_path)
    assert (copy.alpha, copy.max_priority, copy.batch_size_B) == (alpha, 70.0, 5)
    want, got = buf.sample(64, beta=1.0), copy.sample(64, beta=1.0)
    assert got["indices"].tolist() == want["indices"].tolist()
    assert got["weights"].tolist() == want["weights"].tolist()
    assert len(copy.sample()["indices"]) == 5
    copy.add(_episode("c", 1))  # new steps: the restored max_priority
    assert copy.get_priorities(copy.get_episode_indices("c")).tolist() == [70.0]
    _assert_drawn_by_priority(copy)


def test_a_uniform_state_resets_max_priority():
    """P72: a uniform buffer's state gives priority 1 everywhere and max_priority 1."""
    uniform = EpisodeReplayBuffer(10)
    uniform.add(_episode("a", 2))
    buf = PrioritizedEpisodeReplayBuffer(10)
    buf.max_priority = 5.0
    buf.set_state(uniform.get_state())
    assert buf.max_priority == 1.0
    buf.add(_episode("b", 1))
    assert buf.get_priorities([0, 1, 2]).tolist() == [1.0, 1.0, 1.0]


@pytest.mark.parametrize(
    ("name", "weight"),
    [
        ("zero", 0.0),  # P18
        ("negative", -1.0),
        ("NaN", float("nan")),
        ("infinite", float("inf")),
        ("a numeric string", "2.0"),  # P91
        ("a bool", True),
    ],
)
def test_a_bad_add_weight_is_refused_and_stores_nothing(name, weight):
    """P18 (a weight of 0 taken, as the floor), P91 (a string weight taken by float())."""
    buf = PrioritizedEpisodeReplayBuffer(10, seed=0)
    buf.add(_episode("a", 1))
    with pytest.raises(ValueError, match="weight must be a finite priority > 0 or None"):
        buf.add(_episode("b", 1), weight=weight)
    assert buf.get_episode_ids() == ["a"]
    assert (buf.get_num_timesteps(), buf.max_priority) == (1, 1.0)


# ------------------------------------------------------------------ evictions and compactions
def test_priorities_set_once_survive_later_compactions():
    """P25 (a compaction's priorities left in the old slots): set once, read after many adds.

    Forty 5-step episodes pass through a 20-step buffer, each given its priorities when added
    and never again, so the store compacts its rows several times under them.
    """
    buf = PrioritizedEpisodeReplayBuffer(20, alpha=0.5, seed=1)
    for i in range(40):
        buf.add(_episode(f"e{i}", 5))
        uids = buf.get_episode_indices(f"e{i}")
        buf.update_priorities(1.0 + uids % 7, uids)
        stored = _stored(buf)
        assert buf.get_priorities(stored).tolist() == (1.0 + stored % 7).tolist()
    _assert_drawn_by_priority(buf)


# ------------------------------------------------------------------------------ weights
@pytest.mark.parametrize("alpha", [1.0, 0.5])
@pytest.mark.parametrize("beta", [0.4, 1.0])
def test_weights_are_normalized_by_the_smallest_stored_priority(alpha, beta):
    """P34 (normalized by the batch's smallest priority): the PER paper's max over the buffer.

    The item of the smallest priority is rarely drawn; the batches that miss it still weigh
    each item ``(p_i / p_min) ** (-alpha * beta)``, ``p_min`` over every stored item.
    """
    buf = PrioritizedEpisodeReplayBuffer(100, alpha=alpha, seed=0)
    buf.add(_episode("a", 8))
    prio = np.array([0.01, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
    buf.update_priorities(prio, np.arange(8))
    missed = 0
    for _ in range(5):
        batch = buf.sample(3, beta=beta)
        drawn = batch["indices"]
        missed += 0 not in drawn.tolist()
        want = (prio[drawn] / prio.min()) ** (-alpha * beta)
        np.testing.assert_allclose(batch["weights"], want, rtol=1e-6)
    assert missed  # batches without the smallest priority were weighed


# ------------------------------------------------------------------- update_priorities errors
@pytest.mark.parametrize(
    ("name", "samples", "sequences"),
    [
        ("transitions after sequences", [{"batch_length_T": 2}, {}], False),
        ("sequences after transitions", [{}, {"batch_length_T": 2}], True),
    ],
)
def test_a_wrong_length_names_sequences_only_after_a_sequence_sample(name, samples, sequences):
    """P35 (the flag of an earlier sequence sample kept by a transition sample)."""
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buf.add(_episode("a", 6))
    for kwargs in samples:
        buf.sample(3, **kwargs)
    with pytest.raises(ValueError, match="must be 1-d and equally long") as caught:
        buf.update_priorities([1.0, 2.0])
    assert ("the last sample drew sequences" in str(caught.value)) is sequences


@pytest.mark.parametrize("module_id", ["default_policy", b"default_policy"])
def test_a_module_id_in_place_of_indices_is_named_as_such(module_id):
    """P39: RLlib's ``update_priorities(priorities, module_id)`` call form is explained."""
    buf = PrioritizedEpisodeReplayBuffer(10, seed=0)
    buf.add(_episode("a", 2))
    buf.sample(1)
    with pytest.raises(ValueError, match=r"takes a module id there; this buffer has none"):
        buf.update_priorities([3.0], module_id)
    assert buf.get_priorities([0, 1]).tolist() == [1.0, 1.0]
    buf.update_priorities([3.0], module_id=module_id)  # as a keyword: ignored
    assert buf.max_priority == 3.0


def test_the_last_sample_is_updated_by_item_after_rows_moved():
    """P36 (the last sample remembered by slot, not by item index).

    A 20-step buffer has seen 200 steps, so item indices and rows differ; an add after the
    sample evicts an episode, so the update finds the items by their index.
    """
    buf = PrioritizedEpisodeReplayBuffer(20, seed=2)
    for i in range(40):
        buf.add(_episode(f"e{i}", 5))
    batch = buf.sample(6)
    buf.add(_episode("late", 5))
    given = np.arange(2.0, 8.0)
    buf.update_priorities(given)
    want = dict(zip(batch["indices"].tolist(), given.tolist()))  # a repeat keeps its last
    stored = set(_stored(buf).tolist())
    kept = {uid: p for uid, p in want.items() if uid in stored}
    assert kept and buf.get_priorities(list(kept)).tolist() == list(kept.values())
    rest = sorted(stored - set(kept))
    assert buf.get_priorities(rest).tolist() == [1.0] * len(rest)


@pytest.mark.parametrize("dtype", [float, bool, object, str])
def test_an_empty_update_is_a_no_op_whatever_its_dtype(dtype):
    """P40 (an empty array's dtype judged), P44 (an empty update reaching max() of nothing)."""
    buf = PrioritizedEpisodeReplayBuffer(10, seed=0)
    buf.add(_episode("a", 2))
    buf.sample(2)
    buf.update_priorities(np.zeros(0, dtype), np.zeros(0, np.int64))
    assert buf.get_priorities([0, 1]).tolist() == [1.0, 1.0]
    assert buf.max_priority == 1.0


@pytest.mark.parametrize(
    ("name", "priorities", "indices", "error"),
    [
        (
            "a bool among floats",
            [2.0, False],
            [0, 1],
            "priorities must be real numbers, got dtype bool",
        ),  # P41
        ("a bool first", [True, 2.0], [0, 1], "priorities must be real numbers, got dtype bool"),
        (
            "2-d indices",
            [2.0, 3.0],
            [[0], [1]],
            r"and indices \(shape \(2, 1\)\) must be 1-d",
        ),  # P43
        ("2-d priorities", [[2.0], [3.0]], [0, 1], r"priorities \(shape \(2, 1\)\)"),
        (
            "an infinite priority",
            [2.0, np.inf],
            [0, 1],
            r"must be finite and >= 0, got \[inf\]",
        ),  # P46
        ("a negative one", [-1.0, 2.0], [0, 1], r"must be finite and >= 0, got \[-1.0\]"),
        ("a NaN", [np.nan, 2.0], [0, 1], r"must be finite and >= 0, got \[nan\]"),
    ],
)
def test_malformed_updates_are_refused_and_change_nothing(name, priorities, indices, error):
    """P41 (a bool hidden in a float list taken as 0 or 1), P43 (2-d indices taken), P46 (an
    infinite priority refused only by its power's check, under another message)."""
    buf = PrioritizedEpisodeReplayBuffer(10, seed=0)
    buf.add(_episode("a", 2))
    with pytest.raises(ValueError, match=error):
        buf.update_priorities(priorities, indices)
    assert buf.get_priorities([0, 1]).tolist() == [1.0, 1.0]
    assert buf.max_priority == 1.0


# ------------------------------------------------------------------------------ save and load
def _saved(tmp_path: Path, prioritized: bool = True) -> Path:
    cls = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
    buf = cls(100, seed=0)
    buf.add([_episode("a", 2), _episode("b", 2, 10.0)])
    if isinstance(buf, PrioritizedEpisodeReplayBuffer):
        buf.update_priorities([2.0, 3.0, 4.0, 5.0], np.arange(4))
    buf.save(tmp_path / "saved")
    return tmp_path / "saved"


def _rewrite(path: Path, change: dict[str, Any], legacy: bool = False) -> None:
    """Sets fields of ``replay.json``; ``legacy``: as a version 1 save, without checksums."""
    meta = json.loads((path / "replay.json").read_text())
    meta.update(change)
    if legacy:
        meta.pop("crc32", None)
        meta.pop("priorities_crc32", None)
        meta["version"] = 1
    (path / "replay.json").write_text(json.dumps(meta))


@pytest.mark.parametrize("prioritized", [False, True])
def test_a_save_onto_a_dangling_symlink_is_refused(tmp_path, prioritized):
    """S01 (``exists``, which follows the link, in place of ``lexists``)."""
    cls = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
    buf = cls(10, seed=0)
    buf.add(_episode("a", 2))
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "nowhere")
    with pytest.raises(FileExistsError, match="exists; save a buffer to a new directory"):
        buf.save(link)
    assert link.is_symlink() and not (tmp_path / "nowhere").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link"]  # no staged directory left


@pytest.mark.parametrize(
    ("name", "alpha", "priority", "error"),
    [
        (
            "p ** alpha overflows",
            2.0,
            1e200,
            r"priorities \[1e\+200\] to the power alpha=2.0 are 0 or",
        ),
        (
            "p ** alpha underflows",
            30.0,
            1e-11,
            r"priorities \[1e-11\] to the power alpha=30.0 are 0 or",
        ),
    ],
)
def test_a_priority_whose_power_the_tree_cannot_hold_is_named(name, alpha, priority, error):
    """P56 (an infinite leaf left to the sum's check, which names no priority)."""
    buf = PrioritizedEpisodeReplayBuffer(10, alpha=alpha, seed=0)
    buf.add(_episode("a", 2))
    with pytest.raises(ValueError, match=error):
        buf.update_priorities([2.0, priority], [0, 1])
    assert buf.get_priorities([0, 1]).tolist() == [1.0, 1.0]


@pytest.mark.parametrize("bit_generator", [np.random.MT19937, np.random.Philox, np.random.SFC64])
@pytest.mark.parametrize("prioritized", [False, True])
def test_a_save_restores_a_generator_whose_state_holds_arrays(tmp_path, bit_generator, prioritized):
    """S07 (the generator state written unconverted: its arrays are no JSON)."""
    cls = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
    buf = cls(100, seed=np.random.Generator(bit_generator(3)))
    buf.add([_episode("a", 4), _episode("b", 4, 10.0)])
    buf.save(tmp_path / "saved")
    loaded = cls.load(tmp_path / "saved")
    assert loaded.sample(32)["indices"].tolist() == buf.sample(32)["indices"].tolist()


def _unstorable(prioritized: bool) -> EpisodeReplayBuffer:
    """A buffer whose save fails once it has begun writing: an info the format cannot hold."""
    cls = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
    buf = cls(10, seed=0)
    buf.add(
        SingleAgentEpisode(
            "a",
            observations=[0.0, 1.0],
            actions=[0],
            rewards=[1.0],
            infos=[{}, {"f": object()}],
            len_lookback_buffer=0,
        )
    )
    return buf


@pytest.mark.parametrize("prioritized", [False, True])
def test_a_failed_save_leaves_nothing_behind(tmp_path, prioritized):
    """S15 (the staged directory left), S16 (the parents the save made left)."""
    from episodes.io import UnstorableValueError

    with pytest.raises(UnstorableValueError, match=r"stored episode 0 of 1.*infos\[1\]\['f'\]"):
        _unstorable(prioritized).save(tmp_path / "new" / "deeper" / "saved")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("code", ["ENOTEMPTY", "EEXIST"])
def test_a_path_taken_between_the_check_and_the_rename_is_refused(tmp_path, monkeypatch, code):
    """S13 (only ENOTEMPTY taken as the path being taken): POSIX lets rename() give EEXIST."""
    target = tmp_path / "saved"
    rename = os.replace

    def taken(src: Any, dst: Any) -> None:
        if Path(dst) == target:  # another writer got there first
            target.mkdir()
            (target / "theirs").write_text("kept")
            if code == "EEXIST":
                raise OSError(errno.EEXIST, "File exists", str(dst))
        rename(src, dst)

    buf = PrioritizedEpisodeReplayBuffer(10, seed=0)
    buf.add(_episode("a", 2))
    monkeypatch.setattr(os, "replace", taken)
    with pytest.raises(FileExistsError, match="exists; save a buffer to a new directory"):
        buf.save(target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["saved"]  # nothing staged is left
    assert [p.name for p in target.iterdir()] == ["theirs"]


DAMAGED = {
    # name: (fields set, written as a version 1 save, the refusal)
    "a bool capacity": ({"capacity": True}, True, r"\(capacity: True\)"),  # S45
    "a bool batch size": ({"batch_size_B": False}, True, r"\(batch_size_B: False\)"),
    "a bool alpha": ({"alpha": True}, True, r"\(alpha: True\)"),
    "a CRC-32 past 32 bits": ({"crc32": 1 << 32}, False, r"4294967296 is no CRC-32"),  # S46
    "a negative CRC-32": ({"priorities_crc32": -1}, False, r"\(priorities_crc32: -1 is no CRC"),
    "no CRC-32 in version 2": ({"crc32": None}, False, r"\(crc32: None\)"),  # S59
    "an unknown kind": ({"kind": "ranked"}, True, r"\(unknown kind 'ranked'\)"),  # S47
    "an unknown field": ({"beta": 0.4}, True, r"\(unknown fields \['beta'\]\)"),  # S48
    "version True": ({"version": True}, False, "unsupported replay buffer version True"),  # S26
    "version 1.0": ({"version": 1.0}, False, r"unsupported replay buffer version 1\.0"),
    "version 3": ({"version": 3}, False, "unsupported replay buffer version 3"),
}


@pytest.mark.parametrize("name", list(DAMAGED))
def test_a_damaged_replay_json_is_refused_by_the_check_that_names_it(tmp_path, name):
    """S26 (a bool version), S45 (bools as ints), S46 (CRC-32 range), S47, S48, S59."""
    change, legacy, refusal = DAMAGED[name]
    path = _saved(tmp_path)
    _rewrite(path, change, legacy)
    with pytest.raises(ValueError, match=refusal):
        EpisodeReplayBuffer.load(path)


@pytest.mark.parametrize(
    ("name", "change", "alpha", "max_priority"),
    [
        ("int alpha and max_priority", {"alpha": 1, "max_priority": 6}, 1.0, 6.0),  # S43
        ("float ones", {"alpha": 0.5, "max_priority": 6.5}, 0.5, 6.5),
    ],
)
def test_a_version_1_save_with_int_settings_loads(tmp_path, name, change, alpha, max_priority):
    """S43 (only floats taken): JSON written by hand or by another tool may hold ints."""
    path = _saved(tmp_path)
    _rewrite(path, change, legacy=True)
    loaded = EpisodeReplayBuffer.load(path)
    assert isinstance(loaded, PrioritizedEpisodeReplayBuffer)
    assert (loaded.alpha, loaded.max_priority) == (alpha, max_priority)
    assert loaded.get_priorities(np.arange(4)).tolist() == [2.0, 3.0, 4.0, 5.0]


def test_get_priorities_of_an_evicted_item_is_a_key_error():
    """P61 (an evicted item's stale priority returned)."""
    buf = PrioritizedEpisodeReplayBuffer(4, seed=0)
    buf.add(_episode("a", 3))
    buf.update_priorities([5.0, 6.0, 7.0], [0, 1, 2])
    buf.add(_episode("b", 3))  # evicts "a"
    with pytest.raises(KeyError, match="no longer stored"):
        buf.get_priorities([0])
    with pytest.raises(KeyError, match="no longer stored"):
        buf.get_priorities([3, 2])
    assert buf.get_priorities([3, 4, 5]).tolist() == [7.0, 7.0, 7.0]  # max_priority then


@pytest.mark.parametrize("prioritized", [False, True])
def test_a_version_1_save_gives_its_tuple_evicted_ids_back_as_tuples(tmp_path, prioritized):
    """S24, S36, S63 (a version 1 save's evicted ids, raw JSON lists, left lists)."""
    cls = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
    buf = cls(3, seed=0)
    buf.add(_episode(("x", (1, "y")), 2))
    buf.add(_episode("b", 2))  # evicts the tuple id
    assert buf.get_evicted_ids() == [("x", (1, "y"))]
    buf.save(tmp_path / "saved")
    _rewrite(tmp_path / "saved", {"evicted": [["x", [1, "y"]]]}, legacy=True)
    loaded = EpisodeReplayBuffer.load(tmp_path / "saved")
    assert loaded.get_evicted_ids() == [("x", (1, "y"))]
    with pytest.raises(ValueError, match="evicted"):  # its chunks stay refused
        loaded.add(_episode(("x", (1, "y")), 1))


@pytest.mark.parametrize(
    ("name", "ids", "place"),
    [
        ("a stored NaN id", [float("nan")], "stored episode 0 of 1"),
        ("a NaN inside a tuple id", ["a", ("t", float("nan"))], "stored episode 1 of 2"),
    ],
)
def test_a_nan_id_is_refused_by_save_before_writing(tmp_path, name, ids, place):
    """S23 (NaN ids written: the dataset reads every NaN back as one id)."""
    from episodes.io import UnstorableValueError

    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buf.add([_episode(id_, 2) for id_ in ids])
    with pytest.raises(UnstorableValueError, match=rf"\({place}, oldest first\).*holds a NaN"):
        buf.save(tmp_path / "saved")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("how", ["set_state", "save"])
def test_a_round_trip_after_evictions_keeps_each_items_priority(tmp_path, how):
    """P65 (the state's priorities taken over every row, the evicted ones too)."""
    buf = PrioritizedEpisodeReplayBuffer(10, alpha=0.5, seed=0)
    for i in range(4):
        buf.add(_episode(f"e{i}", 4))
        uids = buf.get_episode_indices(f"e{i}")
        buf.update_priorities(2.0 + uids, uids)
    assert buf.get_evicted_ids() == ["e0", "e1"]
    copy = _round_trip(buf, how, tmp_path)
    stored = _stored(buf)
    assert copy.get_priorities(stored).tolist() == (2.0 + stored).tolist()
    want, got = buf.sample(64, beta=1.0), copy.sample(64, beta=1.0)
    assert got["indices"].tolist() == want["indices"].tolist()
    assert got["weights"].tolist() == want["weights"].tolist()


class _MyUniform(EpisodeReplayBuffer):
    pass


class _MyPrioritized(PrioritizedEpisodeReplayBuffer):
    pass


@pytest.mark.parametrize(
    ("make", "prioritized", "refusal"),
    [
        (_MyUniform, True, "holds a prioritized replay buffer: _MyUniform is not a Prioritized"),
        (_MyPrioritized, False, "holds a uniform replay buffer: _MyPrioritized is a Prioritized"),
    ],
)
def test_a_subclass_of_the_other_kind_cannot_load_a_save(tmp_path, make, prioritized, refusal):
    """S27 (the kind check skipped: a prioritized save loaded as a uniform buffer)."""
    path = _saved(tmp_path, prioritized)
    with pytest.raises(ValueError, match=refusal):
        make.load(path)
    back = EpisodeReplayBuffer.load(path)  # the saved kind
    assert isinstance(back, PrioritizedEpisodeReplayBuffer) is prioritized


@pytest.mark.parametrize("value", [4, np.float32(2.5), np.int64(3)])
def test_max_priority_set_as_any_real_reads_back_as_a_float(value):
    """P06 (the value kept as given: an int or a numpy scalar read back)."""
    buf = PrioritizedEpisodeReplayBuffer(10, seed=0)
    buf.max_priority = value
    assert type(buf.max_priority) is float and buf.max_priority == float(value)
    assert type(buf.get_state()["prioritized"]["max_priority"]) is float


@pytest.mark.parametrize("seed", ["bad", -1])
def test_a_bad_seed_given_to_load_is_the_callers_error_not_damage(tmp_path, seed):
    """S30 (the seed judged by the constructor: reported as a damaged save)."""
    path = _saved(tmp_path)
    with pytest.raises(ValueError, match="^seed must be") as caught:
        EpisodeReplayBuffer.load(path, seed=seed)
    assert "damaged" not in str(caught.value)


class _OnlyCapacity(EpisodeReplayBuffer):
    def __init__(self, capacity: int) -> None:
        super().__init__(capacity)


def test_a_subclass_whose_constructor_takes_other_arguments_is_told_so(tmp_path):
    """S32 (its TypeError reported as a damaged save)."""
    path = _saved(tmp_path, prioritized=False)
    with pytest.raises(TypeError, match=r"_OnlyCapacity\.load calls _OnlyCapacity\(capacity, "):
        _OnlyCapacity.load(path)


@pytest.mark.parametrize("prioritized", [False, True])
def test_another_saves_episodes_directory_is_refused(tmp_path, prioritized):
    """S35 (the ``episodes`` record unchecked): same-sized episodes of another save load."""
    path = _saved(tmp_path / "one", prioritized)
    cls = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
    other = cls(100, seed=0)
    other.add([_episode("c", 2), _episode("d", 2, 10.0)])
    other.save(tmp_path / "two")
    shutil.rmtree(path / "episodes")
    shutil.copytree(tmp_path / "two" / "episodes", path / "episodes")
    with pytest.raises(ValueError, match="damaged replay buffer"):
        EpisodeReplayBuffer.load(path)
