"""Replies through shared-memory segments: fallbacks, reuse, and no reply ever overwritten.

The two sides run in this process here (the caller's ``SlotSegments`` and the actor's
``ActorSegments`` share files in ``/dev/shm`` exactly as two processes do); the group tests
at the end run them across Ray actors.
"""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("ray")

from episodes.distributed.shared_memory import (  # noqa: E402
    SHM_DIR,
    ActorSegments,
    Reply,
    Request,
    SlotSegments,
)

pytestmark = pytest.mark.skipif(not os.access(SHM_DIR, os.W_OK), reason="no writable /dev/shm")


def payload(seed: int, size: int = 1000) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {
        "obs": rng.normal(size=(size, 3)).astype(np.float32),
        "actions": rng.integers(0, 5, size),
        "flags": rng.random(size) < 0.5,
    }


def equal(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> bool:
    return a.keys() == b.keys() and all(
        a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]) for k in a
    )


def roundtrip(caller: SlotSegments, actor: ActorSegments, value: object) -> tuple[object, Reply]:
    request, lease = caller.request()
    assert request is not None
    reply = actor.reply(value, request)
    return caller.receive(reply, lease), reply


@pytest.fixture
def sides():
    caller, actor = SlotSegments(), ActorSegments()
    yield caller, actor
    caller.close()


def test_the_first_reply_takes_rays_path_and_sizes_the_next_segment(sides):
    caller, actor = sides
    value, reply = roundtrip(caller, actor, payload(0))
    assert reply.stream is None and reply.value is not None and reply.needed > 0
    assert equal(value, payload(0))
    value, reply = roundtrip(caller, actor, payload(1))
    assert reply.value is None and reply.stream is not None and reply.mapped
    assert equal(value, payload(1))
    # Arrays view the caller's read-only mapping.
    assert not value["obs"].flags.writeable and not value["obs"].flags.owndata


def test_a_dropped_reply_frees_its_segment_for_the_next_request(sides):
    caller, actor = sides
    roundtrip(caller, actor, payload(0))
    first, _ = roundtrip(caller, actor, payload(1))
    held = caller._segments[0]
    assert held.leased
    del first
    gc.collect()
    assert not held.leased
    again, _ = roundtrip(caller, actor, payload(2))
    assert caller._segments == [held] and held.leased and equal(again, payload(2))


def test_a_held_reply_is_never_overwritten_by_later_ones(sides):
    caller, actor = sides
    roundtrip(caller, actor, payload(0))
    kept = roundtrip(caller, actor, payload(1))[0]
    for seed in range(2, 6):
        later, _ = roundtrip(caller, actor, payload(seed))
        assert equal(later, payload(seed))
        assert equal(kept, payload(1))
        del later
    # One segment held, one recycled by the replies dropped in the loop.
    assert len(caller._segments) == 2


def test_a_view_of_one_array_keeps_the_whole_segment_leased(sides):
    caller, actor = sides
    roundtrip(caller, actor, payload(0))
    value, _ = roundtrip(caller, actor, payload(1))
    column = value["obs"][10:20, 1]
    expected = column.copy()
    del value
    gc.collect()
    assert caller._segments[0].leased
    roundtrip(caller, actor, payload(9))
    assert np.array_equal(column, expected)


def test_a_larger_reply_falls_back_then_gets_a_larger_segment(sides):
    caller, actor = sides
    roundtrip(caller, actor, payload(0, size=100))
    big = payload(1, size=400_000)  # beyond the first segment (1 MiB)
    value, reply = roundtrip(caller, actor, big)
    assert reply.stream is None and equal(value, big)
    del value
    value, reply = roundtrip(caller, actor, big)
    assert reply.stream is not None and equal(value, big)
    assert any(s.leased and s.size >= reply.needed for s in caller._segments)


def test_files_are_removed_once_the_actor_mapped_them(sides):
    caller, actor = sides
    roundtrip(caller, actor, payload(0))
    request, lease = caller.request()
    assert request is not None and lease is not None and os.path.exists(lease.path)
    caller.receive(actor.reply(payload(1), request), lease)
    assert not os.path.exists(lease.path)


def test_a_segment_too_small_for_the_reply_is_unlinked_all_the_same(sides):
    """The actor maps an offered segment even when the reply goes through Ray: a name it never
    mapped would stay in /dev/shm for the group's life, and after a SIGKILLed driver."""
    caller, actor = sides
    roundtrip(caller, actor, payload(0, size=100))
    request, lease = caller.request()
    reply = actor.reply(payload(1, size=400_000), request)  # beyond the offered segment
    assert reply.stream is None and reply.mapped
    caller.receive(reply, lease)
    assert not os.path.exists(lease.path)


