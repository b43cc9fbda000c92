"""Pins for an offline-data bug hunt: Minari round trips of long episodes, rewards the float64
cast would change, the ``infos`` flag, env specs JSON cannot store, damaged replay saves.
"""

from __future__ import annotations

import json
import os
import shutil
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gymnasium import spaces as S

pytest.importorskip("minari")

import pyarrow as pa  # noqa: E402

from episodes import SingleAgentEpisode  # noqa: E402
from episodes.io import (  # noqa: E402
    DatasetError,
    DatasetWriter,
    dataset_info,
    export_minari,
    import_minari,
    read_episodes,
)

# pyarrow's scan batch (131,072 rows) less Minari's padding row: its reader cuts longer ones.
MAX_MINARI_STEPS = (1 << 17) - 1
BOX = S.Box(-np.inf, np.inf, (1,), np.float32)


def long_episode(id_: str, n: int, base: float, **kw: Any) -> SingleAgentEpisode:
    kw.setdefault("rewards", np.arange(n, dtype=np.float64))
    return SingleAgentEpisode(
        id_,
        observations=base + np.arange(n + 1, dtype=np.float32).reshape(-1, 1),
        actions=np.arange(n, dtype=np.int64) % 2,
        terminated=True,
        observation_space=BOX,
        action_space=S.Discrete(2),
        len_lookback_buffer=0,
        **kw,
    )


def write(path: Path, *episodes: SingleAgentEpisode) -> Path:
    with DatasetWriter(path) as writer:
        writer.write_many(episodes)
    return path


def minari_episodes(root: Path, dataset_id: str) -> list[Any]:
    """The episodes as Minari's own ``load_dataset`` reads them."""
    import minari

    old = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = str(root)
    try:
        return list(minari.load_dataset(dataset_id).iterate_episodes())
    finally:
        if old is None:
            del os.environ["MINARI_DATASETS_PATH"]
        else:
            os.environ["MINARI_DATASETS_PATH"] = old


def minari_written(root: Path, dataset_id: str, steps: list[int]) -> Path:
    """A Minari dataset written by Minari's own writer (batches of 32,768 rows)."""
    import minari
    from minari.data_collector import EpisodeBuffer

    buffers = [
        EpisodeBuffer(
            id=i,
            observations=1_000_000.0 * i + np.arange(n + 1, dtype=np.float32).reshape(-1, 1),
            actions=np.zeros(n, np.int64),
            rewards=np.arange(n, dtype=np.float64),
            terminations=[False] * (n - 1) + [True],
            truncations=[False] * n,
        )
        for i, n in enumerate(steps)
    ]
    os.environ["MINARI_DATASETS_PATH"] = str(root)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            minari.create_dataset_from_buffers(
                dataset_id,
                buffers,
                observation_space=BOX,
                action_space=S.Discrete(2),
                data_format="arrow",
            )
    finally:
        del os.environ["MINARI_DATASETS_PATH"]
    return root / dataset_id


def batches(dataset: Path, n: int) -> int:
    return pa.ipc.open_file(dataset / "data" / str(n) / "part-0.arrow").num_record_batches


def check_steps(back: SingleAgentEpisode, n: int, base: float) -> None:
    assert len(back) == n and back.is_terminated
    observations = np.asarray(back.get_observations()).reshape(-1)
    np.testing.assert_array_equal(observations, base + np.arange(n + 1, dtype=np.float32))
    np.testing.assert_array_equal(back.get_rewards(), np.arange(n, dtype=np.float64))


# ---------- 1: episodes over 32,767 steps came back cut short, mixed with the next episode
@pytest.mark.parametrize("long_steps", [40_000, MAX_MINARI_STEPS])
def test_a_long_episode_round_trips_through_minari_and_its_own_reader(tmp_path, long_steps):
    src = write(
        tmp_path / "ours",
        long_episode("long", long_steps, 0.0),
        long_episode("short", 5, 1e6),
    )
    assert export_minari(src, "s16/long-v0", root=tmp_path / "m") == 2
    assert batches(tmp_path / "m/s16/long-v0", 0) == 1  # one record batch per episode
    stored = minari_episodes(tmp_path / "m", "s16/long-v0")  # Minari's own reader
    assert [len(e.rewards) for e in stored] == [long_steps, 5]
    assert stored[1].observations[0, 0] == 1e6 and bool(stored[0].terminations[-1])
    assert import_minari("s16/long-v0", tmp_path / "back", root=tmp_path / "m") == 2
    back = list(read_episodes(tmp_path / "back"))
    check_steps(back[0], long_steps, 0.0)
    check_steps(back[1], 5, 1e6)


