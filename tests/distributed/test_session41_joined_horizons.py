"""Ray read tasks give n-step horizons across an episode's stored pieces, as the torch readers.

A runner writes an episode one ``sample()`` at a time: one piece per write, each continuing the
one before. ``TransitionDataset`` (and the episode written whole) sums a step's n-step rewards
across those pieces; the read tasks of ``read_transitions`` ended every horizon at its piece's
end, so every piece border shortened them. Now the driver finds each piece's continuation in
the manifest (``piece_continuations``) and the read task reads the first ``n_step - 1`` steps
of the continuing piece(s) (``read_continuations``) for ``nstep_columns(..., after=...)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

pytest.importorskip("ray")

from episodes import SingleAgentEpisode  # noqa: E402
from episodes.distributed import EpisodeDatasource, nstep_columns, read_transitions  # noqa: E402
from episodes.io import DatasetWriter, EpisodeWriter, dataset_info  # noqa: E402

GAMMA = 0.9


def _episode(name: str, base: float, n: int, end: str, *, nested: bool = False, seed: int = 0):
    """``n`` steps; observation ``base + t`` (unique over the test's episodes), random rewards."""
    rng = np.random.default_rng(seed)
    obs: Any = base + np.arange(n + 1, dtype=np.float64)
    if nested:
        obs = {"pos": obs.astype(np.float32), "id": np.arange(n + 1, dtype=np.int64)}
        rewards = rng.normal(size=(n, 2))  # vector rewards sum per component
    else:
        rewards = rng.normal(size=n)
    return {
        "id": name,
        "obs": obs,
        "actions": np.arange(n, dtype=np.int64) % 3,
        "rewards": rewards,
        "end": end,
    }


def _piece(ep: dict, a: int, b: int, last: bool) -> SingleAgentEpisode:
    """Steps ``[a, b)`` of ``ep`` as a stored piece (``last``: the episode's end is its)."""
    obs = ep["obs"]
    if isinstance(obs, dict):
        observations: Any = [{k: v[t] for k, v in obs.items()} for t in range(a, b + 1)]
    else:
        observations = list(obs[a : b + 1])
    return SingleAgentEpisode(
        ep["id"],
        observations=observations,
        actions=list(ep["actions"][a:b]),
        rewards=list(ep["rewards"][a:b]),
        terminated=last and ep["end"] == "terminated",
        truncated=last and ep["end"] == "truncated",
        t_started=a,
        len_lookback_buffer=0,
    ).to_numpy()


def _whole(ep: dict) -> SingleAgentEpisode:
    return _piece(ep, 0, len(ep["actions"]), last=True)


def _pieces(ep: dict, lengths: list[int], *, stepless_end: bool = False) -> list:
    """``ep`` cut into pieces of ``lengths`` steps; ``stepless_end``: its end stored apart."""
    assert sum(lengths) == len(ep["actions"])
    edges = np.cumsum([0, *lengths]).tolist()
    out = []
    for i, (a, b) in enumerate(zip(edges[:-1], edges[1:])):
        out.append(_piece(ep, a, b, last=i == len(lengths) - 1 and not stepless_end))
    if stepless_end and ep["end"] != "none":
        end = _piece(ep, edges[-1], edges[-1], last=True)
        out.append(end)
    return out


def _write(path: Path, pieces: list, version: int = 2, shard_bytes: int | None = None) -> Path:
    if version == 1:
        with EpisodeWriter(path) as writer:
            writer.write_many(pieces)
        return path
    options = {} if shard_bytes is None else {"shard_bytes": shard_bytes}
    with DatasetWriter(path, sync=False, **options) as writer:
        writer.write_many(pieces)
    return path


def _local_rows(path: Path, n_step: int, parallelism: int = 3) -> list[dict]:
    """The datasource's read tasks run here (the code a Ray worker runs, without Ray)."""
    source = EpisodeDatasource(path, "transitions", n_step=n_step, gamma=GAMMA)
    rows = []
    for task in source.get_read_tasks(parallelism=parallelism):
        for block in task():
            rows.extend(block.to_pylist())
    return rows


def _by_step(rows: list[dict]) -> dict[tuple[str, int], dict]:
    out = {(str(r["episode_id"]), int(r["t"])): r for r in rows}
    assert len(out) == len(rows)  # one row per step
    return out


def _whole_rows(episodes: list[dict], n_step: int) -> dict[tuple[str, int], dict]:
    """The transitions of each episode written whole, as one chunk (rows as Ray gives them)."""
    out = {}
    for ep in episodes:
        cols = nstep_columns(_whole(ep), n_step, GAMMA)
        for k in range(len(cols["t"])):
            row = {name: values[k] for name, values in cols.items()}
            out[ep["id"], int(cols["t"][k])] = row
    return out


def _same_row(got: dict, want: dict) -> None:
    for name in ("reward", "discount", "n_steps", "terminated", "truncated", "action"):
        assert np.array_equal(np.asarray(got[name]), np.asarray(want[name])), name
    obs = [name for name in want if name == "next_obs" or name.startswith("next_obs.")]
    assert obs
    for name in obs:
        assert np.array_equal(np.asarray(got[name]), np.asarray(want[name])), name


# (name, lengths of its pieces, how it ends, a stepless piece ends it)
LAYOUTS = [
    ("one-piece", [7], "terminated", False),
    ("two-pieces", [4, 3], "truncated", False),
    ("three-pieces", [3, 1, 3], "terminated", False),
    ("short-middle-pieces", [2, 1, 1, 3], "none", False),
    ("one-step-pieces", [1, 1, 1, 1, 1, 1, 1], "truncated", False),
    ("unfinished", [3, 4], "none", False),
    ("stepless-end", [3, 2, 2], "terminated", True),
    ("stepless-truncation", [1, 2, 4], "truncated", True),
]


@pytest.mark.parametrize("n_step", [1, 2, 3, 4])
@pytest.mark.parametrize(
    ("lengths", "end", "stepless"), [pytest.param(*c[1:], id=c[0]) for c in LAYOUTS]
)
@pytest.mark.parametrize("shards", ["shard-per-piece", "one-shard"])
def test_read_tasks_equal_the_episode_written_whole(
    tmp_path, lengths, end, stepless, n_step, shards
):
    ep = _episode("a", 0.0, sum(lengths), end)
    pieces = _pieces(ep, lengths, stepless_end=stepless)
    path = _write(tmp_path / "d", pieces, shard_bytes=1 if shards == "shard-per-piece" else None)
    got = _by_step(_local_rows(path, n_step))
    want = _whole_rows([ep], n_step)
    assert got.keys() == want.keys()
    for key in want:
        _same_row(got[key], want[key])
    # Every step's horizon is whole but where the episode's stored steps end.
    n = sum(lengths)
    assert [got["a", t]["n_steps"] for t in range(n)] == [min(n_step, n - t) for t in range(n)]


@pytest.mark.parametrize("n_step", [1, 2, 3, 4])
@pytest.mark.parametrize("version", [1, 2])
def test_interleaved_episodes_nested_observations_vector_rewards(tmp_path, n_step, version):
    eps = [
        _episode("a", 0.0, 6, "terminated", nested=True, seed=1),
        _episode("b", 100.0, 5, "truncated", nested=True, seed=2),
        _episode("c", 200.0, 4, "none", nested=True, seed=3),
    ]
    cuts = [_pieces(eps[0], [2, 1, 3]), _pieces(eps[1], [1, 3, 1]), _pieces(eps[2], [2, 2])]
    order = [cuts[0][0], cuts[1][0], cuts[2][0], cuts[1][1], cuts[0][1], cuts[2][1]]
    order += [cuts[1][2], cuts[0][2]]  # pieces of three episodes, written as a runner does
    path = _write(tmp_path / "d", order, version=version, shard_bytes=1 if version == 2 else None)
    got = _by_step(_local_rows(path, n_step, parallelism=4))
    want = _whole_rows(eps, n_step)
    assert got.keys() == want.keys()
    for key in want:
        _same_row(got[key], want[key])
        assert np.asarray(got[key]["reward"]).shape == (2,)


@pytest.mark.parametrize("n_step", [1, 2, 3, 4])
@pytest.mark.parametrize(
    ("lengths", "end", "stepless"), [pytest.param(*c[1:], id=c[0]) for c in LAYOUTS]
)
def test_read_tasks_agree_with_transition_dataset(tmp_path, lengths, end, stepless, n_step):
    torch_data = pytest.importorskip("episodes.io.torch_data")
    ep = _episode("a", 0.0, sum(lengths), end, seed=4)
    other = _episode("b", 100.0, 5, "truncated", seed=5)
    ours = _pieces(ep, lengths, stepless_end=stepless)
    theirs = _pieces(other, [2, 3])
    order = [ours[0], theirs[0], *ours[1:2], theirs[1], *ours[2:]]  # interleaved
    path = _write(tmp_path / "d", order, shard_bytes=1)
    data = torch_data.TransitionDataset(path, n_step=n_step, gamma=GAMMA)
    want = {
        float(item["obs"]): (
            float(item["rewards"]),
            float(item["next_obs"]),
            int(item["n"]),
            GAMMA ** int(item["n"]),
            bool(item["terminated"]),
            bool(item["truncated"]),
        )
        for item in data
    }
    got = {
        float(r["obs"]): (
            r["reward"],
            r["next_obs"],
            r["n_steps"],
            r["discount"],
            r["terminated"],
            r["truncated"],
        )
        for r in _local_rows(path, n_step)
    }
    assert got.keys() == want.keys()
    assert got == want  # float64 sums added in the same order: equal, not close


APART = [  # (a, b, ends the episode) per piece: pieces that do not continue one another
    pytest.param([(0, 3, False), (5, 8, True)], id="steps-left-out"),
    pytest.param([(0, 3, False), (0, 3, False)], id="steps-stored-twice"),
    pytest.param([(0, 3, True), (3, 6, True)], id="steps-after-the-end"),
]


@pytest.mark.parametrize("spans", APART)
def test_pieces_that_do_not_continue_each_other_stay_apart(tmp_path, spans):
    """No horizon crosses where the episode's pieces do not join (as ``piece_runs``)."""
    ep = _episode("a", 0.0, 8, "terminated")
    path = _write(tmp_path / "d", [_piece(ep, a, b, end) for a, b, end in spans], shard_bytes=1)
    rows = _local_rows(path, 3)
    assert [r["n_steps"] for r in rows] == [3, 2, 1, 3, 2, 1]
    # Each piece's 3 horizons reach its end: the episode's end where the piece ended it.
    assert [r["terminated"] for r in rows] == [end for *_, end in spans for _ in range(3)]


def test_piece_continuations_reach_as_far_as_the_horizon():
    from episodes.distributed.continuations import Continuation, piece_continuations
    from episodes.io.shards import EpisodeRow

    rows = [
        EpisodeRow("a", 0, 2, 0.0, False, False),
        EpisodeRow("b", 0, 3, 0.0, False, False),
        EpisodeRow("a", 2, 3, 0.0, False, False),
        EpisodeRow("a", 3, 4, 0.0, False, False),
        EpisodeRow("a", 4, 9, 0.0, False, True),
        EpisodeRow("b", 3, 3, 0.0, True, False),  # b's stepless end: nothing to read
    ]
    assert piece_continuations(rows, 1) == {}
    assert piece_continuations(rows, 2) == {
        0: Continuation(((2, 1),), False, False),
        2: Continuation(((3, 1),), False, False),
        3: Continuation(((4, 1),), False, False),
    }
    assert piece_continuations(rows, 4)[0] == Continuation(((2, 1), (3, 1), (4, 1)), False, False)
    # The run's end reached: its flags come with the steps.
    assert piece_continuations(rows, 9)[3] == Continuation(((4, 5),), False, True)
    assert piece_continuations(rows, 6)[3] == Continuation(((4, 5),), False, True)
    assert piece_continuations(rows, 5)[3] == Continuation(((4, 4),), False, False)
    with pytest.raises(ValueError, match="n_step"):
        piece_continuations(rows, 0)


def test_a_read_task_reads_only_the_steps_it_needs(tmp_path, monkeypatch):
    """Of a continuing piece in another shard, the first n_step - 1 steps, not the piece."""
    from episodes import io

    ep = _episode("a", 0.0, 40, "terminated")
    path = _write(tmp_path / "d", _pieces(ep, [10, 10, 20]), shard_bytes=1)
    calls = []
    steps = io.Dataset.steps

    def counted(self, i, start, stop):
        calls.append((i, start, stop))
        return steps(self, i, start, stop)

    monkeypatch.setattr(io.Dataset, "steps", counted)
    got = _by_step(_local_rows(path, 3))
    assert sorted(calls) == [(1, 0, 2), (2, 0, 2)]
    assert [got["a", t]["n_steps"] for t in (8, 9, 18, 19)] == [3, 3, 3, 3]


def _chunk(obs: list, rewards: list, **flags: bool) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        "a",
        observations=obs,
        actions=[0] * len(rewards),
        rewards=rewards,
        len_lookback_buffer=0,
        **flags,
    ).to_numpy()


