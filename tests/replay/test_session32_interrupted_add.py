"""An ``add`` interrupted inside (``MemoryError``, ``KeyboardInterrupt``) changes nothing.

A hunt raised exceptions at the replay buffer's allocation points. A ``KeyboardInterrupt``
while a compaction moved the columns left observations of one step beside the actions and
rewards of another (the links were updated only at the end, the table after), and ``save``
kept that. A ``MemoryError`` in the write phase (columns made on the first add, the sum tree
grown after the steps were stored) left phantom episodes whose ids were then refused, states
that raised ``IndexError``, and episodes stored but never drawn. Every fault point below is
hit at each of its calls in turn: the buffer must then equal what it was before the add (or,
where the fault hit the compaction after the add was done, what the add made), sample
consistent transitions, save and restore, and take the add again to end where a buffer that
never failed ends.
"""

from __future__ import annotations

import contextlib
import copy
import signal
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import episodes.replay.prioritized as prioritized_module
import episodes.replay.store as store_module
import episodes.replay.table as table_module
from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.replay.columns import Column
from episodes.replay.store import StepStore
from episodes.replay.table import EpisodeTable

CLASSES = [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer]

# (owner, attribute): where the add allocates, or moves rows.
POINTS: list[tuple[Any, str]] = [
    (store_module, "move_to_front"),  # a compaction's row moves, one call per column
    (store_module, "Column"),  # the data columns, made on the first add
    (store_module, "_resized"),  # the store's growth: links, flags, rewards, infos
    (Column, "resize"),  # the store's growth: data columns
    (StepStore, "compact"),
    (table_module, "Column"),  # the table's latest observations, made on the first add
    (EpisodeTable, "_grow"),
    (prioritized_module, "SumTree"),  # the priorities' growth and their remap
]


def _episode(k: int, length: int) -> SingleAgentEpisode:
    # obs [k, t], action t, reward k: a transition that mixes two steps shows.
    return SingleAgentEpisode(
        f"e{k}",
        observations=[np.array([k, t], np.float32) for t in range(length + 1)],
        actions=list(range(length)),
        rewards=[float(k)] * length,
        terminated=True,
        len_lookback_buffer=0,
    )


# name: (capacity, prefill adds, the add that is interrupted)
SCENARIOS: dict[str, tuple[int, list[list[tuple[int, int]]], list[tuple[int, int]]]] = {
    # evicts and compacts before writing: the hunt's Ctrl-C case
    "compacting": (1000, [[(k, 100)] for k in range(30)], [(k, 100) for k in range(30, 36)]),
    "first add": (100, [], [(1, 5), (2, 4)]),  # columns, table and tree made
    "growing": (10**5, [[(0, 50)]], [(k, 20) for k in range(1, 21)]),  # store, table, tree grow
    # a 300-step episode evicted by this add: the compaction after the writes
    "compacting after": (100, [[(0, 300)]], [(1, 50), (2, 50)]),
}


