"""Session 52: Ray references the group reads, and weights a policy refuses.

- ``ray.get`` of a list raises the first error it meets and leaves the others unread, which
  Ray then reports as "Unhandled error" on the driver's stderr: the actors' start
  (``start_actors``), their memory (``runner_memory``) and an interrupted ``foreach_runner``
  (``apply_on_all``) read them all.
- A broadcast every policy refuses (its ``set_weights`` raises) is one ``ValueError`` at the
  collection, naming the problem: no runner is restarted, each keeps the weights it had, and
  the next good broadcast recovers (it used to lose every round and restart every actor until
  ``max_consecutive_failures``).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

ray = pytest.importorskip("ray")

from episodes.distributed import RunnerContext, RunnerGroup  # noqa: E402
from episodes.distributed.shared_memory import SlotSegments  # noqa: E402
from episodes.distributed.slots import Slot, apply_on_all, start_actors  # noqa: E402
from episodes.distributed.steps import runner_memory  # noqa: E402
from tests.distributed._unhandled import Canary, reported_besides_a_canary  # noqa: E402

T = 4


@pytest.fixture(scope="module")
def canary(ray_local) -> Any:
    return Canary.remote()


@ray.remote(num_cpus=0)
class Faulty:
    """A stand-in runner actor: ``info`` raises, ``apply`` too but on actor 0."""

    def __init__(self, index: int):
        self.index = index

    def info(self) -> dict[str, Any]:
        raise ValueError(f"info of actor {self.index}")

    def apply(self, fn: Any, shared: Any = None) -> Any:
        if self.index:
            raise OSError(f"apply on actor {self.index}")
        return fn(self.index, None)

    def ping(self) -> None:
        pass


def _finished(actors: list[Any]) -> None:
    """Every call sent to ``actors`` before has finished (an actor runs its calls in order).

    A killed actor's ping fails at once; Ray reports no error of a dead actor as unhandled.
    """
    pings = [actor.ping.remote() for actor in actors]
    assert len(ray.wait(pings, num_returns=len(pings), timeout=60)[0]) == len(pings)


@pytest.fixture(scope="module")
def faulty(ray_local) -> list[Any]:
    """Three such actors (the module's last test kills them)."""
    actors = [Faulty.remote(i) for i in range(3)]
    _finished(actors)
    return actors


def test_runner_memory_reads_every_failed_reply(reported, canary, faulty) -> None:
    assert runner_memory(ray, faulty) is None  # actors 1 and 2 fail: no bound
    _finished(faulty)
    assert reported_besides_a_canary(reported, canary) == []


class InterruptedSegments(SlotSegments):
    """Raises ``KeyboardInterrupt`` while a reply is received (a Ctrl-C there)."""

    def receive(self, reply: Any, segment: Any, kind: str = "sample") -> Any:
        raise KeyboardInterrupt


def test_an_interrupted_foreach_runner_reads_the_results_it_gives_up(
    reported, canary, faulty
) -> None:
    slots = [Slot(i, 0, actor, 1) for i, actor in enumerate(faulty)]
    slots[0].segments = InterruptedSegments(None)  # actor 0 answers, the others fail
    with pytest.raises(KeyboardInterrupt):
        apply_on_all(ray, slots, lambda runner, ctx: runner)
    _finished(faulty)
    assert reported_besides_a_canary(reported, canary) == []


def test_start_actors_reads_every_failed_reply(reported, canary, faulty) -> None:
    with pytest.raises(RuntimeError, match="(?s)a runner actor failed to start.*info of actor"):
        start_actors(ray, faulty, 60, "3 x 0")  # kills them
    _finished(faulty)
    assert reported_besides_a_canary(reported, canary) == []


# ---------------------------------------------------------------------- refused weights
class Strict:
    """Goes right if ``p_right >= 0.5``; ``set_weights`` takes ``{"p_right": p}`` only."""

    def __init__(self, num_envs: int):
        self.num_envs, self.p_right = num_envs, 0.5

    def set_weights(self, weights: dict[str, Any]) -> None:
        self.p_right = float(weights["p_right"])  # a KeyError for other weights

    def __call__(self, obs: np.ndarray) -> Any:
        return np.full(self.num_envs, int(self.p_right >= 0.5)), {}


def cartpoles(ctx: RunnerContext) -> gym.vector.VectorEnv:
    return gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")


def strict_policy(env: gym.vector.VectorEnv, ctx: RunnerContext) -> Strict:
    return Strict(env.num_envs)


def _actions(batch: Any) -> set[int]:
    return {int(a) for chunk in batch for a in np.asarray(chunk.get_actions())}


@pytest.fixture(scope="module")
def group(ray_local):
    # Vector steps: every step of a sample acts with its weights (no carried-over steps).
    with RunnerGroup(
        cartpoles, strict_policy, num_runners=2, seed=0, num_cpus_per_runner=0.5,
        runner_kwargs={"window": "vector_steps"},
    ) as group:  # fmt: skip
        yield group


def test_weights_every_policy_refuses_raise_once_per_round_without_restarts(group) -> None:
    good = group.set_weights({"p_right": 0.0})
    assert _actions(group.sample(T)) == {0}
    group.get_metrics()  # reset
    with pytest.raises(ValueError) as raised:
        group.sample(T, weights={"p": 1.0})
    assert type(raised.value).__name__ == "WeightsRefused"  # a ValueError of its own
    text = str(raised.value)
    assert "refused weights version" in text and f"version {good + 1}" in text
    assert "KeyError" in text and "'p_right'" in text and "runner 0 (generation 0)" in text
    assert group.generations == [0, 0] and group.num_in_flight == 0
    metrics = group.get_metrics()
    counts = [metrics[k] for k in ("num_restarts", "num_lost_samples", "num_samples")]
    assert counts == [0, 0, 2]  # no actor replaced, no request lost
    # The round's samples come with the error: they acted with the weights the runners kept.
    round_ = raised.value.sample
    assert [s.weights_version for s in round_.samples] == [good] * 2 and not round_.lost
    assert _actions(round_) == {0}
    # Each runner keeps the weights it had; the group keeps offering the refused ones.
    assert group.foreach_runner(lambda runner, ctx: runner.policy.p_right) == [0.0, 0.0]
    with pytest.raises(ValueError, match=f"refused weights version {good + 1}"):
        group.sample(T)
    assert group.generations == [0, 0]
    # Weights the policies can load: the runners carry on, no actor was replaced.
    batch = group.sample(T, weights={"p_right": 1.0})
    assert [s.weights_version for s in batch.samples] == [good + 2] * 2 and not batch.lost
    assert _actions(batch) == {1} and group.generations == [0, 0]


def test_a_refused_broadcast_overwritten_before_any_request_changes_nothing(
    group, reported, canary
) -> None:
    group.set_weights({"p": 0.0})
    version = group.set_weights({"p_right": 0.0})
    batch = group.sample(T)
    assert [s.weights_version for s in batch.samples] == [version] * 2 and not batch.lost
    assert _actions(batch) == {0}
    with pytest.raises(ValueError, match="refused weights version"):
        group.sample(T, weights={"p": 0.0})
    group.set_weights({"p_right": 1.0})  # lets go of the refused, re-sent acknowledgements
    assert _actions(group.sample(T)) == {1}
    assert reported_besides_a_canary(reported, canary) == []
