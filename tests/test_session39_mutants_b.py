"""Behaviours a mutation run found unpinned: replay lookups, SampleBatch slices, hidden-state
aliasing in add_transition, constructor columns given as array-likes, object-column extends.

Comments cite the mutant each test kills (mutation40).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
import torch

from episodes import InfiniteLookbackBuffer, SingleAgentEpisode
from episodes.episode.sample_batch import SampleBatch
from episodes.replay import EpisodeReplayBuffer
from episodes.rollout import RolloutStorage

Transition = RolloutStorage.Transition

# ------------------------------------------------------------------ replay lookups


def _late_buffer() -> EpisodeReplayBuffer:
    """One episode 'a' whose stored steps are [5, 7)."""
    buf = EpisodeReplayBuffer(10)
    buf.add(
        SingleAgentEpisode(
            "a",
            observations=[0.0, 1.0, 2.0],
            actions=[0, 1],
            rewards=[1.0, 1.0],
            t_started=5,
            len_lookback_buffer=0,
        )
    )
    return buf


_LOOKUP_REFUSALS = {  # name -> (call, text in the KeyError)
    # SA04: a time before t_started must not wrap to the last step's index
    "time before the first stored step": (lambda b: b.locate("a", [4]), "outside"),
    "times on both sides": (lambda b: b.locate("a", [4, 7]), "outside"),
    # SA10: indices not stored are a KeyError, also beyond int64
    "index beyond int64": (lambda b: b.episode_steps([2**64 - 3]), "beyond int64"),
}


@pytest.mark.parametrize("case", list(_LOOKUP_REFUSALS))
def test_lookups_outside_the_stored_steps_are_key_errors(case):
    call, text = _LOOKUP_REFUSALS[case]
    buf = _late_buffer()
    with pytest.raises(KeyError, match=text):
        call(buf)
    assert buf.locate("a", [5, 6]).tolist() == [0, 1]  # the buffer is as it was


# ------------------------------------------------------------------ SampleBatch slices


def _infos_array() -> SampleBatch:
    return SampleBatch({"obs": np.arange(4), "infos": np.array([{}, {"a": 1}, {}, {}])})


def _zero_d_list() -> SampleBatch:
    batch = SampleBatch({"obs": np.arange(3)})
    batch["x"] = [np.array(1.0), np.array(2.0), np.array(3.0)]  # assigned after construction
    return batch


def _sequences() -> SampleBatch:
    return SampleBatch(
        {
            "obs": np.arange(4),
            "seq_lens": np.array([2, 2]),
            "state_in_0": np.array([[10.0], [20.0]]),
        }
    )


_SLICES = {  # name -> (batch, rows, {column: expected rows as lists})
    # BR05: infos given as an object ndarray are sliced like the other columns
    "infos as an object array": (
        _infos_array,
        slice(1, 3),
        {"obs": [1, 2], "infos": [{"a": 1}, {}]},
    ),
    # BR08: a list column of 0-d arrays is a column of rows
    "list of 0-d arrays": (_zero_d_list, slice(0, 1), {"obs": [0], "x": [1.0]}),
    # BR01: an empty slice (stop before start) reads as a list does, not as a cut sequence
    "stop before start with seq_lens": (
        _sequences,
        slice(2, 1),
        {"obs": [], "seq_lens": [], "state_in_0": []},
    ),
}


@pytest.mark.parametrize("case", list(_SLICES))
def test_sample_batch_slices_every_column_to_the_rows(case):
    make, rows, expected = _SLICES[case]
    sliced = make()[rows]
    assert sorted(sliced) == sorted(expected)
    for key, want in expected.items():
        got = sliced[key]
        assert len(got) == len(want), key
        assert [v.tolist() if hasattr(v, "tolist") else v for v in got] == want, key
    assert len(sliced) == len(expected["obs"])


# ------------------------------------------------------------------ hidden-state aliasing


def _general(storage: RolloutStorage, transition: Any) -> None:
    """``add_transition`` without its fast path: every step through ``_write``."""
    storage._write(storage.step, storage._fields_of(transition))
    storage.step += 1


_NUMPY_VIEWS: dict[str, Callable[[RolloutStorage], torch.Tensor]] = {
    # FR10: the critic's state is a numpy-backed view of the actor's row the same step writes
    "from_numpy of the row of a numpy view": lambda s: torch.from_numpy(
        s.saved_hidden_states_actor[0].detach().numpy()[1]
    ),
    "row of from_numpy of a numpy view": lambda s: torch.from_numpy(
        s.saved_hidden_states_actor[0].detach().numpy()
    )[1],
    "as_tensor of the row of a numpy view": lambda s: torch.as_tensor(
        s.saved_hidden_states_actor[0].numpy()[1]
    ),
}


def _aliased_run(view: Callable[[RolloutStorage], torch.Tensor], write: Callable) -> tuple:
    storage = RolloutStorage(
        "rl", 2, 3, (6,), (2,), actor_hidden_state=(1, 4), critic_hidden_state=(1, 4)
    )
    h = torch.ones(1, 2, 4)
    write(storage, Transition(rewards=torch.ones(2), hidden_states=(h, h)))
    critic = view(storage)  # the actor's row 1: zeros until this step writes it
    given = critic.clone()
    write(storage, Transition(rewards=torch.ones(2), hidden_states=(h * 7, critic)))
    actor_rows = storage.saved_hidden_states_actor[0].clone()
    critic_rows = storage.saved_hidden_states_critic[0].clone()
    return given, actor_rows, critic_rows


@pytest.mark.parametrize("case", list(_NUMPY_VIEWS))
def test_numpy_views_of_the_row_written_are_read_as_given(case):
    given, actor, critic = _aliased_run(_NUMPY_VIEWS[case], RolloutStorage.add_transition)
    assert torch.equal(given, torch.zeros(1, 2, 4))
    assert torch.equal(actor[1], torch.full((1, 2, 4), 7.0))
    assert torch.equal(critic[1], given)  # the value given, not the actor's new one
    reference = _aliased_run(_NUMPY_VIEWS[case], _general)
    assert all(torch.equal(a, b) for a, b in zip((given, actor, critic), reference))


# ------------------------------------------------------------------ constructor columns


class _Frames(Sequence):
    """A lazy frame list: a Sequence of uint8 frames whose ``__array__`` stacks as float64."""

    def __init__(self) -> None:
        self._frames = [np.full(2, i, np.uint8) for i in range(3)]

    def __getitem__(self, i: Any) -> Any:
        return self._frames[i]

    def __len__(self) -> int:
        return 3

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        return np.stack(self._frames).astype(np.float64)


class _NoShape:
    """No shape numpy can read, refuses a host copy, iterates numpy rows."""

    @property
    def shape(self) -> Any:
        raise AttributeError("lazy")

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise RuntimeError("no implicit host copy")

    def __iter__(self) -> Any:
        return iter([np.full(2, float(i)) for i in range(3)])

    def __len__(self) -> int:
        return 3


def _parameter() -> Any:
    return torch.nn.Parameter(torch.arange(6.0).reshape(3, 2), requires_grad=False)


def _series() -> Any:
    pd = pytest.importorskip("pandas")
    return pd.Series([0.5, 1.5, 2.5])


_GIVEN = {  # name -> (observations, item type, item 0 as a list, dtype of item 0 or None)
    # GC03: a Parameter iterates tensors (its rows), not numpy rows
    "Parameter not requiring grad": (_parameter, torch.Tensor, [0.0, 1.0], torch.float32),
    # GC08: a Sequence keeps its own items, not its float64 __array__
    "Sequence with a float64 __array__": (_Frames, np.ndarray, [0, 0], np.uint8),
    # GC01: a pandas Series iterates Python floats
    "pandas Series": (_series, float, 0.5, None),
    # GC04: no readable shape and no host copy: its iterated rows are kept
    "no shape, __array__ refused": (_NoShape, np.ndarray, [0.0, 0.0], np.float64),
}


@pytest.mark.parametrize("case", list(_GIVEN))
def test_given_observations_keep_their_iterated_items(case):
    make, kind, first, dtype = _GIVEN[case]
    episode = SingleAgentEpisode(
        observations=make(), actions=[0, 1], rewards=[1.0, 1.0], len_lookback_buffer=0
    )
    items = [episode.get_observations(i) for i in range(3)]
    assert all(type(item) is kind for item in items), [type(item) for item in items]
    got = items[0].tolist() if hasattr(items[0], "tolist") else items[0]
    assert got == first
    if dtype is not None:
        assert all(item.dtype == dtype for item in items)


# ------------------------------------------------------------------ object-column extend


def test_extend_of_a_two_wide_object_column_stores_the_rows():
    # BS01: an object column with item shape (2,) takes rows of two strings
    buf = InfiniteLookbackBuffer(np.empty((1, 2), object), lookback=0)
    buf.extend([["a", "b"], ["c", "d"]])
    assert len(buf) == 3
    got = buf.get()
    assert got.dtype == object and got.shape == (3, 2)
    assert got.tolist() == [[None, None], ["a", "b"], ["c", "d"]]
    assert buf.get(-1).tolist() == ["c", "d"]
