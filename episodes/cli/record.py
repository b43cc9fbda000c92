"""``episodes record``: a random policy's episodes of a gymnasium env, written to a dataset."""

from __future__ import annotations

import argparse
import contextlib
import os
from pathlib import Path
from typing import Any

from episodes.cli.errors import CliError, progress, say
from episodes.io import DatasetError, EpisodeWriter, NotADatasetError, UnsupportedVersionError

__all__ = ["MAX_NUM_ENVS", "MAX_SHARD_MB", "record", "shard_bytes"]

MAX_SHARD_MB = 2**20  # 1 TiB: a shard is buffered in memory before it is written
MAX_NUM_ENVS = 2**16


def shard_bytes(megabytes: float) -> int:
    """``--shard-mb`` in bytes: at least one byte, at most ``MAX_SHARD_MB``.

    Example:
        >>> shard_bytes(0.5)
        524288
    """
    if not 0 < megabytes <= MAX_SHARD_MB or int(megabytes * 2**20) < 1:  # NaN fails too
        raise CliError(f"--shard-mb must be > 0 and <= {MAX_SHARD_MB} (1 TiB), got {megabytes}")
    return int(megabytes * 2**20)


def record(args: argparse.Namespace) -> int:
    """``episodes record ENV_ID --steps N --out DIR``: a random policy's episodes, written.

    Example:
        >>> import os, tempfile
        >>> from episodes.cli import main
        >>> out = os.path.join(tempfile.mkdtemp(), "cartpole")
        >>> main(["record", "CartPole-v1", "--steps", "8", "--seed", "0", "--out", out])
        recorded 8 steps in 1 episodes to ...
        0
    """
    import gymnasium as gym

    from episodes.io.other_env import other_env_problem  # no pyarrow: --format 1 needs none
    from episodes.io.writer import removed_if_failed
    from episodes.runner import unrecordable_kind

    if args.steps < 1 or args.num_envs < 1:
        raise CliError("--steps and --num-envs must be >= 1")
    if args.num_envs > min(args.steps, MAX_NUM_ENVS):
        raise CliError(f"--num-envs must be <= --steps (every env steps) and <= {MAX_NUM_ENVS}")
    if args.seed is not None and args.seed < 0:
        raise CliError("--seed must be >= 0")
    shard_size = shard_bytes(args.shard_mb)
    _storage(args)  # checked before the env is made
    if os.path.lexists(args.out) and not os.path.isdir(args.out):
        raise CliError(f"--out {args.out} exists and is not a directory; give a directory")
    try:
        env = gym.make_vec(args.env_id, args.num_envs, vectorization_mode="sync")
    except MemoryError:
        raise
    except Exception as err:  # noqa: BLE001 - gymnasium raises many types for a bad id
        raise CliError(f"cannot create env {args.env_id!r}: {err}") from err
    try:
        env_id = getattr(env.spec, "id", None) or args.env_id  # "module:Env-v0" stores Env-v0
        spaces = (env.single_observation_space, env.single_action_space)
        for name, kind in zip(("observation", "action"), map(unrecordable_kind, spaces)):
            if kind:
                raise CliError(f"cannot record {env_id}: the runner cannot batch {kind} {name}s")
        other = other_env_problem(args.out, env_id, *spaces)  # before anything is made
        if other:
            raise CliError(other)
        stored = [False]  # whether this record committed an episode before an interrupt
        try:
            with removed_if_failed(args.out):  # what it made, unless an episode went in
                other = _record_into(args, env, env_id, shard_size, stored)
        except KeyboardInterrupt:
            say(_interrupted_note(args.out, stored=stored[0]), err=True)
            raise
        if other:  # raised here: the dataset another record made at args.out stays as it is
            raise CliError(other)
    finally:
        env.close()
    return 0


