"""Scaling fixes of the replay buffers (hunt 10): results unchanged, work no longer quadratic.

1. ``add`` of many new episodes that evict stored ones compared each victim with every new id
   of the call (``victim in newer`` over a list): O(E^2) in the episodes of one add.
2. Whole-episode reads walked an interleaved episode one Python step at a time
   (``episode_slots``), and episode copies went through per-step lists, a per-step info loop
   and ``to_numpy`` re-stacking (``build_episode``).

Behaviour is checked against the old code paths (kept below as references) on random streams
of interleaved chunk adds with evictions, for both buffer classes; the work is counted
(id comparisons, link reads, re-stacking), never timed.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.buffer import InfiniteLookbackBuffer
from episodes.replay import (
    EmptyBufferError,
    EpisodeReplayBuffer,
    PrioritizedEpisodeReplayBuffer,
    access,
    sampling,
    sequences,
    transitions,
)
from episodes.replay.nstep import next_observations
from episodes.replay.store import fresh_infos

BUFFERS = [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer]


# ------------------------------------------------------------ the old code paths, as they were
def _old_fresh_infos(infos: np.ndarray) -> np.ndarray:
    out = np.empty(infos.shape, object)
    for i, info in enumerate(infos.flat):
        out.flat[i] = {} if info is None else copy.deepcopy(info)
    return out


def _old_episode_slots(store: Any, table: Any, row: int) -> np.ndarray:
    first = int(table.first_slot[row])
    length = int(table.t_end[row] - table.t_begin[row])
    last = first + length - 1
    if (
        last < store.end
        and store.live[last]
        and store.ep[last] == row
        and store.t[last] == store.t[first] + length - 1
    ):
        return np.arange(first, first + length)
    slots = np.empty(length, np.int64)
    cur = first
    for i in range(length):
        slots[i] = cur
        cur = int(store.nxt[cur])
    return slots


def _old_build_episode(
    store: Any, table: Any, slots: np.ndarray, lookback: int, spaces: tuple[Any, Any]
) -> SingleAgentEpisode:
    row = int(store.ep[slots[0]])
    last = slots[-1]
    at_end = store.nxt[last] < 0
    nxt = store.nxt[last]
    final_info = table.final_info[row] if at_end else store.read_infos(np.array([nxt]))[0]
    raw_infos = np.empty(len(slots) + 1, object)
    raw_infos[:-1] = store.read_infos(slots)
    raw_infos[-1] = final_info
    observations = np.concatenate(
        [store.obs.data[slots], next_observations(store, table, slots[-1:])]
    )
    episode = SingleAgentEpisode(
        table.ids[row],
        observations=list(observations),
        observation_space=spaces[0],
        infos=list(_old_fresh_infos(raw_infos)),
        actions=list(store.actions.data[slots]),
        action_space=spaces[1],
        rewards=list(store.rewards[slots]),
        terminated=bool(at_end and table.terminated[row]),
        truncated=bool(at_end and table.truncated[row]),
        extra_model_outputs={k: list(c.data[slots]) for k, c in store.extras.items()},
        t_started=int(store.t[slots[lookback]])
        if lookback < len(slots)
        else int(store.t[last]) + 1,
        len_lookback_buffer=lookback,
    )
    return episode.to_numpy()


@contextlib.contextmanager
def _old_paths() -> Iterator[None]:
    """Runs the buffers on the old code paths (every module that looks the functions up)."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sampling, "episode_slots", _old_episode_slots)
        mp.setattr(sequences, "episode_slots", _old_episode_slots)
        mp.setattr(sequences, "build_episode", _old_build_episode)
        mp.setattr(access, "build_episode", _old_build_episode)
        mp.setattr(sequences, "fresh_infos", _old_fresh_infos)
        mp.setattr(transitions, "fresh_infos", _old_fresh_infos)
        yield


