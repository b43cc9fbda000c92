"""A recording's infos by ``(row, env)``, kept as each vector step's batched dict until read.

Recording a vector step stores its batched infos once: a snapshot (numpy arrays copied, torch
tensors cloned on their device, lists, tuples and object arrays copied with the arrays and
tensors among their items, nested dicts walked; other values kept as the env gave them) and the
mask of the sub-envs it is the info of: a simulator that updates an info buffer in place every
step (Isaac Lab's ``extras["time_outs"]``) leaves each recorded step its own values. That is a
few numpy calls per key and step, whatever the number of sub-envs (an object array's or list's
items cost Python per sub-env, as gymnasium's own batching of them does). A sub-env's own dict
is split out only when ``(row, env)`` is read, and kept: the same ``(row, env)`` gives the same
dict every time (``same_infos`` compares by identity), in every :class:`RowInfos` moved or
copied from this one. A step unpickled in another process (over a shared-memory segment, from
Ray's object store) may hold read-only views of that buffer: its splits copy every array out,
inside lists, tuples and dicts too. What :func:`~episodes.runner.infos.env_info` refuses (a
value neither per sub-env nor the whole step's) is refused when the step is stored, in its
words. A value of the whole step (:func:`~episodes.runner.infos.is_step_value`: a number, a
string, None, a 0-d array or tensor) is not split: every sub-env's dict of that step holds the
stored object (a 0-d numpy array copied once, as the step's other arrays, and read as its
scalar; a 0-d tensor cloned for each sub-env).

Example:
    >>> infos = RowInfos()
    >>> batched = {"x": np.array([1.0, 2.0]), "_x": np.array([False, True])}
    >>> infos.add(3, batched, np.array([False, True]))
    >>> batched["x"][1] = 9.0  # the env reuses its array: the stored step is a copy
    >>> infos.get((3, 1)), infos.get((3, 0)), infos.get((3, 1)) is infos.get((3, 1))
    ({'x': np.float64(2.0)}, None, True)
    >>> infos.moved(3, None, -3).get((0, 1))
    {'x': np.float64(2.0)}
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

from episodes.runner.infos import (
    cloned_tensor,
    is_step_value,
    is_tensor,
    mask_key,
    not_per_env,
    step_item,
)

__all__ = ["RowInfos", "owned_copy"]

Info = dict[str, Any]
Plan = list[tuple[Any, Any, "list[bool] | None", "Plan | None"]]
_UNREAD = object()
_WHOLE: Plan = []  # a plan's "nested plan" of a value of the whole step: not split, shared


class _Step:
    """One stored vector step's infos (a snapshot) and the sub-env dicts split out of it."""

    __slots__ = ("infos", "plan", "split", "unpickled")

    def __init__(self, infos: dict[Any, Any]):
        self.infos = infos
        self.plan: Plan | None = None  # what a split reads, worked out at the first read
        self.split: dict[int, Info | None] = {}
        self.unpickled = False

    def info(self, env: int) -> Info | None:
        """Sub-env ``env``'s dict (None where it is empty), split once."""
        info = self.split.get(env, _UNREAD)
        if info is _UNREAD:
            if self.plan is None:
                self.plan = _plan(self.infos)
            info = self.split[env] = _split(self.plan, env, self.unpickled) or None
        return info  # type: ignore[return-value]

    def __getstate__(self) -> tuple[dict[Any, Any], dict[int, Info | None]]:
        return self.infos, self.split

    def __setstate__(self, state: tuple[dict[Any, Any], dict[int, Info | None]]) -> None:
        self.infos, self.split = state
        self.plan = None
        # Unpickled over a buffer (a sample's shared-memory segment, Ray's object store), the
        # arrays in the step are read-only views that keep it alive: a split copies them out,
        # at any depth, and so are the arrays of the infos split before the step travelled
        # (in place: a chunk's infos are these dicts).
        self.unpickled = True
        memo: dict[int, tuple[Any, Any]] = {}  # a shared value, copied once: still shared
        _own_whole(self.infos, memo)
        for info in self.split.values():
            if info:
                for key, value in info.items():
                    info[key] = _owned(value, memo)

    def __deepcopy__(self, memo: dict[int, Any]) -> _Step:
        # A deep copy owns every array already: its splits need not copy them again.
        new = _Step(copy.deepcopy(self.infos, memo))
        new.split = copy.deepcopy(self.split, memo)
        return new


