"""The copies ``check_does_not_mutate`` hands a connector and compares it with afterwards.

Objects compared by identity (a class without ``__eq__``, ``np.random.Generator``) would
differ between two separate deep copies of an episode, so a connector touching nothing would
look as if it replaced them. The snapshot taken before the call therefore shares those objects
with the connector's input: replacing one is still a change (another object is not the same
object), and a pickle of each, taken before the call, tells whether the connector changed one
in place. Objects reachable from the spaces are shared but not pickled: sampling a space moves
its random generator, and space equality ignores it.

Objects ``copy.deepcopy`` refuses (a ``threading.Lock``, a generator, an object holding one)
cannot be copied at all: the copies share them with the caller's episodes, and they are not
checked in place (they do not pickle either); replacing one is still a change.

Example:
    >>> import numpy as np
    >>> from episodes import SingleAgentEpisode
    >>> ep = SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0])
    >>> ep.custom_data["rng"] = np.random.default_rng(0)
    >>> snap = take_snapshot([ep])
    >>> snap.given[0] == snap.before[0], snap.given[0].custom_data["rng"] is ep.custom_data["rng"]
    (True, False)
    >>> _ = snap.given[0].custom_data["rng"].random()  # the connector draws from it
    >>> snap.changed_in_place()
    (0, ['PCG64', 'Generator'])
"""

from __future__ import annotations

import copy
import io
import itertools
import pickle
import sys
from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np

from episodes.episode import FIELDS, SingleAgentEpisode

__all__: list[str] = []


def _by_identity(value: Any) -> bool:
    """Whether ``value`` has no value equality of its own (``==`` is ``is``).

    This library's own storage (a buffer's store) is left out: the buffers compare it by value.
    """
    kind = type(value)
    return kind.__eq__ is object.__eq__ and kind.__module__.partition(".")[0] != "episodes"


class _ByContent(pickle.Pickler):
    """A pickler that writes a torch tensor as its dtype, shape and bytes.

    torch's own pickle of a tensor names its storage by address, so one untouched object
    (a torch Generator, whose state is a fresh tensor each time) pickles differently each time.
    """

    def persistent_id(self, obj: Any) -> Any:
        torch = sys.modules.get("torch")
        if torch is None:
            return None
        if isinstance(obj, torch.Generator):  # by its state: torch 2.2 cannot pickle one
            return ("generator", str(obj.device), obj.get_state().numpy().tobytes())
        if not isinstance(obj, torch.Tensor):
            return None
        flat = obj.detach().cpu().contiguous().reshape(-1)
        return (
            "tensor",
            str(obj.dtype),
            tuple(obj.shape),
            flat.view(torch.uint8).numpy().tobytes(),
        )


def _tensor_storages(values: Any) -> set[int]:
    """The ids of the storages the tensors among ``values`` hold their data in.

    A tensor's deep copy puts its storage in the memo; a storage has no ``==``, so it would be
    shared with the snapshot as an object compared by identity, and a value-equal write into
    the tensor (``h += 0.0`` on a ``-0.0``) found as a change of its bytes. Copied instead,
    the tensor compares by value, as arrays do.
    """
    torch = sys.modules.get("torch")
    if torch is None:
        return set()
    found = set()
    for value in values:
        if isinstance(value, torch.Tensor):
            try:
                found.add(id(value.untyped_storage()))
            except (RuntimeError, NotImplementedError, TypeError):  # sparse: no storage
                pass
    return found


