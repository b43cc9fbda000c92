"""Torch dataset windows and n-step horizons go over an episode's pieces, not stop at them.

A runner's episode is written one chunk per ``write`` (one piece each): ``SequenceDataset``
gave no window across two pieces (44 CartPole episodes in 135 pieces: 0 windows of 16 steps
where the episodes hold 183, and a ``DataLoader`` that yielded nothing), and
``TransitionDataset``'s n-step horizons stopped at a piece's end where
``EpisodeReplayBuffer.from_dataset`` gives the full n steps. Items now equal those of the same
episodes written whole (in the order of each episode's first written piece); pieces that do
not continue one another (steps left out, a piece stored twice) stay apart.
"""

from __future__ import annotations

import pickle
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import tree  # noqa: E402
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

from episodes import SingleAgentEpisode  # noqa: E402
from episodes.io import DatasetWriter  # noqa: E402
from episodes.io.torch_data import SequenceDataset, TransitionDataset  # noqa: E402


def _episode(id_: str, n: int, end: str, seed: int) -> SingleAgentEpisode:
    """A numpy episode of ``n`` steps with distinct values everywhere, ending by ``end``."""
    rng = np.random.default_rng(seed)
    ep = SingleAgentEpisode(
        id_,
        observations=list(rng.normal(size=(n + 1, 2)).astype(np.float32)),
        actions=list(rng.integers(0, 5, n)),
        rewards=list(rng.normal(size=n)),
        extra_model_outputs={"vf": list(rng.normal(size=n).astype(np.float32))},
        terminated=end == "terminated",
        truncated=end == "truncated",
        len_lookback_buffer=0,
    )
    return ep.to_numpy()


def _pieces(
    ep: SingleAgentEpisode, cuts: list[int], lookback: int = 0, stepless_end: bool = False
) -> list[SingleAgentEpisode]:
    """``ep`` cut at ``cuts`` (each piece with up to ``lookback`` steps before it).

    ``stepless_end``: the last piece with steps is not done, a piece without steps after it
    ends the episode (a valid layout: a writer storing what a runner cut at the end).
    """
    bounds = [0, *cuts, len(ep)]
    out = [
        ep.slice(slice(a, b), len_lookback_buffer=min(lookback, a))
        for a, b in zip(bounds, bounds[1:])
    ]
    if stepless_end and (ep.is_terminated or ep.is_truncated):
        last = out[-1]
        last.is_terminated = last.is_truncated = False
        end = last.cut()
        end.is_terminated, end.is_truncated = ep.is_terminated, ep.is_truncated
        out.append(end.to_numpy())
    return [piece.to_numpy() for piece in out]


def _write(path: Path, pieces: list[SingleAgentEpisode], shard_bytes: int = 1 << 26) -> Path:
    with DatasetWriter(path, shard_bytes=shard_bytes, sync=False) as writer:
        writer.write_many(pieces)
    return path


def _items(data: Any) -> list[Any]:
    return [data[i] for i in range(len(data))]


def _same(got: list[Any], want: list[Any]) -> None:
    assert len(got) == len(want)
    for k, (a, b) in enumerate(zip(got, want)):
        assert sorted(a) == sorted(b), k
        leaves_a, leaves_b = tree.flatten(a), tree.flatten(b)
        assert len(leaves_a) == len(leaves_b), k
        for x, y in zip(leaves_a, leaves_b):
            assert type(x) is type(y), (k, x, y)
            assert np.asarray(x).dtype == np.asarray(y).dtype, (k, x, y)
            assert np.array_equal(x, y), (k, a, b)


def _datasets(path: Path, length: int, n_step: int, gamma: float, **kw: Any) -> list[Any]:
    return [
        SequenceDataset(path, length=length, **kw),
        TransitionDataset(path, n_step=n_step, gamma=gamma, **kw),
        TransitionDataset(path, **kw),
    ]


def _check_as_whole(
    root: Path,
    written: list[SingleAgentEpisode],
    episodes: list[SingleAgentEpisode],
    *,
    length: int,
    n_step: int,
    gamma: float = 0.5,
    shard_bytes: int = 1 << 26,
    **kw: Any,
) -> list[Any]:
    """The datasets over ``written`` (pieces) give the items of ``episodes`` written whole."""
    pieced = _write(root / "pieces", written, shard_bytes)
    whole = _write(root / "whole", episodes)
    got = _datasets(pieced, length, n_step, gamma, **kw)
    for a, b in zip(got, _datasets(whole, length, n_step, gamma)):
        _same(_items(a), _items(b))
    return got


