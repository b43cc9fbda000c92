"""The directory a dataset writer opens: made where missing, refused where a file stands."""

from __future__ import annotations

from pathlib import Path

from episodes.io.errors import NotADatasetError

__all__ = ["make_dataset_dir"]


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
