"""Behaviour that hand-made mutants of ``episodes.io.nstep``, ``episodes.io.returns``,
``episodes.io.copy_storage``, ``episodes.io.joins`` and ``episodes.io.piece_windows`` showed no
test pinned (session 47, fourth batch).

Each test fails with a mutant (named beside it) applied, and passes on the code as it is.
Datasets are written with ``DatasetWriter`` into ``tmp_path``; what ``TransitionDataset``,
``nstep_columns``, ``filter_dataset``, ``merge``, ``piece_problems`` and ``PieceJoins`` give
back is compared with plain-Python references computed from the episodes written.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter
from episodes.io.torch_data import TransitionDataset


def _episode(id_: Any, rewards: Any, *, t0: int = 0, **flags: bool) -> SingleAgentEpisode:
    """A numpy'd episode whose observations count its steps from ``t0`` (no lookback)."""
    n = len(rewards)
    return SingleAgentEpisode(
        id_,
        observations=np.arange(t0, t0 + n + 1, dtype=np.int64),
        actions=np.zeros(n, np.int64),
        rewards=rewards,
        t_started=t0,
        len_lookback_buffer=0,
        **flags,
    ).to_numpy()


def _write(path: Path, pieces: list[SingleAgentEpisode], **kwargs: Any) -> Path:
    with DatasetWriter(path, **kwargs) as w:
        w.write_many(pieces)
    return path


def _nstep_sums(rewards: list[float], n: int, gamma: float) -> list[float]:
    """Per step: ``sum_j gamma**j * r_{t+j}`` over up to ``n`` steps, added in step order,
    terms of weight 0 left out (a plain loop over the episode's rewards)."""
    out = []
    for t in range(len(rewards)):
        total = 0.0
        for j in range(min(n, len(rewards) - t)):
            weight = float(gamma) ** j
            if weight == 0.0:
                break
            total = total + weight * float(rewards[t + j]) if j else weight * float(rewards[t])
        out.append(total)
    return out


def _items(data: TransitionDataset) -> list[dict[str, Any]]:
    return [data[i] for i in range(len(data))]


# ------------------------------------------------------------------ io.nstep


# mutants: `kind in "bif"` (unsigned ints refused), `kind in "iuf"` (bools refused)
@pytest.mark.parametrize(
    "rewards",
    [
        pytest.param(np.array([1, 255, 7, 0], np.uint8), id="uint8"),
        pytest.param(np.array([2**40, 3, 2**33, 1], np.uint64), id="uint64"),
        pytest.param(np.array([True, False, True, True]), id="bool"),
        pytest.param(np.array([-128, 127, -1, 5], np.int8), id="int8"),
        pytest.param(np.array([0.1, 0.7, -2.5, 1e-3], np.float32), id="float32"),
    ],
)
def test_nstep_rewards_of_every_real_kind_sum_as_float64(tmp_path, rewards):
    data = TransitionDataset(_write(tmp_path / "d", [_episode("a", rewards)]), n_step=3, gamma=0.5)
    got = [item["rewards"] for item in _items(data)]
    assert [np.asarray(g).dtype for g in got] == [np.float64] * len(rewards)
    assert [float(g) for g in got] == _nstep_sums(rewards.tolist(), 3, 0.5)


# mutant: `terms.sum(axis=0)` (numpy's pairwise sum, not step order, for 8 terms or more)
def test_long_nstep_sums_add_their_terms_in_step_order(tmp_path):
    """Ten terms whose float sum depends on the order: 1e16 swallows each 1 added to it one
    by one, as the other readers (and a plain loop) add them."""
    rewards = [1e16, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, -1e16, 1.0, 1.0]
    data = TransitionDataset(_write(tmp_path / "d", [_episode("a", rewards)]), n_step=10, gamma=1.0)
    got = [float(item["rewards"]) for item in _items(data)]
    assert got == _nstep_sums(rewards, 10, 1.0)
    assert got[0] == 1.0  # 1e16 + 1 == 1e16 in float64: only the last 1 survives


