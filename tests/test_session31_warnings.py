"""Warnings that escaped, or broke a run under ``-W error`` (the warnings hunt of session 31).

- the runner's next-step backlog warning named a line inside the library and, raised by an
  error filter in the middle of a call, killed the runner; it now comes last, from the
  caller's ``sample`` line, and the runner goes on;
- numpy's "All-NaN slice" warning escaped from the runner's widening check;
- inf, -inf and 1e308 rewards made the runner's return bookkeeping warn;
- read-only numpy arrays made torch warn ("not writable") on a torch env and on the
  converter's device path;
- the connectors' float32 casts turned 1e300 into inf with numpy's overflow warning, where the
  replay buffer refuses it; they refuse it too (``Float32RangeError``), and ``check_connector``
  takes that documented refusal;
- ``episodes plot`` on returns of +-1e308 said "cannot write" after matplotlib's warnings.
"""

from __future__ import annotations

import contextlib
import inspect
import math
import warnings
from collections.abc import Iterator

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

from episodes import SingleAgentEpisode
from episodes.connectors import (
    AddLearnerColumns,
    FlattenObservations,
    FrameStack,
    PrevActionsPrevRewards,
)
from episodes.runner import EnvRunner, RandomPolicy
from episodes.runner.metrics import RunnerMetrics
from tests.runner._runner_env import action_policy, make_vec

# Sub-env 0 ends an episode every step, sub-env 1 never: next-step carry-over grows each call.
SCRIPTS = [[(1, "term")], [(10**6, "trunc")]]
BOX64 = gym.spaces.Box(-np.inf, np.inf, (2,), np.float64)


@contextlib.contextmanager
def warnings_as_errors() -> Iterator[None]:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        yield


def _backlog_runner() -> EnvRunner:
    return EnvRunner(make_vec(SCRIPTS, AutoresetMode.NEXT_STEP), action_policy)


# ------------------------------------------------------------------------ runner: backlog
def test_the_backlog_warning_names_the_line_calling_sample() -> None:
    runner = _backlog_runner()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(40):
            line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
            runner.sample(32)
    backlog = [w for w in seen if "earlier calls" in str(w.message)]
    assert len(backlog) == 1
    assert (backlog[0].filename, backlog[0].lineno) == (__file__, line)


def test_the_backlog_warning_on_a_torch_env_names_the_line_calling_sample() -> None:
    torch = pytest.importorskip("torch")

    class TorchEnv(gym.vector.VectorEnv):  # sub-env 0 truncates every step, 1 never
        def __init__(self) -> None:
            self.num_envs = 2
            self.metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}
            self.single_observation_space = gym.spaces.Box(-1, 1, (1,), np.float32)
            self.single_action_space = gym.spaces.Discrete(2)
            self.observation_space = batch_space(self.single_observation_space, 2)
            self.action_space = batch_space(self.single_action_space, 2)
            self.need = torch.zeros(2, dtype=torch.bool)

        def reset(self, *, seed=None, options=None):
            self.need[:] = False
            return torch.zeros(2, 1), {}

        def step(self, actions):
            rewards = torch.where(self.need, 0.0, 1.0)
            cut = torch.tensor([True, False]) & ~self.need
            self.need = cut.clone()
            return torch.zeros(2, 1), rewards, torch.zeros(2, dtype=torch.bool), cut, {}

    runner = EnvRunner(TorchEnv(), lambda obs: (torch.zeros(2, dtype=torch.long), {}))
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for _ in range(40):
            line = inspect.currentframe().f_lineno + 1  # type: ignore[union-attr]
            runner.sample(32)
    backlog = [w for w in seen if "earlier calls" in str(w.message)]
    assert len(backlog) == 1
    assert (backlog[0].filename, backlog[0].lineno) == (__file__, line)


