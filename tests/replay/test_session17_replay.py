"""Session 17 replay fixes: zero priorities, layout sizes, restorable generators, unsaved ids.

1. ``update_priorities`` took no priority of 0 (a TD error of 0, common in DQN); it is stored
   as 1e-12, RLlib's floor, and a string where the indices go (RLlib's ``module_id``) is a
   ``ValueError`` saying so.
2. ``set_state`` of a state whose ``layout['size']`` or ``layout['end']`` was absurd allocated
   it first (a ``MemoryError``), where a broken state is a ``ValueError``.
3. The n-step window flags at a truncation (every window ending there is ``truncated``) and
   the RLlib keywords refused (a ``TypeError``) are pinned here too.
4. A buffer seeded with a generator over a bit generator subclass sampled, but could neither
   restore its own state nor load its save: refused up front now.
5. ``save``'s error for an unstorable id named neither the id nor its episode.
"""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from episodes import SingleAgentEpisode
from episodes.io import EpisodeWriter, UnstorableValueError
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer

from ._episodes import chunk, make_episode_data
from .reference import assert_states_equal

CLASSES = [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer]


def _episode(id_, length, **flags):
    return SingleAgentEpisode(
        id_,
        observations=[np.full(2, t, np.float32) for t in range(length + 1)],
        actions=[0] * length,
        rewards=[1.0] * length,
        len_lookback_buffer=0,
        **flags,
    )


def _prioritized(alpha=0.6):
    buf = PrioritizedEpisodeReplayBuffer(100, alpha=alpha, seed=0)
    buf.add(_episode("a", 6, terminated=True))
    buf.sample(4)
    return buf


# ------------------------------------------------------------------ 1: zero priorities
@pytest.mark.parametrize(
    ("name", "alpha", "given", "stored"),
    [
        ("a TD error of 0", 0.6, [0.0, 1.0, 2.0], [1e-12, 1.0, 2.0]),
        ("minus zero", 0.6, [-0.0, 1.0, 2.0], [1e-12, 1.0, 2.0]),
        ("all zero", 1.0, [0.0, 0.0, 0.0], [1e-12] * 3),
        ("alpha 0", 0.0, [0.0, 3.0, 1.0], [1e-12, 3.0, 1.0]),
        ("a tiny positive one is raised too", 1.0, [0.0, 1e-13, 1.0], [1e-12, 1e-12, 1.0]),
        ("integers", 0.6, np.array([0, 2, 5]), [1e-12, 2.0, 5.0]),
    ],
)
def test_a_zero_priority_is_stored_as_the_floor(name, alpha, given, stored):
    buf = _prioritized(alpha)
    top = buf.max_priority
    buf.update_priorities(given, [0, 1, 2])
    assert buf.get_priorities([0, 1, 2]).tolist() == stored
    leaves = buf.get_state()["prioritized"]["leaves"][:3]
    np.testing.assert_allclose(leaves, np.array(stored) ** alpha, rtol=1e-12)
    assert (leaves > 0).all()  # still drawable
    assert buf.max_priority == max(top, *stored)
    batch = buf.sample(256, beta=1.0)
    assert np.isfinite(batch["weights"]).all() and (batch["weights"] <= 1.0).all()


def test_a_zero_priority_does_not_touch_the_callers_array():
    buf = _prioritized()
    given = np.array([0.0, 1.0])
    buf.update_priorities(given, [0, 1])
    assert given.tolist() == [0.0, 1.0]


def test_a_zero_priority_item_is_drawn_rarely_but_can_be():
    buf = PrioritizedEpisodeReplayBuffer(10, alpha=1.0, seed=0)
    buf.add(_episode("a", 2, terminated=True))
    buf.update_priorities([0.0, 1e-12], [0, 1])  # both at the floor: drawn alike
    drawn = buf.sample(2000)["indices"]
    assert set(drawn.tolist()) == {0, 1}


def test_zero_priorities_survive_state_and_save(tmp_path):
    buf = _prioritized()
    buf.update_priorities([0.0, 2.0], [0, 1])
    back = PrioritizedEpisodeReplayBuffer(5)
    back.set_state(buf.get_state())
    assert back.get_priorities([0, 1]).tolist() == [1e-12, 2.0]
    buf.save(tmp_path / "b")
    loaded = EpisodeReplayBuffer.load(tmp_path / "b")
    assert loaded.get_priorities([0, 1]).tolist() == [1e-12, 2.0]


@pytest.mark.parametrize(
    ("name", "priorities", "indices", "match"),
    [
        ("negative", [-1.0], [0], ">= 0"),
        ("tiny negative", [-1e-300], [0], ">= 0"),
        ("NaN", [float("nan")], [0], ">= 0"),
        ("infinite", [float("inf")], [0], ">= 0"),
        ("zero beside a negative", [0.0, -1.0], [0, 1], ">= 0"),
        ("RLlib's module id", [1.0] * 4, "default_policy", "module_id"),
        ("a module id as bytes", [1.0] * 4, b"default_policy", "module_id"),
    ],
)
def test_bad_priorities_are_still_refused_and_change_nothing(name, priorities, indices, match):
    buf = _prioritized()
    before = buf.get_state()
    with pytest.raises(ValueError, match=match):
        buf.update_priorities(priorities, indices)
    assert_states_equal(buf.get_state(), before)
    buf.update_priorities([3.0] * 4)  # the last sample's indices were kept
    assert buf.max_priority == 3.0


