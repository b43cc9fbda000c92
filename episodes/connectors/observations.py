"""Observation connectors: flattening with one-hot, and n-frame stacking across chunk borders."""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import gymnasium as gym
import numpy as np
import tree

from episodes.buffer.plain_arrays import holds_masked
from episodes.connectors.base import (
    Batch,
    EpisodeConnector,
    FillerMemo,
    _refuse_lists,
    _window_leaves,
    as_arrays,
    check_episodes,
    join_rows,
    with_fill_dtype,
)
from episodes.connectors.checked_settings import flag
from episodes.connectors.float32 import as_float32
from episodes.connectors.given_batch import check_batch
from episodes.connectors.last_rows import last_flat_rows
from episodes.connectors.lookback_reach import warn_short_lookback
from episodes.connectors.rllib_keywords import explains_rllib_keywords
from episodes.connectors.text_fill import refuse_text_fill
from episodes.episode import SingleAgentEpisode
from episodes.errors import IntegerTypeError
from episodes.indexing import as_flag
from episodes.spaces import find_space_kind
from episodes.spaces.batching import rounded_ints
from episodes.spaces.per_space_cache import PerSpaceCache
from episodes.structs import short_repr

__all__ = ["FlattenObservations", "FrameStack", "flatten_rows"]


def flatten_rows(value: Any, rows: int | None = None, *, name: str = "flatten_rows") -> np.ndarray:
    """A batched (possibly nested) value ``[B, ...]`` as one float32 matrix ``[B, D]``.

    Leaves are reshaped to ``[B, -1]`` and concatenated in dm-tree order (dict keys sorted).
    A value without leaves (items of an empty ``Dict``/``Tuple`` space, which gymnasium
    flattens to ``D = 0``) cannot show its row count: ``rows`` gives it, for ``[rows, 0]``.
    Given with leaves, ``rows`` is the count every leaf must have. ``name`` (the connector and
    column) leads an error's message.

    Raises:
        ValueError: ``value`` has no leaves and ``rows`` is None; a leaf holds strings (items
            of a Text space), which are no numbers to flatten; a leaf has no rows (a 0-d
            leaf), or other rows than the first leaf (or than ``rows``): re-cut to one row
            count, one row would hold parts of several. The message names the leaf. A
            finite value float32 would make inf (1e300) is a
            :class:`~episodes.connectors.float32.Float32RangeError` naming ``name``.
        TypeError: ``value`` holds a list: a list-mode getter's read is a list of per-step
            items, a numpy'd column of ``[x, y]`` items a list of per-leaf columns, and one
            read as the other flattens to transposed rows. Stack per-step items first
            (``np.stack``, ``episodes.spaces.batch``); pass per-leaf columns as a tuple.

    Example:
        >>> flatten_rows({"a": np.zeros((2, 2)), "b": np.ones(2)})
        array([[0., 0., 1.],
               [0., 0., 1.]], dtype=float32)
        >>> flatten_rows({}, rows=3).shape
        (3, 0)
        >>> try:  # 2 rows of 4 values would mix b's rows
        ...     flatten_rows({"a": np.zeros((2, 1)), "b": np.zeros((4, 1))})
        ... except ValueError as err:
        ...     print(str(err).split(": ")[1])
        leaf ['b'] has 4 rows, leaf ['a'] 2
        >>> flatten_rows({"a": np.zeros((0, 2)), "b": np.zeros((0, 2, 3))}).shape  # no rows
        (0, 8)
    """
    _refuse_lists(name, value)
    return _flat_leaves(value, rows, name)


def _flat_leaves(value: Any, rows: int | None, name: str) -> np.ndarray:
    # flatten_rows, where a list is a container of leaves (the connectors' reads).
    leaves = [np.asarray(leaf) for leaf in tree.flatten(value)]
    if not leaves:
        if rows is None:
            raise ValueError(f"{name}: {value!r} has no leaves to count its rows by; pass rows=")
        return np.zeros((rows, 0), np.float32)
    for leaf in leaves:
        if leaf.dtype.kind in "US":  # numpy's own error names neither the leaf nor why
            raise ValueError(
                f"{name}: a leaf holds strings ({leaf.dtype}), which do not flatten to float32"
            )
    counts = [leaf.shape[0] if leaf.ndim else -1 for leaf in leaves]  # -1: a 0-d leaf
    if -1 in counts or counts.count(counts[0]) != len(counts) or rows not in (None, counts[0]):
        _refuse_rows(value, counts, rows, name)
    # An explicit width: with no rows, -1 cannot be inferred from a size-0 leaf.
    mats = [as_float32(leaf.reshape(counts[0], math.prod(leaf.shape[1:])), name) for leaf in leaves]
    return mats[0] if len(mats) == 1 else np.concatenate(mats, axis=1)


