"""Regressions a review of this session's own fixes found (runner metrics, testing toolkit)."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.runner import EnvRunner, RunnerMetrics
from episodes.testing import ConnectorContractError, check_does_not_mutate, outputs_equal


def _noop(episodes: Any, batch: Any) -> dict[str, Any]:
    return {}


def _draws(episodes: Any, batch: Any) -> dict[str, Any]:
    torch.rand(1, generator=episodes[0].custom_data["gen"])
    return {}


def _episode_with_generator(seed: int) -> SingleAgentEpisode:
    ep = SingleAgentEpisode(observations=[0, 1, 2], actions=[0, 1], rewards=[0.0, 1.0])
    ep.custom_data["gen"] = torch.Generator().manual_seed(seed)
    return ep


def test_a_torch_generator_left_alone_is_no_mutation() -> None:
    # torch pickles a tensor with its storage's address: the check compares tensor contents.
    for seed in range(20):
        check_does_not_mutate(_noop, [_episode_with_generator(seed)])


def test_a_torch_generator_drawn_from_is_a_mutation() -> None:
    with pytest.raises(ConnectorContractError, match="Generator"):
        check_does_not_mutate(_draws, [_episode_with_generator(0)])


@pytest.mark.parametrize(
    "name, listed, array",
    [
        ("bf16 vs empty object", [torch.ones(2, dtype=torch.bfloat16)], np.array([], object)),
        ("grad vs empty float", [torch.ones(2, requires_grad=True)], np.zeros(0)),
        ("grad vs (0, 2)", [torch.ones(2, requires_grad=True)], np.zeros((0, 2))),
    ],
)
def test_outputs_equal_of_tensors_against_empty_arrays_is_false(
    name: str, listed: list[Any], array: np.ndarray
) -> None:
    assert outputs_equal(listed, array) is False, name
    assert outputs_equal(array, listed) is False, name


def test_runner_metrics_subclass_may_chain_post_init() -> None:
    @dataclasses.dataclass
    class Tagged(RunnerMetrics):
        tags: list[str] = dataclasses.field(default_factory=list)

        def __post_init__(self) -> None:
            super().__post_init__()
            self.tags.append("run-1")

    metrics = Tagged(max_listed=100)
    assert (metrics.max_listed, metrics.tags) == (100, ["run-1"])


def test_runner_metrics_missing_is_an_attribute_error() -> None:
    class Late(EnvRunner):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            self.had_metrics = hasattr(self, "metrics")
            super().__init__(*args, **kwargs)

    import gymnasium as gym

    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    runner = Late(env, lambda obs: (np.zeros(2, np.int64), {}), seed=0)
    assert runner.had_metrics is False
    assert isinstance(runner.metrics, RunnerMetrics)
    env.close()