def test_a_zero_priority_whose_floor_underflows_alpha_is_refused():
    buf = _prioritized(alpha=30.0)  # 1e-12 ** 30 is 0 in float64
    before = buf.get_state()
    with pytest.raises(ValueError, match="0 or infinite"):
        buf.update_priorities([0.0], [0])
    assert_states_equal(buf.get_state(), before)


# ------------------------------------------------------------------ 2: layout sizes
def _state_buffer(cls):
    buf = cls(10, seed=0)
    buf.add(_episode("a", 2))
    return buf


@pytest.mark.parametrize(
    ("name", "key", "value", "match"),
    [
        ("end 2**45", "end", 2**45, "layout\\['end'\\]"),
        ("end 1e9", "end", 10**9, "layout\\['end'\\]"),
        ("end past the uid list", "end", 3, "layout\\['end'\\]"),
        ("a uid list longer than end", "uid", np.arange(5), "layout\\['end'\\]"),
    ],
)
@pytest.mark.parametrize("cls", CLASSES)
def test_an_absurd_layout_is_refused_before_anything_is_allocated(cls, name, key, value, match):
    state = _state_buffer(cls).get_state()
    state["layout"][key] = value
    target = cls(5, seed=1)
    target.add(_episode("z", 1))
    before = target.get_state()
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="broken replay buffer state.*" + match):
            target.set_state(state)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20  # no rows reserved for the claimed size
    assert_states_equal(target.get_state(), before)


@pytest.mark.parametrize("size", [2**45, 10**9], ids=["2**45", "1e9"])
@pytest.mark.parametrize("cls", CLASSES)
def test_an_absurd_layout_size_reserves_only_what_a_store_could_need(cls, size):
    source = _state_buffer(cls)
    state = source.get_state()
    state["layout"]["size"] = size
    target = cls(5, seed=1)
    tracemalloc.start()
    try:
        target.set_state(state)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 20 * 2**20  # no rows reserved for the claimed size
    assert target.get_state()["layout"]["size"] <= 2 * 64
    assert target.get_num_timesteps() == source.get_num_timesteps()
    batch, again = target.sample(8), source.sample(8)
    np.testing.assert_array_equal(batch["obs"], again["obs"])


@pytest.mark.parametrize("cls", CLASSES)
def test_a_state_restores_after_set_counters_lowered_the_added_steps(cls):
    """A lone long episode grew the store; set_counters then lowered the count it grew by."""
    buf = cls(10, seed=0)
    buf.add(chunk("long", make_episode_data(0, 500), 0, 500, terminated=True))
    buf.add(chunk("short", make_episode_data(1, 5), 0, 5, terminated=True))
    buf.set_counters({**buf.get_counters(), "added_timesteps": 5}, ["long"])
    state = buf.get_state()
    twin = cls(10, seed=3)
    twin.set_state(state)
    buf.set_state(state)
    np.testing.assert_array_equal(twin.sample(16)["obs"], buf.sample(16)["obs"])


@pytest.mark.parametrize("cls", CLASSES)
def test_a_store_that_outgrew_its_live_rows_still_restores(cls):
    """A lone episode beyond the capacity grows the store; evicted, its rows are dead."""
    buf = cls(10, seed=0)
    data = make_episode_data(0, 300)
    buf.add(chunk("big", data, 0, 300, terminated=True))
    for i in range(1, 6):
        buf.add(chunk(f"e{i}", make_episode_data(i, 4), 0, 4, terminated=True))
    state = buf.get_state()
    assert state["layout"]["size"] > 2 * max(64, state["layout"]["end"], 10)
    back = cls(3)
    back.set_state(state)
    assert_states_equal(back.get_state(), state)
    assert np.array_equal(back.sample(8)["obs"], buf.sample(8)["obs"])


# ------------------------------------------------------------ 3: flags and RLlib keywords
def test_every_short_window_at_a_truncation_is_truncated():
    buf = EpisodeReplayBuffer(100)
    buf.add(_episode("a", 3, truncated=True))
    got = buf.get_transitions(buf.locate("a", [0, 1, 2]), n_step=3, gamma=0.5)
    assert got["truncateds"].tolist() == [True, True, True]
    assert got["terminateds"].tolist() == [False, False, False]
    assert got["rewards"].tolist() == [1.75, 1.5, 1.0]


@pytest.mark.parametrize(
    ("name", "call"),
    [
        ("constructor batch_length_T", lambda: EpisodeReplayBuffer(100, batch_length_T=8)),
        ("uniform beta", lambda: _uniform().sample(4, beta=0.4)),
        ("to_numpy", lambda: _uniform().sample(4, to_numpy=True, sample_episodes=True)),
        (
            "min_batch_length_T",
            lambda: _uniform().sample(
                4, batch_length_T=2, min_batch_length_T=1, sample_episodes=True
            ),
        ),
    ],
)
def test_rllib_keywords_without_a_use_here_are_a_type_error(name, call):
    with pytest.raises(TypeError, match=name.split()[-1]):
        call()


