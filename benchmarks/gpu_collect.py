"""Collection from a torch-tensor vector env on its device: runner -> converter -> GAE.

    .venv/bin/python benchmarks/gpu_collect.py [--device cuda] [--sizes 4096 16384 65536]

Called by ``benchmarks/gpu.py`` on a CUDA device; runs on the CPU too (small sizes, a smoke
check). ``TorchCartPole`` (gymnasium's CartPole-v1 dynamics as batched tensors) steps N sub-envs
on the device with a small actor-critic; three contenders, interleaved, medians, T=24:

* floor: ``env.step`` + the policy only;
* rsl_rl-style: the same loop writing one ``Transition`` per vector step into a
  ``RolloutStorage`` (rsl_rl's pattern, our storage), its time-out bootstrap, then GAE;
* episodes: ``EnvRunner.sample(T)`` -> ``episodes_to_rollout`` (into a reused storage) ->
  ``compute_returns``.

It also counts the host syncs of a ``sample()`` call's steps (CUDA's sync debug mode).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import device_name, positive_int  # noqa: E402

from episodes.converter import ColumnKeys, episodes_to_rollout  # noqa: E402
from episodes.envs.torch_cartpole import TorchCartPole  # noqa: E402
from episodes.rollout import RolloutStorage, Transition  # noqa: E402
from episodes.runner import EnvRunner  # noqa: E402

T, GAMMA, LAM = 24, 0.99, 0.95


def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class ActorCritic(nn.Module):
    """A 2x64 MLP actor (2 logits) and critic over CartPole's 4 observations."""

    def __init__(self) -> None:
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 2))
        self.critic = nn.Sequential(nn.Linear(4, 64), nn.Tanh(), nn.Linear(64, 1))

    @torch.no_grad()
    def act(self, obs: torch.Tensor) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        logits = self.actor(obs)
        dist = torch.distributions.Categorical(logits=logits, validate_args=False)
        actions = dist.sample()
        extras = {
            "vf_preds": self.critic(obs)[:, 0],
            "action_logp": dist.log_prob(actions),
            "logits": logits,
        }
        return actions, extras

    @torch.no_grad()
    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.critic(obs)[:, 0]


def make_floor(env: TorchCartPole, model: ActorCritic) -> Callable[[], None]:
    obs = env.reset(seed=0)[0]

    def run() -> None:
        nonlocal obs
        for _ in range(T):
            actions, _ = model.act(obs)
            obs = env.step(actions)[0]

    return run


def make_rsl_style(env: TorchCartPole, model: ActorCritic) -> Callable[[], None]:
    n, device = env.num_envs, env.device
    storage = RolloutStorage("rl", n, T, (4,), (1,), device, distribution_params=((2,),))
    obs = env.reset(seed=0)[0]

    def run() -> None:
        nonlocal obs
        storage.clear()
        for _ in range(T):
            actions, extras = model.act(obs)
            values = extras["vf_preds"][:, None]
            step = Transition(
                observations=obs,
                actions=actions[:, None].float(),
                values=values,
                actions_log_prob=extras["action_logp"],
                distribution_params=(extras["logits"],),
            )
            obs, rewards, terminated, truncated, _ = env.step(actions)
            # rsl_rl's time-out bootstrap: V(s_t) of the step that was cut off.
            step.rewards = rewards + GAMMA * values[:, 0] * truncated
            step.dones = terminated | truncated
            storage.add_transition(step)
        storage.compute_returns(model.value(obs)[:, None], GAMMA, LAM)

    return run


def make_episodes(
    env: TorchCartPole, model: ActorCritic, window: str = "transitions"
) -> tuple[Callable[[], None], EnvRunner]:
    runner = EnvRunner(env, model.act, seed=0, len_lookback_buffer=0, window=window)
    keys = ColumnKeys(distribution=("logits",))
    storage: list[Any] = [None]

    def run() -> None:
        chunks = runner.sample(T)
        rollout = episodes_to_rollout(
            chunks,
            gamma=GAMMA,
            value_fn=model.value,
            keys=keys,
            device=env.device,
            storage=storage[0],
        )
        storage[0] = rollout.storage
        rollout.storage.compute_returns(rollout.last_values, GAMMA, LAM)

    return run, runner


def count_step_syncs(runner: EnvRunner, device: torch.device) -> int | None:
    """Host syncs while one ``sample(T)`` call steps (its end-of-call bookkeeping excluded)."""
    if device.type != "cuda":
        return None
    recorder = runner._recorder  # noqa: SLF001 - the benchmark watches the recorder's steps
    recorder.begin(T, runner._obs)  # noqa: SLF001
    torch.cuda.set_sync_debug_mode("warn")
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            while not recorder.full():
                runner._step()  # noqa: SLF001
    finally:
        torch.cuda.set_sync_debug_mode(0)
    recorder.finish()
    return sum("synchroniz" in str(w.message) for w in caught)


def interleaved(fns: dict[str, Callable[[], None]], device: torch.device, repeats: int) -> dict:
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for fn in fns.values():
        fn()  # warm-up: allocation, kernels
    for _ in range(repeats):
        for name, fn in fns.items():
            synchronize(device)
            start = time.perf_counter()
            fn()
            synchronize(device)
            samples[name].append(time.perf_counter() - start)
    return {name: statistics.median(values) for name, values in samples.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--device",
        type=device_name,
        default="cuda" if torch.cuda.is_available() else "cpu",
        help="torch device: cpu, cuda[:i] or mps (default: cuda where there is one)",
    )
    parser.add_argument("--sizes", type=positive_int, nargs="+", default=[4096, 16384, 65536])
    parser.add_argument("--repeats", type=positive_int, default=10)
    args = parser.parse_args(argv)
    device = torch.device(args.device)
    if device.type == "cpu":
        torch.set_num_threads(1)  # as the other benchmarks: one thread, comparable ratios
    print(f"collection on {device}, T={T}, TorchCartPole, 2x64 actor-critic; medians ms")
    print(
        f"{'mode':<10} {'N':>6} {'floor':>8} {'rsl-style':>10} {'episodes':>9} "
        f"{'eps/rsl':>8} {'eps/floor':>9} {'Msteps/s':>9} {'step syncs':>10}"
    )
    # "NextStep/v": the runner's vector-steps window (T vector steps, reset steps masked).
    for label, mode, window in (
        ("SameStep", "SameStep", "transitions"),
        ("NextStep", "NextStep", "transitions"),
        ("NextStep/v", "NextStep", "vector_steps"),
    ):
        for n in args.sizes:
            torch.manual_seed(0)
            model = ActorCritic().to(device)
            envs = [TorchCartPole(n, device=device, autoreset_mode=mode) for _ in range(3)]
            episodes, runner = make_episodes(envs[2], model, window)
            fns = {
                "floor": make_floor(envs[0], model),
                "rsl": make_rsl_style(envs[1], model),
                "episodes": episodes,
            }
            ms = {k: v * 1e3 for k, v in interleaved(fns, device, args.repeats).items()}
            syncs = count_step_syncs(runner, device)
            print(
                f"{label:<10} {n:>6} {ms['floor']:8.2f} {ms['rsl']:10.2f} {ms['episodes']:9.2f} "
                f"{ms['episodes'] / ms['rsl']:7.2f}x {ms['episodes'] / ms['floor']:8.2f}x "
                f"{T * n / ms['episodes'] / 1e3:9.2f} {'-' if syncs is None else syncs:>10}"
            )
            del envs, fns, runner, model
            if device.type == "cuda":
                torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
