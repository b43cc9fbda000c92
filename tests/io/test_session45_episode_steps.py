"""``TransitionDataset`` / ``SequenceDataset`` name items back as ``(episode ids, env times)``.

An offline-RL user found no way from a batch to its steps' episodes (hindsight relabelling,
debugging): items carry no id or time, where the replay buffers have ``episode_steps``. Both
torch datasets now have ``episode_steps(indices)`` with the replay contract; what it says must
be what a plain walk over ``read_episodes`` says, and the item's own observation (written to
hold ``(episode, t)``), whatever the layout of pieces.
"""

from __future__ import annotations

import pickle
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from episodes import SingleAgentEpisode  # noqa: E402
from episodes.io import DatasetError, DatasetWriter, read_episodes  # noqa: E402
from episodes.io.torch_data import (  # noqa: E402
    NoWindowsWarning,
    SequenceDataset,
    TransitionDataset,
)
from tests.io._pieces import numbered_piece  # noqa: E402

# A piece: (episode number, id, t_started, t_end, end): end "" (not done), "terminated" or
# "truncated". Observations are [episode number, t]: an item's obs says where it comes from.
Piece = tuple[int, Any, int, int, str]


def _piece(number: int, id_: Any, t0: int, t1: int, end: str) -> SingleAgentEpisode:
    return numbered_piece(id_, t0, t1, end, number)


def _write(path: Path, pieces: list[Piece]) -> Path:
    with DatasetWriter(path, sync=False) as writer:
        writer.write_many([_piece(*p) for p in pieces])
    return path


def _walk(path: Path, length: int | None) -> list[tuple[Any, int]]:
    """Each item's (id, t) by a plain walk over ``read_episodes``: ``length`` None for
    transitions, else windows of that many steps."""
    pieces = [
        (pos, ep.id_, ep.t_started, ep.t_started + len(ep), ep.is_terminated or ep.is_truncated)
        for pos, ep in enumerate(read_episodes(path))
    ]
    runs: list[list[tuple[int, Any, int, int, bool]]] = []
    for id_ in {p[1] for p in pieces}:
        mine = sorted((p for p in pieces if p[1] == id_), key=lambda p: (p[2], p[3], p[0]))
        for p in mine:  # a piece continues the one before it: starts where it stopped, not done
            last = runs[-1][-1] if runs else None
            if last is not None and last[1] == id_ and last[3] == p[2] and not last[4]:
                runs[-1].append(p)
            else:
                runs.append([p])
    runs.sort(key=lambda run: min(p[0] for p in run))  # in the order first written
    out = []
    for run in runs:
        t0, t1 = run[0][2], run[-1][3]
        starts = range(t0, t1) if length is None else range(t0, t1 - length + 1)
        out += [(run[0][1], t) for t in starts]
    return out


def _datasets(path: Path) -> list[tuple[Any, int | None]]:
    with warnings.catch_warnings():  # a layout whose runs are all shorter than 3 steps
        warnings.simplefilter("ignore", NoWindowsWarning)
        return [
            (TransitionDataset(path), None),
            (TransitionDataset(path, n_step=3, gamma=0.5), None),
            (SequenceDataset(path, length=1), 1),
            (SequenceDataset(path, length=3), 3),
        ]


def _check(path: Path) -> int:
    """Every dataset's ``episode_steps`` of every index equals the walk and the items."""
    numbers = {}
    for ep in read_episodes(path):
        if len(ep):
            numbers[repr(ep.id_)] = int(ep.observations[0][0])
    checked = 0
    for data, length in _datasets(path):
        want = _walk(path, length)
        assert len(data) == len(want)
        ids, t = data.episode_steps(np.arange(len(data)))
        assert ids.dtype == object and t.dtype == np.int64 and ids.shape == t.shape
        assert list(zip(ids.tolist(), t.tolist(), strict=True)) == want
        for i, (id_, when) in enumerate(want):
            assert type(ids[i]) is type(id_)  # a tuple id comes back a tuple
            obs = np.asarray(data[i]["obs"])
            first = obs if length is None else obs[0]
            assert first.tolist() == [numbers[repr(id_)], when]
        backwards = data.episode_steps(-1 - np.arange(len(data)))
        assert backwards[0].tolist() == ids[::-1].tolist()
        assert backwards[1].tolist() == t[::-1].tolist()
        checked += len(data)
    return checked


