"""Torch datasets over v2 shards: items match the episodes; shuffled multi-worker loading."""

from __future__ import annotations

import os

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from _gen import make_episode  # noqa: E402
from torch.utils.data import DataLoader  # noqa: E402

from episodes import SingleAgentEpisode  # noqa: E402
from episodes.io import DatasetError, DatasetWriter  # noqa: E402
from episodes.io.torch_data import SequenceDataset, TransitionDataset  # noqa: E402


def make_data(tmp_path, n_episodes=12, shard_bytes=2000):
    rng = np.random.default_rng(0)
    episodes = []
    for k in range(n_episodes):
        n = int(rng.integers(1, 15))
        ep = SingleAgentEpisode(
            f"e{k}",
            observations=list(rng.normal(size=(n + 1, 3)).astype(np.float32)),
            actions=list(rng.integers(0, 4, n)),
            rewards=list(rng.normal(size=n)),
            extra_model_outputs={"logp": list(rng.normal(size=n).astype(np.float32))},
            terminated=k % 2 == 0,
            truncated=k % 3 == 1,
            len_lookback_buffer=0,
        )
        ep.to_numpy()
        episodes.append(ep)
    path = tmp_path / "ds"
    with DatasetWriter(path, shard_bytes=shard_bytes) as w:
        w.write_many(episodes)
    return path, episodes


def expected_transitions(episodes, n_step, gamma):
    out = []
    for ep in episodes:
        obs, act, rew = ep.get_observations(), ep.get_actions(), ep.get_rewards()
        n = len(ep)
        for t in range(n):
            k = min(n_step, n - t)
            ret = sum(gamma**j * rew[t + j] for j in range(k))
            ends = t + k == n
            out.append(
                (
                    obs[t],
                    act[t],
                    ret,
                    obs[t + k],
                    ends and ep.is_terminated,
                    ends and ep.is_truncated,
                    k,
                )
            )
    return out


@pytest.mark.parametrize("n_step", [1, 3])
def test_transitions_match_the_episodes(tmp_path, n_step):
    path, episodes = make_data(tmp_path)
    data = TransitionDataset(path, n_step=n_step, gamma=0.9)
    want = expected_transitions(episodes, n_step, 0.9)
    assert len(data) == len(want)
    for idx in [0, len(data) - 1, *range(1, len(data), 7), -1]:
        item, w = data[idx], want[idx]
        np.testing.assert_array_equal(item["obs"], w[0])
        assert item["actions"] == w[1]
        assert item["rewards"] == pytest.approx(w[2])
        np.testing.assert_array_equal(item["next_obs"], w[3])
        assert (item["terminated"], item["truncated"], item["n"]) == (w[4], w[5], w[6])
    with pytest.raises(IndexError):
        data[len(data)]


@pytest.mark.parametrize(("n_step", "dtype"), [(1, np.float32), (3, np.float64)])
def test_every_reward_of_a_dataset_has_one_type(tmp_path, n_step, dtype):
    # A last step (one reward left) gave the stored float32 among n-step float64 sums.
    ep = SingleAgentEpisode(
        "f32",
        observations=[np.float32([k]) for k in range(6)],
        actions=[0] * 5,
        rewards=list(np.arange(5, dtype=np.float32)),
        len_lookback_buffer=0,
    )
    with DatasetWriter(tmp_path / "ds") as writer:
        writer.write(ep.to_numpy())
    data = TransitionDataset(tmp_path / "ds", n_step=n_step)
    assert {np.asarray(data[i]["rewards"]).dtype for i in range(len(data))} == {np.dtype(dtype)}


def test_shuffled_multi_worker_loader_sees_every_transition_once(tmp_path):
    path, episodes = make_data(tmp_path, n_episodes=20)
    data = TransitionDataset(path)
    loader = DataLoader(data, batch_size=16, shuffle=True, num_workers=2)
    seen = []
    for batch in loader:
        assert batch["obs"].shape[1:] == (3,) and batch["obs"].dtype == torch.float32
        seen.extend(zip(batch["obs"][:, 0].tolist(), batch["rewards"].tolist(), strict=True))
    want = [(float(w[0][0]), float(w[2])) for w in expected_transitions(episodes, 1, 1.0)]
    assert len(seen) == len(want)
    np.testing.assert_allclose(np.array(sorted(seen)), np.array(sorted(want)), rtol=1e-6)


def test_sequences(tmp_path):
    path, episodes = make_data(tmp_path)
    data = SequenceDataset(path, length=4)
    windows = [(ep, t) for ep in episodes for t in range(max(0, len(ep) - 3))]
    assert len(data) == len(windows)
    for idx in range(0, len(data), 5):
        ep, t = windows[idx]
        item = data[idx]
        np.testing.assert_array_equal(item["obs"], ep.get_observations(slice(t, t + 5)))
        np.testing.assert_array_equal(item["rewards"], ep.get_rewards(slice(t, t + 4)))
        np.testing.assert_array_equal(
            item["extra_model_outputs"]["logp"], ep.get_extra_model_outputs("logp", slice(t, t + 4))
        )
        ends = t + 4 == len(ep)
        assert item["terminated"].tolist() == [False] * 3 + [ends and ep.is_terminated]
    batch = next(iter(DataLoader(data, batch_size=4, shuffle=True, num_workers=2)))
    assert batch["obs"].shape == (4, 5, 3) and batch["terminated"].shape == (4, 4)


