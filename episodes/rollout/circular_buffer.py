"""A fixed-length per-env history of batched tensors."""

from __future__ import annotations

import copy
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import torch

from episodes.indexing import as_int, whole_number

from .devices import checked_device
from .leaves import check_int_range, data_tensor
from .select import signed_view
from .specs import allocation_of, normal_tensors
from .trajectories import _other_items, _same_items

__all__ = ["CircularBuffer", "HistoryWindows"]


class HistoryWindows(NamedTuple):
    """Windows sampled by :meth:`CircularBuffer.mini_batch_generator`.

    Attributes:
        data: ``[seq_len, batch_size, ...]``, oldest item first.
        env_ids: ``[batch_size]`` env of each window.
        lags: ``[batch_size]`` how many steps before the newest item each window ends.

    The windows are a tuple (``data, env_ids, lags = w`` and ``w[0]`` work) whose ``==``
    compares the tensors by identity, never their values (as ``Rollout`` does): windows
    holding the very same tensors, or a plain tuple of them, are equal, others are not
    (``False``, where a tuple's ``==`` would raise torch's "ambiguous" error); the hash
    follows that. Compare ``w.data`` and the rest with ``torch.equal`` to compare values.

    Example:
        >>> buf = CircularBuffer(3, 2)
        >>> for v in range(3):
        ...     buf.append(torch.tensor([v, 10 + v]))
        >>> g = torch.Generator().manual_seed(0)
        >>> w = next(buf.mini_batch_generator(2, batch_size=4, num_batches=1, generator=g))
        >>> tuple(w.data.shape), w.env_ids.tolist(), w.lags.tolist(), w.data[-1].tolist()
        ((2, 4), [1, 1, 0, 1], [1, 0, 1, 1], [11, 12, 1, 11])
    """

    data: torch.Tensor
    env_ids: torch.Tensor
    lags: torch.Tensor

    def __eq__(self, other: object) -> bool:
        return _same_items(self, other)

    def __ne__(self, other: object) -> bool:
        return _other_items(self, other)


