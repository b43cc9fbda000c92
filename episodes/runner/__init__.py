"""Collecting episodes from gymnasium vector envs (docs/contract.md §11).

Example:
    >>> import gymnasium as gym
    >>> from episodes.runner import EnvRunner, RandomPolicy
    >>> env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    >>> runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    >>> sum(len(ep) for ep in runner.sample(10))
    20
"""

from episodes.runner.env_runner import WINDOWS, EnvRunner, autoreset_mode_of
from episodes.runner.episode_tally import EpisodeTally, FinishedEpisode
from episodes.runner.evaluation import Evaluated, evaluate
from episodes.runner.infos import env_info
from episodes.runner.metrics import RunnerMetrics
from episodes.runner.modes import AutoresetModeWarning
from episodes.runner.policy import Policy, RandomPolicy, RecurrentPolicy
from episodes.runner.recordable import unrecordable_kind
from episodes.runner.sampled import SampledChunks
from episodes.runner.space_shapes import SpaceMismatchWarning

__all__ = [
    "WINDOWS",
    "AutoresetModeWarning",
    "EnvRunner",
    "EpisodeTally",
    "Evaluated",
    "FinishedEpisode",
    "Policy",
    "RandomPolicy",
    "RecurrentPolicy",
    "RunnerMetrics",
    "SampledChunks",
    "SpaceMismatchWarning",
    "autoreset_mode_of",
    "env_info",
    "evaluate",
    "unrecordable_kind",
]
