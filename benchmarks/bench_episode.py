"""SingleAgentEpisode: ours vs RLlib 2.60 in one process, interleaved per repeat, medians.

Run with the reference venv (needs both libraries):

    .venv-ref/bin/python benchmarks/bench_episode.py [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _timing import interleaved, json_path  # noqa: E402

from episodes import SingleAgentEpisode as Ours  # noqa: E402

try:
    from ray.rllib.env.single_agent_episode import SingleAgentEpisode as Theirs
except ImportError:  # pragma: no cover
    sys.exit("ray[rllib] is not installed: run with .venv-ref/bin/python")

OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACT_SPACE = gym.spaces.Discrete(2)
RNG = np.random.default_rng(0)
# Pre-drawn step data, so the timings hold only episode work: one array per step, as an env
# hands them over (indexing a 2-D array inside the timed loop would time numpy's view creation).
OBS = [row.copy() for row in RNG.uniform(-1, 1, (20_000, 4)).astype(np.float32)]
ACTS = [int(a) for a in RNG.integers(0, 2, 20_000)]
REWS = [float(r) for r in RNG.normal(size=20_000)]
EMO = [{"vf_preds": float(v), "action_logp": float(lp)} for v, lp in RNG.normal(size=(20_000, 2))]


def fresh(cls: type) -> Any:
    ep = cls(observation_space=OBS_SPACE, action_space=ACT_SPACE)
    ep.add_env_reset(OBS[0])
    return ep


def stepped(cls: type, n: int, numpy: bool = False) -> Any:
    ep = fresh(cls)
    for i in range(1, n + 1):
        ep.add_env_step(OBS[i], ACTS[i], REWS[i], extra_model_outputs=EMO[i])
    return ep.to_numpy() if numpy else ep


def with_lookback(cls: type, n: int, lookback: int, numpy: bool) -> Any:
    # The connector setting: a chunk after cut(len_lookback_buffer=lookback).
    ep = stepped(cls, lookback).cut(len_lookback_buffer=lookback)
    for i in range(lookback + 1, lookback + n + 1):
        ep.add_env_step(OBS[i], ACTS[i], REWS[i], extra_model_outputs=EMO[i])
    return ep.to_numpy() if numpy else ep


# ------------------------------------------------------------------------------ operations
def op_add_step_list(cls: type, n: int) -> Callable[[], object]:
    def run() -> object:
        ep = fresh(cls)
        for i in range(1, n + 1):
            ep.add_env_step(OBS[i], ACTS[i], REWS[i], extra_model_outputs=EMO[i])
        return ep

    return run


def op_add_step_numpy(cls: type, base: int, n: int) -> Callable[[], object]:
    # Each repeat appends to its own numpy'd episode, built outside the timed call.
    pool: list[Any] = []

    def run() -> object:
        ep = pool.pop() if pool else stepped(cls, base, numpy=True)
        t0 = time.perf_counter()
        for i in range(1, n + 1):
            ep.add_env_step(OBS[i], ACTS[i], REWS[i], extra_model_outputs=EMO[i])
        # One read per column inside the timed region: our store defers writing the appended
        # rows to the next read, RLlib's has written them at every step.
        ep.get_observations(-1), ep.get_actions(-1), ep.get_rewards(-1)
        for key in ep.extra_model_outputs:
            ep.get_extra_model_outputs(key, -1)
        return time.perf_counter() - t0

    def prepare(k: int) -> None:
        pool.extend(stepped(cls, base, numpy=True) for _ in range(k))

    run.prepare = prepare  # type: ignore[attr-defined]
    return run


def op_connector(cls: type, numpy: bool, n: int) -> Callable[[], object]:
    ep = with_lookback(cls, n, 20, numpy)

    def run() -> object:
        for ts in range(len(ep)):
            ep.get_actions(
                slice(ts - 4, ts), neg_index_as_lookback=True, fill=0.0, one_hot_discrete=True
            )
        return ep

    return run


def op_chunks(cls: type, n: int, chunk: int) -> Callable[[], object]:
    def run() -> object:
        ep = fresh(cls)
        chunks = []
        for i in range(1, n + 1):
            ep.add_env_step(OBS[i], ACTS[i], REWS[i], extra_model_outputs=EMO[i])
            if i % chunk == 0:
                chunks.append(ep)
                ep = ep.cut(len_lookback_buffer=4)
        whole = chunks[0]
        for c in chunks[1:]:
            whole.concat_episode(c)
        assert len(whole) == n
        return whole

    return run


def op_slice(cls: type, n: int) -> Callable[[], object]:
    ep = stepped(cls, n, numpy=True)
    return lambda: ep[100:200]


def op_state(cls: type, n: int) -> Callable[[], object]:
    ep = stepped(cls, n, numpy=True)
    return lambda: cls.from_state(pickle.loads(pickle.dumps(ep.get_state())))


def op_to_numpy(cls: type, n: int) -> Callable[[], object]:
    pool: list[Any] = []

    def run() -> object:
        ep = pool.pop() if pool else stepped(cls, n)
        t0 = time.perf_counter()
        ep.to_numpy()
        return time.perf_counter() - t0

    def prepare(k: int) -> None:
        pool.extend(stepped(cls, n) for _ in range(k))

    run.prepare = prepare  # type: ignore[attr-defined]
    return run


def op_concat_onto_numpy(cls: type, n: int, m: int, numpy_chunk: bool) -> Callable[[], object]:
    """concat_episode of an m-step successor onto a numpy'd n-step episode, timed alone."""
    pool: list[tuple[Any, Any]] = []

    def pair() -> tuple[Any, Any]:
        ep = stepped(cls, n)
        nxt = ep.cut(len_lookback_buffer=4)
        for i in range(n + 1, n + m + 1):
            nxt.add_env_step(OBS[i], ACTS[i], REWS[i], extra_model_outputs=EMO[i])
        ep.to_numpy()
        if numpy_chunk:
            nxt.to_numpy()
        return ep, nxt

    def run() -> object:
        ep, nxt = pool.pop() if pool else pair()
        t0 = time.perf_counter()
        ep.concat_episode(nxt)
        return time.perf_counter() - t0

    def prepare(k: int) -> None:
        pool.extend(pair() for _ in range(k))

    run.prepare = prepare  # type: ignore[attr-defined]
    return run


