"""Session 52 (an analyst reusing recorded datasets with other tools): per-episode tables,
filters and splits, a D4RL-style flat dict, and the data files read by pyarrow and pandas,
every number checked against a plain-Python log of what the envs did."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pyarrow as pa
import pyarrow.ipc
import pyarrow.parquet as pq
import pytest

from episodes.io import (
    Dataset,
    DatasetMetadata,
    DatasetWriter,
    data_files,
    dataset_info,
    filter_dataset,
    load_episode,
    migrate,
    split,
)
from episodes.runner import EnvRunner

OBS_KINDS = ("dict", "box", "discrete")
# each observation kind under another of gymnasium's autoreset modes
RECORDINGS = {"dict": "NEXT_STEP", "box": "SAME_STEP", "discrete": "DISABLED"}
FLAT_KEYS = ("observations", "actions", "rewards", "next_observations", "terminals", "timeouts")


class Logged(gym.Env):
    """A small env that logs each episode it plays (observations, actions, rewards, flags).

    It terminates when its second coordinate leaves [-2.5, 2.5] and truncates at step 7, so a
    run holds both endings; its rewards are halves, summed exactly in float64.
    """

    def __init__(self, index: int, obs_kind: str, log: dict[int, list[dict[str, Any]]]):
        self.index, self.obs_kind, self.log = index, obs_kind, log
        self.observation_space = {
            "dict": gym.spaces.Dict(
                {"pos": gym.spaces.Box(-9, 9, (2,), np.float32), "mode": gym.spaces.Discrete(3)}
            ),
            "box": gym.spaces.Box(-9, 9, (2,), np.float32),
            "discrete": gym.spaces.Discrete(3),
        }[obs_kind]
        self.action_space = gym.spaces.Box(-1, 1, (1,), np.float32)
        self.rng = np.random.default_rng(index)
        self.pos, self.t = np.zeros(2, np.float32), 0

    def _obs(self) -> Any:
        mode = self.t % 3
        return {
            "dict": {"pos": self.pos.copy(), "mode": mode},
            "box": self.pos.copy(),
            "discrete": mode,
        }[self.obs_kind]

    def reset(self, *, seed: Any = None, options: Any = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        self.pos, self.t = np.zeros(2, np.float32), 0
        obs = self._obs()
        self.log[self.index].append(
            {"obs": [obs], "actions": [], "rewards": [], "terminated": False, "truncated": False}
        )
        return obs, {"k": 0}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        self.t += 1
        self.pos = self.pos + np.float32([action[0], self.rng.normal()])
        reward = float(self.rng.integers(0, 5)) * 0.5
        terminated = bool(abs(self.pos[1]) > 2.5)
        truncated = self.t >= 7 and not terminated
        obs = self._obs()
        episode = self.log[self.index][-1]
        episode["obs"].append(obs)
        episode["actions"].append(np.float32(action).copy())
        episode["rewards"].append(reward)
        episode["terminated"], episode["truncated"] = terminated, truncated
        return obs, reward, terminated, truncated, {"k": self.t}


def record(
    path: Path, obs_kind: str, *, mode: str = "NEXT_STEP", calls: int = 4, num_steps: int = 6
) -> dict:
    """Two writers open at once over one dataset, each chunk in a shard of its own (tiny
    ``shard_bytes``), so episodes lie in several pieces and shards; returns the env log."""
    log: dict[int, list[dict[str, Any]]] = defaultdict(list)
    env = gym.vector.SyncVectorEnv(
        [lambda i=i: Logged(i, obs_kind, log) for i in range(2)],
        autoreset_mode=gym.vector.AutoresetMode[mode],
    )
    rng = np.random.default_rng(0)

    def policy(obs: Any) -> tuple[np.ndarray, dict]:
        actions = rng.uniform(-1, 1, (2, 1)).astype(np.float32)
        return actions, {"action_logp": np.full(2, -0.5, np.float32)}

    runner = EnvRunner(env, policy, seed=0)
    meta = DatasetMetadata(env_id="Logged-v0")
    with (
        DatasetWriter(path, metadata=meta, shard_bytes=1) as first,
        DatasetWriter(path, metadata=meta, shard_bytes=1) as second,
    ):
        for call in range(calls):
            for chunk in runner.sample(num_steps):
                (first if call % 2 else second).write(chunk)
    return dict(log)


@pytest.fixture(scope="module", params=OBS_KINDS)
def recorded(request, tmp_path_factory) -> tuple[Path, str, dict]:
    path = tmp_path_factory.mktemp(f"analyst-{request.param}") / "data"
    return path, request.param, record(path, request.param, mode=RECORDINGS[request.param])


def logged_episodes(path: Path, log: dict) -> list[tuple[Any, dict]]:
    """``(summary, logged episode)`` pairs: each sub-env's episodes in the order it played them
    (the dataset's ids, in order of first appearance, per ``custom_data["env_index"]``)."""
    ds = Dataset(path)
    env_of = {}
    for i, row in enumerate(ds.summaries):
        env_of.setdefault(row.id_, ds.episode(i).custom_data["env_index"])
    per_env: dict[int, list] = defaultdict(list)
    for summary in dataset_info(path).episodes:
        per_env[env_of[summary.id_]].append(summary)
    ds.close()
    return [(s, e) for env, summaries in per_env.items() for s, e in zip(summaries, log[env])]


def leaf_rows(x: Any, rows: slice) -> Any:
    return {k: leaf_rows(v, rows) for k, v in x.items()} if isinstance(x, dict) else x[rows]


def joined(parts: list) -> Any:
    if isinstance(parts[0], dict):
        return {k: joined([p[k] for p in parts]) for k in parts[0]}
    return np.concatenate(parts)


def d4rl_arrays(path: Path, *, episode_order: bool = True) -> dict[str, Any]:
    """A hand-built reference (format.md built it so before `flat_transitions`): D4RL's flat layout,
    one row per transition, from ``Dataset.steps`` per piece. With ``episode_order`` the pieces
    of each episode come together in time order and an episode that ends neither way (the
    recording stopped) gets ``timeouts`` at its last step; without it, manifest order."""
    out: dict[str, list] = {key: [] for key in FLAT_KEYS}
    with Dataset(path) as ds:
        runs: dict[str, list[tuple[int, int]]] = {}
        for i, row in enumerate(ds.summaries):
            key = json.dumps(row.id_) if episode_order else str(i)
            runs.setdefault(key, []).append((row.t_started, i))
        for run in runs.values():
            for _, i in sorted(run):
                steps = ds.steps(i, None, None)
                n = len(steps["rewards"])
                if n == 0:
                    continue
                flags = np.zeros((2, n), bool)
                flags[:, -1] = steps["terminated"], steps["truncated"]
                out["observations"].append(leaf_rows(steps["observations"], slice(0, n)))
                out["next_observations"].append(leaf_rows(steps["observations"], slice(1, None)))
                out["actions"].append(steps["actions"])
                out["rewards"].append(steps["rewards"])
                out["terminals"].append(flags[0])
                out["timeouts"].append(flags[1])
            if episode_order and not (out["terminals"][-1][-1] or out["timeouts"][-1][-1]):
                out["timeouts"][-1] = out["timeouts"][-1].copy()
                out["timeouts"][-1][-1] = True
    return {key: joined(parts) for key, parts in out.items()}


def test_episode_table_matches_the_log(recorded):
    pd = pytest.importorskip("pandas")  # not a dependency of episodes
    path, _, log = recorded
    table = pd.DataFrame([vars(e) for e in dataset_info(path).episodes])
    assert list(table.columns) == ["id_", "num_chunks", "length", "ret", "terminated", "truncated"]
    with Dataset(path) as ds:
        assert table["num_chunks"].max() > 1 and len(ds.shards) == len(ds) > 1
    pairs = logged_episodes(path, log)
    assert len(pairs) == len(table) == sum(map(len, log.values()))
    for summary, episode in pairs:
        done = episode["terminated"] or episode["truncated"]
        rewards = episode["rewards"] if done else episode["rewards"][: summary.length]
        # a running episode's last steps may wait in the runner for its next sample() call
        assert summary.length == len(rewards)
        assert summary.ret == sum(rewards)
        assert (summary.terminated, summary.truncated) == (
            episode["terminated"],
            episode["truncated"],
        )


def test_loaded_episodes_hold_what_the_envs_gave(recorded):
    path, obs_kind, log = recorded
    for summary, episode in logged_episodes(path, log):
        loaded = load_episode(path, summary.id_, numpy=True)
        n = len(loaded)
        obs = loaded.get_observations()
        if obs_kind == "dict":
            assert obs["mode"].tolist() == [o["mode"] for o in episode["obs"][: n + 1]]
            np.testing.assert_array_equal(obs["pos"], [o["pos"] for o in episode["obs"][: n + 1]])
        else:
            np.testing.assert_array_equal(obs, episode["obs"][: n + 1])
        np.testing.assert_array_equal(loaded.get_actions(), episode["actions"][:n])
        assert loaded.get_rewards().tolist() == episode["rewards"][:n]
        assert [info["k"] for info in loaded.get_infos()] == list(range(n + 1))


@pytest.mark.parametrize("threshold", [0.0, 6.5, 9.0, 100.0])
def test_filter_by_return_keeps_the_logged_episodes_above_it(recorded, tmp_path, threshold):
    path, _, log = recorded
    kept = filter_dataset(path, tmp_path / "kept", min_return=threshold, done_only=True)
    expected = {
        s.id_
        for s, e in logged_episodes(path, log)
        if sum(e["rewards"]) >= threshold and (e["terminated"] or e["truncated"])
    }
    if not expected:
        assert kept == 0
        return
    assert {e.id_ for e in dataset_info(tmp_path / "kept").episodes} == expected


def test_split_keeps_episodes_whole_and_draws_each_one(recorded, tmp_path):
    path, _, _ = recorded
    ids = {e.id_ for e in dataset_info(path).episodes}
    sizes = set()
    for seed in range(6):
        train, val = tmp_path / f"train{seed}", tmp_path / f"val{seed}"
        split(path, train, val, fraction=0.5, seed=seed)
        sides = [{e.id_: e for e in dataset_info(p).episodes} for p in (train, val)]
        assert set(sides[0]).isdisjoint(sides[1]) and set(sides[0]) | set(sides[1]) == ids
        whole = {e.id_: e for e in dataset_info(path).episodes}
        assert all(e == whole[i] for side in sides for i, e in side.items())
        sizes.add(len(sides[1]))
    # each id goes to validation by a hash of (seed, id): the share is drawn, not exact
    assert len(sizes) > 1


def test_d4rl_arrays_match_the_log(recorded):
    path, obs_kind, log = recorded
    flat = d4rl_arrays(path)
    rows: dict[str, list] = {key: [] for key in FLAT_KEYS}
    for summary, episode in logged_episodes(path, log):
        n = summary.length
        rows["observations"] += episode["obs"][:n]
        rows["next_observations"] += episode["obs"][1 : n + 1]
        rows["actions"] += episode["actions"][:n]
        rows["rewards"] += episode["rewards"][:n]
        rows["terminals"] += [False] * (n - 1) + [episode["terminated"]]
        rows["timeouts"] += [False] * (n - 1) + [not episode["terminated"]]
    assert len(flat["rewards"]) == dataset_info(path).num_steps
    assert sorted(flat["rewards"].tolist()) == sorted(rows["rewards"])

    # the table's order is the dataset's, the log's per env: compare as sets of transitions
    def keyed(obs, act, rew, nxt, term, out):
        if obs_kind == "dict":
            obs, nxt = (np.asarray(o["pos"]).tolist() + [int(o["mode"])] for o in (obs, nxt))
        else:
            obs, nxt = np.asarray(obs).tolist(), np.asarray(nxt).tolist()
        return json.dumps([obs, np.asarray(act).tolist(), float(rew), nxt, bool(term), bool(out)])

    obs_rows = flat["observations"]
    at = (
        (lambda x, i: {k: v[i] for k, v in x.items()})
        if obs_kind == "dict"
        else (lambda x, i: x[i])
    )
    got = sorted(
        keyed(at(obs_rows, i), flat["actions"][i], flat["rewards"][i],
              at(flat["next_observations"], i), flat["terminals"][i], flat["timeouts"][i])
        for i in range(len(flat["rewards"]))
    )  # fmt: skip
    want = sorted(keyed(*row) for row in zip(*(rows[key] for key in FLAT_KEYS)))
    assert got == want
    ends = flat["terminals"] | flat["timeouts"]
    assert ends.sum() == len(dataset_info(path).episodes)


def test_pieces_in_manifest_order_end_without_either_flag(recorded):
    """A runner's piece that its episode continues ends neither terminated nor truncated, and
    the next piece in the manifest is often another episode's: split at terminals|timeouts,
    manifest-order rows run episodes together. The recipe's episode order does not."""
    path, obs_kind, _ = recorded
    for episode_order in (False, True):
        flat = d4rl_arrays(path, episode_order=episode_order)
        nxt, obs = flat["next_observations"], flat["observations"]
        if obs_kind == "dict":
            nxt, obs = nxt["pos"], obs["pos"]
        ends = flat["terminals"] | flat["timeouts"]
        continues = np.all(nxt[:-1] == obs[1:], axis=tuple(range(1, obs.ndim)))
        crossed = int((~ends[:-1] & ~continues).sum())
        assert (crossed == 0) == episode_order


def test_parquet_shards_read_with_pyarrow_and_pandas(recorded, tmp_path):
    pd = pytest.importorskip("pandas")  # not a dependency of episodes
    path, obs_kind, _ = recorded
    migrate(path, tmp_path / "pq", data_format="parquet", shard_bytes=4096)
    files = [str(f) for f in data_files(tmp_path / "pq")]
    assert len(files) > 1
    table = pq.read_table(files)
    expected_obs = {
        "dict": "struct<mode: int64, pos: list<element: float>>",
        "box": "list<element: float>",
        "discrete": "int64",
    }[obs_kind]
    assert str(table.schema.field("observations").type) == expected_obs
    assert {
        name: str(table.schema.field(name).type) for name in ("rewards", "t", "episode_id")
    } == {
        "rewards": "double",
        "t": "int64",
        "episode_id": "string",
    }
    assert "terminated" not in table.column_names  # flags live in the manifest
    frame = pd.read_parquet(files)
    assert len(frame) == table.num_rows
    # one row per observation: each piece's last row has no reward, and a runner's later pieces
    # start with a lookback row repeating the step before them
    assert frame["rewards"].isna().sum() == len(Dataset(path))
    if obs_kind == "dict":
        flat = table.flatten()
        assert {"observations.pos", "observations.mode"} <= set(flat.column_names)


def test_a_directory_read_of_shards_trips_on_the_index_files(recorded, tmp_path):
    pd = pytest.importorskip("pandas")  # not a dependency of episodes
    path, _, _ = recorded
    migrate(path, tmp_path / "pq", data_format="parquet")
    with pytest.raises(pa.ArrowInvalid, match=r"\.json"):
        pd.read_parquet(tmp_path / "pq" / "shards")
    assert len(pd.read_parquet([str(f) for f in data_files(tmp_path / "pq")])) > 0


def test_runner_infos_are_blob_references_in_the_data_files(recorded):
    """A vector env's infos reach the runner as numpy values, stored in the piece's blob: the
    JSON text a tool sees names a blob entry, not the value (episodes' readers decode it)."""
    path, _, _ = recorded
    table = pyarrow.ipc.open_file(str(data_files(path)[0])).read_all()
    infos = [json.loads(text) for text in table.column("infos").to_pylist()]
    assert infos[0] == {"k": {"__ep_np__": 0}}
    assert table.column("blob")[0].as_py() is not None


def test_transition_dataset_items_in_order_are_the_d4rl_rows(recorded):
    """``TransitionDataset`` (n_step=1) items, in order, are the recipe's rows: only the last
    step of an episode the recording stopped in differs (no ``truncated``, the recipe's
    ``timeouts``)."""
    pytest.importorskip("torch")
    from episodes.io.torch_data import TransitionDataset

    path, obs_kind, _ = recorded
    flat = d4rl_arrays(path)
    data = TransitionDataset(path)
    items = [data[i] for i in range(len(data))]
    obs, nxt = flat["observations"], flat["next_observations"]
    for name, got, want in [
        ("obs", [it["obs"] for it in items], obs),
        ("next_obs", [it["next_obs"] for it in items], nxt),
    ]:
        if obs_kind == "dict":
            for key in ("pos", "mode"):
                np.testing.assert_array_equal(np.stack([g[key] for g in got]), want[key], name)
        else:
            np.testing.assert_array_equal(np.stack(got), want, name)
    np.testing.assert_array_equal(np.stack([it["actions"] for it in items]), flat["actions"])
    assert [it["rewards"] for it in items] == flat["rewards"].tolist()
    assert [it["terminated"] for it in items] == flat["terminals"].tolist()
    cut = [i for i, it in enumerate(items) if it["truncated"] != flat["timeouts"][i]]
    running = [e for e in dataset_info(path).episodes if not (e.terminated or e.truncated)]
    assert len(cut) == len(running) and all(flat["timeouts"][cut])
