"""Session 51: ``RunnerGroup.sample(..., timeout_s=...)`` and no "Unhandled error" noise.

A runner stuck in its policy (or env) never answers: ``sample(T, timeout_s=...)`` loses its
request as it loses a crashed runner's (a ``LostSample``, the counters, a fresh actor,
``max_consecutive_failures``) and hands out the others' samples. Weights acknowledgements the
group lets go of (a replacement's, an overwritten broadcast's, a stopped actor's) are read,
so Ray reports none of their errors as unhandled on the driver's stderr.
"""

from __future__ import annotations

import time
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

ray = pytest.importorskip("ray")

from episodes.distributed import RunnerContext, RunnerGroup  # noqa: E402
from tests.distributed._unhandled import reported_besides_a_canary  # noqa: E402

T = 4
HANG_S = 600.0  # far beyond any timeout here: the request is killed, never finished
TIMEOUT_S = 3.0


class StallingPolicy:
    """Action 1 with probability ``p_right`` (broadcast as ``{"p_right": p}``, else KeyError).

    ``sleep`` stalls every vector step (set through ``foreach_runner``): a hung policy.
    """

    def __init__(self, num_envs: int, seed: int | None):
        self.rng = np.random.default_rng(seed)
        self.num_envs = num_envs
        self.p_right = 0.5
        self.sleep = 0.0

    def set_weights(self, weights: dict[str, Any]) -> None:
        self.p_right = float(weights["p_right"])

    def __call__(self, obs: np.ndarray) -> Any:
        time.sleep(self.sleep)
        return (self.rng.random(self.num_envs) < self.p_right).astype(np.int64), {}


def cartpoles(ctx: RunnerContext) -> gym.vector.VectorEnv:
    if ctx.generation in ctx.config.get("slow_generations", ()):
        time.sleep(HANG_S)  # a replacement whose start takes longer than any deadline here
    return gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")


def stalling_policy(env: gym.vector.VectorEnv, ctx: RunnerContext) -> StallingPolicy:
    return StallingPolicy(env.num_envs, ctx.seed)


def _hang(runner: Any, ctx: RunnerContext) -> None:
    runner.policy.sleep = HANG_S if ctx.index == 1 else 0.0


@pytest.fixture(scope="module")
def group(ray_local):
    with RunnerGroup(
        cartpoles, stalling_policy, num_runners=2, seed=3, num_cpus_per_runner=0.5,
        max_consecutive_failures=2,
    ) as group:  # fmt: skip
        yield group


@pytest.mark.parametrize(
    "timeout_s",
    [-1, True, float("nan"), "5", [5]],
    ids=["negative", "bool", "nan", "string", "list"],
)
def test_a_bad_timeout_is_refused_before_a_broadcast_or_a_request(group, timeout_s) -> None:
    version, generations = group.weights_version, group.generations
    with pytest.raises(ValueError, match="timeout_s must be None or a number of seconds >= 0"):
        group.sample(T, weights={"p_right": 1.0}, timeout_s=timeout_s)
    assert group.weights_version == version and group.num_in_flight == 0
    assert group.generations == generations


def test_a_generous_timeout_changes_nothing(group) -> None:
    batch = group.sample(T, timeout_s=600)
    assert [s.runner_index for s in batch.samples] == [0, 1] and batch.lost == []
    assert batch.env_steps == 2 * 2 * T


def test_a_hung_runner_is_lost_at_the_deadline_and_twice_in_a_row_raises(group) -> None:
    generations = group.generations
    group.get_metrics()  # reset
    group.foreach_runner(_hang)
    batch = group.sample(T, weights={"p_right": 1.0}, timeout_s=TIMEOUT_S)
    # The shape a crashed runner's round has: the survivors' samples, the loss in .lost.
    assert [s.runner_index for s in batch.samples] == [0] and batch.env_steps == 2 * T
    assert [(lost.runner_index, lost.generation) for lost in batch.lost] == [(1, generations[1])]
    assert "TimeoutError" in batch.lost[0].error and "timeout_s=3.0" in batch.lost[0].error
    assert batch.lost[0].num_env_steps == 2 * T
    assert group.generations == [generations[0], generations[1] + 1]
    assert group.num_in_flight == 0
    metrics = group.get_metrics()
    assert (metrics["num_samples"], metrics["num_lost_samples"], metrics["num_restarts"]) == (
        1,
        1,
        1,
    )
    assert metrics["num_lost_env_steps"] == 2 * T
    # Too slow twice in a row raises, as failing twice does (max_consecutive_failures=2).
    group.foreach_runner(_hang)  # the replacement hangs too
    with pytest.raises(RuntimeError, match=r"runner 1 failed 2 times in a row.*TimeoutError"):
        group.sample(T, timeout_s=TIMEOUT_S)
    assert group.generations == [generations[0], generations[1] + 1]  # not restarted again
    assert group.num_in_flight == 0  # runner 0's request was collected before the error
    group.restart_runner(1)  # a deliberate fresh start
    # The fresh actor acts with the current weights; no request is left behind.
    batch = group.sample(T, timeout_s=600)
    assert [s.runner_index for s in batch.samples] == [0, 1] and not batch.lost
    assert {int(a) for chunk in batch for a in np.asarray(chunk.get_actions())} == {1}


def test_a_replacement_not_started_by_the_deadline_loses_its_request(ray_local, reported) -> None:
    # start_timeout_s (300 s) is far beyond the deadline: the deadline decides.
    with RunnerGroup(
        cartpoles, stalling_policy, num_runners=1, seed=3, num_cpus_per_runner=0.5,
        config={"slow_generations": (1,)},
    ) as group:  # fmt: skip
        group.restart_runner(0)  # generation 1 takes "forever" to start
        batch = group.sample(T, timeout_s=TIMEOUT_S)
        assert batch.samples == [] and [lost.generation for lost in batch.lost] == [1]
        assert "TimeoutError" in batch.lost[0].error
        batch = group.sample(T, timeout_s=600)  # generation 2 starts as usual
        assert [s.generation for s in batch.samples] == [2] and not batch.lost
        group.set_weights({"p": 0.0})  # its failed acknowledgement is pending at the stop
    assert reported_besides_a_canary(reported) == []


def test_acknowledgements_the_group_lets_go_of_are_not_reported_unhandled(group, reported) -> None:
    # Weights the policies cannot load: the round raises, the runners are handed them again.
    with pytest.raises(ValueError, match="refused weights version"):
        group.sample(T, weights={"p": 1.0})
    # A good broadcast overwrites the failed acknowledgements sent again.
    batch = group.sample(T, weights={"p_right": 1.0})
    assert len(batch.samples) == 2 and not batch.lost
    # A bad broadcast overwritten by a good one before any request.
    group.set_weights({"p": 0.0})
    group.set_weights({"p_right": 0.0})
    batch = group.sample(T)
    assert len(batch.samples) == 2 and not batch.lost
    # A failed acknowledgement still pending when a runner is replaced.
    group.set_weights({"p": 0.0})
    assert group.foreach_runner(lambda runner, ctx: runner.policy.p_right) == [0.0, 0.0]
    group.restart_runner(0)
    assert reported_besides_a_canary(reported) == []
