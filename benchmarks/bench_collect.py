"""One on-policy rollout into a GAE-ready storage: env + policy floor vs rsl_rl vs episodes.

Run with the reference venv (it holds rsl_rl 5.5.1 next to our package):

    .venv-ref/bin/python benchmarks/bench_collect.py [--quick] [--repeats 5]

Each workload steps ``N`` sub-envs ``T`` times with one small torch MLP (obs -> action
distribution + value), torch at 1 thread, and times three contenders interleaved in this
process (medians of the repeats):

* ``floor``: ``env.step`` + the policy, nothing recorded;
* ``rsl_rl``: the same loop feeding rsl_rl 5.5.1's ``RolloutStorage.add_transition`` once per
  vector step through its ``PPO.process_env_step`` (timeout bootstrap included), then its
  ``PPO.compute_returns`` (GAE + advantage normalisation);
* ``episodes``: ``EnvRunner.sample(T)`` -> ``episodes_to_rollout`` -> ``compute_returns``;
* ``vector steps``: the same with ``EnvRunner(window="vector_steps")``: ``T`` vector steps per
  call, the next-step reset steps left in the window as masked cells (``storage.valid``),
  nothing carried over (a different contract: a sub-env's chunks sum to ``T`` less its reset
  steps; reported beside the default, which is what the targets are checked on).

Every contender owns an env of its own (same seed) and keeps stepping it across repeats, as
a training loop would. The rsl_rl loop records gymnasium's next-step reset steps as ordinary
transitions (a user wiring a gymnasium env into rsl_rl gets exactly that); the runner drops
them, so it steps the env a little more than ``T`` times per call (about 3-7% here: every
sub-env must record ``T`` transitions). The workloads and targets (episodes / rsl_rl) are
those of issue #12. The first line of the output says which ``episodes`` was imported: to
time another version (a baseline), put its folder first on ``PYTHONPATH``.

Memory: the peaks that ``tracemalloc`` sees during consecutive episodes rollouts (runner,
converter, GAE; after one warm-up rollout, each keeping the previous one alive as a training
loop does until it reassigns): the largest of the first 3, the largest and median of the 8
after them (the target is checked on the largest), and what stays allocated between rollouts
(the env, the runner's blocks for the next call, the last rollout's chunks), over the bytes
of one rollout's
data (observations, actions, rewards, dones, values, log-probs and distribution parameters of
the ``T x N`` steps). tracemalloc follows Python objects and numpy buffers (recording blocks,
chunk columns, the converter's temporaries, and storage tensors that adopt numpy memory), not
tensors torch allocates itself: a storage the converter copies into is not counted.
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import interleaved, non_negative_int, positive_int  # noqa: E402

import episodes  # noqa: E402
from episodes.converter import ColumnKeys, episodes_to_rollout  # noqa: E402
from episodes.runner import WINDOWS, EnvRunner  # noqa: E402

try:
    from rsl_rl.algorithms.ppo import PPO
    from rsl_rl.storage import RolloutStorage as RslStorage
    from tensordict import TensorDict
except ImportError:  # pragma: no cover
    sys.exit("rsl_rl is not installed: run with .venv-ref/bin/python")

GAMMA, LAM, HIDDEN, SEED = 0.99, 0.95, 32, 0
_HALF_LOG_2PI = 0.5 * float(np.log(2 * np.pi))


# ------------------------------------------------------------------------------------ envs
class NumpyBoxVectorEnv(gym.vector.VectorEnv):
    """``N`` copies of a cheap continuous-control-like task, stepped as numpy arrays.

    48-dim Box observations decay, follow the action (12-dim Box, clipped) and take noise from
    a pre-drawn bank (fresh Gaussian draws would make the env the bottleneck), the reward is a
    quadratic cost, and each sub-env is truncated at random (probability ``truncate_p`` per
    step; never terminated). Next-step autoreset, like gymnasium's own vector envs: the step
    after a truncation resets that sub-env, ignores its action and returns reward 0.
    """

    metadata = {"autoreset_mode": AutoresetMode.NEXT_STEP}

    def __init__(
        self, num_envs: int, obs_dim: int = 48, act_dim: int = 12, truncate_p: float = 0.02
    ):
        self.num_envs = num_envs
        self.single_observation_space = gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
        self.single_action_space = gym.spaces.Box(-1.0, 1.0, (act_dim,), np.float32)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.truncate_p = truncate_p
        self._rng = np.random.default_rng()
        self._noise = np.random.default_rng(4321).normal(0, 0.05, (7, num_envs, obs_dim))
        self._noise = self._noise.astype(np.float32)
        self._t = 0
        self._state = np.zeros((num_envs, obs_dim), np.float32)
        self._needs_reset = np.zeros(num_envs, bool)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._state = self._rng.normal(0, 1, self._state.shape).astype(np.float32)
        self._needs_reset[:] = False
        return self._state.copy(), {}

    def step(self, actions: np.ndarray) -> tuple:
        n = self.num_envs
        a = np.clip(np.asarray(actions, np.float32), -1.0, 1.0)
        state, act_dim = self._state, a.shape[1]
        # In place: the env should cost about what a fast simulator's step costs, little.
        state *= 0.95
        state[:, :act_dim] += 0.1 * a
        state += self._noise[self._t % len(self._noise)]
        self._t += 1
        rewards = -0.01 * np.square(state[:, :act_dim]).sum(1) - 0.1 * np.square(a).sum(1)
        truncated = self._rng.random(n) < self.truncate_p
        resetting = self._needs_reset
        if resetting.any():
            fresh = self._rng.normal(0, 1, (int(resetting.sum()), self._state.shape[1]))
            self._state[resetting] = fresh
            rewards[resetting] = 0.0
            truncated[resetting] = False
        self._needs_reset = truncated.copy()
        return self._state.copy(), rewards, np.zeros(n, bool), truncated, {}


def flat_dim(space: gym.Space) -> int:
    assert space.shape is not None, space
    return int(np.prod(space.shape))


def cartpole(n: int) -> gym.vector.VectorEnv:
    return gym.make_vec("CartPole-v1", n, vectorization_mode="vector_entry_point")


# ---------------------------------------------------------------------------------- policy
class ActorCritic(nn.Module):
    """Shared two-layer MLP trunk; a Gaussian (Box) or categorical (Discrete) head and a value.

    With ``HIDDEN = 0`` (``--hidden 0``) there is no trunk: linear heads on the observation.
    """

    def __init__(self, obs_dim: int, act_dim: int, discrete: bool):
        super().__init__()
        self.discrete = discrete
        hidden = HIDDEN or obs_dim
        self.trunk: nn.Module = nn.Identity()
        if HIDDEN:
            self.trunk = nn.Sequential(
                nn.Linear(obs_dim, hidden), nn.ELU(), nn.Linear(hidden, hidden), nn.ELU()
            )
        self.head = nn.Linear(hidden, act_dim)
        self.value_head = nn.Linear(hidden, 1)
        self.log_std = nn.Parameter(torch.full((act_dim,), -0.5))

    @torch.no_grad()
    def act(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple]:
        """Samples actions; returns them with values, log-probs and distribution parameters.

        Shapes: actions ``[N, A]`` (``[N, 1]`` float indices when discrete, as rsl_rl stores
        them), values ``[N, 1]``, log-probs ``[N]``.
        """
        h = self.trunk(obs)
        out, values = self.head(h), self.value_head(h)
        # Sampled and scored by hand: torch.distributions' argument checks cost more than the
        # math at these sizes, and would inflate the floor every contender shares.
        if self.discrete:
            logp_all = torch.log_softmax(out, -1)
            index = torch.multinomial(logp_all.exp(), 1)
            return index.float(), values, logp_all.gather(-1, index)[:, 0], (out,)
        eps = torch.randn_like(out)
        std = self.log_std.exp().expand_as(out)
        log_prob = (-0.5 * eps.square() - self.log_std - _HALF_LOG_2PI).sum(-1)
        return out + std * eps, values, log_prob, (out, std)

    @torch.no_grad()
    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.value_head(self.trunk(obs))


def env_actions(model: ActorCritic, actions: torch.Tensor) -> np.ndarray:
    return actions[:, 0].long().numpy() if model.discrete else actions.numpy()


def as_obs(obs: Any) -> torch.Tensor:
    return torch.from_numpy(np.asarray(obs, dtype=np.float32))


# ------------------------------------------------------------------------------ contenders
def make_floor(env: gym.vector.VectorEnv, model: ActorCritic, t: int) -> Callable[[], None]:
    obs = [env.reset(seed=SEED)[0]]

    def run() -> None:
        o = obs[0]
        for _ in range(t):
            actions = model.act(as_obs(o))[0]
            o = env.step(env_actions(model, actions))[0]
        obs[0] = o

    return run


class _RslCritic:
    """What ``PPO.process_env_step`` / ``PPO.compute_returns`` ask of rsl_rl's actor/critic."""

    def __init__(self, model: ActorCritic):
        self.model = model

    def __call__(self, obs: TensorDict) -> torch.Tensor:
        return self.model.value(obs["policy"])

    def get_hidden_state(self) -> None:
        return None

    def reset(self, dones: object = None, hidden_state: object = None) -> None:
        return None


