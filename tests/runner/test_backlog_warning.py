"""Next-step carry-over warns once a sub-env holds more than 16 calls' worth of old rows.

With sub-envs whose episodes end at different rates, the rows a call hands out grow ever
older (the cost-growth hunt of round 24: transitions 158 calls old at call 3,000), linearly
with the calls, where the docs said like their square root. The runner now says so, once.
"""

from __future__ import annotations

import warnings

import pytest
from gymnasium.vector import AutoresetMode

from episodes.runner import EnvRunner
from episodes.runner.backlog import BACKLOG_CALLS
from tests.runner._runner_env import action_policy, make_vec

# Sub-env 0 ends an episode every step (every other vector step is its reset step, which
# records nothing); sub-env 1 never ends one, so it carries a call's worth more each call.
SCRIPTS = [[(1, "term")], [(10**6, "trunc")]]
T = 32  # above MIN_BACKLOG / BACKLOG_CALLS: the bound is 16 calls' worth


def _calls(window: str, calls: int) -> list[warnings.WarningMessage]:
    runner = EnvRunner(make_vec(SCRIPTS, AutoresetMode.NEXT_STEP), action_policy, window=window)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(calls):
            runner.sample(T)
    return [w for w in seen if "earlier calls" in str(w.message)]


def test_a_growing_backlog_is_warned_of_once() -> None:
    assert _calls("transitions", BACKLOG_CALLS - 2) == []
    seen = _calls("transitions", BACKLOG_CALLS + 8)
    assert len(seen) == 1 and seen[0].category is RuntimeWarning
    assert "window='vector_steps'" in str(seen[0].message)


def test_the_vector_steps_window_carries_nothing_and_never_warns() -> None:
    assert _calls("vector_steps", BACKLOG_CALLS + 8) == []


@pytest.mark.parametrize("mode", [AutoresetMode.SAME_STEP, AutoresetMode.DISABLED])
def test_other_modes_carry_nothing(mode) -> None:
    runner = EnvRunner(make_vec(SCRIPTS, mode), action_policy)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for _ in range(BACKLOG_CALLS + 8):
            runner.sample(T)


@pytest.mark.parametrize("window", ["transitions", "vector_steps"])
def test_lookback_rows_are_no_backlog(window) -> None:
    # One sub-env carries nothing over; a long lookback kept between calls is not a backlog.
    env = make_vec([[(10**6, "trunc")]], AutoresetMode.NEXT_STEP)
    runner = EnvRunner(env, action_policy, len_lookback_buffer=64, window=window)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        for _ in range(3 * BACKLOG_CALLS):
            runner.sample(2)
