"""One dtype per leaf for the numpy'd pieces of one episode, before ``load_episode`` joins them.

A dataset appended to by another run (an env that now gives float64 observations, a policy
giving int64 actions) can hold pieces of one id whose numpy'd columns differ in dtype. Joined
as stored, the later pieces' values would be cast into the first piece's dtype (float64 rounded
to float32) or refused (int64 ``2**40`` in an int32 column); ``load_episode(numpy=True)``
gives each column the dtype the whole episode's values take instead, as ``to_numpy`` gives a
list-mode episode's: numpy's ``result_type`` of the pieces' dtypes.

Example:
    >>> import numpy as np
    >>> from episodes import SingleAgentEpisode
    >>> a = SingleAgentEpisode("a", observations=np.zeros(2, np.float32), actions=[0],
    ...                        rewards=[1.0], len_lookback_buffer=0).to_numpy()
    >>> b = SingleAgentEpisode("a", observations=np.array([0.0, 0.5]), actions=[1],
    ...                        rewards=[1.0], len_lookback_buffer=0, t_started=1).to_numpy()
    >>> _ = widen_pieces([a, b]); a.get_observations().dtype.name
    'float64'
"""

from __future__ import annotations

from typing import Any

import numpy as np

from episodes.buffer import InfiniteLookbackBuffer
from episodes.episode import SingleAgentEpisode
from episodes.io.encoding import numpy_episode
from episodes.io.errors import DatasetError, DatasetIOError
from episodes.spaces.contains import checker_for
from episodes.structs import flatten, skeleton, unflatten

__all__ = ["joined_dtype", "widen_pieces"]


def joined_dtype(dtypes: list[np.dtype[Any]]) -> np.dtype[Any] | None:
    """The dtype one leaf's ``dtypes`` join in: numpy's ``result_type`` of numbers, or of strings.

    None where they are not all numbers (bools, ints, floats, complex) or not all strings of
    one kind: those are left as stored, and the join refuses what its column cannot take.

    Example:
        >>> joined_dtype([np.dtype(np.int32), np.dtype(np.int64)]).name
        'int64'
        >>> joined_dtype([np.dtype("<U2"), np.dtype("<U5")]).str, joined_dtype([np.dtype("<U2"),
        ...     np.dtype(np.int64)])
        ('<U5', None)
    """
    kinds = {dtype.kind for dtype in dtypes}
    if kinds <= set("biufc") or kinds in ({"U"}, {"S"}):
        return np.result_type(*dtypes)
    return None


def widen_pieces(pieces: list[SingleAgentEpisode]) -> list[SingleAgentEpisode]:
    """Casts the numpy'd columns of ``pieces`` (in join order) to the dtypes they join in.

    Returns ``pieces``, changed in place.

    A column counts where its piece holds items the join keeps: the first piece's stored items,
    a later piece's visible ones. Columns whose items differ in structure, and leaves of other
    kinds (see :func:`joined_dtype`), are left as stored. After a numpy'd first piece, list-mode
    pieces are numpy'd first (as ``to_numpy`` would stack their items); one that cannot be is
    left as it is.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> a = SingleAgentEpisode("a", observations=[0], len_lookback_buffer=0).to_numpy()
        >>> widen_pieces([a])[0].get_observations().dtype.name
        'int64'
    """
    if pieces[0].is_numpy:  # a list-mode piece's items would be cast into its columns
        for k, piece in enumerate(pieces[1:], 1):
            if not piece.is_numpy and _in_spaces_of(pieces[0], piece):
                try:
                    numpy_episode(piece, f"piece {k} of episode {piece.id_!r}")
                except DatasetIOError:
                    raise
                except DatasetError:  # left in list mode: the join says what does not fit
                    pass
    for name in pieces[0].named_columns():
        held = []
        for k, piece in enumerate(pieces):
            column = piece.named_columns().get(name)
            if column is None or not column.finalized:
                continue
            kept = column.len_incl_lookback() if k == 0 else len(column)
            if kept:
                held.append(column)
        if len(held) > 1:
            _widen(held)
    return pieces


def _in_spaces_of(first: SingleAgentEpisode, piece: SingleAgentEpisode) -> bool:
    """Whether a list-mode ``piece``'s steps lie in the numpy'd ``first`` piece's spaces.

    ``concat_episode`` checks a list-mode piece's observations (after its first) and actions
    against a numpy'd episode's spaces, and a numpy'd piece's not: numpying one that fails
    would let the join take an action the episode's space refuses. Such a piece stays in list
    mode, for the join to refuse as it refuses it with ``numpy=None``.
    """
    for space, column, skip in (
        (first.observation_space, piece.observations, 1),
        (first.action_space, piece.actions, 0),
    ):
        if space is not None:
            check = checker_for(space)
            if not all(check(item) for item in column.get(slice(skip, None))):
                return False
    return True


def _widen(columns: list[InfiniteLookbackBuffer]) -> None:
    """Casts the leaves of ``columns`` (numpy'd, one item structure) to their joined dtypes."""
    parts = [flatten(column.data) for column in columns]
    shape = skeleton(parts[0][1])
    if any(len(leaves) != len(parts[0][0]) or skeleton(s) != shape for leaves, s in parts):
        return
    wide = [joined_dtype([leaves[i].dtype for leaves, _ in parts]) for i in range(len(parts[0][0]))]
    for column, (leaves, structure) in zip(columns, parts, strict=True):
        if all(w is None or leaf.dtype == w for leaf, w in zip(leaves, wide, strict=True)):
            continue
        state = column.get_state()
        state.pop("untyped_data", None)  # the old dtypes' empty layout
        cast = [leaf if w is None else leaf.astype(w) for leaf, w in zip(leaves, wide, strict=True)]
        state["data"] = unflatten(structure, cast)
        column.adopt_store(InfiniteLookbackBuffer.from_state(state, copy=False).store)