def _refuse_rows(value: Any, counts: list[int], rows: int | None, name: str) -> NoReturn:
    # Only on a refusal: the leaves' paths, to name the one that is off.
    paths = ["".join(f"[{key!r}]" for key in path) for path, _ in tree.flatten_with_path(value)]
    leaf = [f"leaf {path}" if path else "the value" for path in paths]
    if -1 in counts:
        at = counts.index(-1)
        raise ValueError(f"{name}: {leaf[at]} is 0-d: it has no rows to flatten")
    odd = next((i for i, count in enumerate(counts) if count != counts[0]), None)
    if odd is not None:
        raise ValueError(
            f"{name}: {leaf[odd]} has {counts[odd]} rows, {leaf[0]} {counts[0]}: the leaves must "
            "have one row count"
        )
    raise ValueError(f"{name}: {leaf[0]} has {counts[0]} rows, where rows={rows} were given")


def _whole_count(value: Any, name: str, minimum: int) -> int:
    # int() would truncate 2.7 to 2 and take True as 1: a window size must be a real integer.
    if isinstance(value, (bool, np.bool_)):
        raise IntegerTypeError(f"{name} must be an integer, got the bool {value!r}")
    if getattr(value, "shape", ()) != ():  # operator.index takes a one-element tensor
        raise IntegerTypeError(f"{name} must be an integer, got {short_repr(value)}")
    try:
        count = operator.index(value)
    except TypeError:
        raise IntegerTypeError(
            f"{name} must be an integer, got {value!r} ({type(value).__name__})"
        ) from None
    if count < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {count}")
    return count


def _column_name(value: Any, name: str) -> str:
    # A batch is keyed by column names (AddLearnerColumns refuses other ones too): None or 3
    # would become a key no learner reads.
    if not isinstance(value, str):
        kind = type(value).__name__
        raise TypeError(f"{name} must be a str (a batch column), got {kind} ({short_repr(value)})")
    return value


def _needed_fill(value: Any, who: str, what: str) -> Any:
    if value is None:  # the getter would clip the window: fewer rows than steps
        raise ValueError(f"{who} needs a fill value for {what} before the episode")
    return value


def _read_obs(
    episode: SingleAgentEpisode,
    start: int,
    stop: int,
    fillers: FillerMemo | None,
    one_hot: bool,
    name: str,
) -> Any:
    # Without a space there is nothing to one-hot by: the leaves flatten as recorded, so a
    # space-less float episode works with the default flag (documented on the connectors).
    one_hot = one_hot and episode.observation_space is not None
    space = episode.observation_space
    # Before the read: a fill that cannot fill the space is refused whether or not a row
    # needs padding (else where a chunk was cut decided it); the rows then take the dtype
    # the filler gives them, so a column's dtype does not depend on the cut either.
    fill = None if fillers is None else fillers.fill
    filler = None if fillers is None else fillers.get(space, one_hot_discrete=one_hot)
    if space is None:  # fill itself pads: a string one would turn numbers into strings
        refuse_text_fill(episode.observations, fill)
    value = episode.get_observations(
        slice(start, stop), neg_index_as_lookback=True, fill=fill, one_hot_discrete=one_hot
    )
    finalized = episode.observations.finalized
    rows = as_arrays(value, fill, finalized=finalized, space=space, name=name)
    return rows if fill is None else with_fill_dtype(rows, filler)


# Whether an observation space holds a Text part, per live space (episodes share spaces).
_HOLDS_TEXT: PerSpaceCache[bool] = PerSpaceCache(
    lambda space: find_space_kind(space, (gym.spaces.Text,)) is not None
)


def _check_flattenable(episode: SingleAgentEpisode, name: str, instead: str) -> None:
    # Checked on the space before the read: strings do not flatten to float32, and numpy's
    # error ("could not convert string to float") names neither the column nor the space.
    space = episode.observation_space
    if space is not None and _HOLDS_TEXT.get(space):
        raise ValueError(
            f"{name}: the observation space {space} of episode {episode.id_!r} holds a Text "
            f"space, whose strings do not flatten to float32 rows; {instead}"
        )


def _join(parts: list[Any], key: str, episodes: list[SingleAgentEpisode], plain: str) -> Any:
    # ``plain``: the option that turns the one-hot off ("" when it is off already).
    ids = [ep.id_ for ep in episodes]
    try:
        return join_rows(parts, key, ids)
    except ValueError as err:
        # The likely cause: one-hot rows next to the raw rows of an episode without a space.
        spaceless = [ep.id_ for ep in episodes if ep.observation_space is None]
        if not (plain and spaceless and len(spaceless) < len(episodes)):
            raise
        raise ValueError(
            f"{err}; episode {spaceless[0]!r} has no observation space, so its discrete leaves "
            f"are not one-hot as the others' are (give every episode the space, or pass {plain})"
        ) from err