def make_rsl(env: gym.vector.VectorEnv, model: ActorCritic, t: int) -> Callable[[], None]:
    n = env.num_envs
    obs_dim = flat_dim(env.single_observation_space)
    act_shape = [1] if model.discrete else [flat_dim(env.single_action_space)]
    example = TensorDict({"policy": torch.zeros(n, obs_dim)}, batch_size=[n])
    critic = _RslCritic(model)
    alg: Any = SimpleNamespace(
        storage=RslStorage("rl", n, t, example, act_shape),
        transition=RslStorage.Transition(),
        gamma=GAMMA,
        lam=LAM,
        device="cpu",
        rnd=None,
        actor=critic,
        critic=critic,
        normalize_advantage_per_mini_batch=False,
    )
    first = env.reset(seed=SEED)[0]
    obs = [TensorDict({"policy": as_obs(first)}, batch_size=[n])]
    # With next-step autoreset the step after an ending resets that sub-env (the env ignores
    # the action, the reward is 0), and rsl_rl's storage keeps it as a transition: counted.
    counts = {"stored": 0, "reset_steps": 0}
    ended = [np.zeros(n, bool)]

    def run() -> None:
        alg.storage.clear()
        o = obs[0]
        for _ in range(t):
            counts["stored"] += n
            counts["reset_steps"] += int(np.count_nonzero(ended[0]))
            # What PPO.act records, from our model.
            tr = alg.transition
            tr.hidden_states = (None, None)
            actions, tr.values, tr.actions_log_prob, tr.distribution_params = model.act(o["policy"])
            tr.actions, tr.observations = actions, o
            np_obs, rewards, terminated, truncated, _ = env.step(env_actions(model, actions))
            o = TensorDict({"policy": as_obs(np_obs)}, batch_size=[n])
            dones = torch.from_numpy(terminated | truncated).float()
            extras = {"time_outs": torch.from_numpy(truncated)}
            rew = torch.from_numpy(np.asarray(rewards, np.float32))
            PPO.process_env_step(alg, o, rew, dones, extras)
            ended[0] = terminated | truncated
        PPO.compute_returns(alg, o)
        obs[0] = o

    run.counts = counts  # type: ignore[attr-defined]
    return run