def test_the_backlog_warning_raised_by_an_error_filter_leaves_the_runner_usable() -> None:
    runner = _backlog_runner()
    with warnings_as_errors():
        calls = 0
        while True:
            calls += 1
            assert calls <= 40, "the backlog warning never came"
            try:
                runner.sample(32)
            except RuntimeWarning as warning:
                assert "earlier calls" in str(warning)
                break
        # Said once: the next calls go on, handing out whole calls of 32 per sub-env.
        for _ in range(3):
            chunks = runner.sample(32)
            per_env = [0, 0]
            for chunk in chunks:
                per_env[chunk.custom_data["env_index"]] += len(chunk)
            assert per_env == [32, 32]
    assert calls > 1  # raised by a later call, not the first


# ------------------------------------------------------------------- runner: numpy's words
def test_an_all_nan_float64_output_after_float32_ones_warns_of_nothing() -> None:
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")
    calls = [0]

    def policy(obs):
        calls[0] += 1
        vf = np.zeros(2, np.float32) if calls[0] == 1 else np.full(2, np.nan)
        return np.zeros(2, np.int64), {"vf": vf}

    runner = EnvRunner(env, policy, seed=0)
    with warnings_as_errors():
        chunks = runner.sample(3)
        again = runner.sample(2)  # the runner goes on
    vf = chunks[0].get_extra_model_outputs("vf")
    assert vf.dtype == np.float32 and vf[0] == 0.0 and np.isnan(vf[1:]).all()
    assert len(again) >= 2


class _RewardEnv(gym.vector.VectorEnv):
    """Two sub-envs (next-step); rewards cycle through ``rewards``; episodes of 4 steps."""

    def __init__(self, rewards: list[float]) -> None:
        self.num_envs = 2
        self.metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}
        self.single_observation_space = gym.spaces.Box(-1, 1, (1,), np.float32)
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = batch_space(self.single_observation_space, 2)
        self.action_space = batch_space(self.single_action_space, 2)
        self.rewards, self.i, self.need = rewards, 0, np.zeros(2, bool)

    def reset(self, *, seed=None, options=None):
        self.i, self.need[:] = 0, False
        return np.zeros((2, 1), np.float32), {}

    def step(self, actions):
        rewards = np.where(self.need, 0.0, self.rewards[self.i % len(self.rewards)])
        self.i += 1
        ends = ~self.need & (self.i % 4 == 0)
        self.need = ends.copy()
        return np.zeros((2, 1), np.float32), rewards, ends, np.zeros(2, bool), {}


@pytest.mark.parametrize(
    ("rewards", "returns"),
    [([math.inf, -math.inf, 1.0], "nan"), ([1e308, 1e308, -1e308], "inf")],
    ids=["inf-and-minus-inf", "1e308"],
)
def test_extreme_rewards_give_their_returns_without_numpy_warnings(rewards, returns) -> None:
    env = _RewardEnv(rewards)
    runner = EnvRunner(env, RandomPolicy(env.action_space, seed=0), seed=0)
    with warnings_as_errors():
        runner.sample(8)
        metrics = runner.get_metrics()
    got = metrics["episode_returns"]
    assert got and all(math.isnan(r) for r in got) if returns == "nan" else math.inf in got


def test_runner_metrics_sum_inf_and_minus_inf_returns_without_a_warning() -> None:
    metrics = RunnerMetrics()
    with warnings_as_errors():
        metrics.add_episodes([math.inf, -math.inf, 1e308, 1e308], [1, 1, 1, 1])
    assert metrics.num_episodes == 4 and math.isnan(metrics.return_sum)


# ------------------------------------------------------------- torch: read-only numpy arrays
@pytest.fixture
def torch_warns_always():
    torch = pytest.importorskip("torch")
    before = torch.is_warn_always_enabled()
    torch.set_warn_always(True)  # the "not writable" warning is once per process otherwise
    yield torch
    torch.set_warn_always(before)


def _read_only(array: np.ndarray) -> np.ndarray:
    array = np.array(array)
    array.flags.writeable = False
    return array