class _Faults:
    """Wraps the fault points; the ``at``-th call of any of them raises ``error``."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, error: type[BaseException]):
        self.calls, self.at, self.error, self.hit = 0, 0, error, set()
        for owner, name in POINTS:
            monkeypatch.setattr(owner, name, self._wrap(getattr(owner, name), name))

    def _wrap(self, real: Callable[..., Any], name: str) -> Callable[..., Any]:
        def wrapped(*args: Any, **kwargs: Any) -> Any:
            self.calls += 1
            self.hit.add(name)
            if self.calls == self.at:
                raise self.error(f"injected at call {self.at} ({name})")
            return real(*args, **kwargs)

        return wrapped


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return np.array_equal(np.asarray(a), np.asarray(b))
    return bool(a == b)


def _logical(buffer: EpisodeReplayBuffer) -> dict[str, Any]:
    state = buffer.get_state()
    del state["layout"]  # which slots the rows sit in: a compaction changes it, nothing else
    return state


def _consistent(buffer: EpisodeReplayBuffer) -> None:
    buffer = copy.copy(buffer)  # a copy of its arrays: sampling leaves the buffer as it is
    restored = type(buffer)(buffer.capacity)
    restored.set_state(buffer.get_state())  # what save writes
    assert _same(_logical(restored), _logical(buffer))
    if not len(buffer):
        return
    batch = buffer.sample(500, n_step=1)
    assert np.array_equal(batch["obs"][:, 0], batch["rewards"])
    assert np.array_equal(batch["obs"][:, 1], batch["actions"])
    assert np.array_equal(batch["next_obs"][:, 1], batch["actions"] + 1)
    for episode in buffer.sample(8, sample_episodes=True):
        k = int(episode.id_[1:])
        assert np.array_equal(episode.get_rewards(), np.full(len(episode), float(k)))


def _build(cls: type, scenario: str) -> tuple[EpisodeReplayBuffer, list[SingleAgentEpisode]]:
    capacity, prefill, batch = SCENARIOS[scenario]
    buffer = cls(capacity, seed=0)
    for add in prefill:
        buffer.add([_episode(k, n) for k, n in add])
    return buffer, [_episode(k, n) for k, n in batch]


@pytest.mark.parametrize("error", [MemoryError, KeyboardInterrupt])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
@pytest.mark.parametrize("cls", CLASSES)
def test_an_add_interrupted_at_any_fault_point_changes_nothing(cls, scenario, error, monkeypatch):
    reference, batch = _build(cls, scenario)
    reference.add(batch)
    after = _logical(reference)
    expected = reference.sample(64, n_step=3)
    faults = _Faults(monkeypatch, error)
    failed = 0
    while True:
        buffer, batch = _build(cls, scenario)
        before = _logical(buffer)
        faults.calls, faults.at = 0, failed + 1
        try:
            buffer.add(batch)
        except error:
            failed += 1
        else:
            if faults.calls >= faults.at:  # swallowed: the housekeeping compaction after the writes
                assert error is MemoryError and _same(_logical(buffer), after)
                _consistent(buffer)
                failed += 1
                continue
            break  # every call was faulted once: done
        state = _logical(buffer)
        undone = _same(state, before)
        assert undone or _same(state, after), f"fault {failed}: neither before nor after"
        _consistent(buffer)
        if undone:
            faults.at = 0
            buffer.add(batch)
        assert _same(_logical(buffer), after)
        if _same(buffer.get_state()["layout"], reference.get_state()["layout"]):
            assert _same(buffer.sample(64, n_step=3), expected)
        _consistent(buffer)
    assert failed >= 2
    assert faults.hit >= _EXERCISED[scenario], faults.hit
    if cls is PrioritizedEpisodeReplayBuffer and scenario != "compacting after":
        assert "SumTree" in faults.hit


_EXERCISED = {
    "compacting": {"move_to_front", "compact"},
    "first add": {"Column", "_resized", "_grow"},
    "growing": {"_resized", "resize", "_grow"},
    "compacting after": {"move_to_front", "compact"},
}


def test_the_hunts_interrupted_compaction_mixes_no_steps(monkeypatch):
    buffer = EpisodeReplayBuffer(capacity=1000, seed=0)
    for k in range(30):
        buffer.add(_episode(k, 100))
    real, calls = store_module.move_to_front, [0]

    def interrupted(*args: Any) -> None:
        calls[0] += 1
        if calls[0] == 2:
            raise KeyboardInterrupt
        real(*args)

    monkeypatch.setattr(store_module, "move_to_front", interrupted)
    with pytest.raises(KeyboardInterrupt):
        for k in range(30, 60):
            buffer.add(_episode(k, 100))
    monkeypatch.undo()
    assert calls[0] >= 2
    _consistent(buffer)
    for k in range(60, 70):
        buffer.add(_episode(k, 100))
    _consistent(buffer)


@pytest.mark.parametrize("point", ["append_many", "kill"])
@pytest.mark.parametrize("scenario", ["compacting", "first add"])
@pytest.mark.parametrize("cls", CLASSES)
def test_a_ctrl_c_while_an_add_writes_takes_effect_once_the_add_is_done(
    cls, scenario, point, monkeypatch
):
    reference, batch = _build(cls, scenario)
    reference.add(batch)
    buffer, batch = _build(cls, scenario)
    real, signalled = getattr(StepStore, point), [0]

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        if not signalled[0]:
            signalled[0] += 1
            signal.raise_signal(signal.SIGINT)  # the user's Ctrl-C, in the middle of the writes
        return real(*args, **kwargs)

    monkeypatch.setattr(StepStore, point, interrupted)
    before = _logical(buffer)
    with pytest.raises(KeyboardInterrupt) if _signalled_here(scenario, point) else _no_raise():
        buffer.add(batch)
    monkeypatch.undo()
    state = _logical(buffer)
    if scenario == "first add" and point == "append_many":
        assert _same(state, before)  # signalled in the check's probe store, before any change
        buffer.add(batch)
    assert _same(_logical(buffer), _logical(reference))
    _consistent(buffer)
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def _signalled_here(scenario: str, point: str) -> bool:
    return not (scenario == "first add" and point == "kill")  # nothing is evicted there


@contextlib.contextmanager
def _no_raise() -> Iterator[None]:
    yield
