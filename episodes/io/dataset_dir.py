"""The directories a dataset writer opens: made where missing, refused where a file stands."""

from __future__ import annotations

import errno
import os
from pathlib import Path

from episodes.io.errors import DatasetIOError, NotADatasetError

__all__ = ["make_dataset_dir", "open_shards_dir"]


def make_dataset_dir(path: Path) -> None:
    """Makes ``path`` (and its parents) a directory for a writer, if it is not one already.

    Raises:
        NotADatasetError: ``path`` is a file or lies under one (not ``mkdir``'s
            ``FileExistsError`` or ``NotADirectoryError``); nothing is made.

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp()); make_dataset_dir(root / "a" / "b")
        >>> (root / "a" / "b").is_dir()
        True
    """
    try:
        path.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError) as err:  # a file there, or above it
        raise NotADatasetError(f"{path} is a file or lies under one, not a directory") from err


def open_shards_dir(shards: Path) -> int:
    """A descriptor of the writer's ``shards/``, opened without following a link.

    Leftovers are removed and moved through it, which must never reach another directory's
    files, so a symlink (or a file) there is refused; a refusal of the system's is said as it is.

    Raises:
        NotADatasetError: ``shards`` is a symlink or no directory.
        DatasetIOError: the system refused to open it (no permission, an I/O error).

    Example:
        >>> import tempfile
        >>> root = Path(tempfile.mkdtemp()); (root / "shards").symlink_to(root)
        >>> open_shards_dir(root / "shards")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        episodes.io.errors.NotADatasetError: .../shards is not a plain directory (a symlink?): ...
    """
    try:
        return os.open(shards, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as error:
        if error.errno not in (errno.ELOOP, errno.ENOTDIR):  # the system's refusal
            raise DatasetIOError(
                error.errno, f"cannot open the directory {shards}: {error.strerror or error}"
            ) from error
        raise NotADatasetError(
            f"{shards} is not a plain directory (a symlink?): refusing to write through it"
        ) from error