@pytest.mark.parametrize("which", ["actions", "extras"])
def test_read_only_policy_outputs_on_a_torch_env_make_torch_say_nothing(
    torch_warns_always, which
) -> None:
    torch = torch_warns_always
    n = 4

    class Env(gym.vector.VectorEnv):  # takes any actions without converting them itself
        def __init__(self) -> None:
            self.num_envs = n
            self.metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}
            self.single_observation_space = gym.spaces.Box(-1, 1, (1,), np.float32)
            self.single_action_space = gym.spaces.Discrete(2)
            self.observation_space = batch_space(self.single_observation_space, n)
            self.action_space = batch_space(self.single_action_space, n)

        def reset(self, *, seed=None, options=None):
            return torch.zeros(n, 1), {}

        def step(self, actions):
            no = torch.zeros(n, dtype=torch.bool)
            # Read-only rewards and flags from the env too.
            flags = _read_only(np.zeros(n, bool))
            return torch.zeros(n, 1), _read_only(np.ones(n)), no, flags, {}

    def policy(obs):
        actions = _read_only(np.zeros(n, np.int64)) if which == "actions" else torch.zeros(n)
        vf = _read_only(np.arange(n, dtype=np.float32)) if which == "extras" else torch.zeros(n)
        return actions, {"vf": vf}

    with warnings_as_errors():
        chunks = EnvRunner(Env(), policy, seed=0).sample(3)
    assert [len(c) for c in chunks] == [3] * n
    if which == "extras":
        assert chunks[2].get_extra_model_outputs("vf").tolist() == [2.0, 2.0, 2.0]


def test_a_read_only_value_fn_output_on_the_device_path_makes_torch_say_nothing(
    torch_warns_always,
) -> None:
    torch = torch_warns_always
    from episodes.converter import ColumnKeys, episodes_to_rollout
    from episodes.envs.torch_cartpole import TorchCartPole

    n = 4

    def policy(obs):
        return torch.zeros(n, dtype=torch.long), {"vf": torch.zeros(n), "logp": torch.zeros(n)}

    chunks = EnvRunner(TorchCartPole(n), policy, seed=0).sample(8)
    keys = ColumnKeys(values="vf", log_probs="logp")
    with warnings_as_errors():
        rollout = episodes_to_rollout(
            chunks, gamma=0.9, value_fn=lambda o: _read_only(np.zeros(len(o))), keys=keys
        )
    assert tuple(rollout.storage.observations.shape[:2]) == (8, n)


# ---------------------------------------------------------------- connectors: float32 casts
def _episode(obs: np.ndarray, reward: float) -> SingleAgentEpisode:
    ep = SingleAgentEpisode("a", observation_space=BOX64, action_space=gym.spaces.Discrete(2))
    ep.add_env_reset(obs)
    for _ in range(3):
        ep.add_env_step(obs, 1, reward)
    return ep


BIG_OBS = np.array([0.0, 1e300])
CASES = [
    ("FlattenObservations", FlattenObservations, _episode(BIG_OBS, 1.0), "'obs' column"),
    ("inference", lambda: FlattenObservations(inference=True), _episode(BIG_OBS, 1.0), "'obs'"),
    ("FrameStack", lambda: FrameStack(2, flatten=True), _episode(BIG_OBS, 1.0), "'obs' column"),
    ("Prev", lambda: PrevActionsPrevRewards(1, 1), _episode(np.zeros(2), -1e300), "prev_n_rew"),
    ("AddLearnerColumns", AddLearnerColumns, _episode(np.zeros(2), 1e300), "'rewards' column"),
]


IDS = [case[0] for case in CASES]