def test_nstep_columns_after_joins_the_steps_given():
    chunk = _chunk([0.0, 1.0, 2.0], [1.0, 2.0])
    after = {"observations": np.array([2.0, 3.0, 4.0]), "rewards": np.array([4.0, 8.0])}
    cols = nstep_columns(chunk, 3, 0.5, after={**after, "truncated": True})
    assert cols["reward"].tolist() == [1.0 + 1.0 + 1.0, 2.0 + 2.0 + 2.0]
    assert cols["next_obs"].tolist() == [3.0, 4.0]
    assert cols["n_steps"].tolist() == [3, 3]
    assert cols["truncated"].tolist() == [False, True]  # step 1 reaches after's end
    # Only n_step - 1 steps are used: the end after them is not reached.
    cols = nstep_columns(chunk, 2, 0.5, after={**after, "terminated": True})
    assert cols["reward"].tolist() == [2.0, 4.0] and cols["n_steps"].tolist() == [2, 2]
    assert not cols["terminated"].any()
    # None, or no steps after: the chunk's own horizons, as before.
    plain = nstep_columns(chunk, 3, 0.5)
    empty = nstep_columns(chunk, 3, 0.5, after={"observations": np.array([2.0]), "rewards": []})
    for cols in (plain, empty):
        assert cols["n_steps"].tolist() == [2, 1] and cols["reward"].tolist() == [2.0, 2.0]
        assert not cols["truncated"].any()
    # No steps after, but the episode ended there: the chunk's last horizons end it.
    ended = nstep_columns(
        chunk, 3, 0.5, after={"observations": np.array([2.0]), "rewards": [], "truncated": True}
    )
    assert ended["truncated"].tolist() == [True, True]
    # n_step 1 uses no step after, so the end after them is not reached.
    one = nstep_columns(chunk, 1, 0.5, after={**after, "terminated": True})
    assert one["reward"].tolist() == [1.0, 2.0] and not one["terminated"].any()


