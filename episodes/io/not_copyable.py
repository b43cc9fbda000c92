"""Objects that hold open files and locks of this process: no pickle, no copy."""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

from episodes.io.errors import DatasetError

__all__ = ["NotCopyable", "WriterFiles"]

_Held = TypeVar("_Held", bound="NotCopyable")


class NotCopyable:
    """Refuses pickle, ``copy.copy`` and ``copy.deepcopy`` with a ``TypeError`` naming the class.

    A writer's open files and lock belong to this process and this object: a copy would share
    its file descriptors (its ``close()`` closing them under the original, whose next commit
    then lands in whatever file reuses their numbers) or, unpickled elsewhere, hold none. A
    closed one holds none and writes nothing more: it is refused too, saying so, and so is a
    ``with`` block over it, with the error a write would raise (``_closed_error``).

    Example:
        >>> import copy
        >>> class Holder(NotCopyable):
        ...     pass
        >>> copy.copy(Holder())  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        TypeError: a Holder holds open files and the dataset's lock: it cannot be pickled ...
    """

    def _closed_error(self) -> Exception | None:
        """The error a use raises once the object is closed; None while it is open.

        Example:
            >>> NotCopyable()._closed_error() is None  # a subclass says when it is closed
            True
        """
        return None

    def __enter__(self: _Held) -> _Held:
        error = self._closed_error()
        if error is not None:
            raise error
        return self

    def __reduce__(self) -> Any:
        name = type(self).__name__
        article = "an" if name[:1].upper() in "AEIOU" else "a"
        if self._closed_error() is not None:
            raise TypeError(
                f"{article} {name} that is closed holds no files and writes nothing more; it "
                "cannot be pickled or copied either: open a new writer where one is needed"
            )
        raise TypeError(
            f"{article} {name} holds open files and the dataset's lock: it cannot be "
            "pickled or copied; open a writer where it is used"
        )

    def __copy__(self) -> Any:
        return self.__reduce__()

    def __deepcopy__(self, memo: Any) -> Any:
        return self.__reduce__()


class WriterFiles(NotCopyable):
    """A writer of the dataset at ``path``: closed once its manifest descriptor is None.

    Example:
        >>> import tempfile
        >>> from episodes.io import DatasetWriter, EpisodeWriter
        >>> writer = EpisodeWriter(tempfile.mkdtemp()); writer.close()
        >>> isinstance(writer, WriterFiles), isinstance(writer._closed_error(), DatasetError)
        (True, True)
    """

    path: Path
    _manifest_fd: int | None

    def _closed_error(self) -> DatasetError | None:
        if self._manifest_fd is not None:
            return None
        return DatasetError(f"the writer for {self.path} is closed")
