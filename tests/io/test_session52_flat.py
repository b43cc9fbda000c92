"""Session 52: ``flat_transitions``, D4RL's flat arrays of a dataset, checked against a
plain-Python log of the episodes written (pieces in several shards, two writers, a runner's
interleaved episodes), and through the npz file ``episodes export --to npz`` writes."""

from __future__ import annotations

import io
import json
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import tree
from hypothesis import given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.cli.npz_export import npz_arrays
from episodes.io import Dataset, DatasetError, DatasetWriter, EpisodeWriter, dataset_info
from episodes.io.errors import UnsupportedVersionError
from episodes.io.flat_arrays import FLAT_KEYS, flat_transitions
from tests.io.test_session52_analyst import RECORDINGS, d4rl_arrays, logged_episodes, record

OBS_KINDS = ("box", "discrete", "dict", "tuple")


def observation(kind: str, episode: int, t: int) -> Any:
    """An observation naming its episode and time, of each kind."""
    pos = np.float32([episode, t])
    return {
        "box": pos,
        "discrete": episode * 100 + t,
        "dict": {"pos": pos, "mode": t % 3},
        "tuple": (t % 3, pos),
    }[kind]


def log_episode(kind: str, e: int, length: int, end: str) -> dict[str, Any]:
    """A plain-Python episode: ``length`` steps, ``end`` "terminated", "truncated" or ""."""
    return {
        "id": f"ep{e}",
        "obs": [observation(kind, e, t) for t in range(length + 1)],
        "actions": [np.float32([e, t, -t]) for t in range(length)],
        "rewards": [e + t / 4 for t in range(length)],
        "terminated": end == "terminated",
        "truncated": end == "truncated",
    }


def piece(log: dict[str, Any], a: int, b: int, last: bool, lookback: int) -> SingleAgentEpisode:
    """Steps ``[a, b)`` of a logged episode, with ``lookback`` steps before them (as a runner's
    later pieces repeat the step before them); the flags on the episode's last piece."""
    lb = min(lookback, a)
    return SingleAgentEpisode(
        log["id"],
        observations=log["obs"][a - lb : b + 1],
        actions=log["actions"][a - lb : b],
        rewards=log["rewards"][a - lb : b],
        len_lookback_buffer=lb,
        t_started=a,
        terminated=last and log["terminated"],
        truncated=last and log["truncated"],
    ).to_numpy()


def reference(logs: list[dict[str, Any]], order: list[str], done_only: bool = False) -> dict:
    """The flat rows built step by step from the log, episodes in ``order`` (their ids in the
    order the manifest first lists them)."""
    by_id = {log["id"]: log for log in logs}
    rows: dict[str, list] = {key: [] for key in FLAT_KEYS}
    for id_ in order:
        log = by_id[id_]
        n = len(log["rewards"])
        if done_only and not (log["terminated"] or log["truncated"]):
            continue
        for t in range(n):
            rows["observations"].append(log["obs"][t])
            rows["next_observations"].append(log["obs"][t + 1])
            rows["actions"].append(log["actions"][t])
            rows["rewards"].append(log["rewards"][t])
            rows["terminals"].append(t == n - 1 and log["terminated"])
            rows["timeouts"].append(t == n - 1 and not log["terminated"])
    return rows


def assert_rows(flat: dict[str, Any], rows: dict[str, list]) -> None:
    """Each flat array's row ``k`` equals the reference's ``k``-th value."""
    count = len(rows["rewards"])
    for key in FLAT_KEYS:
        column = flat[key]
        got = [tree.map_structure(lambda x, k=k: x[k], column) for k in range(count)]
        assert len(tree.flatten(column)[0]) == count, key
        for k, (g, w) in enumerate(zip(got, rows[key])):
            tree.assert_same_structure(g, w if not isinstance(w, (int, float, bool)) else g)
            for gl, wl in zip(tree.flatten(g), tree.flatten(w)):
                np.testing.assert_array_equal(gl, wl, err_msg=f"{key} row {k}")


