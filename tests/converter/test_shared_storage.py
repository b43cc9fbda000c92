"""The converter takes aligned block windows as the storage's tensors (no copy), safely.

An aligned window (the vector-steps window, same-step or disabled autoreset) is a slice of
the runner's blocks, so the storage can use it as it is; ``copy=True`` asks for copies. Either
way the storage holds the same values, nothing writes into the blocks' held cells (a reset
step's float outputs, which no chunk holds, are set to 0), and a storage reused
for a window that has to be gathered first gets tensors of its own again.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes.converter import ColumnKeys, episodes_to_rollout
from episodes.runner import EnvRunner, SampledChunks

GAMMA = 0.9
KEYS = ColumnKeys(distribution=("logits",))


def policy(obs: np.ndarray) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    n = len(obs)
    actions = (obs[:, 2] > 0).astype(np.int64)  # deterministic: the same steps every run
    logits = np.stack([obs[:, 0], -obs[:, 0]], axis=1).astype(np.float32)
    extras = {"vf_preds": obs[:, 1].astype(np.float32), "action_logp": np.zeros(n, np.float32)}
    return actions, extras | {"logits": logits}


def value_fn(obs: np.ndarray) -> np.ndarray:
    return obs.sum(axis=-1)


def _cartpole(mode: str = "NEXT_STEP") -> gym.vector.VectorEnv:
    return gym.make_vec(
        "CartPole-v1",
        3,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": gym.vector.AutoresetMode[mode]},
    )


def runner(mode: str, window: str) -> EnvRunner:
    return EnvRunner(_cartpole(mode), policy, seed=0, window=window)


def convert(chunks: SampledChunks, **kw: object) -> object:
    return episodes_to_rollout(chunks, gamma=GAMMA, value_fn=value_fn, keys=KEYS, **kw)


def block_memory(chunks: SampledChunks) -> list[np.ndarray]:
    blocks = chunks.recording.blocks
    return [*blocks.obs.leaves, *blocks.actions.leaves] + [
        leaf for column in blocks.extras.values() for leaf in column.leaves
    ]


def shares_blocks(tensor: torch.Tensor, chunks: SampledChunks) -> bool:
    view = tensor.numpy()
    return any(np.shares_memory(view, leaf) for leaf in block_memory(chunks))


CASES = [  # (case, autoreset mode, window)
    ("vector steps, next-step", "NEXT_STEP", "vector_steps"),
    ("transitions, same-step", "SAME_STEP", "transitions"),
    ("transitions, disabled", "DISABLED", "transitions"),
]


@pytest.mark.parametrize(("mode", "window"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_aligned_windows_are_taken_and_equal_copies(mode, window):
    shared, copied = runner(mode, window), runner(mode, window)
    storage = None
    for _ in range(3):
        chunks, twin = shared.sample(30), copied.sample(30)
        before = [leaf.copy() for leaf in block_memory(chunks)]
        twin_before = [leaf.copy() for leaf in block_memory(twin)]
        rollout = convert(chunks, storage=storage)
        reference = convert(twin, copy=True)
        storage = rollout.storage
        taken = {"observations", "actions", "values", "actions_log_prob"}
        assert taken <= storage.shared
        assert reference.storage.shared <= {"rewards", "dones"}  # fresh arrays, not blocks
        assert shares_blocks(storage.observations, chunks)
        assert not shares_blocks(reference.storage.observations, twin)
        storage.compute_returns(rollout.last_values, GAMMA, 0.95)
        reference.storage.compute_returns(reference.last_values, GAMMA, 0.95)
        for name, tensor in reference.storage.tensors.items():
            assert torch.equal(storage.tensors[name], tensor), name
        for leaf, was in zip(block_memory(twin), twin_before, strict=True):
            np.testing.assert_array_equal(leaf, was)  # copies: nothing wrote into the blocks
        # Shared: only the cells no chunk holds (reset steps) changed, to 0 in float outputs.
        held = np.ones((30, 3), bool) if rollout.mask is None else rollout.mask.numpy()
        for leaf, was in zip(block_memory(chunks), before, strict=True):
            rows = leaf[-30:]  # the window's rows, [T, N, ...]
            np.testing.assert_array_equal(rows[held], was[-30:][held])
            changed = rows != was[-30:]
            assert (rows[changed] == 0).all() and not changed[held].any()
        if rollout.mask is not None:
            assert (storage.actions_log_prob[~rollout.mask] == 0).all()


def test_a_reused_storage_owns_its_tensors_before_gathering():
    """An aligned call shares the blocks; a later call that must gather writes into the
    storage's tensors, so they are copied first and the earlier chunks keep their data."""
    run = runner("NEXT_STEP", "transitions")
    first = run.sample(8)  # no CartPole episode ends in 8 steps: an aligned window
    assert first.gather_plan("observations") is None
    rollout = convert(first)
    assert "observations" in rollout.storage.shared
    kept = [chunk.get_observations().copy() for chunk in first]
    second = run.sample(8)
    while second.gather_plan("observations") is None:  # until the windows differ per env
        second = run.sample(8)
    again = convert(second, storage=rollout.storage)
    assert "observations" not in again.storage.shared
    for chunk, observations in zip(first, kept, strict=True):
        np.testing.assert_array_equal(chunk.get_observations(), observations)
    fresh = convert(second, copy=True)
    assert torch.equal(again.storage.observations, fresh.storage.observations)