# ----------------------------------------------------------------------------- comparisons
def _assert_same(a: Any, b: Any, where: str = "") -> None:
    """Equal values of equal types; arrays of equal dtype and shape (NaNs equal)."""
    assert type(a) is type(b), f"{where}: {type(a).__name__} != {type(b).__name__}"
    if isinstance(a, dict):
        assert list(a) == list(b), where
        for key in a:
            _assert_same(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, np.ndarray):
        assert (a.dtype, a.shape) == (b.dtype, b.shape), where
        if a.dtype == object:
            for i, (x, y) in enumerate(zip(a.ravel().tolist(), b.ravel().tolist())):
                _assert_same(x, y, f"{where}.flat[{i}]")
        else:
            assert np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"), where
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b), where
    else:
        assert a == b, f"{where}: {a!r} != {b!r}"


def _assert_same_column(a: InfiniteLookbackBuffer, b: InfiniteLookbackBuffer, where: str) -> None:
    assert type(a.store) is type(b.store), where
    assert (a.lookback, a.finalized, a.space, len(a)) == (b.lookback, b.finalized, b.space, len(b))
    if a.finalized:
        assert a.store.structure == b.store.structure, where
        for x, y in zip(a.store.leaf_views(), b.store.leaf_views()):
            _assert_same(x, y, where)
            assert x.flags.c_contiguous == y.flags.c_contiguous, where
    else:
        _assert_same(list(a.data), list(b.data), where)


def _assert_same_episode(a: SingleAgentEpisode, b: SingleAgentEpisode) -> None:
    assert a == b
    facts = ("id_", "t_started", "t", "is_terminated", "is_truncated", "is_numpy", "custom_data")
    for name in facts:
        _assert_same(getattr(a, name), getattr(b, name), name)
    assert (a.observation_space, a.action_space) == (b.observation_space, b.action_space)
    assert list(a.named_columns()) == list(b.named_columns())
    for (name, x), y in zip(a.named_columns().items(), b.named_columns().values()):
        _assert_same_column(x, y, name)


def _assert_same_output(a: Any, b: Any) -> None:
    if isinstance(a, list) and a and isinstance(a[0], SingleAgentEpisode):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_same_episode(x, y)
    else:
        _assert_same(a, b)


# ----------------------------------------------------------------------- random chunk streams
class _Stream:
    """Interleaved chunks of episodes with infos and extras, fed to a buffer add by add."""

    def __init__(self, seed: int, spaces: bool):
        self.rng = np.random.default_rng(seed)
        self.spaces = spaces
        self.queues: dict[str, list[SingleAgentEpisode]] = {}
        self.next_id = 0

    def _episode_chunks(self) -> list[SingleAgentEpisode]:
        rng, index = self.rng, self.next_id
        self.next_id += 1
        length = int(rng.integers(1, 40))
        obs = rng.normal(size=(length + 1, 3)).astype(np.float32)
        obs[:, 0] = index
        infos: list[dict[str, Any]] = [
            {"t": t, "seen": [index, t]} if rng.random() < 0.15 else {} for t in range(length + 1)
        ]
        end = rng.choice(["terminated", "truncated", "ongoing"])
        actions = rng.integers(0, 4, length)
        rewards = rng.normal(size=length).round(3)
        logp = rng.normal(size=length).astype(np.float32)
        vf = rng.normal(size=(length, 2))
        out, a = [], 0
        while a < length:
            b = min(length, a + int(rng.integers(1, 9)))
            last = b == length
            out.append(
                SingleAgentEpisode(
                    f"ep{index}",
                    observations=list(obs[a : b + 1]),
                    observation_space=gym.spaces.Box(-9.0, 99.0, (3,)) if self.spaces else None,
                    actions=[int(x) for x in actions[a:b]],
                    action_space=gym.spaces.Discrete(4) if self.spaces else None,
                    rewards=[float(r) for r in rewards[a:b]],
                    infos=copy.deepcopy(infos[a : b + 1]),
                    extra_model_outputs={"logp": list(logp[a:b]), "vf": list(vf[a:b])},
                    terminated=bool(last and end == "terminated"),
                    truncated=bool(last and end == "truncated"),
                    t_started=a,
                    len_lookback_buffer=0,
                )
            )
            a = b
        return out

    def next_add(self) -> list[SingleAgentEpisode]:
        while len(self.queues) < 4:  # a few episodes run side by side, as in a vector env
            chunks = self._episode_chunks()
            self.queues[chunks[0].id_] = chunks
        out = []
        for _ in range(int(self.rng.integers(1, 7))):
            ids = [i for i, q in self.queues.items() if q]
            if not ids:
                break
            out.append(self.queues[ids[int(self.rng.integers(0, len(ids)))]].pop(0))
        self.queues = {i: q for i, q in self.queues.items() if q}
        return out

    def forget(self, evicted: list[Any]) -> None:
        for id_ in evicted:  # continuing an evicted episode is refused: stop feeding it
            self.queues.pop(id_, None)