def manifest_order(path: Any) -> list[str]:
    with Dataset(path) as ds:
        return list(dict.fromkeys(row.id_ for row in ds.summaries))


# ------------------------------------------------------------------ table-driven examples
EXAMPLES = {
    # (episodes: (length, end, cuts)); cuts split the episode into pieces at those steps
    "one_terminated": [(3, "terminated", [])],
    "one_truncated": [(3, "truncated", [])],
    "one_the_recording_stopped": [(3, "", [])],
    "pieces_of_two_interleaved": [(4, "terminated", [1, 3]), (3, "", [2])],
    "one_step_episodes": [(1, "truncated", []), (1, "terminated", []), (1, "", [])],
    "an_episode_without_steps": [(0, "", []), (2, "terminated", [1])],
}


@pytest.mark.parametrize("kind", OBS_KINDS)
@pytest.mark.parametrize("case", EXAMPLES)
def test_examples_match_the_log(tmp_path, case, kind):
    logs = [log_episode(kind, e, n, end) for e, (n, end, _) in enumerate(EXAMPLES[case])]
    pieces = []
    for log, (n, _, cuts) in zip(logs, EXAMPLES[case]):
        bounds = [0, *cuts, n]
        pieces.append(
            [piece(log, a, b, b == n, lookback=1) for a, b in zip(bounds[:-1], bounds[1:])]
        )
    with DatasetWriter(tmp_path / "d", shard_bytes=1) as w:  # round robin over the episodes
        while any(pieces):
            for queue in pieces:
                if queue:
                    w.write(queue.pop(0))
    flat = flat_transitions(tmp_path / "d")
    assert set(flat) == set(FLAT_KEYS)
    assert_rows(flat, reference(logs, manifest_order(tmp_path / "d")))
    for done_only in (False, True):
        got = flat_transitions(tmp_path / "d", done_only=done_only)
        assert_rows(got, reference(logs, manifest_order(tmp_path / "d"), done_only))


@pytest.mark.parametrize(
    ("kind", "dtypes"),
    [
        ("box", {"observations": np.float32, "next_observations": np.float32}),
        ("discrete", {"observations": np.int64}),
        ("dict", {"observations": {"mode": np.int64, "pos": np.float32}}),
        ("tuple", {"observations": (np.int64, np.float32)}),
    ],
)
def test_dict_tuple_and_discrete_observations_keep_their_nesting_and_dtypes(tmp_path, kind, dtypes):
    with DatasetWriter(tmp_path / "d") as w:
        w.write(piece(log_episode(kind, 0, 2, "terminated"), 0, 2, True, 0))
    flat = flat_transitions(tmp_path / "d")
    for key, want in dtypes.items():
        got = tree.map_structure(lambda x: x.dtype, flat[key])
        assert got == tree.map_structure(np.dtype, want)
    assert flat["actions"].dtype == np.float32 and flat["actions"].shape == (2, 3)
    assert flat["rewards"].dtype == np.float64
    assert flat["terminals"].dtype == flat["timeouts"].dtype == np.bool_


def test_dtypes_of_one_kind_join_and_other_kinds_are_refused(tmp_path):
    def ep(id_, obs, actions):
        return SingleAgentEpisode(
            id_, observations=obs, actions=actions, rewards=[1, 2], len_lookback_buffer=0
        ).to_numpy()

    with DatasetWriter(tmp_path / "d") as w:
        w.write(ep("a", np.float32([0.5, 1, 2]), np.int32([1, 2])))
        w.write(ep("b", np.float64([0.25, 1e300, 3]), np.int64([2**40, 3])))
    flat = flat_transitions(tmp_path / "d")
    assert flat["observations"].dtype == np.float64 and flat["actions"].dtype == np.int64
    assert flat["observations"].tolist() == [0.5, 1, 0.25, 1e300]
    assert flat["actions"].tolist() == [1, 2, 2**40, 3]
    assert flat["rewards"].dtype == np.int64  # stored so: rewards are not made floats
    with DatasetWriter(tmp_path / "e") as w:
        w.write(ep("a", np.zeros((3, 2)), np.int32([1, 2])))
        w.write(ep("b", np.zeros((3, 3)), np.int32([1, 2])))
    with pytest.raises(DatasetError, match=r"pieces 0 \(episode 'a'\) and 1 \(episode 'b'\)"):
        flat_transitions(tmp_path / "e")


