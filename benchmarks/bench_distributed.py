"""Issue #15's three targets for ``episodes.distributed`` (plus one figure), on a local Ray.

Run: ``.venv/bin/python benchmarks/bench_distributed.py [--quick] [--repeats 5]``

1. Sampling: a :class:`RunnerGroup` of 2 runners (CartPole, N=8 each, a small torch MLP
   policy at 1 thread) vs one local ``EnvRunner`` of the same kind, in env steps/s of
   ``sample(T)`` (the group's figure includes the transport back to the caller). Target: the
   group >= 1.6x the local runner.
2. Transport: 2 runners each hold a sample of 500k steps of 48-dim float32 observations (a
   numpy vector env of 10 never-ending sub-envs, 50k steps); the time to gather both samples
   into the caller (chunks still lazy) through shared memory, the group's path on one node,
   vs the floors: one ``np.copyto`` of the same bytes (every array of the samples as they
   travel: observations, actions, rewards, flags) into warm memory, of the observations alone,
   and one copy into fresh memory. Also reported: the same gather through Ray's object store (the
   path between nodes) and Ray returning plain arrays of that size, and gather + building
   every chunk + reading every observation once. Target: gather <= 1.5x the memcpy floor.
3. Conversion (no target): ``episodes_to_rollout`` of a gathered group sample (2 runners x 64
   CartPoles x 128 steps) through the per-runner block fast path vs the general path.
4. Ray Data: a 1M-step format v2 dataset (48-dim float32 observations, 1000-step episodes)
   read as a ``ray.data.Dataset`` of steps (``read_steps(...).materialize()``) vs our local
   reader producing the same step columns (``episodes.io.read_episodes`` + ``step_columns``),
   in steps/s. Target: Ray Data within 2x of the local reader.

Contenders of each workload run interleaved in this process; medians of the repeats, ratios.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _timing import interleaved, positive_int  # noqa: E402

OBS_DIM = 48


# ------------------------------------------------------------------------------ workloads
class MLPPolicy:
    """A small torch MLP: obs -> logits and value (what a PPO runner evaluates per step)."""

    def __init__(self, obs_dim: int, num_actions: int, seed: int | None):
        torch.set_num_threads(1)
        torch.manual_seed(0 if seed is None else seed)
        self.net = torch.nn.Sequential(
            torch.nn.Linear(obs_dim, 64), torch.nn.Tanh(), torch.nn.Linear(64, num_actions + 1)
        )

    @torch.no_grad()
    def __call__(self, obs: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        out = self.net(torch.as_tensor(obs, dtype=torch.float32))
        dist = torch.distributions.Categorical(logits=out[:, :-1])
        actions = dist.sample()
        return actions.numpy(), {
            "action_logp": dist.log_prob(actions).numpy(),
            "vf_preds": out[:, -1].numpy(),
        }


def cartpole_env(ctx: Any) -> gym.vector.VectorEnv:
    return gym.make_vec("CartPole-v1", int(ctx.config["num_envs"]), vectorization_mode="sync")


def mlp_policy(env: gym.vector.VectorEnv, ctx: Any) -> MLPPolicy:
    return MLPPolicy(int(np.prod(env.single_observation_space.shape)), 2, ctx.seed)


class WideVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` never-ending sub-envs with 48-dim float32 observations, all numpy."""

    metadata = {"autoreset_mode": gym.vector.AutoresetMode.NEXT_STEP}

    def __init__(self, num_envs: int):
        self.num_envs = num_envs
        self.single_observation_space = gym.spaces.Box(-1, 1, (OBS_DIM,), np.float32)
        self.single_action_space = gym.spaces.Discrete(2)
        self.observation_space = gym.vector.utils.batch_space(
            self.single_observation_space, num_envs
        )
        self.action_space = gym.spaces.MultiDiscrete([2] * num_envs)
        self._obs = np.zeros((num_envs, OBS_DIM), np.float32)
        self._t = 0

    def reset(self, *, seed: int | None = None, options: Any = None) -> Any:
        self._t = 0
        return self._obs.copy(), {}

    def step(self, actions: Any) -> Any:
        self._t += 1
        self._obs[:, 0] = self._t
        n = self.num_envs
        return self._obs.copy(), np.ones(n), np.zeros(n, bool), np.zeros(n, bool), {}


