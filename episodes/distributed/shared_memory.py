"""Same-node replies through shared-memory segments that the caller owns and reuses.

Ray moves an actor's return value through its object store: the actor copies the value's
numpy buffers into object-store memory that is fresh for every reply, and on a 2-core machine
that costs about three times a plain copy of the bytes (page faults and allocation, not the
copy). Runners on the caller's node can do without it: the caller keeps, per runner, a few
files in ``/dev/shm`` mapped once in both processes. A request names a free one; the actor
pickles its reply (protocol 5), writes the out-of-band buffers (the numpy blocks) into the
segment and returns only the pickle stream and the buffers' offsets through Ray; the caller
unpickles over its own read-only mapping, without a copy. A segment is free again once every
array of the reply it holds is gone (a finalizer on the one array all of them view), so a
training loop that drops the previous sample before the next one alternates between two
segments whose pages stay mapped.

Replies whose buffers do not fit, actors that cannot open the segment (another node), values
that plain ``pickle`` cannot handle, values holding Ray's own references (an ``ObjectRef`` or an
actor handle: only Ray's serializer keeps the object or actor they name alive) and machines
without ``/dev/shm`` take Ray's own path.
The actor maps an offered segment when the request starts, before the work that fills the
reply, and removes its file name at once (the memory goes with the last mapping); the caller
removes the names of segments it drops (a failed request's, a dropped slot's), so a name lives
in ``/dev/shm`` only between its creation and the start of the request it was made for.

Example:
    >>> import numpy as np
    >>> caller, actor = SlotSegments(), ActorSegments()
    >>> request, lease = caller.request()  # no size known yet: the reply takes Ray's path
    >>> reply = actor.reply({"obs": np.ones((4, 3), np.float32)}, request)
    >>> caller.receive(reply, lease)["obs"].sum(), reply.needed
    (np.float32(12.0), 64)
    >>> request, lease = caller.request()  # now a segment of the size asked for last time
    >>> value = caller.receive(actor.reply({"obs": np.arange(5.0)}, request), lease)
    >>> value["obs"].tolist(), value["obs"].flags.writeable, lease.leased
    ([0.0, 1.0, 2.0, 3.0, 4.0], False, True)
    >>> del value; lease.leased
    False
    >>> caller.close()
"""

from __future__ import annotations

import atexit
import copyreg
import io
import math
import mmap
import os
import pickle
import uuid
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["SHM_DIR", "ActorSegments", "Reply", "Request", "Segment", "SlotSegments"]

#: Where segments are created (a tmpfs on Linux).
SHM_DIR = "/dev/shm"
_ALIGN = 64  # each buffer starts on a cache line
_ROUND = 1 << 20
_GROWTH = 1.25  # headroom, so that a reply a little larger than the last one still fits
_KEEP_FREE = 2  # free segments a slot keeps mapped: one being read, one being written

_linked: set[str] = set()  # names still in /dev/shm (removed once an actor has mapped them)


@atexit.register
def _unlink_left_over() -> None:  # a caller that exits before its actors mapped a segment
    for path in list(_linked):
        _unlink(path)


def _unlink(path: str) -> None:
    _linked.discard(path)
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _unlink_segments(segments: list[Segment]) -> None:
    """Removes the names still linked (the finalizer of a caller dropped without ``close``)."""
    for segment in segments:
        if segment.linked:
            segment.linked = False
            _unlink(segment.path)


def _ray_references() -> list[type]:
    """Ray's ``ObjectRef`` and ``ActorHandle`` and their subclasses (none without Ray)."""
    try:
        import ray
        import ray.actor
    except ImportError:
        return []
    found, todo = [], [ray.ObjectRef, ray.actor.ActorHandle]
    while todo:
        cls = todo.pop()
        found.append(cls)
        todo.extend(cls.__subclasses__())
    return found


def _refuse(obj: Any) -> Any:
    raise pickle.PicklingError(f"{type(obj).__name__} travels through Ray's serializer only")