class FlattenObservations(
    EpisodeConnector,
    one_hot_discrete=flag("one_hot_discrete"),
    out_key=lambda value: _column_name(value, "FlattenObservations' out_key"),
):
    """Writes each row's observation, flattened to float32 ``[rows, D]`` (discrete one-hot).

    An empty ``Dict``/``Tuple`` observation gives ``D = 0`` columns, as gymnasium's ``flatdim``.
    Episodes whose rows do not join (spaces of other sizes) are a ``ValueError`` naming the
    column and two such episodes; so is an observation space holding a Text space (strings do
    not flatten), naming the column and the space, and a finite value float32 would make inf
    (a float64 1e300: :class:`~episodes.connectors.float32.Float32RangeError`, naming the
    column; inf and NaN are kept). The batch is left as it was.

    Args:
        one_hot_discrete: One-hot Discrete/MultiDiscrete leaves. That needs the observation
            space: an episode without one flattens its leaves as recorded (no one-hot), so a
            space-less float episode works with the default; next to one-hot rows of another
            width its rows are refused as above.
        out_key: The batch column to write (a str, else a ``TypeError``).
        inference: Rows per episode (see :mod:`episodes.connectors.base`).

    Example:
        >>> import gymnasium as gym
        >>> from episodes import SingleAgentEpisode
        >>> ep = SingleAgentEpisode(observations=[0, 2, 1], actions=[0, 0], rewards=[0.0, 0.0],
        ...                         observation_space=gym.spaces.Discrete(3),
        ...                         len_lookback_buffer=0)
        >>> FlattenObservations()([ep], {})["obs"]
        array([[1., 0., 0.],
               [0., 0., 1.]], dtype=float32)
    """

    @explains_rllib_keywords
    def __init__(
        self, *, one_hot_discrete: bool = True, out_key: str = "obs", inference: bool = False
    ):
        out_key = _column_name(out_key, "FlattenObservations' out_key")
        super().__init__(inference=inference)
        self.one_hot_discrete = as_flag(one_hot_discrete, "one_hot_discrete")  # as reads take it
        self.out_key = out_key

    def __call__(self, episodes: Sequence[SingleAgentEpisode], batch: Batch) -> Batch:
        """Writes the flattened observation rows of ``episodes`` into ``batch``."""
        episodes = check_episodes(episodes, "FlattenObservations")  # an array's as a list
        batch = check_batch(batch, "FlattenObservations")
        name = f"FlattenObservations' {self.out_key!r} column"
        if self.inference:
            rows = _last_box_rows(episodes, name)
            if rows is None:  # other spaces shared by all: one encoding, not one per episode
                rows = last_flat_rows(episodes, self.one_hot_discrete, name)
        else:
            rows = _box_rows(episodes, self.rows, name)
        if rows is not None:
            batch[self.out_key] = rows
            return batch
        parts, used = [], []
        for episode in episodes:
            start, stop = self.rows(episode)
            if stop > start:
                _check_flattenable(episode, name, "read them with the getters or AddLearnerColumns")
                value = _read_obs(episode, start, stop, None, self.one_hot_discrete, name)
                parts.append(_flat_leaves(value, stop - start, name))
                used.append(episode)
        if parts:
            batch[self.out_key] = _join(
                parts, self.out_key, used, "one_hot_discrete=False" if self.one_hot_discrete else ""
            )
        return batch


def _last_box_rows(episodes: Sequence[SingleAgentEpisode], name: str) -> np.ndarray | None:
    """Each episode's last observation flattened, for episodes of Box spaces (else None).

    The inference read of the common case in one stack: a step's observations of thousands of
    episodes cost a getter call each, not a read, batch and flatten each. Anything else (other
    spaces, items that do not stack, no observation yet, a masked array with masked entries)
    is left to the general path, which reads the same rows and raises its errors.
    """
    if not episodes or not _all_boxes(episodes):
        return None
    try:
        raw = [ep.get_observations(-1) for ep in episodes]
        if holds_masked(raw):  # np.asarray would drop the mask: the general path refuses it
            return None
        items = [np.asarray(item) for item in raw]
        if len({item.dtype for item in items}) != 1:
            return None  # joined they would round twice (int64 -> float64 -> float32)
        stacked = np.stack(items)
    except (ValueError, TypeError, IndexError):
        return None
    return _float_rows(stacked, name)