class RowInfos(Mapping[tuple[int, int], Info]):
    """Infos by ``(row, env)``: the stored vector steps, split per sub-env when read.

    A read-only mapping (a key is there when its sub-env's info is not empty) whose ``get``
    costs a lookup or one split; iterating, ``len`` and ``repr`` split every info (for tests
    and debugging, not the recording's path). True once any step was stored.
    """

    __slots__ = ("_rows",)

    def __init__(self, rows: dict[int, list[tuple[np.ndarray, _Step]]] | None = None):
        self._rows: dict[int, list[tuple[np.ndarray, _Step]]] = {} if rows is None else rows

    def add(
        self, row: int, infos: dict[str, Any], envs: np.ndarray, drop: tuple[str, ...] = ()
    ) -> None:
        """Stores ``infos`` (leaving out the keys in ``drop``) as row ``row``'s infos of ``envs``.

        ``envs`` is kept (the caller's own mask); the sub-envs of several stores into a row
        must differ (the last store's non-empty info is read).

        Raises:
            ValueError: A value some sub-env of ``envs`` reported holds no item for it and is
                not the whole step's (``env_info``'s error, for the first sub-env it fails,
                naming the key and shape); nothing is stored.
        """
        if not envs.any():
            return
        bad = _first_refused(infos, envs, drop)
        if bad is not None:
            _, key, value, err = bad
            raise not_per_env(key, value) from err
        self._rows.setdefault(row, []).append((envs, _Step(_snapshot(infos, drop))))

    def get(self, key: tuple[int, int], default: Any = None) -> Any:
        """Sub-env ``key[1]``'s info of row ``key[0]`` (split on the first read), or ``default``."""
        entries = self._rows.get(key[0])
        if entries:
            env = key[1]
            for envs, step in reversed(entries):
                if envs[env]:
                    info = step.info(env)
                    if info is not None:
                        return info
        return default

    def env_rows(self, env: int, start: int, stop: int) -> list[Info]:
        """Sub-env ``env``'s infos of rows ``start:stop``, ``{}`` (each its own) where none.

        What ``[self.get((r, env)) or {} for r in range(start, stop)]`` gives, in one loop: a
        chunk's infos are read row by row.

        Example:
            >>> infos = RowInfos()
            >>> infos.add(1, {"x": np.array([5, 6])}, np.array([True, True]))
            >>> infos.env_rows(1, 0, 3)
            [{}, {'x': np.int64(6)}, {}]
        """
        rows, out = self._rows, []
        for row in range(start, stop):
            info = None
            for envs, step in reversed(rows.get(row, ())):
                if envs[env]:
                    info = step.split.get(env, _UNREAD)
                    if info is _UNREAD:
                        info = step.info(env)
                    if info is not None:
                        break
            out.append({} if info is None else info)
        return out

    def __getitem__(self, key: tuple[int, int]) -> Info:
        info = self.get(key)
        if info is None:
            raise KeyError(key)
        return info

    def __iter__(self) -> Iterator[tuple[int, int]]:
        seen: set[tuple[int, int]] = set()
        for row, entries in self._rows.items():
            for envs, _ in entries:
                for env in np.flatnonzero(envs).tolist():
                    if (row, env) not in seen and self.get((row, env)) is not None:
                        seen.add((row, env))
                        yield row, env

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __bool__(self) -> bool:
        return bool(self._rows)

    def __repr__(self) -> str:
        return repr(dict(self.items()))

    def copy(self) -> RowInfos:
        """A copy that later stores into either leave the other as it is (steps shared)."""
        return RowInfos({row: list(entries) for row, entries in self._rows.items()})

    def moved(self, first: int, last: int | None, by: int) -> RowInfos:
        """The rows ``first..last`` (inclusive; None: all from ``first``) as rows ``r + by``.

        Example:
            >>> infos = RowInfos()
            >>> for r in range(3):
            ...     infos.add(r, {"r": np.array([r])}, np.array([True]))
            >>> sorted(infos.moved(1, 1, 5))
            [(6, 0)]
        """
        return RowInfos(
            {
                row + by: list(entries)
                for row, entries in self._rows.items()
                if row >= first and (last is None or row <= last)
            }
        )

    def ending_from(self, end: np.ndarray, by: int) -> RowInfos:
        """The infos of rows at or after each env's ``end[env]``, as rows ``r + by``.

        Example:
            >>> infos = RowInfos()
            >>> infos.add(2, {"r": np.array([1, 2])}, np.array([True, True]))
            >>> sorted(infos.ending_from(np.array([2, 3]), -2))
            [(0, 0)]
        """
        rows: dict[int, list[tuple[np.ndarray, _Step]]] = {}
        for row, entries in self._rows.items():
            later = row >= end
            kept = [(envs & later, step) for envs, step in entries if (envs & later).any()]
            if kept:
                rows[row + by] = kept
        return RowInfos(rows)

    def __getstate__(self) -> dict[int, list[tuple[np.ndarray, _Step]]]:
        return self._rows

    def __setstate__(self, state: dict[int, list[tuple[np.ndarray, _Step]]]) -> None:
        self._rows = state