BAD_AFTER = [
    pytest.param([1.0], "must be a dict", id="not-a-dict"),
    pytest.param({"rewards": [1.0]}, "must be a dict", id="no-observations"),
    pytest.param(
        {"observations": np.array([2.0]), "rewards": [1.0]}, "one more observation", id="count"
    ),
    pytest.param({"observations": 2.0, "rewards": [1.0]}, "one more observation", id="scalar"),
    pytest.param(
        {"observations": np.array([2.0, 3.0]), "rewards": [1.0], "terminated": 1},
        "bools",
        id="flag",
    ),
    pytest.param(
        {"observations": np.array([2.0, 3.0]), "rewards": [[1.0, 2.0]]}, "shape", id="reward-shape"
    ),
    pytest.param(
        {"observations": np.array([[2.0, 0.0], [3.0, 0.0]]), "rewards": [1.0]},
        "do not fit",
        id="obs",
    ),
    pytest.param(
        {"observations": {"x": [2.0], "y": [3.0]}, "rewards": [1.0]}, "do not fit", id="nested"
    ),
]


@pytest.mark.parametrize(("after", "match"), BAD_AFTER)
def test_nstep_columns_refuses_an_after_that_does_not_fit(after, match):
    chunk = _chunk([0.0, 1.0, 2.0], [1.0, 2.0])
    with pytest.raises(ValueError, match=match):
        nstep_columns(chunk, 2, 0.5, after=after)