def test_extra_model_outputs_are_rows_too_and_must_agree(tmp_path):
    def ep(id_, extras):
        return SingleAgentEpisode(
            id_, observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 2.0],
            extra_model_outputs=extras, len_lookback_buffer=0,
        ).to_numpy()  # fmt: skip

    with DatasetWriter(tmp_path / "d") as w:
        w.write(ep("a", {"logp": [-1.0, -2.0], "h": np.array([[1, 2], [3, 4]])}))
        w.write(ep("b", {"logp": [-3.0, -4.0], "h": np.array([[5, 6], [7, 8]])}))
    assert "extra_model_outputs" not in flat_transitions(tmp_path / "d")
    extras = flat_transitions(tmp_path / "d", extra_model_outputs=True)["extra_model_outputs"]
    assert extras["logp"].tolist() == [-1.0, -2.0, -3.0, -4.0]
    assert extras["h"].tolist() == [[1, 2], [3, 4], [5, 6], [7, 8]]
    with DatasetWriter(tmp_path / "d") as w:
        w.write(ep("c", {"logp": [0.0, 0.0]}))
    with pytest.raises(DatasetError, match=r"pieces 0 \(episode 'a'\) and 2 \(episode 'c'\)"):
        flat_transitions(tmp_path / "d", extra_model_outputs=True)


TEXT_OR_GRAPH = {
    "text": (gym.spaces.Text(4), ["ab", "c", "d"], "dtype <U"),
    "sequence": (gym.spaces.Sequence(gym.spaces.Discrete(3)), [(1,), (1, 2), ()], "one by one"),
    "mixed_list_items": (None, [0, [1, 2], 3], "one by one"),
}


@pytest.mark.parametrize("case", TEXT_OR_GRAPH)
def test_observations_that_are_no_numeric_arrays_are_refused_by_name(tmp_path, case):
    space, obs, held = TEXT_OR_GRAPH[case]
    with DatasetWriter(tmp_path / "d") as w:
        w.write(
            SingleAgentEpisode(
                "x", observations=obs, actions=[0, 1], rewards=[1.0, 1.0],
                observation_space=space, len_lookback_buffer=0,
            )
        )  # fmt: skip
    with pytest.raises(DatasetError, match=rf"piece 0 \(episode 'x'\) holds observations.*{held}"):
        flat_transitions(tmp_path / "d")


def test_a_v1_dataset_and_bad_flags_are_refused(tmp_path):
    EpisodeWriter(tmp_path / "v1").close()
    with pytest.raises(UnsupportedVersionError, match="flat_transitions reads v2"):
        flat_transitions(tmp_path / "v1")
    DatasetWriter(tmp_path / "v2").close()
    for bad in ("yes", 1, None):
        with pytest.raises(TypeError, match="done_only must be a bool"):
            flat_transitions(tmp_path / "v2", done_only=bad)  # type: ignore[arg-type]


def test_a_dataset_without_transitions_gives_empty_typed_arrays(tmp_path):
    DatasetWriter(tmp_path / "empty").close()
    flat = flat_transitions(tmp_path / "empty")
    assert all(len(flat[key]) == 0 for key in FLAT_KEYS)
    with DatasetWriter(tmp_path / "d") as w:
        w.write(piece(log_episode("dict", 0, 2, ""), 0, 2, True, 0))
    flat = flat_transitions(tmp_path / "d", done_only=True)  # the only episode is running
    assert flat["observations"]["pos"].shape == (0, 2) and flat["actions"].shape == (0, 3)
    assert flat["next_observations"]["mode"].dtype == np.int64


