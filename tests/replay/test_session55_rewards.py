"""Relabelling stored rewards in place (a reward model): ``buf.set_rewards`` and ``get_rewards``.

A user relabelling a replay buffer's rewards writes the new rewards at the item indices a
sample gave, as a reanalyse pass writes extra outputs with ``set_extra_model_outputs``: the
same index rules (evicted items skipped, a repeated index keeps its last value, every check
before the write), values taken as ``add`` takes rewards. Every n-step return, sequence,
episode, state and saved buffer after the write is checked against a plain-Python reference
built from the episodes' rewards with the writes applied in a loop.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer

LENGTHS = [("e0", 4, "terminated"), ("e1", 3, "truncated"), ("e2", 5, "ongoing")]
BUFFERS = {"uniform": EpisodeReplayBuffer, "prioritized": PrioritizedEpisodeReplayBuffer}


def _rewards(i: int, n: int) -> list[float]:
    return [float(10 * i + t) + 0.5 for t in range(n)]


def _buffer(kind: str = "uniform", capacity: int = 100) -> Any:
    """Episodes added one by one, so their items are 0-3, 4-6 and 7-11 (e0 evicted at 9)."""
    buf = BUFFERS[kind](capacity, seed=0)
    for i, (id_, n, end) in enumerate(LENGTHS):
        buf.add(
            SingleAgentEpisode(
                id_,
                observations=[float(t) for t in range(n + 1)],
                actions=[t % 2 for t in range(n)],
                rewards=_rewards(i, n),
                extra_model_outputs={"v": np.zeros(n, np.float32)},
                terminated=end == "terminated",
                truncated=end == "truncated",
                len_lookback_buffer=0,
            )
        )
    return buf


def _items() -> dict[int, tuple[str, int]]:
    """Item index -> (episode id, t), by the order the episodes were added."""
    out, k = {}, 0
    for id_, n, _ in LENGTHS:
        for t in range(n):
            out[k] = (id_, t)
            k += 1
    return out


def _reference() -> dict[str, list[float]]:
    """Each episode's rewards as the float32 column holds them."""
    return {
        id_: [float(np.float32(r)) for r in _rewards(i, n)] for i, (id_, n, _) in enumerate(LENGTHS)
    }


def _plain_n_step(rewards: list[float], t: int, n: int, gamma: float) -> tuple[float, int]:
    """The discounted sum of up to ``n`` rewards from ``t`` within the stored episode."""
    m = min(n, len(rewards) - t)
    return sum(gamma**i * rewards[t + i] for i in range(m)), m


def _stored_rewards(buf: Any) -> bytes:
    return bytes(buf.get_state()["steps"]["rewards"].tobytes())


# --- refusals: a clear error, nothing written ---------------------------------------------------


REFUSALS: dict[str, tuple[Any, Any, type[Exception], str]] = {
    "too few values": ([1.0], [0, 1], ValueError, "1 values for 2 indices"),
    "too many values": ([1.0, 2.0, 3.0], [0, 1], ValueError, "3 values for 2 indices"),
    "rows not scalars": (np.zeros((2, 2)), [0, 1], ValueError, r"scalars, got shape \(2,\)"),
    "one number for one index": (5.0, [0], TypeError, "one value per index"),
    "strings": (["a"], [0], TypeError, "real numbers"),
    "numeric strings array": (np.array(["1.5"]), [0], TypeError, "real numbers"),
    "complex": ([1 + 2j], [0], TypeError, "real numbers"),
    "nested dict": ({"a": [1.0]}, [0], TypeError, "rewards"),
    "None": ([None], [0], TypeError, "real numbers"),
    "past float32": ([1e300], [0], ValueError, "overflow"),
    "int past float64": ([10**400], [0], ValueError, "overflow"),
    "float indices": ([1.0], [1.0], ValueError, "indices must be integers"),
    "bool indices": ([1.0], [True], ValueError, "indices must be integers"),
    "0-d index": ([1.0], 0, ValueError, r"one item: indices \[i\]"),
    "2-d indices": ([[1.0]], [[0]], ValueError, "1-d"),
    "never issued": ([1.0], [12], ValueError, "never issued"),
    "sequence padding": ([1.0, 2.0], [0, -1], ValueError, r"indices\[mask\]"),
    "valid then never issued": ([1.0, 2.0], [0, 99], ValueError, "never issued"),
    "valid then bad value": ([1.0, 1e300], [0, 1], ValueError, "overflow"),
}


@pytest.mark.parametrize("kind", list(BUFFERS))
@pytest.mark.parametrize("case", list(REFUSALS))
def test_a_refused_relabel_names_the_problem_and_changes_nothing(case: str, kind: str) -> None:
    values, indices, error, words = REFUSALS[case]
    buf = _buffer(kind)
    before = _stored_rewards(buf)
    state = copy.deepcopy(buf.get_state())
    with pytest.raises(error, match=words):
        buf.set_rewards(values, indices)
    assert _stored_rewards(buf) == before
    after = buf.get_state()
    assert after["steps"]["extras"]["v"].tobytes() == state["steps"]["extras"]["v"].tobytes()