class RunnerPolicy:
    """The runner-facing view of the model: numpy observations in, numpy actions + extras out."""

    def __init__(self, model: ActorCritic):
        self.model = model
        self.dist_keys = ("logits",) if model.discrete else ("mean", "std")

    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        actions, values, log_prob, params = self.model.act(as_obs(obs))
        extras = {"vf_preds": values[:, 0].numpy(), "action_logp": log_prob.numpy()}
        extras.update({k: p.numpy() for k, p in zip(self.dist_keys, params)})
        return env_actions(self.model, actions), extras

    def value_fn(self, obs: np.ndarray) -> torch.Tensor:
        return self.model.value(as_obs(obs))[:, 0]


def episodes_rollout(runner: EnvRunner, policy: RunnerPolicy, t: int, storage: Any = None) -> Any:
    chunks = runner.sample(t)
    keys = ColumnKeys(distribution=policy.dist_keys)
    rollout = episodes_to_rollout(
        chunks, gamma=GAMMA, value_fn=policy.value_fn, keys=keys, storage=storage
    )
    rollout.storage.compute_returns(rollout.last_values, GAMMA, LAM)
    return rollout


def make_episodes(
    env: gym.vector.VectorEnv, model: ActorCritic, t: int, window: str = "transitions"
) -> Callable[[], None]:
    policy = RunnerPolicy(model)
    runner = EnvRunner(env, policy, seed=SEED, window=window)
    # A training loop refills one storage, as rsl_rl's contender clears and refills its own.
    kept: dict[str, Any] = {"storage": None}

    def run() -> None:
        kept["storage"] = episodes_rollout(runner, policy, t, kept["storage"]).storage

    return run


