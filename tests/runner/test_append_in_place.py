"""Calls append to the blocks while there is room: no per-call copy, nothing shared is written.

Next-step envs that reset less often than others keep recording while the unluckiest catch up;
those leftover rows grow like the square root of the number of calls. Copying them every call
made each call cost more than the last; now they are copied only when the blocks run out of
room, into blocks sized for them twice over.
"""

from __future__ import annotations

import copy
import pickle

import pytest
import torch

from episodes.converter import episodes_to_rollout
from episodes.runner import EnvRunner
from tests.runner._random_env import EnvSpec, Policy, make_vec, value_fn
from tests.runner.test_batched_equals_per_step import KEYS


def make_runner(mode: str, num_envs: int = 16, lookback: int = 2) -> EnvRunner:
    env = make_vec(EnvSpec("box", "discrete", 0.05, 0.05, 0.3), num_envs, mode)
    return EnvRunner(
        env, Policy(env.single_action_space, False), len_lookback_buffer=lookback, seed=1
    )


@pytest.mark.parametrize("mode", ["NextStep", "SameStep", "Disabled"])
def test_blocks_are_copied_in_few_calls(mode):
    runner = make_runner(mode)
    bases = []
    for _ in range(60):
        chunks = runner.sample(8)
        bases.append(chunks.recording.blocks.rewards.base)
    copies = sum(a is not b for a, b in zip(bases, bases[1:]))
    assert copies <= 20, copies  # was one copy per call


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_later_calls_never_change_earlier_chunks(mode):
    runner = make_runner(mode, num_envs=5)
    kept = []
    for size in [3, 9, 1, 6, 6, 6, 2, 7]:
        chunks = runner.sample(size)
        kept.append((chunks, [copy.deepcopy(c) for c in chunks]))
        # Writes into the newest chunks (their lookback included) stay in those chunks.
        for chunk in chunks:
            if chunk.rewards.lookback:
                chunk.rewards.set(1e6, at_indices=-1, neg_index_as_lookback=True)
        kept[-1][1][:] = [copy.deepcopy(c) for c in chunks]
    for chunks, snapshot in kept:
        assert list(chunks) == snapshot


@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_a_pickled_sample_carries_only_its_own_rows(mode):
    runner = make_runner(mode, num_envs=8)
    for _ in range(3):
        runner.sample(6)
    chunks = runner.sample(6)
    data = pickle.dumps(chunks, protocol=5)
    back = pickle.loads(data)
    assert back.recording.blocks.step_rows < chunks.recording.blocks.step_rows
    kwargs = dict(gamma=0.9, value_fn=value_fn, keys=KEYS)
    want = episodes_to_rollout(chunks, **kwargs)
    got = episodes_to_rollout(back, **kwargs)
    assert back.built() == []
    for name, tensor in want.storage.tensors.items():
        assert torch.equal(got.storage.tensors[name], tensor), name
    assert list(back) == list(chunks)
    sent = len(pickle.dumps(back.recording.blocks, protocol=5))
    assert sent < len(pickle.dumps(chunks.recording.blocks, protocol=5))