@pytest.mark.parametrize("numpy", [False, True], ids=["list", "numpy"])
@pytest.mark.parametrize(("make", "ep", "column"), [case[1:] for case in CASES], ids=IDS)
def test_the_float32_columns_refuse_finite_values_float32_makes_inf(
    make, ep, column, numpy
) -> None:
    ep = ep.to_numpy() if numpy else ep
    batch = {"kept": 1}
    with warnings_as_errors(), pytest.raises(ValueError, match=column) as raised:
        make()([ep], batch)
    assert type(raised.value).__name__ == "Float32RangeError"
    assert "1e+300" in str(raised.value) and "inf" in str(raised.value)
    assert batch == {"kept": 1}  # the batch is left as it was
    # inf and NaN stay as they are, without a warning either.
    odd = _episode(np.array([np.inf, np.nan]), -np.inf)
    with warnings_as_errors():
        out = make()([odd.to_numpy() if numpy else odd], {})
    values = np.concatenate([np.ravel(v) for v in out.values() if np.asarray(v).dtype.kind == "f"])
    assert np.isinf(values).any()


def test_check_connector_takes_the_documented_refusal_of_an_unbounded_float64_box() -> None:
    pytest.importorskip("hypothesis")
    from episodes.testing import check_connector

    with warnings_as_errors():
        check_connector(
            FlattenObservations(),
            observation_space=BOX64,
            action_space=gym.spaces.Discrete(2),
            lookback=0,
            max_examples=40,
        )


def test_a_connector_contract_test_takes_the_documented_refusal() -> None:
    pytest.importorskip("hypothesis")
    from hypothesis import settings

    from episodes.testing import ConnectorContract

    class Contract(ConnectorContract):
        observation_space = BOX64
        lookback = 1  # FrameStack(2) reads one step back

        def make_connector(self):
            return FrameStack(2, flatten=True)

    with warnings_as_errors():
        for name in ("test_deterministic", "test_list_numpy_agree", "test_lookback_across_cuts"):
            settings(max_examples=30, database=None)(getattr(Contract, name))(Contract())


# ------------------------------------------------------------------------------ cli: plot
def _dataset(path, returns) -> None:
    from episodes.io import DatasetWriter

    with DatasetWriter(str(path)) as writer:
        for i, reward in enumerate(returns):
            writer.write(
                SingleAgentEpisode(
                    f"a{i}",
                    observations=[0.0] * 2,
                    actions=[0],
                    rewards=[reward],
                    terminated=True,
                    len_lookback_buffer=0,
                )
            )


def test_plot_says_it_cannot_draw_returns_of_plus_minus_1e308(tmp_path, capsys) -> None:
    pytest.importorskip("matplotlib")
    from episodes.cli import main

    _dataset(tmp_path / "big", [1e308, -1e308, 5.0])
    _dataset(tmp_path / "fine", [1.0, -2.0, 5.0])
    capsys.readouterr()
    out = tmp_path / "big.png"
    with warnings_as_errors():
        code = main(["plot", str(tmp_path / "big"), "--out", str(out)])
    err = capsys.readouterr().err
    assert code == 1 and not out.exists()
    assert "cannot draw the plot of" in err and "cannot write" not in err
    assert "returns from -1e+308 to 1e+308" in err and "Warning" not in err
    with warnings_as_errors():  # a plot that draws is written as before
        assert main(["plot", str(tmp_path / "fine"), "--out", str(tmp_path / "f.png")]) == 0
    assert (tmp_path / "f.png").stat().st_size > 0


def test_plot_draws_huge_finite_returns_matplotlib_warns_about(tmp_path, capsys) -> None:
    # matplotlib warns of an overflow scaling the axis of returns up to 9e307, and draws them.
    pytest.importorskip("matplotlib")
    from episodes.cli import main

    _dataset(tmp_path / "huge", [9e307, 0.0])
    out = tmp_path / "huge.png"
    capsys.readouterr()
    with warnings_as_errors():
        code = main(["plot", str(tmp_path / "huge"), "--out", str(out)])
    assert code == 0 and out.stat().st_size > 0
    assert "Warning" not in capsys.readouterr().err
