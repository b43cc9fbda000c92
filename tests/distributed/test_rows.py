"""Step and n-step columns of a chunk: named cases and a property against a brute-force sum."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("ray")

from episodes import SingleAgentEpisode  # noqa: E402
from episodes.distributed import nstep_columns, step_columns  # noqa: E402


def chunk(rewards, *, terminated=False, truncated=False, t_started=0, obs_dim=None):
    n = len(rewards)
    obs = np.arange(n + 1, dtype=np.float32)
    if obs_dim:
        obs = np.repeat(obs[:, None], obs_dim, axis=1)
    return SingleAgentEpisode(
        "c",
        observations=list(obs),
        actions=list(range(n)),
        rewards=list(rewards),
        terminated=terminated,
        truncated=truncated,
        t_started=t_started,
        len_lookback_buffer=0,
    ).to_numpy()


CASES = {
    "one step, terminated": (
        chunk([2.0], terminated=True),
        3,
        0.5,
        {
            "reward": [2.0],
            "next_obs": [1.0],
            "terminated": [True],
            "discount": [0.5],
            "n_steps": [1],
        },
    ),
    "running chunk: shorter horizon at its end": (
        chunk([1.0, 2.0, 4.0]),
        2,
        0.5,
        {
            "reward": [2.0, 4.0, 4.0],
            "next_obs": [2.0, 3.0, 3.0],
            "terminated": [False] * 3,
            "truncated": [False] * 3,
            "discount": [0.25, 0.25, 0.5],
            "n_steps": [2, 2, 1],
        },
    ),
    "truncated ending marks the steps that reach it": (
        chunk([1.0, 1.0, 1.0], truncated=True, t_started=7),
        2,
        1.0,
        {"t": [7, 8, 9], "truncated": [False, True, True], "terminated": [False] * 3},
    ),
}


@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_named_cases(case):
    episode, n_step, gamma, want = CASES[case]
    cols = nstep_columns(episode, n_step, gamma)
    for name, value in want.items():
        assert cols[name].tolist() == value, name


@given(
    rewards=st.lists(st.floats(-10, 10, allow_nan=False), min_size=1, max_size=12),
    n_step=st.integers(1, 5),
    gamma=st.floats(0.0, 1.0),
    terminated=st.booleans(),
)
def test_nstep_sums_match_brute_force(rewards, n_step, gamma, terminated):
    ep = chunk(rewards, terminated=terminated, obs_dim=2)
    cols = nstep_columns(ep, n_step, gamma)
    n = len(rewards)
    for k in range(n):
        m = min(n_step, n - k)
        assert cols["n_steps"][k] == m
        assert cols["reward"][k] == pytest.approx(
            sum(gamma**j * rewards[k + j] for j in range(m)), abs=1e-9
        )
        assert cols["next_obs"][k].tolist() == [k + m, k + m]
        assert cols["terminated"][k] == (terminated and k + m == n)
    one = nstep_columns(ep, 1, gamma)
    steps = step_columns(ep)
    for name in steps:
        assert np.array_equal(one[name], steps[name]), name


@pytest.mark.parametrize("n_step", [0, 2.5, True, "2"], ids=repr)
def test_bad_n_step_is_refused(n_step):
    # 2.5 was taken as 2.
    with pytest.raises(ValueError, match="n_step"):
        nstep_columns(chunk([1.0]), n_step, 0.9)


@pytest.mark.parametrize(
    "gamma", [2.0, -1.0, float("nan"), "0.5", True, np.complex128(0.5 + 2j)], ids=repr
)
def test_bad_gamma_is_refused(gamma):
    # 2.0 and -1.0 were summed with, NaN gave NaN rewards, "0.5" a TypeError from **.
    with pytest.raises(ValueError, match="gamma"):
        nstep_columns(chunk([1.0, 1.0]), 2, gamma)


def test_a_monte_carlo_n_step_sums_each_rest_of_the_chunk():
    # The loop ran n_step times: 10**9 never ended.
    cols = nstep_columns(chunk([1.0, 2.0, 4.0]), 10**9, 0.5)
    assert cols["reward"].tolist() == [3.0, 4.0, 4.0] and cols["n_steps"].tolist() == [3, 2, 1]


def test_gamma_zero_with_an_infinite_reward_is_no_nan():
    """0 ** j * inf was NaN: terms of weight 0 are left out."""
    cols = nstep_columns(chunk([1.0, float("inf"), 1.0]), 3, 0.0)
    assert cols["reward"].tolist() == [1.0, float("inf"), 1.0]
