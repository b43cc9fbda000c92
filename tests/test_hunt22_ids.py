"""Hunt 22 fixes around episode ids: an id ending in NUL keeps it in every id column (step rows,
episode rows, ``eps_id`` of batches and connectors), so ``"a"`` and ``"a\\0"`` stay two ids;
``split`` keeps every piece of an episode whose id holds a dict on one side."""

from __future__ import annotations

import numpy as np
import pytest

from episodes import SingleAgentEpisode, io
from episodes.connectors import AddLearnerColumns
from episodes.converter import episodes_to_batch
from episodes.episode.sample_batch import id_column

IDS = ["a", "a\0", "\0", "a\0\0", b"a", b"a\0"]


def _episode(id_, **kw):
    kw.setdefault("terminated", True)
    return SingleAgentEpisode(
        id_,
        observations=[0.0, 1.0, 2.0],
        actions=[0, 1],
        rewards=[1.0, 2.0],
        len_lookback_buffer=0,
        **kw,
    )


@pytest.mark.parametrize("id_", IDS, ids=repr)
@pytest.mark.parametrize("rows", [0, 1, 3])
def test_id_column_holds_the_whole_id(id_, rows):
    column = id_column(id_, rows)
    assert column.shape == (rows,)
    assert column.tolist() == [id_] * rows


@pytest.mark.parametrize("numpy", [False, True])
def test_batches_and_learner_columns_keep_ids_that_differ_by_a_nul(numpy):
    episodes = [_episode(id_) for id_ in IDS]
    if numpy:
        episodes = [ep.to_numpy() for ep in episodes]
    want = [id_ for id_ in IDS for _ in range(2)]
    assert list(episodes_to_batch(episodes)["eps_id"]) == want
    batch = AddLearnerColumns()(episodes, {})
    assert len(set(map(repr, batch["eps_id"]))) == len(IDS)
    for ep, id_ in zip(episodes, IDS):
        assert list(ep.get_data_dict()["eps_id"]) == [id_, id_]


def test_step_and_episode_rows_keep_a_trailing_nul(tmp_path):
    pytest.importorskip("ray")
    from episodes.distributed import EpisodeDatasource
    from episodes.distributed.rows import step_columns

    assert step_columns(_episode("a\0").to_numpy())["episode_id"].tolist() == ["a\0", "a\0"]
    with io.DatasetWriter(tmp_path / "ds") as writer:
        for id_ in ("a", "a\0"):
            writer.write(_episode(id_).to_numpy())
    for kind, column in (("steps", "episode_id"), ("episodes", "id")):
        source = EpisodeDatasource(tmp_path / "ds", kind)
        values = [
            v for task in source.get_read_tasks(1) for b in task() for v in b[column].to_pylist()
        ]
        assert set(values) == {"a", "a\0"}, kind


@pytest.mark.parametrize("seed", range(12))
def test_split_keeps_the_pieces_of_a_dict_id_together(tmp_path, seed):
    head = SingleAgentEpisode(
        {"x": 1, "y": 2},
        observations=[0.0, 1.0],
        actions=[0],
        rewards=[1.0],
        len_lookback_buffer=0,
    )
    tail = SingleAgentEpisode(
        {"y": 2, "x": 1},
        observations=[1.0, 2.0],
        actions=[1],
        rewards=[2.0],
        len_lookback_buffer=1,
        t_started=1,
        terminated=True,
    )
    src = tmp_path / "src"
    with io.DatasetWriter(src) as writer:
        writer.write(head)
        writer.write(tail)
    io.split(src, tmp_path / "train", tmp_path / "val", fraction=0.5, seed=seed)
    sides = [io.dataset_info(tmp_path / side).num_chunks for side in ("train", "val")]
    assert sorted(sides) == [0, 2]


@pytest.mark.parametrize(
    "id_",
    [float("nan"), ("a", float("nan")), np.array([1, 2]), "a"],
    ids=["nan", "tuple-with-nan", "array", "str"],
)
def test_the_converter_joins_the_chunks_of_one_episode_whatever_its_id(id_):
    import torch

    from episodes.converter import episodes_to_rollout

    extras = {"vf_preds": [0.5], "action_logp": [-0.1]}
    head = SingleAgentEpisode(
        id_,
        observations=[np.float32([0.0]), np.float32([1.0])],
        actions=[0],
        rewards=[1.0],
        extra_model_outputs=extras,
        len_lookback_buffer=0,
    )
    tail = head.cut()
    tail.add_env_step(
        np.float32([2.0]), 0, 1.0, extra_model_outputs={"vf_preds": 0.5, "action_logp": -0.1}
    )
    rollout = episodes_to_rollout(
        [[head, tail]], gamma=0.5, value_fn=lambda obs: torch.full((len(obs),), 10.0)
    )
    assert rollout.storage.dones.flatten().tolist() == [False, False]
    assert rollout.storage.rewards.flatten().tolist() == [1.0, 1.0]