def wide_env(ctx: Any) -> gym.vector.VectorEnv:
    return WideVectorEnv(int(ctx.config["num_envs"]))


def zero_policy(env: gym.vector.VectorEnv, ctx: Any) -> Any:
    zeros = np.zeros(env.num_envs, np.int64)
    return lambda obs: (zeros, {})


def keep_sample(num_steps: int) -> Any:
    def keep(runner: Any, ctx: Any) -> int:
        runner.kept_sample = runner.sample(num_steps)
        return len(runner.kept_sample)

    return keep


def kept_sample(runner: Any, ctx: Any) -> Any:
    return runner.kept_sample


# ----------------------------------------------------------------------------- benchmarks
def bench_sampling(repeats: int, num_steps: int) -> dict[str, float]:
    from episodes.distributed import RunnerContext, RunnerGroup, build_runner

    config = {"num_envs": 8}
    local = build_runner(
        cartpole_env, mlp_policy, RunnerContext.create(seed=0, index=0, config=config)
    )
    group = RunnerGroup(cartpole_env, mlp_policy, num_runners=2, seed=0, config=config)
    try:
        times = interleaved(
            {"local": lambda: local.sample(num_steps), "group": lambda: group.sample(num_steps)},
            repeats,
        )
    finally:
        group.stop()
    local_rate = 8 * num_steps / times["local"]
    group_rate = 2 * 8 * num_steps / times["group"]
    return {
        "local_steps_per_s": local_rate,
        "group_steps_per_s": group_rate,
        "ratio": group_rate / local_rate,
    }


