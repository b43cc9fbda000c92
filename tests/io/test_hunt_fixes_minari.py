"""Pins for a bug hunt's findings in Minari interop (``episodes.io.minari_io``).

Each test names the finding it pins; all round trips are a few steps long.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces as S

pytest.importorskip("minari")

from episodes import SingleAgentEpisode  # noqa: E402
from episodes.io import (  # noqa: E402
    DatasetError,
    DatasetMetadata,
    DatasetWriter,
    EpisodeWriter,
    export_minari,
    import_minari,
    read_episodes,
)


def episode(id_: str, obs: Any, space: Any, **kw: Any) -> SingleAgentEpisode:
    n = len(obs) - 1
    kw.setdefault("action_space", S.Discrete(2))
    kw.setdefault("actions", [k % 2 for k in range(n)])
    return SingleAgentEpisode(
        id_,
        observations=obs,
        observation_space=space,
        rewards=[1.0] * n,
        terminated=True,
        len_lookback_buffer=0,
        **kw,
    )


def write(path: Path, *episodes: SingleAgentEpisode, **kw: Any) -> Path:
    with DatasetWriter(path, **kw) as writer:
        writer.write_many(episodes)
    return path


def round_trip(tmp_path: Path, *episodes: SingleAgentEpisode, **kw: Any) -> list[Any]:
    src = write(tmp_path / "ours", *episodes)
    export_minari(src, "hunt/rt-v0", root=tmp_path / "m", **kw)
    import_minari("hunt/rt-v0", tmp_path / "back", root=tmp_path / "m")
    return list(read_episodes(tmp_path / "back"))


def minari_dataset(tmp_path: Path, dataset_id: str = "hunt/rt-v0") -> Any:
    from minari import MinariDataset

    return MinariDataset(tmp_path / "m" / dataset_id / "data")


# ------------------------------------------------- 1: image Boxes were stored as lossy JPEG
@pytest.mark.parametrize("shape", [(32, 32, 3), (32, 32), (32, 32, 1), (32, 32, 4)])
def test_image_observations_round_trip_exactly(tmp_path, shape):
    space = S.Box(0, 255, shape, np.uint8)
    obs = list(np.random.default_rng(0).integers(0, 256, (3, *shape), dtype=np.uint8))
    (back,) = round_trip(tmp_path, episode("e", obs, space))
    np.testing.assert_array_equal(back.get_observations(), np.stack(obs))


# ------------------------------------------------- 2: Text inside Dict / Tuple broke import
TEXT_CASES = {
    "dict": (
        S.Dict({"t": S.Text(5), "b": S.Discrete(2)}),
        [{"t": "HBZ", "b": 0}, {"t": "j4t9R", "b": 1}, {"t": "", "b": 1}],
    ),
    "tuple": (S.Tuple((S.Text(5), S.Discrete(2))), [("BB", 0), ("puad", 1), ("v6Xlq", 1)]),
    # As many characters as observations: split as if each string were the batch.
    "dict_equal_lengths": (
        S.Dict({"t": S.Text(3, min_length=3)}),
        [{"t": "abc"}, {"t": "def"}, {"t": "ghi"}],
    ),
}


@pytest.mark.parametrize("space, obs", TEXT_CASES.values(), ids=TEXT_CASES.keys())
def test_text_inside_dict_and_tuple_round_trips(tmp_path, space, obs):
    (back,) = round_trip(tmp_path, episode("e", obs, space))
    got = back.get_observations()
    if isinstance(space, S.Dict):
        assert [str(t) for t in got["t"]] == [o["t"] for o in obs]
    else:
        assert [str(t) for t in got[0]] == [o[0] for o in obs]
        assert got[1].tolist() == [o[1] for o in obs]


# ------------------------------- 3: values not already in the space's dtype were refused
CASTS = {
    "python_floats_box_float32": (
        S.Box(-1, 1, (2,), np.float32),
        [[0.5, 0.25], [0.5, 0.75], [0.0, 1.0]],
    ),
    "float64_arrays_box_float32": (S.Box(-1, 1, (2,), np.float32), list(np.full((3, 2), 0.1))),
    "python_bools_multibinary": (S.MultiBinary(2), [[True, False], [False, True], [True, True]]),
    "ints_box_float32_in_dict": (
        S.Dict({"pos": S.Box(-9, 9, (2,), np.float32)}),
        [{"pos": np.array([1, 2])}] * 3,
    ),
}


@pytest.mark.parametrize("space, obs", CASTS.values(), ids=CASTS.keys())
def test_values_are_cast_to_the_space_dtype(tmp_path, space, obs):
    (back,) = round_trip(tmp_path, episode("e", obs, space))
    got = back.get_observations()
    if isinstance(space, S.Dict):
        got, obs, space = got["pos"], [o["pos"] for o in obs], space["pos"]
    assert got.dtype == space.dtype
    np.testing.assert_array_equal(got, np.asarray(obs).astype(space.dtype))


REFUSED_CASTS = {
    "overflowing_float32": (
        S.Dict({"pos": S.Box(-1, 1, (1,), np.float32)}),
        [{"pos": np.array([1e39])}] * 3,
        "observations['pos'] have dtype float64 and the space's dtype is float32",
    ),
    "beyond_uint8": (
        S.Box(0, 255, (1,), np.uint8),
        [np.array([300])] * 3,
        "observations have dtype int64 and the space's dtype is uint8",
    ),
    "fractions_in_multidiscrete": (
        S.MultiDiscrete([3, 3]),
        [np.array([0.5, 1.0])] * 3,
        "observations have dtype float64 and the space's dtype is int64",
    ),
}


@pytest.mark.parametrize("space, obs, message", REFUSED_CASTS.values(), ids=REFUSED_CASTS.keys())
def test_a_cast_that_changes_values_is_refused_by_name(tmp_path, space, obs, message):
    src = write(tmp_path / "ours", episode("e", obs, space))
    with pytest.raises(DatasetError, match=r"episode 'e' ") as caught:
        export_minari(src, "hunt/rt-v0", root=tmp_path / "m")
    assert message in str(caught.value)
    assert not (tmp_path / "m").exists()


# --------------------------------------- 4: errors reading a Minari dataset escaped raw
def _minari_written(tmp_path: Path, dataset_id: str, steps: list[int]) -> Path:
    import minari
    from minari.data_collector import EpisodeBuffer

    def buffer(i: int, n: int) -> Any:
        return EpisodeBuffer(
            id=i,
            observations=list(np.zeros((n + 1, 2), np.float32)),
            actions=[1] * n,
            rewards=[0.5] * n,
            terminations=[False] * max(n - 1, 0) + [True] * (n > 0),
            truncations=[False] * n,
        )

    os.environ["MINARI_DATASETS_PATH"] = str(tmp_path / "m")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            minari.create_dataset_from_buffers(
                dataset_id,
                [buffer(i, n) for i, n in enumerate(steps)],
                observation_space=S.Box(-1, 1, (2,), np.float32),
                action_space=S.Discrete(3),
                data_format="arrow",
            )
    finally:
        del os.environ["MINARI_DATASETS_PATH"]
    return tmp_path / "m" / dataset_id


def _truncate_an_episode(dataset: Path) -> None:
    arrow = dataset / "data/1/part-0.arrow"
    arrow.write_bytes(arrow.read_bytes()[:100])


def _drop_metadata_key(dataset: Path) -> None:
    path = dataset / "data/metadata.json"
    meta = json.loads(path.read_text())
    del meta["total_steps"]
    path.write_text(json.dumps(meta))


READ_ERRORS = {
    "truncated_episode_file": ([3, 3], _truncate_an_episode),
    # Minari itself writes an episode without steps it cannot read back (pyarrow types).
    "episode_without_steps": ([0, 2], lambda dataset: None),
    "metadata_without_total_steps": ([2], _drop_metadata_key),
}


@pytest.mark.parametrize("steps, damage", READ_ERRORS.values(), ids=READ_ERRORS.keys())
def test_reading_errors_are_dataset_errors(tmp_path, steps, damage):
    dataset = _minari_written(tmp_path, "hunt/bad-v0", steps)
    damage(dataset)
    with pytest.raises(DatasetError, match="cannot read Minari dataset"):
        import_minari(dataset, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_importing_into_a_regular_file_is_a_dataset_error(tmp_path):
    dataset = _minari_written(tmp_path, "hunt/ok-v0", [2])
    (tmp_path / "file").write_text("x")
    with pytest.raises(DatasetError, match="not a directory"):
        import_minari(dataset, tmp_path / "file")
    assert (tmp_path / "file").read_text() == "x"


# ----------------------- 5: zero-size leaves killed the process; unsupported spaces refused
ZERO_SIZE = {
    "box_0": S.Box(-1, 1, (0,), np.float32),
    "box_2_0": S.Box(-1, 1, (2, 0), np.float32),
    "dict_with_box_0": S.Dict({"z": S.Box(-1, 1, (0,), np.float32), "d": S.Discrete(2)}),
}


@pytest.mark.parametrize("space", ZERO_SIZE.values(), ids=ZERO_SIZE.keys())
def test_a_zero_size_leaf_is_refused_before_anything_is_written(tmp_path, space):
    space.seed(0)
    src = write(tmp_path / "ours", episode("e", [space.sample() for _ in range(3)], space))
    # In a child process: before the fix pyarrow stopped the process (SIGFPE).
    root = tmp_path / "m"
    proc = subprocess.run(
        [sys.executable, "-m", "episodes", "export", str(src), "--to", "minari"]
        + ["--dataset-id", "hunt/zero-v0", "--root", str(root)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 1, proc.stderr
    assert "zero-size" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not root.exists()


UNSUPPORTED = {
    "sequence": S.Sequence(S.Discrete(3)),
    "oneof": S.OneOf([S.Discrete(2), S.Box(-1, 1, (2,), np.float32)]),
    "dict_of_sequence": S.Dict({"s": S.Sequence(S.Discrete(3))}),
    "empty_dict": S.Dict({}),
    "empty_tuple": S.Tuple(()),
}


@pytest.mark.parametrize("space", UNSUPPORTED.values(), ids=UNSUPPORTED.keys())
def test_a_space_minari_cannot_store_is_refused_by_name(tmp_path, space):
    space.seed(0)
    src = write(tmp_path / "ours", episode("e", [space.sample() for _ in range(3)], space))
    with pytest.raises(DatasetError, match="which Minari cannot store"):
        export_minari(src, "hunt/un-v0", root=tmp_path / "m")
    assert not (tmp_path / "m").exists()


# --------------------------- 6: episodes of other spaces went under the first one's spaces
@pytest.mark.parametrize("writer", [EpisodeWriter, DatasetWriter], ids=["v1", "v2"])
def test_episodes_of_other_spaces_are_refused_by_id(tmp_path, writer):
    with writer(tmp_path / "ours") as w:
        w.write(episode("a", [0, 1, 2], S.Discrete(3)))
        w.write(episode("b", [5, 6, 7], S.Discrete(3, start=5)))
    with pytest.raises(DatasetError, match=r"episode 'b' has the observation space Discrete"):
        export_minari(tmp_path / "ours", "hunt/mixed-v0", root=tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_episodes_without_spaces_take_the_datasets(tmp_path):
    plain = SingleAgentEpisode(
        "c", observations=[1, 0, 1], actions=[0, 1], rewards=[1.0, 1.0], len_lookback_buffer=0
    )
    back = round_trip(tmp_path, episode("a", [0, 1, 2], S.Discrete(3)), plain)
    assert [b.observation_space for b in back] == [S.Discrete(3)] * 2
    assert back[1].get_observations().tolist() == [1, 0, 1]


# ------------------------- 7, 8: export made the env and recorded the registry's spec
class Spy(gym.Env):
    observation_space = S.Discrete(3)
    action_space = S.Discrete(2)
    made: list[str] = []

    def __init__(self) -> None:
        Spy.made.append("constructed")


@pytest.fixture
def spy_envs():
    gym.register("HuntSpy-v0", entry_point=f"{__name__}:Spy")
    gym.register("HuntSpyCallable-v0", entry_point=Spy)
    Spy.made.clear()
    yield
    gym.registry.pop("HuntSpy-v0")
    gym.registry.pop("HuntSpyCallable-v0")


@pytest.mark.parametrize("env_id", ["HuntSpy-v0", "HuntSpyCallable-v0", "LunarLander-v3"])
def test_export_makes_no_env(tmp_path, spy_envs, env_id):
    space = S.Discrete(3)
    src = write(
        tmp_path / "ours",
        episode("e", [0, 1, 2], space),
        metadata=DatasetMetadata(env_id=env_id),
    )
    assert export_minari(src, "hunt/env-v0", root=tmp_path / "m") == 1
    assert Spy.made == []
    spec = minari_dataset(tmp_path, "hunt/env-v0").env_spec
    # A callable entry point cannot be serialized: no spec rather than no export.
    assert spec is None if env_id == "HuntSpyCallable-v0" else spec.id == env_id


def test_export_records_the_stored_env_spec(tmp_path):
    env = gym.make("CartPole-v1", max_episode_steps=50, sutton_barto_reward=True)
    obs = list(np.zeros((3, 4), np.float32))
    src = write(
        tmp_path / "ours",
        episode("e", obs, env.observation_space),
        metadata=DatasetMetadata.from_env(env),
    )
    export_minari(src, "hunt/spec-v0", root=tmp_path / "m")
    spec = minari_dataset(tmp_path, "hunt/spec-v0").env_spec
    assert (spec.id, spec.max_episode_steps, spec.kwargs) == (
        "CartPole-v1",
        50,
        {"sutton_barto_reward": True},
    )


# ------------------------------------------------------------- 9: infos were dropped
def test_minari_infos_are_imported_per_step(tmp_path):
    import minari
    from minari.data_collector import EpisodeBuffer

    infos = {"prob": [1.0, 0.5, 0.25], "name": ["a", "b", "c"], "v": np.arange(6).reshape(3, 2)}
    buffer = EpisodeBuffer(
        id=0,
        observations=[0, 1, 2],
        actions=[1, 0],
        rewards=[0.0, 1.0],
        terminations=[False, True],
        truncations=[False, False],
        infos=infos,
    )
    os.environ["MINARI_DATASETS_PATH"] = str(tmp_path / "m")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            minari.create_dataset_from_buffers(
                "hunt/infos-v0",
                [buffer],
                observation_space=S.Discrete(3),
                action_space=S.Discrete(2),
                data_format="arrow",
            )
    finally:
        del os.environ["MINARI_DATASETS_PATH"]
    import_minari("hunt/infos-v0", tmp_path / "back", root=tmp_path / "m")
    (back,) = read_episodes(tmp_path / "back")
    got = back.get_infos()
    assert [i["prob"] for i in got] == [1.0, 0.5, 0.25]
    assert [str(i["name"]) for i in got] == ["a", "b", "c"]
    assert [i["v"].tolist() for i in got] == [[0, 1], [2, 3], [4, 5]]


def test_infos_round_trip(tmp_path):
    infos = [
        {"x": np.float32(k), "n": k, "ok": k % 2 == 0, "s": "ab"[: k % 3], "v": np.full(2, k)}
        for k in range(3)
    ]
    (back,) = round_trip(tmp_path, episode("e", [0, 1, 2], S.Discrete(3), infos=infos))
    for want, got in zip(infos, back.get_infos(), strict=True):
        assert set(got) == set(want)
        assert got["x"] == want["x"] and got["x"].dtype == np.float32
        assert got["n"] == want["n"] and got["ok"] == want["ok"] and got["s"] == want["s"]
        np.testing.assert_array_equal(got["v"], want["v"])


def test_empty_infos_store_nothing(tmp_path):
    (back,) = round_trip(tmp_path, episode("e", [0, 1, 2], S.Discrete(3)))
    assert back.get_infos() == [{}, {}, {}]
    assert minari_dataset(tmp_path)[0].infos == {}


INFO_LAYOUTS = {
    "another_key_at_step_2": ([{"a": 1}, {"a": 2}, {"b": 3}], [], "episode 'e', step 2"),
    "another_dtype_at_step_1": ([{"a": 1}, {"a": 1.5}, {"a": 2}], [], "episode 'e', step 1"),
    "a_nested_dict": ([{"d": {"x": 1}}] * 3, [], "episode 'e', step 0"),
    "another_layout_in_episode_f": (
        [{"a": 1}] * 3,
        [{"a": 1}, {}, {}],
        "episode 'f', step 1",
    ),
}


@pytest.mark.parametrize("first, second, where", INFO_LAYOUTS.values(), ids=INFO_LAYOUTS.keys())
def test_infos_of_another_layout_are_refused_unless_left_out(tmp_path, first, second, where):
    episodes = [episode("e", [0, 1, 2], S.Discrete(3), infos=first)]
    if second:
        episodes.append(episode("f", [0, 1, 2], S.Discrete(3), infos=second))
    src = write(tmp_path / "ours", *episodes)
    with pytest.raises(DatasetError, match="infos=False") as caught:
        export_minari(src, "hunt/rt-v0", root=tmp_path / "m", infos=True)
    assert where in str(caught.value)
    assert not (tmp_path / "m").exists()
    assert export_minari(src, "hunt/rt-v0", root=tmp_path / "m", infos=False) == len(episodes)
    assert minari_dataset(tmp_path)[0].infos == {}


@pytest.mark.parametrize("first, second, where", INFO_LAYOUTS.values(), ids=INFO_LAYOUTS.keys())
def test_by_default_infos_that_do_not_fit_are_left_out_with_a_warning(
    tmp_path, first, second, where
):
    """FrozenLake's int reset info, RecordEpisodeStatistics' dict at episode ends: exported."""
    episodes = [episode("e", [0, 1, 2], S.Discrete(3), infos=first)]
    if second:
        episodes.append(episode("f", [0, 1, 2], S.Discrete(3), infos=second))
    src = write(tmp_path / "ours", *episodes)
    with pytest.warns(UserWarning, match=f"infos left out.*{where}"):
        assert export_minari(src, "hunt/rt-v0", root=tmp_path / "m") == len(episodes)
    assert all(not ep.infos for ep in minari_dataset(tmp_path).iterate_episodes())


# ---------------------------------- 10: refusals left a new, empty Minari root behind
def test_a_refused_import_makes_no_minari_root(tmp_path):
    with pytest.raises(DatasetError, match="no local Minari dataset"):
        import_minari("hunt/missing-v0", tmp_path / "out", root=tmp_path / "never/made")
    assert not (tmp_path / "never").exists()


def test_a_failure_inside_minari_removes_only_what_the_export_made(tmp_path, monkeypatch):
    from minari.dataset._storages.arrow_storage import ArrowStorage

    src = write(tmp_path / "ours", episode("e", [0, 1, 2], S.Discrete(3)))
    export_minari(src, "kept/first-v0", root=tmp_path / "old")

    def fails(self, episodes):
        raise RuntimeError("disk trouble")

    monkeypatch.setattr(ArrowStorage, "update_episodes", fails)
    for root in (tmp_path / "new" / "root", tmp_path / "old"):
        with pytest.raises(DatasetError, match="disk trouble"):
            export_minari(src, "hunt/fails-v0", root=root)
    assert not (tmp_path / "new").exists()
    assert sorted(p.name for p in (tmp_path / "old").iterdir()) == ["kept"]
    monkeypatch.undo()
    assert import_minari("kept/first-v0", tmp_path / "back", root=tmp_path / "old") == 1


# ------------------------------------------------------------------- suspicious items
def test_without_minari_the_error_says_what_to_install(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "minari", None)  # import minari raises ImportError
    with pytest.raises(ImportError, match=r"pip install 'episodes\[minari\]'"):
        export_minari(tmp_path / "ours", "hunt/x-v0")
    with pytest.raises(ImportError, match=r"pip install 'episodes\[minari\]'"):
        import_minari("hunt/x-v0", tmp_path / "out")


@pytest.mark.parametrize("dtype", [np.int32, np.uint8])
def test_discrete_spaces_come_back_as_int64_with_int64_values(tmp_path, dtype):
    space = S.Discrete(4, start=1, dtype=dtype)
    ep = episode("e", [1, 2, 3], space, action_space=space, actions=[1, 4])
    (back,) = round_trip(tmp_path, ep)
    assert back.action_space == S.Discrete(4, start=1)  # Minari records Discrete as int64
    assert back.get_actions().dtype == np.int64 and back.get_actions().tolist() == [1, 4]