# mutants: `return values` for an object column (no float64 cast), `except ZeroDivisionError`
# (the OverflowError escapes), `numbers.Integral` (a float beside a huge int read as complex)
@pytest.mark.parametrize(
    "rewards",
    [
        pytest.param([2**1100, 1, 2], id="huge int beside ints"),
        pytest.param([2**1100, 0.5, 3], id="huge int beside a float"),
        pytest.param([1, -(2**1030), 2], id="huge negative int"),
    ],
)
def test_nstep_rows_refuse_an_int_reward_beyond_float_range(rewards):
    pytest.importorskip("ray")
    from episodes.distributed import nstep_columns

    episode = SingleAgentEpisode(
        "a", observations=[0, 1, 2, 3], actions=[0, 0, 0], rewards=rewards, len_lookback_buffer=0
    ).to_numpy()
    with pytest.raises(ValueError, match="an int beyond float range"):
        nstep_columns(episode, 2, 0.5)


# mutants: `any(isinstance(v, numbers.Real)` (a huge int beside a string cast, a ValueError),
# `all(isinstance(v, numbers.Complex)` (a complex beside None not named as complex)
@pytest.mark.parametrize(
    "more, match",
    [
        pytest.param([2**70, "x"], "dtype object", id="huge int beside a string"),
        pytest.param(["x", 2**1100], "dtype object", id="string beside a huge int"),
        pytest.param([1j, None], "complex", id="complex beside None"),
        pytest.param([1 + 2j, 3j], "complex", id="complex numbers"),
    ],
)
def test_nstep_rows_refuse_continuing_rewards_that_are_no_real_numbers(more, match):
    pytest.importorskip("ray")
    from episodes.distributed import nstep_columns

    episode = SingleAgentEpisode(
        "a", observations=[0, 1], actions=[0], rewards=[1.0], len_lookback_buffer=0
    ).to_numpy()
    rewards = np.empty(len(more), dtype=object)
    rewards[:] = more
    after = {"observations": np.array([2, 3, 4]), "rewards": rewards}
    with pytest.raises(TypeError, match=match):
        nstep_columns(episode, 3, 0.5, after=after)


# ------------------------------------------------------------------ io.piece_windows


def _piece(id_: Any, t0: int, t1: int, base: int = 0, **flags: bool) -> SingleAgentEpisode:
    """Steps ``[t0, t1)`` of episode ``id_``: observation ``base + t`` at ``t``, reward ``t``."""
    return SingleAgentEpisode(
        id_,
        observations=np.arange(base + t0, base + t1 + 1, dtype=np.int64),
        actions=np.zeros(t1 - t0, np.int64),
        rewards=np.arange(t0, t1, dtype=np.float64),
        t_started=t0,
        len_lookback_buffer=0,
        **flags,
    ).to_numpy()


def _reference(runs: list[tuple], n: int, gamma: float) -> list[tuple]:
    """Per step of each run ``(base, t0, t1, terminated, truncated)`` of ``_piece`` steps, in
    order: ``(obs, next_obs, reward, n, terminated, truncated)`` by a plain loop."""
    out = []
    for base, t0, t1, terminated, truncated in runs:
        sums = _nstep_sums([float(t) for t in range(t0, t1)], n, gamma)
        for t in range(t0, t1):
            k = min(n, t1 - t)
            end = t + k == t1
            out.append(
                (base + t, base + t + k, sums[t - t0], k, end and terminated, end and truncated)
            )
    return out


def _read(data: TransitionDataset) -> list[tuple]:
    keys = ("obs", "next_obs", "rewards", "n", "terminated", "truncated")
    kinds = (int, int, float, int, bool, bool)
    return [tuple(f(d[k]) for f, k in zip(kinds, keys)) for d in _items(data)]


T, U = {"terminated": True}, {"truncated": True}