def _dumps(value: Any, buffer_callback: Any) -> bytes:
    """``pickle.dumps(value, protocol=5)``, refusing Ray's references.

    Plain pickle writes an ``ObjectRef`` or an actor handle without telling Ray that the reply
    holds it: once the actor drops its own copy, Ray frees the object (a later ``ray.get``
    never returns) or ends the actor. Refused here, the reply takes Ray's path, which counts
    them. The refusal is an entry of the pickler's own dispatch table (copyreg's, plus these
    types), looked up in C by each object's type: an ordinary sample pays nothing for it, where
    a ``reducer_override`` (a Python call per object) made its pickling about 20% slower.

    Example:
        >>> import ray
        >>> buffers = []
        >>> stream = _dumps({"x": np.arange(3)}, buffers.append)
        >>> pickle.loads(stream, buffers=buffers)["x"].tolist()
        [0, 1, 2]
        >>> _dumps([ray.ObjectRef.nil()], buffers.append)
        Traceback (most recent call last):
        ...
        _pickle.PicklingError: ObjectRef travels through Ray's serializer only
    """
    stream = io.BytesIO()
    pickler = pickle.Pickler(stream, protocol=5, buffer_callback=buffer_callback)
    pickler.dispatch_table = {
        **copyreg.dispatch_table,
        **dict.fromkeys(_ray_references(), _refuse),
    }
    pickler.dump(value)
    return stream.getvalue()


@dataclass(frozen=True)
class Request:
    """What the caller sends with a request.

    Attributes:
        path: The segment's file (None: no segment; the actor still reports ``needed``).
        size: Its size in bytes.
        retired: Segments the actor should unmap (the caller dropped them).

    Example:
        >>> reply = ActorSegments().reply(np.zeros(16), Request(None))  # no segment offered
        >>> reply.needed, reply.mapped, reply.value.shape  # still sizes the next segment
        (128, False, (16,))
    """

    path: str | None
    size: int = 0
    retired: tuple[str, ...] = ()


@dataclass
class Reply:
    """What the actor returns through Ray.

    Attributes:
        value: The reply itself when it was not written into the segment.
        stream: The pickle stream whose out-of-band buffers lie in the segment.
        spans: ``(offset, nbytes)`` of each buffer in the segment.
        needed: Bytes the reply's buffers take (sizes the next segment).
        mapped: The actor mapped the segment (its file name can go).
        reachable: False when the actor could not open the segment (it runs on another
            node, or has no ``/dev/shm``): the caller stops offering segments.

    Example:
        >>> reply = ActorSegments().reply({"x": np.zeros(100)}, Request(None))
        >>> reply.stream is None, reply.value["x"].shape, reply.needed  # 800 bytes, 64-aligned
        (True, (100,), 832)
    """

    value: Any = None
    stream: bytes | None = None
    spans: tuple[tuple[int, int], ...] = ()
    needed: int = 0
    mapped: bool = False
    reachable: bool = True


@dataclass(eq=False)
class Segment:
    """One shared file as the caller sees it: a read-only mapping, and whether it is leased.

    Example:
        >>> segment = Segment("unused", 4096, mmap.mmap(-1, 4096))
        >>> segment.leased, segment.retired, segment.mapping.closed
        (True, False, False)
    """

    path: str
    size: int
    mapping: mmap.mmap
    leased: bool = True
    retired: bool = False
    linked: bool = True

    def release(self) -> None:
        """Marks the segment free (unmaps it when its slot dropped it meanwhile).

        Example:
            >>> kept = Segment("kept", 4096, mmap.mmap(-1, 4096))
            >>> dropped = Segment("dropped", 4096, mmap.mmap(-1, 4096), retired=True)
            >>> kept.release(); dropped.release()
            >>> kept.leased, kept.mapping.closed, dropped.leased, dropped.mapping.closed
            (False, False, False, True)
        """
        self.leased = False
        if self.retired:
            self.close()

    def close(self) -> None:
        """Unmaps now, or, while a dying reply still holds the mapping, when it lets go.

        Example:
            >>> segment = Segment("unused", 4096, mmap.mmap(-1, 4096))
            >>> view = np.frombuffer(segment.mapping, np.uint8)
            >>> segment.close(); segment.mapping.closed  # a view still holds the mapping
            False
            >>> del view; segment.close(); segment.mapping.closed
            True
        """
        try:
            self.mapping.close()
        except BufferError:  # called from the reply's finalizer: the unmap follows it
            pass