# --------------------------------------------------------------------------------- running
def timed(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """interleaved(), except that a callable returning a float reports its own inner time.

    Some operations mutate or consume an episode, so each repeat takes a prebuilt one from a
    pool and times only the operation, not the building.
    """
    for fn in fns.values():
        if hasattr(fn, "prepare"):
            fn.prepare(repeats + 1)
    if not any(hasattr(fn, "prepare") for fn in fns.values()):
        return interleaved(fns, repeats)
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats + 1):
        for name, fn in fns.items():
            samples[name].append(float(fn()))  # type: ignore[arg-type]
    return {name: float(np.median(s[1:])) for name, s in samples.items()}


def fmt(seconds: float) -> str:
    if seconds >= 1e-3:
        return f"{seconds * 1e3:8.2f} ms"
    return f"{seconds * 1e6:8.1f} µs"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, smaller scaling")
    parser.add_argument(
        "--json", metavar="PATH", type=json_path, help="also write the results as JSON"
    )
    parser.add_argument(
        "--only", metavar="TEXT", help="run only the operations whose name contains TEXT"
    )
    args = parser.parse_args(argv)
    reps = 7 if args.quick else 31

    # name, target ratio, factory(cls) -> callable, per-call divisor (for per-step numbers)
    cases: list[tuple[str, float, Callable[[type], Callable[[], object]], int]] = [
        ("add_env_step, list mode (per step)", 0.8, lambda c: op_add_step_list(c, 1000), 1000),
        (
            "add_env_step, numpy'd 1000-step ep (per step)",
            0.2,
            lambda c: op_add_step_numpy(c, 1000, 100),
            100,
        ),
        (
            "connector get_actions loop, 1000 steps, list",
            0.15,
            lambda c: op_connector(c, False, 1000),
            1,
        ),
        (
            "connector get_actions loop, 1000 steps, numpy",
            0.3,
            lambda c: op_connector(c, True, 1000),
            1,
        ),
        ("2000 steps in 50-step chunks, cut(4) + concat", 0.5, lambda c: op_chunks(c, 2000, 50), 1),
        (
            "numpy'd 1000-step ep, concat a list 10-step chunk",
            1.0,
            lambda c: op_concat_onto_numpy(c, 1000, 10, False),
            1,
        ),
        (
            "numpy'd 1000-step ep, concat a numpy'd 1000-step one",
            1.0,
            lambda c: op_concat_onto_numpy(c, 1000, 1000, True),
            1,
        ),
        ("ep[100:200] on numpy'd 1000-step ep", 0.5, lambda c: op_slice(c, 1000), 1),
        ("get_state/pickle/from_state, numpy'd 1000 steps", 0.35, lambda c: op_state(c, 1000), 1),
        ("to_numpy of a 1000-step episode", 0.9, lambda c: op_to_numpy(c, 1000), 1),
    ]
    if args.only:
        names = [case[0] for case in cases]
        cases = [case for case in cases if args.only in case[0]]
        if not cases:
            parser.error(
                f"--only {args.only!r} matches no operation; the operations are:\n  "
                + "\n  ".join(names)
            )
    results = []
    print(f"{'operation':50s} {'ours':>11s} {'RLlib':>11s} {'ratio':>7s} {'target':>7s}  ok")
    for name, target, factory, per in cases:
        res = timed({"ours": factory(Ours), "rllib": factory(Theirs)}, reps)
        ours, theirs = res["ours"] / per, res["rllib"] / per
        ratio = ours / theirs
        ok = ratio <= target
        results.append(
            dict(operation=name, ours_s=ours, rllib_s=theirs, ratio=ratio, target=target, passed=ok)
        )
        print(
            f"{name:50s} {fmt(ours)} {fmt(theirs)} {ratio:6.3f}x {target:6.2f}x  "
            f"{'PASS' if ok else 'FAIL'}"
        )

    if args.only:  # just the selected operations: no scaling curve
        write_json(args.json, {"cases": results, "only": args.only, "quick": args.quick})
        return
    # Scaling: N appends to a numpy'd episode, time per step; ours must stay flat.
    sizes = (1000, 2000, 4000) if args.quick else (1000, 2000, 4000, 8000)
    print(f"\nappend N steps to a numpy'd episode (per step), repeats={3 if args.quick else 5}")
    print(f"{'N':>6s} {'ours':>11s} {'RLlib':>11s}")
    scaling = []
    for n in sizes:
        res = timed(
            {"ours": op_add_step_numpy(Ours, 1, n), "rllib": op_add_step_numpy(Theirs, 1, n)},
            3 if args.quick else 5,
        )
        scaling.append(
            dict(n=n, ours_per_step_s=res["ours"] / n, rllib_per_step_s=res["rllib"] / n)
        )
        print(f"{n:6d} {fmt(res['ours'] / n)} {fmt(res['rllib'] / n)}")
    first, last = scaling[0]["ours_per_step_s"], scaling[-1]["ours_per_step_s"]
    flat = last <= 2.0 * first
    print(
        f"ours per-step growth {sizes[0]}->{sizes[-1]}: {last / first:.2f}x "
        f"({'flat: PASS' if flat else 'grows: FAIL'})"
    )

    write_json(
        args.json,
        {"cases": results, "scaling": scaling, "scaling_flat": flat, "quick": args.quick},
    )


def write_json(path: str | None, results: dict[str, object]) -> None:
    """Writes ``results`` to ``path`` (``--json``); nothing when it is None."""
    if path:
        with open(path, "w") as f:
            json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
