"""The counters and evicted ids of a replay buffer's state, checked as a buffer could have them."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Collection, Mapping
from itertools import islice
from typing import Any

from episodes.replay.sampling import check_non_negative

__all__ = ["COUNTERS", "EVICTED_IDS_KEPT", "checked_counts", "remember_evicted"]

#: The keys of ``get_counters()`` / ``set_counters``, in their order.
COUNTERS = ("added_timesteps", "sampled_timesteps", "episodes_evicted")

#: How many of the latest evicted episodes' ids a buffer keeps (about 100 bytes each): a
#: long run evicts without end, and a chunk continuing an episode comes soon after its eviction.
EVICTED_IDS_KEPT = 65_536


def remember_evicted(evicted: dict[Any, None], id_: Any) -> None:
    """Adds ``id_`` as the latest evicted id, forgetting the oldest beyond :data:`EVICTED_IDS_KEPT`.

    Buffers keep an ``OrderedDict``, whose oldest entry goes in O(1) (a plain dict's
    ``next(iter(...))`` rescans the entries deleted before it: quadratic). A plain dict (a
    buffer pickled before the ids were bounded) is cut back in one pass once it holds an
    eighth more.

    Example:
        >>> evicted = OrderedDict.fromkeys(range(EVICTED_IDS_KEPT))
        >>> remember_evicted(evicted, "new")
        >>> len(evicted) == EVICTED_IDS_KEPT, next(iter(evicted)), list(evicted)[-1]
        (True, 1, 'new')
    """
    evicted[id_] = None
    if len(evicted) <= EVICTED_IDS_KEPT:
        return
    if isinstance(evicted, OrderedDict):
        evicted.popitem(last=False)
    elif len(evicted) > EVICTED_IDS_KEPT + EVICTED_IDS_KEPT // 8:
        kept = list(islice(evicted, len(evicted) - EVICTED_IDS_KEPT, None))
        evicted.clear()
        evicted.update(dict.fromkeys(kept))


def checked_counts(
    counters: Mapping[str, Any], evicted: Any, stored_ids: Collection[Any], num_timesteps: int
) -> tuple[int, int, int, dict[Any, None]]:
    """Counters and evicted ids a buffer storing ``stored_ids`` could have, checked.

    Returns:
        Added steps, sampled items, evicted episodes, and the evicted ids in their order (as
        the insertion-ordered dict the buffers keep), the latest :data:`EVICTED_IDS_KEPT` of
        them.

    Raises:
        ValueError: A counter missing or not an int >= 0 (a bool is no count), fewer added
            steps than ``num_timesteps``, evicted ids that are not a list or tuple, repeat,
            or name a stored episode, or fewer evicted episodes counted than evicted ids.
            ``TypeError``: an unhashable evicted id.

    Example:
        >>> counts = {"added_timesteps": 9, "sampled_timesteps": 0, "episodes_evicted": 2}
        >>> added, sampled, evictions, ids = checked_counts(counts, [7, "a"], {"b"}, 4)
        >>> added, sampled, evictions, list(ids)
        (9, 0, 2, [7, 'a'])
        >>> checked_counts(counts, ["b"], {"b"}, 4)
        Traceback (most recent call last):
        ...
        ValueError: evicted ids 'b' are stored episodes too: a stored episode is no evicted id
        >>> one = {**counts, "episodes_evicted": 1}
        >>> checked_counts(one, [7, "a"], {"b"}, 4)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: counters['episodes_evicted'] is 1, below the 2 evicted ids: each evicted ...
    """
    if not isinstance(counters, Mapping) or any(key not in counters for key in COUNTERS):
        raise ValueError(f"counters must be a dict with keys {list(COUNTERS)}, got {counters!r}")
    added, sampled, num_evicted = (
        check_non_negative(counters[key], f"counters[{key!r}]") for key in COUNTERS
    )
    if added < num_timesteps:
        raise ValueError(
            f"counters['added_timesteps'] is {added}, below the {num_timesteps} steps stored"
        )
    if not isinstance(evicted, (list, tuple)):
        raise ValueError(f"evicted ids must be a list, got {type(evicted).__name__}")
    try:
        ordered = dict.fromkeys(evicted)
    except TypeError:
        bad = next(i for i in evicted if not _hashable(i))
        raise TypeError(f"evicted id {bad!r} is unhashable ({type(bad).__name__})") from None
    if len(ordered) != len(evicted):
        seen: set[Any] = set()
        for id_ in evicted:
            if id_ in seen:
                raise ValueError(f"evicted id {id_!r} is listed twice")
            seen.add(id_)
    both = ordered.keys() & stored_ids
    if both:
        names = ", ".join(sorted(map(repr, both))[:5])
        raise ValueError(
            f"evicted ids {names} are stored episodes too: a stored episode is no evicted id"
        )
    if num_evicted < len(ordered):
        # An id stored again (on_evicted="restart") leaves the list, so each listed one was a
        # separate eviction; a count above the ids is taken (saves from before the ids were
        # kept counted more).
        raise ValueError(
            f"counters['episodes_evicted'] is {num_evicted}, below the {len(ordered)} evicted "
            "ids: each evicted id is an eviction"
        )
    if len(ordered) > EVICTED_IDS_KEPT:  # a state from before the ids were bounded: one pass
        ordered = dict.fromkeys(islice(ordered, len(ordered) - EVICTED_IDS_KEPT, None))
    return added, sampled, num_evicted, OrderedDict(ordered)


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True