def _past_exact(rows: np.ndarray) -> bool:
    """Whether float64 ``rows`` hold a NaN or a value of ``2**53`` or more in magnitude.

    Only then can ints among the items stacked into them have been rounded (see
    :func:`_rounded`): two passes over the rows rather than a look at every item.
    """
    if rows.dtype != np.float64 or not rows.size:
        return False
    low, high = rows.min(), rows.max()
    return not (-(2.0**53) < low and high < 2.0**53)


def _rounded(read: Any, rows: np.ndarray) -> bool:
    """Whether ``rows``, ``np.asarray`` of a list-mode read, rounded ints ``batch`` keeps exact.

    ``2**63 + 1`` beside ``1`` stacks as float64 (rounded); the general path's batching keeps
    such ints uint64. Only float64 reads all of ints or int arrays can: one look at the first
    item leaves floats, the usual case, at that; such reads are left to the general path.
    """
    if rows.dtype != np.float64 or read.__class__ is not list or not read:
        return False
    first = read[0]
    if isinstance(first, np.ndarray):
        return first.dtype.kind in "iu" and rounded_ints(read)
    return isinstance(first, (int, np.integer)) and rounded_ints(read)


def _all_boxes(episodes: Sequence[SingleAgentEpisode]) -> bool:
    return all(type(ep.observation_space) is gym.spaces.Box for ep in episodes)


def _float_rows(rows: np.ndarray, name: str) -> np.ndarray | None:
    """Numeric rows flattened to float32 ``[rows, D]``, as ``flatten_rows`` gives (else None)."""
    if rows.dtype.kind not in "biuf":
        return None
    return as_float32(rows.reshape(len(rows), -1), name)


def _box_rows(
    episodes: Sequence[SingleAgentEpisode],
    rows_of: Callable[[SingleAgentEpisode], tuple[int, int]],
    name: str,
) -> np.ndarray | None:
    """Every row's observation of episodes of Box spaces, flattened, in one concatenation.

    The learner read of the common case: each episode's rows are read as the general path
    reads them, and joined and flattened once (None for anything else, which the general path
    reads and refuses as before, a masked array with masked entries among the items too).
    """
    if not _all_boxes(episodes):
        return None
    reads: list[Any] = []
    try:
        for ep in episodes:
            start, stop = rows_of(ep)
            if stop > start:
                reads.append(ep.get_observations(slice(start, stop), neg_index_as_lookback=True))
        if holds_masked(reads):  # np.asarray would drop the mask: the general path refuses it
            return None
        parts = [np.asarray(obs) for obs in reads]
        if not parts or len({(part.shape[1:], part.dtype) for part in parts}) != 1:
            return None  # other shapes flatten alone; other dtypes joined would round twice
        joined = np.concatenate(parts)
    except (ValueError, TypeError, IndexError):
        return None
    if _past_exact(joined) and any(map(_rounded, reads, parts)):
        return None
    return _float_rows(joined, name)


def _last_box_frames(
    episodes: Sequence[SingleAgentEpisode], n: int, fillers: FillerMemo
) -> np.ndarray | None:
    """The last ``n`` observations of episodes sharing one Box space, ``[episodes, n, ...]``.

    The inference read of the common case in one stack (None for any other). Each window is read
    as the general path reads it (padded with the fill before the lookback) and the stack takes
    the dtype the filler gives it; anything else (other or differing spaces, items that do not
    stack, a masked array with masked entries) is left to the general path and its errors.
    """
    space = episodes[0].observation_space if episodes else None
    if type(space) is not gym.spaces.Box or any(
        ep.observation_space is not space or not ep.is_reset for ep in episodes
    ):
        return None  # an episode without an observation: the general path refuses it
    fill = fillers.fill
    try:
        filler = fillers.get(space)
        windows = [
            ep.get_observations(
                slice(len(ep) - n + 1, len(ep) + 1), neg_index_as_lookback=True, fill=fill
            )
            for ep in episodes
        ]
        if holds_masked(windows):  # np.asarray would drop the mask: the general path refuses it
            return None
        arrays = [np.asarray(window) for window in windows]
        stacked = np.stack(arrays)
    except (ValueError, TypeError, IndexError):
        return None
    if stacked.dtype.kind not in "biuf" or stacked.shape[1] != n or not stacked.size:
        return None  # zero-size items: typed as the general path types them (batching.batch)
    if _past_exact(stacked) and any(map(_rounded, windows, arrays)):
        return None
    return stacked.astype(np.result_type(stacked.dtype, np.asarray(filler).dtype), copy=False)


