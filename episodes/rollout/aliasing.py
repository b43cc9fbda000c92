"""Which sources of a storage write share memory with the storage (and must be copied first).

A write reads its sources after earlier fields of the same write were copied: a source that
lies in the storage's own memory would be read changed. :func:`unalias` finds those by
allocation, including memory torch wraps without a view (``torch.from_numpy`` of a row's
array), and says which sources a sharing write may take.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Mapping, Sequence
from itertools import accumulate, chain
from typing import Any

import torch

from .leaves import can_take

__all__ = ["unalias"]


def unalias(
    copies: list[tuple[torch.Tensor, Any]],
    puts: list[tuple[str, Any]],
    tensors: Mapping[str, torch.Tensor],
    shared: set[str],
    one_step: bool = False,
    *,
    share: bool = False,
    also_own: Sequence[torch.Tensor] = (),
) -> tuple[list[tuple[torch.Tensor, Any]], list[tuple[str, Any, bool]]]:
    """A write's pairs, with every source that shares memory with a written tensor cloned.

    ``copies`` are ``(rows, source)`` pairs, ``puts`` ``(tensor name, source)`` pairs for
    :func:`put_leaf`; ``shared`` tensors are never written (a write copies them first). A
    source that views rows of the storage (``write_block(1, rewards=st.rewards[0:3])``) would
    otherwise be read after earlier copies changed it, or be refused by torch part-way
    through a write. A source that is its own destination is left as it is, and a copy
    whose source is its destination's very view (gathered into the storage in place) is
    dropped: there is nothing to copy.

    Each put comes back with whether :func:`put_leaf` may take its source (``share``): not
    when the source lies in the storage's own memory (a tensor of ``tensors`` not in
    ``shared``, or one of ``also_own``, the hidden states), as in
    ``write_block(0, share=True, values=st.rewards)``. Taken, it would make two fields one
    memory, and a write into one (``compute_returns`` into the advantages) would change the
    other: it is copied instead. So is a source whose memory another field took already (a
    tensor of ``shared``: ``values=st.rewards`` once the rewards were taken) or takes in this
    same write (``rewards=x, values=x``): only the first put of a memory takes it.

    ``one_step`` (a write of one step's rows, :meth:`RolloutStorage.add_transition`) first
    asks whether any source may lie in the storage's memory at all (a fresh policy output
    does not), so the hot path compares one pointer per source.

    Example:
        >>> tensors = {"r": torch.arange(4.0).view(4, 1), "v": torch.zeros(4, 1)}
        >>> copies = [(tensors["r"][1:4], tensors["r"][0:3])]
        >>> (dst, src), = unalias(copies, [], tensors, set())[0]
        >>> _ = dst.copy_(src); tensors["r"].flatten().tolist()
        [0.0, 0.0, 1.0, 2.0]
        >>> _, puts = unalias([], [("v", tensors["r"])], tensors, set(), share=True)
        >>> [take for _, _, take in puts]  # another field's tensor: copied, not taken
        [False]
        >>> x = torch.ones(4, 1)
        >>> _, puts = unalias([], [("r", x), ("v", x)], tensors, set(), share=True)
        >>> [take for _, _, take in puts]  # one memory for two fields: the second copies it
        [True, False]
    """
    # Compared by allocation, not by the rows a source spans: one pointer per leaf, and a
    # source from other rows of a written tensor only costs a copy. A source that shares an
    # allocation without being a view of it (``torch.from_numpy(st.values[1].numpy())``) has
    # an allocation of its own that lies inside the storage's: it is named by the
    # storage allocation it lies in.
    if one_step and _all_fresh(chain(copies, puts), chain(tensors.values(), also_own)):
        return copies, [(n, src, share) for n, src in puts]
    memory = _Allocations(chain(tensors.values(), also_own)).memory
    copies = [(dst, src) for dst, src in copies if not _same_view(dst, src)]  # nothing to copy

    known: dict[str, int] = {}  # each storage tensor's allocation, looked up once

    def memory_of(name: str) -> int:
        if name not in known:
            known[name] = memory(tensors[name])
        return known[name]

    written = {memory(dst) for dst, _ in copies}
    written.update(memory_of(n) for n, _ in puts if n not in shared)
    own: set[int] = set()
    if share:  # every tensor a caller may hold a view of (hidden states made now: none)
        own = {memory_of(n) for n in tensors if n not in shared}
        own.update(memory(t) for t in also_own)
    copies = [(dst, src.clone() if memory(src) in written else src) for dst, src in copies]
    # Byte spans the fields take or keep: the shared tensors (one field's each) that this
    # write does not replace, then the sources it takes. A taken tensor is contiguous: its
    # span is all its memory. Compared by address across allocations: two wrappers of the
    # same bytes (``from_numpy(a[3])`` and ``from_numpy(a)[3]``, a dlpack twin) are two
    # allocations to torch.
    spans: dict[str, tuple[int, int]] = {}
    if share:
        replaced = {n for n, src in puts if src is not tensors[n]}
        spans = {n: _span(tensors[n]) for n in shared - replaced}
    out: list[tuple[str, Any, bool]] = []
    wanted: list[int] = []  # the puts that may take their source, if its bytes are free
    for n, src in puts:
        if src is tensors[n]:
            out.append((n, src, share and n in shared))
            continue
        where = memory(src)
        if where in written:
            src = src.clone()
        take = share and where not in own and can_take(tensors[n], src)
        if take:
            wanted.append(len(out))
        out.append((n, src, take))
    for i in _refused(spans, [(out[i][0], _span(out[i][1])) for i in wanted]):
        n, src, _ = out[wanted[i]]
        out[wanted[i]] = (n, src, False)
    return copies, out


def _refused(
    held: dict[str, tuple[int, int]], wanted: list[tuple[str, tuple[int, int]]]
) -> list[int]:
    """Which of the ``wanted`` ``(field, span)`` takes, in order, overlap a span held before.

    Held: ``held`` (the fields' spans kept) and each span taken earlier in ``wanted``; a
    field's own earlier span does not count, and its new one replaces it. A span overlaps
    ``[a, b)`` when it starts before ``b`` and stops after ``a``: the furthest stop among the
    spans starting before ``b``, kept per start address in a Fenwick tree of maxima, so the
    check is O(K log K) for K leaves, not every pair.
    """
    names = [n for n, _ in wanted]
    if len(set(names)) < len(names) or not held.keys().isdisjoint(names):
        return _refused_pairwise(held, wanted)  # a field's earlier span gives way (rare)
    starts = sorted({start for start, _ in chain(held.values(), (s for _, s in wanted))})
    reach = [0] * (len(starts) + 1)  # 0: no span (a stop of 0 reaches no address)

    def hold(span: tuple[int, int]) -> None:
        i = bisect_left(starts, span[0]) + 1
        while i < len(reach):
            reach[i] = max(reach[i], span[1])
            i += i & -i

    def overlapped(span: tuple[int, int]) -> bool:
        i, furthest = bisect_left(starts, span[1]), 0  # the spans starting before its stop
        while i:
            furthest = max(furthest, reach[i])
            i -= i & -i
        return furthest > span[0]

    for span in held.values():
        hold(span)
    refused = []
    for k, (_, span) in enumerate(wanted):
        if overlapped(span):
            refused.append(k)
        else:
            hold(span)
    return refused


def _refused_pairwise(
    held: dict[str, tuple[int, int]], wanted: list[tuple[str, tuple[int, int]]]
) -> list[int]:
    """:func:`_refused` by comparing every pair (the rule itself; for a field put twice)."""
    spans, refused = dict(held), []
    for k, (n, span) in enumerate(wanted):
        if any(_overlap(span, other) for m, other in spans.items() if m != n):
            refused.append(k)
        else:
            spans[n] = span
    return refused


class _Allocations:
    """The allocations of a storage's tensors, to tell which one a source lies in."""

    def __init__(self, tensors: Iterable[torch.Tensor]):
        spans = sorted({_allocation(t) for t in tensors})
        self.starts = [start for start, _ in spans]
        # The furthest end among the allocations starting at or before each one (the spans
        # of views of one block may overlap).
        self.reach = list(accumulate((stop for _, stop in spans), max))

    def holding(self, tensor: torch.Tensor) -> int | None:
        """The start of the storage allocation ``tensor``'s allocation overlaps, else None."""
        start, stop = _allocation(tensor)
        i = bisect_right(self.starts, start) - 1
        if i >= 0 and start < self.reach[i]:
            while i > 0 and self.reach[i - 1] > start:  # an earlier one reaches it: the first
                i -= 1
            return self.starts[i]
        if i + 1 < len(self.starts) and self.starts[i + 1] < stop:
            return self.starts[i + 1]
        return None

    def memory(self, tensor: torch.Tensor) -> int:
        """The storage allocation ``tensor`` lies in, else its own (a key for that memory)."""
        held = self.holding(tensor)
        return _allocation(tensor)[0] if held is None else held


def _all_fresh(pairs: Iterable[tuple[Any, torch.Tensor]], own: Iterable[torch.Tensor]) -> bool:
    """Whether no source of ``pairs`` can share memory with the tensors ``own``.

    Without the spans: a resizable allocation is torch's own, so it either is one of
    ``own``'s (its start is theirs) or overlaps none. Memory torch wraps (numpy's, shared
    memory) is not resizable, and may lie inside another allocation.
    """
    starts = {t.untyped_storage().data_ptr() for t in own}
    for _, src in pairs:
        memory = src.untyped_storage()
        # torch 2.2's storages cannot say (resizable() is 2.3's): then the spans decide.
        resizable = getattr(memory, "resizable", None)
        if resizable is None or not resizable() or memory.data_ptr() in starts:
            return False
    return True


def _same_view(dst: torch.Tensor, src: torch.Tensor) -> bool:
    """Whether ``src`` reads exactly the elements ``dst`` holds, as they are (a copy is a no-op)."""
    return (
        src.data_ptr() == dst.data_ptr()
        and src.shape == dst.shape
        and src.stride() == dst.stride()
        and src.dtype == dst.dtype
        and src.device == dst.device
        and not (src.is_conj() or src.is_neg())
    )


def _allocation(tensor: torch.Tensor) -> tuple[int, int]:
    """The ``[start, stop)`` addresses of the whole allocation ``tensor`` lies in."""
    memory = tensor.untyped_storage()
    start = memory.data_ptr()
    return start, start + memory.nbytes()


def _span(tensor: torch.Tensor) -> tuple[int, int]:
    """The bytes a contiguous ``tensor`` spans, as ``[start, stop)`` addresses."""
    start = tensor.data_ptr()
    return start, start + tensor.numel() * tensor.element_size()


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] < b[1] and b[0] < a[1]