def test_nested_observations(tmp_path):
    ep = make_episode(4, obs_space="dict", numpy=True, lookback=1, steps=5, extra=False)
    with DatasetWriter(tmp_path / "ds") as w:
        w.write(ep)
    data = TransitionDataset(tmp_path / "ds")
    item = data[2]
    want = ep.get_observations(2)
    np.testing.assert_array_equal(item["obs"]["pos"], want["pos"])
    np.testing.assert_array_equal(item["obs"]["inner"][1], want["inner"][1])


def test_json_columns_are_refused_clearly(tmp_path):
    ep = SingleAgentEpisode(
        "m", observations=[0, 1, 2], actions=[0, 1], rewards=[1, 2.5], len_lookback_buffer=0
    )
    with DatasetWriter(tmp_path / "ds") as w:
        w.write(ep)
    data = TransitionDataset(tmp_path / "ds")
    with pytest.raises(DatasetError, match="stored as JSON"):
        data[0]


@pytest.mark.parametrize("obs_space", ["multi_binary", "box_u8", "tuple"])
def test_other_observation_kinds(tmp_path, obs_space):
    episodes = [make_episode(k, obs_space=obs_space, numpy=True, extra=False) for k in range(3)]
    with DatasetWriter(tmp_path / "ds", shard_bytes=1) as w:
        w.write_many(episodes)
    data = TransitionDataset(tmp_path / "ds")
    assert len(data) == sum(len(e) for e in episodes)
    for idx, (k, t) in enumerate((k, t) for k, e in enumerate(episodes) for t in range(len(e))):
        np.testing.assert_equal(data[idx]["next_obs"], episodes[k].get_observations(t + 1))


def test_a_full_plan_cache_evicts_and_replans(tmp_path, monkeypatch):
    """Column plans are cached per episode up to a bound; past it, the oldest are dropped and
    planned again when needed: the items stay the same, in any reading order."""
    import episodes.io.torch_data as torch_data

    monkeypatch.setattr(torch_data, "_PLAN_CACHE", 2)
    path, episodes = make_data(tmp_path)
    data = TransitionDataset(path, n_step=2, gamma=0.9)
    want = expected_transitions(episodes, 2, 0.9)
    order = np.random.default_rng(1).permutation(len(data))
    for idx in [*order, *order[:10]]:
        item = data[int(idx)]
        np.testing.assert_array_equal(item["obs"], want[idx][0])
        assert item["rewards"] == pytest.approx(want[idx][2])
        np.testing.assert_array_equal(item["next_obs"], want[idx][3])
    assert len(data._plans) <= 2


@pytest.mark.parametrize(
    "make",
    [
        lambda path: TransitionDataset(path, n_step=0, gamma=0.9),
        lambda path: SequenceDataset(path, length=0),
    ],
    ids=["n_step_0", "length_0"],
)
def test_bad_sizes_are_refused(tmp_path, make):
    path, _ = make_data(tmp_path, n_episodes=2)
    with pytest.raises(ValueError, match=">= 1"):
        make(path)


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs /proc/self/maps")
def test_the_torch_datasets_keep_at_most_max_open_shards_mapped(tmp_path):
    # Their plan cache held views into every shard it had touched: all stayed mapped.
    import gc

    path = tmp_path / "ds"
    with DatasetWriter(path, shard_bytes=1) as writer:
        for k in range(30):
            writer.write(
                SingleAgentEpisode(
                    f"e{k}",
                    observations=list(np.arange(4, dtype=np.float32).reshape(4, 1) + k),
                    actions=[0, 1, 0],
                    rewards=[1.0, 2.0, 3.0],
                    len_lookback_buffer=0,
                ).to_numpy()
            )
    data = TransitionDataset(path, max_open_shards=2)
    for i in range(len(data)):
        data[i]
    gc.collect()
    with open("/proc/self/maps") as maps:
        mapped = {line.split()[-1] for line in maps if str(path) in line}
    assert 1 <= len(mapped) <= 2


@pytest.mark.parametrize(
    ("cls", "kwargs"),
    [
        (TransitionDataset, {"gamma": 2.0}),  # was taken: rewards summed with weights 1, 2, 4
        (TransitionDataset, {"gamma": float("nan")}),
        (TransitionDataset, {"n_step": 2.5}),  # failed at the first item, in a worker
        (TransitionDataset, {"n_step": True}),
        (SequenceDataset, {"length": 2.0}),
    ],
)
def test_bad_arguments_are_refused_when_the_dataset_is_made(tmp_path, cls, kwargs):
    path, _ = make_data(tmp_path)
    if cls is SequenceDataset:
        kwargs = {"length": 2, **kwargs}
    with pytest.raises(ValueError, match="gamma|n_step|length"):
        cls(path, **kwargs)
