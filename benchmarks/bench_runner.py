"""Env runners: ours vs RLlib 2.60's ``SingleAgentEnvRunner`` and TorchRL's collector, CPU.

Run with the reference venv (needs ray[rllib]; TorchRL is compared where it imports):

    .venv-ref/bin/python benchmarks/bench_runner.py [--quick] [--repeats 5] [--no-torchrl]

Gymnasium's sync CartPole-v1 vector env, N sub-envs, T steps per env, one small torch MLP
shared by every contender (sampled actions, their log-probabilities and logits kept), torch at
1 thread, contenders interleaved in one process, medians of ``--repeats``:

- floor: ``env.step`` + the policy, T vector steps, nothing recorded;
- ours: ``EnvRunner.sample(T)`` (its chunks are built lazily, when first read);
- built: the same, then every chunk touched (``get_observations(-1)``), so all are built;
- rllib: ``SingleAgentEnvRunner`` built locally (``num_env_runners=0``, no ray cluster),
  ``sample(num_timesteps=N * T)``: the same total env steps, episodes numpy'd;
- torchrl: ``Collector`` over ``GymWrapper`` of the same vector env in same-step autoreset mode
  (TorchRL needs it), ``frames_per_batch=N * T``, a ``ProbabilisticActor`` on the same net.

Ratios are over the floor, (contender - floor) / (reference - floor): the cost each runner adds
to stepping the env and running the policy. ``--quick`` runs the small sizes only.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import warnings
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import interleaved, positive_int  # noqa: E402

from episodes.runner import EnvRunner  # noqa: E402

SIZES = [(n, t) for n in (1, 8, 64) for t in (64, 512)]
QUICK_SIZES = [(1, 64), (8, 64)]


def make_net() -> torch.nn.Module:
    torch.manual_seed(0)
    return torch.nn.Sequential(
        torch.nn.Linear(4, 32),
        torch.nn.ELU(),
        torch.nn.Linear(32, 32),
        torch.nn.ELU(),
        torch.nn.Linear(32, 2),
    )


def vector_env(n: int, same_step: bool = False) -> gym.vector.VectorEnv:
    kwargs: dict[str, Any] = {}
    if same_step:
        kwargs["vector_kwargs"] = {"autoreset_mode": gym.vector.AutoresetMode.SAME_STEP}
    return gym.make_vec("CartPole-v1", n, vectorization_mode="sync", **kwargs)


class SampledPolicy:
    """Our policy (and the floor's): sampled actions, their log-probabilities and logits."""

    def __init__(self, net: torch.nn.Module) -> None:
        self.net = net

    @torch.no_grad()
    def __call__(self, obs: Any) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        logits = self.net(torch.from_numpy(np.asarray(obs, np.float32)))
        logp = torch.log_softmax(logits, -1)
        action = torch.multinomial(logp.exp(), 1)
        return action[:, 0].numpy(), {
            "action_logp": logp.gather(-1, action)[:, 0].numpy(),
            "action_dist_inputs": logits.numpy(),
        }


def rllib_sampler(net: torch.nn.Module, n: int, t: int) -> Callable[[], object]:
    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.core.columns import Columns
    from ray.rllib.core.rl_module.rl_module import RLModuleSpec
    from ray.rllib.core.rl_module.torch import TorchRLModule
    from ray.rllib.env.single_agent_env_runner import SingleAgentEnvRunner

    class Shared(TorchRLModule):
        def setup(self) -> None:
            self.net = net

        def _forward(self, batch: dict, **kwargs: Any) -> dict:
            return {Columns.ACTION_DIST_INPUTS: self.net(batch[Columns.OBS])}

    config = (
        PPOConfig()
        .environment("CartPole-v1")
        .env_runners(num_envs_per_env_runner=n, num_env_runners=0)
        .rl_module(rl_module_spec=RLModuleSpec(module_class=Shared))
        .debugging(seed=0)
    )
    runner = SingleAgentEnvRunner(config=config)
    return lambda: runner.sample(num_timesteps=n * t)


def torchrl_sampler(net: torch.nn.Module, n: int, t: int) -> Callable[[], object] | None:
    try:
        import torchrl  # noqa: F401  its import puts a "once" filter for its notices first

        warnings.simplefilter("ignore")  # called inside catch_warnings: put back after
        import torch.distributions as dist
        import torchrl.collectors as collectors
        from tensordict.nn import TensorDictModule
        from torchrl.envs import GymWrapper
        from torchrl.modules import ProbabilisticActor
    except Exception as err:  # not installed, or not importable with these versions
        print(f"TorchRL left out: {type(err).__name__}: {err}")
        return None
    logging.getLogger("torchrl").setLevel(logging.WARNING)  # set on its import
    collector_class = getattr(collectors, "Collector", None) or collectors.SyncDataCollector
    env = GymWrapper(vector_env(n, same_step=True), categorical_action_encoding=True)
    module = TensorDictModule(net, in_keys=["observation"], out_keys=["logits"])
    actor = ProbabilisticActor(
        module,
        in_keys=["logits"],
        out_keys=["action"],
        distribution_class=dist.Categorical,
        return_log_prob=True,
        spec=env.action_spec,
    )
    batches = iter(collector_class(env, actor, frames_per_batch=n * t, total_frames=-1))
    return lambda: next(batches)


def contenders(net: torch.nn.Module, n: int, t: int, torchrl: bool) -> dict[str, Any]:
    policy = SampledPolicy(net)
    floor_env = vector_env(n)
    state = {"obs": floor_env.reset(seed=0)[0]}

    def floor() -> None:
        obs = state["obs"]
        for _ in range(t):
            obs = floor_env.step(policy(obs)[0])[0]
        state["obs"] = obs

    ours = EnvRunner(vector_env(n), policy, seed=0)
    built = EnvRunner(vector_env(n), policy, seed=0)

    def ours_built() -> None:
        for chunk in list(built.sample(t)):
            chunk.get_observations(-1)

    fns: dict[str, Any] = {
        "floor": floor,
        "ours": lambda: ours.sample(t),
        "built": ours_built,
        "rllib": rllib_sampler(net, n, t),
    }
    if torchrl:
        with warnings.catch_warnings():  # its imports' deprecation notices
            sampler = torchrl_sampler(net, n, t)
        if sampler is not None:
            fns["torchrl"] = sampler
    return fns


def over(med: dict[str, float], name: str, ref: str) -> str:
    if name not in med or ref not in med or med[ref] <= med["floor"]:
        return "-"
    return f"{(med[name] - med['floor']) / (med[ref] - med['floor']):.3f}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help=f"only N x T in {QUICK_SIZES}")
    ap.add_argument("--repeats", type=positive_int, default=5)
    ap.add_argument("--no-torchrl", action="store_true", help="leave TorchRL's collector out")
    args = ap.parse_args()
    try:
        import ray.rllib  # noqa: F401
    except ImportError:
        sys.exit("ray[rllib] is not installed: run with .venv-ref/bin/python")
    for category in (DeprecationWarning, FutureWarning):  # the references' notices
        warnings.filterwarnings("ignore", category=category)
    logging.getLogger("ray").setLevel(logging.ERROR)
    torch.set_num_threads(1)
    net = make_net()
    names = ["floor", "ours", "built", "rllib", "torchrl"]
    rows = []
    for n, t in QUICK_SIZES if args.quick else SIZES:
        med = interleaved(contenders(net, n, t, not args.no_torchrl), args.repeats)
        rows.append((n, t, med))
        print(f"N={n} T={t}: " + " ".join(f"{k}={v * 1e3:.1f}ms" for k, v in med.items()))
    print(
        f"\ntorch {torch.__version__}, threads {torch.get_num_threads()}, CartPole-v1 sync "
        f"vector env; medians of {args.repeats} interleaved repeats, ms per call; "
        "ratios over the floor, (x - floor) / (reference - floor)\n"
    )
    print(
        "| N x T | " + " | ".join(names) + " | ours / rllib | built / rllib "
        "| ours / torchrl | built / torchrl |"
    )
    print("|---" * (len(names) + 5) + "|")
    for n, t, med in rows:
        times = [f"{med[k] * 1e3:.1f}" if k in med else "-" for k in names]
        ratios = [over(med, a, b) for b in ("rllib", "torchrl") for a in ("ours", "built")]
        print(f"| {n} x {t} | " + " | ".join(times + ratios) + " |")


if __name__ == "__main__":
    main()
