"""Session 15 fixes in the buffer's write path.

Each test failed before its fix:

* a refused write on a runner chunk (a value its numpy column cannot hold, an extra output of
  the wrong shape in ``add_env_step``) copied the column off the runner's blocks all the same,
  so ``SampledChunks.unchanged()`` turned False although nothing was written (contract §8: a refused
  call leaves the object unchanged) and the converter lost its fast path;
* a numpy'd Tuple column whose items were recorded as lists reads back as a list of leaf
  arrays (contract §3.5), which its setters refused (``IndexError``, or a structure
  ``ValueError`` where the number of positions equals the number of Tuple parts): they now take
  a column's own read back (contract §3.7), and a list of items is still read as items.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from episodes.buffer.view_store import ViewStore
from episodes.runner import EnvRunner

# ------------------------------------------------------------- refused writes on runner chunks


class ValuePolicy:
    """Random actions plus one extra output per sub-env (``vf_preds``, float32)."""

    def __init__(self, space: gym.Space[Any]) -> None:
        self.space = space
        space.seed(0)

    def __call__(self, obs: np.ndarray) -> tuple[Any, dict[str, Any]]:
        return self.space.sample(), {"vf_preds": obs[:, 2].astype(np.float32)}


def _sample() -> tuple[Any, SingleAgentEpisode]:
    env = gym.make_vec("CartPole-v1", 3, vectorization_mode="sync")
    chunks = EnvRunner(env, ValuePolicy(env.action_space), seed=0).sample(4)
    ongoing = [chunk for chunk in chunks if not chunk.is_done]
    assert ongoing and chunks.unchanged()
    return chunks, ongoing[0]


def _step(chunk: SingleAgentEpisode, **changes: Any) -> None:
    args = {
        "observation": np.zeros(4, np.float32),
        "action": 0,
        "reward": 1.0,
        "extra_model_outputs": {"vf_preds": np.float32(0.5)},
        **changes,
    }
    chunk.add_env_step(
        args["observation"],
        args["action"],
        args["reward"],
        extra_model_outputs=args["extra_model_outputs"],
    )


_DOES_NOT_FIT = r"does not fit a numpy column of dtype float32 and item shape \(\)"
_NOT_RECORDED = "add_env_step: the value for {} cannot be stored in the episode's numpy column"

# Each refused write: the message it is refused with (all are ValueError), and the write.
REFUSED: dict[str, tuple[str, Callable[[SingleAgentEpisode], None]]] = {
    "extra output: a string at an int index": (
        rf"'vf_preds': 'x' {_DOES_NOT_FIT} \(not a number",
        lambda c: c.set_extra_model_outputs(key="vf_preds", new_data="x", at_indices=0),
    ),
    "extra output: float32 overflow at a list index": (
        rf"'vf_preds': 1e\+300 {_DOES_NOT_FIT} \(beyond the range of float32",
        lambda c: c.set_extra_model_outputs(key="vf_preds", new_data=[1e300], at_indices=[0]),
    ),
    "extra output: a batch of the wrong item shape": (
        rf"'vf_preds': an array of shape \(3,\) .* {_DOES_NOT_FIT} \(item shape \(3,\)",
        lambda c: c.set_extra_model_outputs(
            key="vf_preds", new_data=np.zeros((2, 3), np.float32), at_indices=slice(0, 2)
        ),
    ),
    "add_env_step: extra output of the wrong shape": (
        _NOT_RECORDED.format(r"extra_model_outputs\['vf_preds'\]") + r" \(an array of shape \(3,\)",
        lambda c: _step(c, extra_model_outputs={"vf_preds": np.zeros(3)}),
    ),
    "add_env_step: a string extra output": (
        _NOT_RECORDED.format(r"extra_model_outputs\['vf_preds'\]") + r" \('high' does not fit",
        lambda c: _step(c, extra_model_outputs={"vf_preds": "high"}),
    ),
    "add_env_step: a reward that is no number": (
        _NOT_RECORDED.format("rewards") + r" \('1.0' does not fit .* float64",
        lambda c: _step(c, reward="1.0"),
    ),
}


@pytest.mark.parametrize("message, write", REFUSED.values(), ids=REFUSED.keys())
def test_a_refused_write_leaves_the_chunk_on_the_blocks(message, write):
    chunks, chunk = _sample()
    before = chunk.get_state()
    with pytest.raises(ValueError, match=message) as refused:
        write(chunk)
    assert type(refused.value) is ValueError
    assert chunk == type(chunk).from_state(before)
    columns = [chunk.observations, chunk.actions, chunk.rewards]
    columns += list(chunk.extra_model_outputs.values())
    assert not any(column.store.detached for column in columns)
    assert chunks.unchanged()


ACCEPTED: dict[str, Callable[[SingleAgentEpisode], None]] = {
    "extra output set": lambda c: c.set_extra_model_outputs(
        key="vf_preds", new_data=0.25, at_indices=0
    ),
    "add_env_step": _step,
}


@pytest.mark.parametrize("write", ACCEPTED.values(), ids=ACCEPTED.keys())
def test_an_accepted_write_still_copies_the_chunk_off_the_blocks(write):
    chunks, chunk = _sample()
    write(chunk)
    assert not chunks.unchanged()


def test_popping_the_append_that_copied_a_view_store_views_the_block_again():
    block = np.arange(8.0).reshape(4, 2)
    store = ViewStore.from_batch(block[:, 0])
    store.append(9.0)
    # While that one appended item is the only change, a copy does not carry the views.
    assert "_origin" not in pickle.loads(pickle.dumps(store)).__getstate__()[1]
    assert store.pop(4) == 9.0 and not store.detached
    assert np.shares_memory(store.data, block) and store.data.tolist() == [0.0, 2.0, 4.0, 6.0]
    # Grown by two items, or changed otherwise, it stays a copy even when cut back.
    store.append(1.0)
    store.append(2.0)
    store.truncate(4)
    assert store.detached and store.data.tolist() == [0.0, 2.0, 4.0, 6.0]
    other = ViewStore.from_batch(block[:, 1])
    other.append(1.0)
    other.delete(0)  # not the appended item
    assert other.detached and other.data.tolist() == [3.0, 5.0, 7.0, 1.0]


# ------------------------------------------------------ list-recorded Tuple items take a batch

TUPLE = gym.spaces.Tuple((gym.spaces.Box(-1, 1, (2,), np.float32), gym.spaces.Discrete(3)))


def _column(count: int = 4, space: gym.Space[Any] = TUPLE, make: Any = None):
    make = make or (lambda i: [np.full(2, i / 10, np.float32), i % 3])
    buf = InfiniteLookbackBuffer([make(i) for i in range(count)], lookback=1, space=space)
    buf.finalize()
    return buf


def _plain(batch: Any) -> Any:
    if isinstance(batch, dict):
        return {key: _plain(value) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        return [_plain(part) for part in batch]
    return np.asarray(batch).tolist()


# (read, write) pairs: a read written back where it was read from leaves the column as it was.
ROUND_TRIPS = {
    "everything (3 positions, 2 parts)": (lambda b: b.get(), {}),
    "two positions (as many as parts)": (
        lambda b: b.get(slice(0, 2)),
        {"at_indices": slice(0, 2)},
    ),
    "an index list": (lambda b: b.get([2, 0]), {"at_indices": [2, 0]}),
    "a negative step": (
        lambda b: b.get(slice(None, None, -1)),
        {"at_indices": slice(None, None, -1)},
    ),
    "into the lookback": (
        lambda b: b.get(slice(-1, 1), neg_index_as_lookback=True),
        {"at_indices": slice(-1, 1), "neg_index_as_lookback": True},
    ),
}


@pytest.mark.parametrize("read, where", ROUND_TRIPS.values(), ids=ROUND_TRIPS.keys())
def test_a_list_recorded_tuple_column_takes_its_own_read(read, where):
    buf = _column()
    before = _plain(buf.data)
    batch = read(buf)
    assert isinstance(batch, list)  # what the read returns stays as it was
    buf.set(batch, **where)
    assert _plain(buf.data) == before
    # ... and a changed read writes each row at its own position, not transposed.
    box, discrete = (np.array(leaf) for leaf in read(buf))  # copies: reads are views
    buf.set([-box, (discrete + 1) % 3], **where)
    assert _plain(read(buf)) == [(-box).tolist(), ((discrete + 1) % 3).tolist()]


@pytest.mark.parametrize(
    "space, make",
    [
        (
            gym.spaces.Dict({"a": TUPLE, "b": gym.spaces.Discrete(2)}),
            lambda i: {"a": [np.full(2, i / 10, np.float32), i % 3], "b": i % 2},
        ),
        (
            gym.spaces.Tuple((TUPLE, gym.spaces.Discrete(2))),
            lambda i: [[np.full(2, i / 10, np.float32), i % 3], i % 2],
        ),
    ],
    ids=["inside a dict", "nested lists"],
)
def test_nested_list_recorded_tuples_take_their_own_read(space, make):
    buf = _column(space=space, make=make)
    before = _plain(buf.data)
    buf.set(buf.get())
    buf.set(buf.get(slice(0, 2)), at_indices=slice(0, 2))
    assert _plain(buf.data) == before


def test_the_episode_setter_takes_its_own_read():
    ep = SingleAgentEpisode(
        observations=[[np.full(2, i / 10, np.float32), i % 3] for i in range(4)],
        actions=[0, 1, 0],
        rewards=[0.0, 1.0, 2.0],
        observation_space=TUPLE,
        len_lookback_buffer=1,
    ).to_numpy()
    before = ep.get_state()
    ep.set_observations(new_data=ep.get_observations())
    assert ep == SingleAgentEpisode.from_state(before)


PAIR = gym.spaces.Tuple((gym.spaces.Discrete(3), gym.spaces.Discrete(3)))

# A Tuple of two Discretes at two positions: a list of two could be two items or two leaves.
READINGS = {
    # A tuple of arrays at the leaves is a batch.
    "a tuple of arrays is a batch": ((np.array([1, 2]), np.array([0, 1])), [[1, 0], [2, 1]]),
    # Python lists are items, as in list mode and as before.
    "lists are items": ([[1, 2], [0, 1]], [[1, 2], [0, 1]]),
    "tuples are items": ([(2, 2), (1, 1)], [[2, 2], [1, 1]]),
}


@pytest.mark.parametrize("new_data, items", READINGS.values(), ids=READINGS.keys())
def test_a_list_is_a_batch_only_where_it_cannot_be_items(new_data, items):
    numpy = _column(3, PAIR, lambda i: [i % 3, (i + 1) % 3])
    numpy.set(new_data)
    assert [list(map(int, item)) for item in numpy] == items
    if isinstance(new_data, tuple):
        return
    listed = InfiniteLookbackBuffer([[0, 1], [1, 2], [2, 0]], lookback=1, space=PAIR)
    listed.set(new_data)
    assert [list(map(int, item)) for item in listed] == items


REFUSALS = {
    "leaves of different lengths": (
        [np.zeros((2, 2), np.float32), np.array([2, 1, 0])],
        ValueError,
        "share its leading length",
    ),
    "a batch of three for two positions": (
        [np.zeros((3, 2), np.float32), np.array([2, 1, 0])],
        IndexError,
        "cannot set 3 items",
    ),
    "a value outside the space": (
        [np.full((2, 2), 5.0, np.float32), np.array([2, 1])],
        ValueError,
        "not in the buffer's space",
    ),
    # Not a batch (a list at a leaf): two items, the first of them no Tuple item.
    "an array beside a list": (
        [np.zeros((2, 2), np.float32), [0, 1]],
        ValueError,
        r"(?s)value array\(\[\[0\., 0\.\],.* is not in the buffer's space",
    ),
}


@pytest.mark.parametrize("new_data, error, words", REFUSALS.values(), ids=REFUSALS.keys())
def test_a_batch_that_does_not_fit_is_refused_clearly(new_data, error, words):
    buf = _column(3)
    before = _plain(buf.data)
    with pytest.raises(error, match=words):
        buf.set(new_data)
    assert _plain(buf.data) == before


def test_a_square_list_of_array_items_is_refused_not_transposed():
    # gymnasium's Tuple takes an array item: two arrays of two are two items (as list mode
    # writes them) as much as a batch of two (a numpy read); neither is guessed.
    numpy = _column(3, PAIR, lambda i: [i % 3, (i + 1) % 3])
    before = [list(map(int, item)) for item in numpy]
    with pytest.raises(ValueError, match="both 2 items and a batch of 2"):
        numpy.set([np.array([1, 2]), np.array([0, 1])], at_indices=slice(0, 2))
    assert [list(map(int, item)) for item in numpy] == before