def test_an_episode_minaris_reader_would_cut_is_refused_before_anything_is_written(tmp_path):
    src = write(tmp_path / "ours", long_episode("huge", MAX_MINARI_STEPS + 1, 0.0))
    with pytest.raises(DatasetError, match=rf"'huge' has {MAX_MINARI_STEPS + 1} steps"):
        export_minari(src, "s16/huge-v0", root=tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_long_episodes_written_by_minari_itself_import_whole(tmp_path):
    dataset = minari_written(tmp_path / "m", "s16/theirs-v0", [40_000, 5])
    assert batches(dataset, 0) > 1  # Minari's writer cuts the episode into batches
    assert import_minari(dataset, tmp_path / "back") == 2
    back = list(read_episodes(tmp_path / "back"))
    check_steps(back[0], 40_000, 0.0)
    check_steps(back[1], 5, 1e6)
    assert dataset_info(tmp_path / "back").num_steps == 40_005


def _episode_total(dataset: Path, value: Any) -> None:
    path = dataset / "data/1/metadata.json"
    meta = json.loads(path.read_text())
    meta["total_steps"] = value
    path.write_text(json.dumps(meta))


def _dataset_total(dataset: Path, value: int) -> None:
    path = dataset / "data/metadata.json"
    meta = json.loads(path.read_text())
    meta["total_steps"] = value
    path.write_text(json.dumps(meta))


STEP_MISMATCHES = {
    "episode_metadata_says_more": (lambda d: _episode_total(d, 6), "episode 1 holds 5 steps"),
    "episode_metadata_says_less": (lambda d: _episode_total(d, 4), "episode 1 holds 5 steps"),
    "episode_metadata_without_steps": (lambda d: _episode_total(d, None), "episode 1: its"),
    "dataset_total_differs": (lambda d: _dataset_total(d, 40_000), "hold 40005 steps"),
}


@pytest.mark.parametrize("damage, says", STEP_MISMATCHES.values(), ids=STEP_MISMATCHES.keys())
def test_episodes_that_disagree_with_the_metadata_are_refused_not_read_wrong(
    tmp_path, damage, says
):
    dataset = minari_written(tmp_path / "m", "s16/bad-v0", [40_000, 5])
    damage(dataset)
    with pytest.raises(DatasetError, match=says):
        import_minari(dataset, tmp_path / "back")
    assert not (tmp_path / "back").exists()


# ------------------------------------- 3: integer rewards above 2**53 were silently rounded
REWARDS = {
    "above_2_53": (2**53 + 1, False),
    "int64_max": (2**63 - 1, False),
    "uint64_max": (np.uint64(2**64 - 1), False),
    "2_53_exact": (2**53, True),
    "2_60_exact": (2**60, True),
    "negative_2_62": (-(2**62), True),
}


@pytest.mark.parametrize("reward, kept", REWARDS.values(), ids=REWARDS.keys())
def test_integer_rewards_the_float64_cast_would_change_are_refused(tmp_path, reward, kept):
    dtype = np.asarray(reward).dtype if isinstance(reward, np.generic) else np.dtype(np.int64)
    rewards = np.array([reward, 1], dtype=dtype)
    src = write(tmp_path / "ours", long_episode("r", 2, 0.0, rewards=rewards))
    if not kept:
        with pytest.raises(DatasetError, match=f"'r' has rewards of dtype {dtype}"):
            export_minari(src, "s16/r-v0", root=tmp_path / "m")
        assert not (tmp_path / "m").exists()
        return
    export_minari(src, "s16/r-v0", root=tmp_path / "m")
    (stored,) = minari_episodes(tmp_path / "m", "s16/r-v0")
    assert int(stored.rewards[0]) == int(reward)


# --------------------------------------------------- 4: infos= took any value ("no" = True)
@pytest.mark.parametrize("flag", ["no", "false", 0, 1, np.True_, [False]], ids=repr)
def test_an_infos_flag_that_is_not_a_bool_or_none_is_refused(tmp_path, flag):
    src = write(tmp_path / "ours", long_episode("a", 2, 0.0))
    with pytest.raises(TypeError, match="infos must be True, False or None"):
        export_minari(src, "s16/f-v0", root=tmp_path / "m", infos=flag)
    assert not (tmp_path / "m").exists()


# ------------------------- dataset ids: what Minari itself takes (its namespaces: 2+ chars)
@pytest.mark.parametrize("dataset_id", ["ab/b-v0", "ab/sub/c-v1", "name-v2"])
def test_dataset_ids_minari_takes_round_trip(tmp_path, dataset_id):
    src = write(tmp_path / "ours", long_episode("a", 2, 0.0))
    export_minari(src, dataset_id, root=tmp_path / "m")
    assert import_minari(dataset_id, tmp_path / "back", root=tmp_path / "m") == 1


@pytest.mark.parametrize("dataset_id", ["a/b-v0", "/b-v0", "a//b-v0", "a/-v0", "x/../y-v0", "a/"])
def test_malformed_dataset_ids_are_refused(tmp_path, dataset_id):
    src = write(tmp_path / "ours", long_episode("a", 2, 0.0))
    with pytest.raises(ValueError, match="dataset_id must look like"):
        export_minari(src, dataset_id, root=tmp_path / "m")


# -------------------------- 5: an env spec holding inf (reward_threshold) refused the import
@pytest.mark.parametrize("field", ["reward_threshold", "kwargs"])
def test_an_env_spec_json_cannot_store_is_left_out_with_a_warning(tmp_path, field):
    from gymnasium.envs.registration import EnvSpec

    dataset = minari_written(tmp_path / "m", "s16/spec-v0", [3])
    if field == "reward_threshold":
        spec = EnvSpec("MyEnv-v0", entry_point="my_pkg:MyEnv", reward_threshold=float("inf"))
    else:
        spec = EnvSpec("MyEnv-v0", entry_point="my_pkg:MyEnv", kwargs={"cost": float("nan")})
    path = dataset / "data/metadata.json"
    meta = json.loads(path.read_text())
    meta["env_spec"] = spec.to_json()
    path.write_text(json.dumps(meta))
    with pytest.warns(UserWarning, match="env spec .* left out of the import"):
        assert import_minari(dataset, tmp_path / "back") == 1
    stored = dataset_info(tmp_path / "back").metadata
    assert stored["env_id"] == "MyEnv-v0" and stored["env_spec"] is None


# ----------------------------- 2: a damaged replay.json's settings gave an unnamed ValueError
@pytest.fixture()
def saved_buffer(tmp_path: Path) -> Path:
    from episodes.replay import PrioritizedEpisodeReplayBuffer

    buffer = PrioritizedEpisodeReplayBuffer(20, seed=0)
    buffer.add(long_episode("x", 2, 0.0))
    buffer.save(tmp_path / "base")
    return tmp_path / "base"


SETTINGS = {
    "capacity_0": ("capacity", 0),
    "capacity_negative": ("capacity", -3),
    "batch_size_0": ("batch_size_B", 0),
    "alpha_negative": ("alpha", -1.0),
}


@pytest.mark.parametrize("field, value", SETTINGS.values(), ids=SETTINGS.keys())
def test_saved_settings_the_buffer_refuses_are_damage_naming_the_save(
    tmp_path, saved_buffer, field, value
):
    from episodes.replay import EpisodeReplayBuffer
    from episodes.replay.saved_files import seal

    damaged = tmp_path / field
    shutil.copytree(saved_buffer, damaged)
    meta = json.loads((damaged / "replay.json").read_text())
    meta.pop("crc32")
    meta[field] = value
    (damaged / "replay.json").write_text(json.dumps(seal(meta)))  # checksum as a tool would
    with pytest.raises(ValueError, match=f"{damaged}: damaged replay buffer .*{field}"):
        EpisodeReplayBuffer.load(damaged)


def test_a_bad_seed_is_the_callers_error_not_damage(saved_buffer):
    from episodes.replay import EpisodeReplayBuffer

    with pytest.raises(ValueError, match="seed must be") as err:
        EpisodeReplayBuffer.load(saved_buffer, seed=-1)
    assert "damaged" not in str(err.value)
    assert EpisodeReplayBuffer.load(saved_buffer, seed=1).get_num_timesteps() == 2