def _uniform():
    buf = EpisodeReplayBuffer(100, seed=0)
    buf.add(_episode("a", 6))
    return buf


# ------------------------------------------------------------------ 4: generators
class _MyBG(np.random.PCG64):
    pass


SEEDS = {
    "a Generator over a PCG64 subclass": lambda: np.random.Generator(_MyBG(1)),
    "a PCG64 subclass": lambda: _MyBG(1),
}


@pytest.mark.parametrize("seed", list(SEEDS))
@pytest.mark.parametrize("cls", CLASSES)
def test_a_bit_generator_subclass_is_refused_up_front(cls, seed):
    with pytest.raises(TypeError, match="seed: .*_MyBG.*subclass of PCG64.*PCG64DXSM"):
        cls(100, seed=SEEDS[seed]())


@pytest.mark.parametrize("cls", CLASSES)
def test_load_and_from_dataset_refuse_it_too(cls, tmp_path):
    buf = cls(100, seed=0)
    buf.add(_episode("a", 3))
    buf.save(tmp_path / "b")
    with pytest.raises(TypeError, match="_MyBG"):
        EpisodeReplayBuffer.load(tmp_path / "b", seed=SEEDS["a PCG64 subclass"]())
    with EpisodeWriter(tmp_path / "d") as writer:
        writer.write(_episode("a", 3))
    with pytest.raises(TypeError, match="_MyBG"):
        EpisodeReplayBuffer.from_dataset(tmp_path / "d", seed=SEEDS["a PCG64 subclass"]())


@pytest.mark.parametrize("cls", CLASSES)
def test_a_generator_assigned_later_is_refused_by_get_state_and_save(cls, tmp_path):
    buf = cls(100, seed=0)
    buf.add(_episode("a", 3))
    buf.rng = np.random.Generator(_MyBG(1))
    with pytest.raises(TypeError, match="rng: .*_MyBG"):
        buf.get_state()
    with pytest.raises(TypeError, match="rng: .*_MyBG"):
        buf.save(tmp_path / "b")
    assert list(tmp_path.iterdir()) == []  # nothing written, no temporary left
    buf.rng = np.random.Generator(np.random.SFC64(3))  # numpy's own: fine again
    buf.save(tmp_path / "b")
    assert type(EpisodeReplayBuffer.load(tmp_path / "b").rng.bit_generator).__name__ == "SFC64"


# ------------------------------------------------------------------ 5: unsaved ids
def test_an_unstorable_stored_id_is_named_with_its_place(tmp_path):
    buf = EpisodeReplayBuffer(1000)
    for i in range(50):
        buf.add(_episode(f"ep{i}", 1))
    buf.add(_episode(np.int64(31), 1))
    buf.add(_episode(b"raw", 1))
    with pytest.raises(UnstorableValueError, match=r"episode id .*31.* \(stored episode 50 of 52"):
        buf.save(tmp_path / "s")
    assert not (tmp_path / "s").exists() and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("name", "bad", "shown"),
    [
        ("bytes", b"raw", "b'raw'"),
        ("a frozenset", frozenset({1}), "frozenset({1})"),
        ("numpy inside a tuple", (1, np.int64(2)), "(1, np.int64(2))"),
    ],
)
def test_every_unstorable_id_kind_is_named(name, bad, shown, tmp_path):
    buf = EpisodeReplayBuffer(1000)
    buf.add(_episode("ok", 1))
    buf.add(_episode(bad, 1))
    with pytest.raises(UnstorableValueError) as info:
        buf.save(tmp_path / "s")
    assert str(info.value).startswith(f"episode id {bad!r} (stored episode 1 of 2")
    assert shown.split("(")[0] in str(info.value)


def test_an_unstorable_evicted_id_is_named_with_its_place(tmp_path):
    buf = EpisodeReplayBuffer(3)
    buf.add(_episode("a", 2, terminated=True))
    buf.add(_episode(np.int64(7), 2, terminated=True))  # evicts "a"
    buf.add(_episode("b", 2, terminated=True))  # evicts np.int64(7)
    assert buf.get_evicted_ids() == ["a", 7]
    with pytest.raises(UnstorableValueError, match=r"episode id .*7.* \(evicted id 1 of 2"):
        buf.save(tmp_path / "s")
    assert list(tmp_path.iterdir()) == []


def test_a_storable_buffer_still_saves(tmp_path):
    buf = EpisodeReplayBuffer(1000)
    for id_ in ("a", 3, 2.5, True, ("t", 1)):
        buf.add(_episode(id_, 1))
    buf.save(tmp_path / "s")
    assert EpisodeReplayBuffer.load(Path(tmp_path / "s")).get_episode_ids() == [
        "a",
        3,
        2.5,
        True,
        ("t", 1),
    ]
