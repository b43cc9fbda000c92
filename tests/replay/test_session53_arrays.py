"""``add_rollouts``: rollouts given as arrays are stored exactly as ``add`` stores the episodes a
user would build from them (every field of the state, seeded samples, evictions, priorities)."""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer
from episodes.replay.array_rollouts import add_rollouts
from tests.replay._nested import same_state


def _item(column: Any, i: int, t: Any) -> Any:
    """Row ``i``, steps ``t`` of a possibly nested column, as per-step items (dicts stay)."""
    if isinstance(column, dict):
        parts = {k: _item(v, i, t) for k, v in column.items()}
        return [dict(zip(parts, values)) for values in zip(*parts.values())]
    if isinstance(column, tuple):
        return list(zip(*(_item(v, i, t) for v in column)))
    return list(column[i, t])


def _episodes(obs, act, rew, term, trunc, lengths, extras, ids) -> list[SingleAgentEpisode]:
    """One episode per rollout, built as a user would: cut at the first flag or the length."""
    h = rew.shape[1]
    out = []
    for i in range(rew.shape[0]):
        flagged = np.flatnonzero(term[i] | trunc[i])
        n = min(int(flagged[0]) + 1 if len(flagged) else h, int(lengths[i]))
        out.append(
            SingleAgentEpisode(
                ids[i],
                observations=_item(obs, i, slice(0, n + 1)),
                actions=_item(act, i, slice(0, n)),
                rewards=list(rew[i, :n]),
                terminated=bool(term[i, n - 1]),
                truncated=bool(trunc[i, n - 1]),
                extra_model_outputs={k: list(v[i, :n]) for k, v in extras.items()},
                len_lookback_buffer=0,
            )
        )
    return out


def _rollouts(rng: np.random.Generator, b: int, h: int, kind: str) -> dict[str, Any]:
    if kind == "dict":
        obs: Any = {
            "pos": rng.normal(size=(b, h + 1, 2)).astype(np.float32),
            "id": rng.integers(0, 9, (b, h + 1)),
        }
    elif kind == "tuple":
        obs = (rng.integers(0, 3, (b, h + 1)).astype(np.int8), rng.normal(size=(b, h + 1, 2)))
    elif kind == "ints":
        obs = rng.integers(-5, 5, (b, h + 1))
    else:
        obs = rng.normal(size=(b, h + 1, 3)).astype(np.float32)
    return {
        "observations": obs,
        "actions": rng.normal(size=(b, h, 1)).astype(np.float32),
        "rewards": rng.normal(size=(b, h)),  # float64, stored as float32 either way
        "terminated": rng.random((b, h)) < 0.2,
        "truncated": rng.random((b, h)) < 0.1,
        "lengths": rng.integers(1, h + 1, b),
        "extra_model_outputs": {"logp": rng.normal(size=(b, h)).astype(np.float32)},
    }


