"""Reset options through the runner: ``runner.reset(options=)``, disabled mode's ``reset_options``.

A tiny env logs every reset it gets (sub-env, seed, a copy of the options); the vector env
counts its own ``reset`` calls. Checked in the three autoreset modes, seeded: the options reach
the env once per reset and nowhere else, and unused options record what a runner without them
records.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from episodes.runner import EnvRunner, RandomPolicy

MODES = {
    "next_step": AutoresetMode.NEXT_STEP,
    "same_step": AutoresetMode.SAME_STEP,
    "disabled": AutoresetMode.DISABLED,
}
N = 3


class LogEnv(gym.Env):
    """Episodes of 2-4 steps (drawn at reset); obs ``[t, level]``, the level from the options."""

    observation_space = spaces.Box(-100, 100, (2,), np.float32)
    action_space = spaces.Discrete(2)

    def __init__(self, index: int, log: list):
        self.index, self.log = index, log

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.log.append((self.index, seed, None if options is None else dict(options)))
        self.level = (options or {}).get("level", 0)
        self.t, self.length = 0, int(self.np_random.integers(2, 5))
        return np.array([0, self.level], np.float32), {"level": self.level}

    def step(self, action):
        self.t += 1
        end = self.t >= self.length
        obs = np.array([self.t, self.level], np.float32)
        return obs, float(self.t), end and self.t % 2 == 0, end and self.t % 2 == 1, {}


class CountingVectorEnv(gym.vector.SyncVectorEnv):
    """Records the ``options`` of each vector ``reset`` call (as given, before gymnasium's pop)."""

    def reset(self, *, seed=None, options=None):
        self.calls.append(None if options is None else dict(options))
        return super().reset(seed=seed, options=options)


def make_env(mode: AutoresetMode) -> tuple[CountingVectorEnv, list]:
    log: list = []
    env = CountingVectorEnv([lambda i=i: LogEnv(i, log) for i in range(N)], autoreset_mode=mode)
    env.calls = []
    return env, log


def make_runner(mode, seed=0, **kwargs):
    env, log = make_env(mode)
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=seed), seed=seed, **kwargs)
    return runner, env, log


def recorded(chunks) -> list:
    return [
        (
            c.custom_data["env_index"],
            c.t_started,
            c.is_terminated,
            c.is_truncated,
            np.asarray(c.get_observations(slice(None))).tolist(),
            np.asarray(c.get_rewards(slice(None))).tolist(),
            np.asarray(c.get_actions(slice(None))).tolist(),
        )
        for c in chunks
    ]


@pytest.mark.parametrize("seed", [0, 7, [3, None, 5]], ids=["0", "7", "list"])
@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
def test_reset_options_reach_the_full_reset_once(mode, seed):
    runner, env, log = make_runner(mode)
    runner.sample(2)
    env.calls.clear(), log.clear()
    runner.reset(seed=seed, options={"level": 9})
    assert env.calls == [] and log == []  # the reset is the next sample's
    chunks = runner.sample(1)
    assert env.calls[0] == {"level": 9}
    seeds = [seed + i for i in range(N)] if isinstance(seed, int) else seed
    assert log[:N] == [(i, seeds[i], {"level": 9}) for i in range(N)]
    assert [c.get_observations(0)[1] for c in chunks] == [9.0] * N
    # Later resets of this runner are the env's own: no options (reset_mask alone if disabled).
    runner.sample(12)
    assert log[N:] and all(options in (None, {}) for _, _, options in log[N:])
    assert all(call is None or set(call) == {"reset_mask"} for call in env.calls[1:])


@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
def test_options_are_that_resets_only(mode):
    runner, env, log = make_runner(mode)
    runner.reset(seed=1, options={"level": 2})
    runner.sample(1)
    runner.reset(seed=1)
    log.clear()
    runner.sample(1)
    assert log == [(i, 1 + i, None) for i in range(N)]


@pytest.mark.parametrize(
    "reset_options, expect",
    [
        pytest.param({"level": 4}, lambda mask: {"level": 4}, id="dict"),
        pytest.param(
            lambda mask: {"level": int(mask.sum()), "first": int(mask.argmax())},
            lambda mask: {"level": int(mask.sum()), "first": int(mask.argmax())},
            id="callable",
        ),
    ],
)
@pytest.mark.parametrize("seed", [0, 11])
def test_disabled_mode_resets_carry_the_options_beside_reset_mask(reset_options, expect, seed):
    runner, env, log = make_runner(AutoresetMode.DISABLED, seed, reset_options=reset_options)
    chunks = runner.sample(20)
    assert env.calls[0] is None and log[:N] == [(i, seed + i, None) for i in range(N)]
    masked = env.calls[1:]
    assert masked, "no sub-env ended"
    sub_resets = log[N:]
    k = 0
    for call in masked:
        mask = call.pop("reset_mask")
        assert mask.dtype == np.bool_ and mask.any()
        assert call == expect(mask)  # exactly the user's keys beside the runner's mask
        # Each masked sub-env reset once, with the options gymnasium left after taking the mask.
        got = sub_resets[k : k + int(mask.sum())]
        assert [g[0] for g in got] == np.flatnonzero(mask).tolist()
        assert all(g[2] == expect(mask) for g in got)
        k += int(mask.sum())
    assert k == len(sub_resets)
    # The new episodes ran at the level the options set.
    levels = {c.get_observations(0)[1] for c in chunks if c.t_started == 0}
    assert levels - {0.0}


