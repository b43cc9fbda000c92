"""User code that must pass ``mypy --strict`` against the package's annotations.

Each function is a documented, correct use of the public API that an annotation once refused
(or typed as ``Any``); ``tests/user_typing/test_user_code.py`` type-checks this file and runs
every function. Nothing runs on import.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import torch

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from episodes.connectors import Connector, ConnectorPipeline, FlattenObservations
from episodes.converter import ColumnKeys
from episodes.io import (
    Dataset,
    DatasetWriter,
    EpisodeWriter,
    filter_dataset,
    read_episodes,
    split,
)
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer, SumTree
from episodes.rollout import RolloutStorage
from episodes.runner import EnvRunner, Policy, RandomPolicy, RecurrentPolicy, RunnerMetrics
from episodes.spaces import space_from_dict, space_to_dict

if TYPE_CHECKING:
    from typing_extensions import assert_type
else:

    def assert_type(value: Any, _type: Any) -> Any:
        return value


def _episode(id_: Any = None) -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[0.0, 1.0, 2.0],
        actions=[0, 1],
        rewards=[1.0, 5.0],
        len_lookback_buffer=0,
    )


def lazy_io_names_are_typed(folder: str) -> int:
    """The v2 dataset classes load lazily (pyarrow) but are typed for checkers."""
    path = os.path.join(folder, "v2")
    with DatasetWriter(path) as writer:
        writer.write(_episode("a"))
    dataset = assert_type(Dataset(path), Dataset)
    return len(assert_type(dataset.episode(0), SingleAgentEpisode))


def count_list(episodes: list[SingleAgentEpisode], batch: dict[str, Any]) -> dict[str, Any]:
    return {**batch, "listed": len(episodes)}


def count_sequence(episodes: Sequence[SingleAgentEpisode], batch: dict[str, Any]) -> dict[str, Any]:
    return {**batch, "counted": len(episodes)}


def connectors_take_any_sequence() -> int:
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    chunks = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0).sample(4)
    mine: list[Connector] = [count_list, count_sequence]  # either annotation is a Connector
    assert ConnectorPipeline(mine)(chunks) == {"listed": 2, "counted": 2}
    batch = ConnectorPipeline([FlattenObservations()])(chunks)
    FlattenObservations()(tuple(chunks), {})
    return len(batch["obs"])


def index_arrays_and_numpy_ints() -> list[Any]:
    ep = _episode().to_numpy()
    best = np.argmax(ep.get_rewards())
    ep.set_rewards(new_data=[0.0, 0.0], at_indices=np.array([0, 1]))
    buffer = InfiniteLookbackBuffer([10, 11, 12])
    return [
        ep.get_observations(np.array([0, 2])),
        ep.get_actions(best),
        ep.get_observations([np.int64(1), np.int64(2)]),
        buffer.get(np.arange(2)),
        buffer[np.int64(1)],
    ]


def ids_of_any_type() -> list[Any]:
    ep = _episode(("run", 3))
    buffer = EpisodeReplayBuffer(100, seed=0)
    buffer.add(_episode(7))
    return [ep.id_, buffer.get_episode_indices(7), buffer.locate(7, 0), buffer.get_episode_ids()]


def prioritized_seed_generator() -> float:
    buffer = PrioritizedEpisodeReplayBuffer(100, alpha=0.6, seed=np.random.default_rng(0))
    buffer.add(_episode("a"))
    buffer.sample(2, beta=0.4)
    buffer.update_priorities(np.ones(2))
    return buffer.max_priority


def rollout_shapes_and_keys() -> tuple[int, ...]:
    flat = RolloutStorage("rl", 4, 8, 3, 1)
    obs_dim = np.prod((3,))  # shapes computed with numpy are numpy ints
    nested = RolloutStorage("rl", 4, 8, (obs_dim,), (1,), distribution_params=[(np.int64(2),)])
    keys = ColumnKeys(distribution=("mean", "std"), actor_hidden=("h",))
    assert keys.distribution + ("logits",) == ("mean", "std", "logits")  # a tuple, typed so
    assert keys.distribution == ("mean", "std")
    return (*flat.observations.shape, *nested.observations.shape)


class NoExtras:
    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, None]:
        return np.zeros(len(obs), np.int64), None


class RecurrentNoExtras:
    def initial_state(self, num_envs: int) -> np.ndarray:
        return np.zeros(num_envs)

    def __call__(self, obs: np.ndarray, state: np.ndarray) -> tuple[np.ndarray, None, np.ndarray]:
        return np.zeros(len(obs), np.int64), None, state + 1


def policies_without_extras() -> int:
    policy: Policy = NoExtras()
    recurrent: RecurrentPolicy = RecurrentNoExtras()
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    chunks = EnvRunner(env, policy, seed=0).sample(3)
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    more = EnvRunner(env, recurrent, seed=0).sample(3)
    return len(chunks) + len(more)


def runner_attributes() -> int:
    """The attributes a runner is made with read as their types (strict mypy: not Any)."""
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    runner.reset(seed=1)
    window: str = runner.window
    return runner.num_envs + len(window) - len(runner.sample(2)) + runner.env.num_envs


def numpy_scalars_where_documented(folder: str) -> bool:
    ep = SingleAgentEpisode()
    ep.add_env_reset(0.0)
    ep.add_env_step(1.0, 0, 1.0, terminated=np.isclose(1.0, 1.0))
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    seed = np.random.default_rng(0).integers(0, 2**31)
    EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=seed)
    storage = RolloutStorage("rl", 2, 4, (3,), (1,))
    storage.write_block(np.int64(0), rewards=torch.ones(4, 2, 1))
    path = os.path.join(folder, "v1")
    with EpisodeWriter(path) as writer:
        writer.write(ep)
    read = list(read_episodes(path, start=np.int64(0), stop=np.int64(1)))
    return ep.is_terminated and len(read) == 1


def numpy_numbers_in_signatures(folder: str) -> list[Any]:
    """Numbers computed with numpy where the docstrings say numpy numbers are taken."""
    path = os.path.join(folder, "all")
    with DatasetWriter(path) as writer:
        writer.write_many(_episode(str(i)) for i in range(4))
    share, seed = np.float32(0.5), np.int64(3)
    train, val = os.path.join(folder, "train"), os.path.join(folder, "val")
    split(path, train, val, fraction=share, seed=seed)
    returns = np.array([6.0, 6.0])
    kept = filter_dataset(
        path,
        os.path.join(folder, "kept"),
        min_return=returns.min(),
        max_return=np.float32(7.0),
        min_length=np.int64(2),
        max_length=np.prod((2,)),
    )
    metrics = RunnerMetrics()
    metrics.add_episode(np.float32(1.5), np.int64(2))
    metrics.add_time(np.int64(4), np.int64(2), np.float32(0.5))
    buffer = EpisodeReplayBuffer(100, seed=0)
    buffer.add(_episode("a"))
    located = buffer.locate("a", np.int64(1))
    batch = buffer.get_transitions([np.int64(0), np.int64(1)])
    none = buffer.get_transitions([])
    tree = SumTree(np.int64(4))
    return [kept, metrics.env_steps, located, batch["rewards"], len(none["rewards"]), tree.capacity]


def _group_metrics_take_numpy_ints() -> None:  # type-checked only: the package needs Ray
    from episodes.distributed.metrics import GroupMetrics

    GroupMetrics().add_lost(num_env_steps=np.int64(64), error="lost")


class TaggedEpisode(SingleAgentEpisode):
    tag = "mine"


def subclass_chunks_keep_their_type() -> list[str]:
    ep = TaggedEpisode(observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 1.0])
    return [
        assert_type(ep.cut(), TaggedEpisode).tag,
        assert_type(ep[0:1], TaggedEpisode).tag,
        assert_type(ep.slice(slice(0, 1)), TaggedEpisode).tag,
        assert_type(ep.to_numpy(), TaggedEpisode).tag,
        assert_type(TaggedEpisode.from_state(ep.get_state()), TaggedEpisode).tag,
    ]


def space_dicts_round_trip() -> bool:
    box = gym.spaces.Box(-1.0, float("inf"), (2,))
    encoded = space_to_dict(box)
    assert encoded["type"] == "Box"
    return space_from_dict(encoded).contains(np.zeros(2, np.float32))


class MyBuffer(EpisodeReplayBuffer):
    note = "mine"


def from_dataset_builds_its_class(folder: str) -> list[str]:
    path = os.path.join(folder, "offline")
    with EpisodeWriter(path) as writer:
        writer.write(_episode("a"))
    prioritized = assert_type(
        PrioritizedEpisodeReplayBuffer.from_dataset(path), PrioritizedEpisodeReplayBuffer
    )
    prioritized.update_priorities(np.ones(1), [0])
    mine = assert_type(MyBuffer.from_dataset(path), MyBuffer)
    uniform = EpisodeReplayBuffer.from_dataset(path, prioritized=False)
    return [type(b).__name__ for b in (prioritized, mine, uniform)] + [mine.note]
