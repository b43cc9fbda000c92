"""Session 53 review: what an adversarial look at session 52's changes found.

Each test pins one problem, fixed since:

- a numpy scalar agent that only a later chunk of an episode named cannot be saved, though
  the same agent named by the first chunk saves as a plain value;
- ``ResetOptions`` (the type of ``EnvRunner``'s ``reset_options``) admits any ``Mapping``,
  while the runner takes dicts only;
- a runner that refused the group's weights and was lost in the same round (its request timed
  out, so its actor was replaced) is said to be "not restarted".
"""

from __future__ import annotations

import collections.abc
import typing
from types import MappingProxyType
from typing import Any

import numpy as np
import pytest
from gymnasium.vector import AutoresetMode

from episodes import SingleAgentEpisode
from episodes.replay import EpisodeReplayBuffer
from episodes.runner.reset_options import ResetOptions, check_reset_options, masked_reset


def game_chunk(agent: Any, t0: int, n: int = 2) -> SingleAgentEpisode:
    """Steps ``t0 .. t0 + n`` of episode "game", whose observation at time t is ``[t]``."""
    return SingleAgentEpisode(
        "game",
        observations=[np.full(1, t, np.float32) for t in range(t0, t0 + n + 1)],
        actions=[0] * n,
        rewards=[1.0] * n,
        agent_id=agent,
        t_started=t0,
        len_lookback_buffer=0,
    )


# ---------------------------------------------------------------- replay: saved agents
@pytest.mark.parametrize("agent", [np.str_("red"), np.int64(3)], ids=["str_", "int64"])
def test_a_numpy_agent_named_by_a_later_chunk_saves_as_one_named_first(tmp_path, agent):
    named_first = EpisodeReplayBuffer(100)
    named_first.add([game_chunk(agent, 0), game_chunk(agent, 2)])
    named_first.save(tmp_path / "first")  # saved: the agent_id is stored as a plain value
    assert EpisodeReplayBuffer.load(tmp_path / "first").get_state()["episodes"]["agent_id"] == [
        agent
    ]
    named_later = EpisodeReplayBuffer(100)
    named_later.add([game_chunk(None, 0), game_chunk(agent, 2)])  # add took it
    named_later.save(tmp_path / "later")  # UnstorableValueError: "cannot be saved"
    loaded = EpisodeReplayBuffer.load(tmp_path / "later")
    assert loaded.get_state()["episodes"]["first_agent"] == [agent]
    with pytest.raises(ValueError, match="holds that episode for agent"):
        loaded.add(game_chunk("blue", 4))


# ------------------------------------------------------------------ runner: reset options
def test_the_reset_options_type_and_the_runtime_check_agree():
    proxy = MappingProxyType({"level": 1})
    admits = [typing.get_origin(arg) for arg in typing.get_args(ResetOptions)]
    if collections.abc.Mapping in admits:  # the type admits a read-only mapping
        assert check_reset_options(proxy, AutoresetMode.DISABLED) == {"level": 1}
    callables = [a for a in typing.get_args(ResetOptions) if typing.get_origin(a) is not None]
    returns = [typing.get_args(a)[-1] for a in callables if typing.get_args(a)]
    if any(typing.get_origin(r) is collections.abc.Mapping for r in returns):
        seen = []
        masked_reset(lambda *, options: seen.append(options), lambda mask: proxy)(
            options={"reset_mask": np.ones(2, bool)}
        )
        assert seen[0]["level"] == 1


# ---------------------------------------------------------- distributed: refused weights
class _Refusing:
    """Runner 1 refuses weights without ``p_right``; its generation 0 then hangs a sample."""

    def __init__(self, num_envs: int, index: int, generation: int):
        self.num_envs, self.index, self.generation = num_envs, index, generation
        self.hang = False

    def set_weights(self, weights: dict[str, Any]) -> None:
        if self.index == 1 and "p_right" not in weights:
            self.hang = self.generation == 0
            raise KeyError("p_right")

    def __call__(self, obs: Any) -> Any:
        if self.hang:  # far past the test's timeout_s: the request is lost, its actor replaced
            import time

            time.sleep(120)
        return np.zeros(self.num_envs, np.int64), {}


def _cartpoles(ctx: Any) -> Any:
    import gymnasium as gym

    return gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")


def _refusing(env: Any, ctx: Any) -> _Refusing:
    return _Refusing(env.num_envs, ctx.index, ctx.generation)


@pytest.fixture
def ray_up() -> Any:
    ray = pytest.importorskip("ray")
    started = not ray.is_initialized()
    if started:
        ray.init(
            num_cpus=2,
            include_dashboard=False,
            log_to_driver=False,
            configure_logging=False,
            ignore_reinit_error=True,
        )
    yield ray
    if started:
        ray.shutdown()


def test_a_refusal_by_a_runner_lost_in_the_same_round_does_not_say_it_was_kept(ray_up):
    from episodes.distributed import RunnerGroup
    from episodes.distributed.refused_weights import WeightsRefused

    with RunnerGroup(
        _cartpoles, _refusing, num_runners=2, seed=0, num_cpus_per_runner=0.5
    ) as group:
        group.sample(3)
        refusal = None
        try:
            group.sample(3, weights={"p": 1.0}, timeout_s=10)
        except WeightsRefused as err:
            refusal = err
        assert group.generations == [0, 1]  # runner 1's request was lost, its actor replaced
        if refusal is not None:  # raised for it all the same: then not as if it were kept
            assert [lost.runner_index for lost in refusal.sample.lost] == [1]
            assert "not restarted" not in str(refusal)
