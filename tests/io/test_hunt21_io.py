"""Rewards and times through the step readers, and Text strings through the Minari export.

- n-step rewards of vector (multi-objective) rewards are summed per component, the same in
  ``TransitionDataset`` and ``nstep_columns`` (what ``read_transitions`` reads with);
- step rows keep the stored rewards (complex, int64 beyond 2**53); n-step sums are float64
  and refuse complex rewards, as ``get_return`` does;
- Text observations and actions ending in NUL reach Minari's files as given;
- a step whose ``t`` int64 cannot hold is an ``UnstorableValueError`` naming the episode.
"""

from __future__ import annotations

import os
import warnings

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter, EpisodeWriter, UnstorableValueError, load_episode

pytest.importorskip("ray")  # episodes.distributed's extra
rows = pytest.importorskip("episodes.distributed.rows")
torch_data = pytest.importorskip("episodes.io.torch_data")

VECTOR = [np.array([1.0, 10.0]), np.array([2.0, 20.0]), np.array([3.0, 30.0])]


def _episode(rewards, t_started=0, id_="v"):
    n = len(rewards)
    return SingleAgentEpisode(
        id_,
        observations=[float(i) for i in range(n + 1)],
        actions=[0] * n,
        rewards=rewards,
        len_lookback_buffer=0,
        t_started=t_started,
    ).to_numpy()


def _dataset(tmp_path, episode):
    path = tmp_path / "data"
    with DatasetWriter(path) as w:
        w.write(episode)
    return path


def _expected(rewards, n_step, gamma):
    rewards = np.asarray(rewards, dtype=np.float64)
    n = len(rewards)
    return [sum(gamma**j * rewards[k + j] for j in range(min(n_step, n - k))) for k in range(n)]


# ------------------------------------------------------------------------ vector rewards
@pytest.mark.parametrize(
    ("n_step", "gamma"), [(2, 0.5), (3, 0.5), (3, 0.9), (10, 0.5), (2, 0.0), (3, 1.0)]
)
def test_vector_rewards_sum_per_component_in_both_readers(tmp_path, n_step, gamma):
    episode = _episode(VECTOR)
    data = torch_data.TransitionDataset(_dataset(tmp_path, episode), n_step=n_step, gamma=gamma)
    columns = rows.nstep_columns(episode, n_step, gamma)
    expected = _expected(VECTOR, n_step, gamma)
    assert columns["reward"].shape == (3, 2)
    for k in range(3):
        item = data[k]["rewards"]
        assert item.shape == (2,) and item.dtype == np.float64
        np.testing.assert_allclose(item, expected[k])
        assert np.array_equal(item, columns["reward"][k])  # the readers agree exactly
    # gamma=0.5, n_step=2: [1 + 0.5*2, 10 + 0.5*20]
    if (n_step, gamma) == (2, 0.5):
        assert data[0]["rewards"].tolist() == [2.0, 20.0]


def test_vector_rewards_with_n_step_1_are_unchanged(tmp_path):
    episode = _episode(VECTOR)
    data = torch_data.TransitionDataset(_dataset(tmp_path, episode), n_step=1)
    assert [data[k]["rewards"].tolist() for k in range(3)] == [v.tolist() for v in VECTOR]
    assert rows.nstep_columns(episode, 1, 0.5)["reward"].tolist() == [v.tolist() for v in VECTOR]


def test_scalar_n_step_rewards_agree_exactly_between_readers(tmp_path):
    rewards = np.random.default_rng(0).normal(size=40) * 1e3
    episode = _episode(list(rewards))
    data = torch_data.TransitionDataset(_dataset(tmp_path, episode), n_step=9, gamma=0.97)
    columns = rows.nstep_columns(episode, 9, 0.97)
    got = np.array([data[k]["rewards"] for k in range(40)])
    assert np.array_equal(got, columns["reward"])
    np.testing.assert_allclose(got, _expected(rewards, 9, 0.97))
    assert isinstance(data[0]["rewards"], np.float64)


# ------------------------------------------------------------------ stored reward dtypes
REWARD_CASES = {
    "complex": np.array([1 + 1j, 2j, 3 + 0j]),
    "int64-beyond-2**53": np.array([2**53 + 1, 3, -4], dtype=np.int64),
    "float32": np.array([0.1, 0.2, 0.3], dtype=np.float32),
    "bool": np.array([True, False, True]),
}


@pytest.mark.parametrize("name", ["float32", "bool"])
def test_step_rows_give_float64_rewards_of_the_stored_values(name):
    # One reward type in every block: Arrow cannot join a bool block with a float one.
    stored = REWARD_CASES[name]
    reward = rows.step_columns(_episode(list(stored)))["reward"]
    assert reward.dtype == np.float64
    assert reward.tolist() == stored.astype(np.float64).tolist()


REFUSED_REWARDS = {
    "complex": (TypeError, r"episode 'v': n-step rewards need real numbers"),
    "int64-beyond-2**53": (UnstorableValueError, r"episode 'v': int rewards beyond 2\*\*53"),
}