def keep_raw(nbytes: int) -> Any:
    def keep(runner: Any, ctx: Any) -> int:
        runner.kept_raw = np.ones(nbytes // 4, np.float32)
        return nbytes

    return keep


def kept_raw(runner: Any, ctx: Any) -> Any:
    return runner.kept_raw


def sample_bytes(runner: Any, ctx: Any) -> int:
    """Bytes of the kept sample's arrays as they travel (pickle protocol 5 buffers)."""
    import pickle

    buffers: list[pickle.PickleBuffer] = []
    pickle.dumps(runner.kept_sample, protocol=5, buffer_callback=buffers.append)
    return sum(buffer.raw().nbytes for buffer in buffers)


def bench_transport(repeats: int, total_steps: int) -> dict[str, float]:
    from episodes.distributed import RunnerGroup

    num_envs = 10  # 10 long chunks per runner: the bytes dominate, not the chunk count
    num_steps = total_steps // (2 * num_envs)
    # Two groups side by side (half a CPU per actor, so both fit on 2 cores): one hands
    # samples over through shared memory (the default on one node), one through Ray's object
    # store (what runners on other nodes use).
    groups = {
        name: RunnerGroup(
            wide_env,
            zero_policy,
            num_runners=2,
            config={"num_envs": num_envs},
            num_cpus_per_runner=0.5,
            shared_memory=shared,
        )
        for name, shared in (("shm", True), ("store", False))
    }
    try:
        for group in groups.values():
            assert group.foreach_runner(keep_sample(num_steps)) == [num_envs, num_envs]
        nbytes = 2 * num_envs * num_steps * OBS_DIM * 4  # the observations alone
        payload = sum(groups["shm"].foreach_runner(sample_bytes))  # every column
        groups["store"].foreach_runner(keep_raw(nbytes // 2))
        src = np.ones(payload // 4, np.float32)
        dst = np.empty_like(src)
        obs_src, obs_dst = src[: nbytes // 4], dst[: nbytes // 4]
        checksum: list[float] = []

        def gather(group: Any) -> Callable[[], None]:
            def run() -> None:
                # The transport: both samples in this process (their blocks mapped, chunks
                # lazy); dropped afterwards, as a training loop drops the previous sample.
                samples = group.foreach_runner(kept_sample)
                checksum.append(float(len(samples)))

            return run

        def gather_build() -> None:
            # ... then every chunk built and every observation read once.
            total = 0.0
            for chunks in groups["shm"].foreach_runner(kept_sample):
                for chunk in chunks:
                    total += float(chunk.get_observations(slice(0, len(chunk)))[:, 0].sum())
            checksum.append(total)

        def ray_raw() -> None:
            checksum.append(sum(float(a[0]) for a in groups["store"].foreach_runner(kept_raw)))

        times = interleaved(
            {
                "copy_warm": lambda: np.copyto(dst, src),
                "copy_warm_obs": lambda: np.copyto(obs_dst, obs_src),
                "copy_fresh": lambda: src.copy(),
                "ray_raw": ray_raw,
                "gather": gather(groups["shm"]),
                "gather_store": gather(groups["store"]),
                "gather_build": gather_build,
            },
            repeats,
        )
    finally:
        for group in groups.values():
            group.stop()
    return {
        "obs_mb": nbytes / 1e6,
        "payload_mb": payload / 1e6,
        **{f"{name}_s": value for name, value in times.items()},
        "ratio_warm": times["gather"] / times["copy_warm"],
        "ratio_warm_obs": times["gather"] / times["copy_warm_obs"],
        "ratio_fresh": times["gather"] / times["copy_fresh"],
        "ratio_store_warm": times["gather_store"] / times["copy_warm"],
        "ratio_store_ray_raw": times["gather_store"] / times["ray_raw"],
        "ratio_build_warm": times["gather_build"] / times["copy_warm"],
    }


def write_wide_dataset(path: Path, total_steps: int, length: int = 1000) -> None:
    from episodes import SingleAgentEpisode
    from episodes.io import DatasetWriter

    rng = np.random.default_rng(0)
    with DatasetWriter(path, sync=False) as writer:
        for k in range(total_steps // length):
            writer.write(
                SingleAgentEpisode(
                    f"ep{k:05d}",
                    observations=rng.random((length + 1, OBS_DIM), dtype=np.float32),
                    actions=rng.integers(0, 2, length),
                    rewards=np.ones(length),
                    truncated=True,
                    len_lookback_buffer=0,
                )
            )


def bench_convert(repeats: int, num_envs: int = 64, num_steps: int = 128) -> dict[str, float]:
    """``episodes_to_rollout`` of a fresh gathered group sample: the per-runner block fast path
    vs the general path (which builds every chunk first), alternating, each on its own sample
    (sampling not timed)."""
    from episodes.converter import ColumnKeys, episodes_to_rollout
    from episodes.distributed import RunnerGroup

    keys = ColumnKeys(values="vf_preds", log_probs="action_logp")

    def value_fn(obs: np.ndarray) -> np.ndarray:
        return np.zeros(len(obs))

    group = RunnerGroup(
        cartpole_env, mlp_policy, num_runners=2, seed=0, config={"num_envs": num_envs}
    )
    samples: dict[str, list[float]] = {"fast": [], "general": []}
    try:
        for _ in range(repeats + 1):  # the first round warms up
            for name in samples:
                gathered = group.sample(num_steps)
                start = time.perf_counter()
                chunks = gathered if name == "fast" else list(gathered)
                episodes_to_rollout(chunks, gamma=0.99, value_fn=value_fn, keys=keys)
                samples[name].append(time.perf_counter() - start)
    finally:
        group.stop()
    times = {name: statistics.median(s[1:]) for name, s in samples.items()}
    return {**{f"{k}_s": v for k, v in times.items()}, "ratio": times["fast"] / times["general"]}


def bench_data(repeats: int, total_steps: int) -> dict[str, float]:
    from episodes import io
    from episodes.distributed import read_steps, step_columns

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "wide"
        write_wide_dataset(path, total_steps)
        info = io.dataset_info(path)

        def local() -> None:
            n = sum(len(step_columns(ep)["t"]) for ep in io.read_episodes(path, numpy=True))
            assert n == total_steps

        def ray_data() -> None:
            assert read_steps(path).materialize().count() == total_steps

        times = interleaved({"local": local, "ray_data": ray_data}, repeats)
    return {
        "shards": info.num_shards,
        "local_steps_per_s": total_steps / times["local"],
        "ray_data_steps_per_s": total_steps / times["ray_data"],
        "ratio_local_over_ray": times["ray_data"] / times["local"],
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="smaller workloads, 3 repeats (unless --repeats)"
    )
    parser.add_argument(
        "--repeats",
        type=positive_int,
        default=None,
        help="timed repeats (default 5; 3 with --quick)",
    )
    parser.add_argument(
        "--only", choices=("sampling", "transport", "convert", "data"), default=None
    )
    args = parser.parse_args(argv)
    import ray
    import ray.data

    repeats = args.repeats or (3 if args.quick else 5)
    steps = 200_000 if args.quick else 1_000_000
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    ray.data.DataContext.get_current().enable_progress_bars = False
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    start = time.perf_counter()
    rows = []
    if args.only in (None, "sampling"):
        s = bench_sampling(repeats, 512 if args.quick else 1024)
        rows.append(
            (
                "sampling (group of 2 / local, env steps/s)",
                s["ratio"],
                ">= 1.6",
                f"local {s['local_steps_per_s']:.0f}/s, group {s['group_steps_per_s']:.0f}/s",
            )
        )
    if args.only in (None, "transport"):
        t = bench_transport(repeats, steps)
        ms = {k: f"{v * 1e3:.1f} ms" for k, v in t.items() if k.endswith("_s")}
        details = (
            f"{t['payload_mb']:.0f} MB of arrays ({t['obs_mb']:.0f} MB obs): gather "
            f"{ms['gather_s']}; copyto into warm memory {ms['copy_warm_s']} (obs alone "
            f"{ms['copy_warm_obs_s']}), into fresh memory {ms['copy_fresh_s']}"
        )
        rows.append(("transport (gather / warm memcpy)", t["ratio_warm"], "<= 1.5", details))
        rows.append(("transport (gather / warm memcpy of obs)", t["ratio_warm_obs"], "-", ""))
        rows.append(("transport (gather / fresh copy)", t["ratio_fresh"], "-", ""))
        rows.append(
            (
                "object store path (gather / warm memcpy)",
                t["ratio_store_warm"],
                "-",
                f"gather {ms['gather_store_s']}; Ray returning plain arrays of the obs size "
                f"{ms['ray_raw_s']}",
            )
        )
        rows.append(("object store path / Ray raw arrays", t["ratio_store_ray_raw"], "-", ""))
        rows.append(
            (
                "gather + build chunks / warm memcpy",
                t["ratio_build_warm"],
                "-",
                f"gather + build chunks + read obs {ms['gather_build_s']}",
            )
        )
    if args.only in (None, "convert"):
        c = bench_convert(repeats)
        rows.append(
            (
                "convert a group sample (fast / general path)",
                c["ratio"],
                "-",
                f"2 runners x 64 CartPoles x 128 steps: {c['fast_s'] * 1e3:.1f} ms vs "
                f"{c['general_s'] * 1e3:.1f} ms (chunks built and converted)",
            )
        )
    if args.only in (None, "data"):
        d = bench_data(repeats, steps)
        rows.append(
            (
                "Ray Data read (time / local reader)",
                d["ratio_local_over_ray"],
                "<= 2",
                f"{d['shards']} shards: local {d['local_steps_per_s']:.0f} steps/s, "
                f"ray {d['ray_data_steps_per_s']:.0f} steps/s",
            )
        )
    ray.shutdown()
    print(f"\n{'workload':46s} {'ratio':>7s}  {'target':8s} details")
    for name, ratio, target, details in rows:
        print(f"{name:46s} {ratio:7.2f}  {target:8s} {details}")
    print(
        f"(medians of {repeats} repeats, {time.perf_counter() - start:.0f} s; each ratio "
        "reads against its own target: some are better higher, some lower)"
    )


if __name__ == "__main__":
    main()