# -------------------------------------------------------------------------------- workloads
@dataclass(frozen=True)
class Workload:
    name: str
    make_env: Callable[[int], gym.vector.VectorEnv]
    n: int
    t: int
    target: float


WORKLOADS = [
    Workload("CartPoleVectorEnv", cartpole, 4096, 24, 1.2),
    Workload("numpy 48-dim env", NumpyBoxVectorEnv, 4096, 24, 1.2),
    Workload("numpy 48-dim env", NumpyBoxVectorEnv, 64, 256, 0.8),
    Workload("numpy 48-dim env", NumpyBoxVectorEnv, 8, 128, 0.5),
]


def make_model(env: gym.vector.VectorEnv) -> ActorCritic:
    space = env.single_action_space
    discrete = isinstance(space, gym.spaces.Discrete)
    act_dim = int(space.n) if isinstance(space, gym.spaces.Discrete) else flat_dim(space)
    torch.manual_seed(SEED)
    return ActorCritic(flat_dim(env.single_observation_space), act_dim, discrete)


def time_workload(
    w: Workload, repeats: int, warmup: int, window: str = "transitions"
) -> tuple[dict[str, float], float]:
    """Median seconds per contender, and the share of rsl_rl's stored transitions that were
    reset steps.

    Each window is timed in a session of its own (floor, rsl_rl, episodes): with both
    runners alive in one session, each one's fresh blocks met the other's memory (page
    faults, huge-page compaction) and the default window measured up to 40% slower.
    """
    model = make_model(w.make_env(1))
    makers = {
        "floor": make_floor,
        "rsl_rl": make_rsl,
        "episodes": functools.partial(make_episodes, window=window),
    }
    fns: dict[str, Callable[[], object]] = {
        name: make(w.make_env(w.n), model, w.t) for name, make in makers.items()
    }
    times = interleaved(fns, repeats=repeats, warmup=warmup)
    counts = fns["rsl_rl"].counts  # type: ignore[attr-defined]
    return times, counts["reset_steps"] / max(counts["stored"], 1)


def data_bytes(storage: Any) -> int:
    tensors = [storage.observations, storage.actions, storage.rewards, storage.dones]
    tensors += [storage.values, storage.actions_log_prob, *storage.distribution_params]
    return sum(x.numel() * x.element_size() for x in tensors)


@dataclass(frozen=True)
class Memory:
    """tracemalloc figures of a run of episodes rollouts, in bytes."""

    filling: int  # the largest peak of the first rollouts
    steady: int  # the largest peak of the later rollouts
    median: int  # the median peak of the later rollouts
    held: int  # what stays allocated between rollouts (env, runner blocks, last chunks)
    data: int  # one rollout's data