@pytest.mark.parametrize("name", list(REFUSED_REWARDS))
def test_step_rows_refuse_rewards_float64_would_change(name):
    error, message = REFUSED_REWARDS[name]
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no ComplexWarning: nothing is cast
        with pytest.raises(error, match=message):
            rows.step_columns(_episode(list(REWARD_CASES[name])))


@pytest.mark.parametrize("name", ["float32", "bool"])
def test_n_step_sums_of_real_rewards_are_float64_in_both_readers(tmp_path, name):
    stored = REWARD_CASES[name]
    episode = _episode(list(stored))
    data = torch_data.TransitionDataset(_dataset(tmp_path, episode), n_step=2, gamma=0.5)
    columns = rows.nstep_columns(episode, 2, 0.5)
    assert columns["reward"].dtype == np.float64
    got = [data[k]["rewards"] for k in range(3)]
    assert all(isinstance(g, np.float64) for g in got)
    assert np.array_equal(got, columns["reward"])
    np.testing.assert_allclose(got, _expected(stored, 2, 0.5))


def test_n_step_sums_refuse_complex_rewards_in_both_readers(tmp_path):
    episode = _episode(list(REWARD_CASES["complex"]))
    data = torch_data.TransitionDataset(_dataset(tmp_path, episode), n_step=2, gamma=0.5)
    with pytest.raises(TypeError, match=r"real numbers as rewards.*complex"):
        data[0]
    with pytest.raises(TypeError, match=r"real numbers as rewards.*complex"):
        rows.nstep_columns(episode, 2, 0.5)
    # the stored rewards are still there with n_step=1
    one = torch_data.TransitionDataset(_dataset(tmp_path / "one", episode), n_step=1)
    assert one[0]["rewards"].item() == 1 + 1j


# ------------------------------------------------------------------------ big time steps
@pytest.mark.parametrize(
    ("t_started", "steps"),
    [(2**70, 1), (-(2**70), 2), (2**63 - 2, 3), (-(2**63) - 1, 1)],
    ids=["2**70", "-2**70", "last-step-past-int64-max", "below-int64-min"],
)
def test_steps_beyond_int64_are_refused_naming_the_episode(t_started, steps):
    episode = _episode([1.0] * steps, t_started=t_started, id_="b")
    for columns in (rows.step_columns, lambda e: rows.nstep_columns(e, 2, 0.5)):
        with pytest.raises(UnstorableValueError, match=r"episode 'b'.*int64 t column"):
            columns(episode)


def test_steps_up_to_int64_max_are_read():
    episode = _episode([1.0, 2.0], t_started=2**63 - 2)
    assert rows.step_columns(episode)["t"].tolist() == [2**63 - 2, 2**63 - 1]


def test_v1_episode_at_2_to_the_70_is_refused_not_overflowing(tmp_path):
    with EpisodeWriter(tmp_path) as w:
        w.write(_episode([1.0], t_started=2**70, id_="b"))
    episode = load_episode(tmp_path, "b").to_numpy()
    with pytest.raises(
        UnstorableValueError, match=f"episode 'b': time steps from {2**70} do not fit"
    ):
        rows.step_columns(episode)


# ----------------------------------------------------------------- Minari Text with NULs
def test_minari_export_keeps_text_strings_ending_in_nul(tmp_path, monkeypatch):
    minari = pytest.importorskip("minari")
    from episodes.io import export_minari, import_minari, read_episodes

    monkeypatch.setenv("MINARI_DATASETS_PATH", os.fspath(tmp_path / "minari"))
    text = gym.spaces.Text(3, min_length=1, charset="a\x00")
    obs_space = gym.spaces.Dict({"t": text, "n": gym.spaces.Discrete(2)})
    observations = ["a\x00", "a", "\x00\x00"]
    actions = ["\x00", "a\x00"]
    episode = SingleAgentEpisode(
        "x",
        observations=[{"t": s, "n": i % 2} for i, s in enumerate(observations)],
        actions=actions,
        rewards=[1.0, 2.0],
        observation_space=obs_space,
        action_space=gym.spaces.Text(2, min_length=1, charset="a\x00"),
        len_lookback_buffer=0,
        terminated=True,
    )
    src = tmp_path / "src"
    with DatasetWriter(src) as w:
        w.write(episode)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        export_minari(src, "tt/nul-v0", root=tmp_path / "minari")
        (read,) = list(minari.load_dataset("tt/nul-v0").iterate_episodes())
    assert list(read.observations["t"]) == observations
    assert read.observations["n"].tolist() == [0, 1, 0]
    assert list(read.actions) == actions
    imported = tmp_path / "imported"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import_minari(tmp_path / "minari" / "tt" / "nul-v0", imported)
    (back,) = read_episodes(imported)
    assert [o["t"] for o in back.get_observations()] == observations
    assert list(back.get_actions()) == actions
