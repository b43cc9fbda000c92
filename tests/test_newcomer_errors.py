"""A newcomer's first mistakes get errors that say what was expected (contract §8.1)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.converter import episodes_to_rollout
from episodes.io import Dataset, NotADatasetError, read_episodes
from episodes.replay import EpisodeReplayBuffer
from episodes.runner import EnvRunner


def _policy(obs: np.ndarray) -> tuple[np.ndarray, dict]:
    return np.zeros(len(obs), np.int64), {}


def _episode() -> SingleAgentEpisode:
    return SingleAgentEpisode(
        "e", observations=[0.0, 1.0], actions=[0], rewards=[1.0], len_lookback_buffer=0
    )


MISTAKES = {
    "a single env for the runner": (
        lambda: EnvRunner(gym.make("CartPole-v1"), _policy),
        TypeError,
        r"vector env, got a single env \(TimeLimit CartPole-v1\): make one with gym.make_vec",
    ),
    "no env at all for the runner": (
        lambda: EnvRunner(object(), _policy),  # type: ignore[arg-type]
        TypeError,
        r"vector env \(with num_envs\), got object",
    ),
    "one episode for episodes_to_rollout": (
        lambda: episodes_to_rollout(_episode(), gamma=0.9, value_fn=lambda o: o),
        TypeError,
        r"got one episode \('e'\); wrap it in a list: \[episode\]",
    ),
    "a dict for the replay buffer": (
        lambda: EpisodeReplayBuffer(10).add({"e": _episode()}),  # type: ignore[arg-type]
        TypeError,
        r"add\(\) takes SingleAgentEpisode chunks, got dict",
    ),
}


@pytest.mark.parametrize("case", list(MISTAKES))
def test_first_mistakes_name_what_was_expected(case: str) -> None:
    call, error, words = MISTAKES[case]
    with pytest.raises(error, match=words):
        call()


@pytest.mark.parametrize("read", [Dataset, lambda path: list(read_episodes(path))])
@pytest.mark.parametrize("content", ["empty", "a manifest without a header"])
def test_a_directory_that_is_no_dataset_names_both_formats(
    tmp_path: Path, read: object, content: str
) -> None:
    if content != "empty":
        (tmp_path / "manifest.jsonl").write_text("{}\n")
    with pytest.raises(NotADatasetError, match=r"no format v2 manifest.jsonl, no v1 format.json"):
        read(tmp_path)  # type: ignore[operator]


def test_the_cli_says_so_too(tmp_path: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "episodes", "info", str(tmp_path)], capture_output=True, text=True
    )
    assert run.returncode == 1
    assert run.stderr.strip() == (
        f"episodes: error: {tmp_path} is not an episodes dataset (no format v2 manifest.jsonl, "
        "no v1 format.json)"
    )


class _BatchedGymEnv(gym.Env):
    """A gym.Env that steps many sub-envs itself (Isaac Lab's envs are such): recorded."""

    def __init__(self, num_envs: int = 2):
        self.num_envs = num_envs
        self.single_observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.vector.utils.batch_space(self.single_observation_space, 2)
        self.action_space = gym.vector.utils.batch_space(self.single_action_space, 2)
        self.metadata = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}

    def reset(self, *, seed: object = None, options: object = None) -> tuple:
        return np.zeros((self.num_envs, 2), np.float32), {}

    def step(self, actions: np.ndarray) -> tuple:
        no = np.zeros(self.num_envs, bool)
        return np.ones((self.num_envs, 2), np.float32), np.ones(self.num_envs), no, no, {}


def test_a_gym_env_with_num_envs_is_recorded() -> None:
    chunks = EnvRunner(_BatchedGymEnv(), _policy, seed=0).sample(3)
    assert [len(c) for c in chunks] == [3, 3]


def test_a_wrapped_batched_env_is_named_as_such() -> None:
    wrapped = gym.wrappers.TimeLimit(_BatchedGymEnv(), max_episode_steps=5)
    with pytest.raises(TypeError, match=r"TimeLimit wraps a batched env \(num_envs=2\)"):
        EnvRunner(wrapped, _policy)
