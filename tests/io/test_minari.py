"""Minari interop (the `minari` extra): export, import, round trips keep every step."""

from __future__ import annotations

import subprocess
import sys

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("minari")

from episodes import SingleAgentEpisode  # noqa: E402
from episodes.io import (  # noqa: E402
    DatasetError,
    DatasetMetadata,
    DatasetWriter,
    EpisodeWriter,
    export_minari,
    import_minari,
    load_episode,
    read_episodes,
)


def cartpole_like(k: int, n: int, rng) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(
        f"e{k}",
        observations=list(rng.normal(size=(n + 1, 4)).astype(np.float32)),
        observation_space=gym.spaces.Box(-np.inf, np.inf, (4,), np.float32),
        actions=list(rng.integers(0, 2, n)),
        action_space=gym.spaces.Discrete(2),
        rewards=list(rng.normal(size=n)),
        terminated=k % 2 == 0,
        truncated=k % 2 == 1,
        len_lookback_buffer=0,
    )
    return ep


def same_steps(a: SingleAgentEpisode, b: SingleAgentEpisode) -> None:
    np.testing.assert_array_equal(
        np.asarray(a.get_observations()), np.asarray(b.get_observations())
    )
    np.testing.assert_array_equal(np.asarray(a.get_actions()), np.asarray(b.get_actions()))
    np.testing.assert_array_equal(np.asarray(a.get_rewards(), np.float64), b.get_rewards())
    assert (a.is_terminated, a.is_truncated) == (b.is_terminated, b.is_truncated)


def test_round_trip_keeps_every_step(tmp_path):
    rng = np.random.default_rng(0)
    episodes = [cartpole_like(k, int(rng.integers(1, 30)), rng) for k in range(6)]
    meta = DatasetMetadata(env_id="CartPole-v1", algorithm="ppo")
    with DatasetWriter(tmp_path / "ours", metadata=meta) as w:
        w.write_many(episodes)
    root = tmp_path / "minari"
    assert export_minari(tmp_path / "ours", "test/cartpole-v0", root=root) == 6
    assert import_minari("test/cartpole-v0", tmp_path / "back", root=root) == 6
    back = list(read_episodes(tmp_path / "back"))
    assert [b.id_ for b in back] == [f"test/cartpole-v0/{k}" for k in range(6)]
    for a, b in zip(episodes, back, strict=True):
        same_steps(a, b)
        assert b.observation_space == a.observation_space and b.action_space == a.action_space
    from episodes.io import Dataset

    imported = Dataset(tmp_path / "back").metadata
    assert imported.env_id == "CartPole-v1" and imported.algorithm == "ppo"
    # The Minari directory itself is accepted too.
    again = import_minari(root / "test" / "cartpole-v0", tmp_path / "again")
    assert again == 6


def test_pieces_are_joined_and_v1_exports(tmp_path):
    ep = SingleAgentEpisode(
        "e", observation_space=gym.spaces.Discrete(5), action_space=gym.spaces.Discrete(2)
    )
    ep.add_env_reset(0)
    ep.add_env_step(1, 0, 1.0)
    nxt = ep.cut(len_lookback_buffer=1)
    nxt.add_env_step(2, 1, 0.5)
    nxt.add_env_step(3, 1, 0.25, terminated=True)
    with EpisodeWriter(tmp_path / "v1") as w:
        w.write_many([ep, nxt])
    assert export_minari(tmp_path / "v1", "pieces-v0", root=tmp_path / "m") == 1
    import_minari("pieces-v0", tmp_path / "back", root=tmp_path / "m")
    (back,) = read_episodes(tmp_path / "back")
    same_steps(load_episode(tmp_path / "v1", "e"), back)


def test_errors(tmp_path):
    with DatasetWriter(tmp_path / "empty") as w:
        w.write(SingleAgentEpisode("x", observations=[0], len_lookback_buffer=0))
    with pytest.raises(DatasetError, match="no episode with steps"):
        export_minari(tmp_path / "empty", "x-v0", root=tmp_path / "m")
    with pytest.raises(DatasetError, match="no local Minari dataset"):
        import_minari("nope/missing-v0", tmp_path / "out", root=tmp_path / "m")


def test_cli(tmp_path):
    rng = np.random.default_rng(1)
    with DatasetWriter(tmp_path / "ours") as w:
        w.write_many(cartpole_like(k, 5, rng) for k in range(3))

    def run(*args):
        return subprocess.run(
            [sys.executable, "-m", "episodes", *args], capture_output=True, text=True, timeout=300
        )

    root = str(tmp_path / "m")
    proc = run(
        "export", str(tmp_path / "ours"), "--to", "minari", "--dataset-id", "cli-v0", "--root", root
    )
    assert proc.returncode == 0, proc.stderr
    proc = run("import", "minari", "cli-v0", "--out", str(tmp_path / "back"), "--root", root)
    assert proc.returncode == 0 and "imported 3 episodes" in proc.stdout, proc.stderr
    proc = run("import", "minari", "missing-v0", "--out", str(tmp_path / "x"), "--root", root)
    assert proc.returncode == 1 and proc.stderr.count("\n") == 1