def rollout_memory(
    w: Workload, first: int = 3, later: int = 8, window: str = "transitions"
) -> Memory:
    """The peaks tracemalloc sees in ``first + later`` consecutive episodes rollouts.

    The first rollouts and the later ones (a training loop's steady state) are reported
    apart, with what stays allocated between calls: a runner that cached or recycled memory
    across calls would show it there. tracemalloc sees numpy's and Python's allocations, not
    torch's: each rollout refills the previous rollout's storage (as the timed runs and a
    training loop do), so neither window allocates torch memory that would go uncounted.
    """
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        env = w.make_env(w.n)
        policy = RunnerPolicy(make_model(env))
        runner = EnvRunner(env, policy, seed=SEED, window=window)
        rollout = episodes_rollout(runner, policy, w.t)  # warm-up: pending chunks, caches
        peaks = []
        for _ in range(first + later):
            base = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            rollout = episodes_rollout(runner, policy, w.t, rollout.storage)
            peaks.append(tracemalloc.get_traced_memory()[1] - base)
        held = tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()
    steady = peaks[first:]
    return Memory(
        max(peaks[:first]), max(steady), int(np.median(steady)), held, data_bytes(rollout.storage)
    )


def call_growth(
    calls: int = 400, n: int = 4096, t: int = 24, window: str = "transitions"
) -> tuple[dict[int, float], dict[int, int]]:
    """CPU seconds of ``EnvRunner.sample(t)`` alone over a run of calls (48-dim env, a constant
    policy), as medians of the 20 calls ending at call 30, at the middle and at the end
    (those that ran, in order; fewer than 20 calls for the ends before call 20); and the rows
    of the blocks the runner records into at those calls.

    Next-step mode's leftover rows grow like the square root of the number of calls; this
    shows whether a call's cost grows with them, and how much memory they hold.
    """
    env = NumpyBoxVectorEnv(n)
    actions = np.zeros((n, 12), np.float32)

    def policy(obs: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        return actions, {"vf_preds": obs[:, 0], "action_logp": obs[:, 1]}

    runner = EnvRunner(env, policy, seed=SEED, window=window)
    seconds = []
    ends = sorted({end for end in (30, calls // 2, calls) if 1 <= end <= calls})
    rows = {}
    for call in range(1, calls + 1):
        begin = time.process_time()
        chunks = runner.sample(t)
        seconds.append(time.process_time() - begin)
        if call in ends:
            rows[call] = int(chunks.recording.blocks.step_rows)
    return {end: float(np.median(seconds[max(0, end - 20) : end])) for end in ends}, rows


# ------------------------------------------------------------------------------------ report
def main(argv: list[str] | None = None) -> None:
    global HIDDEN
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="1 warm-up, 2 repeats, 1 memory probe")
    ap.add_argument("--repeats", type=positive_int, default=None, help="timed repeats (default 5)")
    ap.add_argument(
        "--growth", action="store_true", help="only: cost of a call over 400 calls (48-dim env)"
    )
    ap.add_argument("--calls", type=positive_int, default=400, help="calls of --growth")
    ap.add_argument(
        "--window", choices=WINDOWS, default="transitions", help="the runner's window for --growth"
    )
    ap.add_argument(
        "--hidden",
        type=non_negative_int,
        default=HIDDEN,
        help=f"width of the policy's two hidden layers (default {HIDDEN}); 0: linear heads only,"
        " a near-free policy that leaves the recording's own cost exposed",
    )
    args = ap.parse_args(argv)
    HIDDEN = args.hidden
    if args.growth:
        medians, rows = call_growth(args.calls, window=args.window)
        print(
            f"EnvRunner(window={args.window!r}).sample(24), 48-dim env, N=4096: CPU ms per "
            "call, medians of 20 calls" + (" (fewer before call 20)" if min(medians) < 20 else "")
        )
        print("  " + ", ".join(f"to call {k}: {v * 1e3:.1f}" for k, v in medians.items()))
        print("rows of the blocks it records into (24 per call; the rest carried over):")
        print("  " + ", ".join(f"at call {k}: {v}" for k, v in rows.items()))
        return
    torch.set_num_threads(1)
    repeats = args.repeats or (2 if args.quick else 5)
    warmup = 1
    start = time.perf_counter()
    where = os.path.dirname(os.path.dirname(os.path.abspath(episodes.__file__)))
    print(
        f"episodes from {where}; repeats={repeats} warmup={warmup} torch threads=1 "
        f"hidden={HIDDEN}\n"
    )
    print(
        "| env | N x T | floor | rsl_rl | episodes | episodes / rsl_rl | target | |"
        " vector steps (own session: floor, rsl_rl, episodes) | vector steps / rsl_rl |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    passed, passed_vector = [], []
    resets, budgets = [], []
    for w in WORKLOADS:
        r, share = time_workload(w, repeats, warmup)
        v, _ = time_workload(w, repeats, warmup, window="vector_steps")
        resets.append((w, share, r["episodes"] / r["rsl_rl"]))
        budgets.append((w, r, v))
        ratio = r["episodes"] / r["rsl_rl"]
        vector = v["episodes"] / v["rsl_rl"]
        passed.append(ratio <= w.target)
        passed_vector.append(vector <= w.target)
        print(
            f"| {w.name} | {w.n} x {w.t} | {r['floor'] * 1e3:.1f} ms | {r['rsl_rl'] * 1e3:.1f} ms"
            f" | {r['episodes'] * 1e3:.1f} ms | {ratio:.2f}x | <= {w.target}x"
            f" | {'PASS' if passed[-1] else 'FAIL'} | {v['floor'] * 1e3:.1f}, "
            f"{v['rsl_rl'] * 1e3:.1f}, {v['episodes'] * 1e3:.1f} ms | {vector:.2f}x"
            f" {'PASS' if passed_vector[-1] else 'FAIL'} |",
            flush=True,
        )
    print(
        "\nreset steps among rsl_rl's stored transitions (next-step autoreset: the env ignored "
        "the action; episodes records none), and episodes / rsl_rl per real transition "
        "(context, not a target):"
    )
    for w, share, ratio in resets:
        print(f"  {w.name} {w.n} x {w.t}: {share:.1%}; {ratio * (1 - share):.2f}x")
    print(
        "\nwhat a target leaves beyond the floor (env.step + policy, which every contender pays),"
        " per vector step (context, not a target):"
    )
    for w, r, v in budgets:
        per_step = 1e6 / w.t
        allowed = (w.target * r["rsl_rl"] - r["floor"]) * per_step
        print(
            f"  {w.name} {w.n} x {w.t}: floor {r['floor'] / r['rsl_rl']:.2f}x of rsl_rl; "
            f"the target leaves {allowed:.0f} us, rsl_rl takes "
            f"{(r['rsl_rl'] - r['floor']) * per_step:.0f} us, episodes "
            f"{(r['episodes'] - r['floor']) * per_step:.0f} us "
            f"(vector steps {(v['episodes'] - v['floor']) * per_step:.0f} us)"
        )
    print(
        "\npeak extra memory of an episodes rollout (tracemalloc; target <= 2x the data): "
        "steady state (largest and median of 8), the first 3 rollouts, held between calls"
    )
    mib = 2**20
    for w in WORKLOADS[1:2] if args.quick else WORKLOADS:
        for window, tally in (("transitions", passed), ("vector_steps", passed_vector)):
            m = rollout_memory(w, window=window)
            ok = m.steady <= 2 * m.data
            tally.append(ok)
            print(
                f"  {w.name} {w.n} x {w.t} ({window}): data {m.data / mib:.2f} MiB; steady "
                f"{m.steady / m.data:.1f}x ({m.median / m.data:.1f}x)  "
                f"{'PASS' if ok else 'FAIL'}; first rollouts {m.filling / m.data:.1f}x; "
                f"held {m.held / mib:.1f} MiB ({m.held / m.data:.1f}x)",
                flush=True,
            )
    print(
        f"\n{sum(passed)}/{len(passed)} targets met (vector steps: "
        f"{sum(passed_vector)}/{len(passed_vector)}) in {time.perf_counter() - start:.0f} s"
    )


if __name__ == "__main__":
    main()