def _masked(infos: dict[Any, Any], drop: tuple[str, ...]) -> Iterator[tuple[Any, Any, Any]]:
    """``(key, value, mask or None)`` of the keys ``env_info`` reads (its order)."""
    for key, value in infos.items():
        if key in drop or (isinstance(key, str) and key.startswith("_")):
            continue
        yield key, value, infos.get(mask_key(key))


def _snapshot(infos: dict[Any, Any], drop: tuple[str, ...] = ()) -> dict[Any, Any]:
    """The keys ``env_info`` reads, numpy arrays copied, masks as bool arrays (see module)."""
    out: dict[Any, Any] = {}
    for key, value, mask in _masked(infos, drop):
        if isinstance(value, dict):
            out[key] = _snapshot(value)
        elif isinstance(value, np.ndarray):
            out[key] = owned = value.copy()
            if value.dtype == object:
                if value.ndim == 1:  # per-env Python, as gymnasium's own
                    for i, item in enumerate(value):
                        owned[i] = _owned(item)
                elif not value.ndim:  # the whole step's Python value
                    out[key] = _owned(value)
        elif isinstance(value, (list, tuple)):  # kept as a list: a split only indexes it
            out[key] = [_owned(item) for item in value]
        else:
            out[key] = cloned_tensor(value) if is_tensor(value) else value
        if mask is not None:
            out[mask_key(key)] = np.array(mask, dtype=bool)  # checked by ``reported``
    return out


def _owned(item: Any, memo: dict[int, tuple[Any, Any]] | None = None) -> Any:
    """An object array's or list's item, its arrays copied: the env may write into them later.

    A sub-env's info value that is a list, tuple or dict reaches the batched infos as one
    item: the arrays inside it are copied too. ``memo``: ``id(original) -> (original, copy)``
    of values already copied (a value of the whole step, shared by the sub-envs' dicts).
    """
    if memo:
        hit = memo.get(id(item))
        if hit is not None:
            return hit[1]
    if is_tensor(item):
        return cloned_tensor(item)
    if isinstance(item, np.ndarray):
        owned = item.copy()
        if item.dtype == object:  # its items, arrays among them, are shared by a copy
            flat = owned.reshape(-1)  # a view: the copy is contiguous
            for i, inner in enumerate(flat.tolist()):
                flat[i] = _owned(inner)
        return owned
    kind = type(item)
    if kind is list or kind is tuple:
        return kind(_owned(inner, memo) for inner in item)
    if kind is dict:
        return {key: _owned(inner, memo) for key, inner in item.items()}
    if isinstance(item, (list, tuple, dict)):  # a namedtuple, a list subclass: as they are
        try:
            return copy.deepcopy(item)
        except Exception:  # noqa: BLE001 - an object deepcopy refuses is kept as given
            return item
    return item


def _own_whole(snapshot: dict[Any, Any], memo: dict[int, tuple[Any, Any]]) -> None:
    """Copies an unpickled snapshot's shared numpy values in place, noting each in ``memo``."""
    for key, value, _ in _masked(snapshot, ()):
        if isinstance(value, dict):
            _own_whole(value, memo)
        elif isinstance(value, np.ndarray) and not value.ndim:
            snapshot[key] = owned = _owned(value)
            memo[id(value)] = (value, owned)  # the original kept: its id stays its own


