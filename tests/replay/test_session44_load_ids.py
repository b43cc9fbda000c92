"""A loaded buffer never gives a saved buffer's item id to another step; clearer index errors.

``load`` lays the saved rows out episode by episode. Ids that run on by one in that order are
kept (``replay.json``'s ``first_uid``); others are renumbered after every id the saved buffer
issued (``next_uid``; a save written before it: after its ``added_timesteps``), so a batch's
indices sampled before the save name their own step or none: ``update_priorities`` skips the
latter as it skips evicted items, ``get_transitions`` and ``get_priorities`` refuse them.
Before, the loaded items were ``0 .. N-1``, and an in-flight priority update after a restore
landed on other steps, silently.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.replay.saved_files import seal


def _chunk(id_: str, start: int, stop: int, done: bool = False) -> SingleAgentEpisode:
    base = 100 * (ord(id_[-1]) - ord("a"))
    return SingleAgentEpisode(
        id_,
        observations=[np.full(2, base + t, np.float32) for t in range(start, stop + 1)],
        actions=[t % 2 for t in range(start, stop)],
        rewards=[float(base + t) for t in range(start, stop)],
        terminated=done,
        t_started=start,
        len_lookback_buffer=0,
    )


def _interleaved(buf: EpisodeReplayBuffer, ids: str = "ab", t0: int = 0) -> None:
    """Two chunks of each episode, added as a vector env adds them (their ids interleave)."""
    buf.add([_chunk(i, t0, t0 + 3) for i in ids])
    buf.add([_chunk(i, t0 + 3, t0 + 6, done=True) for i in ids])


def _plain(buf: EpisodeReplayBuffer) -> None:
    _interleaved(buf)


def _evicted(buf: EpisodeReplayBuffer) -> None:
    _interleaved(buf)
    _interleaved(buf, "cd")  # capacity 20: a gives way, b's ids lie below the steps kept
    assert buf.get_evicted_ids() == ["a"]


def _one_by_one(buf: EpisodeReplayBuffer) -> None:
    """Whole episodes, one after another, the oldest evicted: ids that run on, kept."""
    for i in "abcd":
        buf.add(_chunk(i, 0, 6, done=True))
    assert buf.get_evicted_ids() == ["a"]


def _rolled_back(buf: EpisodeReplayBuffer) -> None:
    _interleaved(buf)
    state = buf.get_state()
    _interleaved(buf, "cd")
    buf.set_state(state)  # rollback: the ids of c and d stay issued
    _interleaved(buf, "ef")
    assert buf.get_counters()["added_timesteps"] < buf.get_state()["next_uid"]


def _loaded_before(buf: EpisodeReplayBuffer, tmp: Path) -> EpisodeReplayBuffer:
    """A buffer that was itself loaded, then given more steps."""
    _interleaved(buf)
    buf.save(tmp / "first")
    back = type(buf).load(tmp / "first")
    _interleaved(back, "cd")
    return back


def _as_v2_before_next_uid(path: Path) -> None:
    """A version 2 save as written before the item id fields were recorded (resealed)."""
    drop = ("next_uid", "first_uid", "crc32")
    _edit(path, lambda m: seal({k: v for k, v in m.items() if k not in drop}))


def _as_v1(path: Path) -> None:
    """A version 1 save: no checksums, no episodes record, no item id fields."""
    drop = ("next_uid", "first_uid", "crc32", "priorities_crc32", "episodes")
    _edit(path, lambda m: {**{k: v for k, v in m.items() if k not in drop}, "version": 1})


def _edit(path: Path, change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
    meta = json.loads((path / "replay.json").read_text())
    (path / "replay.json").write_text(json.dumps(change(meta)))


def _steps(buf: EpisodeReplayBuffer, indices: np.ndarray) -> list[tuple[Any, int]]:
    ids, ts = buf.episode_steps(indices)
    return list(zip(ids.tolist(), ts.tolist()))


def _all_indices(buf: EpisodeReplayBuffer) -> np.ndarray:
    return np.concatenate([buf.get_episode_indices(i) for i in buf.get_episode_ids()])


# name: (kind, build, format); saves without next_uid are judged by added_timesteps, which is
# every id issued only for a buffer never rolled back or loaded: those cases are left out.
CASES = {
    "uniform, interleaved chunks": (EpisodeReplayBuffer, _plain, None),
    "prioritized, interleaved chunks": (PrioritizedEpisodeReplayBuffer, _plain, None),
    "uniform, after eviction": (EpisodeReplayBuffer, _evicted, None),
    "prioritized, after eviction": (PrioritizedEpisodeReplayBuffer, _evicted, None),
    "uniform, whole episodes one by one (ids kept)": (EpisodeReplayBuffer, _one_by_one, None),
    "prioritized, whole episodes one by one (ids kept)": (
        PrioritizedEpisodeReplayBuffer,
        _one_by_one,
        None,
    ),
    "uniform, set_state rollback then adds": (EpisodeReplayBuffer, _rolled_back, None),
    "prioritized, set_state rollback then adds": (
        PrioritizedEpisodeReplayBuffer,
        _rolled_back,
        None,
    ),
    "uniform, loaded then added to": (EpisodeReplayBuffer, _loaded_before, None),
    "prioritized, loaded then added to": (PrioritizedEpisodeReplayBuffer, _loaded_before, None),
    "uniform, version 2 save without next_uid": (
        EpisodeReplayBuffer,
        _evicted,
        _as_v2_before_next_uid,
    ),
    "prioritized, version 2 save without next_uid": (
        PrioritizedEpisodeReplayBuffer,
        _evicted,
        _as_v2_before_next_uid,
    ),
    "uniform, version 1 save": (EpisodeReplayBuffer, _plain, _as_v1),
    "prioritized, version 1 save": (PrioritizedEpisodeReplayBuffer, _evicted, _as_v1),
    "uniform, version 1 save of episodes one by one": (EpisodeReplayBuffer, _one_by_one, _as_v1),
    "prioritized, version 2 save of episodes one by one": (
        PrioritizedEpisodeReplayBuffer,
        _one_by_one,
        _as_v2_before_next_uid,
    ),
}


def _built(kind: type, build: Callable[..., Any], tmp: Path) -> EpisodeReplayBuffer:
    buf = kind(20, seed=0)
    if build is _loaded_before:
        return _loaded_before(buf, tmp)
    build(buf)
    return buf


@pytest.mark.parametrize("name", list(CASES))
def test_indices_sampled_before_a_save_name_no_other_step_after_the_load(tmp_path, name):
    kind, build, old_format = CASES[name]
    buf = _built(kind, build, tmp_path)
    before = _all_indices(buf)  # every stored item: any batch's indices are among them
    steps = _steps(buf, before)
    if kind is PrioritizedEpisodeReplayBuffer:
        buf.update_priorities(np.arange(1.0, len(before) + 1), indices=before)
        priorities = dict(zip(steps, buf.get_priorities(before).tolist()))
    buf.save(tmp_path / "save")
    if old_format is not None:
        old_format(tmp_path / "save")
    back = type(buf).load(tmp_path / "save")
    assert back.get_episode_ids() == buf.get_episode_ids()
    assert sorted(_steps(back, _all_indices(back))) == sorted(steps)
    for index, step in zip(before.tolist(), steps):
        try:  # the same step, or none at all: never another
            assert _steps(back, np.array([index])) == [step], index
        except KeyError:
            with pytest.raises(KeyError):
                back.get_transitions([index])
    if kind is PrioritizedEpisodeReplayBuffer:  # the saved priorities sit on their steps
        after = _all_indices(back)
        assert dict(zip(_steps(back, after), back.get_priorities(after).tolist())) == priorities
        back.update_priorities(np.full(len(before), 1e6), indices=before)  # in flight
        for step, p in zip(_steps(back, after), back.get_priorities(after).tolist()):
            # Untouched, or updated through an index that still names this very step.
            assert p == priorities[step] or _names_itself(back, before, steps, step), step


def _names_itself(back: Any, before: np.ndarray, steps: list[Any], step: Any) -> bool:
    """Whether the pre-save index of ``step`` names it in ``back`` (the update was its own)."""
    index = before[steps.index(step)]
    try:
        return _steps(back, np.array([index])) == [step]
    except KeyError:
        return False


@pytest.mark.parametrize("kind", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
def test_an_id_names_one_step_across_reloads_and_adds(tmp_path, kind):
    buf = kind(100, seed=0)
    _interleaved(buf)
    named: dict[int, Any] = {}  # every id seen so far and the step it named
    for round_ in range(4):
        indices = _all_indices(buf)
        for index, step in zip(indices.tolist(), _steps(buf, indices)):
            assert named.setdefault(index, step) == step, (round_, index)
        buf.save(tmp_path / f"s{round_}")
        buf = kind.load(tmp_path / f"s{round_}")
        if round_ % 2 == 0:  # continue one episode and start another between saves
            buf.add([_chunk("c", round_, round_ + 2), _chunk(f"n{round_}", 0, 2)])
    assert buf.get_state()["next_uid"] > max(named)


@pytest.mark.parametrize(
    "value", [-1, True, 1.5, "7", None, 2**62], ids=lambda v: f"{type(v).__name__} {v!r}"
)
@pytest.mark.parametrize("key", ["next_uid", "first_uid"])
def test_an_item_id_field_that_is_no_item_id_is_refused_as_damage(tmp_path, value, key):
    buf = EpisodeReplayBuffer(20, seed=0)
    _one_by_one(buf)  # a save that records both
    buf.save(tmp_path / "save")
    _edit(tmp_path / "save", lambda m: {**m, key: value})
    with pytest.raises(ValueError, match=rf"damaged replay buffer \({key}: "):
        EpisodeReplayBuffer.load(tmp_path / "save")


def test_the_saved_next_uid_is_the_buffers(tmp_path):
    buf = EpisodeReplayBuffer(20, seed=0)
    _evicted(buf)
    buf.save(tmp_path / "save")
    meta = json.loads((tmp_path / "save" / "replay.json").read_text())
    assert meta["next_uid"] == buf.get_state()["next_uid"] == 24
    back = EpisodeReplayBuffer.load(tmp_path / "save")
    assert _all_indices(back).tolist() == list(range(24, 24 + back.get_num_timesteps()))


# ------------------------------------------------------------ a padded batch's indices, whole
def _padded() -> tuple[PrioritizedEpisodeReplayBuffer, dict[str, Any]]:
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0)
    buf.add(_chunk("a", 0, 4, done=True))
    return buf, buf.sample(3, batch_length_T=6, lookback=2, pad=True)


PADDED_CALLS = {
    "update_priorities": lambda buf, idx: buf.update_priorities(np.ones(idx.size), indices=idx),
    "get_priorities": lambda buf, idx: buf.get_priorities(idx),
}


@pytest.mark.parametrize("call", list(PADDED_CALLS))
def test_a_padded_sequence_batchs_indices_are_named_as_padding(call):
    buf, seq = _padded()
    before = buf.get_priorities(_all_indices(buf)).tolist()
    assert (seq["indices"] == -1).any()
    with pytest.raises(ValueError, match=r"-1 is a sequence batch's padding.*indices\[mask\]"):
        PADDED_CALLS[call](buf, seq["indices"].ravel())
    assert buf.get_priorities(_all_indices(buf)).tolist() == before  # nothing changed
    PADDED_CALLS[call](buf, seq["indices"][seq["mask"]])  # as the message says: taken
    with pytest.raises(ValueError, match=r"never issued \(use a batch's 'indices'\)"):
        PADDED_CALLS[call](buf, np.array([10**6]))  # no padding: the hint it had


def test_get_transitions_names_padded_indices_as_padding():
    buf, seq = _padded()
    with pytest.raises(KeyError, match="-1: a sequence batch's padding, where its mask is False"):
        buf.get_transitions(seq["indices"].ravel())
    with pytest.raises(KeyError) as refused:  # an evicted or unknown id: no padding named
        buf.get_transitions(np.array([10**6]))
    assert "padding" not in str(refused.value)
    assert len(buf.get_transitions(seq["indices"][seq["mask"]])["obs"]) == seq["mask"].sum()


# --------------------------------------------------------------- sample's unknown keywords
class _Mine(PrioritizedEpisodeReplayBuffer):
    pass


@pytest.mark.parametrize("kind", [PrioritizedEpisodeReplayBuffer, _Mine], ids=lambda k: k.__name__)
def test_an_unknown_sample_keyword_is_named_with_the_class_called(kind):
    buf = kind(100, seed=0)
    buf.add(_chunk("a", 0, 4, done=True))
    batch = buf.sample(2)
    with pytest.raises(TypeError, match=rf"^{kind.__name__}\.sample\(\) .*keyword .*'burn_in'"):
        buf.sample(2, burn_in=2)
    buf.update_priorities([3.0, 4.0])  # the last batch is still the one to update
    assert buf.get_priorities(batch["indices"][-1:]).tolist() == [4.0]


@pytest.mark.parametrize("kind", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("build", [_one_by_one, _interleaved], ids=["one by one", "interleaved"])
def test_ids_that_run_on_in_the_saved_order_are_kept_others_renumbered(tmp_path, kind, build):
    buf = kind(20, seed=0)
    build(buf)
    batch = buf.sample(6)
    buf.save(tmp_path / "save")
    back = kind.load(tmp_path / "save")
    kept = build is _one_by_one  # ids 6 .. 23 in the saved order: a load lays rows out so
    assert np.array_equal(_all_indices(back), _all_indices(buf)) == kept
    if kept:  # in-flight updates land on their steps, as without the restart
        assert _steps(back, batch["indices"]) == _steps(buf, batch["indices"])
        if kind is PrioritizedEpisodeReplayBuffer:
            back.update_priorities(np.arange(7.0, 13.0), indices=batch["indices"])
            buf.update_priorities(np.arange(7.0, 13.0), indices=batch["indices"])
            assert np.array_equal(back.get_priorities(_all_indices(back)),
                                  buf.get_priorities(_all_indices(buf)))  # fmt: skip
    else:
        assert _all_indices(back).min() >= buf.get_state()["next_uid"]
    back.add(_chunk("z", 0, 2))  # new steps: ids no buffer of the two has issued
    assert back.get_episode_indices("z").min() >= buf.get_state()["next_uid"]


@pytest.mark.parametrize("next_uid", [2**62, 2**63 - 1])
def test_a_state_takes_no_item_id_a_save_could_not_load(tmp_path, next_uid):
    # The state and the save share one bound: a set_state that took next_uid = 2**62 made a
    # buffer whose save its own load refused as damaged.
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_chunk("a", 0, 3, done=True))
    state = buf.get_state()
    state["next_uid"] = next_uid
    fresh = EpisodeReplayBuffer(100, seed=0)
    with pytest.raises(ValueError, match=r"below 2\*\*62"):
        fresh.set_state(state)
    assert fresh.get_num_timesteps() == 0
    state["next_uid"] = 2**62 - 1  # the largest taken: saved and loaded back
    fresh.set_state(state)
    fresh.save(tmp_path / "saved")
    back = EpisodeReplayBuffer.load(tmp_path / "saved")
    assert back.get_state()["next_uid"] == 2**62 - 1
    assert back.get_num_timesteps() == 3
