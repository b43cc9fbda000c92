"""Behaviour that hand-made mutants of ``episodes.distributed.shared_memory``,
``episodes.distributed.slots``, ``episodes.distributed.step_blocks``,
``episodes.distributed.continuations`` and ``episodes.distributed.rows`` showed no test pinned
(session 47).

Each test fails with a mutant (named beside it) applied, and passes on the code as it is. The
shared-memory segments are driven through ``SlotSegments`` and ``ActorSegments`` in this
process (they share files in ``/dev/shm`` as two processes do), the slot helpers through a
stand-in for the ``ray`` module, the step-column checks through ``check_same_columns`` and
``joined_type``, the continuations through ``piece_continuations`` and ``read_continuations``
on written datasets, and the rows through ``step_columns`` and ``nstep_columns``, each compared
with a plain reference. No Ray instance is started.
"""

from __future__ import annotations

import gc
import os
from typing import Any

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

pytest.importorskip("ray")  # the distributed package needs the ray extra

from episodes import SingleAgentEpisode  # noqa: E402
from episodes.distributed.continuations import Continuation, read_continuations  # noqa: E402
from episodes.distributed.metrics import GroupMetrics  # noqa: E402
from episodes.distributed.rows import episode_from_row, episode_row, nstep_columns, step_columns  # noqa: E402
from episodes.distributed.sample import RunnerSample  # noqa: E402
from episodes.distributed.shared_memory import SHM_DIR, ActorSegments, Request, SlotSegments  # noqa: E402
from episodes.distributed.slots import (  # noqa: E402
    Slot,
    abandon,
    apply_on_all,
    finished_slots,
    not_started,
    start_actors,
    stuck_replacements,
)
from episodes.distributed.step_blocks import (  # noqa: E402
    JoinedTypes,
    check_same_columns,
    join_types,
    joined_type,
)
from episodes.io import UnstorableValueError  # noqa: E402

# ---------------------------------------------------------------------------- step_blocks


def _part(episode: str, **columns: Any) -> dict[str, np.ndarray]:
    return {"episode_id": np.array([episode], object), **columns}


# (first chunk's columns, second chunk's columns): refused, the message naming this.
REFUSED_BLOCKS = {
    # sb01: the same names in another order are no one block (Arrow matches by position)
    "names-in-another-order": (
        _part("a", obs=np.zeros(1), reward=np.zeros(1)),
        {"reward": np.zeros(1), "episode_id": np.array(["b"], object), "obs": np.zeros(1)},
        "do not share step columns",
    ),
    # sb02: a column only one chunk has
    "one-more-column": (
        _part("a", obs=np.zeros(1)),
        _part("b", obs=np.zeros(1), extra=np.zeros(1)),
        "do not share step columns",
    ),
    # sb03: the types are checked at all
    "int64-beside-float32": (
        _part("a", obs=np.array([2**62])),
        _part("b", obs=np.array([0.5], np.float32)),
        "'obs': int64 rows of shape () in episode 'a', float32 rows of shape () in episode 'b'",
    ),
    # sb07 / sb15: rows of another shape (one block cannot stack them)
    "rows-of-another-shape": (
        _part("a", obs=np.zeros((1, 2))),
        _part("b", obs=np.zeros((1, 3))),
        "float64 rows of shape (2,) in episode 'a', float64 rows of shape (3,) in episode 'b'",
    ),
    "matrix-rows-of-another-shape": (
        _part("a", obs=np.zeros((1, 2, 2))),
        _part("b", obs=np.zeros((1, 2, 3))),
        "rows of shape (2, 2) in episode 'a'",
    ),
    # sb08: a float first, an int after (float64 would round big ints)
    "float32-then-int64": (
        _part("a", obs=np.array([0.5], np.float32)),
        _part("b", obs=np.array([2**62])),
        "float32 rows of shape () in episode 'a', int64 rows of shape () in episode 'b'",
    ),
    "bool-then-int": (
        _part("a", done=np.array([True])),
        _part("b", done=np.array([3])),
        "'done': bool rows",
    ),
    # sb10: uint64 first, a signed int after (float64)
    "uint64-then-int64": (
        _part("a", obs=np.array([2**63], np.uint64)),
        _part("b", obs=np.array([-1])),
        "uint64 rows of shape () in episode 'a'",
    ),
    # sb14: datetimes of other units are no kind that joins
    "datetimes-of-other-units": (
        _part("a", when=np.array(["2020-01-01"], "datetime64[s]")),
        _part("b", when=np.array(["2020-01-01"], "datetime64[ns]")),
        "'when': datetime64[s] rows",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED_BLOCKS))
def test_chunks_one_block_cannot_hold_are_refused_by_name(case):
    first, second, named = REFUSED_BLOCKS[case]
    with pytest.raises(ValueError, match="chunks 0-2 do not share") as err:
        check_same_columns([first, second], "chunks 0-2")
    assert named in str(err.value)


def test_the_refusal_names_the_chunk_that_decided_the_type_so_far():
    # sb04: the first chunk's episode, not a placeholder, decides the type when nothing widened
    # it; a later chunk that widened it names itself instead.
    a = _part("a", obs=np.array([1], np.int8))
    wider = _part("w", obs=np.array([1], np.int64))
    floats = _part("f", obs=np.array([0.5]))
    with pytest.raises(ValueError) as err:
        check_same_columns([a, floats], "chunks")
    assert "int8 rows of shape () in episode 'a'" in str(err.value)
    with pytest.raises(ValueError) as err:
        check_same_columns([a, wider, floats], "chunks")
    assert "int64 rows of shape () in episode 'w'" in str(err.value)


