"""The ``episodes`` command line: record, info, validate, relist, plot and the copy tools.

Example:
    >>> main(["info", "/nonexistent"])  # the error goes to stderr
    1
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import re
import sys
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

from episodes.cli.errors import (
    CliError,
    Parser,
    _dropped_output,
    _quiet_stdout,
    copying_into,
    progress,
    say,
    warnings_as_lines,
)
from episodes.cli.npz_export import add_npz_options, check_export_usage, export_npz
from episodes.cli.plotting import plot
from episodes.cli.record import record, shard_bytes
from episodes.cli.relist import add_relist
from episodes.cli.space_text import space_text
from episodes.io import DatasetError, dataset_info
from episodes.io.values import encode_value

__all__ = ["main"]


# ----------------------------------------------------------------------------------- info
def _stats(values: list[float]) -> str:
    if not values:
        return "n/a"
    a = np.asarray(values, dtype=np.float64)
    finite = a[np.isfinite(a)]
    # Scaled by a power of two (exact) near the largest |x|: sums of returns near 1e308 would
    # overflow to inf. NaN/inf returns give nan/inf as before, without numpy's warnings.
    top = float(np.abs(finite).max()) if finite.size else 0.0
    scale = math.ldexp(1.0, math.frexp(top)[1] - 1) if top > 0.0 else 1.0
    with np.errstate(all="ignore"):
        mean, std = (a / scale).mean() * scale, (a / scale).std() * scale
    return f"mean {mean:.4g}  std {std:.4g}  min {a.min():.4g}  max {a.max():.4g}"


def _info(args: argparse.Namespace) -> int:
    info = dataset_info(args.dir)
    lengths = [e.length for e in info.episodes]
    returns = [e.ret for e in info.episodes]
    if args.json:
        obs, act = info.observation_space, info.action_space
        data = {
            "path": info.path,
            "version": info.version,
            "chunks": info.num_chunks,
            "episodes": info.num_episodes,
            "done": info.num_done,
            "steps": info.num_steps,
            "bytes": info.nbytes,
            "returns": [r if math.isfinite(r) else None for r in returns],
            "lengths": lengths,
            # one entry per episode, as returns and lengths, so a table can be made of them
            "ids": [encode_value(e.id_, blob=None, where="id") for e in info.episodes],
            "terminated": [e.terminated for e in info.episodes],
            "truncated": [e.truncated for e in info.episodes],
            "observation_space": None if obs is None else str(obs),  # null, not "None"
            "action_space": None if act is None else str(act),
            "torn_manifest": info.torn_manifest,
            "shards": info.num_shards if info.version >= 2 else None,  # v1 has no shards
            "created": info.created,
            "library_version": info.library_version,
            "metadata": info.metadata,
        }
        say(json.dumps(data))  # ASCII: nothing to escape, a full stdout is reported
        return 0
    say(f"dataset:  {info.path} (format version {info.version})")
    if info.version >= 2:
        say(f"shards:   {info.num_shards}  ({info.nbytes / 2**20:.2f} MiB)")
        say(f"created:  {info.created} by episodes {info.library_version}")
        for key, value in (info.metadata or {}).items():
            if value not in (None, {}, []) and key != "env_spec":
                say(f"{key + ':':<9} {value if isinstance(value, str) else json.dumps(value)}")
    say(f"chunks:   {info.num_chunks}  ({info.nbytes / 2**20:.2f} MiB)")
    say(f"episodes: {info.num_episodes}  ({info.num_done} done)")
    say(f"steps:    {info.num_steps}")
    say(f"return:   {_stats(returns)}")
    say(f"length:   {_stats([float(x) for x in lengths])}")
    say(f"observation space: {space_text(info.observation_space)}")
    say(f"action space:      {space_text(info.action_space)}")
    if info.torn_manifest:
        say("note: an incomplete last manifest line (a killed writer) was ignored")
    return 0


# ------------------------------------------------------------------------------- validate
_NOTES = 20  # unlisted files named one per line; the rest counted


def _validate(args: argparse.Namespace) -> int:
    from episodes.io import validate_dataset

    with progress(None, "validate") as bar:
        report = validate_dataset(args.dir, on_piece=lambda: bar.update(1))
    for message in report.problems:  # they may quote a damaged file's bytes
        say(f"BAD {message}", err=True)
    if report.torn_manifest:
        say("note: an incomplete last manifest line (a killed writer) was ignored")
    for message in report.notes[:_NOTES]:  # no problem, but globs of shards/ read them
        say(f"note: {message}")
    if len(report.notes) > _NOTES:
        say(f"note: and {len(report.notes) - _NOTES} more files no manifest line lists")
    count = report.pieces
    if not report.ok:
        problems = len(report.problems)
        noun = "problem" if problems == 1 else "problems"
        say(f"{problems} {noun} in {count} episode pieces", err=True)
        return 1
    plural = "s" * (report.shards != 1)
    shards = "" if report.shards is None else f" in {report.shards} shard{plural}"
    say(f"ok: {count} episode pieces{shards} verified")
    return 0


# -------------------------------------------------------------- migrate, merge, split, filter
def _migrate(args: argparse.Namespace) -> int:
    from episodes.io import migrate

    size = shard_bytes(args.shard_mb)
    with copying_into(args.dst):
        n = migrate(
            args.src,
            args.dst,
            shard_bytes=size,
            data_format=args.data_format,
            compression=None if args.compression == "none" else args.compression,
        )
    say(f"migrated {n} episode pieces to {args.dst} (format version 2)")
    return 0


def _merge(args: argparse.Namespace) -> int:
    from episodes.io import merge

    with copying_into(args.out):
        n = merge(args.sources, args.out, **_storage(args))
    say(f"merged {n} episode pieces from {len(args.sources)} datasets into {args.out}")
    return 0


def _split(args: argparse.Namespace) -> int:
    from episodes.io import split

    if not 0.0 <= args.fraction <= 1.0:
        raise CliError("--fraction must be in [0, 1]")
    if args.seed < 0:  # the package's seed rule: an int >= 0
        raise CliError("--seed must be >= 0")
    with copying_into(f"{args.train} and {args.val}"):
        n_train, n_val = split(
            args.src, args.train, args.val, fraction=args.fraction, seed=args.seed, **_storage(args)
        )
    say(f"split: {n_train} pieces to {args.train}, {n_val} to {args.val}")
    return 0


# A bound's name where filter_args's messages put one: first, or after "is above".
_BOUND = re.compile(r"(?:^|(?<= is above ))(min|max)_(return|length)\b")


def _filter(args: argparse.Namespace) -> int:
    from episodes.io import filter_dataset
    from episodes.io.tool_args import filter_args
    from episodes.io.tools import parse_custom_data

    names = ("min_return", "max_return", "min_length", "max_length")
    bounds = {name: getattr(args, name) for name in names}
    tests = {"done_only": args.done_only, "custom_data": parse_custom_data(args.custom)}
    try:  # checked first, alone: the library names its parameters, the user typed flags
        filter_args(**bounds, **tests, predicate=None)
    except ValueError as err:
        raise CliError(_BOUND.sub(r"--\1-\2", str(err))) from err
    with copying_into(args.out):  # its errors quote paths as given
        n = filter_dataset(args.src, args.out, **bounds, **tests, **_storage(args))
    say(f"kept {n} episode pieces in {args.out}")
    return 0


def _minari_module() -> Any:
    try:
        import minari  # noqa: F401 - only checks that the extra is installed
    except ImportError as err:
        raise CliError(
            "Minari interop needs minari: pip install 'episodes[minari]' (or pip install minari)"
            f" ({err})"  # an installed one that fails to import says why
        ) from err
    # Ours needs pyarrow: a missing one is named by main, not blamed on minari.
    from episodes.io import minari_io

    return minari_io


def _export(args: argparse.Namespace) -> int:
    if args.to == "npz":
        return export_npz(args)
    n = _minari_module().export_minari(
        args.src, args.dataset_id, root=args.root, infos=False if args.no_infos else None
    )
    say(f"exported {n} episodes to Minari dataset {args.dataset_id}")
    return 0


def _import(args: argparse.Namespace) -> int:
    n = _minari_module().import_minari(args.dataset, args.out, root=args.root)
    say(f"imported {n} episodes into {args.out}")
    return 0


def _add_minari(sub: Any) -> None:
    exp = sub.add_parser(
        "export",
        help="export a dataset to Minari (needs minari) or D4RL-style flat arrays (.npz)",
        description="Write the episodes of SRC as a Minari dataset on local disk, or their "
        "transitions as D4RL-style flat arrays in one .npz file (infos left out).",
    )
    exp.add_argument("src", metavar="SRC")
    exp.add_argument("--to", choices=["minari", "npz"], required=True, help="target format")
    exp.add_argument("--dataset-id", help="--to minari: Minari id, e.g. me/cartpole-random-v0")
    exp.add_argument("--root", default=None, help="Minari datasets directory")
    exp.add_argument("--no-infos", action="store_true", help="leave the per-step infos out")
    add_npz_options(exp)
    exp.set_defaults(func=_export, usage_check=lambda args: check_export_usage(exp, args))
    imp = sub.add_parser(
        "import",
        help="import a Minari dataset (needs minari)",
        description="Copy a local Minari dataset (id or directory) into a new dataset.",
    )
    imp.add_argument("source", choices=["minari"], help="source format")
    imp.add_argument("dataset", metavar="ID_OR_DIR")
    imp.add_argument("--out", required=True, metavar="DIR")
    imp.add_argument("--root", default=None, help="Minari datasets directory")
    imp.set_defaults(func=_import)


def _add_tools(sub: Any) -> None:
    mig = sub.add_parser(
        "migrate", help="convert a dataset to format v2", description="Convert SRC into DST (v2)."
    )
    mig.add_argument("src", metavar="SRC")
    mig.add_argument("dst", metavar="DST")
    mig.add_argument("--shard-mb", type=float, default=64.0, help="target shard size (MiB)")
    mig.add_argument("--data-format", choices=["arrow", "parquet"], default="arrow")
    mig.add_argument("--compression", choices=["none", "zstd"], default="none")
    mig.set_defaults(func=_migrate)
    mer = sub.add_parser("merge", help="concatenate datasets", description="Merge datasets.")
    mer.add_argument("sources", nargs="+", metavar="SRC")
    mer.add_argument("--out", required=True, metavar="DIR")
    _add_storage(mer)
    mer.set_defaults(func=_merge)
    spl = sub.add_parser(
        "split",
        help="split into train/validation by episode",
        description="Split SRC by episode id (deterministic for a seed).",
    )
    spl.add_argument("src", metavar="SRC")
    spl.add_argument("--train", required=True, metavar="DIR")
    spl.add_argument("--val", required=True, metavar="DIR")
    spl.add_argument("--fraction", type=float, default=0.1, help="share of episodes to --val")
    spl.add_argument("--seed", type=int, default=0)
    _add_storage(spl)
    spl.set_defaults(func=_split)
    fil = sub.add_parser(
        "filter",
        help="keep episodes by return, length, done",
        description="Copy the episodes of SRC that pass every given test into --out.",
    )
    fil.add_argument("src", metavar="SRC")
    fil.add_argument("--out", required=True, metavar="DIR")
    fil.add_argument("--min-return", type=float)
    fil.add_argument("--max-return", type=float)
    fil.add_argument("--min-length", type=int)
    fil.add_argument("--max-length", type=int)
    fil.add_argument("--done-only", action="store_true", help="only terminated/truncated ones")
    fil.add_argument(
        "--custom",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="only episodes whose custom_data has KEY equal to VALUE (JSON or text); repeatable",
    )
    _add_storage(fil)
    fil.set_defaults(func=_filter)


def _add_storage(parser: Any) -> None:
    """``--data-format`` and ``--compression`` of a copy: by default the sources' own."""
    same = "default: the sources' where all their shards agree, else "
    parser.add_argument("--data-format", choices=["arrow", "parquet"], help=same + "arrow")
    parser.add_argument("--compression", choices=["none", "zstd"], help=same + "none")