def _sampled(runner: Any, steps: int, env_id: str, recorded: int) -> Any:
    """``runner.sample(steps)``; an env or policy that fails is a one-line ``CliError``.

    The caller adds to the message what the failed record leaves (:func:`_failure_note`).
    """
    try:
        return runner.sample(steps)
    except MemoryError:
        raise
    except Exception as err:  # noqa: BLE001 - an env raises what it likes
        raise CliError(
            f"{env_id} failed after {recorded} recorded steps ({type(err).__name__}: {err})"
        ) from err


def _failure_note(out: str, *, stored: bool) -> str:
    """What a record that failed leaves at ``out``: what was stored stays, the rest goes.

    A format v1 dataset stores each episode as it is written, a v2 one each shard as it is
    committed: those cannot be taken back (other records may have appended since).

    Example:
        >>> _failure_note("runs/", stored=False)
        'this record is taken back'
    """
    if stored:
        return f"the episodes it stored before the failure stay in {out}, the others are dropped"
    return "this record is taken back"


def _interrupted_note(out: str, *, stored: bool) -> str:
    """What an interrupted record left at ``out``, once ``removed_if_failed`` has run.

    Example:
        >>> _interrupted_note("/nonexistent/ds", stored=False)
        'nothing was recorded before the interrupt; /nonexistent/ds was removed'
    """
    if stored:
        return f"the episodes recorded so far are kept in {out}"
    if not os.path.lexists(out):
        return f"nothing was recorded before the interrupt; {out} was removed"
    return f"nothing was recorded into {out} before the interrupt"


def _storage(args: argparse.Namespace) -> dict[str, Any]:
    """``DatasetWriter``'s ``data_format`` and ``compression``, from the flags.

    ``--data-format`` and ``--compression`` are for format 2 only: a v1 chunk holds .npy files.
    """
    fmt, comp = getattr(args, "data_format", None), getattr(args, "compression", None)
    if args.format == 1 and (fmt, comp) != (None, None):
        raise CliError("--data-format and --compression apply to --format 2 only")
    return {"data_format": fmt or "arrow", "compression": None if comp in (None, "none") else comp}


