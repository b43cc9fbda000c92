"""Running observation statistics: a mean/std filter that counts each observation once.

:class:`MeanStdFilter` keeps the running mean and variance of every observation element and
writes ``(obs - mean) / (std + eps)``, clipped, as a float32 column. Counting is keyed by
episode id and time step, so the env-to-module pipeline (``inference=True``, each step) and
the learner pipeline (every row of a chunk) can share one filter without counting an
observation twice. The episodes are never changed: the normalized rows are batch columns.

Example:
    >>> import gymnasium as gym
    >>> from episodes import SingleAgentEpisode
    >>> ep = SingleAgentEpisode(observations=[[0.0], [2.0], [4.0]], actions=[0, 0],
    ...                         rewards=[0.0, 0.0], len_lookback_buffer=0,
    ...                         observation_space=gym.spaces.Box(-9, 9, (1,)))
    >>> filt = MeanStdFilter()
    >>> filt([ep], {})["obs"].round(3).astype(float).tolist()  # mean 2, std 2: all three
    [[-1.0], [0.0]]
    >>> filt.count, filt.mean.tolist(), filt.var.tolist()
    (3, [2.0], [4.0])
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import tree

from episodes.buffer.plain_arrays import holds_masked
from episodes.connectors.base import Batch, EpisodeConnector, check_episodes
from episodes.connectors.checked_settings import flag
from episodes.connectors.float32 import as_float32
from episodes.connectors.given_batch import check_batch
from episodes.connectors.mean_std_stats import (
    _arrays,
    _chan,
    _checked_state,
    _fitted,
    _Layout,
    _moments,
    _same_structure,
    _sample_var,
    _sized,
    _Stats,
)
from episodes.connectors.observations import _column_name, _read_obs
from episodes.connectors.rllib_keywords import explains_rllib_keywords
from episodes.episode import SingleAgentEpisode
from episodes.indexing import as_flag

__all__ = ["MeanStdFilter", "TRACKED_EPISODES"]

#: Episode ids a filter remembers (the most recently seen) to count each observation once.
TRACKED_EPISODES = 65_536


class MeanStdFilter(
    EpisodeConnector,
    # Checked on every assignment (checked_settings): ``filt.update = False`` is how a loop
    # freezes the filter for evaluation (VecNormalize's ``training``), and a bad value set
    # later (``clip = -1``) would clip, count or divide wrongly without a word.
    update=flag("update"),
    clip=lambda value: None if value is None else _positive(value, "clip"),
    eps=lambda value: _positive(value, "eps"),
    out_key=lambda value: _column_name(value, "MeanStdFilter's out_key"),
):
    """Normalizes observations by running per-element statistics: ``(obs - mean) / (std + eps)``.

    With ``update=True`` a call first counts the observations of ``episodes`` it has not
    counted yet (each episode's ``ts = 0 .. len(ep)``, by episode id and time step ``t``:
    later chunks of an episode add only their new observations, a chunk given again adds
    none), in one batched Chan merge, and then normalizes its rows with the statistics that
    include them. The statistics are the mean and the sample variance (``n - 1``, 0 for
    fewer than two observations, as RLlib's) of each element; ``std + eps`` divides. The
    column is float32 ``[rows, *shape]`` (a dict/tuple of such for Dict/Tuple spaces of
    Boxes), clipped to ``[-clip, clip]``; the episodes are not changed.

    A filter remembers the last :data:`TRACKED_EPISODES` episode ids it was given (an id
    given again, even with nothing new, is recent again, so a long episode among many short
    ones is not forgotten): give an episode's chunks in time order (a chunk before one
    already counted adds nothing). The env-to-module and learner pipelines share the
    statistics through :meth:`shared`; runners acting on a learner's statistics take them
    with ``set_state`` into ``update=False`` filters, and filters that counted disjoint
    streams combine with :meth:`merge`.
    :meth:`normalize` applies the statistics to arrays not read from episodes (a replay
    batch's ``obs`` and ``next_obs``, a policy's env observations).

    Args:
        clip: Clip the output to ``[-clip, clip]`` (a number > 0), or None for no clipping.
        eps: Added to the std before dividing (a number > 0; RLlib's 1e-6 by default).
        update: Count new observations in calls; False freezes the statistics (evaluation,
            or runners acting on a learner's synced statistics). The settings may be
            assigned later (``filt.update = False``), checked as here.
        out_key: The batch column to write (a str).
        inference: Rows per episode (see :mod:`episodes.connectors.base`).

    Raises:
        ValueError: (on a call) an observation space other than Box, or Dict/Tuple of Boxes
            (Discrete leaves have no mean to take: flatten them first), observations shaped
            otherwise than those counted before, a NaN or inf among the new observations
            (it would spoil every later output), or values whose squares overflow; the
            filter and the batch are left as they were.

    Example:
        >>> import gymnasium as gym
        >>> from episodes import SingleAgentEpisode
        >>> box = gym.spaces.Box(-10, 10, (2,))
        >>> ep = SingleAgentEpisode(observations=[[1.0, 0.0], [3.0, 0.0]], actions=[0],
        ...                         rewards=[0.0], observation_space=box, len_lookback_buffer=0)
        >>> filt = MeanStdFilter(inference=True)
        >>> out = filt([ep], {})["obs"]  # the latest observation, (3 - 2) / sqrt(2)
        >>> out.dtype, out.astype(float).round(3).tolist()
        (dtype('float32'), [[0.707, 0.0]])
        >>> frozen = MeanStdFilter(update=False, inference=True)
        >>> frozen.set_state(filt.get_state())
        >>> np.array_equal(frozen([ep], {})["obs"], out), frozen.count
        (True, 2)
    """

    @explains_rllib_keywords
    def __init__(
        self,
        *,
        clip: float | None = 10.0,
        eps: float = 1e-6,
        update: bool = True,
        out_key: str = "obs",
        inference: bool = False,
    ):
        out_key = _column_name(out_key, "MeanStdFilter's out_key")
        if clip is not None:
            clip = _positive(clip, "clip")
        eps = _positive(eps, "eps")
        super().__init__(inference=inference)
        self.clip = clip
        self.eps = eps
        self.update = as_flag(update, "update")
        self.out_key = out_key
        self._s = _Stats()

    def shared(self, *, inference: bool | None = None, update: bool | None = None) -> MeanStdFilter:
        """A filter on the same statistics (and counted episodes), with its own row choice.

        What one filter counts the other sees: put one in the env-to-module pipeline
        (``inference=True``) and the other in the learner's, and each observation is counted
        once. ``clip``, ``eps`` and ``out_key`` are this filter's; None keeps a setting.

        Example:
            >>> learner = MeanStdFilter()
            >>> acting = learner.shared(inference=True)
            >>> acting.inference, acting.get_state() == learner.get_state()
            (True, True)
        """
        twin = MeanStdFilter(
            clip=self.clip,
            eps=self.eps,
            update=self.update if update is None else update,
            out_key=self.out_key,
            inference=self.inference if inference is None else inference,
        )
        twin._s = self._s
        return twin

    @property
    def count(self) -> int:
        """Observations counted."""
        return self._s.count

    # Statistics ---------------------------------------------------------------------------

    @property
    def mean(self) -> Any:
        """The running mean, shaped as an observation (None before any observation)."""
        return None if self._s.layout is None else self._s.layout.unflat(self._s.mean.copy())

    @property
    def var(self) -> Any:
        """The sample variance (``n - 1``; zeros below two observations), as :attr:`mean`."""
        return None if self._s.layout is None else self._s.layout.unflat(_variance(self))

    @property
    def std(self) -> Any:
        """``sqrt(var)``, as :attr:`mean`."""
        return None if self._s.layout is None else self._s.layout.unflat(np.sqrt(_variance(self)))

    def get_state(self) -> dict[str, Any]:
        """The statistics: ``count``, ``mean`` and ``m2`` (sums of squared deviations), copies.

        ``mean`` and ``m2`` are float64, shaped as an observation (None before the filter
        saw one). The episode ids counted are not part of it.

        Example:
            >>> MeanStdFilter().get_state()
            {'count': 0, 'mean': None, 'm2': None}
        """
        if self._s.layout is None:
            return {"count": self._s.count, "mean": None, "m2": None}
        return {
            "count": self._s.count,
            "mean": self._s.layout.unflat(self._s.mean.copy()),
            "m2": self._s.layout.unflat(self._s.m2.copy()),
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Replaces the statistics with ``state`` (what :meth:`get_state` gives).

        Raises:
            TypeError: ``state`` is not a mapping with ``count``, ``mean`` and ``m2``.
            ValueError: a count that is not an int >= 0, ``mean``/``m2`` not shaped as the
                observations this filter has seen (or as each other), not finite, a
                negative ``m2``, or a non-zero ``m2`` with a count below 2 (no stream gives
                it). The filter is left as it was. Lists (a state read back from JSON) are
                taken as arrays, or as the tuples they were where the filter knows its
                observations' layout; one that saw none reads a list of equally shaped
                leaves as one array (give a Tuple space's leaves back as a tuple then).

        Example:
            >>> import numpy as np
            >>> filt = MeanStdFilter()
            >>> filt.set_state({"count": 3, "mean": np.zeros(2), "m2": np.full(2, 8.0)})
            >>> filt.std.tolist()
            [2.0, 2.0]
            >>> try:
            ...     filt.set_state({"count": 3, "mean": np.zeros(3), "m2": np.zeros(3)})
            ... except ValueError as err:
            ...     print(str(err)[:62])
            MeanStdFilter.set_state: 'mean' is shaped [(3,)], the filter's
        """
        count, layout, mean, m2 = _checked_state(state, self._s.layout, "MeanStdFilter.set_state")
        if state["mean"] is None:  # get_state of a filter that saw no observation: none here
            layout, mean, m2 = None, np.zeros(0), np.zeros(0)
        self._s.count, self._s.layout, self._s.mean, self._s.m2 = count, layout, mean, m2

    def merge(self, *others: MeanStdFilter | Mapping[str, Any]) -> None:
        """Adds the statistics of ``others`` (filters, or their ``get_state()``) to this one.

        Exact for disjoint streams: the result is what one filter fed every stream would
        hold (within float rounding). For several runners, merge the filters that counted
        each runner's own episodes; a filter merged in twice counts its observations twice.
        The episode ids the others counted are not taken over.

        Raises:
            TypeError, ValueError: an item is neither a filter nor a state, or as
                :meth:`set_state` refuses it (other shapes too). Nothing is merged then.

        Example:
            >>> import numpy as np
            >>> a, b = MeanStdFilter(), MeanStdFilter()
            >>> a.set_state({"count": 2, "mean": np.array([1.0]), "m2": np.array([2.0])})
            >>> b.set_state({"count": 2, "mean": np.array([5.0]), "m2": np.array([2.0])})
            >>> a.merge(b)  # the stream 0, 2, 4, 6
            >>> a.count, a.mean.tolist(), a.var.tolist()
            (4, [3.0], [6.666666666666667])
        """
        count, layout, mean, m2 = self._s.count, self._s.layout, self._s.mean, self._s.m2
        for i, other in enumerate(others):
            state = other.get_state() if isinstance(other, MeanStdFilter) else other
            got = _checked_state(state, layout, f"MeanStdFilter.merge (item {i})")
            if got[0] == 0:
                layout = layout if layout is not None else got[1]
                continue
            if layout is None or count == 0:
                count, layout, mean, m2 = got
                continue
            count, mean, m2 = _chan(count, mean, m2, got[0], got[2], got[3])
        mean, m2 = _sized(layout, mean, m2)
        self._s.count, self._s.layout, self._s.mean, self._s.m2 = count, layout, mean, m2

    def reset(self) -> None:
        """Forgets the statistics and the episodes counted (the observation layout stays).

        Example:
            >>> import numpy as np
            >>> filt = MeanStdFilter()
            >>> filt.set_state({"count": 3, "mean": np.ones(2), "m2": np.ones(2)})
            >>> filt.reset()
            >>> filt.count, filt.mean.tolist()
            (0, [0.0, 0.0])
        """
        self._s.count = 0
        self._s.mean = np.zeros_like(self._s.mean)
        self._s.m2 = np.zeros_like(self._s.m2)
        self._s.counted.clear()

    # The call -----------------------------------------------------------------------------

    def normalize(self, obs: Any) -> Any:
        """``obs`` normalized with the current statistics, as a call's rows are; counts nothing.

        For observations that are not read from episodes: a policy's raw env observations, a
        replay batch's ``obs`` and ``next_obs``. Each leaf is ``[..., *shape]`` (any leading
        dimensions, none for one observation); the result is float32, shaped and nested so.

        Raises:
            ValueError: the filter has no statistics yet (no observation counted nor state
                set), or ``obs`` is not nested or shaped as the observations counted.

        Example:
            >>> import numpy as np
            >>> filt = MeanStdFilter()
            >>> filt.set_state({"count": 3, "mean": np.ones(2), "m2": np.full(2, 8.0)})
            >>> filt.normalize(np.array([[3.0, 1.0], [-1.0, 5.0]])).round(3).astype(float).tolist()
            [[1.0, 0.0], [-1.0, 2.0]]
        """
        layout = self._s.layout
        if layout is None:
            raise ValueError("MeanStdFilter.normalize: no statistics yet (nothing counted or set)")
        obs = _arrays(obs)  # a list is one observation's (or a batch's) array
        leaves = [np.asarray(leaf) for leaf in tree.flatten(obs)]
        skeleton = tree.map_structure(lambda _: None, obs)
        fits = len(leaves) == len(layout.shapes) and _same_structure(skeleton, layout.skeleton)
        if fits:
            fits = all(
                leaf.ndim >= len(shape) and leaf.shape[leaf.ndim - len(shape) :] == shape
                for leaf, shape in zip(leaves, layout.shapes)
            )
        if not fits:
            shapes = [leaf.shape for leaf in leaves]
            raise ValueError(
                f"MeanStdFilter.normalize: leaves shaped {shapes} are not [..., *shape] of the "
                f"observations counted, {layout.shapes}"
            )
        counted = len(self._s.mean) == layout.size  # else frozen before any observation
        mean = self._s.mean if counted else np.zeros(layout.size)
        std = np.sqrt(_variance(self)) if counted else np.zeros(layout.size)
        out, start = [], 0
        for leaf, size in zip(leaves, layout.sizes):
            if not size:  # a leaf of no elements: nothing to normalize (reshape(-1, 0) fails)
                out.append(np.zeros(leaf.shape, np.float32))
                continue
            part = slice(start, start + size)
            flat = (leaf.reshape(-1, size).astype(np.float64) - mean[part]) / (std[part] + self.eps)
            if self.clip is not None:
                flat = np.clip(flat, -self.clip, self.clip)
            out.append(as_float32(flat, "MeanStdFilter.normalize").reshape(leaf.shape))
            start += size
        return tree.unflatten_as(layout.skeleton, out)

    def __repr__(self) -> str:
        return (
            f"MeanStdFilter(clip={self.clip!r}, eps={self.eps!r}, update={self.update!r}, "
            f"out_key={self.out_key!r}, inference={self.inference!r}, count={self.count})"
        )

    def __call__(self, episodes: Sequence[SingleAgentEpisode], batch: Batch) -> Batch:
        """Counts new observations (``update=True``) and writes the normalized rows."""
        episodes = check_episodes(episodes, "MeanStdFilter")
        batch = check_batch(batch, "MeanStdFilter")
        name = f"MeanStdFilter's {self.out_key!r} column"
        layout = self._s.layout
        count, mean, m2 = self._s.count, self._s.mean, self._s.m2
        marks: dict[Hashable, int] = {}
        fresh, parts, counted = [], [], []
        for ep in episodes:
            a, b = self.rows(ep)
            new = None  # the observations (ts) this call counts: first .. len(ep)
            if self.update and ep.is_reset:
                _check_hashable(ep)
                done_up_to = marks.get(ep.id_, self._s.counted.get(ep.id_, ep.t_started))
                first = max(done_up_to, ep.t_started) - ep.t_started
                new = first if first <= len(ep) else None
                # Seen again with nothing new, it is still in use: kept among the recent ids,
                # else short episodes pushing it out would let its old steps count again.
                marks[ep.id_] = done_up_to
            if new is None and b <= a:
                continue
            # One read per episode covers both: its rows and its new observations.
            lo = a if new is None else (min(a, new) if b > a else new)
            hi = b if new is None else len(ep) + 1
            layout, read = _flat_obs(ep, lo, hi, layout, name)
            if new is not None:
                fresh.append(read[new - lo :])
                counted.append(ep)
                marks[ep.id_] = ep.t + 1
            if b > a:
                parts.append(read[a - lo : b - lo])
        if fresh:
            rows = np.concatenate(fresh)
            if not np.isfinite(rows).all():
                _refuse_non_finite(fresh, counted, name)
            if len(mean) != rows.shape[1]:  # the first observations: no statistics yet
                mean, m2 = np.zeros(rows.shape[1]), np.zeros(rows.shape[1])
            with np.errstate(over="ignore", invalid="ignore"):  # refused just below
                count, mean, m2 = _chan(count, mean, m2, *_moments(rows))
            if not (np.isfinite(mean).all() and np.isfinite(m2).all()):
                raise ValueError(
                    f"{name}: the new observations' squares overflow float64 statistics "
                    "(values near 1e154 or beyond); scale them first"
                )
        out = None
        if parts:
            assert layout is not None  # parts were read through it
            if len(mean) != layout.size:  # frozen before any observation: no statistics
                mean, m2 = np.zeros(layout.size), np.zeros(layout.size)
            std = np.sqrt(_sample_var(count, m2))
            flat = np.concatenate(parts)  # a new array: normalized in place (no temporaries)
            flat -= mean
            flat /= std + self.eps
            if self.clip is not None:  # np.clip's Python wrapper costs more at one row
                np.minimum(flat, self.clip, out=flat)
                np.maximum(flat, -self.clip, out=flat)
            out = layout.unflat(as_float32(flat, name), rows=len(flat))
        mean, m2 = _sized(layout, mean, m2)
        # Committed only now: a refusal above leaves the filter (and the batch) as it was.
        self._s.layout, self._s.count, self._s.mean, self._s.m2 = layout, count, mean, m2
        for key, mark in marks.items():
            self._s.counted[key] = mark
            self._s.counted.move_to_end(key)
        while len(self._s.counted) > TRACKED_EPISODES:
            self._s.counted.popitem(last=False)
        if out is not None:
            batch[self.out_key] = out
        return batch


def _positive(value: Any, what: str) -> float:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, float, np.number)):
        raise TypeError(f"MeanStdFilter's {what} must be a number > 0, got {value!r}")
    if not (math.isfinite(float(value)) and value > 0):
        raise ValueError(f"MeanStdFilter's {what} must be a finite number > 0, got {value!r}")
    return float(value)