def _storage(args: argparse.Namespace) -> dict[str, Any]:
    """The library's ``data_format`` and ``compression`` for a copy's flags ("same" if none)."""
    comp = args.compression
    return {
        "data_format": args.data_format or "same",
        "compression": "same" if comp is None else (None if comp == "none" else comp),
    }


# ----------------------------------------------------------------------------------- main
def _parser() -> argparse.ArgumentParser:
    parser = Parser(  # its options refuse a value of "--" (argparse's [])
        prog="episodes",
        description="Record, inspect, validate, plot, migrate, merge, split and filter episode "
        "datasets.",
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
    rec.add_argument("--format", type=int, choices=[1, 2], default=2, help="dataset format")
    rec.add_argument("--shard-mb", type=float, default=64.0, help="target shard size (MiB, v2)")
    rec.add_argument("--data-format", choices=["arrow", "parquet"], help="v2 shards' (arrow)")
    rec.add_argument("--compression", choices=["none", "zstd"], help="v2 shards' (none)")
    rec.set_defaults(func=record)
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
    add_relist(sub)
    plo = sub.add_parser(
        "plot",
        help="plot returns and lengths (needs matplotlib)",
        description="Plot episode returns and lengths to an image file.",
    )
    plo.add_argument("dir", metavar="DIR")
    plo.add_argument("--out", required=True, metavar="FILE.png")
    plo.set_defaults(func=plot)
    _add_tools(sub)
    _add_minari(sub)
    return parser


def _attach_numbers(argv: Sequence[str]) -> list[str]:
    """``--max-return -1e3`` as ``--max-return=-1e3``, which argparse reads as the value.

    Argparse takes ``-1`` and ``-1.5`` for values, but ``-1e3`` and ``-inf`` for options.
    After a flag (``--json -1e3``) the number is a usage error either way.

    Example:
        >>> _attach_numbers(["filter", "--min-return", "-inf", "--out", "-x", "--", "--a", "-1"])
        ['filter', '--min-return=-inf', '--out', '-x', '--', '--a', '-1']
    """
    out: list[str] = []
    for token in argv:
        last = out[-1] if out else ""
        if last[:2] == "--" and "=" not in last and token[:1] == "-" and "--" not in out:
            with contextlib.suppress(ValueError):
                float(token)  # a number only: "--out -x" stays as argparse reads it
                out[-1] = f"{last}={token}"
                continue
        out.append(token)
    return out


def main(argv: Sequence[str] | None = None) -> int:
    """Runs the command line; returns the exit code (0 ok, 1 error, 2 usage).

    Example:
        >>> main(["info", "/nonexistent"])  # not a dataset: a one-line error on stderr
        1
        >>> main(["info"])  # no DIR: argparse's usage and error lines on stderr
        2
    """
    try:
        args = _parser().parse_args(_attach_numbers(sys.argv[1:] if argv is None else argv))
        if hasattr(args, "usage_check"):  # a subcommand's options that depend on one another
            args.usage_check(args)
    except SystemExit as done:  # --help (0) or a usage error (2): returned, as documented
        return done.code if isinstance(done.code, int) else 2
    try:
        _refuse_empty_paths(args)
        with _terminate_as_interrupt(), warnings_as_lines():
            code = int(args.func(args))
        if sys.stdout is not None:  # None: started with stdout closed (>&-), output dropped
            try:
                sys.stdout.flush()
            except BrokenPipeError:
                raise
            except OSError as err:  # a full disk under a redirect: the work itself is done
                _dropped_output(err)
        return code
    except BrokenPipeError:
        return _closed_pipe()
    except (CliError, DatasetError, OSError, ValueError, OverflowError) as err:
        # ValueError: the library's refusal of a bad argument (split into one directory).
        # Escaped: messages may quote a dataset's strings (an env id), or a path's newline.
        say(f"episodes: error: {err}", err=True)
        return 1
    except MemoryError as err:  # numpy's words, or none: one line all the same
        say(f"episodes: error: out of memory ({str(err) or 'MemoryError'})", err=True)
        return 1
    except ModuleNotFoundError as err:  # a dependency a command loads on first use (pyarrow)
        package = (err.name or "episodes").partition(".")[0]
        if package == "episodes":  # a module of ours missing is a bug, not an install to do
            raise
        say(f"episodes: error: this command needs {package}: pip install {package}", err=True)
        return 1
    except _Terminated:
        print("episodes: terminated", file=sys.stderr)
        return 143  # what a shell reports for a command killed by SIGTERM
    except KeyboardInterrupt:
        print("episodes: interrupted", file=sys.stderr)
        return 130


class _Terminated(KeyboardInterrupt):
    """SIGTERM, raised as Ctrl-C is: a command cleans up after both the same way."""


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """While a command runs, SIGTERM raises ``_Terminated`` (a ``KeyboardInterrupt``).

    So a stopped copy removes its staged directory and a stopped record commits what it
    recorded, as on Ctrl-C. Only in the main thread, and only where SIGTERM has its default
    action (an ignored or handled SIGTERM is left so); the old handler is back afterwards.
    """
    import signal
    import threading

    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        yield
        return

    def terminated(signum: int, frame: Any) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM stops the cleanup
        raise _Terminated

    signal.signal(signal.SIGTERM, terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


# The path arguments, as named in the usage line.
_PATHS = {"dir": "DIR", "src": "SRC", "dst": "DST", "sources": "SRC", "out": "--out"}
_PATHS |= {"train": "--train", "val": "--val", "dataset": "ID_OR_DIR", "root": "--root"}


def _refuse_empty_paths(args: argparse.Namespace) -> None:
    """Refuses an empty path, which ``Path("")`` would read as the current directory."""
    for dest, name in _PATHS.items():
        value = getattr(args, dest, None)
        if value == "" or (isinstance(value, list) and "" in value):
            raise CliError(f"{name} is empty (give . for the current directory)")


def _closed_pipe() -> int:
    """The reader of stdout went away (``episodes info DIR | head -1``): stop quietly."""
    _quiet_stdout()
    return 141  # what a shell reports for a command killed by SIGPIPE
