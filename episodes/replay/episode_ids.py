"""Episode ids as the replay buffers take them: values that hash as they compare.

The buffers find an episode's stored rows by its id in a dict, so a chunk continues an
episode only if its id hashes and compares equal to the stored one. An array (anything with
``__dlpack__``: a torch or jax tensor, a 0-d numpy array) compares by value but hashes by
identity or not at all: a 0-d tensor taken from a collector's trajectory ids would start a new
episode with every chunk, leaving the earlier ones running forever. Such ids are refused.
"""

from __future__ import annotations

from typing import Any

__all__ = ["check_episode_id"]


def check_episode_id(id_: Any) -> None:
    """Refuses an episode id the buffers cannot find episodes by.

    Raises:
        TypeError: ``id_`` (or an item of a tuple id) is unhashable or an array; the message
            says what to pass instead.

    Example:
        >>> import numpy as np
        >>> check_episode_id(("run", np.int64(3)))  # numpy scalars hash as their value
        >>> check_episode_id(np.array(3))
        Traceback (most recent call last):
        ...
        TypeError: episode id array(3) is an array (ndarray), which compares by value but \
hashes by identity or not at all: the replay buffer finds episodes by id; use a str, int or \
tuple id (int(x) or x.item() of a 0-d array)
    """
    array = _array_in(id_)
    if array is not None:
        raise TypeError(
            f"episode id {id_!r} is {'an array' if array is id_ else 'a tuple holding an array'}"
            f" ({type(array).__name__}), which compares by value but hashes by identity or not "
            "at all: the replay buffer finds episodes by id; use a str, int or tuple id "
            "(int(x) or x.item() of a 0-d array)"
        )
    try:
        hash(id_)
    except TypeError:
        raise TypeError(
            f"episode id {id_!r} is unhashable ({type(id_).__name__}): the replay buffer "
            "finds episodes by id; use a str, int or tuple id"
        ) from None


def _array_in(id_: Any) -> Any:
    if hasattr(type(id_), "__dlpack__"):
        return id_
    if type(id_) is tuple:
        for part in id_:
            found = _array_in(part)
            if found is not None:
                return found
    return None