def test_a_piece_without_steps_written_last_joins_where_load_episode_puts_it(tmp_path):
    whole = cartpole_like(0, 3, np.random.default_rng(0))  # terminated
    with DatasetWriter(tmp_path / "ds") as w:
        w.write_many([whole[0:2], whole[2:3], whole[2:2]])  # [2, 2) after the episode's end
    assert export_minari(tmp_path / "ds", "late-v0", root=tmp_path / "m") == 1
    import_minari("late-v0", tmp_path / "back", root=tmp_path / "m")
    (back,) = read_episodes(tmp_path / "back")
    same_steps(load_episode(tmp_path / "ds", "e0"), back)


def test_a_relative_root_is_the_same_directory_for_export_and_import(tmp_path, monkeypatch):
    rng = np.random.default_rng(1)
    with DatasetWriter(tmp_path / "ds") as w:
        w.write_many([cartpole_like(k, 4, rng) for k in range(2)])
    monkeypatch.chdir(tmp_path)
    assert export_minari(tmp_path / "ds", "rel-v0", root="minari_root") == 2
    assert import_minari("rel-v0", tmp_path / "back", root="minari_root") == 2


def test_a_refused_export_leaves_no_half_written_dataset(tmp_path):
    # Minari asserted on the second episode after writing the first: the leftover made the
    # retry "already exist" and imported as a dataset of one episode.
    import gymnasium as gym

    from episodes.io import DatasetError, DatasetWriter, export_minari

    def episode(id_, dim):
        return SingleAgentEpisode(
            id_,
            observations=[np.zeros(dim, np.float32)] * 3,
            actions=[0, 1],
            rewards=[1.0, 1.0],
            observation_space=gym.spaces.Box(-1, 1, (dim,), np.float32),
            action_space=gym.spaces.Discrete(2),
            len_lookback_buffer=0,
        )

    with DatasetWriter(tmp_path / "src") as writer:
        writer.write_many([episode("a", 2), episode("b", 3)])
    with pytest.raises(DatasetError, match="Minari refused"):
        export_minari(tmp_path / "src", "test/mixed-v0", root=tmp_path / "m")
    assert not (tmp_path / "m" / "test" / "mixed-v0").exists()
    with pytest.raises(ValueError, match="dataset_id"):
        export_minari(tmp_path / "src", "test/mixed", root=tmp_path / "m")


def test_text_observations_round_trip(tmp_path):
    # Minari hands Text steps back as a list of strings; each string was taken for a leaf.
    text = gym.spaces.Text(8)
    ep = SingleAgentEpisode(
        "t",
        observations=["ab", "abc", "", "xyzzy"],
        observation_space=text,
        actions=[0, 1, 0],
        action_space=gym.spaces.Discrete(2),
        rewards=[1.0, 0.0, 1.0],
        terminated=True,
        len_lookback_buffer=0,
    )
    with DatasetWriter(tmp_path / "ours") as writer:
        writer.write(ep)
    export_minari(tmp_path / "ours", "test/text-v0", root=tmp_path / "m")
    assert import_minari("test/text-v0", tmp_path / "back", root=tmp_path / "m") == 1
    (back,) = read_episodes(tmp_path / "back")
    assert [str(o) for o in back.get_observations()] == ["ab", "abc", "", "xyzzy"]
    same_steps(ep, back)


def test_a_refused_import_leaves_its_destination_as_it_was(tmp_path, monkeypatch):
    from episodes.io import minari_io

    with DatasetWriter(tmp_path / "ours") as writer:
        writer.write_many([cartpole_like(k, 3, np.random.default_rng(k)) for k in range(2)])
    export_minari(tmp_path / "ours", "test/cp-v0", root=tmp_path / "m")

    def refuses(source, data):
        raise DatasetError("refused")

    monkeypatch.setattr(minari_io, "_episode", refuses)
    with pytest.raises(DatasetError, match="refused"):
        import_minari("test/cp-v0", tmp_path / "back", root=tmp_path / "m")
    assert not (tmp_path / "back").exists()
    monkeypatch.undo()
    assert import_minari("test/cp-v0", tmp_path / "back", root=tmp_path / "m") == 2


def test_vector_rewards_are_refused_with_a_dataset_error(tmp_path):
    # float(r) of a reward row raised a TypeError (a traceback from the CLI).
    ep = SingleAgentEpisode(
        "v",
        observations=[np.zeros(2, np.float32)] * 3,
        observation_space=gym.spaces.Box(-1, 1, (2,), np.float32),
        actions=[0, 1],
        action_space=gym.spaces.Discrete(2),
        rewards=[np.ones(2), np.ones(2)],
        len_lookback_buffer=0,
    )
    with DatasetWriter(tmp_path / "src") as writer:
        writer.write(ep)
    with pytest.raises(DatasetError, match="one float reward per step"):
        export_minari(tmp_path / "src", "test/vector-v0", root=tmp_path / "m")
    assert not (tmp_path / "m" / "test" / "vector-v0").exists()
