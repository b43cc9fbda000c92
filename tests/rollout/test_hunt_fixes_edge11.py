"""Rollout bugs a hunt (edge11) found, pinned: one table or focused test per bug.

- Integers beyond a narrower integer field's range were wrapped without a word: int64 300
  written into uint8 observations was stored as 44, -1 as 255 (``write_block``,
  ``add_transition``, the converter into a given storage, ``CircularBuffer.append``), where the
  replay buffer refuses the same data.
- Normalising the advantages of a single cell gave NaN without a ``valid`` mask (``n - 1 = 0``)
  and 0 with an all-True one: ``compute_returns`` of a 1 x 1 storage and per-mini-batch
  normalisation of one-sample mini-batches gave NaN advantages.
- ``compute_gae``'s log-step scan (few envs, many steps) summed windows of cancelling deltas
  that the recursion never forms: float16 deltas near 40000 gave ``inf`` advantages.
- A zero-size observation (a Box of shape ``(0,)``) crashed the converter's fast path and
  ``SampledChunks.take`` when the envs' windows differ: ``reshape(-1, 0)`` is undefined.
"""

from __future__ import annotations

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch

from episodes import SingleAgentEpisode
from episodes.converter import episodes_to_rollout
from episodes.rollout import CircularBuffer, RolloutStorage, compute_gae, normalize_into
from episodes.runner import EnvRunner
from episodes.runner.blocks import Column
from episodes.runner.device_blocks import TensorColumn


def snapshot(st: RolloutStorage) -> dict[str, torch.Tensor]:
    return {name: t.clone() for name, t in st.tensors.items()}


def assert_unchanged(st: RolloutStorage, before: dict[str, torch.Tensor], step: int) -> None:
    assert st.step == step
    for name, tensor in st.tensors.items():
        assert torch.equal(tensor, before[name]), name


# ------------------------------------------------------------------ integers that would wrap
def int_storage(device: torch.device) -> RolloutStorage:
    return RolloutStorage(
        "rl", 2, 3, (torch.Size([3]), torch.uint8), (1,), device, actions_dtype=torch.int8
    )


# (case, field, dtype of the written values, one step's values [N=2, ...], message part)
WRAPPING = [
    ("int64 above uint8", "observations", torch.int64, [[300, 1, 2], [4, 5, 6]], "[1, 300]"),
    ("int64 below uint8", "observations", torch.int64, [[-1, 1, 2], [4, 5, 6]], "[-1, 6]"),
    ("int8 negative into uint8", "observations", torch.int8, [[-1, 1, 2], [4, 5, 6]], "[-1, 6]"),
    ("int64 above int8", "actions", torch.int64, [[200], [0]], "[0, 200]"),
    ("int64 below int8", "actions", torch.int64, [[-129], [0]], "[-129, 0]"),
    ("uint8 above int8", "actions", torch.uint8, [[255], [0]], "[0, 255]"),
    ("int32 above uint8", "observations", torch.int32, [[256, 0, 0], [0, 0, 0]], "[0, 256]"),
]


@pytest.mark.parametrize("write", ["add_transition", "write_block"])
@pytest.mark.parametrize(
    ("field", "dtype", "values", "shown"), [c[1:] for c in WRAPPING], ids=[c[0] for c in WRAPPING]
)
def test_integers_a_narrower_field_would_wrap_are_refused(
    device, write, field, dtype, values, shown
):
    st = int_storage(device)
    st.add_transition(RolloutStorage.Transition(observations=torch.ones(2, 3, dtype=torch.uint8)))
    before = snapshot(st)
    step = torch.tensor(values, dtype=dtype, device=device)
    with pytest.raises(ValueError, match=rf"{field}: values in \{shown}"):
        if write == "add_transition":
            st.add_transition(RolloutStorage.Transition(**{field: step}))
        else:
            st.write_block(1, **{field: step.unsqueeze(0).expand(2, *step.shape)})
    assert_unchanged(st, before, step=1)