# name: (pieces (id, t0, t1, base, flags) in manifest order, runs (base, t0, t1, terminated,
# truncated) in the order their items come)
LAYOUTS = {
    # mutant: `np.maximum.reduceat` (runs ordered by their last piece, not their first)
    "runs in the order of their first piece": (
        [
            ("a", 0, 2, 0, {}),
            ("b", 0, 3, 100, T),
            ("a", 2, 4, 0, {}),
            ("c", 0, 1, 200, U),
            ("a", 4, 5, 0, T),
        ],
        [(0, 0, 5, True, False), (100, 0, 3, True, False), (200, 0, 1, False, True)],
    ),
    # mutant: `(False, raw)` (a str id keyed as the other id whose key reads the same)
    "a str id and an int id with the same key text": (
        [("int:1", 0, 2, 0, {}), (1, 0, 2, 100, {}), ("int:1", 2, 4, 0, {}), (1, 2, 4, 100, {})],
        [(0, 0, 4, False, False), (100, 0, 4, False, False)],
    ),
    # mutant: lexsort without `t1` (pieces starting at one t ordered by manifest position)
    "a stepless piece at the start stored after the first steps": (
        [("a", 0, 2, 0, {}), ("a", 0, 0, 0, {}), ("a", 2, 4, 0, U)],
        [(0, 0, 4, False, True)],
    ),
    "many interleaved runs": (
        [(f"e{i}", t, t + 1, 100 * i, {}) for t in range(6) for i in range(12)],
        [(100 * i, 0, 6, False, False) for i in range(12)],
    ),
    # mutant: `kind="quicksort"` (the pieces of a run reordered when the runs are ranked: an
    # id's runs, split by a missing step, lie apart in the run order)
    "runs of one id apart in the run order": (
        [(f"e{i}", t, t + 1, 100 * i, {}) for t in range(6) for i in range(4)]
        + [(f"e{i}", t, t + 1, 100 * i, {}) for t in range(7, 13) for i in range(4)],
        [(100 * i, 0, 6, False, False) for i in range(4)]
        + [(100 * i, 7, 13, False, False) for i in range(4)],
    ),
    # mutants: `done = terminated` / `done = truncated` (steps stored after a piece that ended
    # the episode joined onto it): such a piece starts a run of its own
    "steps after a truncated piece": (
        [("a", 0, 2, 0, U), ("a", 2, 4, 0, {})],
        [(0, 0, 2, False, True), (0, 2, 4, False, False)],
    ),
    "steps after a terminated piece": (
        [("a", 0, 2, 0, T), ("a", 2, 4, 0, U)],
        [(0, 0, 2, True, False), (0, 2, 4, False, True)],
    ),
}


@pytest.mark.parametrize("name", list(LAYOUTS))
@pytest.mark.parametrize("n_step", [1, 3])
def test_transitions_go_over_each_episode_its_pieces_make(tmp_path, name, n_step):
    pieces, runs = LAYOUTS[name]
    written = [_piece(id_, a, b, base, **flags) for id_, a, b, base, flags in pieces]
    data = TransitionDataset(_write(tmp_path / "d", written), n_step=n_step, gamma=0.5)
    assert _read(data) == _reference(runs, n_step, 0.5)


# ------------------------------------------------------------------ io.returns


def _kept(tmp_path: Path, pieces: list[SingleAgentEpisode], **bounds: Any) -> list[Any]:
    """The ids ``filter_dataset`` keeps of a dataset of ``pieces`` (sorted by their repr)."""
    from episodes.io import filter_dataset, read_episodes

    src = _write(tmp_path / "src", pieces)
    dst = tmp_path / "dst"
    filter_dataset(src, dst, **bounds)
    return sorted({piece.id_ for piece in read_episodes(dst)}, key=repr)


def _rewards_piece(id_: Any, t0: int, rewards: list[Any]) -> SingleAgentEpisode:
    n = len(rewards)
    return SingleAgentEpisode(
        id_,
        observations=list(range(t0, t0 + n + 1)),
        actions=[0] * n,
        rewards=rewards,
        t_started=t0,
        len_lookback_buffer=0,
    )


BIG = 2**1100  # beyond float range: the manifest holds no return for its piece