class _Model:
    """RLlib's eviction rule, plainly: after each chunk evict the oldest while over capacity."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.lengths: dict[Any, int] = {}
        self.evicted: list[Any] = []

    def add(self, chunks: list[SingleAgentEpisode]) -> None:
        gone: set[Any] = set()
        for chunk in chunks:
            if chunk.id_ in gone:  # its episode went earlier in this add: dropped with it
                continue
            self.lengths[chunk.id_] = self.lengths.get(chunk.id_, 0) + len(chunk)
            while sum(self.lengths.values()) > self.capacity and len(self.lengths) > 1:
                victim = next(iter(self.lengths))
                del self.lengths[victim]
                gone.add(victim)
                self.evicted.append(victim)


def _reads(buf: EpisodeReplayBuffer, rng: np.random.Generator) -> list[tuple[str, Any]]:
    """Every read that goes through the changed code; each twin runs the same ones."""
    ids = buf.get_episode_ids()
    probe = ids[int(rng.integers(0, len(ids)))]
    t = int(rng.integers(0, len(buf.get_episode_indices(probe))))
    return [
        ("indices", [(i, buf.get_episode_indices(i)) for i in ids]),
        ("locate", buf.locate(probe, [t])),
        ("episodes", buf.get_episodes()),
        ("whole", buf.sample(3, sample_episodes=True)),
        ("chunks", _or_error(lambda: buf.sample(3, sample_episodes=True, batch_length_T=3))),
        (
            "lookback chunks",
            _or_error(lambda: buf.sample(3, sample_episodes=True, batch_length_T=2, lookback=3)),
        ),
        (
            "sequences",
            buf.sample(
                3,
                batch_length_T=4,
                lookback=2,
                pad=True,
                include_infos=True,
                include_extra_model_outputs=True,
            ),
        ),
        ("transitions", buf.sample(4, n_step=2, include_infos=True)),
    ]


def _or_error(read: Any) -> Any:
    try:
        return read()
    except EmptyBufferError as err:
        return str(err)


@pytest.mark.parametrize("cls", BUFFERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize(
    "seed, capacity, spaces",
    [(0, 60, False), (1, 150, True), (2, 25, False), (3, 400, True), (4, 90, True)],
)
def test_reads_and_evictions_match_the_old_code_paths(cls, seed, capacity, spaces):
    new, old = cls(capacity, seed=seed), cls(capacity, seed=seed)
    stream, model = _Stream(seed, spaces), _Model(capacity)
    probe = np.random.default_rng(seed)
    for step in range(60):
        chunks = stream.next_add()
        new.add(copy.deepcopy(chunks))
        with _old_paths():
            old.add(copy.deepcopy(chunks))
        model.add(chunks)
        stream.forget(new.get_evicted_ids())
        assert new.get_episode_ids() == list(model.lengths)
        assert new.get_evicted_ids() == model.evicted
        assert new.get_num_timesteps() == sum(model.lengths.values())
        _assert_same(new.get_state(), old.get_state(), "state")
        if step % 3 == 0:
            if cls is PrioritizedEpisodeReplayBuffer:
                batch = new.sample(5)
                priorities = probe.uniform(0.1, 3.0, 5)
                new.update_priorities(priorities, batch["indices"])
                with _old_paths():
                    old.sample(5)
                    old.update_priorities(priorities, batch["indices"])
            reads = _reads(new, np.random.default_rng(step))
            with _old_paths():
                before = _reads(old, np.random.default_rng(step))
            for (name, got), (_, expected) in zip(reads, before):
                if name == "indices":
                    for (i, x), (j, y) in zip(got, expected):
                        assert i == j
                        _assert_same(x, y, name)
                else:
                    _assert_same_output(got, expected)
    assert new.get_num_episodes_evicted() > 0
    restored = cls(1)  # a restored buffer's table holds the episodes in other rows
    restored.set_state(new.get_state())
    with _old_paths():
        expected = old.get_episodes()
    _assert_same_output(restored.get_episodes(), expected)


# ------------------------------------------------------- 1: an add does not scan its new ids
class _CountingId:
    """An episode id that counts equality tests (a list scan makes one per element)."""

    compared = 0
    __slots__ = ("n",)

    def __init__(self, n: int):
        self.n = n

    def __hash__(self) -> int:
        return hash(("counting id", self.n))

    def __eq__(self, other: object) -> bool:
        _CountingId.compared += 1
        return isinstance(other, _CountingId) and other.n == self.n

    def __repr__(self) -> str:
        return f"id{self.n}"


def _counted(n: int, steps: int) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        _CountingId(n),
        observations=[np.float32(n)] * (steps + 1),
        actions=[0] * steps,
        rewards=[1.0] * steps,
        terminated=True,
        len_lookback_buffer=0,
    )


@pytest.mark.parametrize("cls", BUFFERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("steps", [2, 8])
def test_add_evicting_stored_episodes_does_not_compare_ids_pairwise(cls, steps):
    # A full buffer of E episodes takes E new ones: every new chunk evicts an old episode.
    # The old plan searched each victim among the call's new ids (E^2 / 2 comparisons).
    count = 300
    buf = cls(count * steps)
    buf.add([_counted(i, steps) for i in range(count)])
    new = [_counted(count + i, steps) for i in range(count)]
    _CountingId.compared = 0
    buf.add(new)
    assert buf.get_episode_ids() == [ep.id_ for ep in new]
    assert buf.get_num_episodes_evicted() == count
    assert _CountingId.compared <= count  # hash lookups only (the old code: about 45,000)


# -------------------------------------- 2a: whole-episode reads do not walk the links per step
class _CountingReads(np.ndarray):
    reads = 0

    def __getitem__(self, item: Any) -> Any:
        _CountingReads.reads += 1
        return super().__getitem__(item)


def _interleaved(cls: type, length: int, others: int = 3) -> EpisodeReplayBuffer:
    def piece(id_: str, t0: int, n: int) -> SingleAgentEpisode:
        return SingleAgentEpisode(
            id_,
            observations=[np.float32(t) for t in range(t0, t0 + n + 1)],
            actions=[0] * n,
            rewards=[1.0] * n,
            t_started=t0,
            terminated=t0 + n >= length,
            len_lookback_buffer=0,
        )

    buf = cls((others + 1) * length)  # full: one more step evicts
    for t0 in range(0, length, 8):
        buf.add([piece(f"e{k}", t0, 8) for k in range(others + 1)])
    return buf


def _count_link_reads(buf: EpisodeReplayBuffer) -> None:
    store = buf._store
    store.reserve(store.size)  # no resize during the reads: it would replace the column
    store.nxt = store.nxt.view(_CountingReads)
    _CountingReads.reads = 0


@pytest.mark.parametrize("cls", BUFFERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize(
    "read",
    [
        pytest.param(lambda buf: buf.get_episode_indices("e0"), id="get_episode_indices"),
        pytest.param(lambda buf: buf.locate("e1", [5]), id="locate"),
        pytest.param(lambda buf: buf.get_episodes(), id="get_episodes"),
        pytest.param(lambda buf: buf.sample(4, sample_episodes=True), id="sample_episodes"),
        pytest.param(
            lambda buf: buf.add(
                SingleAgentEpisode(
                    "big",
                    observations=[np.float32(0)] * 1201,
                    actions=[0] * 1200,
                    rewards=[0.0] * 1200,
                    len_lookback_buffer=0,
                )
            ),
            id="evicting_add",
        ),
    ],
)
def test_interleaved_episode_reads_gather_slots_in_bulk(cls, read):
    length = 400
    buf = _interleaved(cls, length)
    expected = {id_: buf.get_episode_indices(id_) for id_ in buf.get_episode_ids()}
    _count_link_reads(buf)
    read(buf)
    # A few reads per episode (its end), not one per step (the old walk: 400 per episode).
    assert _CountingReads.reads <= 40
    for id_ in buf.get_episode_ids():
        if id_ in expected:
            np.testing.assert_array_equal(buf.get_episode_indices(id_), expected[id_])
    if "big" in buf.get_episode_ids():  # the evicting add: 1200 new steps evict three
        assert buf.get_evicted_ids() == ["e0", "e1", "e2"]


def test_a_sparse_interleaved_episode_still_reads_right():
    # Its span holds far more slots of other episodes than of its own: the links are walked.
    buf = _interleaved(EpisodeReplayBuffer, 64, others=60)
    store, table = buf._store, buf._table
    for id_ in buf.get_episode_ids():
        row = table.order[id_]
        _assert_same(
            sampling.episode_slots(store, table, row), _old_episode_slots(store, table, row)
        )


# ------------------------------- 2b: episode copies are built from the gathers, infos fresh
@pytest.mark.parametrize("cls", BUFFERS, ids=lambda c: c.__name__)
def test_episode_copies_are_not_restacked_from_per_step_lists(cls, monkeypatch):
    buf = _interleaved(cls, 64)
    stacked = []
    original = InfiniteLookbackBuffer.stacked

    def counting(self: InfiniteLookbackBuffer) -> Any:
        stacked.append(len(self))
        return original(self)

    monkeypatch.setattr(InfiniteLookbackBuffer, "stacked", counting)
    episodes = [
        *buf.get_episodes(),
        *buf.sample(3, sample_episodes=True),
        *buf.sample(3, sample_episodes=True, batch_length_T=5, lookback=2),
    ]
    assert stacked == []  # the old path stacked every column of every copy again
    assert all(ep.is_numpy for ep in episodes)


@pytest.mark.parametrize(
    "read",
    [
        pytest.param(lambda buf: buf.get_episodes(), id="get_episodes"),
        pytest.param(lambda buf: buf.sample(2, sample_episodes=True), id="whole"),
        pytest.param(
            lambda buf: buf.sample(2, sample_episodes=True, batch_length_T=2, lookback=1),
            id="chunks",
        ),
    ],
)
def test_episode_copies_carry_fresh_infos(read):
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(
        SingleAgentEpisode(
            "a",
            observations=[0.0, 1.0, 2.0, 3.0],
            actions=[0, 1, 0],
            rewards=[1.0, 1.0, 1.0],
            infos=[{}, {"k": [1]}, {}, {"end": {"x": 1}}],
            terminated=True,
            len_lookback_buffer=0,
        )
    )
    before = buf.get_state()
    for ep in read(buf):
        infos = ep.infos.data
        assert len({id(info) for info in infos}) == len(infos)  # no dict shared between steps
        for info in infos:
            info.setdefault("k", []).append("mutated")
            info["new"] = True
    after = buf.get_state()
    for part in ("steps", "episodes"):  # the stored data (sampling moved the counters)
        _assert_same(after[part], before[part], part)


@pytest.mark.parametrize(
    "stored",
    [
        pytest.param([None, None, None], id="all empty"),
        pytest.param([None, {"k": [1]}, None, {"n": {"m": 2}}], id="mixed"),
        pytest.param([{}, 0, "", [], ("x",), np.arange(3), None, {"a": 1}], id="odd values"),
        pytest.param([], id="none"),
    ],
)
@pytest.mark.parametrize("shape", ["flat", "rows"])
def test_fresh_infos_match_the_old_loop(stored, shape):
    infos = np.empty(len(stored), object)
    for i, info in enumerate(stored):
        infos[i] = info
    if shape == "rows" and len(stored) % 2 == 0:
        infos = infos.reshape(2, -1)
    got, expected = fresh_infos(infos), _old_fresh_infos(infos)
    _assert_same(got, expected)
    for new, old in zip(got.ravel().tolist(), infos.ravel().tolist()):
        if isinstance(old, (dict, list, np.ndarray)):
            assert new is not old  # a copy, never the stored object
    empties = [new for new in got.ravel().tolist() if isinstance(new, dict) and not new]
    assert len({id(x) for x in empties}) == len(empties)
