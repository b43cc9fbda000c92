"""Replay buffers: ours vs RLlib 2.60 (and TorchRL where installed), one process, interleaved.

The issue's workload: 500 episodes x 200 steps, 4-dim float32 observations, discrete actions.
Run with the reference venv:

    .venv-ref/bin/python benchmarks/bench_replay.py [--repeats 15] [--quick] [--no-flat]
        [--only targets|rollouts]

Prints medians (ms) and the ratios of the issue's targets, the add of 10k 5-step rollouts
(MBPO/Dyna) into an empty and a full buffer (as episodes, and as arrays through
``add_rollouts``), then the flatness curve: our
sampling cost for buffers of 10k, 100k and 1M steps. TorchRL's ``PrioritizedSliceSampler``
needs TorchRL's compiled extension (its segment trees); where that does not load against the
installed torch, its row is left out and the reason printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import interleaved, positive_int  # noqa: E402

from episodes import SingleAgentEpisode  # noqa: E402
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer  # noqa: E402

try:
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode as RLlibEpisode
    from ray.rllib.utils.replay_buffers.episode_replay_buffer import (
        EpisodeReplayBuffer as RLlibBuffer,
    )
    from ray.rllib.utils.replay_buffers.prioritized_episode_buffer import (
        PrioritizedEpisodeReplayBuffer as RLlibPrioritized,
    )
except ImportError:  # pragma: no cover
    sys.exit("RLlib is not installed: run with .venv-ref/bin/python")

try:
    import torch
    from tensordict import TensorDict
    from torchrl.data import LazyTensorStorage, ReplayBuffer
    from torchrl.data.replay_buffers.samplers import (
        PrioritizedSliceSampler,
        RandomSampler,
        SliceSampler,
    )

    HAVE_TORCHRL = True
except ImportError:  # pragma: no cover
    HAVE_TORCHRL = False

EPISODES, LENGTH, OBS = 500, 200, 4


def make_data(num: int, length: int, seed: int = 0) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [
        {
            "obs": rng.normal(size=(length + 1, OBS)).astype(np.float32),
            "actions": rng.integers(0, 2, length),
            "rewards": rng.normal(size=length).astype(np.float32),
        }
        for _ in range(num)
    ]


def ours(data: list[dict[str, np.ndarray]]) -> list[SingleAgentEpisode]:
    eps = []
    for i, d in enumerate(data):
        ep = SingleAgentEpisode(
            f"e{i}",
            observations=list(d["obs"]),
            actions=list(d["actions"]),
            rewards=list(d["rewards"]),
            terminated=True,
            len_lookback_buffer=0,
        )
        eps.append(ep.to_numpy())
    return eps


def rllib(data: list[dict[str, np.ndarray]]) -> list[RLlibEpisode]:
    eps = []
    for i, d in enumerate(data):
        ep = RLlibEpisode(
            id_=f"e{i}",
            observations=list(d["obs"]),
            actions=list(d["actions"]),
            rewards=list(d["rewards"]),
            terminated=True,
            len_lookback_buffer=0,
        )
        eps.append(ep.to_numpy())
    return eps


def torchrl_buffer(data: list[dict[str, np.ndarray]], sampler: object, batch: int) -> object:
    steps = sum(len(d["rewards"]) for d in data)
    td = TensorDict(
        {
            "obs": torch.from_numpy(np.concatenate([d["obs"][:-1] for d in data])),
            "next_obs": torch.from_numpy(np.concatenate([d["obs"][1:] for d in data])),
            "action": torch.from_numpy(np.concatenate([d["actions"] for d in data])),
            "reward": torch.from_numpy(np.concatenate([d["rewards"] for d in data])),
            "episode": torch.from_numpy(
                np.concatenate([np.full(len(d["rewards"]), i) for i, d in enumerate(data)])
            ),
        },
        batch_size=[steps],
    )
    rb = ReplayBuffer(storage=LazyTensorStorage(steps), sampler=sampler, batch_size=batch)
    rb.extend(td)
    return rb


def torchrl_prioritized_slices(data: list[dict[str, np.ndarray]]) -> object:
    """TorchRL's prioritized 32 x 64 slices + an update of the 32 starts, or why there is none.

    The same step as ours: each slice's start drawn by priority (``alpha=1``), weights at
    ``beta=0.4``, then the starts' priorities set (TorchRL takes item indices, so the first
    index of each slice).
    """
    steps = sum(len(d["rewards"]) for d in data)
    try:
        sampler = PrioritizedSliceSampler(
            steps, alpha=1.0, beta=0.4, slice_len=64, traj_key="episode", cache_values=True
        )
    except (RuntimeError, ImportError) as error:  # its C++ segment trees did not load
        return f"TorchRL PrioritizedSliceSampler unavailable: {error}"
    rb = torchrl_buffer(data, sampler, 32 * 64)
    prio = torch.from_numpy(np.random.default_rng(0).uniform(0.1, 2.0, 32))

    def run() -> None:
        _, info = rb.sample(return_info=True)
        rb.update_priority(info["index"].reshape(32, 64)[:, 0], prio)

    run()  # a wrong call fails here, before the timings
    return run


def gathers(steps: int, calls: int) -> object:
    """``calls`` random gathers of 256 float64 from arrays of ``steps``: a floor, no logic.

    A prioritized step needs a few dozen such numpy calls (tree levels down and up, the
    n-step walk, the batch's columns); timed among the contenders, this shows what that many
    calls cost from the caches the others leave behind.
    """
    rng = np.random.default_rng(2)
    columns = [rng.random(steps) for _ in range(16)]

    def run() -> None:
        index = rng.integers(0, steps, 256)
        for k in range(calls):
            columns[k % 16][index]

    return run


def targets(repeats: int) -> None:
    data = make_data(EPISODES, LENGTH)
    our_eps, rl_eps = ours(data), rllib(data)
    cap = EPISODES * LENGTH
    mine, mine_p = EpisodeReplayBuffer(cap, seed=0), PrioritizedEpisodeReplayBuffer(cap, seed=0)
    rl, rl_p = RLlibBuffer(cap), RLlibPrioritized(cap)
    for buf in (mine, mine_p):
        buf.add(our_eps)
    for buf in (rl, rl_p):
        buf.add(rl_eps)
    prio = np.random.default_rng(0).uniform(0.1, 2.0, 256)

    def ours_per() -> None:
        mine_p.sample(256, n_step=3, beta=0.4)
        mine_p.update_priorities(prio)

    def rl_per() -> None:
        rl_p.sample(256, n_step=3, beta=0.4)
        rl_p.update_priorities(prio)

    prio_seq = np.random.default_rng(0).uniform(0.1, 2.0, 32)

    def ours_per_seq() -> None:  # R2D2: 32 sequences drawn by their starts' priorities
        mine_p.sample(32, batch_length_T=64, beta=0.4)
        mine_p.update_priorities(prio_seq)

    fns = {
        "ours add 100k": lambda: EpisodeReplayBuffer(cap).add(our_eps),
        "ours prioritized add 100k": lambda: PrioritizedEpisodeReplayBuffer(cap).add(our_eps),
        "rllib add 100k": lambda: RLlibBuffer(cap).add(rl_eps),
        "rllib prioritized add 100k": lambda: RLlibPrioritized(cap).add(rl_eps),
    }
    slow = interleaved(fns, repeats=max(3, repeats // 3))
    fns = {
        "ours sample 256 n3": lambda: mine.sample(256, n_step=3),
        # RLlib's uniform buffer honours n_step only when it returns episodes (its DQN's path);
        # without sample_episodes it would draw 64-step sequences and ignore n_step.
        "rllib sample 256 n3": lambda: rl.sample(256, n_step=3, sample_episodes=True),
        "ours per sample+update": ours_per,
        "rllib per sample+update": rl_per,
        "ours seq 32x64": lambda: mine.sample(32, batch_length_T=64),
        "rllib seq 32x64": lambda: rl.sample(batch_size_B=32, batch_length_T=64),
        "ours per seq 32x64+update": ours_per_seq,
        "numpy floor: 64 gathers of 256": gathers(cap, 64),
    }
    if HAVE_TORCHRL:
        uniform = torchrl_buffer(data, RandomSampler(), 256)
        slices = torchrl_buffer(
            data, SliceSampler(slice_len=64, traj_key="episode", cache_values=True), 32 * 64
        )
        fns["torchrl sample 256 1-step"] = uniform.sample
        fns["torchrl slice 32x64"] = slices.sample
        prioritized_slices = torchrl_prioritized_slices(data)
        if isinstance(prioritized_slices, str):
            print(prioritized_slices)
        else:
            fns["torchrl per slice 32x64+update"] = prioritized_slices
    fast = interleaved(fns, repeats=repeats, number=5)
    print_targets({**slow, **fast})


def print_targets(times: dict[str, float]) -> None:
    for name, sec in times.items():
        print(f"{name:32s} {sec * 1e3:10.3f} ms")
    print()
    print("| target | measured | goal |")
    print("|---|---|---|")

    def ratio(a: str, b: str) -> float:
        return times[a] / times[b]

    rows = [
        ("sample 256 n3 / RLlib", ratio("ours sample 256 n3", "rllib sample 256 n3"), 0.03),
        ("PER / RLlib", ratio("ours per sample+update", "rllib per sample+update"), 0.01),
        ("PER / our uniform n3", ratio("ours per sample+update", "ours sample 256 n3"), 3.0),
        ("add 100k / RLlib", ratio("ours add 100k", "rllib add 100k"), 0.3),
        (
            "PER add / RLlib PER add",
            ratio("ours prioritized add 100k", "rllib prioritized add 100k"),
            None,
        ),
        ("seq 32x64 / RLlib", ratio("ours seq 32x64", "rllib seq 32x64"), None),
        (
            "PER seq 32x64 + update / our uniform seq",
            ratio("ours per seq 32x64+update", "ours seq 32x64"),
            None,
        ),
        (
            "64 bare gathers / RLlib PER",
            ratio("numpy floor: 64 gathers of 256", "rllib per sample+update"),
            None,
        ),
    ]
    if HAVE_TORCHRL:
        rows += [
            ("n3 / TorchRL 1-step", ratio("ours sample 256 n3", "torchrl sample 256 1-step"), 2.0),
            ("seq 32x64 / TorchRL slices", ratio("ours seq 32x64", "torchrl slice 32x64"), 1.0),
        ]
    if "torchrl per slice 32x64+update" in times:
        rows.append(
            (
                "PER seq 32x64 + update / TorchRL prioritized slices",
                ratio("ours per seq 32x64+update", "torchrl per slice 32x64+update"),
                None,
            )
        )
    for name, ratio, goal in rows:
        print(f"| {name} | {ratio:.4f}x | {'<= ' + str(goal) + 'x' if goal else '-'} |")


def flatness(repeats: int, sizes: tuple[int, ...]) -> None:
    print()
    print(
        "| buffer steps | uniform 256 n3 (ms) | PER 256 + update (ms) | seq 32x64 (ms) "
        "| PER seq 32x64 + update (ms) |"
    )
    print("|---|---|---|---|---|")
    prio = np.random.default_rng(0).uniform(0.1, 2.0, 256)
    prio_seq = prio[:32]
    for steps in sizes:
        eps = ours(make_data(steps // LENGTH, LENGTH, seed=1))
        uni, per = EpisodeReplayBuffer(steps, seed=0), PrioritizedEpisodeReplayBuffer(steps, seed=0)
        uni.add(eps)
        per.add(eps)
        del eps

        def per_step(per: PrioritizedEpisodeReplayBuffer = per) -> None:
            per.sample(256, n_step=3, beta=0.4)
            per.update_priorities(prio)

        def per_seq(per: PrioritizedEpisodeReplayBuffer = per) -> None:
            per.sample(32, batch_length_T=64, beta=0.4)
            per.update_priorities(prio_seq)

        t = interleaved(
            {
                "uni": lambda uni=uni: uni.sample(256, n_step=3),
                "per": per_step,
                "seq": lambda uni=uni: uni.sample(32, batch_length_T=64),
                "per_seq": per_seq,
            },
            repeats=repeats,
            number=5,
        )
        print(
            f"| {steps:,} | {t['uni'] * 1e3:.3f} | {t['per'] * 1e3:.3f} | {t['seq'] * 1e3:.3f} "
            f"| {t['per_seq'] * 1e3:.3f} |"
        )


ROLLOUTS, ROLLOUT_LEN = 10_000, 5


def rollouts(
    num: int, tag: str, seed: int
) -> tuple[list[SingleAgentEpisode], list[RLlibEpisode], dict[str, Any]]:
    """``num`` imagined rollouts (MBPO/Dyna): 5 steps, Box(4) obs, Box(1) actions, half done.

    As episodes (ours and RLlib's) and as the model's arrays ``add_rollouts`` takes.
    """
    rng = np.random.default_rng(seed)
    all_obs = rng.normal(size=(num, ROLLOUT_LEN + 1, OBS)).astype(np.float32)
    all_acts = rng.uniform(-1, 1, (num, ROLLOUT_LEN, 1)).astype(np.float32)
    all_rews = rng.normal(size=(num, ROLLOUT_LEN)).astype(np.float32)
    done = np.zeros((num, ROLLOUT_LEN), bool)
    done[1::2, -1] = True  # every second rollout terminates on its last step
    ours_eps, rl_eps = [], []
    for i in range(num):
        obs, acts, rews = list(all_obs[i]), list(all_acts[i]), list(all_rews[i])
        kw = {"terminated": bool(i % 2), "len_lookback_buffer": 0}
        ep = SingleAgentEpisode(f"{tag}{i}", observations=obs, actions=acts, rewards=rews, **kw)
        ours_eps.append(ep.to_numpy())
        rl = RLlibEpisode(id_=f"{tag}{i}", observations=obs, actions=acts, rewards=rews, **kw)
        rl_eps.append(rl.to_numpy())
    arrays = {"observations": all_obs, "actions": all_acts, "rewards": all_rews}
    arrays.update(terminated=done, ids=[f"{tag}{i}" for i in range(num)])
    return ours_eps, rl_eps, arrays


def add_rollouts(repeats: int) -> None:
    """``add`` of 10k 5-step rollouts into an empty buffer and into a full one (50k steps).

    Full: the buffer holds 10k other rollouts, so the add evicts as many episodes as it
    brings. Episodes are built, and buffers made and filled, outside the timed part; the four
    contenders are interleaved per repeat.
    """
    cap = ROLLOUTS * ROLLOUT_LEN
    new_ours, new_rl, new_arrays = rollouts(ROLLOUTS, "r", 1)
    old_ours, old_rl, _ = rollouts(ROLLOUTS, "f", 2)
    cases = {  # name: (make the buffer, untimed; the timed add)
        "ours add 10k rollouts, empty": (lambda: EpisodeReplayBuffer(cap), new_ours),
        "ours add_rollouts 10k, empty": (lambda: EpisodeReplayBuffer(cap), new_arrays),
        "rllib add 10k rollouts, empty": (lambda: RLlibBuffer(cap), new_rl),
        "ours add 10k rollouts, full": (
            lambda: _filled(EpisodeReplayBuffer(cap), old_ours),
            new_ours,
        ),
        "ours add_rollouts 10k, full": (
            lambda: _filled(EpisodeReplayBuffer(cap), old_ours),
            new_arrays,
        ),
        "rllib add 10k rollouts, full": (lambda: _filled(RLlibBuffer(cap), old_rl), new_rl),
    }
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for _ in range(repeats + 1):  # the first round warms up
        for name, (make, given) in cases.items():
            buf = make()
            t0 = time.perf_counter()
            if isinstance(given, dict):  # the model's arrays, no episode built
                buf.add_rollouts(**given)
            else:
                buf.add(given)
            samples[name].append(time.perf_counter() - t0)
    times = {name: statistics.median(s[1:]) for name, s in samples.items()}
    for name, sec in times.items():
        print(f"{name:32s} {sec * 1e3:9.1f} ms")
    for case in ("empty", "full"):
        rl_s = times[f"rllib add 10k rollouts, {case}"]
        ours_s, arrays_s = (
            times[f"ours add 10k rollouts, {case}"],
            times[f"ours add_rollouts 10k, {case}"],
        )
        print(
            f"add 10k rollouts, {case}: ours / rllib = {ours_s / rl_s:.3f}x; "
            f"add_rollouts / rllib = {arrays_s / rl_s:.4f}x"
        )


def _filled(buf: object, eps: list[object]) -> object:
    buf.add(eps)  # type: ignore[attr-defined]
    return buf


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument(
        "--repeats",
        type=positive_int,
        default=None,
        help="timed repeats (default 15; 5 with --quick)",
    )
    parser.add_argument(
        "--quick", action="store_true", help="5 repeats (unless --repeats), flatness to 100k"
    )
    parser.add_argument("--no-flat", action="store_true", help="skip the flatness curve")
    parser.add_argument(
        "--only",
        choices=("targets", "rollouts"),
        default=None,
        help="run one case only: the targets, or the add of 10k 5-step rollouts (MBPO)",
    )
    args = parser.parse_args()
    repeats = args.repeats or (5 if args.quick else 15)
    torch.set_num_threads(1) if HAVE_TORCHRL else None
    if args.only == "rollouts":
        add_rollouts(repeats)
        return
    print(f"TorchRL: {'yes' if HAVE_TORCHRL else 'not installed (RLlib only)'}")
    targets(repeats)
    if args.only is None:
        add_rollouts(repeats)
    if not args.no_flat and args.only is None:
        flatness(repeats, (10_000, 100_000) if args.quick else (10_000, 100_000, 1_000_000))


if __name__ == "__main__":
    main()