def test_an_empty_buffer_refuses_any_index_and_writes_nothing_for_none() -> None:
    buf = EpisodeReplayBuffer(10)
    assert buf.set_rewards([], []) == 0
    with pytest.raises(ValueError, match="never issued"):
        buf.set_rewards([1.0], [0])
    with pytest.raises(KeyError, match="not stored"):
        buf.get_rewards([0])


# --- accepted values: as add takes rewards --------------------------------------------------------


def _torch_values() -> Any:
    torch = pytest.importorskip("torch")
    return torch.tensor([2.5], dtype=torch.float64, requires_grad=True) * 1


def _bf16_values() -> Any:
    torch = pytest.importorskip("torch")
    return torch.tensor([2.5], dtype=torch.bfloat16)


ACCEPTED: dict[str, tuple[Any, float]] = {
    "float64 list": (lambda: [0.1], float(np.float32(0.1))),
    "ints (add takes them)": (lambda: np.array([3], np.int64), 3.0),
    "Python ints": (lambda: [7], 7.0),
    "bools": (lambda: [True], 1.0),
    "int beyond int64": (lambda: [2**70], float(np.float32(2.0**70))),
    "uint8 array": (lambda: np.array([200], np.uint8), 200.0),
    "tuple": (lambda: (4.0,), 4.0),
    "NaN (add stores it)": (lambda: [np.nan], np.nan),
    "infinity given": (lambda: [-np.inf], -np.inf),
    "torch float64 with grad": (_torch_values, 2.5),
    "torch bfloat16": (_bf16_values, 2.5),
}


@pytest.mark.parametrize("kind", list(BUFFERS))
@pytest.mark.parametrize("case", list(ACCEPTED))
def test_values_are_taken_as_add_takes_rewards(case: str, kind: str) -> None:
    make, want = ACCEPTED[case]
    buf = _buffer(kind)
    others = buf.get_rewards([0, 2, 3])
    assert buf.set_rewards(make(), [1]) == 1
    got = buf.get_rewards([1])
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, np.array([want], np.float32))
    np.testing.assert_array_equal(buf.get_rewards([0, 2, 3]), others)
    if not case.startswith("torch"):  # add stores the same float32 reward from that value
        twin = EpisodeReplayBuffer(10)
        twin.add(
            SingleAgentEpisode(
                observations=[0.0, 1.0], actions=[0], rewards=list(make()), len_lookback_buffer=0
            )
        )
        np.testing.assert_array_equal(twin.get_rewards([0]), got)


# --- index rules: evicted skipped, repeats keep their last, indices from a sample ----------------


@pytest.mark.parametrize("kind", list(BUFFERS))
def test_evicted_items_are_skipped_and_a_repeated_index_keeps_its_last_value(kind: str) -> None:
    buf = _buffer(kind, capacity=9)  # e0 (items 0-3) evicted
    assert buf.get_episode_ids() == ["e1", "e2"]
    assert buf.set_rewards([7.0, 8.0, 9.0], [0, 4, 11]) == 2
    assert buf.get_rewards([4, 11]).tolist() == [8.0, 9.0]
    assert buf.set_rewards(np.array([1.0, 2.0, 3.0]), np.array([5, 5, 0])) == 2
    assert buf.get_rewards(5).tolist() == [2.0]
    with pytest.raises(KeyError, match="not stored"):
        buf.get_rewards([0])
    with pytest.raises(ValueError, match="1-d"):
        buf.get_rewards([[4]])


@pytest.mark.parametrize("kind", list(BUFFERS))
def test_relabelling_a_sampled_batch_reaches_its_items_and_no_other(kind: str) -> None:
    buf = _buffer(kind)
    priorities = buf.get_priorities(np.arange(12)) if kind == "prioritized" else None
    batch = buf.sample(6, n_step=1)
    model = batch["obs"].astype(np.float64) * -1.0 - 0.25  # a learned reward model's guess
    assert buf.set_rewards(model, batch["indices"]) == 6
    want = {i: float(np.float32(_reference()[e][t])) for i, (e, t) in _items().items()}
    for i, r in zip(batch["indices"].tolist(), model.tolist()):
        want[i] = float(np.float32(r))  # a repeated index: its last value
    assert buf.get_rewards(np.arange(12)).tolist() == [want[i] for i in range(12)]
    again = buf.get_transitions(batch["indices"], n_step=1)
    assert again["rewards"].tolist() == [want[i] for i in batch["indices"].tolist()]
    if priorities is not None:  # rewards are no priorities: those stay as they were
        np.testing.assert_array_equal(buf.get_priorities(np.arange(12)), priorities)


