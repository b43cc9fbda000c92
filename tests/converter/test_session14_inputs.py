"""Items that are not chunks, refused by name; ``from_state``'s parameter named as documented.

``group_by_env([[5]])`` returned ``[[5]]`` (docs/api.md: "anything but chunks or lists is a
TypeError"), so ``episodes_to_rollout([[5]])`` failed deep inside with ``object of type 'int'
has no len()``; ``episodes_to_batch`` given per-env lists raised an ``AttributeError`` and given
``[5]`` a nameless ``TypeError``. Now each per-env list's members are checked, and
``episodes_to_batch`` checks its flat list up front, naming the index and type it got (but not
on a runner's or a group's sample, whose chunks it would build just to check them).

``SingleAgentEpisode.from_state`` named its parameter ``episode_state``, while api.md,
contract.md §7.3 and RLlib name it ``state`` (``from_state(state=...)``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import pytest

from episodes import SingleAgentEpisode
from episodes.converter import episodes_to_batch, episodes_to_rollout, group_by_env
from episodes.distributed.sample import GroupSample, RunnerSample
from episodes.runner import EnvRunner, RandomPolicy


def chunk(id_: str = "a") -> SingleAgentEpisode:
    return SingleAgentEpisode(
        id_,
        observations=[0, 1, 2],
        actions=[0, 1],
        rewards=[1.0, 1.0],
        len_lookback_buffer=0,
        extra_model_outputs={"vf_preds": [0.0, 0.0], "action_logp": [0.0, 0.0]},
    )


def to_rollout(layout: str) -> Callable[[Any], Any]:
    return lambda episodes: episodes_to_rollout(
        episodes, gamma=0.9, value_fn=lambda obs: obs, layout=layout
    )


GROUPED = "episodes must be SingleAgentEpisode chunks or per-env lists of them"
FLAT = "episodes_to_batch takes a flat sequence of SingleAgentEpisode chunks"

# (name, call, input, the message's start, what it must name)
CASES: list[tuple[str, Callable[[Any], Any], Any, str, str]] = [
    ("group_by_env: an int in a list", group_by_env, [[5]], GROUPED, "env 0's item 0 has type int"),
    (
        "group_by_env: a string after a chunk",
        group_by_env,
        [[chunk()], (chunk("b"), "x")],
        GROUPED,
        "env 1's item 1 has type str",
    ),
    ("group_by_env: a nested list", group_by_env, [[[chunk()]]], GROUPED, "has type list"),
    ("rollout per_env: an int in a list", to_rollout("per_env"), [[5]], GROUPED, "type int"),
    ("rollout per_chunk: an int in a list", to_rollout("per_chunk"), [[chunk(), 5]], GROUPED, ""),
    ("batch: an int in a list", episodes_to_batch, [[5]], FLAT, "episodes[0] has type list"),
    ("batch: per-env lists", episodes_to_batch, [[chunk()]], FLAT, "flatten per-env lists"),
    ("batch: an int", episodes_to_batch, [5], FLAT, "episodes[0] has type int"),
    ("batch: a dict after a chunk", episodes_to_batch, [chunk(), {}], FLAT, "[1] has type dict"),
]


@pytest.mark.parametrize(
    ("call", "episodes", "start", "names"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_items_that_are_not_chunks_are_a_type_error_naming_them(
    call: Callable[[Any], Any], episodes: Any, start: str, names: str
) -> None:
    with pytest.raises(TypeError) as info:
        call(episodes)
    assert str(info.value).startswith(start)
    assert names in str(info.value)


def test_per_env_lists_of_chunks_still_group_and_convert() -> None:
    a, b = chunk("a"), chunk("b")
    assert group_by_env([[a], (b,)]) == [[a], [b]]
    assert episodes_to_rollout([[a], [b]], gamma=0.9, value_fn=lambda obs: obs).storage
    assert episodes_to_batch([a, b])["chunk"].tolist() == [0, 0, 1, 1]


def test_runner_and_group_samples_are_not_built_to_be_checked() -> None:
    from episodes.converter.to_batch import _check_chunks  # here: the module imports before it

    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    sample = runner.sample(3)
    _check_chunks(sample)
    assert sample.built() == []
    group = GroupSample([RunnerSample(0, 0, 0, 0, 2, runner.sample(3))])
    _check_chunks(group)
    assert group.samples[0].episodes.built() == []
    assert len(episodes_to_batch(sample)["obs"]) == 6


def test_from_state_takes_state_by_keyword_as_documented() -> None:
    ep = SingleAgentEpisode()
    ep.add_env_reset(0)
    ep.add_env_step(1, 0, 1.0)
    assert SingleAgentEpisode.from_state(state=ep.get_state()) == ep
    assert SingleAgentEpisode.from_state(ep.get_state()) == ep  # positional too