def _same_batches(a: Any, b: Any) -> None:
    if isinstance(a, (dict, tuple)):
        assert type(a) is type(b) and len(a) == len(b)
        pairs = [(a[k], b[k]) for k in a] if isinstance(a, dict) else list(zip(a, b))
        for x, y in pairs:
            _same_batches(x, y)
    else:
        assert np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    capacity=st.integers(1, 40),
    rounds=st.lists(st.tuples(st.integers(0, 7), st.integers(1, 5)), min_size=1, max_size=5),
    prioritized=st.booleans(),
    kind=st.sampled_from(["flat", "ints", "dict", "tuple"]),
    seed=st.integers(0, 2**16),
)
def test_add_rollouts_equals_add_of_the_episodes(
    capacity: int, rounds: list[tuple[int, int]], prioritized: bool, kind: str, seed: int
) -> None:
    cls = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
    by_arrays, by_episodes = cls(capacity, seed=seed), cls(capacity, seed=seed)
    rng, counter = np.random.default_rng(seed), itertools.count()
    for b, h in rounds:
        arrays = _rollouts(rng, b, h, kind)
        ids = [f"r{next(counter)}" for _ in range(b)]
        assert by_arrays.add_rollouts(**arrays, ids=ids) == ids
        by_episodes.add(
            _episodes(
                arrays["observations"],
                arrays["actions"],
                arrays["rewards"],
                arrays["terminated"],
                arrays["truncated"],
                arrays["lengths"],
                arrays["extra_model_outputs"],
                ids,
            )
        )
        same_state(by_arrays.get_state(), by_episodes.get_state())
        assert by_arrays.get_evicted_ids() == by_episodes.get_evicted_ids()
        if not len(by_episodes):
            continue
        for kwargs in ({"n_step": 2}, {"batch_length_T": 2, "pad": True}):
            _same_batches(by_arrays.sample(6, **kwargs), by_episodes.sample(6, **kwargs))
        if prioritized:  # the new steps got max priority in both, and update alike
            batch = by_arrays.sample(4, beta=0.5)
            _same_batches(batch, by_episodes.sample(4, beta=0.5))
            new = rng.uniform(0.1, 3.0, 4)
            by_arrays.update_priorities(new, batch["indices"])
            by_episodes.update_priorities(new, batch["indices"])
        got = by_arrays.sample(2, sample_episodes=True)
        want = by_episodes.sample(2, sample_episodes=True)
        assert [e.id_ for e in got] == [e.id_ for e in want]
    same_state(by_arrays.get_state(), by_episodes.get_state())


def test_many_rollouts_evict_stored_and_new_ones_as_add_does() -> None:
    """A full buffer: one call evicts every stored rollout and most of its own, oldest first."""
    rng = np.random.default_rng(3)
    by_arrays, by_episodes = EpisodeReplayBuffer(50, seed=0), EpisodeReplayBuffer(50, seed=0)
    counter = itertools.count()
    for b in (30, 200, 1):
        arrays = _rollouts(rng, b, 4, "flat")
        ids = [next(counter) for _ in range(b)]
        by_arrays.add_rollouts(**arrays, ids=np.array(ids))
        args = [arrays[k] for k in ("observations", "actions", "rewards", "terminated")]
        args += [arrays["truncated"], arrays["lengths"], arrays["extra_model_outputs"], ids]
        by_episodes.add(_episodes(*args))
        same_state(by_arrays.get_state(), by_episodes.get_state())
    assert by_arrays.get_num_episodes_evicted() > 200


def test_fresh_ids_and_the_mbpo_cut() -> None:
    """No ids: fresh uuid4 hex ones; a rollout keeps its steps up to its first termination."""
    buf = EpisodeReplayBuffer(100, seed=0)
    term = np.array([[False, True, True], [False, False, False]])
    ids = add_rollouts(buf, np.arange(8.0).reshape(2, 4), np.zeros((2, 3)), np.ones((2, 3)),
                       terminated=term)  # fmt: skip
    assert len(set(ids)) == 2 and all(len(i) == 32 and int(i, 16) >= 0 for i in ids)
    assert buf.get_episode_ids() == ids
    first, second = buf.get_episodes()
    assert (
        len(first) == 2
        and first.is_terminated
        and first.get_observations().tolist()
        == [
            0.0,
            1.0,
            2.0,
        ]
    )
    assert len(second) == 3 and not second.is_done


def _good(b: int = 2, h: int = 3) -> dict[str, Any]:
    return {
        "observations": np.zeros((b, h + 1, 2), np.float32),
        "actions": np.zeros((b, h), np.int64),
        "rewards": np.ones((b, h), np.float32),
    }


def _with(**changes: Any) -> dict[str, Any]:
    return {**_good(), **changes}