class CircularBuffer:
    """Ring buffer holding the last ``max_len`` items of each of ``batch_size`` envs.

    All envs append together (``append(x)`` with ``x`` ``[batch_size, ...]``); ``reset`` clears
    the history of some envs, after which their ``current_length`` restarts at 0. The storage is
    allocated on the first ``append`` with ``x``'s trailing shape and dtype, as a normal tensor
    even inside ``torch.inference_mode`` (so are the lengths): later calls may run outside it.

    Args:
        max_len: number of items kept per env (an int >= 1).
        batch_size: number of envs (an int >= 1).
        device: where the history lives (a ``torch.device``, name or index; None: the CPU).

    Raises:
        ValueError: a ``max_len`` or ``batch_size`` that is not an int >= 1 (``2.5`` too).
        TypeError, DeviceError: a ``device`` that is none, one torch does not know, one not
            available here, or ``"meta"`` (:func:`~episodes.rollout.devices.checked_device`).

    Example:
        >>> buf = CircularBuffer(max_len=2, batch_size=1, device="cpu")
        >>> for v in (1.0, 2.0, 3.0):
        ...     buf.append(torch.tensor([v]))
        >>> buf[0].item(), buf[1].item(), buf.current_length.tolist()
        (3.0, 2.0, [2])
    """

    def __copy__(self) -> CircularBuffer:
        # A shallow copy would share the ring but not its position: an append to the copy
        # would overwrite this buffer's items. A copy owns its tensors.
        return copy.deepcopy(self)

    def __init__(
        self, max_len: int, batch_size: int, device: str | int | torch.device | None = "cpu"
    ) -> None:
        self._max_len = whole_number(max_len, "max_len", 1)
        self._batch_size = whole_number(batch_size, "batch_size", 1)
        self.device = checked_device(device)
        self._buffer: torch.Tensor | None = None
        self._pointer = -1  # slot of the newest item, shared by all envs
        self._changes = 0  # appends and resets: a generator in use must not see them
        with normal_tensors():  # written by later calls, in inference mode or not
            self._length = torch.zeros(batch_size, dtype=torch.long, device=self.device)
            self._envs = torch.arange(batch_size, device=self.device)

    def __repr__(self) -> str:
        # Sizes, lengths and the item type, never items (the lengths: one read of 2 numbers).
        state = vars(self)
        buffer, length = state.get("_buffer"), state.get("_length")
        low, high = ("?", "?") if length is None else (int(length.min()), int(length.max()))
        item = (
            ""
            if buffer is None
            else f", item_shape={tuple(buffer.shape[2:])}, dtype={buffer.dtype}"
        )
        return (
            f"CircularBuffer(max_len={state.get('_max_len', '?')}, "
            f"batch_size={state.get('_batch_size', '?')}, "
            f"length={low if low == high else f'{low}..{high}'}{item}, "
            f"device={state.get('device', '?')})"
        )

    @property
    def max_length(self) -> int:
        """The capacity per env.

        Example:
            >>> CircularBuffer(max_len=5, batch_size=2).max_length
            5
        """
        return self._max_len

    @property
    def batch_size(self) -> int:
        """The number of envs.

        Example:
            >>> CircularBuffer(max_len=5, batch_size=2).batch_size
            2
        """
        return self._batch_size

    @property
    def current_length(self) -> torch.Tensor:
        """``[batch_size]`` number of items appended since each env's last reset (capped).

        Example:
            >>> buf = CircularBuffer(3, 2)
            >>> for _ in range(4):
            ...     buf.append(torch.zeros(2))
            >>> buf.current_length.tolist()
            [3, 3]
        """
        return self._length.clone()

    @property
    def buffer(self) -> torch.Tensor:
        """The history as ``[batch_size, max_len, ...]``, oldest slot first (a copy).

        Each env's row is what ``buf[k]`` reads, ``k = max_len - 1`` down to ``0``: since its
        last reset, slots before its first item repeat that item, and an env with no item
        since its reset is zeros.

        Example:
            >>> buf = CircularBuffer(3, 2)
            >>> for v in (1, 2):
            ...     buf.append(torch.tensor([v, 10 * v]))
            >>> buf.reset([0]); buf.append(torch.tensor([7, 30]))
            >>> buf.buffer.tolist()
            [[7, 7, 7], [10, 20, 30]]
        """
        if self._buffer is None:
            raise RuntimeError("the buffer is empty: append() has not been called yet")
        lags = torch.arange(self._max_len - 1, -1, -1, device=self.device)  # oldest first
        lag = torch.minimum(lags[None, :], (self._length - 1).clamp(min=0)[:, None])
        slot = (self._pointer - lag) % self._max_len  # [batch, max_len]
        return _zero_empty(self._buffer[slot, self._envs[:, None]], self._length == 0)

    def append(self, data: torch.Tensor) -> None:
        """Append one item per env, overwriting each env's oldest item when full.

        Args:
            data: ``[batch_size, ...]`` tensor.

        Raises:
            TypeError: ``data`` is not a tensor.
            ValueError: a tensor of another batch size or item shape, one a copy cannot read
                (on the meta device, sparse, nested, quantized), or a dtype the buffer's
                cannot hold; nothing is appended then.

        Example:
            >>> buf = CircularBuffer(4, 2)
            >>> buf.append(torch.ones(2, 3, dtype=torch.int64))
            >>> tuple(buf.buffer.shape), buf.buffer.dtype, buf.current_length.tolist()
            ((2, 4, 3), torch.int64, [1, 1])
        """
        data_tensor(data, "data")
        if data.dim() == 0 or data.shape[0] != self._batch_size:
            raise ValueError(
                f"data must be [batch_size={self._batch_size}, ...], got {tuple(data.shape)}"
            )
        # Stored as data: a policy output's autograd graph would be kept alive (and chained)
        # for as long as the item is in the buffer.
        data = data.detach()
        # Floats into an int buffer (or ints into a bool one) are refused; a narrower float
        # dtype is rounded, as rsl_rl's buffer does; ints a narrower int buffer would wrap
        # are refused (read where they are: free on the host).
        if self._buffer is not None:
            if not torch.can_cast(data.dtype, self._buffer.dtype):
                raise ValueError(
                    f"data of dtype {data.dtype} does not fit the buffer's {self._buffer.dtype} "
                    "(it would be truncated)"
                )
            check_int_range(data, self._buffer.dtype, "data")
        data = data.to(self.device)
        if self._buffer is None:
            with normal_tensors(), allocation_of(f"max_len={self._max_len}"):  # later appends
                self._buffer = torch.zeros(  # write it, in inference mode or not
                    self._max_len, *data.shape, dtype=data.dtype, device=self.device
                )
        elif data.shape != self._buffer.shape[1:]:
            raise ValueError(f"data shape {tuple(data.shape)} != {tuple(self._buffer.shape[1:])}")
        slot = (self._pointer + 1) % self._max_len
        self._buffer[slot].copy_(data)  # before the pointer moves: a failed copy moves nothing
        self._changes += 1
        self._pointer = slot
        self._length.add_(1).clamp_(max=self._max_len)

    def reset(self, batch_ids: Sequence[int] | torch.Tensor | None = None) -> None:
        """Forget the history of ``batch_ids`` (all envs when ``None``).

        ``batch_ids`` holds env indices, or is a ``[batch_size]`` mask (the dones): a bool
        tensor, or a uint8 one (rsl_rl's dones), nonzero meaning reset. Any other shape of
        mask is a ``ValueError``; to pass env indices as a tensor, give an int64 one. An index
        out of range is torch's ``IndexError``, and something that is no indices (a dict, a
        string) a ``TypeError``: either leaves every env's history as it was.

        Example:
            >>> buf = CircularBuffer(3, 2)
            >>> buf.append(torch.tensor([5, 7]))
            >>> buf.reset([0])
            >>> buf.current_length.tolist(), buf[0].tolist()
            ([0, 1], [0, 7])
            >>> buf.append(torch.tensor([6, 8])); buf.reset(torch.tensor([False, True]))
            >>> buf.current_length.tolist()
            [1, 0]
            >>> buf.append(torch.tensor([1, 2])); buf.reset(torch.tensor([1, 0], dtype=torch.uint8))
            >>> buf.current_length.tolist()
            [0, 1]
        """
        if batch_ids is None:
            self._changes += 1
            self._length.zero_()
            return
        if isinstance(batch_ids, torch.Tensor):
            data_tensor(batch_ids, "batch_ids")  # a meta mask fails in as_tensor's copy
        try:
            ids = torch.as_tensor(batch_ids, device=self.device)
        except (TypeError, ValueError, RuntimeError) as error:  # "Could not infer dtype of dict"
            raise TypeError(
                "batch_ids must be env indices or a [batch_size] mask, got "
                f"{type(batch_ids).__name__} ({error})"
            ) from error
        if ids.numel() == 0 and not isinstance(batch_ids, torch.Tensor):
            ids = ids.long()  # [] is "no env", not a float tensor
        if ids.dtype in (torch.bool, torch.uint8):  # uint8 is a mask, as in torch indexing
            if ids.shape != self._length.shape:
                raise ValueError(
                    f"a {ids.dtype} mask must have shape ({len(self._length)},), "
                    f"got {tuple(ids.shape)}"
                )
            ids = ids.bool()
        elif ids.is_floating_point() or ids.is_complex():
            raise TypeError(f"env ids must be integers or a bool mask, got {ids.dtype}")
        else:
            ids = ids.long()
        # Into a copy: torch refuses an index out of range after resetting the ones before
        # it (reset([0, 5]) forgot env 0's history and raised).
        length = self._length
        # Appends add to it in place, in inference mode or not: a normal tensor. (A check, not
        # a context: a reset may come every step.)
        if torch.is_inference_mode_enabled():
            with normal_tensors():
                length = length.clone()
        else:
            length = length.clone()
        if ids.dtype == torch.bool:
            length.masked_fill_(ids, 0)  # a mask index_put waits for the device; this does not
        else:
            length[ids] = 0
        self._length = length
        # Counted once the write went through: a refused call changes nothing (a generator
        # reading this buffer goes on).
        self._changes += 1

    # No sequence of lags: ``b[k]`` clamps ``k`` into each env's history, so Python's old
    # iteration through ``__getitem__`` would give ``max_len`` items, repeating the oldest.
    __iter__ = None

    def __getitem__(self, key: int | torch.Tensor) -> torch.Tensor:
        """Item ``key`` steps back for every env (``0`` is the newest).

        ``key`` is an int or a ``[batch_size]`` integer tensor (one lag per env). Envs with fewer
        than ``key + 1`` items since their last reset return their oldest item; envs with no item
        since their reset return zeros. A tensor's lags are clamped into each env's history
        (below 0 reads the newest item): checking them would wait for the device.

        Raises:
            IndexError: if an int ``key`` is outside ``[0, max_length)``.
            TypeError: a tensor ``key`` that is not of an integer dtype.
            ValueError: a tensor ``key`` not of shape ``[batch_size]``, or without data (meta).
            RuntimeError: if nothing was appended yet.
        """
        if self._buffer is None:
            raise RuntimeError("the buffer is empty: append() has not been called yet")
        if isinstance(key, torch.Tensor):
            data_tensor(key, "lags")
            if key.is_floating_point() or key.is_complex() or key.dtype == torch.bool:
                raise TypeError(f"lags must be integers, got {key.dtype}")
            if tuple(key.shape) != (self._batch_size,):
                raise ValueError(
                    f"lags must have shape ({self._batch_size},), got {tuple(key.shape)}"
                )
            lag = key.to(device=self.device, dtype=torch.long).clamp(min=0)
        else:
            key = as_int(key, what="a lag (or an integer tensor of lags)")
            if not 0 <= key < self._max_len:
                raise IndexError(f"lag {key} out of range [0, {self._max_len})")
            lag = torch.full((self._batch_size,), key, dtype=torch.long, device=self.device)
        lag = torch.minimum(lag, (self._length - 1).clamp(min=0))
        slot = (self._pointer - lag) % self._max_len
        return _zero_empty(self._buffer[slot, self._envs], self._length == 0)

    def mini_batch_generator(
        self,
        seq_len: int,
        batch_size: int,
        num_batches: int,
        generator: torch.Generator | None = None,
    ) -> Iterator[HistoryWindows]:
        """Yield random windows of ``seq_len`` consecutive items that do not cross a reset.

        A window of env ``e`` ending ``j`` steps before the newest item is valid when
        ``j + seq_len <= current_length[e]``; windows are drawn uniformly (with replacement) from
        all valid ``(env, j)`` pairs. Sampling stays on the device: no host sync per batch.

        Args:
            seq_len: window length (an int, ``1 <= seq_len <= max_length``).
            batch_size: windows per batch (an int >= 1).
            num_batches: number of batches (an int >= 1).
            generator: optional ``torch.Generator`` on the buffer's device.

        Raises:
            ValueError: on a bad ``seq_len``, ``batch_size`` or ``num_batches`` (``2.0`` too)
                or if no env has ``seq_len`` items since its reset: at the call, not at the
                first batch.
            TypeError: a ``generator`` that is not a ``torch.Generator`` (at the call too).
            RuntimeError: when a batch is asked for after an ``append`` or ``reset`` made
                since the call (its windows were planned on the buffer as it was then; make a
                new generator).

        Example:
            >>> buf = CircularBuffer(4, 2)
            >>> for v in range(3):
            ...     buf.append(torch.full((2,), float(v)))
            >>> w = next(buf.mini_batch_generator(seq_len=3, batch_size=5, num_batches=1))
            >>> w.data[:, 0].tolist()
            [0.0, 1.0, 2.0]
        """
        if generator is not None and not isinstance(generator, torch.Generator):
            # Else torch.rand refuses it at the first batch, not at the call.
            raise TypeError(f"generator must be a torch.Generator, got {type(generator).__name__}")
        seq_len = whole_number(seq_len, "seq_len", 1)
        if seq_len > self._max_len:
            raise ValueError(f"seq_len must be in [1, {self._max_len}], got {seq_len}")
        try:
            batch_size = whole_number(batch_size, "batch_size", 1)
            num_batches = whole_number(num_batches, "num_batches", 1)
        except ValueError:
            raise ValueError(
                f"batch_size and num_batches must be ints >= 1, got {batch_size!r}, {num_batches!r}"
            ) from None
        if self._buffer is None:
            raise ValueError("the buffer is empty: append() has not been called yet")
        counts = (self._length - seq_len + 1).clamp(min=0)
        cum = torch.cumsum(counts, 0)
        if int(cum[-1]) == 0:  # one check before sampling
            raise ValueError(f"no env has {seq_len} items since its last reset")
        # Checked here, at the call: the windows are drawn lazily, planned on the buffer as is.
        plan = (counts, cum, self._changes)
        return self._windows(seq_len, batch_size, num_batches, generator, plan)

    def _windows(
        self,
        seq_len: int,
        batch_size: int,
        num_batches: int,
        generator: torch.Generator | None,
        plan: tuple[torch.Tensor, torch.Tensor, int],
    ) -> Iterator[HistoryWindows]:
        counts, cum, planned_on = plan  # planned_on: the buffer's changes at the call
        buf, total = self._buffer, cum[-1]
        assert buf is not None
        steps = torch.arange(seq_len - 1, -1, -1, device=self.device)  # lags, oldest first
        for _ in range(num_batches):
            if self._changes != planned_on:
                raise RuntimeError(
                    "the buffer changed (append or reset) while its mini_batch_generator was in "
                    "use; make a new generator"
                )
            u = torch.rand(batch_size, device=self.device, generator=generator, dtype=torch.float64)
            flat = (u * total).long().clamp(max=total - 1)
            env = torch.searchsorted(cum, flat, right=True)
            lag_end = flat - (cum[env] - counts[env])
            slots = (self._pointer - (lag_end.unsqueeze(0) + steps.unsqueeze(1))) % self._max_len
            yield HistoryWindows(buf[slots, env.unsqueeze(0)], env, lag_end)


def _zero_empty(items: torch.Tensor, empty: torch.Tensor) -> torch.Tensor:
    """``items`` ``[batch_size, ...]`` with the rows ``empty`` (``[batch_size]``) marks zeroed."""
    bits = signed_view(items)  # uint16-64 as int16-64: torch has no masked_fill for them
    zeroed = bits.masked_fill(empty.view(-1, *([1] * (items.dim() - 1))), 0)
    return zeroed if bits is items else zeroed.view(items.dtype)
