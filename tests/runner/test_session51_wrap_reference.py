"""EnvRunner over gymnasium-wrapped vector envs against a plain loop of our own.

A practitioner moving from a hand-written rollout loop checks that the runner records what the
loop saw: the same seeds and the same seeded actions drive an identical env twice, once through
`EnvRunner`, once through the loop below (which splits gymnasium's batched infos itself, reads
same-step final observations from `infos["final_obs"]` and skips next-step reset steps). Every
transition of every chunk (observation, action, reward, next or final observation, flags, info)
and every episode's first observation and info must be the loop's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers import vector as vw

from episodes.runner import EnvRunner

NEXT, SAME = AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP
FINAL = ("final_obs", "final_info", "_final_obs", "_final_info")


def _split(infos: dict[str, Any], i: int) -> dict[str, Any]:
    """Sub-env ``i``'s info out of gymnasium's batched infos, written independently."""
    out = {}
    for key, value in infos.items():
        if key.startswith("_"):
            continue
        mask = infos.get(f"_{key}")
        if mask is not None and not mask[i]:
            continue
        out[key] = _split(value, i) if isinstance(value, dict) else value[i]
    return out


def _row(x: Any, i: int) -> Any:
    return {k: _row(v, i) for k, v in x.items()} if isinstance(x, dict) else np.asarray(x[i])


class _Policy:
    """Seeded actions, one draw per vector step: the loop and the runner see the same ones."""

    def __init__(self, space: gym.Space, seed: int):
        self.space, self.rng, self.calls = space, np.random.default_rng(seed), 0

    def __call__(self, obs: Any) -> tuple[Any, dict[str, Any]]:
        self.calls += 1
        if isinstance(self.space, gym.spaces.MultiDiscrete):
            return self.rng.integers(0, self.space.nvec), {}
        # beyond the env's bounds on purpose (ClipAction's space is unbounded: Pendulum's is
        # [-2, 2]): ClipAction clips for the env, and the recorded actions are the policy's
        low = np.where(np.isfinite(self.space.low), self.space.low - 1.0, -3.0)
        high = np.where(np.isfinite(self.space.high), self.space.high + 1.0, 3.0)
        return self.rng.uniform(low, high).astype(self.space.dtype), {}


def _loop(make_env: Callable[[], Any], mode: AutoresetMode, seed: int, steps: int) -> tuple:
    env = make_env()
    policy = _Policy(env.action_space, seed + 1)
    obs, info = env.reset(seed=seed)
    n = env.num_envs
    steps_of: list[list[dict[str, Any]]] = [[] for _ in range(n)]
    starts: list[list[tuple[Any, dict[str, Any]]]] = [
        [(_row(obs, i), _split(info, i))] for i in range(n)
    ]
    resetting = np.zeros(n, bool)
    for _ in range(steps):
        action, _ = policy(obs)
        next_obs, reward, term, trunc, info = env.step(action)
        for i in range(n):
            if mode is NEXT and resetting[i]:  # a reset step: starts the next episode only
                starts[i].append((_row(next_obs, i), _split(info, i)))
                continue
            step = {"obs": _row(obs, i), "action": _row(action, i), "reward": float(reward[i])}
            step.update(terminated=bool(term[i]), truncated=bool(trunc[i]))
            if mode is SAME and (term[i] or trunc[i]):
                step["next"] = _row(info["final_obs"], i)
                step["info"] = _split(info.get("final_info", {}), i)
                rest = {k: v for k, v in info.items() if k not in FINAL}
                starts[i].append((_row(next_obs, i), _split(rest, i)))
            else:
                step["next"], step["info"] = _row(next_obs, i), _split(info, i)
            steps_of[i].append(step)
        resetting = term | trunc
        obs = next_obs
    env.close()
    return steps_of, starts


def _recorded(calls: list[Any], n: int) -> tuple:
    steps_of: list[list[dict[str, Any]]] = [[] for _ in range(n)]
    starts: list[list[tuple[Any, dict[str, Any]]]] = [[] for _ in range(n)]
    for chunks in calls:
        for chunk in chunks:
            i = chunk.custom_data["env_index"]
            obs, infos = chunk.get_observations(), chunk.get_infos()
            actions, rewards = chunk.get_actions(), chunk.get_rewards()
            if chunk.t_started == 0:
                starts[i].append((_row(obs, 0), infos[0]))
            for t in range(len(chunk)):
                last = t == len(chunk) - 1
                steps_of[i].append(
                    {
                        "obs": _row(obs, t),
                        "action": _row(actions, t),
                        "reward": float(rewards[t]),
                        "terminated": last and chunk.is_terminated,
                        "truncated": last and chunk.is_truncated,
                        "next": _row(obs, t + 1),
                        "info": infos[t + 1],
                    }
                )
    return steps_of, starts


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, dict) or isinstance(b, dict):
        return (
            isinstance(a, dict)
            and isinstance(b, dict)
            and a.keys() == b.keys()
            # RecordEpisodeStatistics' "t" is wall-clock time: it differs between two runs
            and all(k == "t" or _same(a[k], b[k]) for k in a)
        )
    a, b = np.asarray(a), np.asarray(b)
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b)


def _vec(env_id: str, outer: tuple = (), per_env: tuple = (), vm: str = "sync") -> Callable:
    def make(mode: AutoresetMode) -> Callable[[], Any]:
        def env() -> Any:
            made = gym.make_vec(
                env_id,
                num_envs=3,
                vectorization_mode=vm,
                vector_kwargs={"autoreset_mode": mode},
                wrappers=list(per_env),
            )
            for wrap in outer:
                made = wrap(made)
            return made

        return env

    return make


LIMIT = functools.partial(gym.wrappers.TimeLimit, max_episode_steps=11)
STACK = functools.partial(gym.wrappers.FrameStackObservation, stack_size=3)
CASES = {
    # name: (vector env maker, the modes gymnasium allows the wrappers in)
    "RecordEpisodeStatistics": (_vec("CartPole-v1", (vw.RecordEpisodeStatistics,)), (NEXT, SAME)),
    "RecordEpisodeStatistics, async": (
        _vec("CartPole-v1", (vw.RecordEpisodeStatistics,), vm="async"),
        (NEXT, SAME),
    ),
    "NormalizeObservation (vector)": (
        _vec("Pendulum-v1", (vw.NormalizeObservation,), (LIMIT,)),
        (NEXT,),
    ),
    "NormalizeReward (vector)": (
        _vec("Pendulum-v1", (vw.NormalizeReward,), (LIMIT,)),
        (NEXT, SAME),
    ),
    "NormalizeObservation per env": (
        _vec("Pendulum-v1", (), (LIMIT, gym.wrappers.NormalizeObservation)),
        (NEXT, SAME),
    ),
    "ClipAction": (_vec("Pendulum-v1", (vw.ClipAction,), (LIMIT,)), (NEXT, SAME)),
    "RescaleAction": (
        _vec("Pendulum-v1", (lambda e: vw.RescaleAction(e, -1.0, 1.0),), (LIMIT,)),
        (NEXT, SAME),
    ),
    "TransformReward": (
        _vec("CartPole-v1", (lambda e: vw.TransformReward(e, lambda r: 0.5 * r),)),
        (NEXT, SAME),
    ),
    "TransformObservation (vector)": (
        _vec("CartPole-v1", (lambda e: vw.TransformObservation(e, lambda o: 2.0 * o),)),
        (NEXT,),
    ),
    "FrameStackObservation and TimeLimit per env": (
        _vec("CartPole-v1", (), (LIMIT, STACK)),
        (NEXT, SAME),
    ),
    "Autoreset per env": (_vec("CartPole-v1", (), (gym.wrappers.Autoreset,)), (NEXT, SAME)),
}
PARAMS = [
    pytest.param(make, mode, id=f"{name}-{mode.value}")
    for name, (make, modes) in CASES.items()
    for mode in modes
]


@pytest.mark.filterwarnings("ignore::UserWarning")  # gymnasium's Box precision notes
@pytest.mark.parametrize(("make", "mode"), PARAMS)
def test_every_chunk_is_what_a_plain_loop_saw(make: Callable, mode: AutoresetMode) -> None:
    make_env = make(mode)
    env = make_env()
    policy = _Policy(env.action_space, 8)
    runner = EnvRunner(env, policy, seed=7, len_lookback_buffer=2)
    calls = [runner.sample(30) for _ in range(3)]
    env.close()
    got_steps, got_starts = _recorded(calls, 3)
    want_steps, want_starts = _loop(make_env, mode, 7, policy.calls)
    ended = 0
    for i in range(3):
        assert len(got_steps[i]) == 90 <= len(want_steps[i])
        for t, (got, want) in enumerate(zip(got_steps[i], want_steps[i])):
            for key in want:
                assert _same(got[key], want[key]), (i, t, key, got[key], want[key])
            ended += got["terminated"] or got["truncated"]
        assert 1 < len(got_starts[i]) <= len(want_starts[i])
        for (got_obs, got_info), (want_obs, want_info) in zip(got_starts[i], want_starts[i]):
            assert _same(got_obs, want_obs) and _same(got_info, want_info)
    assert ended >= 6  # the endings (final observations, reset infos) were exercised