def _windows(n: int, length: int) -> int:
    return max(0, n - length + 1)


# (name, [(episode length, end, cuts, lookback, stepless end)], write order, length, n_step)
# The write order lists (episode, piece) pairs; None writes each episode's pieces in turn.
CASES = [
    ("one piece", [(9, "terminated", [], 0, False)], None, 4, 3),
    ("two pieces", [(10, "terminated", [5], 0, False)], None, 8, 3),
    ("three pieces", [(11, "truncated", [3, 7], 0, False)], None, 6, 4),
    ("window exactly a piece", [(8, "terminated", [4], 0, False)], None, 4, 4),
    ("window the whole episode", [(8, "terminated", [2, 5], 0, False)], None, 8, 8),
    ("one-step pieces", [(5, "truncated", [1, 2, 3, 4], 0, False)], None, 3, 5),
    ("lookback pieces", [(12, "terminated", [4, 8], 2, False)], None, 5, 3),
    ("terminated last piece", [(7, "terminated", [3], 1, False)], None, 2, 3),
    ("truncated last piece", [(7, "truncated", [3], 1, False)], None, 2, 3),
    ("running last piece", [(7, "none", [3], 1, False)], None, 2, 3),
    ("stepless piece ends it", [(7, "terminated", [3], 0, True)], None, 3, 3),
    (
        "two episodes interleaved as a vector runner writes them",
        [(9, "terminated", [3, 6], 1, False), (8, "truncated", [3, 6], 1, False)],
        [(0, 0), (1, 0), (0, 1), (1, 1), (0, 2), (1, 2)],
        4,
        3,
    ),
    (
        "pieces written out of time order",
        [(9, "terminated", [3, 6], 0, False), (4, "none", [], 0, False)],
        [(1, 0), (0, 2), (0, 0), (0, 1)],
        5,
        2,
    ),
]


@pytest.mark.parametrize(
    ("specs", "order", "length", "n_step"),
    [pytest.param(*case[1:], id=case[0]) for case in CASES],
)
@pytest.mark.parametrize("shard_bytes", [1 << 26, 1], ids=["one shard", "a shard per piece"])
def test_items_are_those_of_the_episodes_written_whole(
    tmp_path, specs, order, length, n_step, shard_bytes
):
    episodes = [_episode(f"e{k}", *spec[:2], seed=k) for k, spec in enumerate(specs)]
    pieces = [_pieces(ep, *spec[2:]) for ep, spec in zip(episodes, specs)]
    if order is None:
        order = [(k, j) for k, p in enumerate(pieces) for j in range(len(p))]
    assert sorted(order) == sorted((k, j) for k, p in enumerate(pieces) for j in range(len(p)))
    firsts = list(dict.fromkeys(k for k, _ in order))  # episodes by their first piece written
    seq, nstep, _ = _check_as_whole(
        tmp_path,
        [pieces[k][j] for k, j in order],
        [episodes[k] for k in firsts],
        length=length,
        n_step=n_step,
        shard_bytes=shard_bytes,
        max_open_shards=1,
    )
    assert len(seq) == sum(_windows(len(ep), length) for ep in episodes)
    assert len(nstep) == sum(len(ep) for ep in episodes)


def test_a_runner_written_dataset_gives_every_window_to_a_data_loader(tmp_path):
    """The journey's symptom: every window of an episode spanning two pieces reaches a loader."""
    ep = _episode("e", 10, "terminated", seed=0)
    path = _write(tmp_path / "d", _pieces(ep, [5]))
    data = SequenceDataset(path, length=8)
    batches = list(DataLoader(data, batch_size=8))
    assert len(data) == 3 and len(batches) == 1
    assert batches[0]["obs"].shape == (3, 9, 2)
    assert np.array_equal(batches[0]["obs"][2].numpy(), ep.get_observations()[2:11])
    assert batches[0]["terminated"][:, -1].tolist() == [False, False, True]
    item = TransitionDataset(path, n_step=3, gamma=1.0)[3]
    assert item["n"] == 3 and np.array_equal(item["next_obs"], ep.get_observations(6))
    assert float(item["rewards"]) == pytest.approx(float(np.sum(ep.get_rewards()[3:6])))


# Pieces of one id that do not continue one another stay apart: no item crosses them.
APART = [
    # (name, piece slices of one 10-step terminated episode, windows of 3 steps)
    ("steps left out", [(0, 4), (6, 10)], [_windows(4, 3), _windows(4, 3)]),
    ("a piece stored twice", [(0, 5), (0, 5), (5, 10)], [_windows(5, 3), _windows(10, 3)]),
    ("steps stored twice", [(0, 6), (4, 10)], [_windows(6, 3), _windows(6, 3)]),
]