@pytest.mark.parametrize("end", ["terminated", "truncated"])
def test_nothing_continues_a_chunk_that_ended_the_episode(end):
    chunk = _chunk([0.0, 1.0], [1.0], **{end: True})
    after = {"observations": np.array([1.0, 2.0]), "rewards": [1.0]}
    with pytest.raises(ValueError, match="ended the episode"):
        nstep_columns(chunk, 2, 0.5, after=after)
    with pytest.raises(ValueError, match="ended the episode"):
        nstep_columns(_chunk([0.0, 1.0], [1.0]), 2, 0.5, ends=(True, False), after=after)


def test_ray_read_transitions_cross_the_piece_borders(ray_local, tmp_path):
    ep = _episode("a", 0.0, 6, "terminated")
    path = _write(tmp_path / "d", _pieces(ep, [2, 2, 2]), shard_bytes=1)
    assert dataset_info(path).num_chunks == 3
    rows = _by_step(read_transitions(path, n_step=3, gamma=GAMMA).take_all())
    want = _whole_rows([ep], 3)
    assert rows.keys() == want.keys()
    for key in want:
        _same_row(rows[key], want[key])


@pytest.mark.parametrize("version", [1, 2])
def test_list_mode_pieces_are_read_as_the_read_task_reads_them(tmp_path, version):
    """A piece stored in list mode (JSON columns) continues the one before it all the same."""
    from episodes.io import load_episode

    first = SingleAgentEpisode(
        "a",
        observations=[[0.0, 1.0], [1.0, 1.0], [2.0, 1.0]],
        actions=[0, 1],
        rewards=[1, 2],
        len_lookback_buffer=0,
    )
    second = first.cut()
    second.add_env_step([3.0, 1.0], 0, 3)
    second.add_env_step([4.0, 1.0], 0, 4.5, truncated=True)
    path = _write(tmp_path / "d", [first, second], version=version, shard_bytes=1)
    got = _by_step(_local_rows(path, 3, parallelism=2))
    whole = nstep_columns(load_episode(path, "a").to_numpy(), 3, GAMMA)
    assert [got["a", t]["reward"] for t in range(4)] == whole["reward"].tolist()
    assert [got["a", t]["n_steps"] for t in range(4)] == [3, 3, 2, 1]
    assert [got["a", t]["truncated"] for t in range(4)] == [False, True, True, True]
    assert [got["a", t]["next_obs.0"] for t in range(4)] == [3.0, 4.0, 4.0, 4.0]