# (a's dtype, b's dtype, the joined dtype or None); rows of shape () each.
JOINED_TYPES = {
    "int8-int64": (np.int8, np.int64, np.int64),
    "uint8-int8": (np.uint8, np.int8, np.int16),  # sb12: unsigned and signed ints are one kind
    "int8-uint8": (np.int8, np.uint8, np.int16),
    "uint8-uint16": (np.uint8, np.uint16, np.uint16),
    "float32-float64": (np.float32, np.float64, np.float64),
    "int64-uint64": (np.int64, np.uint64, None),
    "uint64-int64": (np.uint64, np.int64, None),  # sb10
    "float32-int64": (np.float32, np.int64, None),  # sb08
    "int64-float32": (np.int64, np.float32, None),
    "bool-int8": (np.bool_, np.int8, None),  # sb12
    "int8-bool": (np.int8, np.bool_, None),
    "bool-bool": (np.bool_, np.bool_, np.bool_),
    "complex64-complex128": (np.complex64, np.complex128, np.complex128),
    "U1-U3": ("U1", "U3", np.dtype("U3")),
    "S1-U1": ("S1", "U1", None),
    "object-object": (object, object, np.dtype(object)),
    "datetime-same-unit": ("datetime64[s]", "datetime64[s]", np.dtype("datetime64[s]")),
    "datetime-other-units": ("datetime64[s]", "datetime64[ms]", None),  # sb14
}


@pytest.mark.parametrize("case", list(JOINED_TYPES))
def test_joined_type_follows_the_kinds_that_join_with_their_values(case):
    a, b, want = JOINED_TYPES[case]
    got = joined_type(np.zeros(2, a), np.zeros(2, b))
    assert got == (None if want is None else np.dtype(want))


def test_join_types_names_the_chunks_by_the_label_given():
    # sb18: a label given names the chunk instead of its episode
    joined: JoinedTypes = {}
    join_types(joined, _part("a", obs=np.array([1])), "chunks", label="chunk 3")
    with pytest.raises(ValueError) as err:
        join_types(joined, _part("b", obs=np.array([0.5])), "chunks", label="chunk 4")
    assert "int64 rows of shape () in chunk 3, float64 rows of shape () in chunk 4" in str(
        err.value
    )


# ------------------------------------------------------------------------- shared_memory

try:
    from ray import ObjectRef as _ObjectRef
except ImportError:  # pragma: no cover - Ray is installed with the test dependencies
    _ObjectRef = object  # type: ignore[assignment,misc]


class _SubRef(_ObjectRef):  # type: ignore[misc,valid-type]
    """A subclass of Ray's reference (importable, so plain pickle could write it)."""


needs_shm = pytest.mark.skipif(not os.access(SHM_DIR, os.W_OK), reason="no writable /dev/shm")
MIB = 1 << 20


def _aligned_spans(sizes: list[int]) -> tuple[tuple[tuple[int, int], ...], int]:
    """Each buffer at the next multiple of 64 bytes, and the bytes all of them take."""
    spans, offset = [], 0
    for size in sizes:
        spans.append((offset, size))
        offset += (size + 63) // 64 * 64
    return tuple(spans), offset


@needs_shm
@pytest.mark.parametrize("sizes", [[3, 100, 65], [64, 1, 128], [200]])
def test_reply_buffers_start_on_cache_lines(sizes):
    # sm01: every buffer starts at a multiple of 64 bytes, and needed counts the padding
    value = [np.full(size, i + 1, np.uint8) for i, size in enumerate(sizes)]
    spans, needed = _aligned_spans(sizes)
    assert ActorSegments().reply(value, Request(None)).needed == needed
    caller, actor = SlotSegments(hints={"sample": needed}), ActorSegments()
    try:
        request, lease = caller.request()
        reply = actor.reply(value, request)
        assert reply.spans == spans and reply.needed == needed
        got = caller.receive(reply, lease)
        assert [a.tolist() for a in got] == [a.tolist() for a in value]
        del got
    finally:
        caller.close()


