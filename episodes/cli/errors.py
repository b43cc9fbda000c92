"""What every command shares: the error printed as one line, and the progress bar."""

from __future__ import annotations

import sys
from typing import Any

__all__ = ["CliError", "progress"]


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