# name: (pieces (id, t0, rewards), bounds, ids kept)
RETURN_CASES = {
    # mutant: `plus=0` (an episode's return summed over its last piece alone)
    "huge ints cancelling across pieces": (
        [("a", 0, [BIG, 1]), ("a", 2, [-BIG, 4]), ("b", 0, [BIG])],
        {"min_return": 4.5, "max_return": 5.5},
        ["a"],
    ),
    # mutant: each piece's float rewards summed exactly, not as its stored (float) return
    "a float piece counts as its stored return": (
        [("a", 0, [BIG]), ("a", 1, [-BIG]), ("a", 2, [0.1, 0.2])],
        {"min_return": 0.1 + 0.2},
        ["a"],
    ),
    # mutant: `special = number` (inf then -inf not NaN, so a bound passed)
    "inf and -inf in one piece pass no bound": (
        [("a", 0, [float("inf"), float("-inf")]), ("b", 0, [1.0])],
        {"max_return": 10.0},
        ["b"],
    ),
    "inf and -inf in two pieces pass no bound": (
        [("a", 0, [float("inf")]), ("a", 1, [float("-inf")]), ("b", 0, [BIG, -BIG])],
        {"max_return": 10.0},
        ["b"],
    ),
    # mutant: `if not math.isfinite(number)` (a finite float beside huge ints taken as special)
    "a float beside huge ints": (
        [("a", 0, [BIG, 0.5]), ("a", 2, [-BIG]), ("b", 0, [BIG, 0.5, -BIG, 2.0])],
        {"min_return": 0.25, "max_return": 0.75},
        ["a"],
    ),
    "-inf beside huge ints passes a max bound": (
        [("a", 0, [BIG, float("-inf")]), ("b", 0, [BIG])],
        {"max_return": 0.0},
        ["a"],
    ),
}


@pytest.mark.parametrize("name", list(RETURN_CASES))
def test_filter_bounds_compare_each_episodes_exact_return(tmp_path, name):
    pieces, bounds, kept = RETURN_CASES[name]
    written = [_rewards_piece(id_, t0, rewards) for id_, t0, rewards in pieces]
    assert _kept(tmp_path, written, **bounds) == kept


# mutant: `if not len(kept): pass` (a dataset of pieces without steps makes one run)
@pytest.mark.parametrize(
    "pieces",
    [
        pytest.param([("a", 0, 0, 0, {})], id="one stepless piece"),
        pytest.param([("a", 0, 0, 0, {}), ("b", 3, 3, 9, T)], id="stepless pieces of two ids"),
        pytest.param([], id="no pieces"),
    ],
)
def test_a_dataset_without_steps_gives_no_transitions(tmp_path, pieces):
    written = [_piece(id_, a, b, base, **flags) for id_, a, b, base, flags in pieces]
    for n_step in (1, 2):
        data = TransitionDataset(_write(tmp_path / f"d{n_step}", written), n_step=n_step)
        assert len(data) == 0
        assert _read(data) == []


# ------------------------------------------------------------------ io.joins


def _joins_piece(id_: Any, t0: int, t1: int, base: int = 0, extras: bool = False, **flags: bool):
    piece = _piece(id_, t0, t1, base, **flags)
    if not extras:
        return piece
    return SingleAgentEpisode(
        id_,
        observations=piece.get_observations(),
        actions=piece.get_actions(),
        rewards=piece.get_rewards(),
        extra_model_outputs={"v": np.zeros(t1 - t0, np.float32)},
        t_started=t0,
        len_lookback_buffer=0,
        **flags,
    ).to_numpy()


def _check_all(path: Path, order: list[int]) -> tuple[list[str], int]:
    """``PieceJoins`` fed every piece of ``path`` in ``order``: its problems, what it holds."""
    from episodes.io import PieceJoins, read_episodes

    pieces = list(read_episodes(path))
    joins = PieceJoins.of(path)
    problems = [p for i in order for p in joins.check(i, pieces[i])]
    return problems, joins.pending


