"""The copies ``check_does_not_mutate`` hands a connector and compares it with afterwards.

Objects compared by identity (a class without ``__eq__``, ``np.random.Generator``) would
differ between two separate deep copies of an episode, so a connector touching nothing would
look as if it replaced them. The snapshot taken before the call therefore shares those objects
with the connector's input: replacing one is still a change (another object is not the same
object), and a pickle of each, taken before the call, tells whether the connector changed one
in place. Objects reachable from the spaces are shared but not pickled: sampling a space moves
its random generator, and space equality ignores it.

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

from episodes.episode import SingleAgentEpisode

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
        if torch is None or not isinstance(obj, torch.Tensor):
            return None
        flat = obj.detach().cpu().contiguous().reshape(-1)
        return (
            "tensor",
            str(obj.dtype),
            tuple(obj.shape),
            flat.view(torch.uint8).numpy().tobytes(),
        )


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
            copy.deepcopy(space, memo)
    in_spaces = {id(value) for value in memo.values()}
    given: list[SingleAgentEpisode] = []
    owners: list[tuple[int, Any]] = []  # (episode index, copy) of objects compared by identity
    for index, episode in enumerate(episodes_):
        seen = len(memo)
        # One memo: an episode given twice is one copy twice, as deepcopy of the list gives.
        given.append(copy.deepcopy(episode, memo))
        owners += [(index, value) for value in itertools.islice(memo.values(), seen, None)]
    shared = [(i, v) for i, v in owners if _by_identity(v) and id(v) not in in_spaces]
    in_space_shared = [v for v in memo.values() if _by_identity(v) and id(v) in in_spaces]
    keep = {id(v): v for v in in_space_shared} | {id(v): v for _, v in shared}
    before = copy.deepcopy(given, keep)
    watched = tuple((i, v, p) for i, v in shared if (p := _pickled(v)) is not None)
    return Snapshot(given, before, watched)
