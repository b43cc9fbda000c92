"""Shallow copies of stores and buffers share nothing either side writes; states keep adoption.

* ``copy.copy`` of a store (``ArrayStore``, ``ViewStore``, detached or not) copies on write:
  a change to either side (append, set, set_rows, extend, pop, truncate) never shows in the
  other, nor in a block both view. A runner chunk's column copied this way never writes into
  the runner's blocks (contract §11), so ``SampledChunks.unchanged()`` stays true to them.
* ``copy.copy`` of a buffer gives it its own store; ``copy.copy`` of an episode shares its
  buffers (contract §7.4), but writing through it never reaches a runner's block either.
* ``get_state`` carries ``untyped_data`` where a numpy column's first item chose its dtypes:
  ``from_state`` rebuilds a buffer that keeps behaving as the original (contract §7.3) once
  emptied again; states without it load as before, and a damaged one is refused clearly.
"""

from __future__ import annotations

import copy
import pickle

import gymnasium as gym
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from episodes.buffer.array_store import ArrayStore
from episodes.buffer.view_store import ViewStore
from episodes.runner import EnvRunner
from episodes.structs import data_equal, map_leaves

# ------------------------------------------------------------------ 1. copy.copy of a store


def _scalar_block():
    return np.arange(12.0).reshape(4, 3)


def _store(kind):
    """(store, block or None, an item it takes, a batch of two items it takes)."""
    if kind == "array scalars":
        return ArrayStore.from_batch(np.arange(4.0)), None, -7.0, np.array([-8.0, -9.0])
    if kind == "array scalars, appends pending":
        store = ArrayStore.from_batch(np.arange(2.0))
        store.append(2.0)
        store.append(3.0)
        return store, None, -7.0, np.array([-8.0, -9.0])
    if kind == "array rows":
        row = np.full(3, -7, np.float32)
        return ArrayStore.from_batch(np.ones((4, 3), np.float32)), None, row, np.zeros((2, 3))
    if kind == "array dicts":
        store = ArrayStore.from_batch({"a": np.arange(4), "b": np.ones((4, 2))})
        batch = {"a": np.array([8, 9]), "b": np.zeros((2, 2))}
        return store, None, {"a": -7, "b": np.full(2, -7.0)}, batch
    block = _scalar_block()
    store = ViewStore.from_batch(block[:, 1])
    if kind == "view store, detached":
        store.set([0], [50.0])
    return store, block, -7.0, np.array([-8.0, -9.0])


def _ops(item, batch):
    return {
        "append": lambda s: s.append(item),
        "append twice": lambda s: (s.append(item), s.append(item)),
        "set": lambda s: s.set([0], [item]),
        "set_rows": lambda s: s.set_rows(range(0, 2), ArrayStore.from_batch(batch).leaf_views()),
        "extend_batch": lambda s: s.extend_batch(batch),
        "pop first": lambda s: s.pop(0),
        "pop last": lambda s: s.pop(len(s) - 1),
        "truncate": lambda s: s.truncate(1),
        "append then pop": lambda s: (s.append(item), s.pop(len(s) - 1)),
        "truncate then append": lambda s: (s.truncate(1), s.append(item)),
    }


KINDS = [
    "array scalars",
    "array scalars, appends pending",
    "array rows",
    "array dicts",
    "view store",
    "view store, detached",
]
OPS = list(_ops(None, None))


def _snapshot(store):
    return map_leaves(np.array, store.data)


@pytest.mark.parametrize("side", ["copy", "original"])
@pytest.mark.parametrize("op", OPS)
@pytest.mark.parametrize("kind", KINDS)
def test_a_change_to_one_side_of_copy_copy_never_shows_in_the_other(kind, op, side):
    store, block, item, batch = _store(kind)
    clone = copy.copy(store)
    assert type(clone) is type(store) and data_equal(clone.data, store.data)
    block_before = None if block is None else block.copy()
    changed, other = (clone, store) if side == "copy" else (store, clone)
    expected = copy.deepcopy(changed)
    other_before = _snapshot(other)
    _ops(item, batch)[op](expected)
    _ops(item, batch)[op](changed)
    assert data_equal(changed.data, expected.data)
    assert data_equal(other.data, other_before), f"{op} on the {side} changed the other side"
    if block is not None:
        assert np.array_equal(block, block_before), f"{op} on the {side} wrote into the block"
    # The other side still takes changes of its own, which the changed side does not see.
    seen = _snapshot(changed)
    _ops(item, batch)["set"](other)
    _ops(item, batch)["append"](other)
    assert data_equal(changed.data, seen)


