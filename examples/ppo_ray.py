"""PPO on CartPole-v1 with the env runners on Ray: two remote runners, one local learner.

Run: ``python examples/ppo_ray.py [--seed 0] [--total-steps 200000] [--num-envs 8]
[--num-runners 2]``

The loop of ``examples/ppo_cartpole.py``, with collection moved to a
:class:`episodes.distributed.RunnerGroup`: each runner actor owns a vector env of
``num_envs / num_runners`` CartPoles and a copy of the actor-critic; every iteration the
learner broadcasts its weights once (one ``ray.put``), the runners sample in parallel, their
chunks come back (through shared memory on the driver's node, the object store between nodes)
as one :class:`~episodes.distributed.GroupSample`
(the runners' envs side by side), and :func:`~episodes.converter.episodes_to_rollout` turns
them into the ``[T, N]`` storage as it does local chunks. The runners write what they collect
into one shared dataset themselves (``--save-dir none`` turns that off).

It prints steps/s with its learning curve and ends with ``final_mean_return=<float>``.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from tqdm import tqdm

from episodes.converter import ColumnKeys, episodes_to_rollout

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the shared helpers beside this file
import _ppo_common  # noqa: E402
import ppo_cartpole  # noqa: E402
from _ppo_common import (  # noqa: E402
    ReturnTracker,
    default_save_dir,
    log_iteration,
    make_parser,
    positive_int,
    print_final,
    save_dir_problem,
    seed_everything,
    summary,
)
from ppo_cartpole import ActorCritic, PPOConfig, SamplingPolicy, update  # noqa: E402


def make_env(ctx: Any) -> gym.vector.VectorEnv:
    """The runner's vector env (built on its actor)."""
    return gym.make_vec("CartPole-v1", int(ctx.config["num_envs"]), vectorization_mode="sync")


class RemotePolicy(SamplingPolicy):
    """The sampling policy of a runner actor; the learner's weights arrive as numpy arrays."""

    def set_weights(self, weights: dict[str, np.ndarray]) -> None:
        state = {key: torch.from_numpy(np.array(value)) for key, value in weights.items()}
        self.model.load_state_dict(state)


def make_policy(env: gym.vector.VectorEnv, ctx: Any) -> RemotePolicy:
    """A fresh actor-critic on the actor, seeded per runner (its weights come by broadcast)."""
    torch.set_num_threads(1)
    torch.manual_seed(0 if ctx.seed is None else ctx.seed)
    obs_dim = int(np.prod(env.single_observation_space.shape))
    model = ActorCritic(obs_dim, int(env.single_action_space.n), int(ctx.config["hidden"]))
    return RemotePolicy(model, torch.device("cpu"))


def numpy_weights(model: torch.nn.Module) -> dict[str, np.ndarray]:
    """The state dict as numpy arrays: they travel through the object store without pickling."""
    return {key: value.detach().cpu().numpy() for key, value in model.state_dict().items()}


def cartpole_spaces() -> tuple[Any, Any]:
    """The observation and action space of one CartPole, the runners' sub-env."""
    probe = gym.make("CartPole-v1")
    try:
        return probe.observation_space, probe.action_space
    finally:
        probe.close()


def _ship_examples_by_value() -> None:
    # The runner actors cannot import the examples (not a package): send their code along.
    from ray import cloudpickle

    for module in (sys.modules[__name__], ppo_cartpole, _ppo_common):
        if module.__name__ != "__main__":
            cloudpickle.register_pickle_by_value(module)


