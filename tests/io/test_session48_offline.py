"""Session 48 (an offline-RL user's journey): spaces that differ within a dataset, what a
Minari import keeps, and errors that say what to do or name the right class."""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import (
    DatasetError,
    DatasetWriter,
    EpisodeWriter,
    UnsupportedVersionError,
    dataset_info,
    load_episode,
    merge,
    read_episodes,
    validate_dataset,
)

BOX = gym.spaces.Box(-1, 1, (2,), np.float32)
DISC = gym.spaces.Discrete(2)


def piece(id_: str, obs_space: Any = BOX, act_space: Any = DISC, **kw: Any) -> SingleAgentEpisode:
    obs = kw.pop("observations", None)
    if obs is None:
        obs = (
            [{"a": np.zeros(2, np.float32)}] * 3
            if isinstance(obs_space, gym.spaces.Dict)
            else list(np.zeros((3, 2), np.float32))
        )
    return SingleAgentEpisode(
        id_,
        observations=obs,
        actions=[0, 1],
        rewards=[1.0, 1.0],
        len_lookback_buffer=0,
        observation_space=obs_space,
        action_space=act_space,
        **kw,
    )


# ------------------------------------------------------------------ 1. one pair of spaces
# (pieces, the problem's words: None where the dataset is fine)
SPACE_CASES = {
    "box_then_dict_observations": (
        [piece("box"), piece("dict", gym.spaces.Dict({"a": BOX}))],
        ["episode 'dict'", "its observation space Dict(", "not the dataset's Box("],
    ),
    "other_discrete_actions": (
        [piece("two"), piece("three", act_space=gym.spaces.Discrete(3))],
        ["episode 'three'", "its action space Discrete(3) is not the dataset's Discrete(2)"],
    ),
    "float32_then_float64_box": (
        [piece("f32"), piece("f64", gym.spaces.Box(-1, 1, (2,), np.float64))],
        ["episode 'f64'", "float64", "another dataset"],
    ),
    "both_spaces_differ": (
        [piece("a"), piece("b", gym.spaces.Box(-2, 2, (2,), np.float32), gym.spaces.Discrete(4))],
        ["observation space", " and its action space Discrete(4)"],
    ),
    "same_spaces": ([piece("a"), piece("b"), piece("c")], None),
    "pieces_without_spaces_compare_with_nothing": (
        [piece("a", None, None), piece("b"), piece("c", None, None), piece("d")],
        None,
    ),
}


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("case", sorted(SPACE_CASES))
def test_validate_notes_pieces_of_other_spaces(tmp_path, case, version):
    pieces, words = SPACE_CASES[case]
    writer = DatasetWriter if version == 2 else EpisodeWriter
    with writer(tmp_path / "d") as w:
        for episode in pieces:
            w.write(episode.to_numpy())
    report = validate_dataset(tmp_path / "d")
    # A note, no problem: load_episode loads every id (validate's ``ok``).
    assert report.ok, report.problems
    if words is None:
        assert report.notes == []
        return
    assert len(report.notes) == 1, report.notes
    note = report.notes[0]
    for word in words:
        assert word in note, (word, note)
    first_piece = "shard " if version == 2 else "chunks/"
    assert f"(that of {first_piece}" in note and "the first piece with one" in note
    assert "more piece" not in note
    # dataset_info keeps reporting the first piece's spaces: those the note calls the dataset's
    assert dataset_info(tmp_path / "d").action_space == pieces[0].action_space


@pytest.mark.parametrize(("others", "named"), [(2, 1), (7, 5)])
def test_one_note_names_the_first_piece_then_counts_the_others(tmp_path, others, named):
    with DatasetWriter(tmp_path / "d", shard_bytes=1) as w:
        w.write(piece("box").to_numpy())
        for k in range(others):
            w.write(piece(f"dict{k}", gym.spaces.Dict({"a": BOX})).to_numpy())
    (note,) = validate_dataset(tmp_path / "d").notes
    assert note.count("(episode 'dict0')") == 1 and "dict1" not in note  # ids of the first only
    assert f"; {others - 1} more piece" in note
    assert note.count("shard ") == 2 + named  # the first, the dataset's, those named
    assert note.endswith("store episodes of other spaces in another dataset")
    assert (", ...)" in note) is (others - 1 > named)