def _plan(snapshot: dict[Any, Any]) -> Plan:
    """``(key, value, mask as a list or None, nested plan or _WHOLE or None)`` per key."""
    plan: Plan = []
    for key, value, mask in _masked(snapshot, ()):
        flags = None if mask is None else mask.tolist()
        if isinstance(value, dict):
            inner: Plan | None = _plan(value)
        else:
            inner = _WHOLE if is_step_value(value) else None
        plan.append((key, value, flags, inner))
    return plan


def _split(plan: Plan, index: int, unpickled: bool = False) -> Info:
    """``env_info`` of a snapshot (by its :func:`_plan`).

    ``unpickled``: the snapshot's arrays may view a buffer, those inside a list, tuple or dict
    item too (a snapshot made here owns them already): the item is copied by :func:`_owned`.
    """
    out: Info = {}
    for key, value, flags, inner in plan:
        if flags is not None and not flags[index]:
            continue
        if inner is not None:  # a nested dict, each sub-env's own; or the step's shared value
            out[key] = step_item(value) if inner is _WHOLE else _split(inner, index, unpickled)
            continue
        item = value[index]
        # A numeric row is copied out of the step's batched copy: held on its own (by a
        # replay buffer, say), it must not keep every sub-env's row alive.
        if unpickled and isinstance(item, (list, tuple, dict, np.ndarray)):
            item = _owned(item)
        elif type(item) is np.ndarray and item.base is not None:
            item = item.copy()  # (a tensor's row stays a view of the step's own clone)
        out[key] = item
    return out


Refused = tuple[int, Any, Any, BaseException]


def _first_refused(
    infos: dict[Any, Any], envs: np.ndarray, drop: tuple[str, ...]
) -> Refused | None:
    """``(env, key, value, error)`` where ``env_info`` would first fail over ``envs``, or None.

    ``env_info`` goes sub-env by sub-env, key by key: the lowest failing sub-env, then its
    first failing key. One index per key (the highest of its sub-envs) when nothing fails; a
    value of the whole step (``is_step_value``) fails for none.
    """
    first: Refused | None = None
    for key, value, mask in _masked(infos, drop):
        need = envs if mask is None else envs & np.asarray(mask, dtype=bool)
        if not need.any():
            continue
        if isinstance(value, dict):
            bad = _first_refused(value, need, ())
        else:
            bad = _refused_item(key, value, np.flatnonzero(need), len(envs))
        if bad is not None and (first is None or bad[0] < first[0]):
            first = bad
    return first


def _refused_item(key: Any, value: Any, indices: np.ndarray, num_envs: int) -> Refused | None:
    """The first of ``indices`` whose item of ``value`` ``env_info`` cannot take, or None.

    A value with more rows than sub-envs is refused at its first reported sub-env: its rows
    are not the sub-envs' (an env's bug), and reading the first ones would hide it.
    """
    if not isinstance(value, (str, bytes, Mapping)):
        shape = getattr(value, "shape", None)
        rows = shape[0] if isinstance(shape, tuple) and shape else None
        if rows is None and isinstance(value, (list, tuple)):
            rows = len(value)
        if rows is not None and rows > num_envs:
            return int(indices[0]), key, value, IndexError(f"{rows} rows for {num_envs} sub-envs")
        try:  # a sequence whose last item is there has the others
            value[int(indices[-1])]
            return None
        except (TypeError, IndexError, KeyError):
            pass
    if is_step_value(value):  # the whole step's: shared, not split
        return None
    for i in indices.tolist():  # only when one fails (or for a mapping)
        try:
            value[i]
        except (TypeError, IndexError, KeyError) as err:
            return i, key, value, err
    return None


def owned_copy(item: Any) -> Any:
    """An info value the env can no longer change: what a stored vector step holds of it.

    Numpy arrays are copied and torch tensors cloned (detached, on their device: no wait for
    it), inside lists, tuples and dicts too; other values are kept as given. The device path
    takes this copy of a step's infos when the env returns them, and brings them to the host
    once per call.

    Example:
        >>> import torch
        >>> buffer = torch.zeros(2, dtype=torch.bool)  # a simulator's in-place time-outs
        >>> kept = owned_copy({"time_outs": buffer, "log": {"n": np.array(3)}})
        >>> buffer[0] = True
        >>> kept["time_outs"].tolist(), kept["log"]["n"].item()
        ([False, False], 3)
    """
    return _owned(item)
