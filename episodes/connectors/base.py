"""Connector protocol, pipeline, and the row/batch helpers the shipped connectors share.

A connector is any callable ``(episodes, batch) -> batch``: it reads the episodes through their
lookback-aware getters and adds (or replaces) columns of ``batch``, a dict of arrays whose rows
are the episodes' rows concatenated in order. Rows are, per episode:

* learner rows (``inference=False``): one per step after the lookback, ``ts = 0 .. len-1``, the
  rows of ``get_data_dict()``;
* inference rows (``inference=True``): one per episode, ``ts = len(ep)``, its latest
  observation, the row a policy acts on next.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator, Mapping, MutableMapping, Sequence, Set
from typing import Any, Protocol

import gymnasium as gym
import numpy as np
import tree

from episodes.connectors import checked_settings, pipeline_state, rllib_keywords
from episodes.connectors.given_episodes import check_episodes
from episodes.connectors.joining import TextJoinError, join_leaves
from episodes.connectors.list_rows import batched_items
from episodes.episode import SingleAgentEpisode
from episodes.indexing import as_int, sequence_position
from episodes.spaces import filler_batch, nest_as_space, unstackable_space
from episodes.spaces.batching import check_sortable_keys
from episodes.spaces.per_space_cache import PerSpaceCache
from episodes.structs import map_alike, short_repr

__all__ = [
    "Connector",
    "ConnectorPipeline",
    "EpisodeConnector",
    "check_episodes",
    "concat_rows",
    "id_rows",
    "sliding_rows",
    "FillerMemo",
]

Batch = dict[str, Any]


class Connector(Protocol):
    """``connector(episodes, batch) -> batch``.

    Example:
        >>> def add_rewards(episodes, batch):  # any such callable is a connector
        ...     rows = [np.asarray(ep.get_rewards(), np.float32) for ep in episodes]
        ...     return {**batch, "rewards": concat_rows(rows)} if rows else batch
        >>> ep = SingleAgentEpisode(observations=[0, 1, 2], actions=[0, 1], rewards=[1.0, 2.0],
        ...                         len_lookback_buffer=0)
        >>> out = add_rewards([ep, ep], {"n": 2})
        >>> out["n"], out["rewards"].tolist()
        (2, [1.0, 2.0, 1.0, 2.0])
    """

    # list: a connector typed list or Sequence (as the shipped ones, any sequence) matches.
    def __call__(self, episodes: list[SingleAgentEpisode], batch: Batch) -> Batch: ...  # noqa: D102


class ConnectorPipeline(pipeline_state.PipelineState):
    """Runs connectors in order, each getting the batch the previous one returned.

    A call returns what the last connector returned: each returns the batch (the one given,
    updated in place, or a new one; None is a ``TypeError`` naming it). A call a connector
    refuses puts the caller's ``batch`` back to its top-level keys and the values they held
    (contract §8.1; a value changed in place stays changed). Each connector gets its own copy
    of the episode list (sorting or dropping episodes would misalign the others' columns).

    Args:
        connectors: The connectors (callables), in order.

    Raises:
        TypeError: ``connectors`` is a bare string, not iterable or unordered (a set), or
            holds something that is not callable (the message names it; :meth:`append` and
            :meth:`insert` check likewise and leave the pipeline as it was).

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> ep = SingleAgentEpisode(observations=[0, 1], actions=[1], rewards=[1.0])
        >>> pipe = ConnectorPipeline([lambda eps, b: {**b, "n": len(eps)}])
        >>> pipe([ep])
        {'n': 1}
        >>> pipe.append(None)
        Traceback (most recent call last):
        TypeError: a connector must be callable as connector(episodes, batch), got None (NoneType)
        >>> pipe.get_state()  # its stateful connectors' get_state(): see PipelineState
        {}
    """

    @rllib_keywords.explains_rllib_keywords
    def __init__(self, connectors: Sequence[Connector] = ()):
        if isinstance(connectors, (str, bytes)):  # would be read letter by letter
            raise TypeError(
                f"ConnectorPipeline takes a sequence of connectors, got the string {connectors!r}"
            )
        if isinstance(connectors, Set):  # connectors run in order; a set's order is arbitrary
            raise TypeError(
                "ConnectorPipeline takes a sequence of connectors (they run in order), got an "
                f"unordered {type(connectors).__name__}; pass a list"
            )
        try:
            items = list(connectors)
        except TypeError:
            raise TypeError(
                "ConnectorPipeline takes a sequence of connectors, got "
                f"{connectors!r} ({type(connectors).__name__}); wrap one connector in a list"
            ) from None
        for item in items:
            _check_connector(item)
        self.connectors: list[Connector] = items

    def __call__(self, episodes: Sequence[SingleAgentEpisode], batch: Batch | None = None) -> Batch:
        """Runs every connector on ``episodes``, starting from ``batch`` (or ``{}``).

        Example:
            >>> def refuse(eps, b):
            ...     raise ValueError("no")
            >>> batch = {"given": 1}
            >>> pipe = ConnectorPipeline([lambda eps, b: {**b, "x": 1}, refuse])
            >>> try:
            ...     pipe([], batch)
            ... except ValueError:
            ...     pass
            >>> batch  # the first connector's column is not left behind
            {'given': 1}
        """
        given = check_episodes(episodes, "ConnectorPipeline")  # an array's as a list
        out: Batch = {} if batch is None else batch
        # The caller's keys, put back where a connector refuses (earlier columns would stay).
        before = dict(batch) if isinstance(batch, MutableMapping) else None
        try:
            for i, connector in enumerate(self.connectors):
                out = connector(list(given), out)  # each its own list (not the episodes)
                if out is None:  # the next would fail on None, naming no connector
                    name = getattr(connector, "__qualname__", "") or short_repr(connector)
                    raise TypeError(
                        f"connector {i} ({name}) returned None: a connector must return the "
                        "batch (the one it was given, updated in place, or a new one)"
                    )
        except BaseException:
            if before is not None and batch is not None:
                batch.clear()
                batch.update(before)
            raise
        return out

    def append(self, connector: Connector) -> None:
        """Adds a connector at the end.

        Example:
            >>> pipe = ConnectorPipeline([lambda eps, b: {**b, "x": 1}])
            >>> pipe.append(lambda eps, b: {**b, "x": b["x"] + 1})
            >>> len(pipe), pipe([])
            (2, {'x': 2})
        """
        _check_connector(connector)
        self.connectors.append(connector)

    def insert(self, index: int, connector: Connector) -> None:
        """Adds a connector before position ``index`` (clamped into the pipeline, as a list's).

        Raises:
            TypeError: ``index`` is not an int, or ``connector`` is not callable.

        Example:
            >>> pipe = ConnectorPipeline([lambda eps, b: {**b, "x": b["x"] * 10}])
            >>> pipe.insert(0, lambda eps, b: {**b, "x": 1})
            >>> pipe([])
            {'x': 10}
        """
        index = as_int(index, what="insert index")  # no str, float or bool
        _check_connector(connector)
        size = len(self.connectors)  # clamped here: list.insert overflows past a C ssize_t
        self.connectors.insert(max(-size, min(index, size)), connector)

    def __len__(self) -> int:
        return len(self.connectors)

    def __iter__(self) -> Iterator[Connector]:
        return iter(self.connectors)

    def __getitem__(self, index: int) -> Connector:
        if isinstance(index, slice):  # a list of them, as a list's slice
            return self.connectors[index]
        return self.connectors[sequence_position(index, len(self), "connector")]  # no bool

    def __copy__(self) -> ConnectorPipeline:  # a list's copy: its own list of the connectors
        new = type(self).__new__(type(self))
        new.__dict__.update(self.__dict__, connectors=list(self.connectors))
        return new

    def __repr__(self) -> str:
        names = ", ".join(type(c).__name__ for c in self.connectors)
        return f"ConnectorPipeline([{names}])"


def _check_connector(item: Any) -> None:
    # Checked when added: at run time a wrong item would fail far from where it came in.
    if not callable(item):
        raise TypeError(
            "a connector must be callable as connector(episodes, batch), got "
            f"{short_repr(item)} ({type(item).__name__})"
        )


class EpisodeConnector(checked_settings.CheckedSettings, inference=checked_settings.INFERENCE):
    """Base of the shipped connectors: knows which rows an episode contributes.

    Args:
        inference: One row per episode at ``ts = len(ep)``, not one per step (checked if set later).

    Example:
        >>> class Obs(EpisodeConnector):
        ...     def __call__(self, episodes, batch):
        ...         rows = [np.asarray(ep.get_observations(slice(*self.rows(ep))))
        ...                 for ep in episodes]
        ...         return {**batch, "obs": concat_rows(rows)} if rows else batch
        >>> ep = SingleAgentEpisode(observations=[0, 1, 2], actions=[0, 0], rewards=[0, 0],
        ...                         len_lookback_buffer=0)
        >>> Obs()([ep], {})["obs"].tolist(), Obs(inference=True)([ep, ep], {})["obs"].tolist()
        ([0, 1], [2, 2])
    """

    def __init__(self, *, inference: bool = False):
        self.inference = inference  # checked by the setting's check

    def rows(self, episode: SingleAgentEpisode) -> tuple[int, int]:
        """The row time steps ``[a, b)`` of ``episode`` (relative to its ``ts=0``).

        Raises:
            ValueError: ``inference=True`` and ``episode`` holds no observation yet (made
                without observations, before ``add_env_reset``): its inference row, its latest
                observation, does not exist (a row of fill values would stand for it); the
                message names the connector and the episode.

        Example:
            >>> from episodes import SingleAgentEpisode
            >>> ep = SingleAgentEpisode(observations=[0, 1, 2], actions=[0, 0], rewards=[0, 0],
            ...                         len_lookback_buffer=0)
            >>> EpisodeConnector().rows(ep), EpisodeConnector(inference=True).rows(ep)
            ((0, 2), (2, 3))
        """
        n = len(episode)
        if not self.inference:
            return (0, n)
        if not episode.is_reset:
            raise ValueError(
                f"{type(self).__name__}(inference=True): episode {episode.id_!r} holds no "
                "observation yet (add_env_reset was not called), so it has no inference row "
                "to act on"
            )
        return (n, n + 1)

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={short_repr(v)}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"


def as_arrays(
    value: Any, fill: Any = None, *, finalized: bool = False, space: Any = None, name: str = ""
) -> Any:
    """A getter result as a struct of arrays (lists of items are batched leaf-wise).

    ``finalized``: the read is of a numpy'd column, already a struct of arrays (a list of
    leaves for list-structured items, which must not be batched again). ``fill``, the one the
    getter padded with, goes into the error when the items do not stack: without a space a
    list-mode read pads with ``fill`` itself, which may not fit the items. ``space``, the
    column's, batches the items as ``to_numpy`` does: a Box item given as a Python list is a
    row, not a struct of one leaf per component; and a Tuple part comes back a tuple, as the
    space says, whether its items were recorded as tuples or lists (gymnasium's ``Tuple`` takes
    both, and ``to_numpy`` keeps lists of leaves for list items), so neither the item form nor
    whether a read was padded with the space's filler tuples changes a column's structure.

    Raises:
        ValueError: ``space`` holds a Sequence, Graph or OneOf space, whose items have no
            fixed layout (``to_numpy`` refuses them too; stacked as they came, they gave a
            column per position, NaN-padded nodes or bare errors); the message names
            ``name`` (the connector and column) and the space kind. Or ``space`` holds a Dict
            whose keys do not sort (int and str keys together: dm-tree sorts a dict's leaves
            by key), naming ``name`` and the keys. Or the items do not stack, or one holds a
            masked array with masked entries (its mask would be lost): see ``batched_items``.

    Example:
        >>> as_arrays([np.zeros(2), np.ones(2)]).shape
        (2, 2)
        >>> len(as_arrays([np.zeros(3), np.ones(3)], finalized=True))  # two leaves of 3 steps
        2
        >>> import gymnasium as gym
        >>> as_arrays([[0.0, 1.0], [2.0, 3.0]], space=gym.spaces.Box(-5, 5, (2,))).shape
        (2, 2)
        >>> pair = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Discrete(3)))
        >>> type(as_arrays([[0, 1], [2, 0]], space=pair)).__name__  # list items, a Tuple space
        'tuple'
        >>> seq = gym.spaces.Sequence(gym.spaces.Discrete(3))
        >>> try:
        ...     as_arrays([(0, 1), (1, 2)], space=seq, name="FrameStack 'obs'")
        ... except ValueError as err:
        ...     print(str(err).split(", whose")[0])
        FrameStack 'obs': the space Sequence(Discrete(3), stack=False) holds a Sequence space
    """
    kind = None if space is None else unstackable_space(space)
    if kind is not None:
        raise ValueError(
            f"{name or 'a column'}: the space {space} holds a {kind} space, whose items have no "
            "fixed layout to stack into array rows (to_numpy refuses them too); read them with "
            "the getters or get_data_dict()"
        )
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        try:
            check_sortable_keys(space)
        except ValueError as err:
            raise ValueError(f"{name or 'a column'}: the space {space}: {err}") from None
    if finalized or not isinstance(value, list):
        return nest_as_space(value, space)
    return nest_as_space(batched_items(value, space, fill, name), space)


def id_rows(parts: list[Any]) -> list[Any]:
    """Per-episode ``eps_id`` arrays, as object arrays when the ids' kinds differ.

    Joined as they are, ids of other types (1 and True, 1 and "1", 1 and 1.0) would be cast to
    one type and merge, where the episode readers keep them apart.

    Example:
        >>> joined = np.concatenate(id_rows([np.asarray([1, 1]), np.asarray([True])]))
        >>> joined.tolist(), joined.dtype
        ([1, 1, True], dtype('O'))
    """
    arrays = [np.asarray(part) for part in parts]
    if len({array.dtype.kind for array in arrays}) > 1:
        return [array.astype(object) for array in arrays]
    return arrays


def with_fill_dtype(value: Any, fill: Any) -> Any:
    """Leaves cast to the dtype a read padded with ``fill`` has, padded or not.

    A padded read stacks the filler with the items, which promotes them as the filler's dtype
    does (int actions or float32 observations padded with 0.0 come back float64), so a batch's
    dtype would depend on whether its rows needed padding: a cut chunk's rows and the same rows
    of the whole episode would differ. ``fill`` is what :func:`filler_for` gives: the fill
    value without a space; with one, a struct like the items whose leaves' dtypes cast the
    matching leaves of ``value`` (None: nothing to cast).

    Example:
        >>> with_fill_dtype(np.array([1, 2]), 0.0).dtype
        dtype('float64')
        >>> with_fill_dtype(np.float32([1]), np.float32(0)).dtype  # a float32 fill keeps it
        dtype('float32')
        >>> with_fill_dtype({"a": np.int32([1])}, {"a": np.int64(0)})["a"].dtype
        dtype('int64')
    """

    def leaf(x: Any, filler: Any) -> Any:
        x = np.asarray(x)
        try:
            return x.astype(np.result_type(x.dtype, np.asarray(filler).dtype), copy=False)
        except TypeError:  # no common dtype (strings and a number): the read would have failed
            return x

    if fill is None:  # no filler to follow (see filler_for)
        return value
    if type(value) is np.ndarray and type(fill) is not dict and not tree.is_nested(fill):
        return leaf(value, fill)
    if not tree.is_nested(fill):
        return tree.map_structure(lambda x: leaf(x, fill), value)
    try:
        return tree.map_structure(leaf, value, fill)
    except (TypeError, ValueError):  # items not shaped like their space: nothing to follow
        return value


def filler_for(space: Any, fill: Any, *, one_hot_discrete: bool = False) -> Any:
    """What a read of a column of ``space`` pads with: ``fill`` itself without a space.

    With a space every leaf takes its space's dtype (a Discrete space's ``int64``), whatever
    the recorded items' dtype; only the dtypes matter, so the leaves hold no fillers (an image
    space's is not built for every read). Called before the read, it checks the fill once:
    a ``fill`` that cannot fill the space is refused whether or not a row needs padding, so
    where a chunk was cut does not decide whether a connector accepts it.

    Raises:
        ValueError: ``fill`` cannot fill an item of ``space`` (a vector for scalar items, 0.5
            for integer ones, a string for numbers, anything but a string for a Text part).

    Example:
        >>> import gymnasium as gym
        >>> filler_for(gym.spaces.Discrete(3), 0).dtype, filler_for(None, 0.5)
        (dtype('int64'), 0.5)
        >>> filler_for(gym.spaces.Discrete(3), 0.5)
        Traceback (most recent call last):
        ValueError: fill=0.5 cannot fill a leaf of dtype int64 (the value changes in that dtype)
        >>> filler_for(gym.spaces.Text(4), 0.0)
        Traceback (most recent call last):
        ValueError: fill=0.0 cannot fill a Text leaf: give a string
    """
    if space is None:
        return fill
    fillers = filler_batch(space, fill, 0, one_hot_discrete=one_hot_discrete)
    # No fillers hold no value, so filler_batch lets any fill be none of a Text part's (an
    # empty batch is built that way): checked here, as a padded read would refuse it. Only
    # for spaces of Text parts alone: where numbers sit beside the text no one fill serves
    # both, so those are refused only where a read pads.
    if not isinstance(fill, str) and _text_only(space):
        raise ValueError(f"fill={fill!r} cannot fill a Text leaf: give a string")
    return fillers


class FillerMemo:
    """:func:`filler_for` of one ``fill``, remembered per space for one connector call.

    The episodes of a call share their spaces: the filler (and the check of ``fill``) is
    worked out once per space, not once per episode, and for a hashable ``fill`` kept for the
    space's life across calls. The spaces are held, so their ids stay theirs for the memo's
    life.

    Example:
        >>> import gymnasium as gym
        >>> memo, space = FillerMemo(0), gym.spaces.Discrete(3)
        >>> memo.get(space) is memo.get(space), memo.get(None)
        (True, 0)
    """

    def __init__(self, fill: Any):
        self.fill = fill
        self._fillers: dict[tuple[int, bool], tuple[Any, Any]] = {}

    def get(self, space: Any, *, one_hot_discrete: bool = False) -> Any:
        """``filler_for(space, fill, one_hot_discrete=...)``, computed once per space."""
        key = (id(space), one_hot_discrete)
        held = self._fillers.get(key)
        if held is None:
            filler = _kept_filler(space, self.fill, one_hot_discrete)
            self._fillers[key] = held = (space, filler)
        return held[1]


# Fillers of live spaces by hashable fill, across calls: a connector called on one episode per
# env step would otherwise build its space's filler at every step. Only dtypes are read from
# them (with_fill_dtype), and a fill that cannot fill the space raises before anything is kept.
_KEPT_FILLERS: PerSpaceCache[dict[Any, Any]] = PerSpaceCache(lambda space: {})


def _kept_filler(space: Any, fill: Any, one_hot_discrete: bool) -> Any:
    # NaN is not equal to itself: every NaN object would be a key of its own.
    nan = isinstance(fill, (float, np.floating)) and bool(np.isnan(fill))
    key = (type(fill), _NAN if nan else fill, one_hot_discrete)
    try:
        kept = _KEPT_FILLERS.get(space) if space is not None else None
        filler = kept.get(key, _MISSING) if kept is not None else _MISSING
    except TypeError:  # an unhashable fill (an array): worked out per call
        kept, filler = None, _MISSING
    if filler is _MISSING:
        filler = filler_for(space, fill, one_hot_discrete=one_hot_discrete)
        if kept is not None and len(kept) < 64:  # a fill that changes per call is not kept
            kept[key] = filler
    return filler


_MISSING = object()
_NAN = object()  # the key of a NaN fill, whichever NaN object it is


def _text_only(space: Any) -> bool:
    if isinstance(space, gym.spaces.Text):
        return True
    if isinstance(space, gym.spaces.Dict):
        parts: list[Any] = list(space.spaces.values())
    elif isinstance(space, gym.spaces.Tuple):
        parts = list(space.spaces)
    else:
        return False
    return bool(parts) and all(_text_only(part) for part in parts)


def _refuse_lists(who: str, *values: Any) -> None:
    """A ``TypeError`` where a value holds a list: per-step items or per-leaf columns?"""
    for value in values:  # read as the other, a list's values would come out wrong, silently
        if isinstance(value, list):
            raise TypeError(
                f"{who}: got a list: per-step items (a list-mode read) or per-leaf columns? Stack"
                " items first (np.stack, episodes.spaces.batch); pass per-leaf columns as a tuple"
            )
        if isinstance(value, (Mapping, tuple)):
            _refuse_lists(who, *(value.values() if isinstance(value, Mapping) else value))


def sliding_rows(value: Any, window: int) -> Any:
    """``[L + window - 1, ...]`` leaves -> ``[L, window, ...]`` windows (row ``r``: ``r..r+w-1``).

    ``L = 0`` gives ``[0, window, ...]``; a list (a list-mode read?) is a ``TypeError``.

    Example:
        >>> sliding_rows(np.arange(4), 2)
        array([[0, 1],
               [1, 2],
               [2, 3]])
        >>> sliding_rows(np.zeros((2, 5)), 3).shape
        (0, 3, 5)
    """
    _refuse_lists("sliding_rows", value)
    return _window_leaves(value, window)


def _window_leaves(value: Any, window: int) -> Any:  # sliding_rows; lists: leaves' containers
    if isinstance(window, bool) or not isinstance(window, numbers.Integral):
        raise TypeError(f"sliding_rows: window must be an int, got {window!r}")

    def leaf(x: Any) -> np.ndarray:
        x = np.asarray(x)
        rows = len(x) - window + 1 if x.ndim else 0
        if rows >= 0 and window >= 1 and x.ndim:  # L = 0 too, which numpy's view refuses
            # One gather: sliding_window_view + moveaxis + a copy cost ~10x more per episode.
            return x[np.arange(rows)[:, None] + np.arange(window)]
        windows = np.lib.stride_tricks.sliding_window_view(x, window, axis=0)  # its errors
        return np.ascontiguousarray(np.moveaxis(windows, -1, 1))

    if type(value) is np.ndarray:
        return leaf(value)
    return tree.map_structure(leaf, value)


def join_rows(parts: list[Any], key: str, ids: Sequence[Any]) -> Any:
    """:func:`concat_rows`, refused with a ``ValueError`` naming the column and the episodes.

    ``ids`` are the ids of the episodes the parts come from, in order. Rows that do not join
    (observations of ``Discrete(3)`` and ``Discrete(4)`` spaces one-hot to 3 and 4 columns)
    would otherwise give numpy's bare error, naming neither.

    Example:
        >>> join_rows([np.zeros((1, 3)), np.zeros((2, 3))], "obs", ["a", "b"]).shape
        (3, 3)
        >>> try:
        ...     join_rows([np.zeros((1, 3)), np.zeros((2, 4))], "obs", ["a", "b"])
        ... except ValueError as err:
        ...     print(str(err).split("; ")[0])
        the episodes' 'obs' rows do not join: episode 'a' gives rows shaped (3,), episode 'b' (4,)

    Rows of numbers beside rows of strings, or bytes beside strings, are refused too (numpy
    would turn the numbers into strings), naming both episodes and dtypes; numbers of other
    dtypes join as numpy promotes them (ints beside floats: floats).
    """
    try:
        return _joined(parts)
    except TextJoinError as err:
        if len(ids) != len(parts):
            raise ValueError(f"the episodes' {key!r} rows do not join: {err}") from err
        (text_dtype, odd_dtype), (a, b) = err.dtypes, (ids[err.text], ids[err.odd])
        raise ValueError(
            f"the episodes' {key!r} rows do not join: episode {a!r} gives {text_dtype} rows, "
            f"episode {b!r} {odd_dtype} ones; {err.why}"
        ) from err
    except (ValueError, TypeError) as err:  # TypeError: parts of other structures
        layouts = [_row_layout(part) for part in parts]
        odd = next((i for i, layout in enumerate(layouts) if layout != layouts[0]), None)
        which = ""
        if odd is not None and len(ids) == len(parts):
            which = (
                f"episode {ids[0]!r} gives rows shaped {layouts[0]}, "
                f"episode {ids[odd]!r} {layouts[odd]}; "
            )
        raise ValueError(f"the episodes' {key!r} rows do not join: {which}numpy: {err}") from err


def _row_layout(part: Any) -> Any:
    # What a join needs the parts to agree on: their structure and each leaf's row shape.
    return tree.map_structure(lambda leaf: np.shape(leaf)[1:], part)


def concat_rows(parts: list[Any]) -> Any:
    """Concatenates per-episode structs of arrays along axis 0, into new writable arrays.

    One part is copied too: a batch never shares memory with the episodes it was read from.
    Leaves join as :func:`~episodes.connectors.joining.join_leaves` joins them: numbers beside
    strings (or bytes beside strings) are a ``ValueError``, where numpy would turn the numbers
    into strings.

    Raises:
        ValueError: ``parts`` is empty: with no episode there is no structure to join, so a
            connector given no episodes returns its batch as it is (as the shipped ones do).
        TypeError: a part holds a list (a list-mode read?): stack its items first.

    Example:
        >>> concat_rows([np.zeros((1, 2)), np.ones((2, 2))]).shape
        (3, 2)
    """
    _refuse_lists("concat_rows", *parts)
    return _joined(parts)


def _joined(parts: list[Any]) -> Any:  # concat_rows, lists as containers (connectors' reads)
    if not len(parts):
        raise ValueError("concat_rows needs a part: given no episodes, return the batch as it is")
    if len(parts) == 1:  # a copy still: the batch owns its rows, as with several episodes
        return tree.map_structure(np.array, parts[0])
    # Lists and tuples join (a Tuple space's items come as either, or without a space).
    return map_alike(join_leaves, parts)