@needs_shm
@pytest.mark.parametrize(
    "hint, size",
    [
        (1, MIB),
        (1000, MIB),
        (MIB * 4 // 5, MIB),
        (MIB * 4 // 5 + 1, MIB),
        (MIB * 4 // 5 + 2, 2 * MIB),
        (MIB, 2 * MIB),
        (3 * MIB, 4 * MIB),
    ],
)
def test_a_new_segment_is_the_hint_with_a_quarter_headroom_in_whole_mib(hint, size):
    # sm03: 1.25 x the last reply's bytes, rounded up to whole MiB
    caller = SlotSegments(hints={"sample": hint})
    try:
        request, lease = caller.request()
        assert request is not None and request.size == size == lease.size
        assert os.path.getsize(lease.path) == size
        caller.abandon(lease)
    finally:
        caller.close()


@needs_shm
def test_a_caller_dropped_without_close_removes_its_names():
    # sm06: the finalizer removes the names of the segments no actor mapped
    caller = SlotSegments(hints={"sample": 64})
    request, lease = caller.request()
    assert request is not None and lease is not None and os.path.exists(lease.path)
    path = lease.path
    caller.abandon(lease)
    del caller, request, lease
    gc.collect()
    assert not os.path.exists(path)


def _ray_references() -> dict[str, Any]:
    ray = pytest.importorskip("ray")
    return {"object-ref": ray.ObjectRef.nil(), "subclass": _SubRef.nil()}


@needs_shm
@pytest.mark.parametrize("kind", ["object-ref", "subclass"])
def test_replies_holding_rays_references_take_rays_path(kind):
    # sm08 / sm09: plain pickle would write the reference without Ray counting it
    ref = _ray_references()[kind]
    caller, actor = SlotSegments(hints={"sample": 64}), ActorSegments()
    try:
        request, lease = caller.request()
        reply = actor.reply({"ref": ref, "x": np.arange(8.0)}, request)
        assert reply.stream is None and reply.mapped and reply.value["ref"] is ref
        value = caller.receive(reply, lease)
        assert value["ref"] is ref and value["x"].tolist() == list(range(8))
        assert not lease.leased  # nothing of the reply lies in the segment
    finally:
        caller.close()


@needs_shm
def test_a_retired_segment_is_named_to_the_actor_once():
    # sm13: the next request names it; the ones after it do not
    caller = SlotSegments(hints={"sample": 64})
    try:
        request, lease = caller.request()
        dropped = lease.path
        caller.discard(lease)
        requests = []
        for _ in range(3):
            request, lease = caller.request()
            requests.append(request.retired)
            caller.abandon(lease)
        assert requests == [(dropped,), (), ()]
    finally:
        caller.close()


@pytest.fixture
def caller():
    segments = SlotSegments()
    yield segments
    segments.close()


@needs_shm
def test_a_free_segment_serves_every_hint_it_holds_the_smallest_first(caller):
    # sm16 / sm17 / sm19: a free segment is reused up to its size exactly, the smallest that fits
    caller.hints["sample"] = 1000
    small_request, small = caller.request()
    caller.hints["sample"] = 3 * MIB
    big_request, big = caller.request()
    assert (small.size, big.size) == (MIB, 4 * MIB)
    caller.abandon(small)
    caller.abandon(big)
    for hint, lease in [(1000, small), (MIB, small), (MIB + 1, big), (4 * MIB, big)]:
        caller.hints["sample"] = hint
        request, got = caller.request()
        assert got is lease and request.path == lease.path and request.size == lease.size
        caller.abandon(got)


@needs_shm
def test_a_leased_segment_serves_no_second_request(caller):
    # sm18 / sm21: each request in flight has a segment of its own
    caller.hints["sample"] = 1000
    leases = [caller.request()[1] for _ in range(3)]
    assert len({lease.path for lease in leases}) == 3 and all(lease.leased for lease in leases)
    for lease in leases:
        caller.abandon(lease)


@needs_shm
def test_the_next_segment_is_sized_by_the_last_reply_even_a_smaller_one(caller):
    # sm23: the hint follows the last reply down as well as up
    actor = ActorSegments()
    for size in [300_000, 10, 1000]:
        request, lease = caller.request()
        value = caller.receive(actor.reply([np.zeros(size), np.zeros(size)], request), lease)
        assert caller.hints["sample"] == _aligned_spans([8 * size, 8 * size])[1]
        del value


@needs_shm
@pytest.mark.parametrize("value", [np.zeros(MIB), 3, {"a": "no arrays"}])
def test_a_reply_that_takes_rays_path_leaves_its_segment_free(caller, value):
    # sm28 / sm56: too large, or nothing for the segment: carried as is, the lease given back
    caller.hints["sample"] = 1000
    request, lease = caller.request()
    actor = ActorSegments()
    reply = actor.reply(value, request)
    assert reply.stream is None and reply.mapped and reply.spans == ()
    got = caller.receive(reply, lease)
    assert got is value and not lease.leased
    caller.hints["sample"] = 1000
    again, reused = caller.request()
    assert reused is lease
    # sm10: given back, it stays mapped: the next reply goes through it
    got = caller.receive(actor.reply(np.arange(4), again), reused)
    assert got.tolist() == [0, 1, 2, 3] and reused.leased
    del got


@needs_shm
def test_a_reply_filling_its_segment_exactly_goes_through_it(caller):
    # sm55: a reply whose buffers take the whole segment is written there
    caller.hints["sample"] = 1000
    request, lease = caller.request()
    value = np.arange(MIB // 8, dtype=np.int64)  # 1 MiB
    reply = ActorSegments().reply(value, request)
    assert reply.stream is not None and reply.needed == MIB == lease.size
    got = caller.receive(reply, lease)
    assert np.array_equal(got, value) and lease.leased
    del got
    assert not lease.leased


@needs_shm
def test_a_discarded_segment_is_unmapped_and_never_served_again(caller):
    # sm33 / sm34: dropped from the slot, unmapped at once
    caller.hints["sample"] = 1000
    request, lease = caller.request()
    caller.discard(lease)
    assert lease.mapping.closed and not lease.leased and not os.path.exists(lease.path)
    for _ in range(2):
        request, fresh = caller.request()
        assert fresh is not lease and request.path != lease.path
        caller.abandon(fresh)


@needs_shm
def test_a_closed_slot_offers_no_segment_and_unmaps_its_free_ones(caller):
    # sm35 / sm36: close drops every segment and turns the slot to Ray's path
    caller.hints["sample"] = 1000
    request, lease = caller.request()
    caller.abandon(lease)
    caller.close()
    assert lease.mapping.closed and caller.request() == (None, None)
    assert caller.receive("as is", None) == "as is"


@needs_shm
def test_an_actor_maps_the_segment_and_removes_its_name_when_the_request_starts(caller):
    # sm50: prepare maps the segment and removes its name before any reply
    caller.hints["sample"] = 64
    request, lease = caller.request()
    assert os.path.exists(lease.path)
    actor = ActorSegments()
    actor.prepare(request)
    assert not os.path.exists(lease.path)
    value = caller.receive(actor.reply(np.arange(3), request), lease)
    assert value.tolist() == [0, 1, 2]
    del value


@needs_shm
def test_a_reply_on_rays_path_retires_the_free_segments_beyond_the_two_largest(caller):
    # sm29: every received reply trims the free segments, not only those read from one
    leases = []
    for hint in (1000, 3 * MIB, 5 * MIB):
        caller.hints["sample"] = hint
        leases.append(caller.request()[1])
    for lease in leases:
        caller.abandon(lease)
    assert caller.receive(ActorSegments().reply(3, Request(None)), None) == 3
    assert [lease.mapping.closed for lease in leases] == [True, False, False]
    request, none = caller.request()  # no hint now (the last reply needed no bytes)
    assert none is None and request.retired == (leases[0].path,)


@needs_shm
def test_a_leased_segment_is_never_trimmed(caller):
    # sm43: only free segments count against the two kept; a held reply keeps its own
    caller.hints["sample"] = 1000
    request, small = caller.request()
    larger = []
    for hint in (3 * MIB, 5 * MIB):
        caller.hints["sample"] = hint
        larger.append(caller.request()[1])
    for lease in larger:
        caller.abandon(lease)
    actor = ActorSegments()
    held = caller.receive(actor.reply(np.arange(5), request), small)
    del held
    assert not small.leased and not small.mapping.closed
    caller.hints["sample"] = 1000
    request, again = caller.request()
    assert again is small and request.retired == ()
    caller.abandon(again)


@needs_shm
def test_a_request_left_without_a_segment_still_names_the_retired_ones(caller, monkeypatch):
    # sm20: a segment that cannot be allocated does not swallow the retired names
    caller.hints["sample"] = 1000
    request, lease = caller.request()
    caller.discard(lease)

    def no_space(fd: int, offset: int, length: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", no_space)
    request, none = caller.request()
    assert none is None and request.path is None and request.retired == (lease.path,)


# --------------------------------------------------------------------------------- slots


class _Ref:
    """A request's reference: its value, or the error its ``ray.get`` raises."""

    def __init__(self, value: Any) -> None:
        self.value = value


class _FakeRay:
    """The parts of the ``ray`` module the slot helpers call."""

    def __init__(self, ready: set[Any] | None = None) -> None:
        self.ready = ready or set()
        self.waits: list[tuple[int, int, Any]] = []
        self.killed: list[Any] = []

    def get(self, ref: Any, timeout: Any = None) -> Any:
        if isinstance(ref.value, BaseException):
            raise ref.value
        return ref.value

    def wait(self, refs: list[Any], num_returns: int, timeout: Any) -> tuple[list, list]:
        self.waits.append((len(refs), num_returns, timeout))
        done = [r for r in refs if r in self.ready][:num_returns]
        return done, [r for r in refs if r not in done]


class _Answers:
    """An actor handle whose ``apply.remote`` answers ``answer`` (an error: raised by get)."""

    def __init__(self, answer: Any) -> None:
        self.apply = self
        self.answer = answer

    def remote(self, fn: Any, shared: Any) -> _Ref:
        return _Ref(self.answer)


def test_apply_on_all_raises_the_first_error_after_collecting_every_reply():
    # sl01: the first runner's error, not the last one's
    slots = [
        Slot(0, 0, _Answers("ok"), 1),
        Slot(1, 0, _Answers(KeyError("first")), 1),
        Slot(2, 0, _Answers(ValueError("second")), 1),
    ]
    with pytest.raises(KeyError, match="first"):
        apply_on_all(_FakeRay(), slots, lambda runner, context: None)
    assert apply_on_all(_FakeRay(), slots[:1], lambda r, c: None) == ["ok"]


class _Recording(_Answers):
    """Records the request each ``apply`` was sent with."""

    def __init__(self, answer: Any) -> None:
        super().__init__(answer)
        self.sent: list[Any] = []

    def remote(self, fn: Any, shared: Any) -> _Ref:
        self.sent.append(shared)
        return super().remote(fn, shared)


@needs_shm
def test_a_failed_apply_drops_its_segment_and_its_name():
    # sl02: the lease of a runner that raised is discarded (its name removed, a fresh one next)
    failing, answering = _Recording(RuntimeError("boom")), _Recording("ok")
    slots = [Slot(0, 0, answering, 1), Slot(1, 0, failing, 1)]
    for slot in slots:
        slot.segments = SlotSegments(hints={"apply": 64})
    try:
        with pytest.raises(RuntimeError, match="boom"):
            apply_on_all(_FakeRay(), slots, lambda runner, context: None)
        [dropped] = failing.sent
        assert dropped.path is not None and not os.path.exists(dropped.path)
        assert apply_on_all(_FakeRay(), slots[:1], lambda r, c: None) == ["ok"]
        with pytest.raises(RuntimeError):
            apply_on_all(_FakeRay(), slots[1:], lambda r, c: None)
        again = failing.sent[-1]
        assert again.path != dropped.path and dropped.path in again.retired
        # The runner that answered reuses its segment.
        assert answering.sent[0].path == answering.sent[1].path
    finally:
        for slot in slots:
            slot.segments.close()


@needs_shm
def test_an_interrupted_apply_drops_the_lease_it_waited_on_and_the_later_ones():
    # sl03: the lease of the runner whose reply the interrupt came in is given up too
    answers = [_Recording("ok"), _Recording(KeyboardInterrupt()), _Recording("late")]
    slots = [Slot(i, 0, handle, 1) for i, handle in enumerate(answers)]
    for slot in slots:
        slot.segments = SlotSegments(hints={"apply": 64})
    try:
        with pytest.raises(KeyboardInterrupt):
            apply_on_all(_FakeRay(), slots, lambda runner, context: None)
        paths = [handle.sent[0].path for handle in answers]
        assert [os.path.exists(path) for path in paths] == [True, False, False]
        for slot, path in zip(slots[1:], paths[1:]):
            request, lease = slot.segments.request("apply")
            assert request.path != path and path in request.retired
            slot.segments.abandon(lease)
    finally:
        for slot in slots:
            slot.segments.close()


class _SharedActor:
    """An actor handle whose ``apply`` answers as ``RunnerActor.apply`` does (shared memory)."""

    def __init__(self) -> None:
        self.apply = self
        self.segments = ActorSegments()
        self.sent: list[Any] = []

    def remote(self, fn: Any, shared: Any) -> _Ref:
        self.sent.append(shared)
        value = fn("runner", "context")
        return _Ref(value if shared is None else self.segments.reply(value, shared))


@needs_shm
def test_apply_replies_are_sized_apart_from_samples():
    # sl04 / sl05: apply requests are sized by the last apply reply, not the last sample
    actor = _SharedActor()
    slot = Slot(0, 0, actor, 1)
    slot.segments = SlotSegments(hints={"sample": 5 * MIB})
    try:
        for _ in range(3):
            [value] = apply_on_all(_FakeRay(), [slot], lambda runner, context: np.arange(100.0))
            assert value.tolist() == list(range(100))
            del value
        first, *later = actor.sent
        assert first.path is None  # no apply replied yet: Ray's path
        assert [(r.path is not None, r.size) for r in later] == [(True, MIB)] * 2
        assert slot.segments.hints == {"sample": 5 * MIB, "apply": 832}
    finally:
        slot.segments.close()


def _slot(index: int, **kw: Any) -> Slot:
    return Slot(index=index, generation=1, handle=None, num_envs=2, **kw)


# The slots, and which of their requests are ready.
FINISHED = {
    "one-ready-one-busy": ([_slot(0, ref="a"), _slot(1, ref="b"), _slot(2)], {"a"}),
    "two-ready": ([_slot(0, ref="a"), _slot(1, ref="b"), _slot(2, ref="c")], {"a", "c"}),
    "held-beside-busy": ([_slot(0, ref="a"), _slot(1, held="kept"), _slot(2, ref="b")], {"b"}),
    "held-only": ([_slot(0, held="kept"), _slot(1)], set()),
    "none-ready": ([_slot(0, ref="a")], set()),
}


@pytest.mark.parametrize("case", list(FINISHED))
def test_finished_slots_are_the_held_and_every_ready_one(case):
    # sl11 - sl14: held outcomes wait for nothing; every ready request is taken, in slot order
    slots, ready = FINISHED[case]
    fake = _FakeRay(ready)
    got = finished_slots(fake, slots, 7.0)
    assert [s.index for s in got] == [
        s.index for s in slots if s.held is not None or s.ref in ready
    ]
    held = any(s.held is not None for s in slots)
    busy = sum(s.ref is not None for s in slots)
    if busy:
        assert fake.waits[0] == (busy, 1, 0 if held else 7.0)


STUCK = {
    "started-and-waiting": (
        lambda: [_slot(0, started="s0", ref="r0"), _slot(1, started="s1", ref="r1")],
        {"s0"},
    ),
    "both-started": (
        lambda: [_slot(0, started="s0", ref="r0"), _slot(1, started="s1", ref="r1")],
        {"s0", "s1"},
    ),
    "idle-replacement": (lambda: [_slot(0, started="s0"), _slot(1, started="s1", ref="r1")], set()),
    "held-outcome": (lambda: [_slot(0, started="s0", ref="r0", held="kept"), _slot(1)], set()),
    "no-replacement": (lambda: [_slot(0, ref="r0")], set()),
}


@pytest.mark.parametrize("case", list(STUCK))
def test_stuck_replacements_are_the_waiting_ones_not_started(case):
    # sl06 - sl10: one wait for every replacement whose request waits; started ones forgotten
    make, ready = STUCK[case]
    slots = make()
    waiting = [s for s in slots if s.started is not None and s.ref is not None and s.held is None]
    starts, before = [s.started for s in waiting], [s.started for s in slots]
    fake = _FakeRay(ready)
    got = stuck_replacements(fake, slots, 3.0)
    assert [s.index for s in got] == [s.index for s, t in zip(waiting, starts) if t not in ready]
    assert fake.waits == ([(len(waiting), len(waiting), 3.0)] if waiting else [])
    assert [s.started for s in waiting] == [None if t in ready else t for t in starts]
    assert [s.started for s in slots if s not in waiting] == [
        t for s, t in zip(slots, before) if s not in waiting
    ]


def test_not_started_names_each_runner_with_its_generation():
    # sl22
    err = not_started([_slot(1), Slot(3, 4, None, 1)], 2.5, 0.5)
    assert str(err).startswith(
        "the replacement actors of runners 1 (generation 1), 3 (generation 4) did not start "
        "within 2.5 s: does the cluster have 0.5 CPUs free for each?"
    )


def _sample(steps: int) -> RunnerSample:
    episode = SingleAgentEpisode(
        "a",
        observations=[0] * (steps + 1),
        actions=[0] * steps,
        rewards=[1.0] * steps,
        len_lookback_buffer=0,
    )
    return RunnerSample(
        runner_index=0, generation=0, request=1, weights_version=-1, num_envs=1, episodes=[episode]
    )


# (the slot, lost samples, lost env steps)
ABANDONED = {
    "request-in-flight": (lambda: _slot(0, ref="r", num_steps=3), 1, 6),
    "idle": (lambda: _slot(0, num_steps=3), 0, 0),
    "sample-held": (lambda: _slot(0, held=_sample(5)), 1, 5),
    "error-held": (lambda: _slot(0, held=RuntimeError("lost already")), 0, 0),
    "both": (lambda: _slot(0, ref="r", num_steps=4, held=_sample(2)), 2, 10),
}


@pytest.mark.parametrize("case", list(ABANDONED))
def test_abandon_counts_what_a_stopping_group_leaves_uncollected(case):
    # sl15 - sl18 / sl23: in flight, steps x envs; a held sample its steps; a held error nothing
    make, samples, steps = ABANDONED[case]
    slot, metrics = make(), GroupMetrics()
    abandon(slot, metrics)
    assert (metrics.num_lost_samples, metrics.num_lost_env_steps) == (samples, steps)
    assert slot.held is None


class _StartError(Exception):
    pass


class _Timeout(_StartError):
    pass


class _StartingRay:
    """``ray.get`` raises ``error``; ``ray.kill`` is recorded."""

    class exceptions:  # noqa: N801 - ray.exceptions
        GetTimeoutError = _Timeout
        RayError = _StartError

    def __init__(self, error: BaseException) -> None:
        self.error, self.killed = error, []

    def get(self, refs: Any, timeout: Any = None) -> Any:
        raise self.error

    def kill(self, handle: Any) -> None:
        self.killed.append(handle)


class _Starting:
    class info:  # noqa: N801 - handle.info.remote()
        @staticmethod
        def remote() -> str:
            return "ref"


@pytest.mark.parametrize(
    "error, match",
    [
        (_Timeout(), "did not start within 5 s: does the cluster have 2 x 1.0 free CPUs"),
        (_StartError("no env"), "a runner actor failed to start: no env"),
    ],
)
def test_a_failed_start_kills_every_new_actor(error, match):
    # sl19 / sl21
    fake, handles = _StartingRay(error), [_Starting(), _Starting()]
    with pytest.raises(RuntimeError, match=match):
        start_actors(fake, handles, 5, "2 x 1.0")
    assert fake.killed == handles


# ---------------------------------------------------------------------------------- rows


def _episode(
    n: int,
    *,
    obs: Any = None,
    rewards: list[float] | None = None,
    extras: dict[str, Any] | None = None,
    **kw: Any,
) -> Any:
    return SingleAgentEpisode(
        "e",
        observations=list(np.arange(n + 1, dtype=np.float64)) if obs is None else obs,
        actions=list(range(n)),
        rewards=[float(2**i) for i in range(n)] if rewards is None else rewards,
        extra_model_outputs=extras or {},
        len_lookback_buffer=0,
        **kw,
    ).to_numpy()


def test_nested_observations_get_one_column_per_leaf_from_zero():
    # ro01: obs.0, obs.1 in flatten order
    obs = [{"a": float(t), "b": (t, -t)} for t in range(3)]
    cols = step_columns(_episode(2, obs=obs))
    assert [c for c in cols if "obs" in c] == [
        "obs.0",
        "obs.1",
        "obs.2",
        "next_obs.0",
        "next_obs.1",
        "next_obs.2",
    ]
    assert cols["obs.0"].tolist() == [0.0, 1.0] and cols["next_obs.2"].tolist() == [-1, -2]


def test_two_extra_outputs_filling_one_column_are_refused_naming_both():
    # ro02 / ro03: a nested "h" and an "h.0" would both fill extra.h.0
    extras = {"h": [(0.0, 1.0), (2.0, 3.0)], "h.0": [5.0, 6.0]}
    with pytest.raises(ValueError) as err:
        step_columns(_episode(2, extras=extras))
    assert "the extra model outputs 'h' and 'h.0' would both fill the column 'extra.h.0'" in str(
        err.value
    )


def _reference_nstep(
    rewards: list[float], n_step: int, gamma: float, ends: tuple[bool, bool], after: Any
) -> dict[str, list[Any]]:
    """Step by step: observations are 0, 1, 2, ... through the chunk and the steps after it."""
    n, joined, (term, trunc) = len(rewards), list(rewards), ends
    if after is not None:
        more = list(after["rewards"])
        used = min(n_step - 1, len(more))
        joined += more[:used]
        last = used == len(more)  # the episode's end lies after the last step joined
        term, trunc = after["terminated"] and last, after["truncated"] and last
    size, out = len(joined), {k: [] for k in ("reward", "next_obs", "discount", "n_steps")}
    out.update(terminated=[], truncated=[])
    for k in range(n):
        m = min(n_step, size - k)
        total = 0.0
        for j in range(m):
            total += gamma**j * joined[k + j]
        out["reward"].append(total)
        out["next_obs"].append(float(k + m))
        out["discount"].append(gamma**m)
        out["n_steps"].append(m)
        out["terminated"].append(k + m == size and term)
        out["truncated"].append(k + m == size and trunc)
    return out


@settings(max_examples=60, deadline=None)
@example(rewards=[1.0], more=[2.0], n_step=1, gamma=0.5, end=(True, False), nested=False)  # ro32
@given(
    rewards=st.lists(st.integers(-8, 8).map(float), min_size=1, max_size=5),
    more=st.none() | st.lists(st.integers(-8, 8).map(float), max_size=5),
    n_step=st.integers(1, 5),
    gamma=st.sampled_from([0.0, 0.5, 1.0]),
    end=st.sampled_from([(False, False), (True, False), (False, True)]),
    nested=st.booleans(),
)
def test_nstep_columns_match_a_step_by_step_reference(rewards, more, n_step, gamma, end, nested):
    # ro10-ro40: horizons, discounts, next observations and end flags, with steps after or not
    n = len(rewards)
    obs = [float(i) for i in range(n + 1)]
    after = None
    if more is not None:
        nxt = np.arange(n, n + len(more) + 1, dtype=np.float64)
        after = {
            "observations": {"x": nxt, "y": -nxt} if nested else nxt,
            "rewards": more,
            "terminated": end[0],
            "truncated": end[1],
        }
    chunk = _episode(n, obs=[{"x": o, "y": -o} for o in obs] if nested else obs, rewards=rewards)
    cols = nstep_columns(chunk, n_step, gamma, ends=(False, False) if after else end, after=after)
    want = _reference_nstep(rewards, n_step, gamma, (False, False) if after else end, after)
    got = {k: cols[k].tolist() for k in want if k != "next_obs"}
    got["next_obs"] = cols["next_obs.0" if nested else "next_obs"].tolist()
    assert got == want
    if nested:
        assert cols["next_obs.1"].tolist() == [-o for o in want["next_obs"]]


# (rewards stored, the reward column or None where refused)
REWARD_COLUMNS = {
    "int64-at-2**53": (np.array([2**53, -(2**53), 3]), [2.0**53, -(2.0**53), 3.0]),  # ro41/42
    "int64-past-2**53": (np.array([2**53 + 1]), None),  # ro63
    "int64-below-minus-2**53": (np.array([0, -(2**53) - 1]), None),  # ro43
    "uint64-past-2**53": (np.array([2**60], np.uint64), None),
    "python-ints-past-int64": (np.array([2**70, 1], object), None),  # ro44
    "negative-python-int-past-2**53": (np.array([-(2**70), 1], object), None),  # ro46
    "python-ints-at-2**53": (np.array([-(2**53), 2], object), [-(2.0**53), 2.0]),
    "bools": (np.array([True, False]), [1.0, 0.0]),
}


@pytest.mark.parametrize("case", list(REWARD_COLUMNS))
def test_the_reward_column_is_float64_and_refuses_ints_it_would_round(case):
    rewards, want = REWARD_COLUMNS[case]
    chunk = _episode(len(rewards), rewards=list(rewards))
    if want is None:
        with pytest.raises(UnstorableValueError, match="int rewards beyond 2\\*\\*53"):
            step_columns(chunk)
    else:
        column = step_columns(chunk)["reward"]
        assert column.dtype == np.float64 and column.tolist() == want


INT64_MAX, INT64_MIN = 2**63 - 1, -(2**63)


# (t_started, steps, the t column or None where refused)
TIME_COLUMNS = {
    "last-step-at-int64-max": (INT64_MAX - 2, 3, [INT64_MAX - 2, INT64_MAX - 1, INT64_MAX]),
    "one-past-int64-max": (INT64_MAX - 1, 3, None),  # ro47
    "first-step-at-int64-min": (INT64_MIN, 2, [INT64_MIN, INT64_MIN + 1]),  # ro48
    "below-int64-min": (INT64_MIN - 1, 1, None),
    "no-steps-past-int64": (2**70, 0, []),  # ro49 / ro50: an empty column, no refusal
}


@pytest.mark.parametrize("case", list(TIME_COLUMNS))
def test_the_t_column_holds_every_int64_time_and_refuses_the_others(case):
    t_started, n, want = TIME_COLUMNS[case]
    chunk = _episode(n, t_started=t_started)
    if want is None:
        with pytest.raises(UnstorableValueError, match="do not fit the int64 t column"):
            step_columns(chunk)
    else:
        column = step_columns(chunk)["t"]
        assert column.dtype == np.int64 and column.tolist() == want


# (the chunk's own flags, ends given, the terminated and truncated columns or None: refused)
END_FLAGS = {
    "own-truncation": ({"truncated": True}, None, ([False, False], [False, True])),  # ro53
    "own-termination": ({"terminated": True}, None, ([False, True], [False, False])),
    "ends-terminated": ({}, (True, False), ([False, True], [False, False])),  # ro52
    "ends-truncated": ({}, (False, True), ([False, False], [False, True])),
    "ends-as-an-array": ({}, np.array([False, True]), ([False, False], [False, True])),  # ro62
    "ends-as-a-list": ({}, [True, False], ([False, True], [False, False])),
    "ends-of-three": ({}, (True, False, False), None),  # ro51
    "ends-of-one": ({}, (True,), None),
    "ends-of-ints": ({}, (1, 0), None),
}


@pytest.mark.parametrize("case", list(END_FLAGS))
def test_end_flags_mark_the_last_step_as_the_chunk_or_ends_says(case):
    flags, ends, want = END_FLAGS[case]
    chunk = _episode(2, **flags)
    if want is None:
        with pytest.raises(ValueError, match="ends must be a"):
            step_columns(chunk, ends=ends)
        return
    for cols in (step_columns(chunk, ends=ends), nstep_columns(chunk, 1, 0.5, ends=ends)):
        assert (cols["terminated"].tolist(), cols["truncated"].tolist()) == want


def test_step_columns_match_the_chunk_step_by_step():
    # ro04 / ro05 / ro59 / ro60: obs o_t, next_obs o_{t+1}, one row per step, lookback left out
    obs = [{"a": float(t), "b": (t, 10 * t)} for t in range(6)]
    chunk = SingleAgentEpisode(
        "x",
        observations=obs,
        actions=[7, 8, 9, 6, 5],
        rewards=[1, 2, 3, 4, 5],
        extra_model_outputs={"logp": [-1.0, -2.0, -3.0, -4.0, -5.0]},
        len_lookback_buffer=2,
        t_started=2,
    ).to_numpy()
    cols = step_columns(chunk)
    steps = range(3)  # after the two lookback steps
    assert cols["obs.0"].tolist() == [float(t + 2) for t in steps]
    assert cols["next_obs.0"].tolist() == [float(t + 3) for t in steps]
    assert cols["obs.2"].tolist() == [10 * (t + 2) for t in steps]
    assert cols["next_obs.2"].tolist() == [10 * (t + 3) for t in steps]
    assert cols["action"].tolist() == [9, 6, 5] and cols["reward"].tolist() == [3.0, 4.0, 5.0]
    assert cols["t"].tolist() == [2, 3, 4] and cols["extra.logp"].tolist() == [-3.0, -4.0, -5.0]
    assert cols["episode_id"].tolist() == ["x"] * 3
    flat = SingleAgentEpisode(
        "y",
        observations=[0.0, 1.0, 2.0, 3.0],
        actions=[0, 1, 2],
        rewards=[0.0] * 3,
        len_lookback_buffer=1,
    ).to_numpy()
    cols = step_columns(flat)
    assert cols["obs"].tolist() == [1.0, 2.0] and cols["next_obs"].tolist() == [2.0, 3.0]


EPISODE_ROWS = {
    "running": (dict(t_started=5), (5, 2, False, False)),  # ro54 / ro55
    "terminated": (dict(terminated=True), (0, 2, True, False)),
    "truncated": (dict(truncated=True, t_started=3), (3, 2, False, True)),  # ro56
}


@pytest.mark.parametrize("case", list(EPISODE_ROWS))
def test_an_episode_row_summarises_the_episode_it_carries(case):
    kw, (t_started, length, terminated, truncated) = EPISODE_ROWS[case]
    episode = _episode(2, **kw)
    row = episode_row(episode)
    assert row == {
        "id": "e",
        "t_started": t_started,
        "length": length,
        "return": 3.0,
        "terminated": terminated,
        "truncated": truncated,
        "episode": episode,
    }
    assert episode_from_row(row) is episode


@pytest.mark.parametrize("row", [{}, {"episode": "e"}, None, ["episode"]])
def test_a_row_without_an_episode_is_refused_by_type(row):
    # ro57: no entry, or no ``get``, is the same TypeError
    with pytest.raises(TypeError, match="an episode row needs an 'episode' column"):
        episode_from_row(row)


# (chunk flags, after, the refusal's words)
REFUSED_AFTER = {
    "no-rewards": ({}, {"observations": np.array([2.0, 3.0])}, "must be a dict"),  # ro23
    "one-flag-no-bool": (
        {},
        {
            "observations": np.array([2.0, 3.0]),
            "rewards": [1.0],
            "terminated": True,
            "truncated": 1,
        },
        "must be bools",
    ),  # ro25
    "scalar-rewards": (
        {},
        {"observations": np.array([2.0, 3.0]), "rewards": 1.0},
        "one more observation",
    ),  # ro28
    "vector-rewards-after-scalar-ones": (
        {},
        {"observations": np.array([2.0, 3.0]), "rewards": [[1.0, 2.0]]},
        "rewards of shape \\(2,\\) differ from the chunk's",
    ),  # ro34
    "nested-after-a-flat-chunk": (
        {},
        {"observations": {"x": np.array([2.0, 3.0])}, "rewards": [1.0]},
        "observations do not fit the chunk's",
    ),  # ro27
    "as-many-observations-as-rewards": (
        {},
        {"observations": np.array([2.0]), "rewards": [1.0]},
        "one more observation",
    ),  # ro29
    "after-a-truncated-chunk": (
        {"truncated": True},
        {"observations": np.array([2.0, 3.0]), "rewards": [1.0]},
        "ended the episode",
    ),  # ro11 / ro26
    "after-a-terminated-chunk": (
        {"terminated": True},
        {"observations": np.array([2.0, 3.0]), "rewards": [1.0]},
        "ended the episode",
    ),
}


@pytest.mark.parametrize("case", list(REFUSED_AFTER))
def test_steps_after_that_cannot_continue_the_chunk_are_refused(case):
    flags, after, words = REFUSED_AFTER[case]
    with pytest.raises(ValueError, match=words):
        nstep_columns(_episode(2, **flags), 2, 0.5, after=after)


# ------------------------------------------------------------------------- continuations


def _pieces(lengths: list[int], end: str | None, nested: bool = False) -> list[Any]:
    """One episode cut into pieces of ``lengths`` steps; observations 0, 1, 2, ..."""

    def obs(t: int) -> Any:
        return {"x": float(t), "y": -float(t)} if nested else float(t)

    episode = SingleAgentEpisode("p", observations=[obs(0)], len_lookback_buffer=0)
    pieces, t = [], 0
    for i, length in enumerate(lengths):
        final = i == len(lengths) - 1
        for step in range(length):
            t += 1
            ends = final and step == length - 1
            episode.add_env_step(
                obs(t), 0, float(t),
                terminated=ends and end == "terminated", truncated=ends and end == "truncated",
            )  # fmt: skip
        pieces.append(episode)
        if not final:
            episode = episode.cut()
    return [piece.to_numpy() for piece in pieces]


@pytest.mark.parametrize("start, nested", [(0, False), (3, False), (0, True)])
def test_continuing_chunks_of_the_read_task_are_not_read_again(start, nested):
    # co18 / co27 / co31: pieces among the task's chunks come from them (the path is never
    # opened); each piece after the first adds its observations from its second on
    chunks = _pieces([2, 1, 3], "terminated", nested)
    follows = {start: Continuation(((start + 1, 1), (start + 2, 1)), False, False),
               start + 1: Continuation(((start + 2, 2),), False, False)}  # fmt: skip
    got = read_continuations("no dataset here", start, chunks, follows)
    assert got[2] is None
    for after, obs, rewards in [(got[0], [2.0, 3.0, 4.0], [3.0, 4.0]),
                                (got[1], [3.0, 4.0, 5.0], [4.0, 5.0])]:  # fmt: skip
        if nested:
            assert after["observations"]["x"].tolist() == obs
            assert after["observations"]["y"].tolist() == [-o for o in obs]
        else:
            assert after["observations"].tolist() == obs
        assert after["rewards"].tolist() == rewards
        assert (after["terminated"], after["truncated"]) == (False, False)
