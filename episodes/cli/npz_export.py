"""``episodes export SRC --to npz --out FILE.npz``: D4RL's flat arrays in one ``.npz`` file.

The arrays are :func:`episodes.io.flat_arrays.flat_transitions`'s; a Dict or Tuple
observation's leaves get keys of their own, ``observations/pos`` or ``observations/0``, and so
do extra model outputs (``extra_model_outputs/action_logp``). Every array holds numbers or
bools, so ``np.load(FILE, allow_pickle=False)`` reads the file without running code; infos
are left out. The file is written next to ``FILE`` under a temporary name, synced, then put in
place: a failed or interrupted export leaves no partial file, and an existing ``FILE`` is
refused unless ``--force`` replaces it.

Example:
    >>> import tempfile, os
    >>> from episodes import SingleAgentEpisode
    >>> from episodes.io import DatasetWriter
    >>> src = tempfile.mkdtemp()
    >>> with DatasetWriter(src) as w:
    ...     w.write(SingleAgentEpisode("a", observations=[0.0, 1.0], actions=[1],
    ...                                rewards=[1.0], terminated=True,
    ...                                len_lookback_buffer=0).to_numpy())
    >>> out = os.path.join(tempfile.mkdtemp(), "flat.npz")
    >>> args = argparse.Namespace(src=src, out=out, force=False, done_only=False,
    ...                           extra_model_outputs=False)
    >>> export_npz(args)  # doctest: +ELLIPSIS
    wrote 1 transitions of 1 episodes to .../flat.npz
    0
    >>> sorted(np.load(out, allow_pickle=False))[:3]
    ['actions', 'next_observations', 'observations']
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from episodes.cli.errors import CliError, copying_into, say

__all__ = ["add_npz_options", "check_export_usage", "export_npz", "npz_arrays"]

# Options of one target only: (dest, flag, default), refused with the other target.
_NPZ_ONLY: list[tuple[str, str, Any]] = [
    ("out", "--out", None),
    ("force", "--force", False),
    ("done_only", "--done-only", False),
    ("extra_model_outputs", "--extra-model-outputs", False),
]
_MINARI_ONLY: list[tuple[str, str, Any]] = [
    ("dataset_id", "--dataset-id", None),
    ("root", "--root", None),
]
_MINARI_ONLY += [("no_infos", "--no-infos", False)]


def add_npz_options(exp: Any) -> None:
    """Adds ``--to npz``'s options to the ``export`` parser ``exp``.

    Example:
        >>> parser = argparse.ArgumentParser(); add_npz_options(parser)
        >>> parser.parse_args(["--out", "f.npz", "--force"]).force
        True
    """
    exp.add_argument("--out", metavar="FILE.npz", help="--to npz: the file to write")
    exp.add_argument("--force", action="store_true", help="--to npz: replace an existing file")
    exp.add_argument(
        "--done-only", action="store_true", help="--to npz: only terminated/truncated episodes"
    )
    exp.add_argument(
        "--extra-model-outputs",
        action="store_true",
        help="--to npz: add each extra model output as extra_model_outputs/KEY",
    )


def check_export_usage(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """A usage error (exit code 2) for a missing option of ``--to``, or one of the other target.

    Example:
        >>> import contextlib, io
        >>> parser = argparse.ArgumentParser(prog="episodes export")
        >>> args = argparse.Namespace(to="npz", out=None, force=False, done_only=False,
        ...                           extra_model_outputs=False, dataset_id="x-v0", root=None,
        ...                           no_infos=False)
        >>> with contextlib.redirect_stderr(io.StringIO()) as err, contextlib.suppress(SystemExit):
        ...     check_export_usage(parser, args)
        >>> err.getvalue().splitlines()[-1]
        'episodes export: error: argument --dataset-id: only with --to minari'
    """
    needed, others, own = (
        ("out", _MINARI_ONLY, "npz") if args.to == "npz" else ("dataset_id", _NPZ_ONLY, "minari")
    )
    for dest, flag, default in others:
        if getattr(args, dest) != default:
            other = "minari" if own == "npz" else "npz"
            parser.error(f"argument {flag}: only with --to {other}")
    if getattr(args, needed) is None:  # as argparse words a required option
        parser.error(f"the following arguments are required: --{needed.replace('_', '-')}")


def npz_arrays(flat: dict[str, Any]) -> dict[str, np.ndarray]:
    """``flat``'s arrays by npz key: a nested dict's or tuple's leaves as ``KEY/SUBKEY``.

    Raises:
        CliError: Two leaves would get one key (a Dict key holding a ``/``).

    Example:
        >>> flat = {"observations": {"pos": np.zeros(2), "m": (np.zeros(2), np.ones(2))}}
        >>> list(npz_arrays(flat))
        ['observations/pos', 'observations/m/0', 'observations/m/1']
    """
    out: dict[str, np.ndarray] = {}

    def walk(key: str, value: Any) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(f"{key}/{k}", v)
        elif isinstance(value, (tuple, list)):
            for k, v in enumerate(value):
                walk(f"{key}/{k}", v)
        elif key in out:
            raise CliError(f"two arrays would be stored as {key!r} (a Dict key with a '/')")
        else:
            out[key] = value

    for key, value in flat.items():
        walk(key, value)
    return out


def export_npz(args: argparse.Namespace) -> int:
    """Runs ``episodes export SRC --to npz --out FILE``; returns 0 (errors raise).

    Example:
        >>> export_npz(argparse.Namespace(src="/nonexistent", out="/nonexistent/f.npz",
        ...                               force=False, done_only=False,
        ...                               extra_model_outputs=False))  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        episodes.cli.errors.CliError: --out /nonexistent/f.npz: its directory ... does not exist
    """
    from episodes.io.flat_arrays import flat_transitions

    out = Path(args.out)
    _check_out(out, args.out, args.force)  # before the dataset is read
    flat = flat_transitions(
        args.src, done_only=args.done_only, extra_model_outputs=args.extra_model_outputs
    )
    arrays = npz_arrays(flat)
    with copying_into(args.out):
        _write(out, args.out, arrays, force=args.force)
    rows = len(flat["rewards"])
    episodes = int(np.count_nonzero(flat["terminals"] | flat["timeouts"]))
    say(f"wrote {rows} transitions of {episodes} episodes to {args.out}")
    return 0


def _check_out(out: Path, given: str, force: bool) -> None:
    if out.is_dir():
        raise CliError(f"--out {given} is a directory: give a file name (FILE.npz)")
    if os.path.lexists(out) and not force:
        raise CliError(f"--out {given} exists: pass --force to replace it")
    parent = out.parent
    if not parent.is_dir():
        raise CliError(f"--out {given}: its directory {parent} does not exist")


def _write(out: Path, given: str, arrays: dict[str, np.ndarray], *, force: bool) -> None:
    """Writes ``arrays`` to a temporary file next to ``out``, then links or renames it there."""
    fd, name = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name[:200]}.partial-")
    tmp = Path(name)
    try:
        with os.fdopen(fd, "wb") as f:  # a file object: np.savez adds no ".npz" to the name
            np.savez(f, **arrays)  # type: ignore[arg-type]  # numpy's stubs: keys are arrays
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # as a file opened for writing gets, not mkstemp's 0o600
        if force:
            os.replace(tmp, out)
        else:
            try:  # a link fails where a file was put there since the check: never replaced
                os.link(tmp, out)
            except FileExistsError:
                raise CliError(f"--out {given} exists: pass --force to replace it") from None
            except OSError:  # a file system without hard links
                if os.path.lexists(out):
                    raise CliError(f"--out {given} exists: pass --force to replace it") from None
                os.replace(tmp, out)
    finally:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
    dir_fd = os.open(out.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