def test_callable_gets_a_copy_of_the_mask():
    seen = []

    def options(mask):
        seen.append(mask)
        mask[:] = False  # must not change which sub-envs the env resets
        return {}

    runner, env, _ = make_runner(AutoresetMode.DISABLED, reset_options=options)
    runner.sample(10)
    assert seen and all(call["reset_mask"].any() for call in env.calls[1:])


@pytest.mark.parametrize(
    "mode, seed",
    [(m, s) for m in MODES.values() for s in (0, 5)],
    ids=[f"{k}-{s}" for k in MODES for s in (0, 5)],
)
def test_unused_options_record_what_a_runner_without_them_records(mode, seed):
    plain, plain_env, plain_log = make_runner(mode, seed)
    extra = {"reset_options": {}} if mode is AutoresetMode.DISABLED else {}
    given, given_env, given_log = make_runner(mode, seed, **extra)
    for runner in (plain, given):
        runner.reset(seed=seed, options=None if runner is plain else {})
    for _ in range(3):
        assert recorded(plain.sample(5)) == recorded(given.sample(5))
    assert [(i, s) for i, s, _ in plain_log] == [(i, s) for i, s, _ in given_log]
    assert plain_env.calls[0] is None and given_env.calls[0] == {}
    assert all(o in (None, {}) for *_, o in plain_log + given_log)


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
@pytest.mark.parametrize("reset_options", [{"level": 1}, lambda mask: {}], ids=["dict", "fn"])
def test_autoreset_modes_refuse_reset_options(mode, reset_options):
    env, _ = make_env(MODES[mode])
    with pytest.raises(ValueError, match="takes no options"):
        EnvRunner(env, RandomPolicy(env.action_space), reset_options=reset_options)


@pytest.mark.parametrize(
    "reset_options, error, match",
    [
        pytest.param(5, TypeError, "reset_options must be None, a dict", id="int"),
        pytest.param([("level", 1)], TypeError, "got list", id="pairs"),
        pytest.param({"reset_mask": 1}, ValueError, "'reset_mask'", id="reset_mask"),
        pytest.param({1: 2}, TypeError, "keys must be str", id="key"),
    ],
)
def test_constructor_refuses_bad_reset_options(reset_options, error, match):
    env, _ = make_env(AutoresetMode.DISABLED)
    with pytest.raises(error, match=match):
        EnvRunner(env, RandomPolicy(env.action_space), reset_options=reset_options)


def ends(chunks) -> dict:
    """Each sub-env's first and last chunk ids of a call."""
    first, last = {}, {}
    for c in chunks:
        first.setdefault(c.custom_data["env_index"], c.id_)
        last[c.custom_data["env_index"]] = c.id_
    return first, last


@pytest.mark.parametrize(
    "options, error, match",
    [
        pytest.param([("level", 1)], TypeError, "options must be None or a dict", id="list"),
        pytest.param("level", TypeError, "got str 'level'", id="str"),
        pytest.param({"reset_mask": np.ones(N, bool)}, ValueError, "'reset_mask'", id="mask"),
        pytest.param({2: 1}, TypeError, "keys must be str", id="key"),
    ],
)
@pytest.mark.parametrize("mode", MODES.values(), ids=MODES.keys())
def test_reset_refuses_bad_options_leaving_the_runner_as_it_was(mode, options, error, match):
    runner, env, _ = make_runner(mode, 3)
    twin, _, _ = make_runner(mode, 3)
    _, last = ends(runner.sample(2))
    twin.sample(2)
    with pytest.raises(error, match=match):
        runner.reset(seed=8, options=options)
    assert runner.seed == 3
    second = runner.sample(2)
    assert ends(second)[0] == last  # the running episodes go on
    assert recorded(second) == recorded(twin.sample(2))
    assert all(call is None or set(call) == {"reset_mask"} for call in env.calls)


@pytest.mark.parametrize("returned", [None, [("level", 1)], {"reset_mask": 0}], ids=str)
def test_callable_returning_no_options_dict_stops_the_sample_clearly(returned):
    runner, env, _ = make_runner(AutoresetMode.DISABLED, reset_options=lambda mask: returned)
    with pytest.raises((TypeError, ValueError), match=r"reset_options\(mask\)"):
        runner.sample(20)
    assert len(env.calls) == 1  # the refused options never reached the env
    with pytest.raises(RuntimeError, match="call reset"):  # as any failure after a step
        runner.sample(1)