@pytest.mark.parametrize("kind", KINDS)
def test_copies_of_copies_and_their_pickles_stay_apart(kind):
    store, block, item, _ = _store(kind)
    before = _snapshot(store)
    first = copy.copy(store)
    second = copy.copy(first)
    pickled = pickle.loads(pickle.dumps(second))
    for target in (first, second, pickled):
        target.set([1], [item])
        target.append(item)
    assert data_equal(store.data, before)
    assert data_equal(first.data, second.data) and data_equal(second.data, pickled.data)
    if block is not None:
        assert np.array_equal(block, _scalar_block())


def _chunks():
    env = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync")

    def policy(obs):
        n = len(obs)
        zeros = np.zeros(n, np.float32)
        return np.zeros(n, np.int64), {"vf_preds": zeros, "action_logp": zeros}

    return EnvRunner(env, policy, seed=0).sample(4)


def _block_copies(chunks):
    blocks = chunks.recording.blocks
    return {
        "rewards": [blocks.rewards.copy()],
        "actions": [leaf.copy() for leaf in blocks.actions.leaves],
        "obs": [leaf.copy() for leaf in blocks.obs.leaves],
    }


def test_appending_to_a_copied_chunk_store_never_writes_the_runners_block():
    chunks = _chunks()
    chunk = chunks[0]
    rewards = chunk.get_rewards().tolist()
    block = chunks.recording.blocks.rewards.copy()
    clone = copy.copy(chunk.rewards.store)
    clone.append(-7.0)
    clone.set([0], [-5.0])
    assert clone.data.tolist() == [-5.0, *rewards[1:], -7.0]
    assert chunk.get_rewards().tolist() == rewards
    assert chunks.recording.blocks.rewards.tobytes() == block.tobytes()  # NaN garbage rows too
    assert chunks.unchanged()


# ------------------------------------------------------- copy.copy of a buffer and an episode


def _buffer(kind):
    if kind == "list":
        return InfiniteLookbackBuffer([0.0, 1.0, 2.0, 3.0], lookback=1), None
    if kind == "numpy":
        buf = InfiniteLookbackBuffer([0.0, 1.0, 2.0, 3.0], lookback=1)
        buf.finalize()
        return buf, None
    block = _scalar_block()
    return InfiniteLookbackBuffer(ViewStore.from_batch(block[:, 2]), lookback=1), block


BUFFER_OPS = {
    "append": lambda b: b.append(-7.0),
    "set": lambda b: b.set(-5.0, at_indices=0),
    "pop": lambda b: b.pop(),
    "pop lookback": lambda b: b.pop(0),
    "truncate": lambda b: b.truncate(2),
    "extend": lambda b: b.extend([-8.0, -9.0]),
}


@pytest.mark.parametrize("side", ["copy", "original"])
@pytest.mark.parametrize("op", list(BUFFER_OPS))
@pytest.mark.parametrize("kind", ["list", "numpy", "view store"])
def test_copy_copy_of_a_buffer_gives_it_its_own_store(kind, op, side):
    buf, block = _buffer(kind)
    clone = copy.copy(buf)
    assert clone == buf and clone.store is not buf.store
    changed, other = (clone, buf) if side == "copy" else (buf, clone)
    expected, other_before = copy.deepcopy(changed), copy.deepcopy(other)
    BUFFER_OPS[op](expected)
    BUFFER_OPS[op](changed)
    assert changed == expected
    assert other == other_before, f"{op} on the {side} changed the other buffer"
    if block is not None:
        assert np.array_equal(block, _scalar_block())


