"""Which buffer a prioritized batch came from: ``update_priorities(priorities, batch)`` checks.

Item indices number one buffer's steps from 0, so two buffers' indices overlap, and a state
restored by ``set_state`` (another buffer's, say) may give an older batch's indices to other
steps: plain indices handed to the wrong buffer change the wrong items, and nothing can tell.
A batch a prioritized buffer samples is therefore a :class:`ReplayBatch`, the dict it always
was (same keys, same values) that also carries a token of the buffer that drew it and the items
its priorities go to. Given the batch itself, ``update_priorities`` compares its token with
its own and refuses a batch of another buffer, or one drawn before ``set_state`` or ``load``:
no work per item. The items are read from the batch's ``indices`` as the batch is then (its
column of first steps for sequences), so rows reordered or filtered after sampling take their
own priorities. A token is random (63 bits), made when the buffer first samples, and made anew
by ``set_state``; a copy of a buffer (``copy.copy``, ``copy.deepcopy``, pickling) gets a token
of its own, as the two number their next items alike and would name other steps by them.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["ReplayBatch", "batch_items", "forget_token", "tagged"]


class ReplayBatch(dict[str, Any]):
    """A prioritized buffer's sampled batch: a ``dict`` that knows the buffer it came from.

    Its keys and values are the batch's, as ever (``dict(batch)`` is the plain dict, and drops
    the tag). ``source`` is the drawing buffer's token; ``priority_items`` the item ids that
    ``update_priorities(priorities, batch)`` sets, read from its ``indices`` as they are now:
    the transitions, or each sequence's first (non-lookback) step (column
    ``priority_column``), one per row.

    Example:
        >>> import numpy as np
        >>> from episodes import SingleAgentEpisode
        >>> from episodes.replay import PrioritizedEpisodeReplayBuffer
        >>> def filled(seed):
        ...     buf = PrioritizedEpisodeReplayBuffer(10, seed=seed)
        ...     buf.add(SingleAgentEpisode("a", observations=[0.0, 1.0, 2.0], actions=[0, 1],
        ...                                rewards=[1.0, 1.0], len_lookback_buffer=0))
        ...     return buf
        >>> mine, other = filled(0), filled(1)
        >>> batch = mine.sample(2)
        >>> isinstance(batch, dict), batch.priority_items.tolist() == batch["indices"].tolist()
        (True, True)
        >>> mine.update_priorities(np.array([3.0, 3.0]), batch)
        >>> other.update_priorities(np.array([3.0, 3.0]), batch)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: this batch was sampled from another buffer...
    """

    source: int | None = None
    priority_column: int | None = None  # None: transitions, whose indices are one per row

    @property
    def priority_items(self) -> np.ndarray:
        """The item ids ``update_priorities(priorities, batch)`` sets, one per row now."""
        indices = self.get("indices")
        if indices is None:
            raise ValueError("this batch has no 'indices' column any more: nothing names its items")
        if not isinstance(indices, np.ndarray) and hasattr(indices, "detach"):  # torch
            indices = indices.detach().cpu().numpy()
        indices = np.asarray(indices)
        column = self.priority_column
        if column is None:
            return indices
        if indices.ndim != 2 or not 0 <= column < indices.shape[1]:
            raise ValueError(
                f"this batch's 'indices' (shape {indices.shape}) lost the column {column} of "
                "its sequences' first steps since sample(): nothing names its items"
            )
        return indices[:, column]


def _token(buffer: Any) -> int:
    # Made on first use (buffers pickled before tokens existed get one too) and tied to the
    # buffer's identity: a copy, which numbers its next items as the original does, makes
    # its own.
    token = vars(buffer).get("_batch_token")
    if token is None or token[0] != id(buffer):
        token = buffer._batch_token = (id(buffer), secrets.randbits(63))
    return int(token[1])


def forget_token(buffer: Any) -> None:
    """Gives ``buffer`` a new token: batches drawn before (``set_state``) are refused.

    Example:
        >>> from types import SimpleNamespace
        >>> buf = SimpleNamespace()
        >>> first = _token(buf); forget_token(buf); _token(buf) != first
        True
    """
    vars(buffer).pop("_batch_token", None)


def tagged(batch: Any, buffer: Any, column: int | None) -> Any:
    """``batch`` as a :class:`ReplayBatch` of ``buffer``; ``column``: its sequences' first steps.

    Anything but a plain dict (a list of episodes) is returned as it is.

    Example:
        >>> from types import SimpleNamespace
        >>> batch = tagged({"indices": np.array([4])}, SimpleNamespace(), None)
        >>> type(batch).__name__, list(batch), batch.priority_items.tolist()
        ('ReplayBatch', ['indices'], [4])
    """
    if type(batch) is not dict:
        return batch
    out = ReplayBatch(batch)
    out.source = _token(buffer)
    out.priority_column = column
    return out


def batch_items(batch: Mapping[Any, Any], buffer: Any) -> np.ndarray:
    """The items a batch's priorities go to, refused unless ``buffer`` drew the batch.

    Raises:
        ValueError: A mapping that is no sampled batch (a dict built or joined by hand), or
            a batch of another buffer or of this one before ``set_state``/``load``.

    Example:
        >>> from types import SimpleNamespace
        >>> buf = SimpleNamespace()
        >>> batch_items(tagged({"indices": np.array([1, 2])}, buf, None), buf).tolist()
        [1, 2]
        >>> batch_items({"indices": [0]}, buf)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        ValueError: update_priorities takes a batch as this buffer's sample() returned it ...
    """
    source = getattr(batch, "source", None)
    if source is None:
        # dm-tree rebuilds a dict subclass from its values alone: a ReplayBatch with no source
        what = (
            "a ReplayBatch rebuilt from a batch's values (as tree.map_structure rebuilds one)"
            if isinstance(batch, ReplayBatch)
            else f"a {type(batch).__name__}"
        )
        raise ValueError(
            "update_priorities takes a batch as this buffer's sample() returned it (a "
            f"ReplayBatch, which carries the buffer's token), got {what} that carries no "
            "source: pass the item indices themselves (batch['indices'], numpy or torch, or "
            "the rows you chose of them; a sequence batch's batch['indices'][:, lookback]), "
            "the original batch, or none (update_priorities(priorities) sets the last "
            "sample's items). A dict made from a batch (dict(batch), a dict comprehension or "
            "tree.map_structure making torch tensors) or joined from two buffers' parts has "
            "no source"
        )
    if source != _token(buffer):
        raise ValueError(
            "this batch was sampled from another buffer, or from this one before a set_state "
            "or load (its indices may name other steps here): send its priorities to the "
            "buffer that drew it; after a load that kept item ids, pass batch['indices']"
        )
    return batch.priority_items  # type: ignore[attr-defined]
