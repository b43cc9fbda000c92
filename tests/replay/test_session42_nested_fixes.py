"""Nested observations: from_dataset joins leaf dtypes, big records sample leaf by leaf, and a
state's records in another byte order are stored in the native one.

- ``from_dataset`` widens each nested leaf to the dtype the dataset's pieces join in, as it
  widens flat columns (uint8 beside int64 is int64; float32 beside float64 float64).
- Records whose leaves are big (images) are gathered leaf by leaf from their fields: the same
  batches as the raw-bytes gather, with each image copied once (peak memory of a sample).
- ``set_state`` with ``>f4`` record leaves stores them natively, so torch sampling works.
"""

from __future__ import annotations

import tracemalloc
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from episodes import SingleAgentEpisode
from episodes.io import DatasetWriter
from episodes.replay import EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer, nstep

Box, Dict, Tuple = gym.spaces.Box, gym.spaces.Dict, gym.spaces.Tuple


def _episode(id_: str, obs: list[Any], t0: int = 0, done: bool = False) -> SingleAgentEpisode:
    n = len(obs) - 1
    ep = SingleAgentEpisode(
        id_,
        observations=obs,
        actions=list(range(n)),
        rewards=[float(i) for i in range(n)],
        t_started=t0,
        terminated=done,
        len_lookback_buffer=0,
    )
    return ep.to_numpy()


def _leaves(value: Any, path: tuple[Any, ...] = ()) -> dict[tuple[Any, ...], Any]:
    if isinstance(value, dict):
        return {p: v for k, sub in value.items() for p, v in _leaves(sub, (*path, k)).items()}
    if isinstance(value, tuple):
        return {p: v for i, sub in enumerate(value) for p, v in _leaves(sub, (*path, i)).items()}
    return {path: value}


def _assert_same(a: Any, b: Any) -> None:
    """Two values equal leaf by leaf in structure (dict key order too), dtype, shape and bits."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and list(a) == list(b)
        for key in a:
            _assert_same(a[key], b[key])
    elif isinstance(a, (tuple, list)):
        assert type(a) is type(b) and len(a) == len(b)
        for x, y in zip(a, b):
            _assert_same(x, y)
    elif isinstance(a, np.ndarray):
        assert isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape
        assert a.tobytes() == b.tobytes()
        assert a.flags.c_contiguous and b.flags.c_contiguous
    elif isinstance(a, SingleAgentEpisode):
        assert len(a) == len(b) and a.t_started == b.t_started
        _assert_same(a.get_observations(slice(None)), b.get_observations(slice(None)))
    else:
        assert a == b


# ------------------------------------------------------------- F1: from_dataset widens leaves
WIDEN_CASES = {
    "uint8_then_int64_300": (
        [{"a": np.array([1], np.uint8)}, {"a": np.array([300])}],
        {("a",): (np.int64, [[1], [300]])},
    ),
    "float32_then_float64_tenth": (
        [{"a": np.array([1.0], np.float32)}, {"a": np.array([0.1])}],
        {("a",): (np.float64, [[1.0], [0.1]])},
    ),
    "float32_then_float64_1e300": (
        [{"a": np.array([1.0], np.float32)}, {"a": np.array([1e300])}],
        {("a",): (np.float64, [[1.0], [1e300]])},
    ),
    "int8_then_uint8_joins_in_int16": (
        [{"a": np.array([-1], np.int8)}, {"a": np.array([255], np.uint8)}],
        {("a",): (np.int16, [[-1], [255]])},
    ),
    "deep_leaf_widens_and_its_sibling_keeps_its_dtype": (
        [
            {"z": (np.array([1], np.uint8), np.float32(0.5)), "b": np.float32(2.0)},
            {"z": (np.array([70000], np.int32), np.float32(1.5)), "b": np.float32(3.0)},
        ],
        {
            ("z", 0): (np.int32, [[1], [70000]]),
            ("z", 1): (np.float32, [0.5, 1.5]),
            ("b",): (np.float32, [2.0, 3.0]),
        },
    ),
}


@pytest.mark.parametrize("case", list(WIDEN_CASES))
@pytest.mark.parametrize("split", ["two_episodes", "two_pieces_of_one_episode"])
def test_from_dataset_widens_each_nested_leaf_to_the_pieces_join(tmp_path, case, split):
    """Each leaf takes the dtype the pieces join in, every value kept exactly, as flat ones."""
    first, second = WIDEN_CASES[case][0]
    want = WIDEN_CASES[case][1]
    with DatasetWriter(tmp_path / "ds") as writer:
        if split == "two_episodes":
            writer.write(_episode("x", [first, first]))
            writer.write(_episode("y", [second, second]))
        else:
            writer.write(_episode("x", [first, first]))
            writer.write(_episode("x", [first, second], t0=1))
    buf = EpisodeReplayBuffer.from_dataset(tmp_path / "ds")
    observations = [ep.get_observations(slice(None)) for ep in buf.get_episodes()]
    held = {
        path: np.concatenate([_leaves(obs)[path][-1:] for obs in observations]) for path in want
    }
    for path, (dtype, values) in want.items():
        last = [values[0], values[-1]] if split == "two_episodes" else [values[-1]]
        assert held[path].dtype == dtype, path
        assert held[path].tolist() == last, path
    assert list(observations[0]) == list(first)  # the pieces' Dict key order
    batch = buf.sample(4, device="cpu")
    for path, (dtype, _) in want.items():
        leaf = _leaves(batch["obs"])[path]
        assert leaf.dtype == getattr(torch, np.dtype(dtype).name)


def test_from_dataset_keeps_nested_pieces_that_need_no_widening_as_read(tmp_path):
    """Pieces of one dtype: the first piece's records, leaves and key order as they were."""
    obs = [{"b": np.array([1.5], np.float32), "a": (np.int16(3),)}] * 3
    with DatasetWriter(tmp_path / "ds") as writer:
        writer.write(_episode("x", obs))
        writer.write(_episode("y", obs))
    buf = EpisodeReplayBuffer.from_dataset(tmp_path / "ds")
    got = buf.get_episodes()[1].get_observations(slice(None))
    assert list(got) == ["b", "a"]
    assert got["b"].dtype == np.float32 and got["a"][0].dtype == np.int16
    assert got["b"].tolist() == [[1.5]] * 3 and got["a"][0].tolist() == [3] * 3