LAYOUTS: dict[str, list[Piece]] = {
    "whole episodes, str ids": [
        (1, "a", 0, 4, "terminated"),
        (2, "b", 0, 2, "truncated"),
        (3, "c", 0, 5, ""),
    ],
    "runner pieces, int ids, t_started > 0": [
        (1, 10, 5, 7, ""),
        (2, 20, 0, 2, ""),
        (1, 10, 7, 8, ""),
        (2, 20, 2, 6, "terminated"),
        (1, 10, 8, 12, "truncated"),
    ],
    "tuple ids, stepless end pieces": [
        (1, ("env", 0), 3, 6, ""),
        (1, ("env", 0), 6, 6, "terminated"),
        (2, ("env", 1), 0, 2, ""),
        (2, ("env", 1), 2, 4, ""),
        (2, ("env", 1), 4, 4, "truncated"),
    ],
    "pieces that do not continue: a gap, stored twice, after the end": [
        (1, "g", 0, 3, ""),
        (1, "g", 5, 8, ""),  # steps 3-4 left out
        (2, "d", 2, 5, ""),
        (2, "d", 2, 5, ""),  # stored twice
        (3, "e", 0, 2, "terminated"),
        (3, "e", 2, 4, ""),  # after the end
    ],
    "later piece written first, mixed id kinds": [
        (1, "m", 4, 7, "terminated"),
        (2, 5, 1, 3, ""),
        (1, "m", 0, 4, ""),
        (3, ("m",), 0, 3, ""),
        (2, 5, 3, 4, "truncated"),
    ],
}


@pytest.mark.parametrize("layout", LAYOUTS.values(), ids=LAYOUTS.keys())
def test_episode_steps_equal_a_walk_over_read_episodes(tmp_path, layout):
    assert _check(_write(tmp_path / "d", layout)) > 0


@st.composite
def _layouts(draw: Any) -> list[Piece]:
    pieces: list[Piece] = []
    kinds = draw(st.lists(st.sampled_from(["str", "int", "tuple"]), min_size=1, max_size=4))
    for number, kind in enumerate(kinds, 1):
        id_: Any = {"str": f"ep{number}", "int": number * 7, "tuple": ("t", number)}[kind]
        t0 = draw(st.integers(0, 6))
        steps = draw(st.integers(1, 7))
        cuts = sorted(draw(st.sets(st.integers(1, steps - 1), max_size=3)) if steps > 1 else [])
        end = draw(st.sampled_from(["", "terminated", "truncated"]))
        bounds = [t0, *(t0 + c for c in cuts), t0 + steps]
        mine = [(number, id_, a, b, "") for a, b in zip(bounds, bounds[1:])]
        if end and draw(st.booleans()):  # a stepless piece ends it
            mine.append((number, id_, t0 + steps, t0 + steps, end))
        elif end:
            mine[-1] = (*mine[-1][:4], end)
        if draw(st.booleans()):  # one that does not continue: a gap or a piece stored twice
            gap = draw(st.integers(0, 2))
            a = t0 + steps + gap if gap else mine[0][2]
            mine.append((number, id_, a, a + draw(st.integers(1, 3)), ""))
        pieces += mine
    return draw(st.permutations(pieces))


@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(layout=_layouts())
def test_episode_steps_property(tmp_path_factory, layout):
    _check(_write(tmp_path_factory.mktemp("d"), layout))


@pytest.fixture
def path(tmp_path):
    return _write(
        tmp_path / "d",
        [(1, ("a", 1), 10, 13, ""), (2, "b", 0, 2, "terminated"), (1, ("a", 1), 13, 15, "")],
    )  # transitions: ("a", 1) at 10..14, then "b" at 0, 1


TAKEN = {
    "int": (3, [(("a", 1), 13)]),
    "negative int": (-1, [("b", 1)]),
    "numpy int": (np.int32(0), [(("a", 1), 10)]),
    "0-d tensor": (torch.tensor(6), [("b", 1)]),
    "list": ([5, 0, -3], [("b", 0), (("a", 1), 10), (("a", 1), 14)]),
    "tuple": ((4, 4), [(("a", 1), 14)] * 2),
    "range": (range(4, 6), [(("a", 1), 14), ("b", 0)]),
    "int8 array": (np.array([-7, 1], np.int8), [(("a", 1), 10), (("a", 1), 11)]),
    "uint64 array": (np.array([6], np.uint64), [("b", 1)]),
    "int64 beside uint64": ([np.int64(-2), np.uint64(1)], [("b", 0), (("a", 1), 11)]),
    "tensor": (torch.tensor([-1, 2]), [("b", 1), (("a", 1), 12)]),
    "empty list": ([], []),
    "empty tensor": (torch.zeros(0, dtype=torch.int64), []),
}


@pytest.mark.parametrize(("indices", "want"), TAKEN.values(), ids=TAKEN.keys())
def test_index_kinds_taken(path, indices, want):
    data = TransitionDataset(path)
    ids, t = data.episode_steps(indices)
    assert ids.dtype == object and t.dtype == np.int64
    assert list(zip(ids.tolist(), t.tolist(), strict=True)) == want


def test_given_arrays_are_left_as_they_are(path):
    given = np.array([-1, -2])
    TransitionDataset(path).episode_steps(given)
    assert given.tolist() == [-1, -2]