@pytest.mark.parametrize("side", ["copy", "original"])
def test_copy_copy_of_a_chunk_shares_buffers_but_never_writes_the_blocks(side):
    chunks = _chunks()
    chunk = chunks[0]
    blocks = _block_copies(chunks)
    neighbour = chunks[1].get_rewards().tolist()
    clone = copy.copy(chunk)
    assert clone.rewards is chunk.rewards  # contract §7.4: a shallow copy shares its buffers
    target = clone if side == "copy" else chunk
    target.set_rewards(new_data=-5.0, at_indices=0)
    target.rewards.append(-7.0)
    target.actions.pop()
    target.rewards.truncate(2)
    after = _block_copies(chunks)
    for name, before in blocks.items():
        # Bytes, not values: unused block rows may hold NaN garbage (np.empty).
        assert all(a.tobytes() == b.tobytes() for a, b in zip(after[name], before)), name
    assert chunks[1].get_rewards().tolist() == neighbour


# ------------------------------------------------- 2. a state keeps what the first item chose


def _numpyd_while_empty(space):
    buf = InfiniteLookbackBuffer(space=space)
    buf.finalize()
    return buf


ADOPTED = {
    # name: (space, first item, a later item only the untyped column takes)
    "no space, int then float": (None, 1, 2.5),
    "Box, int then float": (gym.spaces.Box(-9, 9, (2,)), np.array([1, 2]), np.array([0.5, 1.5])),
    "Dict": (
        gym.spaces.Dict({"x": gym.spaces.Discrete(3)}),
        {"x": np.int8(1)},
        {"x": np.int64(300)},
    ),
}


@pytest.mark.parametrize("copy_state", [True, False], ids=["copy", "copy=False"])
@pytest.mark.parametrize("name", list(ADOPTED))
def test_a_state_remembers_that_the_first_item_chose_the_dtypes(name, copy_state):
    space, first, later = ADOPTED[name]
    buf = _numpyd_while_empty(space)
    buf.append(first)
    state = buf.get_state()
    assert "untyped_data" in state
    restored = InfiniteLookbackBuffer.from_state(state, copy=copy_state)
    assert restored == buf
    for b in (buf, restored):
        b.pop()
    assert restored == buf
    for b in (buf, restored):
        b.append(later)
    assert restored == buf


def test_an_episode_state_remembers_it_for_every_column():
    ep = SingleAgentEpisode()
    ep.to_numpy()  # before the first step: the first items choose the dtypes
    ep.add_env_reset(observation=np.int64(0))
    ep.add_env_step(observation=np.int64(1), action=1, reward=1)
    restored = SingleAgentEpisode.from_state(ep.get_state())
    assert restored == ep
    for name in ("observations", "actions", "rewards"):
        buf, again = getattr(ep, name), getattr(restored, name)
        buf.truncate(0)
        again.truncate(0)
        assert again == buf, name
        buf.append(2.5)
        again.append(2.5)  # the original's column takes it: float64 chosen anew
        assert again == buf, name


def test_the_state_carries_the_layout_only_where_the_first_item_chose_it():
    assert "untyped_data" not in InfiniteLookbackBuffer([1, 2]).get_state()
    numpyd = InfiniteLookbackBuffer([1, 2])
    numpyd.finalize()
    assert "untyped_data" not in numpyd.get_state()
    emptied = _numpyd_while_empty(None)
    emptied.append(1)
    emptied.pop()  # untyped again: nothing to remember
    state = emptied.get_state()
    assert state["typed"] is False and "untyped_data" not in state


def test_a_state_without_untyped_data_loads_as_before():
    buf = _numpyd_while_empty(None)
    buf.append(1)
    state = buf.get_state()
    state.pop("untyped_data", None)  # a state written before it was carried
    restored = InfiniteLookbackBuffer.from_state(state)
    assert restored == buf
    restored.pop()
    with pytest.raises(ValueError):  # typed int64, as states written before
        restored.append(2.5)


DAMAGED = {
    "a string": "abc",
    "a number": 5,
    "items, not empty": np.zeros(3),
    "a 0-d array": np.zeros(()),
    "a dict of numbers": {"x": 1},
    "an empty dict": {},
    "a dict of mixed key types": {1: np.zeros(0), "a": np.zeros(0)},
}