@pytest.mark.parametrize("version", [1, 2])
def test_pieces_join_by_id_as_load_episode_groups_them(tmp_path, version):
    """An int id 5 and a str id "5" are two episodes; a tuple id's pieces are one."""

    def pieces(ident: Any, base: float) -> list:
        first = SingleAgentEpisode(
            ident,
            observations=[base, base + 1, base + 2],
            actions=[0, 1],
            rewards=[1.0, 2.0],
            len_lookback_buffer=0,
        )
        second = first.cut()
        second.add_env_step(base + 3, 0, 3.0)
        second.add_env_step(base + 4, 0, 4.0, terminated=True)
        return [first.to_numpy(), second.to_numpy()]

    (a1, a2), (b1, b2), (c1, c2) = pieces(5, 0.0), pieces("5", 10.0), pieces(("x", 1), 20.0)
    path = _write(tmp_path / "d", [a1, b1, c1, b2, a2, c2], version=version, shard_bytes=1)
    got = {r["obs"]: (r["reward"], r["n_steps"], r["terminated"]) for r in _local_rows(path, 3)}
    # Per episode, as the episode written whole: its horizons cross its pieces only.
    whole = [(1 + 2 * GAMMA + 3 * GAMMA**2, 3, False), (2 + 3 * GAMMA + 4 * GAMMA**2, 3, True)]
    whole += [(3 + 4 * GAMMA, 2, True), (4.0, 1, True)]
    for base in (0.0, 10.0, 20.0):
        rows = [got[base + t] for t in range(4)]
        assert [row[1:] for row in rows] == [row[1:] for row in whole]
        assert [row[0] for row in rows] == pytest.approx([row[0] for row in whole], rel=1e-12)
