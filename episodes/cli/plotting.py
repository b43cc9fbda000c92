"""``episodes plot``: a dataset's episode returns and lengths, drawn to an image file.

matplotlib (the ``plot`` extra) is imported when the command runs, never with the CLI. Drawing
and writing fail apart: values matplotlib cannot draw (returns spanning most of float64's
range, such as +-1e308, whose axis limits overflow while matplotlib scales them) are
"cannot draw the plot of DIR" with the values' range, and nothing is written; a file that
cannot be written (no such directory, an unknown extension) is "cannot write FILE". numpy's
overflow warnings from matplotlib's scaling are not let through (:func:`drawing`).

Example:
    >>> from episodes.cli import main
    >>> main(["plot", "/nonexistent", "--out", "returns.png"])  # the error goes to stderr
    1
"""

from __future__ import annotations

import argparse
import contextlib
import math
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from episodes.cli.errors import CliError, say
from episodes.io import dataset_info
from episodes.io.reader import printable

__all__ = ["drawing", "plot"]


def plot(args: argparse.Namespace) -> int:
    """``episodes plot DIR --out FILE.png``: returns and lengths side by side, one point each.

    Raises:
        CliError: matplotlib is missing, the plot cannot be drawn for these values, or the
            file cannot be written (each said apart).

    Example:
        >>> try:
        ...     plot(argparse.Namespace(dir="/nonexistent", out="x.png"))
        ... except Exception as err:  # no dataset there (or, without matplotlib, a CliError)
        ...     print(type(err).__name__ in ("NotADatasetError", "CliError"))
        True
    """
    try:
        import matplotlib
    except ImportError as err:
        raise CliError(
            "plotting needs matplotlib: pip install 'episodes[plot]' (or pip install matplotlib)"
            f" ({err})"  # an installed one that fails to import says why
        ) from err
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    info = dataset_info(args.dir)
    returns = [e.ret for e in info.episodes]
    lengths = [e.length for e in info.episodes]
    fig, (ax_ret, ax_len) = plt.subplots(1, 2, figsize=(10, 4))
    try:
        what = f"the plot of {printable(info.path)} for these values ({_span(returns)})"
        with drawing(what, f"nothing was written to {args.out}"):
            ax_ret.plot(returns, marker=".", linestyle="-")
            ax_ret.set_title("episode return")
            ax_ret.set_xlabel("episode")
            ax_len.plot(lengths, marker=".", linestyle="-", color="tab:orange")
            ax_len.set_title("episode length")
            ax_len.set_xlabel("episode")
            # Drawn as given: a path holding "$" is no mathtext (nor an error in its parser);
            # one not valid UTF-8 escaped, as printed (FreeType refuses a lone surrogate).
            title = f"{printable(info.path)}: {info.num_episodes} episodes, {info.num_steps} steps"
            fig.suptitle(title, parse_math=False, usetex=False)
            fig.tight_layout()
            fig.canvas.draw()  # in memory: what fails here is the drawing, not the file
        _write(fig, args.out)
    finally:
        plt.close(fig)
    say(f"wrote {args.out}")
    return 0


def _write(fig: Any, out: str) -> None:
    """Saves the drawn figure to ``out``; whatever fails is "cannot write ``out``"."""
    try:
        known = fig.canvas.get_supported_filetypes()
        if Path(out).suffix.lstrip(".").lower() not in known or Path(out).is_dir():
            # Without an extension matplotlib writes NAME.png, not the file we would report.
            raise ValueError(f"--out needs a file name ending in one of .{', .'.join(known)}")
        with warnings.catch_warnings():  # the axis scaled again: drawn already, quietly
            warnings.filterwarnings("ignore", ".*encountered", RuntimeWarning)
            fig.savefig(out)
    except MemoryError:
        raise
    except Exception as err:  # noqa: BLE001 - RuntimeError: pgf without TeX; any backend's
        raise CliError(f"cannot write {out}: {' '.join(str(err).split())}") from err


def _span(returns: Sequence[float]) -> str:
    finite = [v for v in returns if math.isfinite(v)]
    if not finite:
        return "no finite returns"
    return f"returns from {min(finite):.4g} to {max(finite):.4g}"


@contextlib.contextmanager
def drawing(what: str, after: str = "") -> Iterator[None]:
    """Raises "cannot draw ``what``" where the block fails; keeps numpy's warnings quiet.

    matplotlib scales an axis with numpy scalars: limits near float64's largest values
    overflow, with numpy's ``RuntimeWarning`` ("overflow encountered in scalar subtract"),
    after which it may still draw a good plot (returns up to 9e307 do) or fail with an error
    of its own (``arange: cannot compute length``). Such warnings are not let through; an
    error is a :class:`~episodes.cli.errors.CliError` naming ``what`` (and ``after``, what
    was left undone), with the first such warning's words where it has none of its own.
    Other warnings go on as they were issued.

    Example:
        >>> import numpy as np
        >>> with drawing("the plot"):  # warned, drawn: no error, no warning
        ...     _ = np.float64(1e308) * 10
        >>> try:
        ...     with drawing("the plot", "nothing was written"):
        ...         raise ValueError("arange: cannot compute length")
        ... except CliError as err:
        ...     print(err)
        cannot draw the plot: arange: cannot compute length; nothing was written
    """
    failure: Exception | None = None
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always", RuntimeWarning)
        try:
            yield
        except MemoryError:
            raise
        except Exception as err:  # noqa: BLE001 - matplotlib's own words for these values
            failure = err
    numeric = [w for w in seen if w.category is RuntimeWarning and "encountered" in str(w.message)]
    for w in seen:
        if w not in numeric:  # as they were issued, to the filters the caller has
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if failure is None:
        return
    cause = " ".join(str(failure).split())
    tail = f"; {after}" if after else ""
    raise CliError(f"cannot draw {what}: {cause}{tail}") from failure