@dataclass
class SlotSegments:
    """The caller's segments of one runner actor (a restarted actor gets new ones).

    Args:
        directory: Where files are created (None: nowhere, every reply takes Ray's path).
        hints: Per kind of request (``"sample"``, ...), the bytes its last reply needed.
        refused: The smallest size in bytes that could not be allocated (a small
            ``/dev/shm``): segments of that size or more are not tried again; ``inf`` until
            an allocation fails.

    Example:
        >>> slot = SlotSegments(directory=None)  # no shared memory: every reply takes Ray's path
        >>> slot.enabled, slot.request()
        (False, (None, None))
    """

    directory: str | None = SHM_DIR
    hints: dict[str, int] = field(default_factory=dict)
    enabled: bool = field(init=False)
    #: The smallest size that could not be allocated (a small ``/dev/shm``): not tried again.
    refused: float = math.inf
    _segments: list[Segment] = field(default_factory=list)
    _retired: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.enabled = self.directory is not None and os.access(self.directory, os.W_OK)
        if self.enabled:
            # A group dropped without stop() (a request in flight, an actor that never mapped
            # its segment) takes its names along, not at the caller's exit; the list is only
            # ever changed in place, so the finalizer sees every segment.
            weakref.finalize(self, _unlink_segments, self._segments)

    def request(self, kind: str = "sample") -> tuple[Request | None, Segment | None]:
        """A free segment that fits the last reply of this kind (created when none does).

        Returns:
            What to send with the request (None: nothing, the reply takes Ray's path) and the
            leased segment (None when there is none).

        Example:
            >>> slot = SlotSegments(hints={"sample": 1000})  # the last reply needed 1000 bytes
            >>> request, lease = slot.request()
            >>> request.size, request.path == lease.path, lease.leased  # whole MiB, with headroom
            (1048576, True, True)
            >>> slot.abandon(lease); slot.close()
        """
        if not self.enabled:
            return None, None
        retired, self._retired = tuple(self._retired), []
        hint = self.hints.get(kind, 0)
        if hint == 0:
            return Request(None, retired=retired), None
        free = [s for s in self._segments if not s.leased and s.size >= hint]
        if free:
            segment: Segment | None = min(free, key=lambda s: s.size)
        else:
            segment = self._create(hint)
        if segment is None:
            return Request(None, retired=retired), None
        segment.leased = True
        return Request(segment.path, segment.size, retired), segment

    def receive(self, reply: Any, segment: Segment | None, kind: str = "sample") -> Any:
        """The value of ``reply`` (unpickled over the segment when it was written there).

        Example:
            >>> slot, actor = SlotSegments(hints={"sample": 1024}), ActorSegments()
            >>> request, lease = slot.request()
            >>> value = slot.receive(actor.reply(np.arange(4), request), lease)
            >>> value.tolist(), lease.leased, slot.hints["sample"]
            ([0, 1, 2, 3], True, 64)
            >>> del value; lease.leased  # free once the reply's arrays are gone
            False
            >>> slot.receive("not a Reply", None), slot.close()
            ('not a Reply', None)
        """
        if not isinstance(reply, Reply):
            self.abandon(segment)
            return reply
        self.hints[kind] = reply.needed
        if segment is not None and reply.mapped and segment.linked:
            segment.linked = False
            _unlink(segment.path)
        if not reply.reachable:
            self.close()
        if reply.stream is None or segment is None:
            self.abandon(segment)
            self._trim()
            return reply.value
        total = max((offset + nbytes for offset, nbytes in reply.spans), default=0)
        # Every array unpickled below views ``anchor`` (numpy keeps views of views pointing at
        # the first array over a foreign buffer), so it dies with the last of them.
        anchor = np.frombuffer(segment.mapping, np.uint8, count=total)
        buffers = [anchor[offset : offset + nbytes] for offset, nbytes in reply.spans]
        weakref.finalize(anchor, segment.release)
        try:
            value = pickle.loads(reply.stream, buffers=buffers)
        finally:
            del anchor, buffers
        self._trim()
        return value

    def abandon(self, segment: Segment | None) -> None:
        """The request that leased ``segment`` failed or was dropped: it is free again.

        Example:
            >>> slot = SlotSegments(hints={"sample": 1024})
            >>> request, lease = slot.request()
            >>> slot.abandon(lease); lease.leased
            False
            >>> slot.request()[1] is lease  # it serves the next request
            True
            >>> slot.abandon(lease); slot.close()
        """
        if segment is not None:
            segment.release()

    def discard(self, segment: Segment | None) -> None:
        """The request that leased ``segment`` failed: it is dropped, its name removed.

        The actor may never have mapped it (it died first, or the request never started), so
        its name would stay in ``/dev/shm`` while it waited for reuse.

        Example:
            >>> slot = SlotSegments(hints={"sample": 1024})
            >>> request, lease = slot.request()
            >>> slot.discard(lease)
            >>> os.path.exists(lease.path), lease.mapping.closed
            (False, True)
            >>> request, fresh = slot.request()  # a new segment; the actor unmaps the old one
            >>> fresh is lease, request.retired == (lease.path,)
            (False, True)
            >>> slot.abandon(fresh); slot.close()
        """
        if segment is None:
            return
        segment.leased = False
        if segment in self._segments:
            self._segments.remove(segment)
        self._retire(segment)

    def close(self) -> None:
        """Drops every segment: free ones now, leased ones once their reply is gone.

        Example:
            >>> slot = SlotSegments(hints={"sample": 1024})
            >>> request, lease = slot.request()
            >>> slot.abandon(lease); slot.close()
            >>> slot.enabled, lease.mapping.closed, slot.request()
            (False, True, (None, None))
        """
        for segment in self._segments:
            self._retire(segment)
        self._segments.clear()
        self.enabled = False

    def _create(self, hint: int) -> Segment | None:
        assert self.directory is not None
        size = -(-int(hint * _GROWTH) // _ROUND) * _ROUND
        if size >= self.refused:
            return None
        path = os.path.join(self.directory, f"episodes-{os.getpid()}-{uuid.uuid4().hex}")
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        except OSError:
            self.enabled = False
            return None
        _linked.add(path)
        try:
            os.posix_fallocate(fd, 0, size)  # no space: an error now, not SIGBUS on a write
            flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
            mapping = mmap.mmap(fd, size, flags=flags, prot=mmap.PROT_READ)
        except OSError:
            _unlink(path)
            self.refused = min(self.refused, size)
            return None
        finally:
            os.close(fd)
        segment = Segment(path, size, mapping, leased=False)
        self._segments.append(segment)
        return segment

    def _trim(self) -> None:
        """Drops the free segments beyond the two largest (smaller ones fit fewer replies)."""
        keep: list[Segment] = []
        free = 0
        for segment in sorted(self._segments, key=lambda s: -s.size):
            if not segment.leased and free >= _KEEP_FREE:
                self._retire(segment)
                continue
            free += not segment.leased
            keep.append(segment)
        self._segments[:] = keep

    def _retire(self, segment: Segment) -> None:
        segment.retired = True
        if segment.linked:
            segment.linked = False
            _unlink(segment.path)
        self._retired.append(segment.path)
        if not segment.leased:
            segment.close()


class ActorSegments:
    """The actor's side: its mappings of the caller's segments, and writing replies.

    Example:
        >>> ActorSegments().reply(3, Request(None)).needed
        0
    """

    def __init__(self) -> None:
        self._mappings: dict[str, mmap.mmap] = {}

    def prepare(self, request: Request) -> None:
        """Maps the request's segment before the work that fills the reply, removing its name.

        Called when a request starts: a name left until the reply would stay in ``/dev/shm``
        for good if the caller died meanwhile (killed by SIGKILL, no exit handler runs).
        A segment that cannot be opened is left to :meth:`reply`, which reports it.

        Example:
            >>> slot, actor = SlotSegments(hints={"sample": 64}), ActorSegments()
            >>> request, lease = slot.request()
            >>> actor.prepare(request)  # the request starts: mapped, its name gone at once
            >>> os.path.exists(lease.path)
            False
            >>> value = slot.receive(actor.reply(np.arange(3), request), lease)
            >>> value.tolist(), lease.linked  # the caller's unlink finds nothing: harmless
            ([0, 1, 2], False)
            >>> del value; slot.close()
        """
        for path in request.retired:
            mapping = self._mappings.pop(path, None)
            if mapping is not None:
                try:
                    mapping.close()
                except BufferError:  # a view outlived a failed write: unmapped with it
                    pass
        if request.path is not None:
            try:
                self._map(request.path, request.size)
            except OSError:
                pass

    def reply(self, value: Any, request: Request) -> Reply:
        """``value`` written into the request's segment when it fits, else carried as is.

        Example:
            >>> slot, actor = SlotSegments(hints={"sample": 64}), ActorSegments()
            >>> request, lease = slot.request()
            >>> reply = actor.reply(np.zeros(8), request)
            >>> reply.mapped, reply.value is None, reply.spans  # written into the segment
            (True, True, ((0, 64),))
            >>> refused = actor.reply(lambda: 0, request)  # not plain-picklable: carried as is
            >>> refused.needed, refused.mapped  # the segment mapped all the same (its name goes)
            (0, True)
            >>> import ray
            >>> ref = ray.ObjectRef.nil()  # Ray's references take Ray's path, which counts them
            >>> actor.reply({"ref": ref, "x": np.zeros(8)}, request).value["ref"] is ref
            True
            >>> slot.abandon(lease); slot.close()
        """
        self.prepare(request)  # a no-op when the request's start already did it
        mapping, reachable = None, True
        if request.path is not None:
            try:
                # Mapped whatever the reply (no arrays, too large, refused by pickle): a mapped
                # segment's file name can go at once, and a name the actor never mapped would
                # stay in /dev/shm for the group's life (and after a driver killed by SIGKILL).
                mapping = self._map(request.path, request.size)
            except OSError:
                reachable = False
        mapped = mapping is not None
        buffers: list[pickle.PickleBuffer] = []
        try:
            stream = _dumps(value, buffers.append)
            raws = [buffer.raw() for buffer in buffers]
        except Exception:  # not plain-picklable (Ray's cloudpickle may manage) or odd buffers
            return Reply(value=value, mapped=mapped, reachable=reachable)
        spans, offset = [], 0
        for raw in raws:
            spans.append((offset, raw.nbytes))
            offset += -(-raw.nbytes // _ALIGN) * _ALIGN
        if mapping is None or not raws or offset > request.size:
            return Reply(value=value, needed=offset, mapped=mapped, reachable=reachable)
        target = np.frombuffer(mapping, np.uint8)
        try:
            for (start, nbytes), raw in zip(spans, raws):
                target[start : start + nbytes] = np.frombuffer(raw, np.uint8)
        finally:
            del target
        return Reply(stream=stream, spans=tuple(spans), needed=offset, mapped=True)

    def _map(self, path: str, size: int) -> mmap.mmap:
        mapping = self._mappings.get(path)
        if mapping is None:
            fd = os.open(path, os.O_RDWR)
            try:
                flags = mmap.MAP_SHARED | getattr(mmap, "MAP_POPULATE", 0)
                mapping = mmap.mmap(fd, size, flags=flags)
            finally:
                os.close(fd)
            self._mappings[path] = mapping
            try:
                os.unlink(path)  # mapped in both processes: the name is no longer needed
            except OSError:  # gone already, or not ours to remove: the caller removes it
                pass
        return mapping