# ------------------------------------------------ F2: big records gathered leaf by leaf, once
IMAGE = Dict({"image": Box(0, 255, (4, 84, 84), np.uint8), "vector": Box(-1, 1, (8,))})


def _image_buffer(cls: Any, episodes: int = 6, steps: int = 30) -> Any:
    rng = np.random.default_rng(0)
    buf = cls(10_000, seed=0)
    for e in range(episodes):
        obs = {
            "image": rng.integers(0, 256, (steps + 1, 4, 84, 84), np.uint8),
            "vector": rng.random((steps + 1, 8), np.float32),
        }
        ep = SingleAgentEpisode(
            f"e{e}",
            observations=obs,
            observation_space=IMAGE,
            actions=np.arange(steps),
            rewards=np.ones(steps),
            terminated=e % 2 == 0,
            len_lookback_buffer=0,
        )
        buf.add(ep)
    return buf


def _nbytes(value: Any) -> int:
    return sum(leaf.nbytes for leaf in _leaves(value).values())


SAMPLES = {
    "transitions": lambda buf: buf.sample(256, n_step=3, gamma=0.9)["obs"],
    "sequences": lambda buf: buf.sample(8, batch_length_T=24, lookback=4, pad=True)["obs"],
    "episodes": lambda buf: buf.sample(1, batch_length_T=28, sample_episodes=True),
}


@pytest.mark.parametrize("kind", list(SAMPLES))
def test_sampling_image_records_copies_each_image_once(kind):
    """Peak memory of a sample is about its batch: no whole-record gather before the leaves."""
    buf = _image_buffer(EpisodeReplayBuffer)
    SAMPLES[kind](buf)  # warm caches
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        out = SAMPLES[kind](buf)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    if kind == "episodes":
        held = sum(_nbytes(ep.get_observations(slice(None))) for ep in out)
        assert peak < 1.3 * held + (1 << 18)
    else:  # obs and next_obs: the batch holds both, peak is theirs and padding's
        assert peak < 1.3 * 2 * _nbytes(out) + (1 << 18)


STRUCTURES = {
    "image_dict": lambda rng, n: {
        "image": rng.integers(0, 256, (n, 3, 16, 16), np.uint8),
        "vector": rng.standard_normal((n, 3)).astype(np.float32),
    },
    "deep_tuple": lambda rng, n: (
        rng.standard_normal((n, 70)),
        {"k": rng.integers(-9, 9, (n, 2, 40), np.int32), "j": rng.integers(0, 2, n).astype(bool)},
    ),
    "small_her": lambda rng, n: {
        "observation": rng.standard_normal((n, 10)).astype(np.float32),
        "desired_goal": rng.standard_normal((n, 3)).astype(np.float32),
    },
}


