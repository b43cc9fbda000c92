"""Checks of a batch's layout that the blocks rely on: its nesting and its rows per sub-env.

A column keeps the structure of the first batch it took and writes a later batch's leaves by
position, in ``flatten``'s order (dict keys sorted): a batch whose dict keys changed, or a Dict
turned Tuple, with as many leaves of the same shapes would be filed under the first batch's
names without an error. And a block row holds one item per sub-env: a batch of another length
is broadcast over the row, or refused in numpy's words that name no field.

Example:
    >>> nests_as({"a": 1, "b": (2, 3)}, {"a": None, "b": (None, None)})
    True
    >>> nests_as({"a": 1, "c": (2, 3)}, {"a": None, "b": (None, None)})
    False
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from episodes.buffer.plain_arrays import check_unmasked, holds_masked, masked_words
from episodes.spaces.item_walks import other_mapping
from episodes.structs import NESTED_TYPES, flatten, map_leaves, unflatten

__all__ = [
    "check_env_rows",
    "env_flags",
    "inner_containers",
    "nesting_changed",
    "nests_as",
    "nests_within",
    "stacked_finals",
]


def nests_as(batch: Any, structure: Any, deep: bool = True) -> bool:
    """Whether ``batch`` nests as ``structure`` (a ``skeleton``: None at every leaf) does.

    The same dict keys, tuples or lists of the same length (either for the other: a column
    files leaves by position), and a leaf wherever ``structure`` has one. ``deep=False``
    compares the outer container only, at one key comparison per batch: enough for a structure
    without inner containers (:func:`inner_containers`) whose leaf count the caller checks
    (only an empty container standing in for a leaf, and another container for the missing
    one, gets by).

    Example:
        >>> nests_as((1, 2), [None, None]), nests_as({"a": 1}, (None,))
        (True, False)
        >>> nests_as({"a": {"x": 1}}, {"a": None}), nests_as(np.zeros(2), None)
        (False, True)
    """
    if isinstance(structure, dict):
        if not isinstance(batch, dict) or batch.keys() != structure.keys():
            return False
        return not deep or all(nests_as(batch[key], part) for key, part in structure.items())
    if isinstance(structure, (tuple, list)):
        if not isinstance(batch, (tuple, list)) or len(batch) != len(structure):
            return False
        return not deep or all(nests_as(b, part) for b, part in zip(batch, structure))
    return not isinstance(batch, NESTED_TYPES)


def inner_containers(structure: Any) -> list[tuple[tuple[Any, ...], Any, list[Any]]]:
    """``(path, part, leaf keys)`` of every container of a ``skeleton``, the outer one first.

    What :func:`nests_within` compares: computed once per column, so a step walks the paths to
    the containers, not a recursion over every leaf. ``leaf keys`` are where ``part`` holds a
    leaf, which must stay one (a leaf turned into a dict would file its leaves elsewhere).

    Example:
        >>> [(path, keys) for path, _, keys in inner_containers({"a": None, "b": (None,)})]
        [((), ['a']), (('b',), [0])]
        >>> inner_containers(None)
        []
    """
    found: list[tuple[tuple[Any, ...], Any, list[Any]]] = []

    def walk(part: Any, path: tuple[Any, ...]) -> None:
        items = list(part.items() if isinstance(part, dict) else enumerate(part))
        found.append((path, part, [key for key, sub in items if sub is None]))
        for key, sub in items:
            if sub is not None:
                walk(sub, (*path, key))

    if structure is not None:
        walk(structure, ())
    return found


def nests_within(
    batch: Any, structure: Any, inner: list[tuple[tuple[Any, ...], Any, list[Any]]]
) -> bool:
    """:func:`nests_as` for a column, over ``inner`` (:func:`inner_containers` of ``structure``).

    Each container has the keys or length of the first batch's, and a leaf wherever it had one.

    Example:
        >>> structure = {"a": None, "b": {"c": None}}
        >>> inner = inner_containers(structure)
        >>> nests_within({"a": 1, "b": {"c": 2}}, structure, inner)
        True
        >>> nests_within({"a": 1, "b": {"x": 2}}, structure, inner)
        False
        >>> nests_within({"a": {"p": 1}, "b": {"c": 2}}, structure, inner)
        False
    """
    for path, part, leaf_keys in inner:
        value = batch
        for key in path:
            value = value[key]
        if not nests_as(value, part, deep=False):
            return False
        for key in leaf_keys:
            if isinstance(value[key], NESTED_TYPES):
                return False
    return True


def nesting_changed(name: str, structure: Any, shapes: list[Any], batch: Any) -> ValueError:
    """The error for a ``batch`` that does not nest as ``structure`` (leaf shapes ``shapes``).

    Example:
        >>> err = nesting_changed("the observations", {"a": None}, [(2,)], {"b": np.zeros(2)})
        >>> print(err)  # doctest: +ELLIPSIS
        the observations changed nesting from {'a': (2,)} to {'b': (2,)}: every ...
    """
    before = unflatten(structure, [tuple(shape) for shape in shapes])
    after = map_leaves(_shape, batch)
    return ValueError(
        f"{name} changed nesting from {before} to {after}: every batch nests as the first one "
        "(the same dict keys, tuples of the same length), whose names its leaves are recorded "
        "under"
    )


def check_env_rows(batch: Any, num_envs: int, name: str) -> None:
    """Raises a ``ValueError`` unless every leaf of ``batch`` holds one row per sub-env.

    A mapping other than a dict (a TensorDict) at a leaf is a ``TypeError`` naming it.

    Example:
        >>> check_env_rows({"a": np.zeros((3, 2))}, 3, "the env's reset observations")
        >>> check_env_rows(np.zeros((2, 2)), 3, "the reset observations")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: the reset observations: got a batch of shape (2, 2), expected (3, 2) ...
    """
    if _holds_list(batch):  # its rows would read as leaves: sub-env 0 given everyone's
        raise ValueError(
            f"{name}: got a list where a vector env gives one array per leaf (gymnasium "
            "batches a Box as an array [N, ...], a Tuple as a tuple, a Dict as a dict)"
        )
    leaves = flatten(batch)[0]
    if not leaves:
        raise ValueError(
            f"{name}: got {batch!r}, which holds no array: the runner records one item per "
            "sub-env of at least one leaf"
        )
    for j, leaf in enumerate(leaves):
        if isinstance(leaf, Mapping) or hasattr(leaf, "batch_size") and hasattr(leaf, "keys"):
            # Walked as one leaf (only dicts are containers here), it would fail in numpy's words.
            raise _mapping_refused(name, leaf)
        shape = _shape(leaf)
        if shape[:1] != (num_envs,):
            where = "" if len(leaves) == 1 else f" (leaf {j})"
            raise ValueError(
                f"{name}{where}: got a batch of shape {shape}, expected "
                f"{(num_envs, *shape[1:])} (one item per sub-env)"
            )


def _mapping_refused(name: str, mapping: Any) -> TypeError:
    """The ``TypeError`` for a mapping other than a dict (a TensorDict) where batches nest."""
    return TypeError(
        f"{name}: got a {type(mapping).__name__}, a mapping the runner does not walk (only "
        "dicts nest): return a plain dict of arrays or tensors (a TensorDict's "
        "to_dict(), rsl_rl's observations)"
    )


def _refuse_mappings(item: Any, name: str) -> None:
    """Refuses ``item`` holding (or being) a mapping other than a dict, a TensorDict's hint.

    Taken for a batch or an item of another nesting, it would be refused as a changed nesting
    (or a ``KeyError 0``), in words that never say what to give instead.
    """
    found = item if hasattr(item, "batch_size") and hasattr(item, "keys") else None
    found = found if found is not None else other_mapping(item)
    if found is not None:
        raise _mapping_refused(name, found)


def _holds_list(batch: Any) -> bool:
    if isinstance(batch, list):
        return True
    parts = batch.values() if isinstance(batch, dict) else batch if type(batch) is tuple else ()
    return any(_holds_list(part) for part in parts)


def arrays_at_leaves(item: Any, structure: Any) -> Any:
    """``item`` with each list or tuple standing at a leaf of ``structure`` made an array.

    A sub-env may give an array leaf (a Box row, a MultiDiscrete item) as a list or tuple;
    where ``structure`` (a ``skeleton``) has a container, the item's container is walked as it
    is. A list that makes no numeric array (ragged, or holding dicts) is left as it is, for
    :func:`nests_as` to refuse.

    Example:
        >>> arrays_at_leaves({"pos": [0.5, 1.0], "n": 2}, {"n": None, "pos": None})["pos"]
        array([0.5, 1. ])
        >>> arrays_at_leaves((1, [2, 3]), (None, None))[1].tolist()
        [2, 3]
    """
    if isinstance(structure, dict):
        if not isinstance(item, dict) or item.keys() != structure.keys():
            return item
        return {key: arrays_at_leaves(item[key], part) for key, part in structure.items()}
    if isinstance(structure, (tuple, list)):
        if not isinstance(item, (tuple, list)) or len(item) != len(structure):
            return item
        return type(item)(arrays_at_leaves(b, part) for b, part in zip(item, structure))
    if not isinstance(item, (list, tuple)):
        return item
    try:
        array = np.asarray(item)
    except (ValueError, TypeError):
        return item
    return item if array.dtype == object else array


def stacked_finals(
    infos: dict[str, Any], ended: np.ndarray, structure: Any, shapes: list[Any]
) -> list[np.ndarray]:
    """Same-step final observations of the ``ended`` sub-envs as ``[k, ...]`` leaves.

    ``infos["final_obs"]`` holds one item per sub-env (gymnasium's object array); each ended
    one must nest as the observations do (``structure``, batch leaf shapes ``shapes``). A
    nested space's may also be batched as the observations are, one ``[N, ...]`` array per leaf.

    Raises:
        ValueError: The infos hold no ``final_obs``, or an item nests otherwise, or the
            items' shapes differ, or an ended sub-env's item (or row of a batched leaf) holds
            a numpy masked array with masked entries (stacked, its mask would be lost); the
            message names ``infos['final_obs']``.
        TypeError: The batch, or an ended sub-env's item, is or holds a mapping other than a
            dict (a TensorDict, a ``UserDict``): the message says to give a plain dict.

    Example:
        >>> finals = np.array([None, {"a": np.ones(2)}], dtype=object)
        >>> stacked_finals({"final_obs": finals}, np.array([1]), {"a": None}, [(2, 2)])
        [array([[1., 1.]])]
        >>> batched = {"a": np.arange(4.0).reshape(2, 2)}
        >>> stacked_finals({"final_obs": batched}, np.array([1]), {"a": None}, [(2, 2)])
        [array([[2., 3.]])]
        >>> stacked_finals({}, np.array([1]), None, [(2,)])  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ValueError: sub-envs [1] finished in a same-step vector step whose infos hold no ...
    """
    items = infos.get("final_obs")
    if items is None:
        raise ValueError(
            f"sub-envs {ended.tolist()} finished in a same-step vector step whose infos hold no "
            "'final_obs': a same-step env reports the final observation of every sub-env that "
            "finished in infos['final_obs']"
        )
    if not isinstance(items, (list, np.ndarray)):  # per-sub-env items: each ended one below
        _refuse_mappings(items, "the env's final observations (infos['final_obs'])")
    if structure is not None and nests_as(items, structure):
        # One [N, ...] array per leaf, as a batched simulator gives it (the torch path's form).
        leaves = flatten(items)[0]
        batches = [np.asarray(batch) for batch in leaves]
        for j, (batch, shape) in enumerate(zip(batches, shapes)):
            if batch.shape != tuple(shape):
                raise ValueError(
                    f"the env's final observations (infos['final_obs']), leaf {j}: got a batch "
                    f"of shape {batch.shape}, expected {tuple(shape)} (one row per sub-env), or "
                    "give one item per sub-env"
                )
            if leaves[j].__class__ is not np.ndarray:  # np.asarray dropped a mask, if any
                _check_items_unmasked(leaves[j], ended, f", leaf {j}")
        return [batch[ended] for batch in batches]
    flat = []
    _check_items_unmasked(items, ended, "")
    for i in ended.tolist():
        # gymnasium batches a sub-env's observations into the space's arrays, but passes its
        # final one on as the sub-env gave it: a Box row may come as a list or tuple.
        if items[i].__class__ is not np.ndarray:  # an array holds no mapping: no walk
            _refuse_mappings(
                items[i], f"the env's final observation (infos['final_obs']) of sub-env {i}"
            )
        item = arrays_at_leaves(items[i], structure)
        if not nests_as(item, structure):
            raise nesting_changed(
                f"the env's final observation (infos['final_obs']) of sub-env {i}",
                structure,
                [shape[1:] for shape in shapes],
                item,
            )
        flat.append(flatten(item)[0])
    out = []
    for j in range(len(flat[0])):
        leaf = [np.asarray(f[j]) for f in flat]
        try:
            out.append(np.stack(leaf))
        except ValueError:  # items of different shapes, in numpy's words naming no field
            where = "" if len(flat[0]) == 1 else f" (leaf {j})"
            raise ValueError(
                f"the env's final observations (infos['final_obs']){where} of sub-envs "
                f"{ended.tolist()}: got items of shapes {[x.shape for x in leaf]}, expected "
                f"{tuple(shapes[j][1:])} each (one per sub-env, as the observations)"
            ) from None
    return out


_FINALS = "(infos['final_obs'])"


def _check_items_unmasked(items: Any, ended: np.ndarray, leaf: str) -> None:
    """Refuses the ended sub-envs' final observations (items or rows) holding masked entries.

    Only the rows taken are looked at: the others (masked where no episode ended) are no data.
    """
    chosen = [items[i] for i in ended.tolist()]
    if holds_masked(chosen):  # np.asarray and np.stack would drop the mask
        at = next(i for i, item in zip(ended.tolist(), chosen) if holds_masked([item]))
        where = f"the env's final observation {_FINALS}{leaf} of sub-env {at}"
        raise ValueError(masked_words(where))


def _shape(leaf: Any) -> tuple[Any, ...]:
    shape = getattr(leaf, "shape", None)
    if shape is not None:
        return tuple(shape)
    try:
        return tuple(np.shape(leaf))
    except ValueError:  # a ragged list
        return ("ragged",)


def env_flags(value: Any, name: str) -> np.ndarray:
    """A step's ``terminated`` or ``truncated`` batch as bools, refusing what holds no flags.

    Bools, ints and floats are read as numpy reads them (0 is False), as the torch recorder
    reads them; text or objects (``"False"``, None) would be truthy or fail later, so they are
    a ``ValueError`` naming the field, before anything is written.

    Example:
        >>> env_flags([True, 0], "terminated").tolist()
        [True, False]
        >>> env_flags(np.array(["False", "True"]), "terminated")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: the env's terminated: got <U5 values; flags are bools (or numbers)...
    """
    if value.__class__ is not np.ndarray:  # a masked array's mask would be dropped
        check_unmasked(value, f"the env's {name}")
    flags = np.asarray(value)
    if flags.dtype.kind not in "biuf":
        raise ValueError(
            f"the env's {name}: got {flags.dtype} values; flags are bools (or numbers), one "
            "per sub-env (a string such as 'False' would read as True)"
        )
    return flags.astype(bool, copy=False)