def train(
    seed: int = 0,
    total_steps: int = 200_000,
    *,
    num_envs: int = 8,
    num_runners: int = 2,
    device: str = "cpu",
    save_dir: str | None = None,
    stop_at_return: float | None = None,
    config: PPOConfig | None = None,
    log_every: int = 5,
    progress: bool = True,
    threads: int = 1,
) -> dict[str, Any]:
    """Trains PPO with remote runners; returns what ``ppo_cartpole.train`` returns."""
    import ray

    from episodes.distributed import RunnerGroup

    if num_runners < 1:
        raise ValueError(f"num_runners must be >= 1, got {num_runners}")
    if num_envs % num_runners:
        raise ValueError(f"num_envs ({num_envs}) must split evenly over {num_runners} runners")
    cfg = config or PPOConfig()
    spaces = cartpole_spaces()
    write_to = save_dir if save_dir is not None and save_dir.lower() != "none" else None
    if write_to is not None:  # on the driver, before any actor: a runner would fail remotely
        problem = save_dir_problem(write_to, "CartPole-v1", spaces, v2_only=True)
        if problem:
            raise ValueError(f"save_dir {write_to}: {problem}")
    seed_everything(seed, threads)
    if not ray.is_initialized():
        ray.init(num_cpus=max(2, num_runners), include_dashboard=False, log_to_driver=False)
    _ship_examples_by_value()
    dev = torch.device(device)
    obs_dim = int(np.prod(spaces[0].shape))
    model = ActorCritic(obs_dim, int(spaces[1].n), cfg.hidden).to(dev)
    optimizer = torch.optim.Adam(model.parameters(), lr=cfg.learning_rate, eps=1e-5)
    learner_policy = SamplingPolicy(model, dev)  # the bootstrap values, on the learner
    group = RunnerGroup(
        make_env,
        make_policy,
        num_runners=num_runners,
        seed=seed,
        config={"num_envs": num_envs // num_runners, "hidden": cfg.hidden},
        write_to=write_to,
    )
    keys = ColumnKeys(values="vf_preds", log_probs="action_logp", distribution=("logits",))
    steps_per_iter = num_envs * cfg.num_steps
    num_iters = max(1, -(-total_steps // steps_per_iter))
    tracker = ReturnTracker()
    history: list[dict[str, Any]] = []
    shapes: dict[str, tuple[int, ...]] = {}
    env_steps = 0
    start = time.perf_counter()
    bar = tqdm(total=num_iters * steps_per_iter, unit="step", disable=not progress)
    try:
        for iteration in range(1, num_iters + 1):
            for group_ in optimizer.param_groups:
                group_["lr"] = cfg.learning_rate * (1 - (iteration - 1) / num_iters)
            gathered = group.sample(cfg.num_steps, weights=numpy_weights(model))
            if gathered.lost:  # a runner died: train on what arrived, next round is whole
                tqdm.write(f"lost {len(gathered.lost)} runner samples: {gathered.lost[0].error}")
            if not gathered.samples:
                continue
            rollout = episodes_to_rollout(
                gathered, gamma=cfg.gamma, value_fn=learner_policy.value_fn, keys=keys, device=dev
            )
            storage = rollout.storage
            storage.compute_returns(rollout.last_values, cfg.gamma, cfg.lam)
            if not shapes:
                shapes = {
                    "observations": tuple(storage.observations.shape),
                    "actions": tuple(storage.actions.shape),
                    "returns": tuple(storage.returns.shape),
                }
            stats = update(model, optimizer, storage, cfg)
            steps = gathered.env_steps
            env_steps += steps
            tracker.add(gathered.metrics["episode_returns"])
            rate = env_steps / (time.perf_counter() - start)
            history.append(
                {"env_steps": env_steps, "mean_return": tracker.mean, "steps_per_s": rate, **stats}
            )
            log_iteration(
                bar,
                tracker,
                iteration=iteration,
                num_iters=num_iters,
                log_every=log_every,
                env_steps=env_steps,
                steps=steps,
                postfix=dict(kl=f"{stats['approx_kl']:.4f}"),
                curve_extra=f"  kl {stats['approx_kl']:.4f}  {rate:5.0f} steps/s",
            )
            if stop_at_return is not None and tracker.mean >= stop_at_return:
                tqdm.write(f"reached {tracker.mean:.1f} >= {stop_at_return}: stopping early")
                break
    finally:
        bar.close()
        metrics = group.get_metrics()
        group.stop()
    out = summary(
        tracker,
        env_steps=env_steps,
        start=start,
        history=history,
        shapes=shapes,
        config=asdict(cfg),
    )
    out["lost_samples"] = metrics["num_lost_samples"]
    return out


def main(argv: list[str] | None = None) -> None:
    parser: argparse.ArgumentParser = make_parser(
        __doc__.splitlines()[0],
        total_steps=200_000,
        num_envs=8,
        save_dir_help="the runners save every collected episode chunk there (a new or empty "
        "directory gets a format v2 dataset; an existing format v2 dataset of CartPole-v1 is "
        "appended to, a format v1 one is refused); default: a fresh folder under out/; "
        "'none' disables saving",
    )
    parser.add_argument("--num-runners", type=positive_int, default=2, help="remote runner actors")
    args = parser.parse_args(argv)
    if args.num_envs % args.num_runners:
        parser.error(
            f"--num-envs ({args.num_envs}) must split evenly over --num-runners "
            f"({args.num_runners})"
        )
    save_dir = args.save_dir or default_save_dir("ppo_ray", args.seed)
    if save_dir.lower() != "none":  # before Ray starts (train checks again, for its callers)
        problem = save_dir_problem(save_dir, "CartPole-v1", cartpole_spaces(), v2_only=True)
        if problem:
            parser.error(f"argument --save-dir: {save_dir}: {problem}")
    result = train(
        args.seed,
        args.total_steps,
        num_envs=args.num_envs,
        num_runners=args.num_runners,
        device=args.device,
        save_dir=save_dir,
        stop_at_return=args.stop_at_return,
        log_every=args.log_every,
        progress=not args.no_progress,
        threads=args.threads,
    )
    if save_dir.lower() != "none":
        print(f"the runners saved the collected episodes to {save_dir}")
    seconds = result["wall_s"]
    print(
        f"{result['env_steps']} env steps in {seconds:.1f} s "
        f"({result['env_steps'] / seconds:.0f} steps/s)"
    )
    print_final(result["final_mean_return"], result["env_steps"])


if __name__ == "__main__":
    main()
