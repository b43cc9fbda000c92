"""The ``episodes`` command line: record, info, validate and plot datasets.

Example:
    >>> main(["--help"])  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np

from episodes.io import DatasetError, EpisodeWriter, dataset_info
from episodes.io.reader import iter_chunks, load_chunk

__all__ = ["main"]


class CliError(Exception):
    """A user-facing error: printed as one line, exit code 1."""


def _progress(total: int | None, desc: str) -> Any:
    from tqdm import tqdm

    return tqdm(
        total=total,
        desc=desc,
        unit="step" if desc == "record" else "chunk",
        disable=None,
        file=sys.stderr,
        leave=False,
    )


# --------------------------------------------------------------------------------- record
def _record(args: argparse.Namespace) -> int:
    import gymnasium as gym

    from episodes.runner import EnvRunner, RandomPolicy

    if args.steps < 1 or args.num_envs < 1:
        raise CliError("--steps and --num-envs must be >= 1")
    try:
        env = gym.make_vec(args.env_id, args.num_envs, vectorization_mode="sync")
    except Exception as err:  # noqa: BLE001 - gymnasium raises many types for a bad id
        raise CliError(f"cannot create env {args.env_id!r}: {err}") from err
    # The runner records the same number of steps in every env: round up to a multiple.
    per_env = -(-args.steps // args.num_envs)
    policy = RandomPolicy(env.action_space, seed=args.seed)
    runner = EnvRunner(env, policy, len_lookback_buffer=0, seed=args.seed)
    ids: set[str] = set()
    done = 0
    with EpisodeWriter(args.out) as writer, _progress(per_env * args.num_envs, "record") as bar:
        while done < per_env:
            block = min(256, per_env - done)
            # Finished episodes come whole; ongoing ones as chunks that load_episode joins.
            for chunk in runner.sample(block):
                if len(chunk) or chunk.is_done:
                    writer.write(chunk)
                    ids.add(chunk.id_)
            done += block
            bar.update(block * args.num_envs)
    env.close()
    print(f"recorded {per_env * args.num_envs} steps in {len(ids)} episodes to {args.out}")
    return 0


# ----------------------------------------------------------------------------------- info
def _stats(values: list[float]) -> str:
    if not values:
        return "n/a"
    a = np.asarray(values, dtype=np.float64)
    return f"mean {a.mean():.4g}  std {a.std():.4g}  min {a.min():.4g}  max {a.max():.4g}"


def _info(args: argparse.Namespace) -> int:
    info = dataset_info(args.dir)
    lengths = [e.length for e in info.episodes]
    returns = [e.ret for e in info.episodes]
    if args.json:
        print(
            json.dumps(
                {
                    "path": info.path,
                    "version": info.version,
                    "chunks": info.num_chunks,
                    "episodes": info.num_episodes,
                    "done": info.num_done,
                    "steps": info.num_steps,
                    "bytes": info.nbytes,
                    "returns": [r if math.isfinite(r) else None for r in returns],
                    "lengths": lengths,
                    "observation_space": str(info.observation_space),
                    "action_space": str(info.action_space),
                    "torn_manifest": info.torn_manifest,
                }
            )
        )
        return 0
    print(f"dataset:  {info.path} (format version {info.version})")
    print(f"chunks:   {info.num_chunks}  ({info.nbytes / 1e6:.2f} MB)")
    print(f"episodes: {info.num_episodes}  ({info.num_done} done)")
    print(f"steps:    {info.num_steps}")
    print(f"return:   {_stats(returns)}")
    print(f"length:   {_stats([float(x) for x in lengths])}")
    print(f"observation space: {info.observation_space}")
    print(f"action space:      {info.action_space}")
    if info.torn_manifest:
        print("note: an incomplete last manifest line (a killed writer) was ignored")
    return 0


# ------------------------------------------------------------------------------- validate
def _validate(args: argparse.Namespace) -> int:
    root, entries, torn = iter_chunks(args.dir)
    problems = []
    with _progress(len(entries), "validate") as bar:
        for entry in entries:
            try:
                load_chunk(root, entry, verify=True)
            except DatasetError as err:
                problems.append(str(err))
            bar.update(1)
    for message in problems:
        print(f"BAD {message}", file=sys.stderr)
    if torn:
        print("note: an incomplete last manifest line (a killed writer) was ignored")
    if problems:
        print(f"{len(problems)} of {len(entries)} chunks are bad", file=sys.stderr)
        return 1
    print(f"ok: {len(entries)} chunks verified")
    return 0


# ----------------------------------------------------------------------------------- plot
def _plot(args: argparse.Namespace) -> int:
    try:
        import matplotlib
    except ImportError as err:
        raise CliError(
            "plotting needs matplotlib: pip install 'episodes[plot]' (or pip install matplotlib)"
        ) from err
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    info = dataset_info(args.dir)
    returns = [e.ret for e in info.episodes]
    lengths = [e.length for e in info.episodes]
    fig, (ax_ret, ax_len) = plt.subplots(1, 2, figsize=(10, 4))
    ax_ret.plot(returns, marker=".", linestyle="-")
    ax_ret.set_title("episode return")
    ax_ret.set_xlabel("episode")
    ax_len.plot(lengths, marker=".", linestyle="-", color="tab:orange")
    ax_len.set_title("episode length")
    ax_len.set_xlabel("episode")
    fig.suptitle(f"{info.path}: {info.num_episodes} episodes, {info.num_steps} steps")
    fig.tight_layout()
    try:
        fig.savefig(args.out)
    except (OSError, ValueError) as err:
        raise CliError(f"cannot write {args.out}: {err}") from err
    finally:
        plt.close(fig)
    print(f"wrote {args.out}")
    return 0


# ----------------------------------------------------------------------------------- main
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="episodes", description="Record, inspect, validate and plot episode datasets."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    rec = sub.add_parser(
        "record",
        help="record a random policy into a dataset",
        description="Record a random policy in a gymnasium env into DIR.",
    )
    rec.add_argument("env_id", metavar="ENV_ID", help="gymnasium env id, e.g. CartPole-v1")
    rec.add_argument(
        "--steps",
        type=int,
        required=True,
        help="total env steps to record (rounded up to a multiple of --num-envs)",
    )
    rec.add_argument("--out", required=True, metavar="DIR", help="dataset directory")
    rec.add_argument("--num-envs", type=int, default=1, help="envs stepped side by side")
    rec.add_argument("--seed", type=int, default=None, help="seed for envs and actions")
    rec.set_defaults(func=_record)
    inf = sub.add_parser(
        "info",
        help="counts, steps, return/length stats, spaces",
        description="Summarise a dataset.",
    )
    inf.add_argument("dir", metavar="DIR")
    inf.add_argument("--json", action="store_true", help="print one JSON object")
    inf.set_defaults(func=_info)
    val = sub.add_parser(
        "validate",
        help="check every file of a dataset",
        description="Check every committed chunk and file (checksums too).",
    )
    val.add_argument("dir", metavar="DIR")
    val.set_defaults(func=_validate)
    plo = sub.add_parser(
        "plot",
        help="plot returns and lengths (needs matplotlib)",
        description="Plot episode returns and lengths to an image file.",
    )
    plo.add_argument("dir", metavar="DIR")
    plo.add_argument("--out", required=True, metavar="FILE.png")
    plo.set_defaults(func=_plot)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit code (0 ok, 1 error, 2 usage).

    Example:
        >>> main(["info", "/nonexistent"])  # doctest: +SKIP
        1
    """
    args = _parser().parse_args(argv)
    try:
        return int(args.func(args))
    except (CliError, DatasetError, OSError) as err:
        print(f"episodes: error: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("episodes: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