def test_a_reused_storage_of_another_dtype_takes_a_converted_copy():
    """Windows that need a gather go straight into the storage's tensors only when the dtypes
    match; float64 observations into a float32 storage take the copying path, same values."""
    run32 = runner("NEXT_STEP", "transitions")
    env64 = gym.wrappers.vector.DtypeObservation(_cartpole(), np.float64)
    run64 = EnvRunner(env64, policy, seed=0)
    storage = convert(run32.sample(8)).storage
    assert storage.observations.dtype == torch.float32
    chunks = run64.sample(8)
    while chunks.gather_plan("observations") is None:  # until the windows differ per env
        chunks = run64.sample(8)
    again = convert(chunks, storage=storage)
    assert again.storage is storage and storage.observations.dtype == torch.float32
    fresh = convert(chunks)
    assert fresh.storage.observations.dtype == torch.float64
    assert torch.equal(storage.observations, fresh.storage.observations.float())
    for name, tensor in fresh.storage.tensors.items():
        if name != "observations":
            assert torch.equal(storage.tensors[name], tensor), name


def test_read_only_blocks_are_copied():
    """Memory that arrived read-only (shared memory, a map) is never taken, only a copy of it:
    torch could not keep a tensor over it read-only."""
    chunks = runner("SAME_STEP", "transitions").sample(10)
    for leaf in block_memory(chunks):
        leaf.setflags(write=False)
    storage = convert(chunks).storage
    assert not shares_blocks(storage.observations, chunks)


@pytest.mark.filterwarnings("error::UserWarning")
def test_read_only_blocks_gather_like_writable_ones_without_warning():
    """A window that has to be gathered (next-step transitions) reads read-only blocks as it
    reads writable ones, and torch's warning about non-writable arrays never reaches the user."""
    first, second = runner("NEXT_STEP", "transitions"), runner("NEXT_STEP", "transitions")
    for _ in range(3):  # a few calls: envs reset, windows stop being aligned
        writable, read_only = first.sample(12), second.sample(12)
    assert read_only.gather_plan("observations") is not None  # the gather path
    for leaf in block_memory(read_only):
        leaf.setflags(write=False)
    want, got = convert(writable).storage, convert(read_only).storage
    for name, tensor in want.tensors.items():
        assert torch.equal(got.tensors[name], tensor), name


def test_writing_into_a_chunk_leaves_a_sharing_storage_alone():
    """Chunks copy a column before they write it, so a storage that shares the blocks keeps
    the data it was filled with."""
    chunks = runner("NEXT_STEP", "vector_steps").sample(30)
    storage = convert(chunks).storage
    assert {"observations", "values"} <= storage.shared
    observations, values = storage.observations.clone(), storage.values.clone()
    for chunk in chunks:
        chunk.set_observations(new_data=np.full(4, 0.25, np.float32), at_indices=0)
        chunk.set_extra_model_outputs(key="vf_preds", new_data=np.float32(7.0), at_indices=0)
        assert chunk.get_observations(0)[0] == 0.25
    assert torch.equal(storage.observations, observations)
    assert torch.equal(storage.values, values)


def test_device_blocks_are_taken_too():
    """A torch-tensor env's blocks (here on the CPU, as a GPU simulator's would be on its
    device): an aligned window's fields are the blocks' own tensors in the storage."""
    from tests.runner._tensor_env import TensorPolicy, TensorVectorEnv

    def make() -> EnvRunner:
        env = runner("SAME_STEP", "transitions").env
        return EnvRunner(TensorVectorEnv(env), TensorPolicy(policy), seed=0)

    def tensor_value_fn(obs: torch.Tensor) -> torch.Tensor:
        return obs.sum(dim=-1)

    shared, copied = make(), make()
    for _ in range(2):
        chunks, twin = shared.sample(20), copied.sample(20)
        kwargs = dict(gamma=GAMMA, value_fn=tensor_value_fn, keys=KEYS)
        storage = episodes_to_rollout(chunks, **kwargs).storage
        reference = episodes_to_rollout(twin, copy=True, **kwargs).storage
        assert {"observations", "actions", "values", "actions_log_prob"} <= storage.shared
        obs_block = chunks.recording.device.obs.leaves[0]  # the blocks on the env's device
        start = storage.observations.data_ptr() - obs_block.data_ptr()
        assert 0 <= start < obs_block.numel() * obs_block.element_size()  # inside the block
        for name, tensor in reference.tensors.items():
            assert torch.equal(storage.tensors[name], tensor), name
