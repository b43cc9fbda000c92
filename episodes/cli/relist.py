"""``episodes relist DIR``: lists again the shards a lost manifest line left unlisted.

A writer that opens a dataset alone moves shard files no manifest line lists to
``unlisted/shards/`` (see :mod:`episodes.io.quarantine`). This command checks each such shard
(and each complete one still unlisted in ``shards/``) and appends a manifest line for every
good one (:func:`~episodes.io.relist_shards`); ``--dry-run`` only reports, ``--discard``
removes the quarantine (:func:`~episodes.io.discard_unlisted`). No writer may be running.

Example:
    >>> import tempfile
    >>> from episodes.io import DatasetWriter
    >>> path = tempfile.mkdtemp(); DatasetWriter(path).close()
    >>> relist(argparse.Namespace(dir=path, dry_run=False, discard=False))
    nothing to relist: no shard file is unlisted
    0
"""

from __future__ import annotations

import argparse
from typing import Any

from episodes.cli.errors import say

__all__ = ["add_relist", "relist"]


def relist(args: argparse.Namespace) -> int:
    """Runs ``episodes relist``; 1 where a shard was refused (it stays where it is), else 0.

    Example:
        >>> relist(argparse.Namespace(dir="/nonexistent", dry_run=True, discard=False))
        Traceback (most recent call last):
        ...
        episodes.io.errors.NotADatasetError: /nonexistent does not exist or is not a directory
    """
    from episodes.io import discard_unlisted, relist_shards

    if args.discard:
        names = discard_unlisted(args.dir, dry_run=args.dry_run)
        verb = "would remove" if args.dry_run else "removed"
        for name in names:
            say(f"{verb} unlisted/shards/{name}")
        say(f"{verb} {len(names)} file{'s' * (len(names) != 1)} of unlisted/shards/")
        return 0
    shards = relist_shards(args.dir, dry_run=args.dry_run)
    if not shards:
        say("nothing to relist: no shard file is unlisted")
        return 0
    for shard in shards:
        what = f"shard {shard.name} ({shard.place}/): {shard.pieces} pieces, {shard.steps} steps"
        if shard.problem is not None:
            say(f"kept {what}: {shard.problem}", err=True)
        else:
            say(f"{'relisted' if shard.relisted else 'would relist'} {what}")
    good = sum(shard.ok for shard in shards)
    kept = len(shards) - good
    verb = "relisted" if not args.dry_run else "would relist"
    say(f"{verb} {good} of {len(shards)} unlisted shards" + (f"; {kept} kept" if kept else ""))
    return 1 if kept else 0


def add_relist(sub: Any) -> None:
    """Adds the ``relist`` subcommand to the parser's subparsers ``sub``.

    Example:
        >>> parser = argparse.ArgumentParser()
        >>> add_relist(parser.add_subparsers())
        >>> parser.parse_args(["relist", "d", "--dry-run"]).dry_run
        True
    """
    rel = sub.add_parser(
        "relist",
        help="list again the shards lost manifest lines left unlisted",
        description="Check the shard files no manifest line lists (those a writer moved to "
        "DIR/unlisted/shards/, and complete ones in DIR/shards/) and append a manifest line "
        "for each good one. No writer may have the dataset open. Exit code 1 where a shard "
        "was refused (damaged, or repeating pieces listed already): it stays where it is.",
    )
    rel.add_argument("dir", metavar="DIR")
    rel.add_argument("--dry-run", action="store_true", help="check and report; change nothing")
    rel.add_argument(
        "--discard", action="store_true", help="remove the files of DIR/unlisted/shards/"
    )
    rel.set_defaults(func=relist)
