"""Training rows from an episode: ``data_dict`` and the light :class:`SampleBatch` type."""

from __future__ import annotations

from numbers import Number
from typing import TYPE_CHECKING, Any, overload

import gymnasium as gym
import numpy as np
import tree

from episodes.buffer.plain_arrays import check_items_unmasked
from episodes.episode.batch_rows import sliced_columns
from episodes.spaces import batch as stack_items
from episodes.spaces import batch_with_layout
from episodes.spaces.item_walks import other_mapping
from episodes.structs import flatten, leaves_up_to

if TYPE_CHECKING:
    from episodes.buffer import InfiniteLookbackBuffer
    from episodes.episode.single_agent_episode import SingleAgentEpisode


class SampleBatch(dict[str, Any]):
    """A dict of equally long columns; ``len()`` and ``count`` give the number of rows.

    As RLlib's ``SampleBatch`` does, the constructor turns every column that is a list or a
    plain number into an array (``np.array`` of it; ``infos`` stays a list), so a list-mode
    episode's batch computes like a numpy'd one's (``batch["rewards"] * 0.99``). Where RLlib
    leaves an object array of dicts or fails, rows that are dicts or tuples (Dict/Tuple
    observations, dict extra model outputs) and rows nesting arrays in lists (Tuple items
    recorded as lists) stack leaf by leaf into the column a numpy'd episode gives: a dict,
    tuple or list of arrays. ``eps_id`` stays one id a row (a tuple id: a 1-D object array),
    and ``seq_lens`` is int32 (dropped when None or empty), as in RLlib. A list of arrays that
    each hold a row per step (where ``t`` or ``rewards`` already is an array, or the list is
    not one item a row) is a numpy'd Tuple column's leaves and stays as given.

    Raises:
        ValueError: A list column whose rows do not stack (ragged), or whose text leaf holds
            a number among strings (numpy would store ``2`` as ``"2"``; ``to_numpy`` refuses
            such items too), naming the column.

    Example:
        >>> batch = SampleBatch({"obs": [1, 2], "actions": [0, 1]})
        >>> len(batch), batch.count, sorted(batch.keys())
        (2, 2, ['actions', 'obs'])
        >>> batch["obs"] * 0.5
        array([0.5, 1. ])
        >>> SampleBatch({"obs": [{"a": 1}, {"a": 2}], "infos": [{}, {}]})["obs"]
        {'a': array([1, 2])}
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._make_arrays(frozenset(), {})

    @classmethod
    def from_columns(
        cls, columns: dict[str, Any], batched: frozenset[str], spaces: dict[str, Any] | None = None
    ) -> SampleBatch:
        """A batch of ``columns`` whose ``batched`` ones are laid out already, taken as given.

        What ``get_sample_batch`` builds: a numpy'd column (a Tuple part's leaves as a list,
        nested too) is never taken for a list of rows; the others are made arrays as the
        constructor makes them, a column with a space in ``spaces`` nested as it says (a Box
        item recorded as a list or a tuple is a row, a Tuple item either way a tuple).

        Example:
            >>> leaves = [np.array([0, 1]), [np.array([2, 3]), np.array([4, 5])]]
            >>> SampleBatch.from_columns({"t": np.arange(2), "obs": leaves}, frozenset({"obs"}))[
            ...     "obs"] is leaves
            True
        """
        batch = cls.__new__(cls)
        dict.__init__(batch, columns)
        batch._make_arrays(batched, spaces or {})
        return batch

    def _make_arrays(self, batched_keys: frozenset[str], spaces: dict[str, Any]) -> None:
        seq_lens = self.get("seq_lens", 0)
        if seq_lens is None or (isinstance(seq_lens, list) and not seq_lens):
            del self["seq_lens"]
        elif isinstance(seq_lens, list):
            self["seq_lens"] = np.array(seq_lens, dtype=np.int32)
        rows: Any = self.get("t", self.get("rewards"))
        batched = isinstance(rows, np.ndarray) and rows.ndim > 0
        count = len(rows) if batched or isinstance(rows, list) else None
        converted = {
            key: _as_column(key, value, count, batched, spaces.get(key))
            for key, value in self.items()
            if key != "infos"
            and key not in batched_keys
            and (value.__class__ is list or isinstance(value, (Number, list)))
        }
        self.update(converted)

    @property
    def count(self) -> int:
        """Rows: the sum of ``seq_lens`` if given, else the first column's with rows.

        ``t`` and ``rewards`` are looked at first, then the other columns in order (RLlib 2.60
        takes the first column given, which differs only for a batch whose columns disagree in
        length: ``{"rewards": 2 rows, "t": 5 rows}`` counts 5 here, 2 there); as RLlib:
        ``infos`` and ``state_in_*``/``state_out_*`` are skipped, a nested column counts by its
        first leaf (an empty dict or tuple part holds none), a list of leaf
        arrays (a numpy'd Tuple column recorded from lists) by its first leaf's rows, and a
        number column counts no rows; a batch without another column has 0.

        Example:
            >>> SampleBatch({"obs": np.zeros((3, 2)), "actions": [0, 1, 1]}).count
            3
            >>> SampleBatch().count
            0
            >>> SampleBatch({"obs": {"a": {}, "b": np.zeros(5)}}).count
            5
            >>> SampleBatch({"gamma": 0.99, "obs": [1, 2]}).count  # a number counts no rows
            2
            >>> SampleBatch({"seq_lens": [2, 1], "obs": np.zeros((3, 2))}).count
            3
        """
        seq_lens = self.get("seq_lens")
        if seq_lens is not None and len(seq_lens):
            return int(np.sum(seq_lens))
        first = [key for key in ("t", "rewards") if key in self]
        for key in (*first, *self.keys()):
            if key in _UNCOUNTED or (isinstance(key, str) and key.startswith(_STATE_KEYS)):
                continue
            rows = _rows(self[key])
            if rows is not None:
                return rows
        return 0

    def __len__(self) -> int:
        return self.count

    def __bool__(self) -> bool:  # as RLlib's: by rows, not keys
        return self.count > 0

    @overload
    def __getitem__(self, key: slice) -> SampleBatch: ...

    @overload
    def __getitem__(self, key: str) -> Any: ...

    def __getitem__(self, key: str | slice) -> Any:
        """A column, or with a slice the batch of those rows (as RLlib's: arrays as views).

        Rows are read as :func:`~episodes.episode.batch_rows.sliced_columns` reads them.

        Example:
            >>> batch = SampleBatch({"obs": [1, 2, 3], "infos": [{}, {}, {"a": 1}]})
            >>> part = batch[1:]
            >>> part, part["obs"], part["infos"]
            (SampleBatch(count=2, keys=['obs', 'infos']), array([2, 3]), [{}, {'a': 1}])
        """
        if isinstance(key, slice):
            return type(self).from_columns(
                sliced_columns(self, key, self.count), frozenset(self.keys())
            )
        return dict.__getitem__(self, key)

    def copy(self, shallow: bool = False) -> SampleBatch:
        """A new batch of the same columns, their arrays copied unless ``shallow`` (as RLlib's).

        Example:
            >>> batch = SampleBatch({"obs": np.zeros(2)}); other = batch.copy()
            >>> other["obs"][0] = 1.0; type(other).__name__, batch["obs"].tolist()
            ('SampleBatch', [0.0, 0.0])
        """
        columns = {key: _copied(value, shallow) for key, value in self.items()}
        return SampleBatch.from_columns(columns, frozenset(columns))

    def __repr__(self) -> str:
        return f"SampleBatch(count={self.count}, keys={list(self.keys())})"


# Columns RLlib does not count rows by (infos hold anything; states nest their own way).
_UNCOUNTED = ("seq_lens", "infos")
_STATE_KEYS = ("state_in_", "state_out_")


def _rows(value: Any) -> int | None:
    """The rows of one column (None: it has no leaf to count, or is a number)."""
    if isinstance(value, (dict, tuple)):
        value = _first_leaf(value)
    elif isinstance(value, list) and value and all(_leaf(part) for part in value):
        value = value[0]  # a numpy'd Tuple column recorded from lists: its leaves
    try:
        return len(value)
    except TypeError:  # a number column (a 0-d array), or none
        return None


def _cut_text(ids: np.ndarray, value: list[Any]) -> bool:
    """Whether a numpy text array cut a trailing NUL off an id (one ending in ``chr(0)``)."""
    if ids.dtype.kind not in ("U", "S"):
        return False
    try:  # each distinct id once (set() hashes at C speed; a batch repeats an id per row)
        distinct: Any = set(value)
    except TypeError:  # an unhashable id among them
        distinct = value
    return any(isinstance(i, (str, bytes)) and i[-1:] in ("\0", b"\0") for i in distinct)


_BUILTIN_KINDS = frozenset((str, bytes, bool, int, float))
_FLAT = frozenset((gym.spaces.Box, gym.spaces.Discrete, gym.spaces.MultiDiscrete))
_NESTED_SPACES = (gym.spaces.Dict, gym.spaces.Tuple)


def _one_kind(ids: list[Any]) -> bool:
    """Whether the ids are all text, all bytes, all ints or all floats (numpy's types too)."""
    types = set(map(type, ids))  # a few types, found at C speed
    if len(types) == 1 and types <= _BUILTIN_KINDS:  # one exact type: one kind (the usual)
        return True
    kinds = set()
    for kind in types:
        for family in (str, bytes, bool, np.bool_, int, np.integer, float, np.floating):
            if issubclass(kind, family):
                kinds.add({np.bool_: bool, np.integer: int, np.floating: float}.get(family, family))
                break
        else:
            return False
    return len(kinds) <= 1


def _copied(value: Any, shallow: bool) -> Any:
    """``value`` rebuilt container by container as RLlib's copy does, arrays copied too.

    Unless ``shallow``; dm-tree keeps namedtuples, struct sequences and dict subclasses.
    """
    return tree.map_structure(
        lambda leaf: leaf.copy() if not shallow and isinstance(leaf, np.ndarray) else leaf, value
    )


def _first_leaf(value: Any) -> Any:
    """A nested column's first leaf (lists are leaves, rows), skipping empty parts; or None."""
    if not isinstance(value, (dict, tuple)):
        return value
    for part in value.values() if isinstance(value, dict) else value:
        leaf = _first_leaf(part)
        if leaf is not None:
            return leaf
    return None


def _leaf(part: Any) -> bool:
    return part.__class__ is np.ndarray and part.ndim > 0


def _as_column(key: str, value: Any, rows: int | None, batched: bool, space: Any = None) -> Any:
    # The usual lists first, where the general path below makes just np.array of them: an id
    # column of one string (no NUL for numpy to cut; compared only once all ids are strings,
    # as an array's == is no bool), or a first row that is a number or a plain array beside no
    # space or a flat one (nothing nests), no leaf arrays, and an array of no text, objects or
    # floats after a first int (made exact). The general path words numpy's errors.
    first = value[0].__class__ if value.__class__ is list and value else None
    if key == "eps_id":
        if first is str and value[0][-1:] != "\0" and set(map(type, value)) == {str}:
            if value.count(value[0]) == len(value):
                return np.array(value)
    elif first in _PLAIN_ROWS and (space is None or space.__class__ in _FLAT):
        if first is not np.ndarray or rows is None or not _leaf_arrays(value, rows, batched):
            try:
                kind = (array := np.array(value)).dtype.kind
            except (TypeError, ValueError):
                kind = "O"
            if kind in "biuc" or (kind == "f" and first is not int and first is not bool):
                return array
    column = _stacked_column(key, value, rows, batched, space)
    if isinstance(value, list) and key != "eps_id":
        # A flat array of no text has no text leaf: nothing for the check to look at.
        if column.__class__ is not np.ndarray or column.dtype.kind in "US":
            _check_no_text_from_numbers(key, value, column)
    return column


_PLAIN_ROWS = (float, int, bool, np.ndarray)


def _stacked_column(key: str, value: Any, rows: int | None, batched: bool, space: Any) -> Any:
    # A list or number as the array RLlib's SampleBatch makes of it (np.array), but for the
    # cases SampleBatch's docstring names.
    if not isinstance(value, list):
        return np.array(value)
    if key == "eps_id":
        try:
            ids = np.array(value)
        except ValueError:  # ids of several shapes (tuples of other lengths)
            ids = None
        if ids is not None and ids.ndim == 1 and not _cut_text(ids, value):
            if _one_kind(value):  # 1 and "1" (or True) are two ids, not one cast
                return ids
        return np.fromiter(value, dtype=object, count=len(value))
    if rows is not None and _leaf_arrays(value, rows, batched):
        return value
    # A space says whether the rows nest (a Tuple item recorded as a list or a tuple); without
    # one, the first row does, as numpy reads a list (a dict after numbers makes an object
    # array, refused below).
    if space is not None:  # (Dict and Tuple are ABCs, slow to test: flat classes first)
        nested = space.__class__ not in _FLAT and isinstance(space, _NESTED_SPACES)
    else:
        nested = bool(value) and isinstance(value[0], (dict, tuple))
    if nested:
        try:
            return stack_items(value) if space is None else batch_with_layout(value, space)
        except (TypeError, ValueError):
            pass  # rows nesting in different ways: as numpy makes them (or its error)
    try:
        array = np.array(value)
    except (TypeError, ValueError) as error:
        if nested:
            raise _ragged(key, error) from error
        try:  # rows nesting arrays in lists (a Tuple's items recorded as lists)
            return stack_items(value)
        except (TypeError, ValueError) as stacking:  # batch names a Mapping that is no dict
            raise _ragged(key, error if other_mapping(value) is None else stacking) from error
    if array.dtype == object and (nested or any(isinstance(r, (dict, tuple)) for r in value)):
        # Dicts (or tuples) numpy kept whole, wherever the first lies: no rows.
        raise _ragged(key, ValueError("the rows nest in different ways"))
    if array.dtype.kind == "f" and value and isinstance(value[0], (int, np.integer)):
        return stack_items(value)  # ints float64 would round (time steps past int64): exact
    return array


_TEXT_TYPES = frozenset((str, bytes, np.str_, np.bytes_))


def _check_no_text_from_numbers(key: str, value: list[Any], column: Any) -> None:
    """Refuses a column where numpy wrote numbers of the rows into text (2 as ``"2"``).

    As ``to_numpy`` refuses such items: a text leaf of ``column`` must hold text in every row.
    Costs a walk of the rows only where the column has a text leaf.
    """
    leaves, structure = flatten(column)
    text = [
        i for i, leaf in enumerate(leaves) if getattr(leaf, "dtype", np.dtype(object)).kind in "US"
    ]
    if not text:
        return
    if structure is None:  # flat rows: their types at C speed first, the usual all-str
        if set(map(type, value)) <= _TEXT_TYPES:
            return
        found = [[row] for row in value]
    else:  # each row's values at the column's leaves (its arrays are leaves to this walk)
        found = [leaves_up_to(structure, row) or [] for row in value]
    for k, row_leaves in enumerate(found):
        odd = next(
            (row_leaves[i] for i in text if i < len(row_leaves) and not _text(row_leaves[i])),
            None,
        )
        if odd is not None:
            raise ValueError(
                f"SampleBatch column {key!r}: the rows mix text and other values (row {k} is "
                f"{odd!r}), which numpy would turn into text"
            )


def _text(value: Any) -> bool:
    """Whether ``value`` is text all through: a string, a string array, or lists of them."""
    if isinstance(value, (str, bytes)):
        return True
    if isinstance(value, np.ndarray):
        return value.dtype.kind in "US" or (
            value.dtype == object and all(_text(part) for part in value.flat)
        )
    if isinstance(value, (list, tuple)):
        return all(_text(part) for part in value)
    return False


def _leaf_arrays(value: list[Any], rows: int, batched: bool) -> bool:
    # The leaves of a numpy'd Tuple column recorded from lists: arrays of a row per step, or
    # (a Tuple part in a Tuple, a Dict part) lists, tuples and dicts of them. Beside an array
    # `t` every column is batched already: a list there is such leaves, never rows; a list of
    # rows (one item a row) is made an array as RLlib makes it (numpy'd columns: from_columns).
    if not value or (len(value) == rows and not batched):
        return False
    return all(leaf.__class__ is np.ndarray and leaf.ndim and len(leaf) == rows for leaf in value)


def episode_batch(episode: SingleAgentEpisode) -> SampleBatch:
    """``get_sample_batch``: :func:`data_dict` with the numpy'd columns taken as they are.

    A list-mode column holding a numpy masked array with masked entries is refused, as
    ``to_numpy`` refuses it: stacked, its mask would be lost and the masked values read as
    data (one with none masked is the plain array it holds).

    Raises:
        ValueError: Such a column, naming it and the item; or as :class:`SampleBatch` raises.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> ep = SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0],
        ...                         len_lookback_buffer=0)
        >>> episode_batch(ep)["rewards"]
        array([1.])
    """
    buffers = {
        "obs": episode.observations,
        "actions": episode.actions,
        "rewards": episode.rewards,
        **episode.extra_model_outputs,
    }
    columns = data_dict(episode)
    batched, spaces = set(), {}
    for name, buffer in buffers.items():  # the flags, t and ids data_dict builds hold no mask
        if buffer.space is not None:
            spaces[name] = buffer.space
        if buffer.store.is_numpy:
            batched.add(name)
            continue
        try:  # one scan of the items' classes, where none is a container
            check_items_unmasked(columns[name])  # stacked, a mask would be lost
        except ValueError as err:
            raise ValueError(f"SampleBatch column {name!r}: {err}") from None
    if episode.is_numpy:  # the flags, t and eps_id are arrays made by numpy then
        batched |= {"terminateds", "truncateds", "t", "eps_id"}
    return SampleBatch.from_columns(columns, frozenset(batched), spaces)


def _ragged(key: str, error: Exception) -> ValueError:
    return ValueError(
        f"SampleBatch column {key!r}: its rows do not stack into one array (rows of "
        f"different shapes or nestings): {error}"
    )


def id_column(id_: Any, rows: int) -> np.ndarray:
    r"""An ``eps_id`` column: ``rows`` copies of ``id_``, one per row.

    A scalar id (a string, a number) gives the array ``np.asarray`` makes, but for a string
    ending in NUL, which a numpy string array would cut (an object column); any other (a tuple
    id, as the replay buffer's docs suggest) a 1-D object array, one id per row, where
    ``np.asarray`` would spread its parts over a second axis (and cast ``1`` to ``'1'``).

    Example:
        >>> id_column("a", 2)
        array(['a', 'a'], dtype='<U1')
        >>> id_column("a\0", 1)
        array(['a\x00'], dtype=object)
        >>> id_column(("run", 1), 2)
        array([('run', 1), ('run', 1)], dtype=object)
    """
    ends_in_nul = isinstance(id_, (str, bytes)) and id_[-1:] in ("\0", b"\0")
    if isinstance(id_, (str, bytes, int, float, complex, np.generic)) and not ends_in_nul:
        # np.full makes the dtype np.asarray would, without a Python list of the rows. (A
        # string array would cut a trailing NUL, and "a\0" become "a": those stay objects.)
        return np.full(rows, id_) if rows else np.asarray([])
    column = np.empty(rows, dtype=object)
    column.fill(id_)
    return column


def data_dict(episode: SingleAgentEpisode) -> dict[str, Any]:
    """One row per step after the lookback: obs, actions, rewards, flags, t, eps_id, infos.

    ``obs`` holds the observation each action was taken in (the final observation is not a
    row); ``terminateds``/``truncateds`` are True only on the last row of a done episode. Every
    extra-model-output key is a column too. Columns are arrays when the episode is numpy'd.

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> ep = SingleAgentEpisode(observations=[0, 1, 2], actions=[1, 0], rewards=[1.0, 2.0],
        ...                         terminated=True, len_lookback_buffer=0)
        >>> data_dict(ep)["terminateds"]
        [False, True]
    """
    rows = len(episode)
    terminateds: Any
    truncateds: Any
    t: Any
    eps_id: Any
    if episode.is_numpy:  # built by numpy: no Python list of the rows
        terminateds, truncateds = np.zeros(rows, bool), np.zeros(rows, bool)
        t = time_steps(episode.t_started, episode.t)
        eps_id = id_column(episode.id_, rows)
    else:
        terminateds, truncateds = [False] * rows, [False] * rows
        t = list(range(episode.t_started, episode.t))
        eps_id = [episode.id_] * rows
    if rows:
        terminateds[-1] = episode.is_terminated
        truncateds[-1] = episode.is_truncated
    before_last = len(episode.observations) - 1  # a row per step: an observation, an info
    columns = {
        "obs": _read_to(episode.observations, before_last),
        "actions": episode.actions.get(),
        "rewards": episode.rewards.get(),
        "terminateds": terminateds,
        "truncateds": truncateds,
        "t": t,
        "eps_id": eps_id,
        "infos": _read_to(episode.infos, before_last),
    }
    for key, column in episode.extra_model_outputs.items():
        columns[key] = column.get()
    return columns


def _read_to(buffer: InfiniteLookbackBuffer, stop: int) -> Any:
    # buffer.get(slice(None, stop)): a list store's list cut directly, without the slice's plan
    items = buffer.store.pylist
    if items is not None and stop >= 0:
        try:
            return items[buffer.lookback : buffer.lookback + stop]
        except MemoryError:
            pass  # the slice read words it
    return buffer.get(slice(None, stop))


_INT64 = np.iinfo(np.int64)


def time_steps(start: int, stop: int) -> np.ndarray:
    """The time steps ``start..stop - 1`` as an array that holds each exactly.

    int64 where they fit, uint64 past its top, an object array where neither holds them all
    (``np.arange`` gives floats past int64, which round neighbouring steps together).

    Example:
        >>> time_steps(3, 6).tolist(), time_steps(2**63 - 1, 2**63 + 1).dtype
        ([3, 4, 5], dtype('uint64'))
    """
    count = max(stop - start, 0)
    if count == 0 or (start >= _INT64.min and stop - 1 <= _INT64.max):
        return np.arange(count, dtype=np.int64) + np.int64(start if count else 0)
    if start >= 0 and stop - 1 <= np.iinfo(np.uint64).max:
        return np.arange(count, dtype=np.uint64) + np.uint64(start)
    return np.array(range(start, stop), dtype=object)


def exact_steps(parts: list[Any]) -> list[Any]:
    """Chunks' :func:`time_steps` in one dtype that holds each, so that they join exactly.

    int64 beside uint64 steps would join as float64, rounding neighbouring steps together.

    Example:
        >>> [p.dtype.name for p in exact_steps([time_steps(0, 2), time_steps(2**63, 2**63 + 1)])]
        ['uint64', 'uint64']
    """
    if all(part.dtype == np.int64 for part in parts):
        return parts
    kind: Any = object
    if not any(part.dtype == object for part in parts):
        if all(int(part.min(initial=0)) >= 0 for part in parts):
            kind = np.uint64
    return [part.astype(kind) for part in parts]