# (case, field, values of another int dtype that the field holds exactly)
FITTING = [
    ("int64 within uint8", "observations", torch.tensor([[0, 255, 7], [1, 2, 3]])),
    (
        "int8 non-negative into uint8",
        "observations",
        torch.tensor([[0, 127, 7]] * 2).to(torch.int8),
    ),
    ("int64 within int8", "actions", torch.tensor([[-128], [127]])),
    ("bool into int8", "actions", torch.tensor([[True], [False]])),
]


@pytest.mark.parametrize(("field", "values"), [c[1:] for c in FITTING], ids=[c[0] for c in FITTING])
def test_integers_within_a_narrower_fields_range_are_stored_exactly(device, field, values):
    st = int_storage(device)
    st.add_transition(RolloutStorage.Transition(**{field: values.to(device)}))
    assert getattr(st, field)[0].cpu().tolist() == values.to(torch.int64).tolist()


@pytest.mark.torch_2_3
@pytest.mark.parametrize("dtype", ["uint16", "uint32"])
def test_wide_unsigned_integers_are_range_checked_too(dtype):
    # torch has no min or max for these: a numpy uint16 depth image becomes one.
    st = int_storage(torch.device("cpu"))
    fits = torch.from_numpy(np.array([[1, 255, 3], [4, 5, 6]], dtype))
    st.add_transition(RolloutStorage.Transition(observations=fits))
    assert st.observations[0].tolist() == [[1, 255, 3], [4, 5, 6]]
    wraps = torch.from_numpy(np.array([[1, 256, 3], [4, 5, 6]], dtype))
    with pytest.raises(ValueError, match=r"values in \[1, 256\]"):
        st.add_transition(RolloutStorage.Transition(observations=wraps))
    assert st.step == 1


@pytest.mark.torch_2_3
def test_uint64_beyond_int64_is_refused_for_a_signed_field():
    # Read as int64, 2**63 is negative: within int8's range, were it not told apart.
    st = int_storage(torch.device("cpu"))
    actions = torch.from_numpy(np.array([[2**63], [0]], np.uint64))
    with pytest.raises(ValueError, match=r"values beyond 2\*\*63 - 1"):
        st.add_transition(RolloutStorage.Transition(actions=actions))
    assert st.step == 0


def test_same_and_wider_dtypes_are_not_read(monkeypatch):
    # The hot path stays free: only a narrowing int write looks at the values.
    st = RolloutStorage("rl", 2, 2, (torch.Size([3]), torch.int64), (1,), actions_dtype=torch.int64)

    def refuse(*args, **kwargs):
        raise AssertionError("the values of a non-narrowing write were read")

    monkeypatch.setattr(torch, "aminmax", refuse)
    obs = torch.tensor([[300, 1, 2], [4, 5, 6]])
    st.add_transition(RolloutStorage.Transition(observations=obs, actions=torch.ones(2, 1).long()))
    st.add_transition(
        RolloutStorage.Transition(
            observations=obs.to(torch.int32),  # widening
            actions=torch.ones(2, 1, dtype=torch.int8),
            rewards=torch.ones(2, dtype=torch.float64),
            dones=torch.tensor([1, 0]),
        )
    )
    assert st.observations[:, 0].tolist() == [[300, 1, 2], [300, 1, 2]]


def test_the_converter_refuses_values_a_given_storage_would_wrap():
    ep = SingleAgentEpisode(
        observations=[np.array([300, 1, 2], np.int64)] * 2,
        actions=[200],
        rewards=[0.0],
        len_lookback_buffer=0,
        extra_model_outputs={"vf_preds": [0.0], "action_logp": [0.0]},
    )
    given = RolloutStorage(
        "rl",
        1,
        1,
        (torch.Size([3]), torch.uint8),
        (1,),
        actions_dtype=torch.int8,
        distribution_params=(),
    )
    before = snapshot(given)
    with pytest.raises(ValueError, match=r"observations: values in \[1, 300\]"):
        episodes_to_rollout([ep], gamma=0.9, value_fn=lambda o: np.zeros(len(o)), storage=given)
    for name, tensor in given.tensors.items():
        assert torch.equal(tensor, before[name]), name