@pytest.mark.parametrize("value", [42, lambda: 42], ids=["no arrays", "refused by pickle"])
def test_a_segment_a_reply_leaves_unused_is_unlinked_all_the_same(value):
    """A reply without arrays, or one plain pickle refuses, still maps the offered segment, so
    its name goes: nothing is left in /dev/shm when the caller dies."""
    caller, actor = SlotSegments(), ActorSegments()
    try:
        roundtrip(caller, actor, payload(0))  # sizes the next request's segment
        request, lease = caller.request()
        assert request is not None and lease is not None and os.path.exists(lease.path)
        reply = actor.reply(value, request)
        assert reply.stream is None and reply.mapped and reply.reachable
        received = caller.receive(reply, lease)
        assert (received() if callable(received) else received) == 42
        assert not os.path.exists(lease.path) and not lease.leased
    finally:
        caller.close()


def test_an_actor_that_cannot_open_the_segment_turns_the_slot_to_rays_path(sides):
    caller, actor = sides
    roundtrip(caller, actor, payload(0))
    request, lease = caller.request()
    assert request is not None and lease is not None
    elsewhere = Request(request.path + "-on-another-node", request.size)
    reply = actor.reply(payload(1), elsewhere)
    assert not reply.reachable
    assert equal(caller.receive(reply, lease), payload(1))
    assert caller.request() == (None, None) and not caller._segments


def test_values_plain_pickle_cannot_handle_travel_as_they_are(sides):
    caller, actor = sides
    roundtrip(caller, actor, payload(0))
    value, reply = roundtrip(caller, actor, lambda: 3)
    assert reply.value is not None and value() == 3


def test_disabled_slots_send_nothing():
    caller = SlotSegments(None)
    assert caller.request() == (None, None)
    assert caller.receive(5, None) == 5


def test_free_segments_beyond_two_are_retired_and_unmapped_by_the_actor(sides):
    caller, actor = sides
    roundtrip(caller, actor, payload(0))
    held = [roundtrip(caller, actor, payload(seed))[0] for seed in range(1, 5)]
    paths = {s.path for s in caller._segments}
    assert len(paths) == 4
    del held
    roundtrip(caller, actor, payload(5))  # one leased while it is received, two kept free
    assert len(caller._segments) == 3
    (old,) = paths - {s.path for s in caller._segments}
    request, _ = caller.request()
    assert request is not None and old in request.retired
    actor.reply(payload(6), request)
    assert old not in actor._mappings


def test_kinds_of_request_are_sized_apart(sides):
    caller, actor = sides
    big, small = payload(0, size=300_000), payload(1, size=10)
    for _ in range(3):
        request, lease = caller.request("sample")
        assert request is not None
        value = caller.receive(actor.reply(big, request), lease, "sample")
        assert equal(value, big)
        request, lease = caller.request("apply")
        assert request is not None
        assert equal(caller.receive(actor.reply(small, request), lease, "apply"), small)
        del value
    # After the first of each kind, every reply came through a segment of its own size.
    assert caller.hints["sample"] > 1 << 20 > caller.hints["apply"]


@settings(max_examples=30, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(1, 3000), st.booleans(), st.integers(0, 3)), min_size=1, max_size=12
    )
)
def test_every_held_reply_keeps_what_was_sent(steps):
    """Random sizes, random replies held or dropped: held ones never change."""
    caller, actor = SlotSegments(), ActorSegments()
    held: list[tuple[int, int, dict[str, np.ndarray]]] = []
    try:
        for seed, (size, keep, drop) in enumerate(steps):
            value, _ = roundtrip(caller, actor, payload(seed, size))
            if keep:
                held.append((seed, size, value))  # type: ignore[arg-type]
            del value
            del held[: min(drop, len(held))]  # freed at once: replies hold no cycles
            assert all(equal(v, payload(s, n)) for s, n, v in held)
        assert sum(s.leased for s in caller._segments) <= len(held)
    finally:
        caller.close()


def test_a_full_shm_falls_back_to_rays_path(sides, monkeypatch):
    caller, actor = sides
    roundtrip(caller, actor, payload(0))

    def no_space(fd: int, offset: int, length: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "posix_fallocate", no_space)
    value, reply = roundtrip(caller, actor, payload(1))
    assert reply.stream is None and equal(value, payload(1))
    # A size that did not fit is not tried again (each try costs an allocation).
    monkeypatch.setattr(os, "posix_fallocate", lambda *args: pytest.fail("tried again"))
    value, reply = roundtrip(caller, actor, payload(2))
    assert reply.stream is None and equal(value, payload(2))
    mine = f"episodes-{os.getpid()}-"
    assert not caller._segments and not [p for p in os.listdir(SHM_DIR) if p.startswith(mine)]


def test_an_abandoned_lease_is_free_again(sides):
    caller, actor = sides
    roundtrip(caller, actor, payload(0))
    request, lease = caller.request()  # the request fails before its reply arrives
    assert request is not None and lease is not None and lease.leased
    caller.abandon(lease)
    assert not lease.leased
    assert caller.request()[1] is lease
    caller.abandon(None)  # nothing leased: nothing to do