def _pickled(value: Any) -> bytes | None:
    out = io.BytesIO()
    try:
        _ByContent(out, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
    except Exception:  # noqa: BLE001 - not picklable (a lock, a lambda): not watched
        return None
    return out.getvalue()


def _spaces(episode: SingleAgentEpisode) -> list[Any]:
    found = [episode.observation_space, episode.action_space]
    for value in episode.field_values().values():
        buffers = value.values() if isinstance(value, dict) else [value]
        found += [getattr(buffer, "space", None) for buffer in buffers]
    return [space for space in found if space is not None]


def _parts(episode: SingleAgentEpisode) -> list[Any]:
    """What an episode holds: each field's value, a column's stored items for its buffer."""
    values, parts = episode.field_values(), []
    for field in FIELDS:
        value = values[field.name]
        if field.kind == "column":
            parts.append(value.data)
        elif field.kind == "columns":
            parts += [buffer.data for buffer in value.values()]
        else:
            parts.append(value)
    return parts


def _uncopyable(value: Any, found: dict[int, Any], seen: dict[int, Any]) -> None:
    """Collects into ``found`` the parts of ``value`` that ``copy.deepcopy`` refuses.

    Episodes, dicts, lists, tuples, sets and object arrays are walked; anything else that does
    not copy (a lock, or an object holding one) is found whole. Run only once a copy failed.
    """
    if id(value) in seen:
        return
    seen[id(value)] = value  # kept alive: a temporary's id must not come back for another
    try:
        copy.deepcopy(value)
        return
    except Exception:  # noqa: BLE001 - whatever deepcopy raises: this value does not copy
        pass
    children: list[Any]
    if isinstance(value, SingleAgentEpisode):
        children = _parts(value)
    elif isinstance(value, dict):
        children = [*value.keys(), *value.values()]
    elif isinstance(value, (list, tuple, set, frozenset)):
        children = list(value)
    elif isinstance(value, np.ndarray) and value.dtype == object:
        children = list(value.flat)
    else:
        found[id(value)] = value
        return
    for child in children:
        _uncopyable(child, found, seen)


def deep_copy(value: Any, memo: dict[int, Any] | None = None, what: str = "the input") -> Any:
    """``copy.deepcopy(value, memo)``, sharing what cannot be copied (a lock) instead.

    The objects shared are added to ``memo`` (as themselves), so a later copy with the same
    memo shares them too.

    Raises:
        TypeError: ``value`` does not copy even with those shared; the message names ``what``.

    Example:
        >>> import threading
        >>> data = {"lock": threading.Lock(), "n": [1]}
        >>> copied = deep_copy(data)
        >>> copied["lock"] is data["lock"], copied["n"] is data["n"]
        (True, False)
    """
    memo = {} if memo is None else memo
    known = len(memo)
    try:
        return copy.deepcopy(value, memo)
    except Exception as err:  # noqa: BLE001 - retried below, sharing what does not copy
        failure = err
    for key in list(itertools.islice(memo, known, None)):  # the failed copy's partial objects
        del memo[key]
    found: dict[int, Any] = {}
    _uncopyable(value, found, {})
    memo.update(found)
    try:
        return copy.deepcopy(value, memo)
    except Exception as err:  # noqa: BLE001 - reported with what was being copied
        raise TypeError(
            f"{what} cannot be deep-copied for the check ({type(failure).__name__}: {failure}); "
            f"shared instead: {[type(v).__name__ for v in found.values()]}, still failing with "
            f"{type(err).__name__}: {err}"
        ) from err


@dataclass(frozen=True)
class Snapshot:
    """``given`` goes to the connector; ``before`` is compared with it after the call.

    Attributes:
        given: Deep copies of the input episodes (the caller's stay untouched).
        before: Deep copies of ``given`` sharing its objects compared by identity.
        watched: ``(episode index, object, pickle before the call)`` of each shared object
            that is not part of a space and pickles.
    """

    given: list[SingleAgentEpisode]
    before: list[SingleAgentEpisode]
    watched: tuple[tuple[int, Any, bytes], ...]

    def changed_in_place(self) -> tuple[int, list[str]] | None:
        """The first episode holding a watched object the call changed, and the changed types.

        An object inside another (a Generator's bit generator) changes with it: both are named.
        """
        changed = [
            (i, type(v).__name__) for i, v, pickled in self.watched if _pickled(v) != pickled
        ]
        if not changed:
            return None
        first = changed[0][0]
        return first, list(dict.fromkeys(name for i, name in changed if i == first))


def take_snapshot(episodes_: list[SingleAgentEpisode]) -> Snapshot:
    """Copies ``episodes_`` for the connector and for the comparison after it (see module).

    Example:
        >>> import numpy as np
        >>> ep = SingleAgentEpisode(observations=[0, 1], actions=[0], rewards=[1.0])
        >>> ep.custom_data["rng"] = np.random.default_rng(0)
        >>> snap = take_snapshot([ep])
        >>> snap.given[0].custom_data["rng"] is snap.before[0].custom_data["rng"]
        True
        >>> snap.changed_in_place() is None
        True
        >>> _ = snap.given[0].custom_data["rng"].random(); snap.changed_in_place()
        (0, ['PCG64', 'Generator'])
    """
    memo: dict[int, Any] = {}
    for episode in episodes_:  # copied first, to tell the objects spaces hold from the rest
        for space in _spaces(episode):
            deep_copy(space, memo, f"the space {space!r}")
    in_spaces = {id(value) for value in memo.values()}
    given: list[SingleAgentEpisode] = []
    owners: list[tuple[int, Any]] = []  # (episode index, copy) of objects compared by identity
    for index, episode in enumerate(episodes_):
        seen = len(memo)
        # One memo: an episode given twice is one copy twice, as deepcopy of the list gives.
        given.append(deep_copy(episode, memo, f"input episode {index} (id {episode.id_!r})"))
        owners += [(index, value) for value in itertools.islice(memo.values(), seen, None)]
    # What deepcopy refuses is shared as itself (memo maps it to itself): kept in `before` too.
    uncopied = {key: value for key, value in memo.items() if key == id(value)}
    # A tensor's storage is copied with it, so the tensor compares by value (see above).
    by_value = in_spaces | _tensor_storages(v for _, v in owners)
    shared = [(i, v) for i, v in owners if _by_identity(v) and id(v) not in by_value]
    in_space_shared = [v for v in memo.values() if _by_identity(v) and id(v) in in_spaces]
    keep = uncopied | {id(v): v for v in in_space_shared} | {id(v): v for _, v in shared}
    before = copy.deepcopy(given, keep)
    watched = tuple((i, v, p) for i, v in shared if (p := _pickled(v)) is not None)
    return Snapshot(given, before, watched)


def _space_exact(a: Any, b: Any) -> bool:
    """Whether two spaces are equal with their Box bounds equal bit for bit, not allclose."""
    if type(a) is not type(b):
        return False
    if isinstance(a, gym.spaces.Box):
        return (
            a.shape == b.shape
            and a.dtype == b.dtype
            and np.array_equal(a.low, b.low, equal_nan=True)
            and np.array_equal(a.high, b.high, equal_nan=True)
        )
    if isinstance(a, (gym.spaces.Dict, gym.spaces.Tuple)):
        subs: Any = a.spaces, b.spaces  # a dict (keys in order) or a tuple of spaces
        if isinstance(a, gym.spaces.Dict):
            return list(subs[0]) == list(subs[1]) and all(
                _space_exact(subs[0][k], subs[1][k]) for k in subs[0]
            )
        return len(subs[0]) == len(subs[1]) and all(map(_space_exact, subs[0], subs[1]))
    if isinstance(a, (gym.spaces.Sequence, gym.spaces.Graph)):
        seq = isinstance(a, gym.spaces.Sequence)
        inner = ("feature_space",) if seq else ("node_space", "edge_space")
        return bool(a == b) and all(
            (getattr(a, n) is None) == (getattr(b, n) is None)
            and (getattr(a, n) is None or _space_exact(getattr(a, n), getattr(b, n)))
            for n in inner
        )
    return bool(a == b)


def _space_diff(old: SingleAgentEpisode, new: SingleAgentEpisode) -> str | None:
    """The first space of ``old`` that differs from ``new``'s exactly, as ``before vs after``.

    Episode ``==`` compares spaces with gymnasium's ``==``, which takes a Box's bounds equal
    when ``np.allclose``: a bound moved by a few units in a million passes it.

    Example:
        >>> import gymnasium as gym
        >>> ep = SingleAgentEpisode(
        ...     observations=[0, 1], actions=[0], rewards=[1.0],
        ...     observation_space=gym.spaces.Box(0, 1_000_000, (1,), np.int64),
        ... )
        >>> changed = copy.deepcopy(ep)
        >>> changed.observation_space.high[0] = 1_000_009
        >>> ep == changed, _space_diff(ep, changed) is not None
        (True, True)
    """
    olds, news = _spaces(old), _spaces(new)
    if len(olds) != len(news):
        return f"spaces: {olds!r} vs {news!r}"
    for a, b in zip(olds, news):
        if not _space_exact(a, b):
            bounds = ""
            if isinstance(a, gym.spaces.Box) and isinstance(b, gym.spaces.Box):
                bounds = f" (low {a.low!r} vs {b.low!r}, high {a.high!r} vs {b.high!r})"
            return f"space {a!r} vs {b!r}{bounds}"
    return None