def test_circular_buffer_refuses_integers_its_dtype_would_wrap(device):
    buf = CircularBuffer(2, 2, device)
    buf.append(torch.tensor([1, 2], dtype=torch.uint8))
    for bad in (
        torch.tensor([300, 0]),
        torch.tensor([0, -1]),
        torch.tensor([-1, 0], dtype=torch.int8),
    ):
        with pytest.raises(ValueError, match=r"data: values in"):
            buf.append(bad.to(device))
    assert buf.current_length.tolist() == [1, 1] and buf[0].tolist() == [1, 2]
    buf.append(torch.tensor([255, 0]))  # within range: stored exactly
    assert buf[0].tolist() == [255, 0] and buf.buffer.dtype == torch.uint8


# ------------------------------------------------------------------ normalising one cell
SINGLE = [
    ("float32", torch.float32),
    ("float64", torch.float64),
    ("bfloat16", torch.bfloat16),
    ("float16", torch.float16),  # its 1e-8 is 0: 0 / 0 was NaN with a mask too
]


@pytest.mark.parametrize("dtype", [c[1] for c in SINGLE], ids=[c[0] for c in SINGLE])
@pytest.mark.parametrize("mask", ["no mask", "all-True mask"])
def test_a_single_cell_normalises_to_zero(device, dtype, mask):
    valid = None if mask == "no mask" else torch.ones(1, 1, dtype=torch.bool, device=device)
    adv = torch.tensor([[2.0]], dtype=dtype, device=device)
    got = normalize_into(torch.empty_like(adv), adv.clone(), valid)
    assert got.cpu().tolist() == [[0.0]]


@pytest.mark.parametrize("dtype", [c[1] for c in SINGLE], ids=[c[0] for c in SINGLE])
def test_constant_advantages_normalise_to_zero(dtype):
    adv = torch.full((3, 2), 5.0, dtype=dtype)
    for valid in (None, torch.ones(3, 2, dtype=torch.bool)):
        assert normalize_into(torch.empty_like(adv), adv.clone(), valid).eq(0).all()


@pytest.mark.parametrize("mask", ["no mask", "all-True mask"])
def test_compute_returns_of_one_cell_is_finite(device, mask):
    st = RolloutStorage("rl", 1, 1, (2,), (1,), device)
    st.rewards.fill_(1.0)
    st.valid = None if mask == "no mask" else torch.ones(1, 1, dtype=torch.bool, device=device)
    st.compute_returns(torch.zeros(1, device=device), 0.99, 0.95)
    assert st.advantages.cpu().flatten().tolist() == [0.0]


@pytest.mark.parametrize("mask", ["no mask", "all-True mask"])
def test_per_mini_batch_normalisation_of_one_sample_is_zero(device, mask):
    st = RolloutStorage("rl", 2, 2, (2,), (1,), device)
    st.rewards.copy_(torch.tensor([[1.0, 2.0], [3.0, 4.0]], device=device).unsqueeze(-1))
    st.compute_returns(torch.zeros(2, device=device), 0.99, 0.95, normalize_advantage=False)
    if mask == "all-True mask":
        st.valid = torch.ones(2, 2, dtype=torch.bool, device=device)
    batches = st.mini_batch_generator(4, 1, normalize_advantage_per_mini_batch=True)
    assert [b.advantages.cpu().flatten().tolist() for b in batches] == [[0.0]] * 4


def test_mini_batches_of_several_samples_normalise_as_before():
    st = RolloutStorage("rl", 2, 2, (2,), (1,))
    st.rewards.copy_(torch.tensor([[1.0, 2.0], [3.0, 4.0]]).unsqueeze(-1))
    st.compute_returns(torch.zeros(2), 0.99, 0.95, normalize_advantage=False)
    (batch,) = st.mini_batch_generator(1, 1, normalize_advantage_per_mini_batch=True)
    raw = st.advantages.flatten()
    want = (raw - raw.mean()) / (raw.std() + 1e-8)
    assert torch.equal(batch.advantages.flatten().sort().values, want.sort().values)


# ------------------------------------------------------------------ the log-step scan
def sequential_gae(r, v, d, last, gamma, lam):
    adv, out = torch.zeros_like(r[0]), torch.zeros_like(r)
    for t in reversed(range(r.shape[0])):
        nv = last if t == r.shape[0] - 1 else v[t + 1]
        nt = 1.0 - d[t].to(r.dtype)
        adv = r[t] + nt * gamma * nv - v[t] + nt * gamma * lam * adv
        out[t] = adv
    return out


