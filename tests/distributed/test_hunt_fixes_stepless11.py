"""Ray Data steps of a piece followed by a stepless piece that ended the episode.

docs/format.md allows storing an episode as a piece with steps and a later piece without steps,
starting where the first ends, that is terminated or truncated; ``load_episode``,
``Dataset.steps`` and the torch datasets end the episode at the first piece's last step.
``read_steps``/``read_transitions`` took only each piece's own flags: the last step stayed
``terminated=False`` and n-step targets bootstrapped from a terminal observation.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("ray")

from episodes import SingleAgentEpisode  # noqa: E402
from episodes.distributed import (  # noqa: E402
    EpisodeDatasource,
    nstep_columns,
    read_steps,
    read_transitions,
    step_columns,
)
from episodes.io import DatasetWriter, EpisodeWriter, load_episode  # noqa: E402


def _pieces(end: str) -> list[SingleAgentEpisode]:
    """``a``: 3 steps, then a stepless piece ending it; ``b``: 2 + 1 steps, then the same;
    ``c``: 2 steps, not done."""
    a = SingleAgentEpisode(
        "a",
        observations=[0.0, 1.0, 2.0, 3.0],
        actions=[0, 1, 0],
        rewards=[1.0, 2.0, 3.0],
        len_lookback_buffer=0,
    ).to_numpy()
    b1 = SingleAgentEpisode(
        "b",
        observations=[10.0, 11.0, 12.0],
        actions=[1, 1],
        rewards=[4.0, 5.0],
        len_lookback_buffer=0,
    )
    b2 = b1.cut()
    b2.add_env_step(13.0, 0, 6.0)
    c = SingleAgentEpisode(
        "c",
        observations=[20.0, 21.0, 22.0],
        actions=[0, 0],
        rewards=[1.0, 1.0],
        len_lookback_buffer=0,
    ).to_numpy()
    a_end, b_end = a.cut(), b2.cut()
    for piece in (a_end, b_end):
        setattr(piece, f"is_{end}", True)
    # The stepless pieces come last (another shard, another v1 range than their steps).
    return [a, b1.to_numpy(), b2.to_numpy(), c, a_end.to_numpy(), b_end.to_numpy()]


def _write(root: Path, version: int, end: str) -> Path:
    path = root / f"v{version}-{end}"
    if version == 2:
        with DatasetWriter(path, shard_bytes=1, sync=False) as writer:  # a shard per piece
            writer.write_many(_pieces(end))
    else:
        with EpisodeWriter(path) as writer:
            writer.write_many(_pieces(end))
    return path


def _expected(path: Path, n_step: int, gamma: float) -> dict[tuple[str, int], tuple]:
    """Per (id, t): (reward, n_steps, terminated, truncated) from the in-process readers.

    The episode ``load_episode`` joins, as one chunk: its n-step horizons reach across its
    stored pieces (b's two), and it ends where its stepless last piece ended it.
    """
    from episodes.io import read_episodes

    out = {}
    for id_ in dict.fromkeys(str(piece.id_) for piece in read_episodes(path)):
        cols = nstep_columns(load_episode(path, id_).to_numpy(), n_step, gamma)
        for k, t in enumerate(cols["t"]):
            out[id_, int(t)] = (
                float(cols["reward"][k]),
                int(cols["n_steps"][k]),
                bool(cols["terminated"][k]),
                bool(cols["truncated"][k]),
            )
    return out


def _local_rows(path: Path, kind: str, n_step: int = 1, gamma: float = 0.5) -> list[dict]:
    """The datasource's read tasks run here (the code a Ray worker runs, without Ray)."""
    source = EpisodeDatasource(path, kind, n_step=n_step, gamma=gamma)
    rows = []
    for task in source.get_read_tasks(parallelism=3):
        for block in task():
            rows.extend(block.to_pylist())
    return rows


def _key(row: dict) -> tuple[str, int]:
    return str(row["episode_id"]), int(row["t"])


CASES = [
    pytest.param(version, end, n_step, id=f"v{version}-{end}-n{n_step}")
    for version in (1, 2)
    for end in ("terminated", "truncated")
    for n_step in (1, 2)
]


@pytest.mark.parametrize(("version", "end", "n_step"), CASES)
def test_read_tasks_end_the_piece_a_stepless_piece_ended(tmp_path, version, end, n_step):
    path = _write(tmp_path, version, end)
    expected = _expected(path, n_step, 0.5)
    rows = _local_rows(path, "transitions", n_step=n_step)
    got = {_key(r): (r["reward"], r["n_steps"], r["terminated"], r["truncated"]) for r in rows}
    assert got == expected
    flagged = sorted(k for k, v in got.items() if v[2] or v[3])
    # The last step (n-step: the last n) of a and of b (across its pieces); c: none.
    assert flagged == sorted(
        [("a", t) for t in range(3 - n_step, 3)] + [("b", t) for t in range(3 - n_step, 3)]
    )
    assert all(got[k][2 if end == "terminated" else 3] for k in flagged)
    steps = {_key(r): (r["terminated"], r["truncated"]) for r in _local_rows(path, "steps")}
    flag = (end == "terminated", end == "truncated")
    assert steps[("a", 2)] == flag and steps[("b", 2)] == flag
    assert steps[("a", 1)] == steps[("b", 1)] == steps[("c", 1)] == (False, False)


@pytest.mark.parametrize("n_step", [1, 2])
def test_read_tasks_agree_with_the_torch_transitions(tmp_path, n_step):
    TransitionDataset = pytest.importorskip("episodes.io.torch_data").TransitionDataset
    path = _write(tmp_path, 2, "terminated")
    data = TransitionDataset(path, n_step=n_step, gamma=0.5)
    want = {  # keyed by the observation: unique in these pieces
        float(item["obs"]): (
            float(item["rewards"]),
            float(item["next_obs"]),
            item["n"],
            item["terminated"],
            item["truncated"],
        )
        for item in data
    }
    got = {
        float(r["obs"]): (r["reward"], r["next_obs"], r["n_steps"], r["terminated"], r["truncated"])
        for r in _local_rows(path, "transitions", n_step=n_step)
    }
    # Both join b's two pieces: the last step of its first (observation 11) reaches into the
    # second (n_step 2: reward 5 + 0.5 * 6, next_obs 13, terminated by the stepless piece).
    assert got == want
    assert got[11.0] == (
        (8.0, 13.0, 2, True, False) if n_step == 2 else (5.0, 12.0, 1, False, False)
    )


def test_ray_reads_end_the_episode_at_the_stepless_end(ray_local, tmp_path):
    v2 = _write(tmp_path, 2, "terminated")
    rows = {_key(r): r for r in read_transitions(v2, n_step=2, gamma=0.5).take_all()}
    assert [rows["a", t]["terminated"] for t in range(3)] == [False, True, True]
    assert rows["a", 1]["reward"] == 2.0 + 0.5 * 3.0 and rows["a", 1]["next_obs"] == 3.0
    v1 = _write(tmp_path, 1, "truncated")
    rows = {_key(r): r for r in read_steps(v1).take_all()}
    assert [rows["b", t]["truncated"] for t in range(3)] == [False, False, True]
    assert not any(r["terminated"] for r in rows.values())


@pytest.mark.parametrize("ends", [(True,), (1, 0), "tf", True, (True, False, False)], ids=repr)
def test_ends_must_be_a_pair_of_bools(ends):
    ep = SingleAgentEpisode(
        "a", observations=[0.0, 1.0], actions=[0], rewards=[1.0], len_lookback_buffer=0
    ).to_numpy()
    with pytest.raises(ValueError, match="pair of bools"):
        step_columns(ep, ends=ends)
    with pytest.raises(ValueError, match="pair of bools"):
        nstep_columns(ep, 2, 0.5, ends=ends)
    assert step_columns(ep, ends=(np.bool_(False), np.bool_(True)))["truncated"].tolist() == [True]
    assert not ep.is_truncated  # the chunk itself is left as it was
