"""``TorchCartPole``: float32 whatever torch's default dtype, checked constructor arguments and
gymnasium's reset bounds (a float64 default gave float64 observations outside its own space;
2.7 sub-envs were 2; ``options`` were dropped)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from episodes.envs.torch_cartpole import TorchCartPole


@pytest.fixture
def float64_default():
    before = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(before)


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_float32_under_a_float64_default(float64_default, mode):
    env = TorchCartPole(8, autoreset_mode=mode, max_episode_steps=3)
    obs, _ = env.reset(seed=0)
    for _ in range(5):  # through truncations and resets
        assert obs.dtype == torch.float32
        assert env.observation_space.contains(obs.numpy())
        obs, rewards, _, _, infos = env.step(torch.ones(8, dtype=torch.long))
        assert rewards.dtype == torch.float32
        if "final_obs" in infos:
            assert infos["final_obs"].dtype == torch.float32


def test_a_float64_default_changes_no_trajectory(float64_default):
    def trajectory():
        env = TorchCartPole(4)
        obs = [env.reset(seed=3)[0]]
        for k in range(30):
            obs.append(env.step(torch.tensor([k % 2, 1, 0, 1]))[0])
        return torch.stack(obs)

    wide = trajectory()
    torch.set_default_dtype(torch.float32)
    assert torch.equal(wide, trajectory())


BAD = [
    ("num_envs", 2.7),
    ("num_envs", 0),
    ("num_envs", True),
    ("num_envs", "4"),
    ("max_episode_steps", 0),
    ("max_episode_steps", -5),
    ("max_episode_steps", 2.9),
    ("max_episode_steps", 2**63),  # the step counters are int64: it wrapped
    ("max_episode_steps", 2**64),
]


@pytest.mark.parametrize("name, value", BAD, ids=[f"{n}={v!r}" for n, v in BAD])
def test_counts_that_are_not_ints_of_at_least_one_are_refused(name, value):
    kwargs = {"num_envs": 2, name: value}
    with pytest.raises(ValueError, match=f"{name} must be (an int >= 1|at most)"):
        TorchCartPole(**kwargs)


def test_numpy_ints_are_counts():
    env = TorchCartPole(np.int64(3), max_episode_steps=np.int32(7))
    assert env.num_envs == 3 and env.max_episode_steps == 7


def test_reset_bounds_apply_to_the_first_states_only():
    env = TorchCartPole(2000, max_episode_steps=1)
    obs, _ = env.reset(seed=0, options={"low": -0.5, "high": 0.5})
    assert obs.abs().max() <= 0.5 and obs.abs().max() > 0.4
    env.step(torch.ones(2000, dtype=torch.long))  # every sub-env truncates
    fresh = env.step(torch.ones(2000, dtype=torch.long))[0]  # the reset step: default bounds
    assert fresh.abs().max() <= 0.05


def test_reset_without_options_draws_as_before():
    env = TorchCartPole(2)
    assert torch.equal(env.reset(seed=5)[0], env.reset(seed=5, options={})[0])


def test_bounds_gymnasium_refuses_are_refused():
    with pytest.raises(ValueError):
        TorchCartPole(2).reset(seed=0, options={"low": 1.0, "high": 0.5})


def test_the_longest_time_limit_truncates_nothing():
    env = TorchCartPole(2, max_episode_steps=2**63 - 1)
    env.reset(seed=0)
    assert not env.step(torch.ones(2, dtype=torch.long))[3].any()


@pytest.mark.parametrize(
    "low, high",
    [
        (-np.inf, 0.0),
        (-1e39, 1e39),
        (np.nan, 0.1),
        # each bound within float32, their difference (the scale of the draw) beyond it
        (-1.7014119170019813e38, 1.7014116824866203e38),
    ],
    ids=["inf", "beyond float32", "nan", "span beyond float32"],
)
def test_bounds_of_no_finite_float32_range_are_refused(low, high):
    env, twin = TorchCartPole(2), TorchCartPole(2)
    env.reset(seed=0)
    twin.reset(seed=0)
    with pytest.raises(ValueError, match="finite float32 range"):
        env.reset(seed=1, options={"low": low, "high": high})
    push = torch.ones(2, dtype=torch.long)  # refused before anything was reset or seeded
    for _ in range(3):
        assert torch.equal(env.step(push)[0], twin.step(push)[0])