# name: (pieces (id, t0, t1, base, extras, flags) in manifest order, piece_problems' list,
# PieceJoins' problems)
JOIN_CASES = {
    # mutant: pieces sorted by (t_started, position) (a stepless first piece stored second)
    "a stepless piece at the start stored after the first steps": (
        [("a", 0, 3, 0, False, {}), ("a", 0, 0, 0, False, {})],
        [],
        [],
    ),
    # mutant: `end = b` (a stepless piece inside stored steps moves the end back)
    "a stepless piece inside stored steps": (
        [("a", 0, 4, 0, False, {}), ("a", 2, 2, 2, False, {}), ("a", 4, 6, 0, False, {})],
        ["episode 'a': a piece at t=2 lies inside stored steps"],
        [],
    ),
    # mutant: `ended = done` (a stepless piece after the end forgets it)
    "steps after a stepless piece after the end": (
        [("a", 0, 2, 0, False, T), ("a", 2, 2, 0, False, {}), ("a", 5, 6, 0, False, {})],
        [
            "episode 'a': a piece at t=2 follows its end",
            "episode 'a': steps from t=5 follow its end",
        ],
        [],
    ),
    # mutants: pieces after one that ended the episode, or after missing steps, taken as its
    # neighbours (their observations then compared)
    "steps after a terminated piece, another observation": (
        [("a", 0, 2, 0, False, T), ("a", 2, 4, 50, False, {})],
        ["episode 'a': steps from t=2 follow its end"],
        [],
    ),
    # mutant: `done = row.terminated` (a truncated piece taken as not ending the episode)
    "steps after a truncated piece, another observation": (
        [("a", 0, 2, 0, False, U), ("a", 2, 4, 50, False, {})],
        ["episode 'a': steps from t=2 follow its end"],
        [],
    ),
    "steps after missing steps, another observation": (
        [("a", 0, 2, 0, False, {}), ("a", 3, 5, 50, False, {})],
        ["episode 'a': steps [2, 3) are missing"],
        [],
    ),
    # mutant: new extra-model-output keys refused even while the episode has no steps
    "extras first given after a stepless piece": (
        [("a", 0, 0, 0, False, {}), ("a", 0, 2, 0, True, {}), ("a", 2, 3, 0, True, {})],
        [],
        [],
    ),
    # mutant: a stepless piece must give every key the episode records
    "a stepless piece without the extras before it": (
        [("a", 0, 2, 0, True, {}), ("a", 2, 2, 0, False, U)],
        [],
        [],
    ),
    "a piece with steps without the extras before it": (
        [("a", 0, 2, 0, True, {}), ("a", 2, 3, 0, False, {})],
        [],
        [
            "episode 'a': piece at t=2 has other extra-model-output keys ([]) than its "
            "predecessor (['v'])"
        ],
    ),
}


@pytest.mark.parametrize("name", list(JOIN_CASES))
@pytest.mark.parametrize("order", ["manifest", "reversed"])
def test_piece_checks_report_what_keeps_pieces_from_joining(tmp_path, name, order):
    from episodes.io import piece_problems

    pieces, problems, joins = JOIN_CASES[name]
    written = [_joins_piece(i, a, b, base, extras, **f) for i, a, b, base, extras, f in pieces]
    path = _write(tmp_path / "d", written)
    indices = list(range(len(pieces)))
    assert piece_problems(path) == problems
    assert _check_all(path, indices if order == "manifest" else indices[::-1]) == (joins, 0)


# ------------------------------------------------------------------ io.copy_storage


def _storage(path: Path) -> set[tuple[str, Any]]:
    """Each listed shard's (data format, compression), as its index records them."""
    import json

    from episodes.io import data_files

    found = set()
    for f in data_files(path):
        data = json.loads(f.with_suffix(".json").read_text())["data"]
        found.add((data["format"], data["compression"]))
    return found


def _copy(kind: str, src: Path, dst: Path, **kwargs: Any) -> list[Path]:
    from episodes.io import filter_dataset, merge, split

    if kind == "merge":
        merge([src], dst, **kwargs)
        return [dst]
    if kind == "split":
        split(src, dst / "train", dst / "val", fraction=0.5, seed=3, **kwargs)
        return [dst / "train", dst / "val"]
    filter_dataset(src, dst, min_length=0, **kwargs)
    return [dst]


# name: (the source's writer kwargs, the copy's kwargs, the storage expected)
STORAGE_CASES = {
    # mutant: `comp = found_comp` (a compression given ignored while the format is "same")
    "zstd given, the format kept": ({}, {"compression": "zstd"}, ("arrow", "zstd")),
    "none given, the format kept": (
        {"data_format": "parquet", "compression": "zstd"},
        {"compression": None},
        ("parquet", None),
    ),
    "parquet given, the compression kept": (
        {"compression": "zstd"},
        {"data_format": "parquet"},
        ("parquet", "zstd"),
    ),
}


