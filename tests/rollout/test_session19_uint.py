"""uint16 / uint32 / uint64 data through the row ops torch lacks kernels for on the CPU.

torch has no ``index_select``, ``index_copy_`` or ``masked_fill`` for these dtypes on the CPU;
``select_rows``, ``pad_with_layout`` / ``split_and_pad_trajectories``, the recurrent generator
and ``CircularBuffer`` reads move their bits as the signed int of the same width. Each case
checks the exact bits against an oracle built from ops every dtype has (advanced indexing).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from episodes.rollout import (
    CircularBuffer,
    RolloutStorage,
    pad_with_layout,
    select_rows,
    split_and_pad_trajectories,
    trajectory_layout,
    unpad_trajectories,
)
from episodes.rollout import select as select_module

pytestmark = pytest.mark.torch_2_3  # torch.uint16-64

# torch.uint16-64 are torch 2.3's; on torch 2.2 (allowed) the others are tested.
NAMES = ["uint8", "uint16", "uint32", "uint64", "int8", "bool", "float16", "bfloat16", "float32"]
DTYPES = [getattr(torch, name) for name in NAMES if hasattr(torch, name)]
IDS = [str(d).removeprefix("torch.") for d in DTYPES]


def _bits(dtype: torch.dtype, shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """Arbitrary bits of ``dtype`` (the all-ones pattern first: uint max, a NaN)."""
    gen = torch.Generator().manual_seed(seed)
    size = torch.empty(0, dtype=dtype).element_size()
    raw = torch.randint(0, 256, (*shape, size), dtype=torch.uint8, generator=gen)
    raw.view(-1, size)[0] = 255
    if dtype is torch.bool:
        return raw[..., 0] % 2 == 1
    return raw.view(dtype).reshape(shape)


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.dtype != b.dtype or a.shape != b.shape:
        return False
    return torch.equal(a.contiguous().view(torch.uint8), b.contiguous().view(torch.uint8))


# ----------------------------------------------------------------------------- select_rows
@pytest.mark.parametrize("min_rows", [0, 8192], ids=["wide path", "index_select path"])
@pytest.mark.parametrize("row", [(), (1,), (3,), (2, 2)], ids=["1-D", "[M,1]", "[M,3]", "[M,2,2]"])
@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_select_rows_every_dtype(monkeypatch, dtype, row, min_rows):
    monkeypatch.setattr(select_module, "_MIN_ROWS", min_rows)
    source = _bits(dtype, (20, *row), seed=len(row))
    index = torch.tensor([19, 0, 7, 7, 3])
    want = source[index]  # advanced indexing: every dtype has it
    got = select_rows(source, index)
    assert _same_bits(got, want)
    out = torch.zeros(5, *row, dtype=dtype)
    assert select_rows(source, index, out=out) is out
    assert _same_bits(out, want)


def test_select_rows_many_uint16_rows_into_out():
    source = _bits(torch.uint16, (100,), seed=1)
    index = torch.arange(9000) % 100  # past _MIN_ROWS
    out = torch.empty(9000, dtype=torch.uint16)
    select_rows(source, index, out=out)
    assert _same_bits(out, source[index])


def test_select_rows_out_of_another_dtype_still_refused():
    source = _bits(torch.uint16, (4,), seed=0)
    with pytest.raises(RuntimeError):
        select_rows(source, torch.tensor([0]), out=torch.empty(1, dtype=torch.int32))


# ------------------------------------------------------------------- padded trajectories
def _dones(t: int, n: int) -> torch.Tensor:
    dones = torch.zeros(t, n, dtype=torch.bool)
    dones[1, 0] = dones[2, 1] = dones[0, 2] = True
    return dones


def _padded_oracle(x: torch.Tensor, layout) -> torch.Tensor:
    """Padding built from the layout's int64 positions and advanced indexing."""
    t, n = x.shape[:2]
    pos = torch.zeros(t * layout.num_traj, dtype=torch.long)
    pos.index_copy_(0, layout.dest, torch.arange(1, t * n + 1))  # 0: padding
    flat = torch.cat([torch.zeros(1, *x.shape[2:], dtype=x.dtype), x.reshape(t * n, *x.shape[2:])])
    return flat[pos].view(t, layout.num_traj, *x.shape[2:])


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_pad_with_layout_every_dtype(dtype):
    t, n = 4, 3
    x = _bits(dtype, (t, n, 2), seed=3)
    layout = trajectory_layout(_dones(t, n))
    got = pad_with_layout(x, layout)
    assert _same_bits(got, _padded_oracle(x, layout))
    nested = pad_with_layout({"a": {"b": x}}, layout)
    assert _same_bits(nested["a"]["b"], got)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_split_and_pad_trajectories_every_dtype(dtype):
    t, n = 4, 3
    x = _bits(dtype, (t, n), seed=4)
    padded, masks = split_and_pad_trajectories(x, _dones(t, n))
    assert _same_bits(padded, _padded_oracle(x, trajectory_layout(_dones(t, n))))
    assert _same_bits(unpad_trajectories(padded, masks), x)


