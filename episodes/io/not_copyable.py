"""Objects that hold open files and locks of this process: no pickle, no copy."""

from __future__ import annotations

from typing import Any

__all__ = ["NotCopyable"]


class NotCopyable:
    """Refuses pickle, ``copy.copy`` and ``copy.deepcopy`` with a ``TypeError`` naming the class.

    A writer's open files and lock belong to this process and this object: a copy would share
    its file descriptors (its ``close()`` closing them under the original, whose next commit
    then lands in whatever file reuses their numbers) or, unpickled elsewhere, hold none.

    Example:
        >>> import copy
        >>> class Holder(NotCopyable):
        ...     pass
        >>> copy.copy(Holder())  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        TypeError: a Holder holds open files and the dataset's lock: it cannot be pickled ...
    """

    def __reduce__(self) -> Any:
        raise TypeError(
            f"a {type(self).__name__} holds open files and the dataset's lock: it cannot be "
            "pickled or copied; open a writer where it is used"
        )

    def __copy__(self) -> Any:
        return self.__reduce__()

    def __deepcopy__(self, memo: Any) -> Any:
        return self.__reduce__()