@pytest.mark.parametrize("kind", ["merge", "split", "filter"])
@pytest.mark.parametrize("name", list(STORAGE_CASES))
def test_copies_take_what_is_given_and_keep_the_rest(tmp_path, name, kind):
    source, given, expected = STORAGE_CASES[name]
    src = _write(tmp_path / "src", [_piece(f"e{i}", 0, 2, 10 * i) for i in range(6)], **source)
    outs = _copy(kind, src, tmp_path / "out", **given)
    assert set().union(*map(_storage, outs)) == {expected}


def _actions_piece(t0: int, actions: Any) -> SingleAgentEpisode:
    n = len(actions)
    return SingleAgentEpisode(
        "a",
        observations=np.arange(t0, t0 + n + 1),
        actions=actions,
        rewards=np.zeros(n),
        t_started=t0,
        len_lookback_buffer=0,
    ).to_numpy()


# name: (the first piece's actions, the second's, whether load_episode joins them)
ACTION_JOINS = {
    # mutant: the layouts compared without their nesting (other keys taken as the same layout)
    "other keys": ([{"x": 1}, {"x": 2}], [{"y": 1}, {"y": 2}], False),
    # mutant: the layouts compared by dtype kind (int8 taken as int64's layout)
    "int64 values an int8 column cannot take": (
        np.array([1, 2], np.int8),
        np.array([1000, 2], np.int64),
        False,
    ),
    "int64 values an int8 column takes": (
        np.array([1, 2], np.int8),
        np.array([3, 4], np.int64),
        True,
    ),
    "int32 onto int64": (np.array([1, 2], np.int64), np.array([3, 4], np.int32), True),
    "floats onto ints": (np.array([1, 2]), np.array([0.5, 1.5]), False),
}


@pytest.mark.parametrize("name", list(ACTION_JOINS))
def test_piece_joins_report_the_joins_load_episode_refuses(tmp_path, name):
    from episodes.io import CorruptDatasetError, load_episode

    first, second, joins = ACTION_JOINS[name]
    path = _write(tmp_path / "d", [_actions_piece(0, first), _actions_piece(2, second)])
    problems, pending = _check_all(path, [0, 1])
    assert pending == 0
    if joins:
        assert problems == []
        assert len(load_episode(path, "a")) == 4
    else:
        assert [p.split(": cannot concat")[0] for p in problems] == [
            "episode 'a': piece at t=2 does not join its predecessor"
        ]
        with pytest.raises(CorruptDatasetError, match="do not join at t=2"):
            load_episode(path, "a")


# mutant: a tried join records the piece's layouts, not the joined episode's (a third piece
# then compared with the second's int64 column, not the first's int8 one)
def test_a_third_piece_joins_onto_the_first_pieces_columns(tmp_path):
    from episodes.io import CorruptDatasetError, load_episode

    actions = [np.array([1, 2], np.int8), np.array([3, 4], np.int64), np.array([1000], np.int64)]
    path = _write(tmp_path / "d", [_actions_piece(t, a) for t, a in zip([0, 2, 4], actions)])
    for order in ([0, 1, 2], [2, 1, 0]):
        problems, pending = _check_all(path, order)
        assert [p.split(": cannot concat")[0] for p in problems] == [
            "episode 'a': piece at t=4 does not join its predecessor"
        ]
        assert pending == 0
    with pytest.raises(CorruptDatasetError, match="do not join at t=4"):
        load_episode(path, "a")


# mutant: the observations compared in the joined episode's space alone (None here), not in
# the next piece's where the first piece has none: a list-mode float row then differs from
# the float32 row of a Box piece
def test_a_piece_with_a_space_joins_a_list_piece_without_one(tmp_path):
    import gymnasium as gym

    from episodes.io import load_episode

    box = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    first = SingleAgentEpisode(
        "a",
        observations=[[0.0, 0.0], [0.0, 0.1]],
        actions=[0],
        rewards=[0.0],
        len_lookback_buffer=0,
    )
    second = SingleAgentEpisode(
        "a",
        observations=np.float32([[0.0, 0.1], [0.5, 0.5]]),
        actions=[0],
        rewards=[0.0],
        t_started=1,
        observation_space=box,
        len_lookback_buffer=0,
    ).to_numpy()
    path = _write(tmp_path / "d", [first, second])
    assert _check_all(path, [0, 1]) == ([], 0)
    assert _check_all(path, [1, 0]) == ([], 0)
    assert len(load_episode(path, "a")) == 2


