"""Envs that yield torch tensors: device blocks record what numpy blocks record, sync-free.

A runner on ``TensorVectorEnv`` (a numpy env seen through torch, on the CPU here; the same code
runs on a GPU) and a runner on the numpy env itself, same seeds and policy, must return the same
episodes and fill a bit-identical rollout storage, in next-step and same-step modes, for every
space kind, lookback and recurrent or not. Stepping must never wait for the device.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from episodes.converter import episodes_to_rollout
from episodes.envs.torch_cartpole import TorchCartPole
from episodes.runner import EnvRunner, SampledChunks
from tests.runner._random_env import EnvSpec, Policy, make_vec, obs_fn_for, value_fn
from tests.runner._tensor_env import TensorPolicy, TensorVectorEnv, to_arrays
from tests.runner.test_batched_equals_per_step import (
    CASE_FIELDS,
    KEYS,
    assert_same_chunks,
    assert_same_storage,
)

cases = st.fixed_dictionaries(
    {key: value for key, value in CASE_FIELDS.items() if key != "numpy_episodes"}
    | {"mode": st.sampled_from(["NextStep", "SameStep"])}
)


CUDA = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
DEVICES = ["cpu", pytest.param("cuda", marks=CUDA)]


def tensor_value_fn(device="cpu"):
    return lambda obs: torch.from_numpy(value_fn(to_arrays(obs))).to(device)


def tensor_obs_fn(kind, device="cpu"):
    obs_fn = obs_fn_for(kind)
    if obs_fn is None:
        return None
    return lambda obs: torch.from_numpy(obs_fn(to_arrays(obs))).to(device)


def make_runners(case, device="cpu"):
    spec = EnvSpec(
        case["obs"], case["action"], case["p_terminate"], case["p_truncate"], case["p_info"]
    )
    made = []
    for on_device in (False, True):
        env = make_vec(spec, case["num_envs"], case["mode"])
        policy = Policy(env.single_action_space, case["recurrent"])
        made.append(
            EnvRunner(
                TensorVectorEnv(env, device) if on_device else env,
                TensorPolicy(policy, device) if on_device else policy,
                len_lookback_buffer=case["lookback"],
                seed=case["seed"],
            )
        )
    return made


@pytest.mark.parametrize("where", DEVICES)
@settings(deadline=None)
@given(case=cases)
def test_device_blocks_record_what_numpy_blocks_record(where, case):
    host, device = make_runners(case, where)
    ids: dict[str, str] = {}
    for size in case["sizes"]:
        expected = host.sample(size)
        got = device.sample(size)
        assert isinstance(got, SampledChunks) and got.recording.device is not None
        kwargs = dict(gamma=0.9, keys=KEYS)
        want = episodes_to_rollout(
            expected, value_fn=value_fn, obs_fn=obs_fn_for(case["obs"]), **kwargs
        )
        fast = episodes_to_rollout(
            got,
            value_fn=tensor_value_fn(where),
            obs_fn=tensor_obs_fn(case["obs"], where),
            device="cpu",
            **kwargs,
        )
        assert got.built() == []  # straight from the device blocks
        assert got.recording.device.device.type == where
        assert_same_storage(fast, want)
        assert_same_chunks(expected, got, ids)
    timing = {"sample_time_s": 0, "env_steps_per_s": 0}
    want_metrics, got_metrics = host.get_metrics() | timing, device.get_metrics() | timing
    assert want_metrics.keys() == got_metrics.keys()
    for key, value in want_metrics.items():
        np.testing.assert_equal(got_metrics[key], value, err_msg=key)


def test_a_written_chunk_sends_the_converter_down_the_general_path():
    env = TorchCartPole(3, max_episode_steps=6)
    runner = EnvRunner(
        env, lambda obs: ((obs[:, 2] > 0).long(), {"vf_preds": obs[:, 0], "action_logp": obs[:, 1]})
    )
    chunks = runner.sample(10)
    chunks[0].set_rewards(new_data=100.0, at_indices=0)
    assert not chunks.unchanged()
    rollout = episodes_to_rollout(chunks, gamma=0.9, value_fn=lambda obs: obs[:, 0])
    assert rollout.storage.rewards[0, 0, 0] == 100.0
    again = episodes_to_rollout(list(chunks), gamma=0.9, value_fn=lambda obs: obs[:, 0])
    assert_same_storage(rollout, again)


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_chunks_of_a_tensor_env_pickle_and_deep_copy(mode):
    import copy
    import pickle

    env = TorchCartPole(
        3, autoreset_mode=getattr(gym.vector.AutoresetMode, _MODES[mode]), max_episode_steps=4
    )
    runner = EnvRunner(env, lambda obs: ((obs[:, 2] > 0).long(), {"vf_preds": obs[:, 0]}))
    chunks = runner.sample(6)
    for twin in (pickle.loads(pickle.dumps(chunks)), copy.deepcopy(chunks)):
        assert len(twin) == len(chunks)
        for a, b in zip(chunks, twin):
            np.testing.assert_array_equal(a.get_observations(), b.get_observations())
            np.testing.assert_array_equal(
                a.get_extra_model_outputs("vf_preds"), b.get_extra_model_outputs("vf_preds")
            )
            assert (a.id_, a.t_started, a.is_terminated, a.is_truncated) == (
                b.id_,
                b.t_started,
                b.is_terminated,
                b.is_truncated,
            )


_MODES = {"NextStep": "NEXT_STEP", "SameStep": "SAME_STEP"}


class SyncCounter(TorchFunctionMode):
    """Counts the tensor calls that make the host wait for the device."""

    WAITS = {
        "item",
        "tolist",
        "numpy",
        "cpu",
        "__bool__",
        "__int__",
        "__float__",
        "nonzero",
        "any",
        "all",
        "__array__",
    }

    def __init__(self):
        super().__init__()
        self.calls: list[str] = []
        self._ops = _WaitingOps(self.calls)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        name = getattr(func, "__name__", "")
        if name in self.WAITS:
            self.calls.append(name)
        return func(*args, **(kwargs or {}))

    def __enter__(self):
        self._ops.__enter__()
        return super().__enter__()

    def __exit__(self, *exc):
        super().__exit__(*exc)
        return self._ops.__exit__(*exc)


class _WaitingOps(TorchDispatchMode):
    """The aten ops a wait comes down to, whatever Python spelled it (``int(t)``, ``f"{t}"``,
    a boolean-mask index): a scalar read, or an output whose size depends on the data."""

    WAITS = {"_local_scalar_dense", "nonzero", "masked_select", "_unique2", "unique_consecutive"}

    def __init__(self, calls: list[str]):
        super().__init__()
        self.calls = calls

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name in self.WAITS:
            self.calls.append(f"aten::{name}")
        elif name in ("index", "index_put", "index_put_") and any(
            isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in (args[1] or ())
        ):  # a boolean mask is turned into indices inside the op
            self.calls.append(f"aten::{name}[mask]")
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
@pytest.mark.parametrize("recurrent", [False, True])
def test_stepping_never_waits_for_the_device(mode, recurrent):
    env = TorchCartPole(64, autoreset_mode=mode, max_episode_steps=7)

    class Recurrent:
        def initial_state(self, n):
            return torch.zeros(n, 3)

        def __call__(self, obs, state):
            return (obs[:, 2] > 0).long(), {"vf_preds": obs[:, 0]}, state + 1

    policy = Recurrent() if recurrent else (lambda obs: ((obs[:, 2] > 0).long(), {}))
    runner = EnvRunner(env, policy, seed=0)
    runner.sample(5)  # first call: allocation and reset infos
    recorder = runner._recorder  # noqa: SLF001 - the test watches the recorder's steps
    recorder.begin(16, runner._obs)  # noqa: SLF001
    counter = SyncCounter()
    with counter:
        for _ in range(16 - recorder._least):  # noqa: SLF001 - the steps no sub-env can skip
            assert not recorder.full()
            runner._step()  # noqa: SLF001
    assert counter.calls == []
    while not recorder.full():
        runner._step()  # noqa: SLF001
    assert sum(recorder.finish().chunk_lengths()) == 64 * 16


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
@CUDA
def test_stepping_on_a_gpu_never_synchronizes(mode):
    env = TorchCartPole(4096, device="cuda", autoreset_mode=mode, max_episode_steps=7)
    runner = EnvRunner(env, lambda obs: ((obs[:, 2] > 0).long(), {"vf_preds": obs[:, 0]}))
    runner.sample(5)
    recorder = runner._recorder  # noqa: SLF001 - the test watches the recorder's steps
    recorder.begin(16, runner._obs)  # noqa: SLF001
    torch.cuda.set_sync_debug_mode("error")  # any host sync raises
    try:
        for _ in range(16 - recorder._least):  # noqa: SLF001
            assert not recorder.full()
            runner._step()  # noqa: SLF001
    finally:
        torch.cuda.set_sync_debug_mode(0)
    while not recorder.full():
        runner._step()  # noqa: SLF001
    recording = recorder.finish()
    assert sum(recording.chunk_lengths()) == 4096 * 16
    assert recording.device.device.type == "cuda"


def test_disabled_mode_is_refused_for_tensor_envs():
    env = TensorVectorEnv(
        gym.make_vec(
            "CartPole-v1",
            2,
            vectorization_mode="sync",
            vector_kwargs={"autoreset_mode": "Disabled"},
        )
    )
    runner = EnvRunner(env, lambda obs: (torch.zeros(2, dtype=torch.long), {}))
    for _ in range(2):  # the second call recorded the tensors with the numpy recorder
        with pytest.raises(ValueError, match="disabled"):
            runner.sample(3)


def test_outputs_without_a_numpy_dtype_are_refused_clearly():
    # bfloat16 (a policy under autocast) failed with a TypeError from .numpy() at the end of
    # the call, leaving the runner unusable.
    def policy(obs):
        return (obs[:, 2] > 0).long(), {"logits": obs[:, :2].to(torch.bfloat16)}

    runner = EnvRunner(TorchCartPole(3, max_episode_steps=6), policy)
    with pytest.raises(ValueError, match="bfloat16 values, which have no numpy dtype"):
        runner.sample(4)


def test_recurrent_state_restarts_with_each_episode():
    env = TorchCartPole(4, autoreset_mode="SameStep", max_episode_steps=3)
    seen = []

    class Counter:
        def initial_state(self, n):
            return torch.zeros(n)

        def __call__(self, obs, state):
            seen.append(state.clone())
            return torch.zeros(len(obs), dtype=torch.long), {}, state + 1

    EnvRunner(env, Counter(), seed=0).sample(7)
    # Episodes of 3 steps: the state counts 0, 1, 2 and restarts with every episode.
    assert torch.stack(seen)[:, 0].tolist() == [0, 1, 2, 0, 1, 2, 0]
    np.testing.assert_array_equal(
        torch.stack(seen).numpy(), torch.stack(seen)[:, :1].expand(7, 4).numpy()
    )


@CUDA
def test_a_group_sample_of_gpu_runners_converts_on_their_device():
    # device=None looked at a runner's own sample only: a group of them went to the CPU.
    pytest.importorskip("ray")
    from episodes.distributed import GroupSample, RunnerSample

    def policy(obs):
        return (obs[:, 2] > 0).long(), {"vf_preds": obs[:, 0], "action_logp": obs[:, 1]}

    runners = [
        EnvRunner(TorchCartPole(3, device="cuda", max_episode_steps=6), policy) for _ in range(2)
    ]
    group = GroupSample(
        [RunnerSample(r, 0, 0, 0, 3, runner.sample(5)) for r, runner in enumerate(runners)]
    )
    rollout = episodes_to_rollout(group, gamma=0.9, value_fn=lambda obs: obs[:, 0])
    assert rollout.storage.rewards.device.type == "cuda"


def test_a_policy_outside_no_grad_leaves_no_graph_in_the_blocks():
    # Extras with autograd history were copied with tracking: the blocks joined the policy's
    # graph, and the rows carried into the next call chained every call's graph to it.
    torch.manual_seed(0)
    net = torch.nn.Linear(4, 2)

    def policy(obs):
        logits = net(obs)
        return logits.argmax(1), {"vf_preds": logits[:, 0], "logits": logits}

    runner = EnvRunner(TorchCartPole(4), policy, seed=0)
    for _ in range(3):
        chunks = runner.sample(8)
        device = chunks.recording.device
        blocks = [device.obs.leaves[0], device.rewards, *device.actions.leaves]
        blocks += [leaf for column in device.extras.values() for leaf in column.leaves]
        assert not any(block.requires_grad for block in blocks)
    assert all(isinstance(c.get_extra_model_outputs("vf_preds"), np.ndarray) for c in chunks)


class _LoggingCartPole(TorchCartPole):
    """Reports a few tensors in its infos at every step, as Isaac-Lab-style envs log."""

    def step(self, actions):
        obs, rewards, terminated, truncated, infos = super().step(actions)
        log = {"x": rewards * 2, "y": obs[:, 0]}
        return (
            obs,
            rewards,
            terminated,
            truncated,
            dict(infos, time_outs=truncated.clone(), log=log),
        )


def test_a_calls_infos_reach_the_host_in_a_few_copies_whatever_its_length():
    """Every info tensor of every row was copied on its own: 101 waits at T=32, 389 at 128."""
    waits = []
    for num_steps in (8, 64):
        runner = EnvRunner(
            _LoggingCartPole(16, autoreset_mode="SameStep", max_episode_steps=5),
            lambda obs: ((obs[:, 2] > 0).long(), {}),
            seed=0,
        )
        runner.sample(num_steps)
        counter = SyncCounter()
        with counter:
            chunks = runner.sample(num_steps)
        waits.append(counter.calls.count("cpu"))
        checked = 0
        for chunk in chunks:  # each row's infos went back to their own step
            rewards, infos = chunk.get_rewards(), chunk.get_infos()
            for t, info in enumerate(infos[1:]):  # an ending's info is the env's final_info
                if "log" in info:
                    assert info["log"]["x"] == np.float32(2 * rewards[t])
                    checked += 1
        assert checked > len(chunks)
    assert waits[0] == waits[1] <= 8


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_a_pickled_device_sample_carries_only_its_rows_and_converts_the_same(mode):
    """It pickled the runner's whole blocks (3 MB for 4 steps after five long calls)."""
    import pickle

    runner = EnvRunner(
        TorchCartPole(64, autoreset_mode=mode, max_episode_steps=9),
        lambda obs: ((obs[:, 2] > 0).long(), {"vf_preds": obs[:, 0], "action_logp": obs[:, 1]}),
        seed=0,
    )
    for _ in range(5):
        runner.sample(200)
    chunks = runner.sample(4)
    chunks[0].get_infos(0)["note"] = "kept"  # an edit the blocks do not hold travels too
    data = pickle.dumps(chunks)
    back = pickle.loads(data)
    assert len(data) < 200_000
    assert back == chunks and back[0].get_infos(0) == {"note": "kept"}

    def convert(sample):
        return episodes_to_rollout(sample, gamma=0.9, value_fn=lambda obs: obs[:, 0], device="cpu")

    want, got = convert(chunks), convert(back)
    for name, tensor in want.storage.tensors.items():
        assert torch.equal(tensor, got.storage.tensors[name]), name
    assert torch.equal(want.last_values, got.last_values)


def test_a_copy_in_this_process_keeps_the_device():
    """Only a pickle, which may cross to a process without the device, travels as a host sample."""
    import copy

    runner = EnvRunner(TorchCartPole(8), lambda obs: ((obs[:, 2] > 0).long(), {}), seed=0)
    chunks = runner.sample(4)
    for copied in (copy.copy(chunks), copy.deepcopy(chunks)):
        assert copied.recording.device is not None and copied == chunks