# ---------------------------------------------- a runner's interleaved episodes (N sub-envs)
@pytest.mark.parametrize("obs_kind", ["dict", "box", "discrete"])
def test_a_runners_dataset_gives_the_logged_transitions_episode_by_episode(tmp_path, obs_kind):
    path = tmp_path / "data"
    log = record(path, obs_kind, mode=RECORDINGS[obs_kind])  # 2 writers, a shard per chunk
    flat = flat_transitions(path)
    with Dataset(path) as ds:
        assert len(ds.shards) > 1 and len(ds) > len(dataset_info(path).episodes)
    logs = []
    for summary, episode in logged_episodes(path, log):
        n = summary.length  # the steps the recording got to
        logs.append(
            {
                "id": json.dumps(summary.id_),
                "obs": episode["obs"][: n + 1],
                "actions": episode["actions"][:n],
                "rewards": episode["rewards"][:n],
                "terminated": episode["terminated"] and n == len(episode["rewards"]),
                "truncated": episode["truncated"] and n == len(episode["rewards"]),
            }
        )
    order = [json.dumps(e.id_) for e in dataset_info(path).episodes]  # first listed first
    assert_rows(flat, reference(logs, order))
    recipe = d4rl_arrays(path)  # format.md's hand-built arrays: the same, row for row
    for key in FLAT_KEYS:
        tree.map_structure(np.testing.assert_array_equal, flat[key], recipe[key])


# ------------------------------------------------------------------------ the property
@st.composite
def datasets(draw: Any) -> tuple[str, list[dict[str, Any]], list[list[SingleAgentEpisode]]]:
    kind = draw(st.sampled_from(OBS_KINDS))
    count = draw(st.integers(1, 5))
    logs, pieces = [], []
    for e in range(count):
        n = draw(st.integers(0, 6))
        end = draw(st.sampled_from(["terminated", "truncated", ""])) if n else ""
        log = log_episode(kind, e, n, end)
        cuts = sorted(draw(st.sets(st.integers(1, max(1, n - 1)), max_size=3))) if n > 1 else []
        bounds = [0, *cuts, n]
        lookback = draw(st.integers(0, 1))
        logs.append(log)
        pieces.append([piece(log, a, b, b == n, lookback) for a, b in zip(bounds[:-1], bounds[1:])])
    return kind, logs, pieces


@settings(max_examples=40, deadline=None)
@given(data=datasets(), picks=st.lists(st.integers(0, 9), min_size=30, max_size=30))
def test_flat_arrays_equal_the_logs_rows(tmp_path_factory, data, picks):
    """Episodes of each obs kind, cut into pieces written by two writers in an interleaving of
    their time orders (a small shard per write): rows equal the log's, episode by episode, and
    the npz file's arrays equal them."""
    _, logs, pieces = data
    path = tmp_path_factory.mktemp("flat") / "d"
    queues = [list(p) for p in pieces]
    with (
        DatasetWriter(path, shard_bytes=1) as first,
        DatasetWriter(path, shard_bytes=1) as second,
    ):
        step = 0
        while any(queues):
            live = [q for q in queues if q]
            pick = picks[step % len(picks)]
            (first if pick % 2 else second).write(live[pick % len(live)].pop(0))
            step += 1
    order = manifest_order(path)
    for done_only in (False, True):
        flat = flat_transitions(path, done_only=done_only)
        assert_rows(flat, reference(logs, order, done_only))
    buffer = io.BytesIO()
    np.savez(buffer, **npz_arrays(flat))
    buffer.seek(0)
    with np.load(buffer, allow_pickle=False) as loaded:
        stored = npz_arrays(flat)
        assert sorted(loaded.files) == sorted(stored)
        for key, value in stored.items():
            np.testing.assert_array_equal(loaded[key], value)
            assert loaded[key].dtype == value.dtype