ERRORS = [
    ("obs-one-step", _with(observations=np.zeros((2, 1, 2))), ValueError, "observations: .*H >= 1"),
    ("obs-strings", _with(observations=np.full((2, 4), "x")), TypeError, "observations: .*numeric"),
    ("obs-dtype", _with(observations=np.zeros((2, 4, 2), np.int64)), ValueError, "observations"),
    ("obs-shape", _with(observations=np.zeros((2, 4, 3), np.float32)), ValueError, "observations"),
    ("actions-shape", _with(actions=np.zeros((2, 4))), ValueError, r"actions: expected shape"),
    ("actions-B", _with(actions=np.zeros((3, 3))), ValueError, r"actions: expected shape"),
    ("actions-kind", _with(actions=np.zeros((2, 3))), ValueError, "actions of shape"),
    (
        "actions-wrap",
        _with(actions=np.full((2, 3), 2**63, np.uint64)),
        ValueError,
        "actions of dtype uint64 hold values",
    ),
    ("rewards-vector", _with(rewards=np.ones((2, 3, 1))), ValueError, r"rewards: expected shape"),
    ("rewards-B", _with(rewards=np.ones((1, 3))), ValueError, r"rewards: expected shape"),
    ("rewards-complex", _with(rewards=np.ones((2, 3), complex)), TypeError, "rewards must be real"),
    ("rewards-overflow", _with(rewards=np.full((2, 3), 1e300)), ValueError, "overflow"),
    ("terminated-ints", _with(terminated=np.zeros((2, 3), int)), TypeError, "terminated: .*bools"),
    ("truncated-shape", _with(truncated=np.zeros((2,), bool)), ValueError, r"truncated: expected"),
    ("lengths-zero", _with(lengths=[0, 3]), ValueError, r"lengths: each must be in 1 \.\. H = 3"),
    ("lengths-long", _with(lengths=[1, 4]), ValueError, "got 4 at 1"),
    ("lengths-float", _with(lengths=[1.0, 2.0]), TypeError, "lengths: expected ints"),
    ("lengths-shape", _with(lengths=[1, 2, 3]), ValueError, r"lengths: expected shape \[B\]"),
    ("extras-key", _with(extra_model_outputs={0: np.zeros((2, 3))}), TypeError, "must be a str"),
    ("extras-shape", _with(extra_model_outputs={"v": np.zeros((2, 2))}), ValueError, r"\['v'\]"),
    ("extras-new-key", _with(extra_model_outputs={"v": np.zeros((2, 3))}), ValueError, "keys"),
    ("ids-count", _with(ids=["x"]), ValueError, "ids: expected B = 2"),
    ("ids-str", _with(ids="xy"), TypeError, "ids: expected a sequence"),
    ("ids-repeated", _with(ids=["x", "x"]), ValueError, "ids: .*id of its own"),
    ("ids-unhashable", _with(ids=[["x"], ["y"]]), TypeError, r"ids\[0\]: .* is unhashable"),
    ("ids-none", _with(ids=["x", None]), ValueError, r"ids\[1\] is None"),
    ("ids-0d-array", _with(ids=["x", np.array(3)]), TypeError, r"ids\[1\]: .* is an array"),
    ("ids-stored", _with(ids=["s0", "y"]), ValueError, "'s0' names a stored episode"),
    ("ids-evicted", _with(ids=["gone", "y"]), ValueError, "'gone' names an evicted episode"),
    ("dict-leaves", _with(observations={"a": np.zeros((2, 4)), "b": np.zeros((3, 4))}),
     ValueError, "leading"),
]  # fmt: skip


@pytest.mark.parametrize("prioritized", [False, True], ids=["uniform", "prioritized"])
@pytest.mark.parametrize(
    ("args", "error", "words"), [c[1:] for c in ERRORS], ids=[c[0] for c in ERRORS]
)
def test_bad_input_is_refused_by_name_and_changes_nothing(
    args: dict[str, Any], error: Any, words: str, prioritized: bool
) -> None:
    cls = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
    buf = cls(8, seed=0)
    buf.add_rollouts(**_good(1, 8), ids=["gone"])
    buf.add_rollouts(**_good(2, 2), ids=["s0", "s1"])  # evicts "gone"
    assert buf.get_evicted_ids() == ["gone"]
    before = buf.get_state()
    with pytest.raises(error, match=words):
        buf.add_rollouts(**args)
    same_state(buf.get_state(), before)