# (case, dtype, size of the cancelling rewards)
OVERFLOW = [
    ("float16 near its max", torch.float16, 40000.0),
    ("float16 at its max", torch.float16, 65504.0),
]


@pytest.mark.parametrize(("dtype", "big"), [c[1:] for c in OVERFLOW], ids=[c[0] for c in OVERFLOW])
def test_log_scan_stays_finite_where_the_recursion_does(device, dtype, big):
    # T=4, N=1: the log-step scan's shape (few envs over many steps).
    r = torch.tensor([-big, big, big, -big], dtype=dtype, device=device).view(4, 1)
    z, d = torch.zeros_like(r), torch.zeros(4, 1, dtype=torch.bool, device=device)
    last = torch.zeros(1, dtype=dtype, device=device)
    got = compute_gae(r, z, d, last, 1.0, 1.0)
    want = sequential_gae(r, z, d, last, 1.0, 1.0)
    assert got.dtype == dtype and torch.isfinite(got).all()
    assert got.cpu().tolist() == want.cpu().tolist()
    longer = torch.cat([r] * 8)  # T=32: windows of up to 16 deltas
    got = compute_gae(longer, torch.zeros_like(longer), d.repeat(8, 1), last, 1.0, 1.0)
    assert torch.isfinite(got).all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_half_precision_log_scan_matches_the_recursion_to_rounding(dtype):
    g = torch.Generator().manual_seed(0)
    r, v = torch.randn(64, 2, generator=g), torch.randn(64, 2, generator=g)
    d = torch.rand(64, 2, generator=g) < 0.1
    last = torch.randn(2, generator=g)
    got = compute_gae(r.to(dtype), v.to(dtype), d, last.to(dtype), 0.99, 0.95)
    want = sequential_gae(
        r.to(dtype).float(), v.to(dtype).float(), d, last.to(dtype).float(), 0.99, 0.95
    )
    assert got.dtype == dtype
    assert torch.allclose(got.float(), want, atol=0.05, rtol=0.02)


# ------------------------------------------------------------------ zero-size observations
class EmptyObs(gym.Env):
    observation_space = gym.spaces.Box(0, 1, (0,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return np.zeros(0, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(0, np.float32), 1.0, self.t % 3 == 0, False, {}


def empty_obs_chunks():
    env = gym.vector.SyncVectorEnv(
        [EmptyObs] * 2, autoreset_mode=gym.vector.AutoresetMode.NEXT_STEP
    )

    def policy(obs):
        n = len(obs)
        return np.zeros(n, np.int64), {"vf_preds": np.zeros(n), "action_logp": np.zeros(n)}

    return EnvRunner(env, policy, seed=0).sample(4)  # env 0 spends a step on its reset


def zeros(obs):
    return np.zeros(len(obs))


@pytest.mark.parametrize("obs_fn", [None, lambda o: o], ids=["fast path", "fast path, obs_fn"])
def test_zero_size_observations_convert_on_the_fast_path(obs_fn):
    chunks = empty_obs_chunks()
    general = episodes_to_rollout([copy.deepcopy(c) for c in chunks], gamma=0.9, value_fn=zeros)
    fast = episodes_to_rollout(chunks, gamma=0.9, value_fn=zeros, obs_fn=obs_fn)
    assert tuple(fast.storage.observations.shape) == (4, 2, 0)
    for name in ("rewards", "dones", "values", "actions"):
        assert torch.equal(fast.storage.tensors[name], general.storage.tensors[name]), name


def test_zero_size_observations_are_taken_from_sampled_chunks():
    assert empty_obs_chunks().take("observations").shape == (4, 2, 0)


@pytest.mark.parametrize("kind", ["numpy", "torch"])
def test_columns_gather_zero_size_items(kind):
    leaf = np.zeros((3, 2, 0), np.float32)
    col = Column([leaf], None) if kind == "numpy" else TensorColumn([torch.from_numpy(leaf)], None)
    assert tuple(col.gather(np.array([[5, 0], [3, 1]])).shape) == (2, 2, 0)