@pytest.mark.parametrize(("slices", "windows"), [pytest.param(*c[1:], id=c[0]) for c in APART])
def test_pieces_that_do_not_continue_one_another_stay_apart(tmp_path, slices, windows):
    ep = _episode("e", 10, "terminated", seed=1)
    pieces = [ep.slice(slice(a, b), len_lookback_buffer=0).to_numpy() for a, b in slices]
    data = SequenceDataset(_write(tmp_path / "d", pieces), length=3)
    assert len(data) == sum(windows)
    obs = ep.get_observations()
    starts = [a for (a, b), w in _runs_of(slices, windows) for a in range(a, a + w)]
    for item, t in zip(_items(data), starts):
        assert np.array_equal(item["obs"], obs[t : t + 4])
        assert item["terminated"].tolist() == [False, False, t + 3 == 10]


def _runs_of(slices: list[tuple[int, int]], windows: list[int]) -> list[Any]:
    """Each run's first step and its windows, in the order of the runs' first pieces."""
    if slices == [(0, 5), (0, 5), (5, 10)]:  # the second copy continues into [5, 10)
        return [((0, 5), windows[0]), ((0, 10), windows[1])]
    return [(s, w) for s, w in zip(slices, windows)]


def test_items_and_their_order_survive_pickling_and_repeat(tmp_path):
    ep, other = _episode("a", 9, "terminated", 0), _episode("b", 6, "truncated", 1)
    a, b = _pieces(ep, [4]), _pieces(other, [2])
    path = _write(tmp_path / "d", [a[0], b[0], a[1], b[1]])
    for data, again in zip(_datasets(path, 3, 2, 0.9), _datasets(path, 3, 2, 0.9)):
        _same(_items(pickle.loads(pickle.dumps(data))), _items(data))
        _same(_items(again), _items(data))


def test_a_pickle_of_an_older_build_keeps_its_piece_items(tmp_path):
    """A dataset pickled by a build before the joins (per-piece counts) reads as it counted."""
    ep = _episode("e", 6, "terminated", 2)
    path = _write(tmp_path / "d", _pieces(ep, [3]))
    data = TransitionDataset(path, n_step=2, gamma=1.0)
    state = data.__getstate__()
    del state["_runs"]
    state["lengths"] = np.array([3, 3], np.int64)
    state["flags"] = [(False, False), (True, False)]
    state["_ends"] = np.cumsum(state["lengths"])
    old = TransitionDataset.__new__(TransitionDataset)
    old.__setstate__(state)
    assert [old[i]["n"] for i in range(len(old))] == [2, 2, 1, 2, 2, 1]
    assert [old[i]["terminated"] for i in range(len(old))] == [False] * 4 + [True] * 2


@st.composite
def _layouts(draw: Any) -> tuple[Any, ...]:
    count = draw(st.integers(1, 3))
    specs = []
    for _ in range(count):
        n = draw(st.integers(1, 12))
        cuts = sorted(draw(st.sets(st.integers(1, n - 1), max_size=4))) if n > 1 else []
        end = draw(st.sampled_from(["terminated", "truncated", "none"]))
        specs.append((n, end, cuts, draw(st.integers(0, 2)), draw(st.booleans())))
    order = draw(st.permutations([(k, j) for k, s in enumerate(specs) for j in range(_count(s))]))
    return specs, order, draw(st.integers(1, 6)), draw(st.integers(1, 5))


def _count(spec: tuple[Any, ...]) -> int:
    n, end, cuts, _, stepless = spec
    return len(cuts) + 1 + (stepless and end != "none")


@pytest.mark.filterwarnings("ignore::episodes.io.torch_data.NoWindowsWarning")  # short runs
@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(layout=_layouts(), gamma=st.sampled_from([0.0, 0.5, 1.0]))
def test_random_pieces_in_any_order_give_the_whole_episodes_items(layout, gamma):
    specs, order, length, n_step = layout
    episodes = [_episode(f"e{k}", *spec[:2], seed=k) for k, spec in enumerate(specs)]
    pieces = [_pieces(ep, *spec[2:]) for ep, spec in zip(episodes, specs)]
    firsts = list(dict.fromkeys(k for k, _ in order))
    with tempfile.TemporaryDirectory() as root:
        _check_as_whole(
            Path(root),
            [pieces[k][j] for k, j in order],
            [episodes[k] for k in firsts],
            length=length,
            n_step=n_step,
            gamma=gamma,
        )