def _item(columns: Any, t: int) -> Any:
    if isinstance(columns, dict):
        return {key: _item(value, t) for key, value in columns.items()}
    if isinstance(columns, tuple):
        return tuple(_item(value, t) for value in columns)
    return columns[t]


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    structure=st.sampled_from(list(STRUCTURES)),
    lengths=st.lists(st.integers(1, 9), min_size=1, max_size=4),
    prioritized=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_leaf_gathers_give_the_batches_of_raw_gathers(structure, lengths, prioritized, seed):
    """Whichever way records are gathered, every batch is the same, bit for bit."""
    rng = np.random.default_rng(seed)
    cls = PrioritizedEpisodeReplayBuffer if prioritized else EpisodeReplayBuffer
    eps = []
    for i, n in enumerate(lengths):
        columns = STRUCTURES[structure](rng, n + 1)
        obs = [_item(columns, t) for t in range(n + 1)]  # list mode, no space declared
        eps.append(
            SingleAgentEpisode(
                f"e{i}",
                observations=obs,
                actions=np.arange(n),
                rewards=rng.standard_normal(n),
                terminated=i % 2 == 0,
                len_lookback_buffer=0,
            )
        )
    results = []
    for threshold in (0, 10**9):  # every record leaf by leaf / every record as raw bytes
        buf = cls(100, seed=seed)
        for part in (eps[:-1], eps[-1:]):  # two adds: a continuing store, not one block
            buf.add(part)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(nstep, "LEAF_GATHER_BYTES", threshold)
            results.append(
                (
                    buf.sample(7, n_step=(1, 3), gamma=0.5),
                    buf.sample(3, batch_length_T=2, lookback=2, pad=True),
                    buf.sample(2, batch_length_T=1, sample_episodes=True),
                    buf.get_episodes(),
                    buf.sample(2, batch_length_T=2, pad=True, device="cpu")["next_obs"],
                )
            )
    fast, raw = results
    for a, b in zip(fast[:4], raw[:4]):
        _assert_same(a, b)
    for x, y in zip(_leaves(fast[4]).values(), _leaves(raw[4]).values()):
        assert x.dtype == y.dtype and bool((x == y).all())


# ------------------------------------------- F4: a state's records in another byte order
# Byte orders of the leaves 'a' (float32, shape (2,)) and 'b'[0] (int64). numpy calls a
# dtype whose only non-native leaves have a shape native: the first case.
ORDERS = {
    "big_endian_vector_leaf_only": (">", "<"),
    "big_endian_scalar_leaf_only": ("<", ">"),
    "big_endian_every_leaf": (">", ">"),
    "little_endian": ("<", "<"),
}


@pytest.mark.parametrize("cls", [EpisodeReplayBuffer, PrioritizedEpisodeReplayBuffer])
@pytest.mark.parametrize("orders", list(ORDERS))
def test_set_state_stores_records_natively_whatever_their_byte_order(cls, orders):
    """``>f4`` leaves (any depth) are stored as native float32, values unchanged."""
    first, second = ORDERS[orders]
    buf = cls(10, seed=0)
    obs = [{"a": np.array([i, -i], np.float32), "b": (np.int64(10 * i),)} for i in range(4)]
    buf.add(
        SingleAgentEpisode(
            "x", observations=obs, actions=[0] * 3, rewards=[0.0] * 3, len_lookback_buffer=0
        )
    )
    state = buf.get_state()
    swapped = np.dtype([("'a'", f"{first}f4", (2,)), ("'b'", [("0", f"{second}i8")])])
    state["steps"]["obs"] = state["steps"]["obs"].astype(swapped)
    state["episodes"]["final_obs"] = state["episodes"]["final_obs"].astype(swapped)
    restored = cls(10, seed=0)
    restored.set_state(state)
    batch = restored.sample(5, device="cpu")
    assert str(batch["obs"]["a"].dtype) == "torch.float32"
    assert str(batch["next_obs"]["b"][0].dtype) == "torch.int64"
    _assert_same(restored.get_episodes(), buf.get_episodes())
    (got,) = restored.get_episodes()
    assert got.get_observations(slice(None))["a"][:, 1].tolist() == [0.0, -1.0, -2.0, -3.0]
    assert got.get_observations(slice(None))["b"][0].tolist() == [0, 10, 20, 30]
    assert restored.get_state()["steps"]["obs"].dtype.newbyteorder("=") == (
        restored.get_state()["steps"]["obs"].dtype
    )