def test_extras_and_rewards_take_the_same_index_path() -> None:
    # the same refusal words and counts from both writers, from one shared path
    buf = _buffer()
    for indices in ([0, -1], [12], [1.5], 0):
        with pytest.raises(ValueError) as rewards_error:
            buf.set_rewards([1.0, 2.0] if len(np.atleast_1d(indices)) == 2 else [1.0], indices)
        with pytest.raises(ValueError) as extras_error:
            values = [1.0, 2.0] if len(np.atleast_1d(indices)) == 2 else [1.0]
            buf.set_extra_model_outputs("v", values, indices)
        assert str(rewards_error.value) == str(extras_error.value)


# --- everything downstream sees the relabel: the property -----------------------------------------


def _check_against(buf: Any, want: dict[str, list[float]], n: int, gamma: float) -> None:
    """Every stored item's n-step return, samples, sequences and episodes against ``want``."""
    items = {i: et for i, et in _items().items() if et[0] in set(buf.get_episode_ids())}
    live = np.array(sorted(items), np.int64)
    assert buf.get_rewards(live).tolist() == [want[e][t] for e, t in items.values()]
    got = buf.get_transitions(live, n_step=n, gamma=gamma)
    plain = [_plain_n_step(want[e], t, n, gamma) for e, t in items.values()]
    np.testing.assert_allclose(got["rewards"], [r for r, _ in plain], rtol=1e-6, atol=1e-5)
    assert got["n_step"].tolist() == [m for _, m in plain]
    batch = buf.sample(32, n_step=(1, n + 1), gamma=gamma)
    for i, r, m in zip(*(batch[k].tolist() for k in ("indices", "rewards", "n_step"))):
        e, t = items[i]
        want_r, want_m = _plain_n_step(want[e], t, m, gamma)
        assert want_m == m
        assert r == pytest.approx(want_r, rel=1e-6, abs=1e-5)
    seq = buf.sample(4, batch_length_T=3, pad=True)
    real = seq["mask"]
    assert seq["rewards"][real].tolist() == [
        want[items[i][0]][items[i][1]] for i in seq["indices"][real].tolist()
    ]
    for chunk in buf.sample(4, sample_episodes=True):
        t0 = chunk.t_started
        assert chunk.get_rewards().tolist() == want[chunk.id_][t0 : t0 + len(chunk)]
    for ep in buf.get_episodes():
        assert ep.get_rewards().tolist() == want[ep.id_][ep.t_started :]


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    writes=st.lists(
        st.tuples(
            st.integers(0, 11),
            st.floats(-1e6, 1e6, allow_nan=False, width=32),
        ),
        max_size=16,
    ),
    kind=st.sampled_from(list(BUFFERS)),
    capacity=st.sampled_from([100, 9]),
    n=st.integers(1, 4),
    gamma=st.sampled_from([0.0, 0.5, 0.99, 1.0]),
    as_torch=st.booleans(),
)
def test_every_sample_after_a_relabel_equals_the_plain_reference(
    writes: list[tuple[int, float]],
    kind: str,
    capacity: int,
    n: int,
    gamma: float,
    as_torch: bool,
    tmp_path_factory: Any,
) -> None:
    buf = _buffer(kind, capacity)
    live = set(buf.get_episode_ids())
    want = _reference()
    picks = [i for i, _ in writes]
    values: Any = np.array([v for _, v in writes], np.float64)
    if as_torch:
        torch = pytest.importorskip("torch")
        values = torch.tensor(values)
    written = buf.set_rewards(values, picks)
    items = _items()
    for i, v in writes:  # the plain reference: one write at a time, later ones win
        e, t = items[i]
        if e in live:
            want[e][t] = float(np.float32(v))
    assert written == sum(items[i][0] in live for i in picks)
    _check_against(buf, want, n, gamma)
    restored = type(buf)(capacity)
    restored.set_state(buf.get_state())
    _check_against(restored, want, n, gamma)
    path = Path(tmp_path_factory.mktemp("saved")) / "buf"
    buf.save(path)
    _check_against(type(buf).load(path), want, n, gamma)


@pytest.mark.parametrize("kind", list(BUFFERS))
def test_a_relabel_moves_with_its_rows_when_later_adds_compact_them(kind: str) -> None:
    buf = _buffer(kind, capacity=12)
    assert buf.set_rewards(np.arange(12) * -1.0, np.arange(12)) == 12
    for k in range(6):  # evictions and compactions move the surviving rows
        buf.add(
            SingleAgentEpisode(
                f"x{k}",
                observations=[0.0, 1.0, 2.0],
                actions=[0, 1],
                rewards=[100.0 + k, 200.0 + k],
                extra_model_outputs={"v": np.zeros(2, np.float32)},
                len_lookback_buffer=0,
            )
        )
        ids = buf.get_episode_ids()
        for id_, first in (("e1", 4), ("e2", 7)):
            if id_ in ids:
                n = dict((e, m) for e, m, _ in LENGTHS)[id_]
                want = [-float(i) for i in range(first, first + n)]
                assert buf.get_rewards(np.arange(first, first + n)).tolist() == want
    assert buf.get_episodes()[-1].get_rewards().tolist() == [105.0, 205.0]