def test_prioritized_refuses_an_infinite_priority_sum_unchanged() -> None:
    buf = PrioritizedEpisodeReplayBuffer(100, seed=0, alpha=1.0)
    buf.add_rollouts(**_good(1, 3))
    buf.update_priorities(np.array([1.5e308]), np.arange(1))
    before = buf.get_state()
    with pytest.raises(ValueError, match="infinite"):
        buf.add_rollouts(**_good())
    same_state(buf.get_state(), before)


def _pair(cls: Any, capacity: int, seed: int = 0) -> tuple[Any, Any]:
    return cls(capacity, seed=seed), cls(capacity, seed=seed)


def _add_both(by_arrays: Any, by_episodes: Any, arrays: dict[str, Any], ids: list[Any]) -> None:
    by_arrays.add_rollouts(**arrays, ids=ids)
    args = [arrays[k] for k in ("observations", "actions", "rewards", "terminated")]
    args += [arrays["truncated"], arrays["lengths"], arrays["extra_model_outputs"], ids]
    by_episodes.add(_episodes(*args))


@pytest.mark.parametrize("prioritized", [False, True], ids=["uniform", "prioritized"])
def test_evicting_many_stored_episodes_at_once(prioritized: bool) -> None:
    """Dozens of stored episodes evicted by one call (found in one pass over the slots)."""
    cls = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
    by_arrays, by_episodes = _pair(cls, 200)
    rng, counter = np.random.default_rng(5), itertools.count()
    for b in (120, 90, 150):
        ids = [f"e{next(counter)}" for _ in range(b)]
        _add_both(by_arrays, by_episodes, _rollouts(rng, b, 4, "flat"), ids)
        same_state(by_arrays.get_state(), by_episodes.get_state())
        _same_batches(by_arrays.sample(32, n_step=3), by_episodes.sample(32, n_step=3))
    assert by_arrays.get_num_episodes_evicted() > 200


def test_evicted_ids_stay_bounded_as_add_keeps_them() -> None:
    from episodes.replay.counters import EVICTED_IDS_KEPT

    buf = EpisodeReplayBuffer(10, seed=0)
    b = EVICTED_IDS_KEPT + 100
    ids = buf.add_rollouts(np.zeros((b, 2)), np.zeros((b, 1)), np.ones((b, 1)))
    assert buf.get_episode_ids() == ids[-10:]
    assert buf.get_evicted_ids() == ids[-10 - EVICTED_IDS_KEPT : -10]
    assert buf.get_num_episodes_evicted() == b - 10 and buf.get_added_timesteps() == b


class _Logged(EpisodeReplayBuffer):
    """A subclass with hooks of its own: add_rollouts calls them as add does."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[str, Any]] = []

    def _write(self, chunks: list[Any]) -> None:
        self.calls.append(("write", [c.id_ for c in chunks]))
        super()._write(chunks)

    def _evict(self, id_: str) -> None:
        self.calls.append(("evict", id_))
        super()._evict(id_)


class _Checked(EpisodeReplayBuffer):
    """A subclass checking chunks its own way: add_rollouts hands it the rollouts' chunks."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[str, Any]] = []

    def _check_fit(self, chunks: list[Any]) -> None:
        self.calls.append(("check", [(c.id_, c.n, c.terminated, c.truncated) for c in chunks]))
        super()._check_fit(chunks)


@pytest.mark.parametrize("cls", [_Logged, _Checked])
def test_a_subclass_with_its_own_hooks_sees_what_add_shows_it(cls: Any) -> None:
    by_arrays, by_episodes = _pair(cls, 12)
    rng = np.random.default_rng(2)
    for r in range(3):
        ids = [f"{r}-{i}" for i in range(5)]
        _add_both(by_arrays, by_episodes, _rollouts(rng, 5, 3, "dict"), ids)
        same_state(by_arrays.get_state(), by_episodes.get_state())
    assert by_arrays.calls == by_episodes.calls and by_arrays.calls
    assert ("evict", "0-0") in by_arrays.calls or cls is _Checked