REFUSED = {
    "bool": (True, TypeError, r"index must be an int, got bool \(True\)"),
    "numpy bool": (np.True_, TypeError, "index must be an int, got bool"),
    "float": (1.0, TypeError, r"index must be an int, got float \(1.0\)"),
    "str": ("1", TypeError, "index must be an int, got str"),
    "None": (None, TypeError, "index must be an int, got NoneType"),
    "0-d bool tensor": (torch.tensor(True), TypeError, "index must be an int, got Tensor"),
    "0-d float array": (np.array(1.0), TypeError, "index must be an int, got ndarray"),
    "out of range": (7, IndexError, "index 7 out of range for 7 items"),
    "negative out of range": (-8, IndexError, "index -8 out of range for 7 items"),
    "bool in a list": ([1, True], TypeError, r"index must be an int, got bool \(True\)"),
    "float in a list": ([0, 2.5], TypeError, r"index must be an int, got float \(2.5\)"),
    "bool array": (np.array([True, False]), TypeError, "indices must be ints, got an array"),
    "float array": (np.array([1.0]), TypeError, "indices must be ints, got an array of float64"),
    "bool tensor": (torch.tensor([True]), TypeError, "indices must be ints, got a tensor"),
    "float tensor": (torch.tensor([0.0]), TypeError, "indices must be ints, got a tensor"),
    "out of range in a list": ([0, 9, 8], IndexError, "index 9 out of range for 7 items"),
    "negative out of range in an array": (
        np.array([0, -9]),
        IndexError,
        "index -9 out of range for 7 items",
    ),
    "beyond int64": ([2**64 + 1], IndexError, "index 18446744073709551617 out of range"),
    "uint64 beyond int64": (
        np.array([2**63], np.uint64),
        IndexError,
        "index 9223372036854775808 out of range",
    ),
    "2-d list": ([[0, 1]], ValueError, r"one index or a 1-d sequence, got shape \(1, 2\)"),
    "2-d tensor": (torch.zeros(2, 2, dtype=torch.int64), ValueError, "got shape"),
}


@pytest.mark.parametrize(("indices", "error", "words"), REFUSED.values(), ids=REFUSED.keys())
def test_refused_indices(path, indices, error, words):
    for data, _ in _datasets(path):
        with pytest.raises(error, match=words.replace("for 7 items", f"for {len(data)} items")):
            data.episode_steps(indices)
        if (
            not isinstance(indices, list) and getattr(indices, "ndim", 0) == 0
        ):  # as an item's index is refused, word for word
            with pytest.raises(error) as by_item:
                data[indices]
            with pytest.raises(error) as by_steps:
                data.episode_steps(indices)
            assert str(by_steps.value) == str(by_item.value)


def test_after_pickle_and_in_a_data_loader(path):
    data = SequenceDataset(path, length=2)
    before = pickle.dumps(data)
    want = data.episode_steps(range(len(data)))
    assert len(pickle.dumps(data)) == len(before)  # nothing kept for it goes to workers
    copy = pickle.loads(pickle.dumps(data))
    got = copy.episode_steps(range(len(copy)))
    assert got[0].tolist() == want[0].tolist() and got[1].tolist() == want[1].tolist()
    assert want[1].tolist() == [10, 11, 12, 13, 0]

    class Indexed(torch.utils.data.Dataset):
        def __init__(self, data):
            self.data = data

        def __len__(self):
            return len(self.data)

        def __getitem__(self, i):
            return i, self.data[i]

    loader = torch.utils.data.DataLoader(Indexed(copy), batch_size=3, shuffle=True)
    for indices, batch in loader:
        ids, t = copy.episode_steps(indices)
        assert batch["obs"][:, 0, 1].tolist() == t.tolist()
        assert batch["obs"][:, 0, 0].tolist() == [1 if i == ("a", 1) else 2 for i in ids]


def test_closed_dataset_says_what_items_say(path):
    for data, _ in _datasets(path):
        data.episode_steps([0])
        data.close()
        with pytest.raises(DatasetError) as by_item:
            data[0]
        with pytest.raises(DatasetError) as by_steps:
            data.episode_steps([0])
        assert "is closed: make a new one" in str(by_steps.value)
        assert str(by_steps.value) == str(by_item.value)


def test_empty_dataset(tmp_path):
    path = _write(tmp_path / "d", [(1, "a", 0, 2, "")])
    with pytest.warns(NoWindowsWarning):
        data = SequenceDataset(path, length=5)
    ids, t = data.episode_steps([])
    assert ids.dtype == object and t.dtype == np.int64 and len(ids) == len(t) == 0
    with pytest.raises(IndexError, match="index 0 out of range for 0 items"):
        data.episode_steps(0)