def _space_skeleton(space: Any) -> Any:
    """The space's structure with None at each Box leaf; a ``ValueError`` for other leaves."""
    if isinstance(space, gym.spaces.Box):
        return None
    if isinstance(space, gym.spaces.Dict):
        return {key: _space_skeleton(part) for key, part in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(_space_skeleton(part) for part in space.spaces)
    raise ValueError(
        f"MeanStdFilter takes Box observations (or Dict/Tuple spaces of Boxes), got a part "
        f"{space}: its values have no running mean to take (flatten or one-hot them first)"
    )


_FROM_LISTS = (
    "; its statistics came from a state given as lists to a filter that had seen no "
    "observation, which reads a list of equally shaped leaves as one array: a Tuple space's "
    "leaves read back from JSON are such a list, so give them back as a tuple "
    "(tuple(state['mean']), and so for 'm2'), or set_state on a filter that has seen one"
)


def _flat_obs(
    ep: SingleAgentEpisode, start: int, stop: int, layout: _Layout | None, name: str
) -> tuple[_Layout, np.ndarray]:
    """Observations ``start .. stop - 1`` of ``ep`` as float64 ``[rows, D]``, and the layout."""
    space = ep.observation_space
    if type(space) is gym.spaces.Box and layout is not None and layout.skeleton is None:
        rows = _box_rows(ep, start, stop, layout)
        if rows is not None:
            return layout, rows
    if space is not None:
        _space_skeleton(space)  # refused before the read
    value = _read_obs(ep, start, stop, None, False, name)
    leaves = [np.asarray(leaf) for leaf in tree.flatten(value)]
    for leaf in leaves:
        if leaf.dtype.kind not in "biuf":
            raise ValueError(
                f"{name}: episode {ep.id_!r} holds {leaf.dtype} observations, not numbers"
            )
    shapes = [leaf.shape[1:] for leaf in leaves]
    fitted = _fitted(layout, tree.map_structure(lambda _: None, value), shapes)
    if fitted is None:
        assert layout is not None
        raise ValueError(
            f"{name}: episode {ep.id_!r} has observations of leaf shapes {shapes}, the filter "
            f"counted ones of {layout.shapes} (one filter per observation space)"
            + (_FROM_LISTS if layout.from_lists else "")
        )
    layout = fitted
    rows = stop - start
    flat = [leaf.reshape(rows, size).astype(np.float64) for leaf, size in zip(leaves, layout.sizes)]
    return layout, flat[0] if len(flat) == 1 else np.concatenate(flat, axis=1)


def _box_rows(ep: SingleAgentEpisode, start: int, stop: int, layout: _Layout) -> Any:
    """The read of a Box episode's observations in one ``np.asarray``, or None.

    The common case (one read per episode each step, thousands of episodes a call) without
    the general read's batching; anything unusual (masked entries, other shapes or dtypes)
    is left to the general path and its errors.
    """
    try:
        if start == len(ep) and stop == start + 1:  # the latest alone: the cheaper read
            raw = [ep.get_observations(-1)]
        else:
            raw = ep.get_observations(slice(start, stop), neg_index_as_lookback=True)
        if isinstance(raw, list) and holds_masked(raw):
            return None
        rows = np.asarray(raw)
    except (ValueError, TypeError, IndexError):
        return None
    if rows.dtype.kind not in "biuf" or rows.shape != (stop - start, *layout.shapes[0]):
        return None
    return rows.reshape(stop - start, layout.size).astype(np.float64)


def _check_hashable(ep: SingleAgentEpisode) -> None:
    try:
        hash(ep.id_)
    except TypeError:
        raise TypeError(
            f"MeanStdFilter: episode id {ep.id_!r} ({type(ep.id_).__name__}) is not hashable, "
            "and counting keeps each episode's observations counted by its id"
        ) from None


def _refuse_non_finite(fresh: list[np.ndarray], eps: list[SingleAgentEpisode], name: str) -> None:
    bad = next(ep for rows, ep in zip(fresh, eps) if not np.isfinite(rows).all())
    raise ValueError(
        f"{name}: episode {bad.id_!r} holds a NaN or inf observation among those not counted "
        "yet; counted, it would make every later output NaN"
    )


def _variance(filt: MeanStdFilter) -> np.ndarray:
    return _sample_var(filt._s.count, filt._s.m2)