def _record_into(
    args: argparse.Namespace, env: Any, env_id: str, shard_size: int, stored: list[bool]
) -> str:
    """Records into ``args.out``; returns why not ("" once recorded) if it is another env's.

    Asked again once the writer has the dataset open, before it writes: a record of another
    env started at the same moment may have made it since the first check. Then the answer
    holds until this writer closes: a v2 header, naming the env, is made whole by the first
    writer (the others read it) and never changes; a v1 writer holds the dataset's lock.
    """
    from episodes.io import DatasetMetadata
    from episodes.io.other_env import other_env_problem
    from episodes.runner import EnvRunner, RandomPolicy

    # The runner records the same number of steps in every env: round up to a multiple.
    per_env = -(-args.steps // args.num_envs)
    policy = RandomPolicy(env.action_space, seed=args.seed)
    runner = EnvRunner(env, policy, len_lookback_buffer=0, seed=args.seed)
    ids: set[str] = set()
    done = 0
    writer: Any
    try:
        if args.format == 1:
            writer = EpisodeWriter(args.out)
        else:
            from episodes.io import DatasetWriter  # pyarrow, loaded for format 2 only

            metadata = DatasetMetadata.from_env(
                env,
                seeds=None if args.seed is None else [args.seed],
                policy="random",
                user={"num_envs": args.num_envs, "command": "episodes record"},
            )
            metadata.env_id = env_id
            writer = DatasetWriter(
                args.out, metadata=metadata, shard_bytes=shard_size, **_storage(args)
            )
    except (NotADatasetError, UnsupportedVersionError) as err:  # the other format's dataset?
        other = _other_format(args.out, args.format)
        if other:
            raise CliError(other) from err
        raise
    try:
        with writer, progress(per_env * args.num_envs, "record") as bar:
            other = other_env_problem(
                args.out, env_id, env.single_observation_space, env.single_action_space
            )
            if other:
                return other
            if args.format != 1:  # before recording: a same-seed record repeats the first one's
                note = _header_note(args.out, metadata)
                if note:
                    say(note, err=True)
            try:
                while done < per_env:
                    block = min(256, per_env - done)
                    # Finished episodes come whole; ongoing ones as chunks that load_episode joins.
                    for chunk in _sampled(runner, block, env_id, done * args.num_envs):
                        if len(chunk) or chunk.is_done:
                            writer.write(chunk)
                            ids.add(chunk.id_)
                    done += block
                    bar.update(block * args.num_envs)
            except KeyboardInterrupt:  # Ctrl-C keeps what was recorded (v1 has stored it already)
                with contextlib.suppress(KeyboardInterrupt):  # a second one stops the commit
                    getattr(writer, "flush", lambda: None)()
                stored[0] = bool(ids) if args.format == 1 else bool(writer.committed)
                raise
            except CliError as err:  # the env or policy failed: what is stored stays
                kept = bool(ids) if args.format == 1 else bool(writer.committed)
                raise CliError(f"{err}; {_failure_note(args.out, stored=kept)}") from err.__cause__
    except BrokenPipeError:  # the progress line's pipe: main's quiet exit, not a write failure
        raise
    except (OSError, DatasetError) as err:  # a full disk, say: what is stored stays
        kept = bool(ids) if args.format == 1 else bool(writer.committed)
        note = _failure_note(args.out, stored=kept)
        raise CliError(f"writing {args.out} failed ({err}); {note}") from err
    say(f"recorded {per_env * args.num_envs} steps in {len(ids)} episodes to {args.out}")
    return ""


def _other_format(out: str, given: int) -> str:
    """Why ``--format given`` cannot append to ``out``: a dataset of the other format ("" if not).

    The writers' own words name their classes; a command-line user picks the format by flag.

    Example:
        >>> _other_format("/nonexistent", 1)
        ''
    """
    from episodes.io.shards import is_v2

    if given == 1 and is_v2(Path(out)):
        return f"{out} is a format v2 dataset; pass --format 2 to append to it"
    if given != 1 and (Path(out) / "format.json").is_file():
        return (
            f"{out} is a format v1 dataset; pass --format 1 to append to it "
            "(or convert it to v2 with `episodes migrate`)"
        )
    return ""


def _header_note(out: str, mine: Any) -> str:
    """A note where the dataset's stored seed or ``num_envs`` are not this record's, or are.

    Asked before recording. With the same seeds as the record that made a dataset holding
    episodes, this record repeats that one's first episodes: the note says so.

    A v2 dataset has one header, written by the record that made it: a record appended to it
    leaves that header's metadata as it was.

    Example:
        >>> import tempfile
        >>> from episodes.io import DatasetMetadata, DatasetWriter
        >>> path = tempfile.mkdtemp()
        >>> DatasetWriter(path, metadata=DatasetMetadata(seeds=[0])).close()
        >>> print(_header_note(path, DatasetMetadata(seeds=[7])))  # doctest: +ELLIPSIS
        note: ... keeps the metadata of the record that made it (seeds [0], num_envs None)...
    """
    from episodes.io import Dataset

    dataset = Dataset(out)
    stored = dataset.metadata
    num_envs = stored.user.get("num_envs") if isinstance(stored.user, dict) else None
    if stored.seeds == mine.seeds and num_envs == mine.user.get("num_envs"):
        if mine.seeds is None or not len(dataset):
            return ""
        return (  # the same seeded runner: its first episodes again, under new ids
            f"note: {out} was made by a record with the same seeds {mine.seeds}: this record "
            "repeats the episodes that one began with (under new ids); pass another --seed "
            "to record new ones"
        )
    return (
        f"note: {out} keeps the metadata of the record that made it (seeds {stored.seeds}, "
        f"num_envs {num_envs}); this record's (seeds {mine.seeds}, num_envs "
        f"{mine.user.get('num_envs')}) is not stored"
    )
