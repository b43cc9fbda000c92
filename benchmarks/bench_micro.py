"""Episode micro-operations: ours vs RLlib 2.60 per call, interleaved, medians of repeats.

Single-item getters and setters, the constructor from lists, ``get_data_dict`` /
``get_sample_batch`` of a short episode and ``InfiniteLookbackBuffer.extend`` onto a numpy'd
buffer. Run with the reference venv (needs both libraries):

    .venv-ref/bin/python benchmarks/bench_micro.py [--quick] [--only TEXT]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import interleaved  # noqa: E402
from bench_episode import timed  # noqa: E402  (pooled: a callable may time itself)

import episodes  # noqa: E402

try:
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode as TheirEpisode
    from ray.rllib.env.utils.infinite_lookback_buffer import (
        InfiniteLookbackBuffer as TheirBuffer,
    )
except ImportError:  # pragma: no cover
    sys.exit("ray[rllib] is not installed: run with .venv-ref/bin/python")

OURS = (episodes.SingleAgentEpisode, episodes.InfiniteLookbackBuffer)
THEIRS = (TheirEpisode, TheirBuffer)
OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACT_SPACE = gym.spaces.Discrete(2)
RNG = np.random.default_rng(0)
OBS = [row.copy() for row in RNG.uniform(-1, 1, (201, 4)).astype(np.float32)]
ACTS = [int(a) for a in RNG.integers(0, 2, 200)]
REWS = [float(r) for r in RNG.normal(size=200)]
ROWS = RNG.uniform(-1, 1, (10, 4)).astype(np.float32)


def built(lib: tuple[type, type], n: int, numpy: bool = False) -> Any:
    ep = lib[0](
        observations=OBS[: n + 1],
        actions=ACTS[:n],
        rewards=REWS[:n],
        observation_space=OBS_SPACE,
        action_space=ACT_SPACE,
        len_lookback_buffer=0,
    )
    return ep.to_numpy() if numpy else ep


def op_set(lib: tuple[type, type], column: str, index: int, value: Any) -> Callable[[], object]:
    setter = getattr(built(lib, 10), f"set_{column}")
    return lambda: setter(new_data=value, at_indices=index)


def op_get(lib: tuple[type, type], column: str, index: int, numpy: bool) -> Callable[[], object]:
    getter = getattr(built(lib, 10, numpy), f"get_{column}")
    return lambda: getter(index)


def op_construct(lib: tuple[type, type], n: int) -> Callable[[], object]:
    return lambda: built(lib, n)


def op_batch(lib: tuple[type, type], method: str) -> Callable[[], object]:
    return getattr(built(lib, 10), method)


def op_extend(lib: tuple[type, type]) -> Callable[[], object]:
    """Times ``extend`` alone: each call takes its own buffer, built beforehand."""
    pool: list[Any] = []

    def run() -> object:
        buf = pool.pop() if pool else lib[1](data=np.zeros((100, 4), np.float32), space=OBS_SPACE)
        t0 = time.perf_counter()
        buf.extend(ROWS)
        return time.perf_counter() - t0

    def prepare(k: int) -> None:
        pool.extend(lib[1](data=np.zeros((100, 4), np.float32), space=OBS_SPACE) for _ in range(k))

    run.prepare = prepare  # type: ignore[attr-defined]
    return run


CASES: list[tuple[str, Callable[[tuple[type, type]], Callable[[], object]]]] = [
    ("set_observations(at_indices=-1), list", lambda lib: op_set(lib, "observations", -1, OBS[0])),
    ("set_rewards(at_indices=3), list", lambda lib: op_set(lib, "rewards", 3, 0.5)),
    ("set_actions(at_indices=3), list", lambda lib: op_set(lib, "actions", 3, 1)),
    ("get_observations(-1), list", lambda lib: op_get(lib, "observations", -1, False)),
    ("get_observations(-1), numpy", lambda lib: op_get(lib, "observations", -1, True)),
    ("get_actions(3), list", lambda lib: op_get(lib, "actions", 3, False)),
    ("get_actions(3), numpy", lambda lib: op_get(lib, "actions", 3, True)),
    ("get_rewards(-1), list", lambda lib: op_get(lib, "rewards", -1, False)),
    ("get_rewards(-1), numpy", lambda lib: op_get(lib, "rewards", -1, True)),
    ("constructor from lists, 10 steps", lambda lib: op_construct(lib, 10)),
    ("constructor from lists, 200 steps", lambda lib: op_construct(lib, 200)),
    ("get_data_dict, 10-step list ep", lambda lib: op_batch(lib, "get_data_dict")),
    ("get_sample_batch, 10-step list ep", lambda lib: op_batch(lib, "get_sample_batch")),
    ("buffer.extend(10 rows) onto numpy'd 100", op_extend),
]


def fmt(seconds: float) -> str:
    return f"{seconds * 1e6:8.2f} µs"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--only", metavar="TEXT", help="run only the cases whose name has TEXT")
    args = parser.parse_args(argv)
    cases = [case for case in CASES if not args.only or args.only in case[0]]
    if not cases:
        parser.error(f"--only {args.only!r} matches no case")
    repeats, number = (7, 200) if args.quick else (41, 500)
    print(f"{'operation':44s} {'ours':>11s} {'RLlib':>11s} {'ratio':>7s}")
    for name, factory in cases:
        fns = {"ours": factory(OURS), "rllib": factory(THEIRS)}
        if hasattr(fns["ours"], "prepare"):  # one call per sample, on a fresh buffer each
            res = timed(fns, repeats * 20)
        else:
            per = number // 20 if "constructor" in name else number
            res = interleaved(fns, repeats, number=per)
        ratio = res["ours"] / res["rllib"]
        print(f"{name:44s} {fmt(res['ours'])} {fmt(res['rllib'])} {ratio:6.2f}x")


if __name__ == "__main__":
    main()