@pytest.mark.parametrize("name", list(DAMAGED))
def test_a_damaged_untyped_data_is_refused(name):
    buf = _numpyd_while_empty(None)
    buf.append(1)
    state = buf.get_state()
    state["untyped_data"] = DAMAGED[name]
    kept = copy.copy(state)
    with pytest.raises(ValueError, match="untyped_data"):
        InfiniteLookbackBuffer.from_state(state)
    assert state.keys() == kept.keys() and all(state[k] is kept[k] for k in state)


@pytest.mark.parametrize(
    ("data", "finalized"), [([1, 2], False), (np.zeros(0, np.int64), True)], ids=["list", "empty"]
)
def test_untyped_data_where_no_first_item_chose_a_layout_is_refused(data, finalized):
    state = {"data": data, "lookback": 0, "finalized": finalized, "space": None}
    state["untyped_data"] = np.zeros(0)
    with pytest.raises(ValueError, match="untyped_data"):
        InfiniteLookbackBuffer.from_state(state)


def test_copy_copy_of_a_list_store_has_its_own_list() -> None:
    from episodes.buffer.list_store import ListStore

    original = ListStore([1, 2])
    clone = copy.copy(original)
    clone.append(3)
    original.pop(0)
    assert (original.data, clone.data) == ([2], [1, 2, 3])
    assert clone.pylist is clone.data  # hot paths append through pylist


RANGE_COPIES = {
    "copy_range": lambda buf: buf.copy_range(0, len(buf), 0),
    "copy_tail": lambda buf: buf.copy_tail(len(buf), len(buf)),
}


@pytest.mark.parametrize("how", list(RANGE_COPIES))
@pytest.mark.parametrize("name", list(ADOPTED))
def test_range_copies_go_back_to_the_untyped_layout_as_the_original_does(name, how):
    space, first, later = ADOPTED[name]
    buf = _numpyd_while_empty(space)
    buf.append(first)
    part = RANGE_COPIES[how](buf)
    for b in (buf, part):
        b.pop()
        b.append(later)
    assert part == buf and data_equal(part.get(0), later)


CHUNK_COPIES = {
    "cut": lambda ep: ep.cut(),
    "ep[0:0]": lambda ep: ep[0:0],
    "slice": lambda ep: ep.slice(slice(0, 0)),
}


@pytest.mark.parametrize("how", list(CHUNK_COPIES))
def test_a_cut_of_an_episode_numpyd_before_its_reset_joins_as_the_episode_does(how):
    episode = SingleAgentEpisode("e")
    episode.to_numpy()
    episode.add_env_reset(np.zeros(2, np.float32))  # the first item chose float32
    chunk = CHUNK_COPIES[how](episode)
    for joined in (episode, chunk):
        joined.concat_episode(
            SingleAgentEpisode(
                "e",
                observations=[np.zeros(2), np.ones(2)],
                actions=[0],
                rewards=[1.0],
                len_lookback_buffer=0,
            )
        )
    assert chunk.get_observations().dtype == episode.get_observations().dtype
    assert chunk == episode


@pytest.mark.parametrize("name", list(ADOPTED))
def test_an_empty_range_copy_is_the_column_emptied_and_its_state_round_trips(name):
    space, first, later = ADOPTED[name]
    buf = _numpyd_while_empty(space)
    buf.append(first)
    empty = buf.copy_tail(0, 0)
    emptied = _numpyd_while_empty(space)
    emptied.append(first)
    emptied.pop()
    assert empty.get_state().keys() == emptied.get_state().keys()
    assert InfiniteLookbackBuffer.from_state(empty.get_state()) == empty
    for b in (empty, emptied):
        b.append(later)
    assert empty == emptied


@pytest.mark.parametrize("how", list(CHUNK_COPIES) + ["ep[1:]"])
def test_the_successor_of_an_episode_numpyd_before_its_first_step_round_trips(how):
    episode = SingleAgentEpisode("x", extra_model_outputs={"vf": []})
    episode.add_env_reset(np.zeros(2, np.float32))
    episode.to_numpy()
    episode.add_env_step(np.ones(2, np.float32), 0, 1.0, extra_model_outputs={"vf": np.float16(1)})
    chunk = episode[1:] if how == "ep[1:]" else CHUNK_COPIES[how](episode)
    assert SingleAgentEpisode.from_state(chunk.get_state()) == chunk
    assert SingleAgentEpisode.from_fields(chunk.field_values()) == chunk
