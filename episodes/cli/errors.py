"""What every command shares: its parser, its lines printed escaped, one-line errors, the bar."""

from __future__ import annotations

import argparse
import contextlib
import errno
import os
import sys
import threading
import warnings
from collections.abc import Iterator
from typing import Any

from episodes.io.reader import printable

__all__ = ["CliError", "Parser", "copying_into", "progress", "say", "warnings_as_lines"]


class CliError(Exception):
    """A user-facing error: printed as one line, exit code 1.

    Example:
        >>> import contextlib, io
        >>> from episodes.cli import main
        >>> err = io.StringIO()
        >>> with contextlib.redirect_stderr(err):
        ...     main(["record", "CartPole-v1", "--steps", "0", "--out", "unused"])
        1
        >>> print(err.getvalue(), end="")
        episodes: error: --steps and --num-envs must be >= 1
    """


#: What a full disk or file-size limit raises (the system's words name no file).
_NO_ROOM = {errno.ENOSPC, errno.EFBIG, errno.EDQUOT}


@contextlib.contextmanager
def copying_into(destinations: str) -> Iterator[None]:
    """A whole-dataset copy's block: a full disk says where, and that nothing was written.

    The copies take back what they staged when they fail; the system's error (``[Errno 28]
    No space left on device``) names no file, so the line would not say which command's
    output ran out of room.

    Example:
        >>> with copying_into("out"):
        ...     raise OSError(errno.ENOSPC, "No space left on device")
        Traceback (most recent call last):
        episodes.cli.errors.CliError: writing out failed ([Errno 28] No space left on device); ...
    """
    try:
        yield
    except OSError as err:
        if err.errno not in _NO_ROOM or err.filename is not None:
            raise
        raise CliError(f"writing {destinations} failed ({err}); nothing was written") from err


@contextlib.contextmanager
def warnings_as_lines() -> Iterator[None]:
    r"""While a command runs, a warning it gives prints as one ``episodes: warning: ...`` line.

    Python's own text names a file and line of this package and quotes its source line, which
    say nothing to the user of a command. Only the printed text changes (escaped as
    :func:`say` escapes): filters (``-W error``) and a caller recording warnings see them as
    before, and the exit code stays the command's.

    Example:
        >>> with warnings_as_lines():
        ...     warnings.formatwarning("infos left out\n", UserWarning, "x.py", 1)
        'episodes: warning: infos left out\\n\n'
    """
    with _SWAPPING:  # main() in several threads: swapped by the first in, put back by the last out
        if not _SWAPPED:
            _SWAPPED.append(warnings.formatwarning)
        _SWAPPED.append(_warning_line)
        warnings.formatwarning = _warning_line
    try:
        yield
    finally:
        with _SWAPPING:
            _SWAPPED.pop()
            if len(_SWAPPED) == 1:
                warnings.formatwarning = _SWAPPED.pop()


#: Python's formatter, then one entry per command running now (guarded by ``_SWAPPING``).
_SWAPPED: list[Any] = []
_SWAPPING = threading.Lock()


def _warning_line(
    message: Warning | str, category: type[Warning], filename: str, lineno: int, line: Any = None
) -> str:
    return printable(f"episodes: warning: {message}") + "\n"


def progress(total: int | None, desc: str) -> Any:
    """A progress bar on stderr, shown only when stderr is a terminal (tqdm's ``disable=None``).

    None is shown (nor written to) where stderr is closed: started with ``2>&-``, Python's
    ``sys.stderr`` is None.

    Example:
        >>> with progress(3, "record") as bar:  # silent here: stderr is no terminal
        ...     _ = bar.update(3)
        >>> bar.total
        3
    """
    from tqdm import tqdm

    unit = "step" if desc == "record" else "chunk"
    stream = sys.stderr
    closed = stream is None or getattr(stream, "closed", False)
    hide = True if closed else None  # None: tqdm shows it on a terminal only
    return tqdm(total=total, desc=desc, unit=unit, disable=hide, file=stream, leave=False)


def say(line: str, *, err: bool = False) -> None:
    r"""Prints a line escaped as ``printable`` escapes it: control characters, lone surrogates.

    A dataset's strings could forge lines; a path that is not valid UTF-8 (a lone surrogate
    in Python) would fail a strict UTF-8 stdout after the work is done, and so would a
    character the stream's encoding lacks (``\xf8`` on an ASCII stdout: escaped).

    Example:
        >>> say("wrote runs-\udcff\nok")
        wrote runs-\udcff\nok
    """
    stream = sys.stderr if err else sys.stdout
    if stream is None:  # closed (2>&-); print(file=None) would write to stdout
        return
    text = printable(line)
    encoding = getattr(stream, "encoding", None)
    if encoding:  # an ASCII or latin-1 stdout (a cron job, an old terminal): escaped, not failed
        text = text.encode(encoding, "backslashreplace").decode(encoding)
    try:
        print(text, file=stream)
    except BrokenPipeError:
        raise  # the reader went away: main stops quietly
    except OSError as error:
        if err:
            raise
        _dropped_output(error)  # a full disk under a redirect: the command goes on


def _dropped_output(error: OSError) -> None:
    """Says on stderr that stdout failed (``> /dev/full``), then drops what stdout gets.

    The command's work goes on and its exit code stays its own, as with stdout closed.
    """
    say(f"episodes: the command's output could not be written ({error}); it is dropped", err=True)
    _quiet_stdout()


def _quiet_stdout() -> None:
    """Points stdout at /dev/null: Python would flush it again at exit and complain."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose one-value options refuse a value that is no value.

    Given ``--out=--``, argparse stores ``[]`` (3.11, 3.12 before 3.12.3) or ``"--"`` (later):
    here a usage error (exit code 2) naming the option, as for a missing value. Subparsers are
    of this class too.

    Example:
        >>> import contextlib, io
        >>> parser = Parser(prog="episodes filter"); _ = parser.add_argument("--out")
        >>> with contextlib.redirect_stderr(io.StringIO()) as err, contextlib.suppress(SystemExit):
        ...     parser.parse_args(["--out=--"])
        >>> err.getvalue().splitlines()[-1].split("error: ")[-1]
        'argument --out: expected one argument, not -- (a path so named is ./--)'
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.register("action", None, _Store)
        self.register("action", "store", _Store)
        self.register("action", "append", _Append)


class _Store(argparse.Action):
    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        setattr(namespace, self.dest, _one(self, parser, values))


class _Append(argparse.Action):
    def __call__(self, parser: Any, namespace: Any, values: Any, option: Any = None) -> None:
        items = getattr(namespace, self.dest, None) or []  # a new list: the default stays
        setattr(namespace, self.dest, [*items, _one(self, parser, values)])


def _one(action: argparse.Action, parser: argparse.ArgumentParser, values: Any) -> Any:
    # Python 3.12.3+ and 3.13 keep "--" as the value where 3.11 stored []; a positional after
    # the "--" separator may be named "--" (``filter -- --``), an option's value may not.
    given_dashes = values == "--" and bool(action.option_strings)
    if action.nargs is None and (isinstance(values, list) or given_dashes):
        name = "/".join(action.option_strings) or action.metavar or action.dest
        parser.error(f"argument {name}: expected one argument, not -- (a path so named is ./--)")
    return values