@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_recurrent_generator_every_observation_dtype(dtype):
    t, n = 5, 4
    st = RolloutStorage("rl", n, t, observations={"img": ((2,), dtype)}, actions_shape=(1,))
    obs = _bits(dtype, (t, n, 2), seed=5)
    dones = torch.zeros(t, n)
    dones[1, 0] = dones[3, 2] = 1.0
    st.write_block(0, observations={"img": obs}, dones=dones, rewards=torch.ones(t, n))
    st.compute_returns(torch.zeros(n, 1), gamma=0.9, lam=0.9)
    batches = list(st.recurrent_mini_batch_generator(2, num_epochs=1))
    assert len(batches) == 2
    for i, batch in enumerate(batches):
        envs = obs[:, 2 * i : 2 * i + 2]
        padded = batch.observations["img"]
        assert padded.dtype == dtype
        assert _same_bits(unpad_trajectories(padded, batch.masks), envs)
        assert not padded[~batch.masks].view(torch.uint8).any()  # padding is zero bits
        want = _padded_oracle(envs, trajectory_layout(dones[:, 2 * i : 2 * i + 2]))
        assert _same_bits(padded, want)


# ------------------------------------------------------------------------- CircularBuffer
@pytest.mark.parametrize("dtype", DTYPES, ids=IDS)
def test_circular_buffer_reads_every_dtype(dtype):
    items = [_bits(dtype, (2, 3), seed=10 + i) for i in range(5)]
    zero = torch.zeros(3, dtype=dtype)
    buf = CircularBuffer(3, 2)
    for item in items[:4]:
        buf.append(item)
    buf.reset([0])  # env 0: nothing since the reset, reads zeros; env 1 holds items 1..3
    for lag in range(3):
        got = buf[lag]
        assert got.dtype == dtype
        assert _same_bits(got[0], zero) and _same_bits(got[1], items[3 - lag][1])
    assert _same_bits(buf.buffer[0], torch.stack([zero] * 3))
    assert _same_bits(buf.buffer[1], torch.stack([items[k][1] for k in (1, 2, 3)]))
    buf.append(items[4])  # env 0: one item, repeated for older lags
    got = buf[torch.tensor([2, 1])]
    assert _same_bits(got[0], items[4][0]) and _same_bits(got[1], items[3][1])
    assert _same_bits(buf.buffer[0], torch.stack([items[4][0]] * 3))
    window = next(buf.mini_batch_generator(2, batch_size=4, num_batches=1))
    assert window.data.dtype == dtype and window.data.shape == (2, 4, 3)


# ------------------------------------------------------------------- runner -> converter
def test_runner_chunks_with_uint16_observations_and_uint32_actions():
    gym = pytest.importorskip("gymnasium")
    from episodes.converter import episodes_to_rollout
    from episodes.runner import EnvRunner

    class Counter(gym.Env):
        observation_space = gym.spaces.Box(0, 65535, (), np.uint16)
        action_space = gym.spaces.Box(0, 2**32 - 1, (), np.uint32)

        def __init__(self, length):
            self.length = length

        def reset(self, *, seed=None, options=None):
            self.t = 0
            return np.array(65530, np.uint16), {}

        def step(self, action):
            self.t += 1
            return np.array(65530 + self.t, np.uint16), 1.0, self.t >= self.length, False, {}

    def policy(obs):
        n = len(obs)
        extras = {"vf_preds": np.zeros(n, np.float32), "action_logp": np.zeros(n, np.float32)}
        return np.full(n, 2**32 - 1, np.uint32), extras

    env = gym.vector.SyncVectorEnv([lambda: Counter(3), lambda: Counter(5)])
    chunks = EnvRunner(env, policy, seed=0).sample(8)

    def value_fn(obs):
        return np.zeros(len(obs))

    fast = episodes_to_rollout(chunks, gamma=0.99, value_fn=value_fn)
    slow = episodes_to_rollout(list(chunks), gamma=0.99, value_fn=value_fn)
    assert fast.storage.observations.dtype == torch.uint16
    assert fast.storage.actions.dtype == torch.uint32
    assert int(fast.storage.observations.to(torch.int64).max()) == 65534  # above 2**15
    assert fast.storage.tensors.keys() == slow.storage.tensors.keys()
    for name, tensor in fast.storage.tensors.items():
        assert _same_bits(tensor, slow.storage.tensors[name]), name
    assert _same_bits(fast.last_values, slow.last_values)