class FrameStack(
    EpisodeConnector,
    n=lambda value: _whole_count(value, "FrameStack's n", 1),
    fill=lambda value: _needed_fill(value, "FrameStack", "frames"),
    flatten=flag("flatten"),
    out_key=lambda value: _column_name(value, "FrameStack's out_key"),
):
    """Writes the last ``n`` observations of each row: ``[rows, n, *obs_shape]``, oldest first.

    Row ``ts`` holds observations ``ts-n+1 .. ts``; before the episode's first observation (and
    beyond the lookback) frames are ``fill``-ed. Frames beyond a chunk's lookback that its
    episode had (a chunk starting at ``t_started`` past its lookback) are filled too, with a
    :class:`~episodes.connectors.lookback_reach.ShortLookbackWarning`: keep ``n - 1`` steps of
    lookback. Each episode's whole window range is read once.
    Episodes whose rows do not join are refused as by :class:`FlattenObservations`.

    Args:
        n: Frames per row (an integer >= 1; a float or bool is a ``TypeError``).
        fill: Filler for missing frames (default 0.0).
        flatten: Flatten (and one-hot) every frame and concatenate: ``[rows, n * D]`` float32,
            as :class:`FlattenObservations` flattens (an episode without an observation space
            is not one-hot; one whose space holds a Text space is refused).
        out_key: The batch column to write (a str, else a ``TypeError``).
        inference: Rows per episode (see :mod:`episodes.connectors.base`).

    Example:
        >>> from episodes import SingleAgentEpisode
        >>> ep = SingleAgentEpisode(observations=[1.0, 2.0, 3.0], actions=[0, 0],
        ...                         rewards=[0.0, 0.0], len_lookback_buffer=0)
        >>> FrameStack(2)([ep], {})["obs"]
        array([[0., 1.],
               [1., 2.]])
    """

    @explains_rllib_keywords
    def __init__(
        self,
        n: int,
        *,
        fill: Any = 0.0,
        flatten: bool = False,
        out_key: str = "obs",
        inference: bool = False,
    ):
        count = _whole_count(n, "FrameStack's n", 1)
        out_key = _column_name(out_key, "FrameStack's out_key")
        _needed_fill(fill, "FrameStack", "frames")
        super().__init__(inference=inference)
        self.n = count
        self.fill = fill
        self.flatten = as_flag(flatten, "flatten")
        self.out_key = out_key

    def _reach(self, episode: SingleAgentEpisode) -> int:
        # Observations before ts = 0 that the first row reads: learner rows start at 0 (an
        # empty episode has none), an inference row at len(episode), read without rows() where
        # it reaches nothing (rows() refuses an episode without an observation).
        size = len(episode)
        if not self.inference:
            return self.n - 1 if size else 0
        return self.n - 1 - (size if size >= self.n - 1 else self.rows(episode)[0])

    def __call__(self, episodes: Sequence[SingleAgentEpisode], batch: Batch) -> Batch:
        """Writes the stacked frames of every row of ``episodes`` into ``batch``."""
        episodes = check_episodes(episodes, "FrameStack")  # an array's as a list
        batch = check_batch(batch, "FrameStack")
        # Inference rows of episodes at least n - 1 steps long reach before none: no walk.
        if not self.inference or min(map(len, episodes), default=self.n) < self.n - 1:
            who = f"FrameStack({self.n})"
            warn_short_lookback(episodes, self._reach, "observations", who, self.fill)
        fillers = FillerMemo(self.fill)
        if self.inference and not self.flatten:
            frames = _last_box_frames(episodes, self.n, fillers)
            if frames is not None:
                batch[self.out_key] = frames
                return batch
        name = f"FrameStack's {self.out_key!r} column"
        parts, used = [], []
        for episode in episodes:
            start, stop = self.rows(episode)
            if stop <= start:
                continue
            first = start - self.n + 1
            if self.flatten:
                _check_flattenable(episode, name, "pass flatten=False to stack them unflattened")
            value = _read_obs(episode, first, stop, fillers, self.flatten, name)
            if self.flatten:  # the fill keeps the window whole: n - 1 rows before the first
                flat = _flat_leaves(value, stop - start + self.n - 1, name)
                windows = _window_leaves(flat, self.n)
                # An explicit width: with D = 0, -1 cannot be inferred from a size-0 array.
                parts.append(windows.reshape(windows.shape[0], self.n * windows.shape[2]))
            else:
                parts.append(_window_leaves(value, self.n))
            used.append(episode)
        if parts:
            batch[self.out_key] = _join(
                parts, self.out_key, used, "flatten=False" if self.flatten else ""
            )
        return batch