def _f32_piece(t0: int, rows: Any, space: Any = None, extras: dict | None = None):
    n = len(rows) - 1
    return SingleAgentEpisode(
        "a",
        observations=np.float32(rows).reshape(n + 1, 2),
        actions=np.zeros(n, np.int64),
        rewards=np.zeros(n),
        extra_model_outputs=extras,
        t_started=t0,
        observation_space=space,
        len_lookback_buffer=0,
    ).to_numpy()


# mutant: the same layouts taken without a trial for a piece without steps too (the episode
# then held as that stepless piece, onto which new extra-model-output keys pass)
def test_new_extra_keys_after_a_stepless_piece_of_the_same_layout_are_reported(tmp_path):
    from episodes.io import CorruptDatasetError, load_episode

    v = np.zeros(2, np.float32)
    first = _f32_piece(0, [[0, 0], [1, 1], [2, 2]], extras={"v": v})
    stepless = first[2:2]  # a slice: the first piece's layouts, no steps
    pieces = [first, stepless, _f32_piece(2, [[2, 2], [3, 3]], extras={"v": v[:1], "w": v[:1]})]
    path = _write(tmp_path / "d", pieces)
    want = [
        "episode 'a': piece at t=2 has other extra-model-output keys (['v', 'w']) than its "
        "predecessor (['v'])"
    ]
    assert _check_all(path, [0, 1, 2]) == (want, 0)
    with pytest.raises(CorruptDatasetError, match="do not join at t=2"):
        load_episode(path, "a")


# mutant: the same layouts joined keep the latest piece's spaces, not the first piece's (a
# list row then compared in the second piece's float32 Box, not as load_episode compares it)
def test_pieces_compare_in_the_first_pieces_spaces(tmp_path):
    import gymnasium as gym

    from episodes.io import CorruptDatasetError, load_episode

    box = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    third = SingleAgentEpisode(
        "a",
        observations=[[0.1, 0.1], [0.5, 0.5]],
        actions=[0],
        rewards=[0.0],
        t_started=2,
        len_lookback_buffer=0,
    )
    pieces = [
        _f32_piece(0, [[0, 0], [0.5, 0.5]]),
        _f32_piece(1, [[0.5, 0.5], [0.1, 0.1]], space=box),
        third,
    ]
    path = _write(tmp_path / "d", pieces)
    want = ["episode 'a': piece at t=2 does not start with its predecessor's last observation"]
    assert _check_all(path, [0, 1, 2]) == (want, 0)
    with pytest.raises(CorruptDatasetError, match="do not join at t=2"):
        load_episode(path, "a")


# mutant: only the first shard's index of each source read (a source's later shards, of
# another compression, unseen)
@pytest.mark.parametrize("kind", ["merge", "filter"])
def test_a_source_whose_shards_differ_is_copied_uncompressed(tmp_path, kind):
    src = _write(tmp_path / "src", [_piece("a", 0, 2)], compression="zstd")
    with DatasetWriter(src, compression=None) as w:  # appends a shard of its own
        w.write(_piece("b", 0, 2, 10))
    assert _storage(src) == {("arrow", "zstd"), ("arrow", None)}
    assert set().union(*map(_storage, _copy(kind, src, tmp_path / "out"))) == {("arrow", None)}


# Every real number is a numbers.Complex too: rewards holding no complex number were refused
# as "complex ones" when they held an int beyond int64 beside something no number.
SUMMABLE_REFUSALS = {
    "huge int beside a string": ([2**70, "x"], "got dtype object"),
    "float beside None": ([0.5, None], "got dtype object"),
    "complex beside None": ([1j, None], "got complex ones (dtype object)"),
    "complex beside a huge int": ([2**70, 1j], "got complex ones (dtype object)"),
}


@pytest.mark.parametrize("case", SUMMABLE_REFUSALS)
def test_summable_rewards_say_complex_only_where_a_reward_is(case: str) -> None:
    from episodes.io.nstep import summable_rewards

    values, words = SUMMABLE_REFUSALS[case]
    rewards = np.empty(len(values), dtype=object)
    rewards[:] = values
    with pytest.raises(TypeError, match=re.escape(words)):
        summable_rewards(rewards)
