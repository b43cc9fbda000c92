"""Where stable item indices lie in the step columns, found without a search where possible.

Item ids rise with every added step and a compaction keeps slot order, so the ids of the live
window are sorted, with gaps only where a compaction removed rows. A binary search of random
ids walks the whole id column (about 20 dependent reads each, most of them cache misses at a
million steps), so its cost grows with the buffer. Most ids sit at a fixed offset from the
window's last one (evicted episodes leave their gaps in the oldest rows), so one subtraction
and one gather finds them; only the rest are searched, sorted first so that each search starts
where the previous one ended.
"""

from __future__ import annotations

import numpy as np

__all__ = ["find_slots"]


def find_slots(uid: np.ndarray, live: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Slots of item ids ``idx`` in the sorted id column ``uid``, and which of them are live.

    Args:
        uid: The ids of the window's slots, strictly rising.
        live: Whether each slot holds a stored step (same length).
        idx: The ids asked for, int64, any order, repeats allowed.

    Returns:
        ``(slots, found)``: ``found[i]`` says whether ``idx[i]`` is stored; ``slots[i]`` is its
        slot where it is (elsewhere a slot of no meaning).

    Example:
        >>> uid = np.array([2, 5, 6, 7])  # ids 3 and 4 were compacted away
        >>> live = np.array([True, True, False, True])
        >>> slots, found = find_slots(uid, live, np.array([7, 2, 6, 4]))
        >>> slots[found].tolist(), found.tolist()
        ([3, 0], [True, True, False, False])
    """
    end = len(uid)
    if end == 0 or len(idx) == 0:
        return np.zeros(len(idx), np.int64), np.zeros(len(idx), bool)
    # Ids below any stored one give negative guesses, ids never issued guesses past the end.
    guess = idx - (int(uid[-1]) - (end - 1))
    inside = (guess >= 0) & (guess < end)
    slots = np.where(inside, guess, 0)
    hit = inside & (uid[slots] == idx)
    if not hit.all():
        missed = np.flatnonzero(~hit)
        wanted = idx[missed]
        order = np.argsort(wanted, kind="stable")
        searched = np.empty(len(wanted), np.int64)
        searched[order] = np.searchsorted(uid, wanted[order])
        slots[missed] = searched
    found = slots < end
    found[found] = (uid[slots[found]] == idx[found]) & live[slots[found]]
    return slots, found