def test_the_note_comes_before_unlisted_files(tmp_path):
    with DatasetWriter(tmp_path / "d") as w:
        w.write(piece("box").to_numpy())
        w.write(piece("dict", gym.spaces.Dict({"a": BOX})).to_numpy())
    (tmp_path / "d/shards/stray.arrow").write_bytes(b"x")
    notes = validate_dataset(tmp_path / "d").notes
    assert len(notes) == 2 and "observation space Dict(" in notes[0] and "stray" in notes[1]


def test_validate_cli_prints_the_note_and_says_ok(tmp_path, capsys):
    from episodes.cli import main

    with DatasetWriter(tmp_path / "d") as w:
        w.write(piece("box").to_numpy())
        w.write(piece("dict", gym.spaces.Dict({"a": BOX})).to_numpy())
    assert main(["validate", str(tmp_path / "d")]) == 0
    out = capsys.readouterr().out
    assert "note: shard " in out and "its observation space Dict(" in out and "ok: 2" in out


# ---------------------------------------------------------------- 2. Minari metadata kept
def test_minari_user_keeps_plain_entries_and_warns_of_others():
    from episodes.io.minari_metadata import minari_user

    meta = {
        "dataset_id": "toy/a-v0",
        "minari_version": "0.5.4",
        "env_spec": "{}",
        "algorithm_name": "sac",
        "observation_space": "{}",
        "action_space": "{}",
        "data_format": "arrow",
        "jpeg_encoding": False,
        "dataset_size": 0.1,
        "ref_min_score": -10.5,
        "ref_max_score": 90,
        "author": ["me"],
        "description": None,
        "ref_nan": float("nan"),
        "nested": {"a": 1},
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        user = minari_user(meta, "toy/a-v0", "0.5.4", "somewhere")
    assert user == {
        "minari_dataset_id": "toy/a-v0",
        "minari_version": "0.5.4",
        "minari_metadata": {
            "ref_min_score": -10.5,
            "ref_max_score": 90,
            "author": ["me"],
            "description": None,
        },
    }
    assert len(caught) == 1 and "['ref_nan', 'nested']" in str(caught[0].message)


def _minari_buffers(flags: list[tuple[bool, bool]]) -> list[Any]:
    from minari.data_collector import EpisodeBuffer

    rng, buffers = np.random.default_rng(0), []
    for k, (term, trunc) in enumerate(flags):
        n = 3 + k
        buffers.append(
            EpisodeBuffer(
                id=k,
                observations=rng.normal(size=(n + 1, 3)).astype(np.float32),
                actions=rng.uniform(-2, 2, (n, 1)).astype(np.float32),
                rewards=rng.normal(size=n),
                terminations=np.array([False] * (n - 1) + [term]),
                truncations=np.array([False] * (n - 1) + [trunc]),
                infos={},
            )
        )
    return buffers


def test_import_minari_keeps_reference_scores_and_description(tmp_path, monkeypatch):
    minari = pytest.importorskip("minari")
    from episodes.io import Dataset, import_minari

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "m"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        minari.create_dataset_from_buffers(
            "toy/meta-v0",
            _minari_buffers([(True, False), (False, True)]),
            env=gym.spec("Pendulum-v1"),  # ref scores are stored only with an env spec
            eval_env=gym.spec("Pendulum-v1"),
            requirements=["gymnasium"],
            observation_space=gym.spaces.Box(-np.inf, np.inf, (3,), np.float32),
            action_space=gym.spaces.Box(-2, 2, (1,), np.float32),
            algorithm_name="sac",
            author="me",
            author_email="me@example.org",
            code_permalink="https://example.org/code",
            ref_min_score=-1000.0,
            ref_max_score=-100.0,
            description="expert runs",
            data_format="arrow",
        )
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing is left out of this one
        assert import_minari("toy/meta-v0", tmp_path / "back", root=tmp_path / "m") == 2
    meta = Dataset(tmp_path / "back").metadata
    assert meta.algorithm == "sac" and meta.env_id == "Pendulum-v1"
    assert meta.user["minari_dataset_id"] == "toy/meta-v0"
    kept = meta.user["minari_metadata"]
    assert kept["ref_min_score"] == -1000.0 and kept["ref_max_score"] == -100.0
    assert kept["description"] == "expert runs"
    assert kept["code_permalink"] == "https://example.org/code"
    assert kept["author"] == ["me"] and kept["author_email"] == ["me@example.org"]
    assert kept["total_episodes"] == 2 and kept["total_steps"] == 7
    assert kept["requirements"] == ["gymnasium"]
    assert json.loads(kept["eval_env_spec"])["id"] == "Pendulum-v1"
    stored = json.loads((tmp_path / "m/toy/meta-v0/data/metadata.json").read_text())
    assert set(kept) == set(stored) - {
        "env_spec",
        "algorithm_name",
        "dataset_id",
        "minari_version",
        "observation_space",
        "action_space",
        "data_format",
        "jpeg_encoding",
        "dataset_size",
    }


def test_unfinished_episode_exports_with_both_flags_false(tmp_path):
    minari = pytest.importorskip("minari")
    from episodes.io import export_minari, import_minari

    space = gym.spaces.Box(-1, 1, (2,), np.float32)
    with DatasetWriter(tmp_path / "ours") as w:
        for id_, term, trunc in [("t", True, False), ("u", False, True), ("open", False, False)]:
            w.write(
                piece(id_, space, DISC, terminated=term, truncated=trunc).to_numpy(),
            )
    assert export_minari(tmp_path / "ours", "toy/open-v0", root=tmp_path / "m") == 3
    stored = minari.MinariDataset(tmp_path / "m/toy/open-v0/data")
    last = [(bool(e.terminations[-1]), bool(e.truncations[-1])) for e in stored]
    assert last == [(True, False), (False, True), (False, False)]
    import_minari("toy/open-v0", tmp_path / "back", root=tmp_path / "m")
    back = load_episode(tmp_path / "back", "toy/open-v0/2")
    assert (back.is_terminated, back.is_truncated) == (False, False)


# --------------------------------------------------------- 3a. merge of ids that collide
def _two_datasets_sharing_ids(tmp_path: Path) -> tuple[Path, Path]:
    paths = []
    for name, value in (("a", 0.0), ("b", 1.0)):
        with DatasetWriter(tmp_path / name) as w:
            for id_ in ("ep0", "ep1"):
                obs = list(np.full((3, 2), value, np.float32))
                w.write(piece(id_, observations=obs, terminated=True).to_numpy())
        paths.append(tmp_path / name)
    return paths[0], paths[1]


def test_merge_of_colliding_ids_says_what_to_do_and_that_works(tmp_path):
    a, b = _two_datasets_sharing_ids(tmp_path)
    with pytest.raises(DatasetError) as caught:
        merge([a, b], tmp_path / "ab")
    message = str(caught.value)
    assert "steps [0, 2) are stored twice once" in message and "nothing was written" in message
    for words in ("merge one of them", "other ids", "read_episodes", "id_", "DatasetWriter"):
        assert words in message, words
    assert not (tmp_path / "ab").exists()
    # What it says: b's pieces under other ids, in a new dataset, then merged.
    with DatasetWriter(tmp_path / "b2") as w:
        for episode in read_episodes(b):
            episode.id_ = ("b", episode.id_)
            w.write(episode)
    assert merge([a, tmp_path / "b2"], tmp_path / "ab") == 4
    ids = sorted(map(repr, (e.id_ for e in dataset_info(tmp_path / "ab").episodes)))
    assert ids == sorted(map(repr, ["ep0", "ep1", ("b", "ep0"), ("b", "ep1")]))
    assert validate_dataset(tmp_path / "ab").ok


@pytest.mark.parametrize("tool", ["migrate", "filter"])
def test_one_damaged_source_gets_no_merge_remedy(tmp_path, tool):
    from episodes.io import filter_dataset, migrate

    with DatasetWriter(tmp_path / "d") as w:
        w.write_many([piece("x").to_numpy(), piece("x").to_numpy()])
    with pytest.raises(DatasetError, match="stored twice in .*nothing was written$"):
        if tool == "migrate":
            migrate(tmp_path / "d", tmp_path / "out")
        else:
            filter_dataset(tmp_path / "d", tmp_path / "out")


# ------------------------------------------------------- 3b. the class a v1 read names
@pytest.mark.parametrize("name", ["TransitionDataset", "SequenceDataset"])
def test_torch_dataset_on_v1_names_itself(tmp_path, name):
    torch_data = pytest.importorskip("episodes.io.torch_data")
    with EpisodeWriter(tmp_path / "v1") as w:
        w.write(piece("a", terminated=True).to_numpy())
    cls = getattr(torch_data, name)
    kwargs = {"length": 1} if name == "SequenceDataset" else {}
    with pytest.raises(UnsupportedVersionError) as caught:
        cls(tmp_path / "v1", **kwargs)
    message = str(caught.value)
    assert f"format v1 dataset; {name} reads v2" in message
    assert "Dataset reads v2" not in message.replace(f"{name} reads v2", "")
    assert "episodes migrate" in message and "EpisodeReplayBuffer.from_dataset" in message
